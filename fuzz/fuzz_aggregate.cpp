// Fuzz target: one Aggregate stream, as the service runs it: for each batch
// AggregateStream::Admit, Operations::Aggregate and, in order,
// AggregateStream::Complete (server/src/ops/aggregate.cpp), on the CPU backend with
// --max-aggregate-groups=1024 and --max-message-bytes=8 KiB.
//
// Input: a sequence of frames (fuzz_support.hpp SplitFrames), each the bytes of
// one AggregateRequest; a frame that does not parse ends the stream, as in the
// service. Checked:
//  - each batch's status is the one the documented checks give (op, groups and
//    their limits, the stream's op, groups and value type, keys, float32 `values`
//    or `typed_values` (docs/api.md "Typed values"), mask and sizes);
//  - an OK batch's counts, contributing rows and values equal a reference
//    computed from the rows (keys below groups, mask nonzero, finite values;
//    min/max exact with -0 below +0; float sums and means to their type's
//    rounding; integer sums exact, from 128-bit sums, with their overflow flags;
//    integer means double(exact sum) / double(count)), and the totals equal the reference
//    over every OK batch of the stream so far (the overflow flags sticky, the
//    uint64 counts exact);
//  - accumulate_only drops the per-batch columns and keeps the totals.
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "fuzz_support.hpp"
#include "wire/column_codec.hpp"

namespace gpujoin::fuzz {
namespace {

constexpr uint64_t kMaxGroups = 1024;

// Per-group bytes of a response (the server's bound on groups for
// --max-message-bytes): float32 results, batch + totals + contributing rows; with
// want_counts64 the uint64 totals as well; typed results 8 + 8 (batch and total
// words) + 4 (rows) + 8 (counts64) + 4 (bitmaps, rounded up).
constexpr uint64_t kBytesPerGroup = 12;
constexpr uint64_t kCounts64BytesPerGroup = 20;
constexpr uint64_t kTypedBytesPerGroup = 32;

// The value type of a stream or request: float32 `values` (and COUNT), or one
// of the typed_values types.
enum class ValueType { kFloat32, kInt32, kInt64, kUint32, kUint64, kFloat64 };

bool IsInt(ValueType t) { return t != ValueType::kFloat32 && t != ValueType::kFloat64; }
bool IsSigned(ValueType t) { return t == ValueType::kInt32 || t == ValueType::kInt64; }
size_t Width(ValueType t) {
  return t == ValueType::kInt64 || t == ValueType::kUint64 || t == ValueType::kFloat64 ? 8 : 4;
}

// typed_values.type as a value type; false for a type aggregation refuses
// (UNSPECIFIED, FLOAT32, BINARY, BOOL, STRING, the Hash-only types, unknown).
bool TypedValueType(int wire, ValueType* out) {
  switch (wire) {
    case v1::COLUMN_TYPE_INT32:
      *out = ValueType::kInt32;
      return true;
    case v1::COLUMN_TYPE_INT64:
      *out = ValueType::kInt64;
      return true;
    case v1::COLUMN_TYPE_UINT32:
      *out = ValueType::kUint32;
      return true;
    case v1::COLUMN_TYPE_UINT64:
      *out = ValueType::kUint64;
      return true;
    case v1::COLUMN_TYPE_FLOAT64:
      *out = ValueType::kFloat64;
      return true;
    default:
      return false;
  }
}

// The request's value type (valid when Admit accepted it).
ValueType RequestValueType(const v1::AggregateRequest& r) {
  ValueType t = ValueType::kFloat32;
  if (r.has_typed_values()) TypedValueType(r.typed_values().type(), &t);
  return t;
}

template <typename F>
bool Less(F a, F b) {
  return a < b || (a == 0 && b == 0 && std::signbit(a) && !std::signbit(b));
}

template <typename Column>
bool Decodes(bool has, const Column& c, bool required) {
  const bool has_packed = has && !c.packed().empty();
  const bool has_values = has && c.has_values();
  if (has_packed && has_values) return false;
  if (!has_packed && !has_values) return !required;
  return !has_packed || c.packed().size() % 4 == 0;
}

template <typename T, typename Column>
std::vector<T> Values(const Column& c) {
  if (!c.packed().empty()) return server::UnpackColumn<T>(c.packed());
  return std::vector<T>(c.values().v().begin(), c.values().v().end());
}

template <typename Column>
bool Present(bool has, const Column& c) {
  return has && (!c.packed().empty() || c.has_values());
}

// Per-group running state of the reference: contributing rows (mod 2^32 as the
// service counts, and exact), the exact min/max (floats as doubles, which hold
// every float exactly; integers as 128-bit), the sums (floats: long double, and
// the sum of magnitudes for the rounding bound; integers: exact in 128 bits) and
// the integer sum's overflow flag (sticky over a stream's totals).
struct Group {
  uint32_t rows = 0;
  uint64_t rows64 = 0;
  bool any = false;
  double min = 0, max = 0;
  __int128 imin = 0, imax = 0;
  long double sum = 0, magnitude = 0;
  __int128 exact = 0;
  bool overflow = false;
  uint64_t n = 0;  // values summed (for the rounding bound)
};

bool Fits(ValueType t, __int128 v) {
  if (IsSigned(t)) {
    return v >= std::numeric_limits<int64_t>::min() && v <= std::numeric_limits<int64_t>::max();
  }
  return v >= 0 && v <= static_cast<__int128>(std::numeric_limits<uint64_t>::max());
}

std::string Int128(__int128 v) {
  const bool neg = v < 0;
  unsigned __int128 u =
      neg ? -static_cast<unsigned __int128>(v) : static_cast<unsigned __int128>(v);
  std::string s;
  do {
    s.insert(s.begin(), static_cast<char>('0' + static_cast<int>(u % 10)));
    u /= 10;
  } while (u != 0);
  return neg ? "-" + s : s;
}

// The reference stream: op, groups and value type fixed by the first admitted batch.
struct ReferenceStream {
  bool fixed = false;
  v1::AggregateOp op = v1::AGGREGATE_OP_UNSPECIFIED;
  uint64_t groups = 0;
  ValueType type = ValueType::kFloat32;
  std::vector<Group> totals;
};

absl::StatusCode ExpectedAdmit(const ReferenceStream& stream, const v1::AggregateRequest& r,
                               uint64_t max_message_bytes) {
  using absl::StatusCode;
  if (r.op() < v1::AGGREGATE_OP_COUNT || r.op() > v1::AGGREGATE_OP_MEAN) {
    return StatusCode::kInvalidArgument;
  }
  if (r.groups() == 0 || r.groups() > 0xffffffffu) return StatusCode::kInvalidArgument;
  if (r.groups() > kMaxGroups) return StatusCode::kResourceExhausted;
  ValueType type = ValueType::kFloat32;
  if (r.has_typed_values()) {
    // typed_values on COUNT, or of a type aggregation does not take.
    if (r.op() == v1::AGGREGATE_OP_COUNT) return StatusCode::kInvalidArgument;
    if (!TypedValueType(r.typed_values().type(), &type)) return StatusCode::kInvalidArgument;
  }
  const uint64_t per_group = type != ValueType::kFloat32 ? kTypedBytesPerGroup
                             : r.want_counts64()         ? kCounts64BytesPerGroup
                                                         : kBytesPerGroup;
  if (r.groups() > max_message_bytes / per_group) return StatusCode::kInvalidArgument;
  if (stream.fixed && (stream.op != r.op() || stream.groups != r.groups())) {
    return StatusCode::kInvalidArgument;
  }
  if (stream.fixed && r.op() != v1::AGGREGATE_OP_COUNT && stream.type != type) {
    return StatusCode::kInvalidArgument;
  }
  return StatusCode::kOk;
}

absl::StatusCode ExpectedAggregate(const v1::AggregateRequest& r) {
  using absl::StatusCode;
  if (!Decodes(r.has_keys(), r.keys(), true) || !Decodes(r.has_values(), r.values(), false) ||
      !Decodes(r.has_mask(), r.mask(), false)) {
    return StatusCode::kInvalidArgument;
  }
  const bool count = r.op() == v1::AGGREGATE_OP_COUNT;
  const ValueType type = RequestValueType(r);
  const bool has_values = Present(r.has_values(), r.values());
  const size_t rows = Values<uint32_t>(r.keys()).size();
  if (Present(r.has_mask(), r.mask()) && Values<uint32_t>(r.mask()).size() != rows) {
    return StatusCode::kInvalidArgument;
  }
  if (type != ValueType::kFloat32) {
    // Typed: `values` must be absent; one value per key, no offsets, a validity
    // bitmap of exactly ceil(rows / 8) bytes or none.
    const v1::Column& c = r.typed_values();
    if (has_values || !c.offsets().empty()) return StatusCode::kInvalidArgument;
    if (c.length() != rows || c.data().size() != rows * Width(type)) {
      return StatusCode::kInvalidArgument;
    }
    if (!c.validity().empty() && c.validity().size() != (rows + 7) / 8) {
      return StatusCode::kInvalidArgument;
    }
    return StatusCode::kOk;
  }
  if (count == has_values) return StatusCode::kInvalidArgument;  // values iff not COUNT
  if (has_values && Values<float>(r.values()).size() != rows) return StatusCode::kInvalidArgument;
  return StatusCode::kOk;
}

// The typed values of `r` (type `type`), as doubles (floats) or 128-bit integers.
void TypedRows(const v1::AggregateRequest& r, ValueType type, std::vector<double>* floats,
               std::vector<__int128>* ints) {
  const std::string& data = r.typed_values().data();
  const size_t rows = data.size() / Width(type);
  for (size_t i = 0; i < rows; ++i) {
    uint64_t word = 0;
    std::memcpy(&word, data.data() + i * Width(type), Width(type));  // little-endian host
    switch (type) {
      case ValueType::kInt32:
        ints->push_back(static_cast<int32_t>(static_cast<uint32_t>(word)));
        break;
      case ValueType::kInt64:
        ints->push_back(static_cast<int64_t>(word));
        break;
      case ValueType::kUint32:
      case ValueType::kUint64:
        ints->push_back(word);
        break;
      case ValueType::kFloat64:
        floats->push_back(std::bit_cast<double>(word));
        break;
      case ValueType::kFloat32:
        break;
    }
  }
}

// Bit g of an Arrow bitmap (LSB first).
bool Bit(const std::string& bitmap, size_t g) {
  return (static_cast<uint8_t>(bitmap[g / 8]) >> (g % 8)) & 1;
}

// The groups of one batch.
std::vector<Group> BatchGroups(const v1::AggregateRequest& r) {
  std::vector<Group> groups(r.groups());
  const std::vector<uint32_t> keys = Values<uint32_t>(r.keys());
  const std::vector<uint32_t> mask = Values<uint32_t>(r.mask());
  const bool count = r.op() == v1::AGGREGATE_OP_COUNT;
  const ValueType type = RequestValueType(r);
  std::vector<double> floats;
  std::vector<__int128> ints;
  if (type == ValueType::kFloat32) {
    for (float v : Values<float>(r.values())) floats.push_back(v);
  } else {
    TypedRows(r, type, &floats, &ints);
  }
  // A null typed value (validity bit 0) contributes nothing, as a masked row.
  const std::string& validity = r.typed_values().validity();
  for (size_t i = 0; i < keys.size(); ++i) {
    if (keys[i] >= r.groups() || (!mask.empty() && mask[i] == 0)) continue;
    if (type != ValueType::kFloat32 && !validity.empty() && !Bit(validity, i)) continue;
    if (!count && !IsInt(type) && !std::isfinite(floats[i])) continue;
    Group& g = groups[keys[i]];
    ++g.rows;
    ++g.rows64;
    if (count) continue;
    if (IsInt(type)) {
      const __int128 v = ints[i];
      if (!g.any || v < g.imin) g.imin = v;
      if (!g.any || g.imax < v) g.imax = v;
      g.exact += v;
    } else {
      const double v = floats[i];
      if (!g.any || Less(v, g.min)) g.min = v;
      if (!g.any || Less(g.max, v)) g.max = v;
      g.sum += v;
      g.magnitude += std::fabs(v);
    }
    g.any = true;
    ++g.n;
  }
  if (IsInt(type)) {
    for (Group& g : groups) g.overflow = !Fits(type, g.exact);
  }
  return groups;
}

void Fold(ValueType type, const std::vector<Group>& batch, std::vector<Group>* totals) {
  for (size_t k = 0; k < batch.size(); ++k) {
    Group& t = (*totals)[k];
    const Group& b = batch[k];
    t.rows += b.rows;
    t.rows64 += b.rows64;
    if (b.any) {
      if (!t.any || Less(b.min, t.min)) t.min = b.min;
      if (!t.any || Less(t.max, b.max)) t.max = b.max;
      if (!t.any || b.imin < t.imin) t.imin = b.imin;
      if (!t.any || t.imax < b.imax) t.imax = b.imax;
      t.any = true;
    }
    t.sum += b.sum;
    t.magnitude += b.magnitude;
    t.exact += b.exact;
    t.n += b.n;
    // Sticky: a group that overflowed in a batch or in the running total stays set.
    if (IsInt(type)) t.overflow = t.overflow || b.overflow || !Fits(type, t.exact);
  }
}

// The float result of `op` for group `g` (F: float for float32 values, double
// for float64), checked against `got`.
template <typename F>
void CheckFloat(v1::AggregateOp op, const Group& g, F got, const std::string& what) {
  auto same_bits = [](F a, F b) { return std::memcmp(&a, &b, sizeof a) == 0; };
  if (op == v1::AGGREGATE_OP_MIN || op == v1::AGGREGATE_OP_MAX) {
    if (!g.any) {
      FUZZ_CHECK(std::isnan(got),
                 absl::StrCat(what, ": ", got, " for an empty group; expected NaN"));
      return;
    }
    const F want = static_cast<F>(op == v1::AGGREGATE_OP_MIN ? g.min : g.max);
    FUZZ_CHECK(same_bits(got, want), absl::StrCat(what, ": ", got, "; expected ", want));
    return;
  }
  if (op == v1::AGGREGATE_OP_MEAN && g.rows64 == 0) {
    FUZZ_CHECK(std::isnan(got), absl::StrCat(what, ": ", got, " for an empty group; expected NaN"));
    return;
  }
  if (op == v1::AGGREGATE_OP_SUM && g.rows64 == 0) {
    FUZZ_CHECK(same_bits(got, F{0}),
               absl::StrCat(what, ": ", got, " for an empty group; expected +0"));
    return;
  }
  // Float accumulation: within n rounding errors of the magnitudes; a sum near
  // the type's range may overflow, which the reference does not model.
  constexpr bool kWide = sizeof(F) == 8;
  if (g.magnitude > (kWide ? 1e306L : 1e36L)) return;
  const long double divisor = op == v1::AGGREGATE_OP_MEAN ? static_cast<long double>(g.n) : 1.0L;
  const long double want = g.sum / divisor;
  const long double tolerance = (static_cast<long double>(g.n) + 2) *
                                    std::ldexp(1.0L, kWide ? -52 : -23) * g.magnitude / divisor +
                                std::numeric_limits<F>::denorm_min();
  FUZZ_CHECK(std::isfinite(got) && std::fabs(static_cast<long double>(got) - want) <= tolerance,
             absl::StrCat(what, ": ", got, "; expected ", static_cast<double>(want), " within ",
                          static_cast<double>(tolerance)));
}

// `counts` (per-group rows; nullptr: not sent) and `values` (the op's floats;
// nullptr for COUNT) against the reference `groups`.
void CheckGroups(v1::AggregateOp op, const std::vector<Group>& groups, const std::string* counts,
                 const std::string* values, const std::string& what) {
  if (counts != nullptr) {
    FUZZ_CHECK(
        counts->size() == groups.size() * 4,
        absl::StrCat(what, ": ", counts->size(), " count bytes for ", groups.size(), " groups"));
    const std::vector<uint32_t> got_counts = server::UnpackColumn<uint32_t>(*counts);
    for (size_t k = 0; k < groups.size(); ++k) {
      FUZZ_CHECK(got_counts[k] == groups[k].rows,
                 absl::StrCat(what, ": group ", k, " counts ", got_counts[k], " rows; expected ",
                              groups[k].rows));
    }
  }
  if (values == nullptr) return;
  const std::string& v = *values;
  FUZZ_CHECK(v.size() == groups.size() * 4,
             absl::StrCat(what, ": ", v.size(), " value bytes for ", groups.size(), " groups"));
  const std::vector<float> got = server::UnpackColumn<float>(v);
  for (size_t k = 0; k < groups.size(); ++k) {
    CheckFloat<float>(op, groups[k], got[k], absl::StrCat(what, ": group ", k));
  }
}

// total_counts64: the exact rows of each group.
void CheckCounts64(const std::vector<Group>& groups, const std::string& counts64,
                   const std::string& what) {
  FUZZ_CHECK(counts64.size() == groups.size() * 8,
             absl::StrCat(what, ": ", counts64.size(), " bytes for ", groups.size(), " groups"));
  const std::vector<uint64_t> got = server::UnpackColumn<uint64_t>(counts64);
  for (size_t k = 0; k < groups.size(); ++k) {
    FUZZ_CHECK(got[k] == groups[k].rows64, absl::StrCat(what, ": group ", k, " counts ", got[k],
                                                        " rows; expected ", groups[k].rows64));
  }
}

void CheckBitmap(const std::string& bitmap, size_t groups, const std::string& what) {
  FUZZ_CHECK(bitmap.size() == (groups + 7) / 8,
             absl::StrCat(what, ": ", bitmap.size(), " bitmap bytes for ", groups, " groups"));
  for (size_t g = groups; g < bitmap.size() * 8; ++g) {
    FUZZ_CHECK(!Bit(bitmap, g), absl::StrCat(what, ": padding bit ", g, " set"));
  }
}

// A typed result column (typed_result / total_typed_result) and its overflow
// bitmap (nullptr: not sent, as for min/max and float64) against `groups`.
void CheckTyped(v1::AggregateOp op, ValueType type, const std::vector<Group>& groups,
                const v1::Column& c, const std::string* overflow, const std::string& what) {
  const bool minmax = op == v1::AGGREGATE_OP_MIN || op == v1::AGGREGATE_OP_MAX;
  // The result type: sums of signed / unsigned integers are int64 / uint64, means
  // float64, min/max the value type.
  v1::ColumnType want_type = v1::COLUMN_TYPE_FLOAT64;
  ValueType result = ValueType::kFloat64;
  if (minmax) {
    result = type;
  } else if (op == v1::AGGREGATE_OP_SUM && IsInt(type)) {
    result = IsSigned(type) ? ValueType::kInt64 : ValueType::kUint64;
  }
  switch (result) {
    case ValueType::kInt32:
      want_type = v1::COLUMN_TYPE_INT32;
      break;
    case ValueType::kInt64:
      want_type = v1::COLUMN_TYPE_INT64;
      break;
    case ValueType::kUint32:
      want_type = v1::COLUMN_TYPE_UINT32;
      break;
    case ValueType::kUint64:
      want_type = v1::COLUMN_TYPE_UINT64;
      break;
    default:
      break;
  }
  FUZZ_CHECK(c.type() == want_type, absl::StrCat(what, ": type ", v1::ColumnType_Name(c.type()),
                                                 "; expected ", v1::ColumnType_Name(want_type)));
  const size_t n = groups.size();
  const size_t width = Width(result);
  FUZZ_CHECK(c.length() == n && c.data().size() == n * width && c.offsets().empty(),
             absl::StrCat(what, ": length ", c.length(), ", ", c.data().size(), " data bytes, ",
                          c.offsets().size(), " offset bytes for ", n, " groups"));
  // Empty integer min/max groups are null: validity bit 0, value 0.
  const bool nullable = minmax && IsInt(type);
  uint64_t empty = 0;
  for (const Group& g : groups) empty += g.rows64 == 0;
  if (nullable && empty > 0) {
    CheckBitmap(c.validity(), n, what + " validity");
    FUZZ_CHECK(c.null_count() == empty,
               absl::StrCat(what, ": null_count ", c.null_count(), "; expected ", empty));
  } else {
    FUZZ_CHECK(c.validity().empty() && c.null_count() == 0,
               absl::StrCat(what, ": validity of ", c.validity().size(), " bytes, null_count ",
                            c.null_count(), " where no group is null"));
  }
  const bool flags = IsInt(type) && !minmax;
  FUZZ_CHECK((overflow != nullptr) == flags, what + ": overflow bitmap presence");
  if (flags) CheckBitmap(*overflow, n, what + " overflow");
  for (size_t k = 0; k < n; ++k) {
    const Group& g = groups[k];
    const std::string at = absl::StrCat(what, ": group ", k);
    uint64_t word = 0;
    std::memcpy(&word, c.data().data() + k * width, width);
    if (!IsInt(type)) {
      CheckFloat<double>(op, g, std::bit_cast<double>(word), at);
      continue;
    }
    if (flags) {
      FUZZ_CHECK(Bit(*overflow, k) == g.overflow,
                 absl::StrCat(at, ": overflow bit ", Bit(*overflow, k), " for the exact sum ",
                              Int128(g.exact)));
    }
    if (minmax) {
      if (nullable && empty > 0) {
        FUZZ_CHECK(
            Bit(c.validity(), k) == (g.rows64 != 0),
            absl::StrCat(at, ": validity bit ", Bit(c.validity(), k), " for ", g.rows64, " rows"));
      }
      __int128 got = 0;
      if (type == ValueType::kInt32) got = static_cast<int32_t>(static_cast<uint32_t>(word));
      if (type == ValueType::kInt64) got = static_cast<int64_t>(word);
      if (!IsSigned(type)) got = word;
      const __int128 want = g.rows64 == 0 ? 0 : op == v1::AGGREGATE_OP_MIN ? g.imin : g.imax;
      FUZZ_CHECK(got == want, absl::StrCat(at, ": ", Int128(got), "; expected ", Int128(want)));
    } else if (op == v1::AGGREGATE_OP_SUM) {
      // The low 64 bits of the exact sum, overflowed or not.
      const uint64_t want = static_cast<uint64_t>(static_cast<unsigned __int128>(g.exact));
      FUZZ_CHECK(word == want, absl::StrCat(at, ": sum word ", word, "; expected ", want,
                                            " (the exact sum ", Int128(g.exact), ")"));
    } else {
      // Mean: double(exact sum) / double(rows), one rounding of each
      // (docs/engine.md); NaN when empty or overflowed.
      const double got = std::bit_cast<double>(word);
      if (g.rows64 == 0 || g.overflow) {
        FUZZ_CHECK(std::isnan(got), absl::StrCat(at, ": mean ", got, "; expected NaN (", g.rows64,
                                                 " rows, overflow ", g.overflow, ")"));
        continue;
      }
      const double want = static_cast<double>(g.exact) / static_cast<double>(g.rows64);
      FUZZ_CHECK(std::memcmp(&got, &want, sizeof got) == 0,
                 absl::StrCat(at, ": mean ", got, "; expected ", want, " = ", Int128(g.exact),
                              " / ", g.rows64));
    }
  }
}

}  // namespace
}  // namespace gpujoin::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpujoin;
  using namespace gpujoin::fuzz;
  static QueryFixture* fixture = new QueryFixture();
  const uint64_t max_message_bytes = fixture->harness().config().max_message_bytes;
  server::AggregateStream stream;
  ReferenceStream ref;
  int batch = 0;
  for (std::string_view frame : SplitFrames(AsView(data, size), 16)) {
    v1::AggregateRequest request;
    if (!request.ParseFromArray(frame.data(), static_cast<int>(frame.size()))) break;
    const std::string what = absl::StrCat("batch ", batch++, " (op ", int(request.op()),
                                          ", groups ", request.groups(), ")");
    const absl::Status admitted = stream.Admit(request, max_message_bytes, kMaxGroups);
    const absl::StatusCode want_admit = ExpectedAdmit(ref, request, max_message_bytes);
    FUZZ_CHECK(admitted.code() == want_admit,
               absl::StrCat(what, ": Admit returned ", Describe(admitted), "; expected ",
                            absl::StatusCodeToString(want_admit)));
    if (!admitted.ok()) continue;  // an in-band error; the stream goes on
    if (!ref.fixed) {
      ref.fixed = true;
      ref.op = request.op();
      ref.groups = request.groups();
      ref.type = RequestValueType(request);
      ref.totals.assign(ref.groups, Group{});
    }
    v1::AggregateResponse response;
    server::AggregatePartial partial;
    const absl::Status status = fixture->ops().Aggregate(request, &response, &partial);
    const absl::StatusCode want = ExpectedAggregate(request);
    FUZZ_CHECK(status.code() == want, absl::StrCat(what, ": Aggregate returned ", Describe(status),
                                                   "; expected ", absl::StatusCodeToString(want)));
    if (!status.ok()) continue;
    const std::vector<Group> groups = BatchGroups(request);
    const size_t rows = Values<uint32_t>(request.keys()).size();
    FUZZ_CHECK(response.rows() == rows, absl::StrCat(what, ": rows ", response.rows()));
    const bool count = request.op() == v1::AGGREGATE_OP_COUNT;
    const bool typed = ref.type != ValueType::kFloat32 && !count;
    const bool flags = typed && IsInt(ref.type) && request.op() != v1::AGGREGATE_OP_MIN &&
                       request.op() != v1::AGGREGATE_OP_MAX;
    CheckGroups(request.op(), groups, &response.contributing_rows(),
                count || typed ? nullptr : &response.values(), what + " contributing_rows/values");
    if (count) {
      FUZZ_CHECK(response.counts() == response.contributing_rows() && response.values().empty(),
                 what + ": COUNT's counts differ from its contributing rows");
    } else {
      FUZZ_CHECK(response.counts().empty(), what + ": counts set for a value op");
    }
    if (typed) {
      FUZZ_CHECK(response.values().empty(), what + ": float32 values set for typed values");
      CheckTyped(request.op(), ref.type, groups, response.typed_result(),
                 flags ? &response.overflow() : nullptr, what + " typed_result");
    } else {
      FUZZ_CHECK(!response.has_typed_result() && response.overflow().empty(),
                 what + ": typed results set for a float32 or COUNT request");
    }
    stream.Complete(request, &response, partial);
    FUZZ_CHECK(!response.has_error(), what + ": Complete failed: " + response.error().message());
    Fold(ref.type, groups, &ref.totals);
    CheckGroups(request.op(), ref.totals, count ? &response.total_counts() : nullptr,
                count || typed ? nullptr : &response.total_values(), what + " totals");
    if (!count) {
      // The totals' counts are not sent for value ops; their values are checked.
      FUZZ_CHECK(response.total_counts().empty(), what + ": total_counts set for a value op");
    }
    if (typed) {
      FUZZ_CHECK(response.total_values().empty(), what + ": total_values set for typed values");
      CheckTyped(request.op(), ref.type, ref.totals, response.total_typed_result(),
                 flags ? &response.total_overflow() : nullptr, what + " total_typed_result");
      uint64_t flagged = 0;
      for (const Group& g : ref.totals) flagged += flags && g.overflow;
      FUZZ_CHECK(response.total_overflow_groups() == flagged,
                 absl::StrCat(what, ": total_overflow_groups ", response.total_overflow_groups(),
                              "; expected ", flagged));
    } else {
      FUZZ_CHECK(!response.has_total_typed_result() && response.total_overflow().empty() &&
                     response.total_overflow_groups() == 0,
                 what + ": typed totals set for a float32 or COUNT request");
    }
    // Exact uint64 rows: always for typed values, else when asked for.
    if (typed || request.want_counts64()) {
      CheckCounts64(ref.totals, response.total_counts64(), what + " total_counts64");
    } else {
      FUZZ_CHECK(response.total_counts64().empty(), what + ": total_counts64 set unasked");
    }
    if (request.accumulate_only()) {
      FUZZ_CHECK(response.counts().empty() && response.values().empty() &&
                     response.contributing_rows().empty() && !response.has_typed_result() &&
                     response.overflow().empty(),
                 what + ": accumulate_only kept per-batch columns");
    }
  }
  return 0;
}
