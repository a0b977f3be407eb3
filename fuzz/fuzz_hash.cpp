// Fuzz target: Operations::Hash (server/src/operations.cpp) on the CPU backend
// with --max-message-bytes=8 KiB.
//
// Input: the bytes of one HashRequest message. Checked:
//  - the request is accepted exactly when the documented rules allow it (columns,
//    bits, each column's type, length, offset, data, offsets and validity, the
//    response size), INVALID_ARGUMENT otherwise;
//  - an OK response has one 32- or 64-bit hash per row and a validity bitmap of
//    ceil(rows / 8) bytes whose bit r is the AND of the columns' validity bits at
//    offset + r (its unused high bits 0), null_count its zero bits, and 0 as the
//    hash of every null row;
//  - hashing is row-wise: the same rows sliced out of the buffers (offset 0, data,
//    offsets and validity cut to the rows) hash to the same values.
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "fuzz_support.hpp"

namespace gpujoin::fuzz {
namespace {

uint64_t Width(v1::ColumnType type) {
  switch (type) {
    case v1::COLUMN_TYPE_UINT32:
    case v1::COLUMN_TYPE_INT32:
    case v1::COLUMN_TYPE_FLOAT32:
      return 4;
    case v1::COLUMN_TYPE_UINT64:
    case v1::COLUMN_TYPE_INT64:
    case v1::COLUMN_TYPE_FLOAT64:
      return 8;
    default:
      return 0;
  }
}

int32_t Offset(const std::string& offsets, uint64_t i) {
  int32_t v = 0;
  std::memcpy(&v, offsets.data() + i * 4, 4);
  return v;
}

bool Bit(const std::string& bitmap, uint64_t i) {
  return (static_cast<uint8_t>(bitmap[i / 8]) >> (i % 8)) & 1u;
}

// Whether the documented rules accept `request` (the response-size check included).
bool Acceptable(const v1::HashRequest& request, uint64_t response_limit) {
  if (request.columns_size() == 0) return false;
  if (request.bits() != 0 && request.bits() != 32 && request.bits() != 64) return false;
  const uint64_t rows = request.columns(0).length();
  for (const v1::HashColumn& c : request.columns()) {
    if (c.length() != rows) return false;
    if (c.offset() > (uint64_t{1} << 40) || c.length() > (uint64_t{1} << 40)) return false;
    const uint64_t end = c.offset() + c.length();
    const uint64_t width = Width(c.type());
    if (width == 0 && c.type() != v1::COLUMN_TYPE_BINARY) return false;
    if (width != 0) {
      if (!c.offsets().empty() || c.data().size() < end * width) return false;
    } else {
      if (c.offsets().size() % 4 != 0 || c.offsets().size() / 4 < end + 1) return false;
      int32_t prev = Offset(c.offsets(), c.offset());
      if (prev < 0) return false;
      for (uint64_t r = c.offset() + 1; r <= end; ++r) {
        const int32_t o = Offset(c.offsets(), r);
        if (o < prev || static_cast<uint64_t>(o) > c.data().size()) return false;
        prev = o;
      }
    }
    if (!c.validity().empty() && c.validity().size() < (end + 7) / 8) return false;
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
  uint64_t nulls = 0;
  for (uint64_t r = 0; r < rows; ++r) {
    bool valid = true;
    for (const v1::HashColumn& c : request.columns()) {
      if (!c.validity().empty() && !Bit(c.validity(), c.offset() + r)) valid = false;
    }
    FUZZ_CHECK(Bit(response.validity(), r) == valid,
               absl::StrCat(what, ": row ", r, " validity ", Bit(response.validity(), r),
                            "; expected ", valid));
    if (!valid) {
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

  const v1::HashRequest sliced = Sliced(request);
  v1::HashResponse again;
  const absl::Status sliced_status = fixture->ops().Hash(sliced, &again);
  FUZZ_CHECK(sliced_status.ok(), "the sliced request failed: " + Describe(sliced_status));
  FUZZ_CHECK(again.hashes() == response.hashes() && again.validity() == response.validity() &&
                 again.null_count() == response.null_count(),
             absl::StrCat("hashes depend on where the rows lie in the buffers (",
                          request.columns(0).length(), " rows at offset ",
                          request.columns(0).offset(), ")"));
  return 0;
}
