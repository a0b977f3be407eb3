// The value types of typed columns, shared by the engine, the server, the
// client library and the CLI: their names, widths and the Arrow-layout
// predicates that checks on either side of the wire use. Plain C++.
//
// Layouts follow Arrow's: fixed-width values little-endian, booleans and
// validity as bitmaps (gpujoin/common/bitmap.hpp), strings and lists as offsets
// into a child buffer.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"

namespace gpujoin {

/// The value type of a typed column. Payload columns and gathered columns take
/// kUint32 .. kString; hashed columns take every type. The order is the wire
/// enum's (gpujoin.v1.ColumnType, shifted by its UNSPECIFIED).
enum class ColumnType : uint8_t {
  kUint32,
  kInt32,
  kUint64,
  kInt64,
  kFloat32,
  kFloat64,
  kBinary,  ///< variable-length bytes, int32 offsets
  kBool,    ///< one bit per row
  kString,  ///< variable-length UTF-8 (treated as opaque bytes), int32 offsets
  // Hash inputs only (docs/hashing.md); payload and gather code refuses them.
  kInt8,
  kUint8,
  kInt16,
  kUint16,
  kFloat16,          ///< IEEE 754 binary16 bits
  kDecimal128,       ///< 16 bytes per value (Arrow decimal128, little-endian)
  kFixedSizeBinary,  ///< a column-wide byte width per value (0 allowed)
  kLargeBinary,      ///< variable-length bytes, int64 offsets
  kLargeString,      ///< variable-length UTF-8, int64 offsets
  kDictionary,       ///< integer indices into a dictionary (one child)
  kStruct,           ///< any number of child fields
  kList,             ///< int32 offsets into one child
  kLargeList,        ///< int64 offsets into one child
  kFixedSizeList,    ///< a column-wide number of elements of one child per row
  kMap,              ///< int32 offsets into two children (keys, items)
  kNull,             ///< every row null, no buffers
};

/// The number of ColumnType values (kNull + 1).
inline constexpr size_t kColumnTypeCount = static_cast<size_t>(ColumnType::kNull) + 1;

/// "uint32", "int32", "uint64", "int64", "float32", "float64", "binary", "bool", "string",
/// then the hash-only types: "int8", "uint8", "int16", "uint16", "float16", "decimal128",
/// "fixed_size_binary", "large_binary", "large_string", "dictionary", "struct", "list",
/// "large_list", "fixed_size_list", "map", "null"; "unknown" for any other value.
std::string_view ColumnTypeName(ColumnType type);

/// Parses a ColumnTypeName; INVALID_ARGUMENT naming the word and the choices otherwise.
absl::StatusOr<ColumnType> ParseColumnType(std::string_view name);

/// True for a value of the enum (kUint32 .. kNull).
constexpr bool IsKnownColumnType(ColumnType type) {
  return static_cast<size_t>(type) < kColumnTypeCount;
}

/// True for the types only hashing takes (kInt8 .. kNull); payload columns refuse them.
constexpr bool IsHashOnly(ColumnType type) { return type > ColumnType::kString; }

/// Bytes of one value of a fixed-width payload type (4 or 8); 0 for kBool,
/// kBinary, kString and the hash-only types.
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

/// Bytes of one value of any fixed-width type: 1 (int8, uint8), 2 (int16,
/// uint16, float16), 4, 8, 16 (decimal128); 0 for the others (a fixed-size
/// binary's width is a property of its column).
constexpr size_t ValueWidth(ColumnType type) {
  switch (type) {
    case ColumnType::kInt8:
    case ColumnType::kUint8:
      return 1;
    case ColumnType::kInt16:
    case ColumnType::kUint16:
    case ColumnType::kFloat16:
      return 2;
    case ColumnType::kDecimal128:
      return 16;
    default:
      return ColumnWidth(type);
  }
}

/// kBinary and kString: payload values are offsets into a byte buffer.
constexpr bool IsVariableWidth(ColumnType type) {
  return type == ColumnType::kBinary || type == ColumnType::kString;
}

/// The byte-string types of either offset width (binary, string and their large forms).
constexpr bool IsByteStringType(ColumnType type) {
  return type == ColumnType::kBinary || type == ColumnType::kString ||
         type == ColumnType::kLargeBinary || type == ColumnType::kLargeString;
}

/// The nested types whose rows are offset ranges of their children (list, large list, map).
constexpr bool IsOffsetListType(ColumnType type) {
  return type == ColumnType::kList || type == ColumnType::kLargeList || type == ColumnType::kMap;
}

/// The integer types a dictionary's indices may have (Arrow's: signed or
/// unsigned, 8 to 64 bits).
constexpr bool IsDictionaryIndexType(ColumnType type) {
  switch (type) {
    case ColumnType::kInt8:
    case ColumnType::kUint8:
    case ColumnType::kInt16:
    case ColumnType::kUint16:
    case ColumnType::kInt32:
    case ColumnType::kUint32:
    case ColumnType::kInt64:
    case ColumnType::kUint64:
      return true;
    default:
      return false;
  }
}

/// Children a column of `type` has: 1 (list, large list, fixed-size list,
/// dictionary), 2 (map), -1 (struct: any number), 0 (the others).
constexpr int ChildCount(ColumnType type) {
  switch (type) {
    case ColumnType::kStruct:
      return -1;
    case ColumnType::kList:
    case ColumnType::kLargeList:
    case ColumnType::kFixedSizeList:
    case ColumnType::kDictionary:
      return 1;
    case ColumnType::kMap:
      return 2;
    default:
      return 0;
  }
}

/// The C++ element types of the fixed-width payload column types.
template <typename T>
concept FixedWidthValue =
    std::same_as<T, uint32_t> || std::same_as<T, int32_t> || std::same_as<T, uint64_t> ||
    std::same_as<T, int64_t> || std::same_as<T, float> || std::same_as<T, double>;

/// The column type of element type T (uint32_t -> kUint32, ..., double -> kFloat64).
template <FixedWidthValue T>
constexpr ColumnType kColumnTypeOf = std::same_as<T, uint32_t>   ? ColumnType::kUint32
                                     : std::same_as<T, int32_t>  ? ColumnType::kInt32
                                     : std::same_as<T, uint64_t> ? ColumnType::kUint64
                                     : std::same_as<T, int64_t>  ? ColumnType::kInt64
                                     : std::same_as<T, float>    ? ColumnType::kFloat32
                                                                 : ColumnType::kFloat64;

}  // namespace gpujoin
