// Payload columns in the gpujoin CLI: which input columns a build stores
// beside the index (`index build --columns`, `--schema`, `--no-payload`),
// their types (inferred from the data or given), their encoding as typed
// client columns, and the text of gathered result columns (lookup --select,
// join --right index:NAME). Errors name the option, or the file, line and column.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "gpujoin/client/column.hpp"
#include "gpujoin/client/index_info.hpp"
#include "input/table.hpp"
#include "output/output.hpp"

namespace gpujoin::cli {

/// The items of a comma-separated option ("a, b,c" -> a, b, c), blanks around
/// each trimmed and empty items dropped.
std::vector<std::string> SplitList(std::string_view text);

/// The --schema spelling of a payload type: "i32", "u32", "i64", "u64", "f32",
/// "f64", "bool", "str" (UTF-8 text), "bin" (any bytes).
std::string_view SchemaTypeName(client::ColumnType type);

/// Parses a SchemaTypeName; INVALID_ARGUMENT listing the names otherwise.
absl::StatusOr<client::ColumnType> ParseSchemaType(std::string_view name);

/// One `NAME:TYPE` of --schema.
struct SchemaEntry {
  std::string name;
  client::ColumnType type = client::ColumnType::kInt64;
};

/// Parses --schema "a:i64,b:f64,c:str". INVALID_ARGUMENT naming the entry for a
/// missing name or type, an unknown type, or a column given twice.
absl::StatusOr<std::vector<SchemaEntry>> ParseSchema(std::string_view text);

/// --schema text for `entries` ("a:i64,b:str"), which ParseSchema reads back.
std::string FormatSchema(const std::vector<SchemaEntry>& entries);

/// The type a build infers for column `col`: ignoring null and empty cells,
/// int64 when every cell is a decimal integer within int64, else float64 when
/// every one is a number (nan and inf included), else bool when every one is
/// true or false (any case), else string. A column without values is int64.
client::ColumnType InferPayloadType(const Table& table, size_t col);

/// True for a name a payload column may have: [A-Za-z0-9_.-]{1,128}.
bool ValidPayloadName(std::string_view name);

/// Which input columns a build stores, and as which types.
struct PayloadPlan {
  std::vector<size_t> columns;      ///< positions in the table's header, in payload order
  std::vector<SchemaEntry> schema;  ///< name and type of each
  std::vector<bool> from_schema;    ///< the type came from --schema (else inferred)
};

/// The payload of `index build`: the columns of `columns_flag` (comma
/// separated; nullopt = every column but the key columns `key` (--key: comma
/// separated) and `value`, in header order),
/// none with `no_payload`; types from `schema_text` where it names the column,
/// else inferred. INVALID_ARGUMENT naming the option for: --no-payload with
/// --columns or --schema, an unknown or repeated column, the key column in
/// --columns, a --schema column that is not stored, and a name a payload
/// column may not have.
absl::StatusOr<PayloadPlan> PlanPayload(const Table& table, std::string_view key,
                                        std::string_view value,
                                        const std::optional<std::string>& columns_flag,
                                        std::string_view schema_text, bool no_payload);

/// The payload of `index upsert` into resident index `index`: every column of
/// `table` (its header) but the key columns `key` (--key: comma separated) and
/// `value`, each typed as the index stores it, in header order. INVALID_ARGUMENT
/// naming the column for a column the index does not have (listing its
/// payload), and for a payload column of the index the table lacks (an upsert
/// carries every one).
absl::StatusOr<PayloadPlan> PlanPayloadForIndex(const Table& table, std::string_view key,
                                                std::string_view value,
                                                const client::IndexInfo& index);

/// Column `col` of `table` as a payload column of `type` named `name`. Null and
/// empty cells are nulls, except that a string column keeps an empty string (a
/// quoted "" in CSV) as a value. A cell that is no value of the type is
/// INVALID_ARGUMENT "FILE:LINE: column 'NAME' (N): 'TEXT' is not a valid i64"
/// (with " (--schema NAME:TYPE)" when `from_schema`); a string that is not
/// UTF-8 in a str column likewise.
absl::StatusOr<client::Column> PayloadColumn(const Table& table, size_t col,
                                             const SchemaEntry& entry, bool from_schema);

/// How a result column of `type` renders in JSON (numbers, floats, booleans, strings).
ColumnKind KindOf(client::ColumnType type);

/// Row r of a gathered column as text: integers in decimal, floats in the
/// shortest form that reads back as the same value ("NaN", "inf", "-inf"
/// included), booleans "true"/"false", strings as they are; nullopt for a null.
Cell CellOf(const client::Column& column, uint64_t r);

/// CellOf without a copy: a string row as a view of the column's bytes, any
/// other type spelled into `scratch` (overwritten) and viewed there; nullopt
/// for a null. The view lives until the column or `scratch` changes.
std::optional<std::string_view> CellViewOf(const client::Column& column, uint64_t r,
                                           std::string* scratch);

}  // namespace gpujoin::cli
