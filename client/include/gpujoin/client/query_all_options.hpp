// Options of Client::LookupAll and Client::JoinAll.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "gpujoin/client/join.hpp"
#include "gpujoin/client/progress.hpp"
#include "gpujoin/client/stream_options.hpp"

namespace gpujoin::client {

/// Options of LookupAll and JoinAll.
struct QueryAllOptions {
  size_t batch_rows = 1 << 20;      ///< keys per request
  std::vector<std::string> select;  ///< payload columns to gather
  /// JoinAll: pairs per batch. 0 = every pair: the batch's rows, or on a
  /// kKeepAll index (inner and left-outer joins) the exact count of a count-only
  /// pass (see JoinAll).
  uint64_t capacity = 0;
  /// JoinAll: most pairs kept over all batches (0 = no bound). Pairs beyond it
  /// are counted in `count` (and make `overflow`) but not returned; no batch
  /// asks for more pairs than it (sized joins: than the batches before leave).
  uint64_t max_pairs = 0;
  bool count_only = false;           ///< JoinAll: counts and statistics only, no pairs
  JoinKind kind = JoinKind::kInner;  ///< JoinAll
  bool want_match_counts = false;    ///< LookupAll: LookupResult::match_counts
  /// Probe bound of every request (LookupBatch/JoinBatch::max_probe_count): 0 =
  /// the index's bound; at most its capacity. A key further than this many
  /// slots from its home slot is missing.
  uint32_t max_probe_count = 0;
  StreamOptions stream;
  ProgressCallback progress;  ///< may be empty; called as batches are answered
};

}  // namespace gpujoin::client
