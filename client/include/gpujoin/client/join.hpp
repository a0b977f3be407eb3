// Join kinds, one Join request (its left batches) and its answer.
#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpujoin/client/column.hpp"
#include "gpujoin/client/keys.hpp"
#include "gpujoin/client/query_statistics.hpp"
#include "gpujoin/common/operation_kinds.hpp"

namespace gpujoin::client {

// Which left rows a join returns (JoinBatch::kind): kInner, kLeftOuter (a left row
// without a match gives one pair (left row, kNoMatch)), kLeftSemi (one pair per left
// row with a match, its first match's value), kLeftAnti (one pair (left row,
// kNoMatch) per row without one). Pairs come in left-row order, then right
// source-row order; counts are exact for every kind. The enum, its names and
// parser: gpujoin/common/operation_kinds.hpp.
using ::gpujoin::JoinKind;
using ::gpujoin::JoinKindName;
using ::gpujoin::ParseJoinKind;

/// One left batch of a Join request (borrowed).
struct JoinLeft {
  Keys keys;                            ///< of the index's key (integers or key columns)
  std::span<const uint32_t> left_rows;  ///< optional explicit left row IDs (same length as keys)
  uint32_t first_left_row = 0;          ///< else left row = first_left_row + row
  uint64_t capacity = 0;                ///< pair capacity; 0 = number of left rows
  bool want_found = false;
  bool want_probes = false;
  /// Count only: the result has count, overflow and statistics (found and
  /// probes when asked) but no pairs; `capacity` is ignored. Sizes a later request.
  bool count_only = false;
};

/// One Join request: one left batch is a plain join; several make a batch
/// join with one result per left batch.
struct JoinBatch {
  std::vector<JoinLeft> lefts;
  uint32_t max_probe_count = 0;      ///< 0 = the index's bound
  std::vector<std::string> select;   ///< payload columns to gather per pair, each at most once
  JoinKind kind = JoinKind::kInner;  ///< the kind of every left batch of the request
};

/// Result of one left batch: the [left row, right row] pairs in left order,
/// then right source-row order.
struct JoinPairs {
  std::vector<uint32_t> left_rows;  ///< min(count, capacity) of them
  /// The index values of the matched rows; kNoMatch for a left-outer row without
  /// a match and for every left-anti pair.
  std::vector<uint32_t> right_rows;
  uint64_t count = 0;  ///< pairs of the kind before truncation (exact)
  uint64_t capacity = 0;
  bool overflow = false;  ///< count > capacity, or the index build overflowed
  QueryStatistics statistics;
  std::vector<uint8_t> found;    ///< when asked
  std::vector<uint32_t> probes;  ///< when asked
  /// The selected payload columns in `select` order, one row per pair (the
  /// matched row's stored value; null where it is null or the pair has no match).
  std::vector<Column> columns;
  /// JoinAll: the index version of the last batch's answer (Join reports it in
  /// JoinResult::index_version).
  uint64_t index_version = 0;
  /// JoinAll: the mutation sequence the last batch's answer saw (Join reports
  /// it in JoinResult::mutation_sequence).
  uint64_t mutation_sequence = 0;
};

/// The answer to one Join request.
struct JoinResult {
  uint64_t batch_id = 0;
  uint64_t index_version = 0;
  uint64_t mutation_sequence = 0;  ///< the index's mutation sequence this request saw
  /// One per JoinBatch::lefts entry, reassembled when the server split the
  /// answer over several messages.
  std::vector<JoinPairs> results;
  absl::Status error;
  std::chrono::nanoseconds latency{0};
};

}  // namespace gpujoin::client
