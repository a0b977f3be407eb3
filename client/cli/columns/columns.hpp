// Typed views of input table columns for the gpujoin CLI: integer keys of the
// --key-type (uint32, uint64, int64, or inferred from the data), uint32 values,
// float32 values, masks, and dictionary encoding of group labels. Every error
// names the file, the line and the column.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "gpujoin/client/client.hpp"
#include "input/table.hpp"

namespace gpujoin::cli {

/// The CLI's key types (--key-type): kAuto infers one from the data.
/// int64 keys travel as their bit pattern in a uint64 index. kColumns is a key
/// of typed key columns (string and composite keys: columns/key_columns.hpp).
enum class KeyKind { kAuto, kU32, kU64, kI64, kColumns };

/// Parses "auto", "u32", "u64", "i64"; INVALID_ARGUMENT otherwise.
absl::StatusOr<KeyKind> ParseKeyKind(std::string_view name);
/// "auto", "u32", "u64", "i64", "columns".
std::string_view KeyKindName(KeyKind kind);
/// "uint32", "uint64", "int64" (the words of the error messages); "auto" for
/// kAuto, "columns" for kColumns.
std::string_view KeyKindTypeName(KeyKind kind);
/// The index key type that holds keys of `kind` (kU32 -> uint32, kColumns ->
/// columns, else uint64).
client::KeyType WireKeyType(KeyKind kind);

/// Parses an integer key of type T (uint32_t, uint64_t or int64_t) written in
/// decimal (int64: with an optional '-') or as 0x-prefixed hex (the bits: for
/// int64, 0xffffffffffffffff is -1), with optional surrounding spaces; nullopt
/// for anything else (empty, out of range, trailing characters).
template <typename T>
std::optional<T> ParseKeyText(std::string_view s);

/// ParseKeyText<uint32_t>.
std::optional<uint32_t> ParseU32Text(std::string_view s);

/// Parses a float32 (decimal, exponent, "nan", "inf"); nullopt otherwise.
std::optional<float> ParseF32Text(std::string_view s);

/// Keys of one column as one CLI key type; uint64 and int64 keys are held as
/// their 64-bit patterns in `u64`; a key of key columns (kColumns) as typed
/// columns.
struct KeyVector {
  KeyKind kind = KeyKind::kU32;
  std::vector<uint32_t> u32;            ///< kU32
  std::vector<uint64_t> u64;            ///< kU64, kI64
  std::vector<client::Column> columns;  ///< kColumns: one per key column, of one length

  size_t size() const {
    if (kind == KeyKind::kColumns) return columns.empty() ? 0 : columns[0].length;
    return kind == KeyKind::kU32 ? u32.size() : u64.size();
  }
  /// The keys as the client sends them (uint32 or uint64 keys, or key
  /// columns); valid until this vector is changed, moved or copied.
  client::Keys keys() const {
    if (kind == KeyKind::kColumns) {
      views_.clear();
      for (const client::Column& c : columns) views_.push_back(c.view());
      return client::Keys(views_);
    }
    return kind == KeyKind::kU32 ? client::Keys(u32) : client::Keys(u64);
  }

 private:
  mutable std::vector<client::ColumnView> views_;  // kColumns: what keys() borrows
};

/// The key type --key-type auto gives column `name`: a binary file's own type
/// (.u32, .u64, .i64); else int64 when a key is negative, uint64 when one is above
/// 4294967295, uint32 otherwise. INVALID_ARGUMENT naming the cell for a cell that
/// is no integer ("'abc' is not an integer key; string keys: see docs/cli.md"),
/// wider than 64 bits, or that fits no type with the others (a key above
/// 9223372036854775807 in a column with negative keys).
absl::StatusOr<KeyKind> InferKeyKind(const Table& table, std::string_view name);

/// InferKeyKind over a file read in batches: Observe() each batch in order;
/// the errors are InferKeyKind's, a conflict between batches included (a
/// negative key in one, a key above 9223372036854775807 in another).
class KeyKindTracker {
 public:
  /// Checks column `name` of `batch`; the key type of every batch so far.
  absl::StatusOr<KeyKind> Observe(const Table& batch, std::string_view name);
  /// The key type of the batches so far (kU32 before any).
  KeyKind kind() const;
  /// Observe(batch) and KeyColumn(batch, name, kind) in one pass, for the
  /// common batch whose every key cell is a plain decimal of at most 18 digits
  /// that fits `kind` (not kAuto): such keys change what the tracker knows only
  /// as Observe would (a key above 4294967295) and are never an error.
  /// nullopt for any other batch (a missing column too), which then takes
  /// Observe and KeyColumn, with their results and errors.
  std::optional<KeyVector> PlainKeys(const Table& batch, std::string_view name, KeyKind kind);

 private:
  struct Seen {
    uint64_t line = 0;
    std::string shown;
  };
  std::optional<Seen> negative_, above_i64_;
  bool above_u32_ = false;
  std::optional<KeyKind> binary_;
};

/// The key type both sides of a join fit: the wider of the two (u32 < u64, u32 <
/// i64); uint64 with int64 is int64 (the uint64 side must then fit int64, which
/// KeyColumn checks).
KeyKind WiderKeyKind(KeyKind a, KeyKind b);

/// The key type of a lookup or join against a resident index whose keys are
/// `index_type`: an explicit `flag` must have the index's width
/// (INVALID_ARGUMENT naming --key-type and the index otherwise); for kAuto, a
/// uint32 index takes u32 (wider data then fails to parse, naming the cell) and
/// a uint64 index i64 when `data` (InferKeyKind) is i64, else u64.
absl::StatusOr<KeyKind> KindForIndex(KeyKind flag, KeyKind data, client::KeyType index_type,
                                     std::string_view index);

/// `keys`, or its error with "; index 'NAME' has uint32 keys" appended (the
/// reason a resident lookup or join parses the column as it does).
absl::StatusOr<KeyVector> ForIndex(absl::StatusOr<KeyVector> keys, const client::IndexInfo& index);

/// Column `name` of `table` as keys of `kind` (kAuto: InferKeyKind first). A null
/// or non-numeric cell, or a key outside the type, is INVALID_ARGUMENT "FILE:LINE:
/// column 'NAME' (N): 'TEXT' is not a uint64 key (negative; ...)".
absl::StatusOr<KeyVector> KeyColumn(const Table& table, std::string_view name, KeyKind kind);

/// Column `name` of `table` as uint32 keys (KeyColumn of kU32).
absl::StatusOr<std::vector<uint32_t>> KeyColumn(const Table& table, std::string_view name);

/// Column `name` as uint32 values (index build --value). A null or non-numeric
/// cell, or one outside uint32, is INVALID_ARGUMENT "...: 'TEXT' is not a uint32
/// value".
absl::StatusOr<std::vector<uint32_t>> U32ValueColumn(const Table& table, std::string_view name);

/// Column `name` as float32 values. Null cells become NaN (which the
/// aggregation ignores); non-numeric cells are INVALID_ARGUMENT with position.
absl::StatusOr<std::vector<float>> ValueColumn(const Table& table, std::string_view name);

/// Column `name` as a 0/1 mask: uint32 (nonzero = 1), "true"/"false"; a null
/// cell is 0. Anything else is INVALID_ARGUMENT with position.
absl::StatusOr<std::vector<uint32_t>> MaskColumn(const Table& table, std::string_view name);

/// Group codes of one column for aggregation.
struct GroupEncoding {
  /// Per row: the dense group code; rows with a null label get code 0 and
  /// `present[row] == 0`.
  std::vector<uint32_t> codes;
  std::vector<uint32_t> present;  ///< 1 where the row has a label
  /// The label of every group code, in code order. Only groups that occur are
  /// listed in `order`.
  std::vector<std::string> labels;
  /// The group codes that occur, in output order (numeric labels ascending,
  /// else byte-wise ascending).
  std::vector<uint32_t> order;
  uint32_t groups = 0;      ///< number of codes (the Aggregate `groups`)
  bool dictionary = false;  ///< true when labels were dictionary-encoded
};

/// EncodeGroups over a file read twice in batches: Observe() every batch of a
/// first pass (it keeps the distinct labels only), Finish(), then Encode() the
/// batches of a second pass.
class GroupEncoder {
 public:
  explicit GroupEncoder(uint32_t max_direct = 1u << 16) : max_direct_(max_direct) {}
  /// Notes the labels of column `name`; INVALID_ARGUMENT for a missing column.
  absl::Status Observe(const Table& batch, std::string_view name);
  /// The groups (labels, order, groups, dictionary; no codes); INVALID_ARGUMENT
  /// naming `source` and the column for too many distinct labels.
  absl::StatusOr<GroupEncoding> Finish(std::string_view source, std::string_view name);
  /// The codes and presence of `batch`'s rows (after Finish).
  absl::Status Encode(const Table& batch, std::string_view name, std::vector<uint32_t>* codes,
                      std::vector<uint32_t>* present) const;

 private:
  uint32_t max_direct_;
  bool direct_ = true;
  bool numeric_ = true;
  std::vector<bool> seen_;  // direct: which labels occur
  std::unordered_map<std::string, uint32_t> code_;
  bool finished_direct_ = true;
};

/// Encodes column `name` as dense group codes. When every label is a uint32
/// no larger than `max_direct` the values are used directly (groups = max + 1);
/// otherwise (strings, sparse IDs) the distinct labels are sorted and numbered
/// 0..n-1, and the labels are kept to print with the results.
absl::StatusOr<GroupEncoding> EncodeGroups(const Table& table, std::string_view name,
                                           uint32_t max_direct = 1u << 16);

}  // namespace gpujoin::cli
