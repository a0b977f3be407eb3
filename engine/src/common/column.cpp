// Typed column helpers shared by every backend: type names and payload sizes.
#include "gpujoin/engine/column.hpp"

#include <array>
#include <string>

#include "absl/strings/str_cat.h"

namespace gpujoin::engine {

namespace {
// Indexed by ColumnType.
constexpr std::array<std::string_view, 25> kTypeNames = {
    "uint32",       "int32",        "uint64",          "int64",
    "float32",      "float64",      "binary",          "bool",
    "string",       "int8",         "uint8",           "int16",
    "uint16",       "float16",      "decimal128",      "fixed_size_binary",
    "large_binary", "large_string", "dictionary",      "struct",
    "list",         "large_list",   "fixed_size_list", "map",
    "null"};
static_assert(kTypeNames.size() == static_cast<size_t>(ColumnType::kNull) + 1);
}  // namespace

std::string_view ColumnTypeName(ColumnType type) {
  const auto i = static_cast<size_t>(type);
  return i < kTypeNames.size() ? kTypeNames[i] : "unknown";
}

absl::StatusOr<ColumnType> ParseColumnType(std::string_view name) {
  for (size_t i = 0; i < kTypeNames.size(); ++i) {
    if (kTypeNames[i] == name) return static_cast<ColumnType>(i);
  }
  std::string expected;
  for (std::string_view n : kTypeNames) {
    if (!expected.empty()) expected += ", ";
    expected += n;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown column type \"", std::string(name),
                                                 "\" (expected one of ", expected, ")"));
}

PayloadShape PayloadShapeOf(const ColumnView& column) {
  PayloadShape shape;
  shape.type = column.type;
  shape.nullable = !column.validity.empty();
  if (IsVariableWidth(column.type) && column.offsets.size() == column.rows + 1) {
    shape.string_bytes = column.offsets[column.rows] - column.offsets[0];
  }
  return shape;
}

uint64_t PayloadStorageBytes(uint64_t slots, const PayloadShape& shape) {
  uint64_t bytes = 0;
  switch (shape.type) {
    case ColumnType::kBool:
      bytes = BitmapBytes(slots);
      break;
    case ColumnType::kBinary:
    case ColumnType::kString:
      bytes = (slots + 1) * sizeof(uint64_t) + shape.string_bytes;
      break;
    default:
      bytes = slots * ColumnWidth(shape.type);
      break;
  }
  if (shape.nullable) bytes += BitmapBytes(slots);
  return bytes;
}

}  // namespace gpujoin::engine
