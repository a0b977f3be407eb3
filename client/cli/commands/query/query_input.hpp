// The input of `gpujoin query` as typed columns: every column of the file is
// sent, typed from --schema, else as a lookup's key needs it (a key column of
// the index's type; an integer column for a uint32 or uint64 index), else
// inferred from the first batch (int64, uint64 above 2^63 - 1, float64, bool
// or string); later batches keep those types.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "columns/payload.hpp"
#include "gpujoin/client/column.hpp"
#include "input/table.hpp"

namespace gpujoin::cli {

/// What a lookup needs of the input column it reads a key from.
struct KeyNeed {
  std::string column;
  /// The exact type of a key-schema key column; nullopt: any integer type
  /// (a uint32 or uint64 index).
  std::optional<client::ColumnType> type;
  std::string why;  ///< "--lookup 'sensors:sensor_id': index 'sensors' has uint32 keys"
};

/// The type of every input column and where it came from.
struct InputTypes {
  std::vector<SchemaEntry> columns;  ///< one per header column, in header order
  /// Per column: "--schema", the KeyNeed's `why`, or "" (inferred).
  std::vector<std::string> source;

  /// "sensor_id:i64,type:str" (the --schema spelling).
  std::string Text() const { return FormatSchema(columns); }
};

/// The types of `first`'s columns (the first batch; its header names them
/// all). INVALID_ARGUMENT for a --schema entry naming no column of the file,
/// two lookups needing different types of one column, and a key column of an
/// integer index whose first-batch cells are not all integers (naming the
/// cell and the lookup). Needs of columns the file does not have (made by an
/// earlier step) are left to the server.
absl::StatusOr<InputTypes> TypeInput(const Table& first, std::string_view schema_text,
                                     const std::vector<KeyNeed>& needs);

/// `batch` as typed columns of `types`. A cell that is no value of its
/// column's type is INVALID_ARGUMENT naming the file, line and column, and
/// where the type came from (an inferred one: the first batch, and --schema).
absl::StatusOr<std::vector<client::Column>> TypedColumns(const Table& batch,
                                                         const InputTypes& types);

}  // namespace gpujoin::cli
