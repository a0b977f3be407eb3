// The key columns of one BuildIndex call of a key-schema index, staged: the
// decoded key columns of every chunk (key_columns_wire) copied into one
// contiguous host column per key column, in the engine's key layout (flat
// HashColumns: values, int32 string offsets, an LSB-first validity bitmap), so
// that a plain build sees all its rows as one KeyColumns and a batch build
// sees each chunk as a slice of them (HashColumn offset and length).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "gpujoin/engine/key_columns.hpp"

namespace gpujoin::server {

/// The staged key columns of one build. Not thread-safe: owned by one BuildSession.
class KeyStaging {
 public:
  /// Sets the key schema's column types (and drops any staged rows).
  void Declare(std::vector<engine::ColumnType> types);

  /// Host bytes that Append(keys) will add to bytes(). INVALID_ARGUMENT naming
  /// `field` when a string or binary key column would hold more than
  /// 2^31 - 1 bytes (its int32 offsets), the most one build's key column takes.
  absl::StatusOr<uint64_t> GrowthBytes(const engine::KeyColumns& keys,
                                       std::string_view field) const;
  /// Appends `keys` (the declared schema, checked: DecodeKeyColumnList) after
  /// the rows staged so far. GrowthBytes must have accepted them.
  void Append(const engine::KeyColumns& keys);

  /// Every staged row (valid until the next Append or Clear).
  engine::KeyColumns View() const { return Slice(0, rows_); }
  /// Staged rows [first, first + rows).
  engine::KeyColumns Slice(uint64_t first, uint64_t rows) const;

  uint64_t rows() const { return rows_; }
  /// Host bytes the staged columns hold (their buffers' capacities).
  uint64_t bytes() const;
  /// Frees the staged rows (the declaration stays).
  void Clear();

 private:
  struct Column {
    engine::ColumnType type = engine::ColumnType::kInt32;
    std::vector<uint8_t> data;      // values, or string and binary bytes
    std::vector<int32_t> offsets;   // variable width: rows + 1, offsets[0] = 0
    std::vector<uint8_t> validity;  // kept from the column's first null row on
    bool nullable = false;          // a row was null: `validity` covers every row
  };
  std::vector<Column> columns_;
  uint64_t rows_ = 0;
};

}  // namespace gpujoin::server
