#include "payload.hpp"

#include "absl/strings/str_cat.h"
#include "keys.hpp"

namespace gpujoin::loadtest {

int64_t PayloadInt64Of(uint32_t value) {
  // Spans the sign and all 64 bits, so a narrower or sign-confused copy differs.
  return static_cast<int64_t>(Mix64(value, 0x7061796c6f6164ull));
}

std::string PayloadStringOf(uint32_t value) {
  static constexpr char kDigits[] = "0123456789abcdef";
  const size_t n = 4 + value % 8;
  std::string tag(n, '0');
  uint64_t bits = Mix64(value, 0x746167ull);
  for (size_t i = 0; i < n; ++i, bits >>= 4) tag[i] = kDigits[bits & 15];
  return tag;
}

std::vector<client::Column> PayloadColumnsOf(std::span<const uint32_t> values,
                                             std::span<const uint8_t> found) {
  client::Column i64(std::string(kPayloadInt64Name), client::ColumnType::kInt64);
  client::Column tag(std::string(kPayloadStringName), client::ColumnType::kString);
  i64.data.reserve(8 * values.size());
  tag.data.reserve(12 * values.size());
  for (size_t r = 0; r < values.size(); ++r) {
    if (!found.empty() && found[r] == 0) {
      i64.AppendNull();
      tag.AppendNull();
      continue;
    }
    i64.Append<int64_t>(PayloadInt64Of(values[r]));
    // At most 11 bytes a row: kMaxPayloadRows keeps the column below 2^31 bytes.
    (void)tag.AppendString(PayloadStringOf(values[r]));
  }
  std::vector<client::Column> columns;
  columns.push_back(std::move(i64));
  columns.push_back(std::move(tag));
  return columns;
}

std::string CheckLookupPayload(const PoolBatch& batch, const client::LookupResult& result,
                               bool full) {
  const size_t n = batch.rows();
  if (result.columns.size() != 2) {
    return absl::StrCat("lookup answer has ", result.columns.size(), " payload columns, expected ",
                        kPayloadInt64Name, " and ", kPayloadStringName);
  }
  const client::Column& i64 = result.columns[0];
  const client::Column& tag = result.columns[1];
  if (i64.name != kPayloadInt64Name || i64.type != client::ColumnType::kInt64 ||
      tag.name != kPayloadStringName || tag.type != client::ColumnType::kString) {
    return absl::StrCat("payload columns are ", i64.name, " ", std::string(client::ColumnTypeName(i64.type)),
                        " and ", tag.name, " ", std::string(client::ColumnTypeName(tag.type)), ", expected ",
                        kPayloadInt64Name, " INT64 and ", kPayloadStringName, " STRING");
  }
  if (i64.length != n || tag.length != n) {
    return absl::StrCat("payload columns have ", i64.length, " and ", tag.length, " rows for ", n,
                        " keys");
  }
  if (!full) return "";
  for (size_t r = 0; r < n; ++r) {
    const bool hit = result.found[r] == 1;
    if (i64.Valid(r) != hit || tag.Valid(r) != hit) {
      return absl::StrCat("row ", r, " key ", batch.KeyText(r), ": payload valid (",
                          i64.Valid(r), ", ", tag.Valid(r), ") for a ",
                          hit ? "found" : "missing", " key");
    }
    if (!hit) continue;
    const uint32_t v = result.values[r];
    if (i64.Value<int64_t>(r) != PayloadInt64Of(v) || tag.String(r) != PayloadStringOf(v)) {
      return absl::StrCat("row ", r, " key ", batch.KeyText(r), ": payload (",
                          i64.Value<int64_t>(r), ", '", std::string(tag.String(r)), "'), expected (",
                          PayloadInt64Of(v), ", '", PayloadStringOf(v), "') for value ", v);
    }
  }
  return "";
}

}  // namespace gpujoin::loadtest
