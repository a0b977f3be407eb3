// Row-wise hashing of one or more columns (hash32 / hash64) with Arrow's null
// contract: a null input row gives a null output row, carried in an output
// validity bitmap, never as a reserved hash value. See docs/hashing.md for the
// algorithm; its values are part of the API and must stay stable.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "gpujoin/engine/column.hpp"

namespace gpujoin::engine {

/// One input column in Arrow layout. Row r of the column is physical row
/// `offset + r` of the buffers, so a slice hashes without copying.
struct HashColumn {
  /// kUint32 .. kBinary (kBool and kString are not hashed yet).
  ColumnType type = ColumnType::kUint32;
  /// Fixed-width types: the value buffer (at least (offset + length) * width bytes).
  /// kBinary: the concatenated value bytes.
  std::span<const uint8_t> data;
  /// kBinary only: offset + length + 1 int32 offsets into `data` (Arrow "binary"/"utf8").
  std::span<const int32_t> offsets;
  /// Optional validity bitmap, LSB bit order; bit (offset + r) set = row r valid.
  /// Empty = all rows valid.
  std::span<const uint8_t> validity;
  uint64_t offset = 0;  ///< first physical row
  uint64_t length = 0;  ///< logical rows
};

enum class HashBits { k32, k64 };

/// Hashes `columns` (all the same length) row-wise into one composite hash per
/// row. A row is null when any column is null at that row.
struct HashNode {
  std::vector<HashColumn> columns;  ///< at least one
  HashBits bits = HashBits::k64;
  std::span<uint32_t> out32;         ///< written when bits == k32: one per row
  std::span<uint64_t> out64;         ///< written when bits == k64: one per row
  std::span<uint8_t> out_validity;   ///< written: ceil(rows / 8) bytes, LSB order; null rows' hashes are 0
};

}  // namespace gpujoin::engine
