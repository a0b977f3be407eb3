// Turns input table columns into typed, Arrow-layout columns for the Hash RPC
// (`gpujoin hash --cols a,b[:type]`). Null cells become null rows (validity
// bit 0); a quoted empty CSV string is a valid empty string, not a null.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "commands/hash/hash_json.hpp"
#include "gpujoin/client/client.hpp"
#include "input/table.hpp"

namespace gpujoin::cli {

/// "uint32", "int32", "uint64", "int64", "float32", "float64", "string".
std::string_view HashTypeName(client::ColumnType type);

/// Parses HashTypeName's spelling ("binary" and "utf8" also mean string).
absl::StatusOr<client::ColumnType> ParseHashType(std::string_view name);

/// The narrowest type every non-null cell of column `col` parses as, in the
/// order uint32, int64, uint64, float64, string. An all-null column is uint32.
client::ColumnType InferHashType(const Table& table, size_t col);

/// One column encoded for hashing; owns its buffers.
struct HashInput {
  std::string name;
  client::ColumnType type = client::ColumnType::kUint32;
  std::vector<uint8_t> data;      ///< fixed-width LE values (0 for nulls), or string bytes
  std::vector<int32_t> offsets;   ///< string: rows + 1 offsets into data
  std::vector<uint8_t> validity;  ///< Arrow bitmap, LSB order; always present
  uint64_t rows = 0;
  uint64_t null_count = 0;
  /// Nested, JSON and the types beyond the first seven: the column's type and
  /// its rows (then `data`, `offsets` and `validity` are unused).
  std::optional<HashSchema> schema;
  std::optional<client::HashColumnBuilder> tree;

  /// A borrowed view for client::Client::HashAll (valid while this lives).
  client::HashColumn View() const;
  /// HashTypeName(type), or the schema's expression ("list<int64>", ...).
  std::string TypeName() const;
};

/// Encodes `spec` ("col" or "col:type") of `table`. `type` is a HashTypeName
/// or any type expression of ParseHashSchema (`list<int64>`, `int8`, ...); a
/// JSON Lines column whose values are all arrays or objects is nested, its
/// type inferred by InferJsonSchema unless given. Errors (INVALID_ARGUMENT)
/// name the column, and for unparsable cells the file, line and column.
absl::StatusOr<HashInput> BuildHashInput(const Table& table, std::string_view spec);

}  // namespace gpujoin::cli
