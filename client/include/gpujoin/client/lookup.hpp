// One Lookup batch and its answer.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gpujoin/client/column.hpp"
#include "gpujoin/client/keys.hpp"
#include "gpujoin/client/query_statistics.hpp"

namespace gpujoin::client {

/// One Lookup batch (borrowed).
struct LookupBatch {
  Keys keys;                        ///< of the index's key (integers or key columns)
  bool want_probes = false;         ///< return per-row probe counts
  uint32_t max_probe_count = 0;     ///< 0 = the index's bound
  std::vector<std::string> select;  ///< payload columns to gather per row, each at most once
  /// Return per-row match counts (kKeepAll: the key's group size; kLowestRow: 1 or 0).
  bool want_match_counts = false;
};

/// The answer to one Lookup batch.
struct LookupResult {
  uint64_t batch_id = 0;       ///< 0-based position of the batch in the stream
  uint64_t index_version = 0;  ///< the index version this batch ran on
  /// The index's mutation sequence this batch saw (LookupAll: the last batch's;
  /// batches of one call may see different ones while mutations run).
  uint64_t mutation_sequence = 0;
  /// Per row: the value of the key's first (lowest-row) match; kNoMatch where missing.
  std::vector<uint32_t> values;
  std::vector<uint8_t> found;          ///< per row: 1 found, 0 missing
  std::vector<uint32_t> probes;        ///< per row, when asked
  std::vector<uint32_t> match_counts;  ///< per row, when asked: rows the key matches (0 missing)
  QueryStatistics statistics;
  /// The selected payload columns in `select` order, one row per key: the
  /// key's stored value (of its build's lowest source row), null where the key
  /// is missing or the value is null.
  std::vector<Column> columns;
  absl::Status error;                   ///< in-band error for this batch; results empty then
  std::chrono::nanoseconds latency{0};  ///< from the batch's write to its answer's arrival
};

}  // namespace gpujoin::client
