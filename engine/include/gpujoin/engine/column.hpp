// Typed columns of the engine: the payload columns a build stores beside an
// index, and the gathered columns lookups and joins write. Plain C++ (no CUDA,
// gRPC or protobuf headers), like the rest of the engine's public API.
//
// Layouts follow Arrow's: fixed-width values little-endian, booleans and
// validity as bitmaps (bit i of byte i / 8, LSB first, 1 = true / valid),
// strings as offsets into one byte buffer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace gpujoin::engine {

/// The value type of a typed column. Payload columns and gathered columns take
/// kUint32 .. kString; hashed columns (HashColumn) take every type. The order is
/// the wire enum's (gpujoin.v1.ColumnType, shifted by its UNSPECIFIED).
enum class ColumnType : uint8_t {
  kUint32,
  kInt32,
  kUint64,
  kInt64,
  kFloat32,
  kFloat64,
  kBinary,  ///< variable-length bytes
  kBool,    ///< one bit per row
  kString,  ///< variable-length UTF-8 (the engine treats the bytes as opaque)
  // Hash inputs only (docs/hashing.md); payload and gather code refuses them.
  kInt8,
  kUint8,
  kInt16,
  kUint16,
  kFloat16,          ///< IEEE 754 binary16 bits
  kDecimal128,       ///< 16 bytes per value (Arrow decimal128, little-endian)
  kFixedSizeBinary,  ///< HashColumn::byte_width bytes per value (0 allowed)
  kLargeBinary,      ///< variable-length bytes, int64 offsets
  kLargeString,      ///< variable-length UTF-8, int64 offsets
  kDictionary,       ///< integer indices into a dictionary (HashColumn::children[0])
  kStruct,           ///< fields: HashColumn::children
  kList,             ///< int32 offsets into children[0]
  kLargeList,        ///< int64 offsets into children[0]
  kFixedSizeList,    ///< HashColumn::byte_width elements of children[0] per row
  kMap,              ///< int32 offsets into children[0] (keys) and children[1] (items)
  kNull,             ///< every row null, no buffers
};

/// "uint32", "int32", "uint64", "int64", "float32", "float64", "binary", "bool", "string",
/// then the hash-only types: "int8", "uint8", "int16", "uint16", "float16", "decimal128",
/// "fixed_size_binary", "large_binary", "large_string", "dictionary", "struct", "list",
/// "large_list", "fixed_size_list", "map", "null"; "unknown" for any other value.
std::string_view ColumnTypeName(ColumnType type);

/// Parses a ColumnTypeName (INVALID_ARGUMENT otherwise).
absl::StatusOr<ColumnType> ParseColumnType(std::string_view name);

/// Bytes of one value of a fixed-width type (4 or 8); 0 for kBool, kBinary and kString.
constexpr size_t ColumnWidth(ColumnType type) {
  switch (type) {
    case ColumnType::kUint32:
    case ColumnType::kInt32:
    case ColumnType::kFloat32:
      return 4;
    case ColumnType::kUint64:
    case ColumnType::kInt64:
    case ColumnType::kFloat64:
      return 8;
    default:
      return 0;
  }
}

/// kBinary and kString: values are offsets into a byte buffer.
constexpr bool IsVariableWidth(ColumnType type) {
  return type == ColumnType::kBinary || type == ColumnType::kString;
}

/// Bytes of a bitmap of `rows` bits.
constexpr uint64_t BitmapBytes(uint64_t rows) { return (rows + 7) / 8; }

/// Bit `i` of an Arrow bitmap.
inline bool BitAt(std::span<const uint8_t> bitmap, uint64_t i) {
  return (bitmap[i / 8] >> (i % 8)) & 1u;
}

/// A host column, borrowed for the duration of the Run that reads it: the
/// payload input of a build. Every payload column of a build has the build's
/// total key rows (BuildIndexNodeT: all key chunks; batch builds: all chunks,
/// masked-out rows included).
struct ColumnView {
  ColumnType type = ColumnType::kInt32;
  uint64_t rows = 0;
  /// Fixed width: rows * ColumnWidth(type) bytes. kBool: a bitmap of `rows` bits
  /// (at least BitmapBytes(rows) bytes). variable width: the value bytes; row i is
  /// data[offsets[i], offsets[i + 1]).
  std::span<const std::byte> data;
  /// Variable width only: rows + 1 non-decreasing offsets, offsets[rows] <= data.size().
  std::span<const uint64_t> offsets;
  /// Empty: no nulls. Else a bitmap of `rows` bits (at least BitmapBytes(rows)
  /// bytes), 0 = null. A null row's value is ignored.
  std::span<const uint8_t> validity;
};

/// What a backend needs to know of a payload column ahead of a build (memory
/// estimates: Backend::PayloadBytes, BuildShape::payload).
struct PayloadShape {
  ColumnType type = ColumnType::kInt32;
  /// The column has a validity bitmap.
  bool nullable = false;
  /// Variable width: value bytes of all rows (an upper bound on what is retained).
  uint64_t string_bytes = 0;

  friend bool operator==(const PayloadShape&, const PayloadShape&) = default;
};

/// The shape of a column (its type, validity and string bytes).
PayloadShape PayloadShapeOf(const ColumnView& column);

/// Bytes a payload column of `shape` occupies when stored for a table of `slots`
/// slots, on either backend (payload is kept in slot order, docs/engine.md
/// "Payload"): fixed width slots * width; kBool BitmapBytes(slots); variable width (slots + 1) * 8 bytes of
/// offsets plus the retained bytes (at most shape.string_bytes, which this
/// counts); plus BitmapBytes(slots) of validity when nullable.
uint64_t PayloadStorageBytes(uint64_t slots, const PayloadShape& shape);

/// A payload column as stored by an index after a build.
struct PayloadColumnInfo {
  ColumnType type = ColumnType::kInt32;
  /// Retained values that are null (one value per retained key).
  uint64_t null_count = 0;
  /// Backend memory the column occupies (values, validity, string offsets and bytes).
  uint64_t bytes = 0;

  friend bool operator==(const PayloadColumnInfo&, const PayloadColumnInfo&) = default;
};

/// Where a lookup or a join writes one gathered payload column. Row r of the
/// output is the payload value of the key matched by output row r (lookup: query
/// row r; join: pair r of the batch), taken from the duplicate winner of the
/// build; it is null where the key is missing or the stored value is null.
/// Outputs have `rows` positions: the lookup's query rows, or the join batch's
/// pair capacity (out_left_rows.size()), of which the first min(count, capacity)
/// are written and the rest left as they were.
struct GatherOutput {
  /// Position of the column in the index's payload (HashIndex::payload()).
  uint32_t column = 0;
  /// Fixed width: rows * width bytes (0 where null). kBool: a bitmap of BitmapBytes(rows)
  /// bytes (0 where null). Variable width: unused (empty).
  std::span<std::byte> data;
  /// Required: BitmapBytes(rows) bytes, 1 = value present. Bits past the
  /// written rows in the last byte are 0.
  std::span<uint8_t> validity;
  /// Variable width only: rows + 1 offsets into *string_bytes, offsets[0] = 0 (Arrow's
  /// int32 string offsets; a null or missing row is empty).
  std::span<uint32_t> offsets;
  /// Variable width only: resized to the written rows' total bytes and filled.
  std::string* string_bytes = nullptr;
  /// Variable width only: a gather whose bytes would exceed this fails with
  /// RESOURCE_EXHAUSTED naming both numbers, before anything is written. At most
  /// 2^31 - 1 (int32 offsets).
  uint64_t max_string_bytes = 0x7fffffff;
  /// Optional host output: written rows with validity 0.
  uint64_t* null_count = nullptr;
};

}  // namespace gpujoin::engine
