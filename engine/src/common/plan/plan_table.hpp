// Row operations on plan columns shared by the plan's steps: taking rows by
// position (compaction, join expansion), building columns row by row, and
// viewing them as engine inputs.
#pragma once

#include <concepts>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "gpujoin/engine/graph.hpp"
#include "gpujoin/engine/hashing.hpp"
#include "gpujoin/engine/plan.hpp"

namespace gpujoin::engine::plan_detail {

/// The row position that takes a null row (TakeRows).
inline constexpr uint32_t kNullRow = 0xffffffffu;

/// Column `column` at `rows` (kNullRow: a null row), in order.
PlanColumn TakeRows(const PlanColumn& column, std::span<const uint32_t> rows);

/// Every column of `table` at `rows`.
PlanTable TakeRows(const PlanTable& table, std::span<const uint32_t> rows);

/// The rows for which `keep` is nonzero.
std::vector<uint32_t> SelectedRows(std::span<const uint8_t> keep);

/// An empty column of `type` with `rows` rows, all null.
PlanColumn NullColumn(ColumnType type, uint64_t rows);

/// Drops `column`'s validity when no row is null (a plan column keeps one
/// only where a row is null, as ColumnBuilder and TakeRows make them).
void DropValidityWithoutNulls(PlanColumn& column);

/// Appends values to a column row by row.
/// The values of one labelled column over a run (PlanLookupStep::select_labels):
/// each distinct value gets the next id.
struct LabelTable {
  absl::flat_hash_map<std::string, uint32_t> ids;
  std::vector<std::string> values;
  uint32_t Id(std::string_view value) {
    auto [it, inserted] = ids.try_emplace(std::string(value), static_cast<uint32_t>(values.size()));
    if (inserted) values.emplace_back(value);
    return it->second;
  }
};

class ColumnBuilder {
 public:
  explicit ColumnBuilder(ColumnType type);
  /// Appends row `row` of `from` (same type).
  void AppendFrom(const PlanColumn& from, uint64_t row);
  /// Appends a fixed-width value's bytes (width bytes) or a bool.
  void AppendBytes(const void* value, size_t width);
  void AppendBool(bool value);
  /// Appends a kString / kBinary value.
  void AppendText(std::string_view value);
  void AppendNull();
  uint64_t rows() const { return column_.rows; }
  /// The column (validity dropped when no row is null).
  PlanColumn Finish();

 private:
  void MarkValid(bool valid);
  PlanColumn column_;
  std::vector<uint8_t> validity_;
  bool any_null_ = false;
};

/// A key word per row of an integer column: its value, or the reserved key
/// (missing) for a null or a value K cannot hold.
template <KeyWord K>
std::vector<K> KeyWords(const PlanColumn& c) {
  std::vector<K> keys(c.rows);
  for (uint64_t r = 0; r < c.rows; ++r) {
    __int128 v = -1;
    if (c.valid(r)) {
      switch (c.type) {
        case ColumnType::kInt32:
          v = c.value<int32_t>(r);
          break;
        case ColumnType::kInt64:
          v = c.value<int64_t>(r);
          break;
        case ColumnType::kUint32:
          v = c.value<uint32_t>(r);
          break;
        case ColumnType::kUint64:
          v = c.value<uint64_t>(r);
          break;
        default:
          break;
      }
    }
    keys[r] = (v < 0 || v > static_cast<__int128>(std::numeric_limits<K>::max()))
                  ? kEmptyKeyOf<K>
                  : static_cast<K>(v);
  }
  return keys;
}

/// The key words of `c` without a copy where it already is a column of K
/// without nulls (the reserved key reads as missing either way), else
/// KeyWords into `storage`.
template <KeyWord K>
std::span<const K> KeyWordsOf(const PlanColumn& c, std::vector<K>* storage) {
  const ColumnType word = std::same_as<K, uint32_t> ? ColumnType::kUint32 : ColumnType::kUint64;
  if (c.type == word && c.validity.empty()) {
    return {reinterpret_cast<const K*>(c.data.data()), c.rows};
  }
  *storage = KeyWords<K>(c);
  return *storage;
}

/// A numeric column's values as an aggregate node reads them (monostate for
/// other types).
AggregateValues ValuesOf(const PlanColumn& c);

/// A flat engine view of `column` (key-schema probes).
HashColumn HashColumnOf(const PlanColumn& column);

/// RESOURCE_EXHAUSTED when `bytes` pass `limits.max_table_bytes`.
absl::Status CheckTableBytes(uint64_t bytes, const PlanLimits& limits, std::string_view what);

}  // namespace gpujoin::engine::plan_detail
