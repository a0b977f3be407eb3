// Moving rows of wire columns between a request and its shards' parts
// (gpujoin-router, docs/operations.md "Sharding"): a batch's rows are split by
// the shard of their key, each part keeps its rows in input order, and the
// parts' answers are merged back into input order.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "gpujoin/engine/key_columns.hpp"
#include "gpujoin/v1/gpujoin.pb.h"

namespace gpujoin::server::router {

/// Where every row of a batch goes: `rows[p]` are the input rows of part p in
/// input order; input row r is row `position[r]` of part `part[r]`.
struct RowSplit {
  std::vector<std::vector<uint32_t>> rows;
  std::vector<uint32_t> part;
  std::vector<uint32_t> position;
};

/// The split of rows whose parts are `parts` (each < `count`).
RowSplit SplitRows(std::span<const uint32_t> parts, uint32_t count);

/// A row of a source column: source `source`, row `row`.
struct RowRef {
  uint32_t source = 0;
  uint32_t row = 0;
};

/// A column whose row i is `refs[i]` of `sources` (all of one type; fixed
/// width, BOOL bitmaps, STRING/BINARY int32 offsets, validity), named as the
/// first source. INVALID_ARGUMENT naming `field` when a source's buffers are
/// too short for its rows or the types differ.
absl::StatusOr<v1::Column> GatherColumn(std::span<const v1::Column* const> sources,
                                        std::span<const RowRef> refs, std::string_view field);

/// A request's column whose buffers were checked once (CheckColumn), so that
/// its rows can be taken for every shard without checking it again.
struct CheckedColumn {
  const v1::Column* column = nullptr;
  int width = 0;  ///< value bytes; 0: a BOOL bitmap; -1: STRING/BINARY offsets
};

/// Checks `column` as the shards would (sizes, offsets, UTF-8): INVALID_ARGUMENT
/// naming `field` otherwise. The result refers to `column`.
absl::StatusOr<CheckedColumn> CheckColumn(const v1::Column& column, std::string_view field);

/// `column` at `rows` (a part of a request), keeping its validity shape.
absl::StatusOr<v1::Column> TakeColumnRows(const CheckedColumn& column,
                                          std::span<const uint32_t> rows, std::string_view field);
/// The same for a column taken once: checks it first.
absl::StatusOr<v1::Column> TakeColumnRows(const v1::Column& column, std::span<const uint32_t> rows,
                                          std::string_view field);

/// The little-endian words of a U32Column / U64Column (packed or a list).
absl::StatusOr<std::vector<uint32_t>> WordsOf(const v1::U32Column& c, std::string_view field);
absl::StatusOr<std::vector<uint64_t>> WordsOf(const v1::U64Column& c, std::string_view field);
/// A packed column of `words` at `rows`.
v1::U32Column PackedAt(std::span<const uint32_t> words, std::span<const uint32_t> rows);
v1::U64Column PackedAt(std::span<const uint64_t> words, std::span<const uint32_t> rows);

/// Engine views of a key schema's wire columns (for PartitionsOf; they borrow
/// the messages, and `offsets`, which holds aligned copies of the int32
/// offsets). INVALID_ARGUMENT naming `field` for a column that is not a key
/// column type or whose buffers do not fit its rows.
absl::StatusOr<engine::KeyColumns> KeyColumnsOf(
    const google::protobuf::RepeatedPtrField<v1::Column>& columns, std::string_view field,
    std::vector<std::vector<int32_t>>* offsets);

/// The keys of one set of request fields (`keys`, `keys64` or `key_columns`,
/// whichever is set; none: no rows) and the shard of every row, as the index
/// partitions them (engine::PartitionsOf).
class KeyedRows {
 public:
  /// Reads the keys; fields are named `prefix` + "keys", "keys64" or
  /// "key_columns" in errors (INVALID_ARGUMENT for malformed buffers).
  static absl::StatusOr<KeyedRows> Of(const v1::U32Column& keys, const v1::U64Column& keys64,
                                      bool has_keys, bool has_keys64,
                                      const google::protobuf::RepeatedPtrField<v1::Column>& columns,
                                      uint32_t shards, std::string_view prefix);

  uint64_t rows() const { return parts_.size(); }
  /// The shard of every row.
  std::span<const uint32_t> parts() const { return parts_; }
  /// Sets the keys of `rows` (in that order) into the fields of a part: the
  /// same kind of field as the request's (none when it had none).
  absl::Status Put(std::span<const uint32_t> rows, v1::U32Column* keys, v1::U64Column* keys64,
                   google::protobuf::RepeatedPtrField<v1::Column>* columns) const;

 private:
  enum class Kind { kNone, kWords32, kWords64, kColumns };
  Kind kind_ = Kind::kNone;
  std::string prefix_;
  const google::protobuf::RepeatedPtrField<v1::Column>* columns_ = nullptr;
  std::vector<uint32_t> words32_;
  std::vector<uint64_t> words64_;
  std::vector<uint32_t> parts_;
};

/// KeyedRows of a message with `keys`, `keys64` and `key_columns` fields.
template <class Message>
absl::StatusOr<KeyedRows> KeyedRowsOf(const Message& m, uint32_t shards, std::string_view prefix) {
  return KeyedRows::Of(m.keys(), m.keys64(), m.has_keys(), m.has_keys64(), m.key_columns(), shards,
                       prefix);
}

/// `request` with its keys replaced by those of `rows`.
template <class Message>
absl::StatusOr<Message> WithKeysAt(const Message& request, const KeyedRows& keys,
                                   std::span<const uint32_t> rows) {
  Message part = request;
  part.clear_keys();
  part.clear_keys64();
  part.clear_key_columns();
  absl::Status put =
      keys.Put(rows, part.mutable_keys(), part.mutable_keys64(), part.mutable_key_columns());
  if (!put.ok()) return put;
  if (!request.has_keys()) part.clear_keys();
  if (!request.has_keys64()) part.clear_keys64();
  return part;
}

}  // namespace gpujoin::server::router
