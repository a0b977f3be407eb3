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

/// Deepest nesting HashColumn accepts: a top-level column is depth 1, each
/// level of `children` adds one. Deeper trees are INVALID_ARGUMENT.
inline constexpr uint32_t kMaxHashNestingDepth = 64;

/// Most rows all child columns of one HashNode may have together (the sum of
/// `length` over every column below the top level); more is INVALID_ARGUMENT.
inline constexpr uint64_t kMaxHashChildRows = uint64_t{1} << 31;

/// One input column in Arrow's physical layout (docs/hashing.md "Inputs"). Row r
/// of the column is physical row `offset + r` of its own buffers, so a slice
/// hashes without copying; children carry their own offset and length,
/// independent of the parent's, exactly as Arrow child arrays do.
struct HashColumn {
  /// Any ColumnType (docs/hashing.md lists the layout of each).
  ColumnType type = ColumnType::kUint32;
  /// Fixed-width types: the value buffer (at least (offset + length) * width bytes).
  /// kBool: a value bitmap (LSB order, bit offset + r). kBinary, kString,
  /// kLargeBinary, kLargeString: the concatenated value bytes. kDictionary: the
  /// indices, each of `index_type`'s width. Nested types and kNull: unused (empty).
  std::span<const uint8_t> data;
  /// kBinary, kString, kList, kMap: offset + length + 1 int32 offsets (into
  /// `data` for the binary types; into children's logical rows for lists and maps).
  std::span<const int32_t> offsets;
  /// kLargeBinary, kLargeString, kLargeList: the same with int64 offsets.
  std::span<const int64_t> large_offsets;
  /// Optional validity bitmap, LSB bit order; bit (offset + r) set = row r valid.
  /// Empty = all rows valid (kNull: every row is null whatever this holds).
  std::span<const uint8_t> validity;
  uint64_t offset = 0;  ///< first physical row
  uint64_t length = 0;  ///< logical rows
  /// kFixedSizeBinary: bytes per value (0 allowed: every valid row hashes alike).
  /// kFixedSizeList: elements per row (row r spans children[0] logical rows
  /// [(offset + r) * byte_width, (offset + r + 1) * byte_width)).
  uint32_t byte_width = 0;
  /// kDictionary: the type of the indices in `data` (kInt8 .. kUint64; signed
  /// or unsigned of 1, 2, 4 or 8 bytes). Indices index the dictionary's logical rows.
  ColumnType index_type = ColumnType::kInt32;
  /// kStruct: the fields (zero or more, each of the struct's physical length or
  /// more). kList, kLargeList, kFixedSizeList: one, the values. kMap: two, keys
  /// and items, both addressed by the map's offsets. kDictionary: one, the
  /// dictionary (a flat type or kNull). Other types: none.
  std::vector<HashColumn> children;
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
