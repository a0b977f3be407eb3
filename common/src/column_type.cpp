#include "gpujoin/common/column_type.hpp"

#include <array>

#include "names.hpp"

namespace gpujoin {
namespace {
// Indexed by ColumnType.
constexpr std::array<std::string_view, kColumnTypeCount> kNames = {
    "uint32",       "int32",        "uint64",          "int64",
    "float32",      "float64",      "binary",          "bool",
    "string",       "int8",         "uint8",           "int16",
    "uint16",       "float16",      "decimal128",      "fixed_size_binary",
    "large_binary", "large_string", "dictionary",      "struct",
    "list",         "large_list",   "fixed_size_list", "map",
    "null"};
}  // namespace

std::string_view ColumnTypeName(ColumnType type) {
  return detail::NameIn(kNames, static_cast<size_t>(type));
}

absl::StatusOr<ColumnType> ParseColumnType(std::string_view name) {
  return detail::ParseIn<ColumnType>(kNames, "column type", name);
}

}  // namespace gpujoin
