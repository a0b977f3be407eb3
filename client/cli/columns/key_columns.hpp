// The key a CLI command reads (--key, --on, --key-type): one integer column
// (the integer key types of columns.hpp), or key columns for string and
// composite keys (an index with a key schema). Every error names the file,
// the line and the column, or the option.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "columns/columns.hpp"
#include "gpujoin/client/client.hpp"
#include "input/table.hpp"

namespace gpujoin::cli {

/// --key-type as given: `auto`, `u32`, `u64`, `i64` (one integer key column:
/// KeyKind), `str` (every key column a string), or types per key column
/// (`id:i64,sku:str`; i32, i64, u32, u64, str, bin), the columns it does not
/// name inferred from the data.
struct KeyTypeFlag {
  KeyKind kind = KeyKind::kAuto;  ///< kColumns for `str` and per-column types
  std::optional<client::ColumnType> all;  ///< `str`
  std::vector<std::pair<std::string, client::ColumnType>> per_column;

  /// The type the flag gives key column `name`, if any.
  std::optional<client::ColumnType> TypeOf(std::string_view name) const;
};

/// Parses --key-type; INVALID_ARGUMENT naming the option and the word otherwise.
absl::StatusOr<KeyTypeFlag> ParseKeyTypeFlag(std::string_view text);

/// The --key-type word of a key column type: i32, i64, u32, u64, str, bin.
std::string_view KeyColumnTypeWord(client::ColumnType type);

/// The columns of --key (or of one side of --on): "a,b" split at commas.
std::vector<std::string> SplitKeyColumns(std::string_view text);

/// How a command reads its keys from a table.
struct KeyPlan {
  std::vector<std::string> columns;  ///< the input columns, in the key's order
  /// kU32, kU64, kI64: one integer column (an integer index); kColumns: key
  /// columns of `types`.
  KeyKind kind = KeyKind::kAuto;
  std::vector<client::ColumnType> types;  ///< kColumns: one per column

  /// "sku:str" or "tenant:i64,order:str" for key columns (the --key-type
  /// spelling), else the integer kind's name.
  std::string TypesText() const;
  /// kColumns: the key schema of an index keyed by these columns.
  std::vector<client::KeyColumnSpec> Schema() const;
};

/// The type column `name` of `table` has as a key column: int64 when every
/// non-null cell is an integer within int64, uint64 when one is above
/// 9223372036854775807 (and none negative), else string.
absl::StatusOr<client::ColumnType> InferKeyColumnType(const Table& table, std::string_view name);

/// The plan of a build or an ad-hoc join side, from its first batch: one
/// column that the flag leaves to an integer type (auto: when every cell is
/// an integer; binary key files always) is an integer key; several columns,
/// `str`, per-column types, or a column whose cells are not all integers make
/// key columns, each of the flag's type or inferred.
absl::StatusOr<KeyPlan> PlanKey(const Table& batch, std::vector<std::string> columns,
                                const KeyTypeFlag& flag);

/// The plan both sides of an ad-hoc join read their keys with: integer keys
/// of the wider kind when both are integer keys (WiderKeyKind), else key
/// columns whose types are the wider of both sides' per column (equal types
/// stay; two integer types make int64, or uint64 when either is uint64; a
/// string on either side makes a string). `right` gets its own column names.
/// INVALID_ARGUMENT when the sides have different numbers of key columns.
absl::StatusOr<std::pair<KeyPlan, KeyPlan>> JoinKeyPlans(const KeyPlan& left,
                                                         const KeyPlan& right);

/// The plan of a lookup or join against a resident index with key columns:
/// `columns` read as the index's key columns, in order; INVALID_ARGUMENT
/// naming the index's key when the count differs or --key-type disagrees.
absl::StatusOr<KeyPlan> PlanForKeyColumnsIndex(std::vector<std::string> columns,
                                               const KeyTypeFlag& flag,
                                               const client::IndexInfo& index,
                                               std::string_view option);

/// The plan of a lookup or join against resident index `index`, whose key
/// the input columns `key_text` (--key or --on: comma separated) are: for an
/// index with key columns PlanForKeyColumnsIndex; nullopt for an integer
/// index (the caller reads one integer column as it fits the index), or
/// INVALID_ARGUMENT when the text names several columns or the flag gives key
/// column types.
absl::StatusOr<std::optional<KeyPlan>> PlanForIndex(std::string_view key_text,
                                                    const KeyTypeFlag& flag,
                                                    const client::IndexInfo& index,
                                                    std::string_view option);

/// Reads the keys of input batches, in file order, as resident index `index`
/// takes them (lookup --key, index upsert|delete --key): its key columns
/// (PlanForIndex), or one integer column of the index's width whose type
/// --key-type gives or, for auto, the data tells (a uint64 index reads int64
/// keys when one is negative, KindForIndex; the batches after the first take
/// the one-pass path of KeyKindTracker::PlainKeys).
class IndexKeyReader {
 public:
  /// The reader of `key_text` (--key: comma separated) for `index`;
  /// INVALID_ARGUMENT (PlanForIndex, KindForIndex) when the columns or the flag
  /// do not fit the index, naming `option`.
  static absl::StatusOr<IndexKeyReader> Make(std::string key_text, const KeyTypeFlag& flag,
                                             const client::IndexInfo& index,
                                             std::string_view option);
  /// The keys of the next batch; INVALID_ARGUMENT naming the cell of a key
  /// that does not fit the index (ForIndex's reason appended).
  absl::StatusOr<KeyVector> Read(const Table& batch);

 private:
  IndexKeyReader() = default;
  std::string key_;
  KeyKind flag_ = KeyKind::kAuto;
  client::IndexInfo index_;
  std::optional<KeyPlan> column_plan_;
  KeyKindTracker tracker_;
  KeyKind last_kind_ = KeyKind::kAuto;  // the previous batch's key type
  bool first_ = true;
};

/// The keys of `table` as `plan` reads them (plan.kind kColumns: key columns;
/// else KeyColumn). A null cell of a key column is a null key (it never
/// matches); a cell that is no value of its column's type is INVALID_ARGUMENT
/// "FILE:LINE: column 'NAME' (N): 'TEXT' is not an int64 key (--key-type NAME:i64)".
absl::StatusOr<KeyVector> ReadKeys(const Table& table, const KeyPlan& plan);

}  // namespace gpujoin::cli
