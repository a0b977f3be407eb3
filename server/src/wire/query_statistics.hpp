// QueryStatistics on the wire: the engine's statistics of a lookup or a join batch.
#pragma once

#include "gpujoin/engine/types.hpp"
#include "gpujoin/v1/gpujoin.pb.h"

namespace gpujoin::server {

/// Copies `s` into `out`.
inline void FillQueryStatistics(const engine::QueryStatistics& s, v1::QueryStatistics* out) {
  out->set_found(s.found);
  out->set_missing(s.missing);
  out->set_total_probes(s.total_probes);
  out->set_max_probes(s.max_probes);
}

}  // namespace gpujoin::server
