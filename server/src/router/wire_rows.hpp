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

/// `column` at `rows` (a part of a request).
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

}  // namespace gpujoin::server::router
