// The join options and output rows of `gpujoin join`: --how (the join kind)
// and --right-duplicates (the policy of an ad-hoc join's temporary index), and
// the table of joined rows, where a pair without a match (left outer and left
// anti joins) has empty right cells.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "gpujoin/client/client.hpp"
#include "input/table.hpp"
#include "output/output.hpp"

namespace gpujoin::cli {

/// Parses --how: "inner", "left" (left outer), "semi" (left semi) or "anti"
/// (left anti); INVALID_ARGUMENT naming the word and the choices otherwise.
absl::StatusOr<client::JoinKind> ParseJoinHow(std::string_view how);

/// The --how spelling of `kind` ("inner", "left", "semi", "anti").
std::string_view JoinHowName(client::JoinKind kind);

/// The duplicate policy of an ad-hoc join's temporary index: --right-duplicates
/// when given ("lowest_row" or "keep_all"), else keep_all (every right row
/// joins, as in SQL). INVALID_ARGUMENT naming the option for another word.
absl::StatusOr<client::DuplicatePolicy> RightDuplicatePolicy(std::string_view flag);

/// What the output rows of a join hold after the left row's cells.
enum class JoinRowShape {
  kRightFile,   ///< the cells of the right file's row whose number is the pair's right row
  kRowNumbers,  ///< `left_row`, `right_row` instead of the left cells (a resident join)
  kLeftOnly,    ///< nothing (a payload join: the gathered columns follow)
};

/// One output row per pair (left_rows[k], right_rows[k]), in pair order: the
/// left row's cells (kRowNumbers: the two row numbers), then per `shape` the
/// right row's cells, then the gathered columns' cells of pair k. A right row
/// of client::kNoMatch (a left outer row without a match, every anti row) has
/// null right cells and a null `right_row`. The table generates its rows from
/// `left` and `right`, which must outlive it (`right` is used with kRightFile
/// only), and owns the pairs and `gathered`. INVALID_ARGUMENT when a left or
/// right row is not a row of its file (naming `index`), or when the pairs and
/// columns differ in length.
absl::StatusOr<ResultTable> JoinRowsTable(const Table& left, const Table* right, JoinRowShape shape,
                                          std::string_view index, std::vector<uint32_t> left_rows,
                                          std::vector<uint32_t> right_rows,
                                          std::vector<client::Column> gathered);

}  // namespace gpujoin::cli
