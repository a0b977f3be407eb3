// Nested hash columns for `gpujoin hash`: a type expression
// (`--cols c:list<int64>`, `c:struct<a: int32, b: list<string>>`), the type
// inferred from JSON Lines cells that hold arrays and objects (arrays -> list,
// objects -> struct, the narrowest scalar type, nulls allowed anywhere), and
// the rows appended to a client::HashColumnBuilder in Arrow's layout.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "gpujoin/client/hash_column.hpp"
#include "input/table.hpp"

namespace gpujoin::cli {

/// A column type tree. kStruct: `fields` (name, type); kList, kLargeList,
/// kFixedSizeList (`size` values per row): one element type in `fields` (name
/// ""); kMap: key then item type (names "key", "value").
struct HashSchema {
  client::ColumnType type = client::ColumnType::kNull;
  uint32_t size = 0;  ///< kFixedSizeBinary bytes; kFixedSizeList values per row
  std::vector<std::pair<std::string, HashSchema>> fields;

  /// The expression ParseHashSchema reads back: "int64", "list<string>",
  /// "struct<a: int32, b: list<float64>>", "map<string, int64>", ...
  std::string ToString() const;
  bool nested() const;
};

/// Parses a type expression: a scalar name (uint32, int32, uint64, int64,
/// float32, float64, string, binary, bool, int8, uint8, int16, uint16, null,
/// large_string, large_binary, fixed_size_binary<N>), `list<T>`,
/// `large_list<T>`, `fixed_size_list<T, N>`, `struct<name: T, ...>`,
/// `map<K, V>` (from JSON objects: the keys become K, which must be a string
/// type). INVALID_ARGUMENT naming the position otherwise.
absl::StatusOr<HashSchema> ParseHashSchema(std::string_view text);

/// Splits `--cols` at the commas outside angle brackets: "a,b:map<string, int64>"
/// is "a" and "b:map<string, int64>". Empty items are dropped.
std::vector<std::string> SplitHashColumnSpecs(std::string_view cols);

/// True when every non-null cell of column `col` of a JSON Lines table holds a
/// JSON array or object (and at least one does).
bool IsNestedJsonColumn(const Table& table, size_t col);

/// The type of the JSON values of column `col`: arrays are lists, objects are
/// structs (fields in first-seen order, a missing key a null field), numbers
/// the narrowest of uint32, int64, uint64, float64, booleans bool, strings
/// string; a value only ever null (or an empty list's elements) is null.
/// INVALID_ARGUMENT naming the cell and the path for values that do not mix
/// (a number and a string, a list and an object).
absl::StatusOr<HashSchema> InferJsonSchema(const Table& table, size_t col, std::string_view name);

/// The builder of an empty column of `schema` (children added).
client::HashColumnBuilder MakeHashBuilder(const HashSchema& schema);

/// Appends one cell (std::nullopt: a null row) of column `name` to `builder`
/// (made by MakeHashBuilder(schema)). A nested schema reads the cell as JSON; a
/// scalar one as text as well (a number's spelling, a string's characters).
/// `where` is the "FILE:LINE" of the cell for errors.
absl::Status AppendHashCell(const HashSchema& schema, const Cell& cell, std::string_view where,
                            std::string_view name, client::HashColumnBuilder* builder);

}  // namespace gpujoin::cli
