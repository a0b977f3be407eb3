// Per-batch probe statistics of lookups and joins.
#pragma once

#include <cstdint>

namespace gpujoin::client {

/// Query statistics [found, missing, total probes, max probes] of one batch.
struct QueryStatistics {
  uint64_t found = 0;
  uint64_t missing = 0;
  uint64_t total_probes = 0;
  uint64_t max_probes = 0;

  /// Adds another batch's statistics (sums; max of max_probes).
  void Merge(const QueryStatistics& other);
};

}  // namespace gpujoin::client
