// Fuzz target: Operations::Hash (server/src/ops/hash.cpp, wire/hash_wire.cpp) on
// the CPU backend with --max-message-bytes=8 KiB.
//
// Input: the bytes of one HashRequest message. Checked:
//  - the request is accepted exactly when the documented rules allow it (columns,
//    bits, each node's type, length, offset, data, offsets, validity, children,
//    byte_width and index_type, dictionary indices, the depth and node limits,
//    the engine's bound on children's rows, the response size; docs/api.md
//    "Nested and dictionary columns"), INVALID_ARGUMENT otherwise;
//  - an OK response has one 32- or 64-bit hash per row and a validity bitmap of
//    ceil(rows / 8) bytes (its unused high bits 0), null_count its zero bits, 0 as
//    the hash of every null row; a row is null wherever a top-level column's own
//    validity is 0 (or it is a NULL column), and for flat columns exactly then;
//  - hashing is row-wise: the same rows sliced out of the buffers (offset 0, data,
//    offsets and validity cut to the rows; the first seven types) hash to the same
//    values, and dropping the first row (every top-level offset + 1) drops its hash.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "fuzz_support.hpp"

namespace gpujoin::fuzz {
namespace {

uint64_t Width(v1::ColumnType type) {
  switch (type) {
    case v1::COLUMN_TYPE_INT8:
    case v1::COLUMN_TYPE_UINT8:
      return 1;
    case v1::COLUMN_TYPE_INT16:
    case v1::COLUMN_TYPE_UINT16:
    case v1::COLUMN_TYPE_FLOAT16:
      return 2;
    case v1::COLUMN_TYPE_UINT32:
    case v1::COLUMN_TYPE_INT32:
    case v1::COLUMN_TYPE_FLOAT32:
      return 4;
    case v1::COLUMN_TYPE_UINT64:
    case v1::COLUMN_TYPE_INT64:
    case v1::COLUMN_TYPE_FLOAT64:
      return 8;
    case v1::COLUMN_TYPE_DECIMAL128:
      return 16;
    default:
      return 0;
  }
}

int32_t Offset(const std::string& offsets, uint64_t i) {
  int32_t v = 0;
  std::memcpy(&v, offsets.data() + i * 4, 4);
  return v;
}

int64_t Offset64(const std::string& offsets, uint64_t i) {
  int64_t v = 0;
  std::memcpy(&v, offsets.data() + i * 8, 8);
  return v;
}

bool Bit(const std::string& bitmap, uint64_t i) {
  return (static_cast<uint8_t>(bitmap[i / 8]) >> (i % 8)) & 1u;
}

bool IsBinary(int t) { return t == v1::COLUMN_TYPE_BINARY || t == v1::COLUMN_TYPE_STRING; }
bool IsLargeBinary(int t) {
  return t == v1::COLUMN_TYPE_LARGE_BINARY || t == v1::COLUMN_TYPE_LARGE_STRING;
}
bool IsNested(int t) {
  return t == v1::COLUMN_TYPE_STRUCT || t == v1::COLUMN_TYPE_LIST ||
         t == v1::COLUMN_TYPE_LARGE_LIST || t == v1::COLUMN_TYPE_FIXED_SIZE_LIST ||
         t == v1::COLUMN_TYPE_MAP;
}
// Every type but the nested ones and DICTIONARY (a dictionary's values must be one).
bool IsFlat(int t) {
  return t >= v1::COLUMN_TYPE_UINT32 && t <= v1::COLUMN_TYPE_NULL && !IsNested(t) &&
         t != v1::COLUMN_TYPE_DICTIONARY;
}
bool HasData(int t) {
  return Width(static_cast<v1::ColumnType>(t)) != 0 || t == v1::COLUMN_TYPE_BOOL || IsBinary(t) ||
         IsLargeBinary(t) || t == v1::COLUMN_TYPE_FIXED_SIZE_BINARY ||
         t == v1::COLUMN_TYPE_DICTIONARY;
}
bool HasOffsets(int t) {
  return IsBinary(t) || IsLargeBinary(t) || t == v1::COLUMN_TYPE_LIST ||
         t == v1::COLUMN_TYPE_LARGE_LIST || t == v1::COLUMN_TYPE_MAP;
}
int Children(int t) {
  switch (t) {
    case v1::COLUMN_TYPE_LIST:
    case v1::COLUMN_TYPE_LARGE_LIST:
    case v1::COLUMN_TYPE_FIXED_SIZE_LIST:
    case v1::COLUMN_TYPE_DICTIONARY:
      return 1;
    case v1::COLUMN_TYPE_MAP:
      return 2;
    default:
      return 0;
  }
}
// Bytes of a dictionary index of wire type `t` (0: not an index type).
uint64_t IndexWidth(int t) {
  switch (t) {
    case v1::COLUMN_TYPE_UNSPECIFIED:
      return 4;
    case v1::COLUMN_TYPE_INT8:
    case v1::COLUMN_TYPE_UINT8:
    case v1::COLUMN_TYPE_INT16:
    case v1::COLUMN_TYPE_UINT16:
    case v1::COLUMN_TYPE_INT32:
    case v1::COLUMN_TYPE_UINT32:
    case v1::COLUMN_TYPE_INT64:
    case v1::COLUMN_TYPE_UINT64:
      return Width(static_cast<v1::ColumnType>(t));
    default:
      return 0;
  }
}
bool Signed(int t) {
  return t == v1::COLUMN_TYPE_UNSPECIFIED || t == v1::COLUMN_TYPE_INT8 ||
         t == v1::COLUMN_TYPE_INT16 || t == v1::COLUMN_TYPE_INT32 || t == v1::COLUMN_TYPE_INT64;
}

// Offsets entries [offset, offset + length] of `c` (elements of `size` bytes):
// present, the first >= 0, non-decreasing, the last at most `limit`.
bool OffsetsOk(const v1::HashColumn& c, uint64_t size, uint64_t limit) {
  const std::string& o = c.offsets();
  if (o.size() % size != 0 || o.size() / size < c.offset() + c.length() + 1) return false;
  auto at = [&](uint64_t i) { return size == 4 ? Offset(o, i) : Offset64(o, i); };
  int64_t prev = at(c.offset());
  if (prev < 0) return false;
  for (uint64_t r = c.offset() + 1; r <= c.offset() + c.length(); ++r) {
    if (at(r) < prev) return false;
    prev = at(r);
  }
  return static_cast<uint64_t>(prev) <= limit;
}

// Bytes of (offset + length) rows of `width` bytes, saturating.
unsigned __int128 Need(const v1::HashColumn& c, uint64_t width) {
  return static_cast<unsigned __int128>(c.offset() + c.length()) * width;
}

struct Budget {
  uint64_t nodes = 0;
  uint64_t child_rows = 0;
};

// Whether the node `c` (`depth` levels deep; a child when depth > 1) and its
// children follow the documented rules.
bool NodeOk(const v1::HashColumn& c, uint32_t depth, Budget* budget) {
  if (++budget->nodes > 4096 || depth > 64) return false;
  if (c.offset() > (uint64_t{1} << 40) || c.length() > (uint64_t{1} << 40)) return false;
  const int t = c.type();
  if (t < v1::COLUMN_TYPE_UINT32 || t > v1::COLUMN_TYPE_NULL) return false;
  if (depth > 1) {
    // The engine bounds the rows of all children together (kMaxHashChildRows).
    budget->child_rows += c.length();
    if (c.length() > (uint64_t{1} << 31) || budget->child_rows > (uint64_t{1} << 31)) return false;
  }
  if (c.byte_width() != 0 && t != v1::COLUMN_TYPE_FIXED_SIZE_BINARY &&
      t != v1::COLUMN_TYPE_FIXED_SIZE_LIST) {
    return false;
  }
  if (c.index_type() != 0 && t != v1::COLUMN_TYPE_DICTIONARY) return false;
  if (!HasData(t) && !c.data().empty()) return false;
  if (!HasOffsets(t) && !c.offsets().empty()) return false;
  if (t != v1::COLUMN_TYPE_STRUCT && c.children_size() != Children(t)) return false;
  const uint64_t end = c.offset() + c.length();
  if (t == v1::COLUMN_TYPE_NULL && !c.validity().empty()) return false;
  if (!c.validity().empty() && c.validity().size() < (end + 7) / 8) return false;
  for (const v1::HashColumn& k : c.children()) {
    if (!NodeOk(k, depth + 1, budget)) return false;
  }
  if (const uint64_t w = Width(static_cast<v1::ColumnType>(t)))
    return c.data().size() >= Need(c, w);
  switch (t) {
    case v1::COLUMN_TYPE_BOOL:
      return c.data().size() >= (end + 7) / 8;
    case v1::COLUMN_TYPE_FIXED_SIZE_BINARY:
      return c.data().size() >= Need(c, c.byte_width());
    case v1::COLUMN_TYPE_BINARY:
    case v1::COLUMN_TYPE_STRING:
      return OffsetsOk(c, 4, c.data().size());
    case v1::COLUMN_TYPE_LARGE_BINARY:
    case v1::COLUMN_TYPE_LARGE_STRING:
      return OffsetsOk(c, 8, c.data().size());
    case v1::COLUMN_TYPE_LIST:
      return OffsetsOk(c, 4, c.children(0).length());
    case v1::COLUMN_TYPE_MAP:
      return OffsetsOk(c, 4, std::min(c.children(0).length(), c.children(1).length()));
    case v1::COLUMN_TYPE_LARGE_LIST:
      return OffsetsOk(c, 8, c.children(0).length());
    case v1::COLUMN_TYPE_FIXED_SIZE_LIST:
      return c.children(0).length() >= Need(c, c.byte_width());
    case v1::COLUMN_TYPE_STRUCT:
      for (const v1::HashColumn& k : c.children()) {
        if (k.length() < end) return false;
      }
      return true;
    case v1::COLUMN_TYPE_DICTIONARY: {
      const uint64_t iw = IndexWidth(c.index_type());
      if (iw == 0 || c.data().size() < Need(c, iw)) return false;
      if (!IsFlat(c.children(0).type())) return false;
      for (uint64_t r = c.offset(); r < end; ++r) {
        if (!c.validity().empty() && !Bit(c.validity(), r)) continue;
        uint64_t u = 0;
        std::memcpy(&u, c.data().data() + r * iw, iw);
        if (Signed(c.index_type()) && iw < 8 && ((u >> (iw * 8 - 1)) & 1)) return false;
        if (Signed(c.index_type()) && iw == 8 && static_cast<int64_t>(u) < 0) return false;
        if (u >= c.children(0).length()) return false;
      }
      return true;
    }
    default:  // NULL
      return true;
  }
}

// Whether every column of `request` is one of the first seven types.
bool FirstSeven(const v1::HashRequest& request) {
  for (const v1::HashColumn& c : request.columns()) {
    if (c.type() < v1::COLUMN_TYPE_UINT32 || c.type() > v1::COLUMN_TYPE_BINARY) return false;
  }
  return true;
}

// Whether the documented rules accept `request` (the response-size check included).
bool Acceptable(const v1::HashRequest& request, uint64_t response_limit) {
  if (request.columns_size() == 0) return false;
  if (request.bits() != 0 && request.bits() != 32 && request.bits() != 64) return false;
  const uint64_t rows = request.columns(0).length();
  Budget budget;
  for (const v1::HashColumn& c : request.columns()) {
    if (c.length() != rows) return false;
    if (!NodeOk(c, 1, &budget)) return false;
  }
  const uint64_t width = request.bits() == 32 ? 4 : 8;
  return rows * width + (rows + 7) / 8 <= response_limit;
}

// The same rows with offset 0 and each buffer cut to them.
v1::HashRequest Sliced(const v1::HashRequest& request) {
  v1::HashRequest out = request;
  for (v1::HashColumn& c : *out.mutable_columns()) {
    const uint64_t off = c.offset(), len = c.length();
    const uint64_t width = Width(c.type());
    if (width != 0) {
      c.set_data(c.data().substr(off * width, len * width));
    } else if (len == 0) {
      // No rows: offsets[offset] is the only one checked (>= 0) and may lie past data.
      c.set_data("");
      c.set_offsets(std::string(4, '\0'));
    } else {
      const int32_t base = Offset(c.offsets(), off);
      std::string offsets;
      for (uint64_t r = off; r <= off + len; ++r) {
        const int32_t o = Offset(c.offsets(), r) - base;
        offsets.append(reinterpret_cast<const char*>(&o), 4);
      }
      c.set_data(c.data().substr(base, Offset(c.offsets(), off + len) - base));
      c.set_offsets(offsets);
    }
    if (!c.validity().empty()) {
      std::string validity((len + 7) / 8, '\0');
      for (uint64_t r = 0; r < len; ++r) {
        if (Bit(c.validity(), off + r)) validity[r / 8] |= static_cast<char>(1u << (r % 8));
      }
      c.set_validity(validity);
    }
    c.set_offset(0);
  }
  return out;
}

void CheckResponse(const v1::HashRequest& request, const v1::HashResponse& response) {
  const uint64_t rows = request.columns(0).length();
  const uint64_t width = request.bits() == 32 ? 4 : 8;
  const std::string what = absl::StrCat("hash of ", request.columns_size(), " columns x ", rows,
                                        " rows (", width * 8, " bits)");
  FUZZ_CHECK(
      response.hashes().size() == rows * width && response.validity().size() == (rows + 7) / 8,
      absl::StrCat(what, ": ", response.hashes().size(), " hash bytes and ",
                   response.validity().size(), " validity bytes"));
  // Flat columns null a row exactly where their own validity does; nested and
  // dictionary columns may null more rows (a struct field, a null entry).
  bool flat = true;
  for (const v1::HashColumn& c : request.columns()) flat = flat && IsFlat(c.type());
  uint64_t nulls = 0;
  for (uint64_t r = 0; r < rows; ++r) {
    bool valid = true;
    for (const v1::HashColumn& c : request.columns()) {
      if (c.type() == v1::COLUMN_TYPE_NULL ||
          (!c.validity().empty() && !Bit(c.validity(), c.offset() + r))) {
        valid = false;
      }
    }
    const bool got = Bit(response.validity(), r);
    FUZZ_CHECK(flat ? got == valid : (valid || !got),
               absl::StrCat(what, ": row ", r, " validity ", got, "; expected ",
                            valid ? (flat ? "1" : "either") : "0"));
    if (!got) {
      ++nulls;
      FUZZ_CHECK(response.hashes().substr(r * width, width) == std::string(width, '\0'),
                 absl::StrCat(what, ": null row ", r, " has a nonzero hash"));
    }
  }
  for (uint64_t r = rows; r < response.validity().size() * 8; ++r) {
    FUZZ_CHECK(!Bit(response.validity(), r),
               absl::StrCat(what, ": unused validity bit ", r, " set"));
  }
  FUZZ_CHECK(response.null_count() == nulls,
             absl::StrCat(what, ": null_count ", response.null_count(), "; expected ", nulls));
}

}  // namespace
}  // namespace gpujoin::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpujoin;
  using namespace gpujoin::fuzz;
  static QueryFixture* fixture = new QueryFixture();
  v1::HashRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return 0;
  v1::HashResponse response;
  const absl::Status status = fixture->ops().Hash(request, &response);
  const bool acceptable = Acceptable(request, fixture->response_limit());
  FUZZ_CHECK(status.ok() == acceptable &&
                 (status.ok() || status.code() == absl::StatusCode::kInvalidArgument),
             absl::StrCat("Hash returned ", Describe(status), "; the documented rules ",
                          acceptable ? "accept" : "reject", " ",
                          request.ShortDebugString().substr(0, 400)));
  if (!status.ok()) return 0;
  CheckResponse(request, response);

  if (FirstSeven(request)) {
    const v1::HashRequest sliced = Sliced(request);
    v1::HashResponse again;
    const absl::Status sliced_status = fixture->ops().Hash(sliced, &again);
    FUZZ_CHECK(sliced_status.ok(), "the sliced request failed: " + Describe(sliced_status));
    FUZZ_CHECK(again.hashes() == response.hashes() && again.validity() == response.validity() &&
                   again.null_count() == response.null_count(),
               absl::StrCat("hashes depend on where the rows lie in the buffers (",
                            request.columns(0).length(), " rows at offset ",
                            request.columns(0).offset(), ")"));
  }

  // Every type: without the first row (each top-level offset + 1, the children
  // as they were), the hashes are the rest of the hashes.
  const uint64_t rows = request.columns(0).length();
  bool shiftable = rows > 0;
  for (const v1::HashColumn& c : request.columns())
    shiftable = shiftable && c.offset() < (uint64_t{1} << 40);
  if (shiftable) {
    v1::HashRequest rest = request;
    for (v1::HashColumn& c : *rest.mutable_columns()) {
      c.set_offset(c.offset() + 1);
      c.set_length(c.length() - 1);
    }
    v1::HashResponse tail;
    const absl::Status rest_status = fixture->ops().Hash(rest, &tail);
    FUZZ_CHECK(rest_status.ok(),
               "the request without its first row failed: " + Describe(rest_status));
    const uint64_t width = request.bits() == 32 ? 4 : 8;
    FUZZ_CHECK(tail.hashes() == response.hashes().substr(width),
               absl::StrCat("dropping row 0 of ", rows, " changed the other rows' hashes"));
    for (uint64_t r = 1; r < rows; ++r) {
      FUZZ_CHECK(Bit(tail.validity(), r - 1) == Bit(response.validity(), r),
                 absl::StrCat("dropping row 0 changed the validity of row ", r));
    }
  }
  return 0;
}
