// The clock the reactors time RPCs and stream batches with (gpujoin_rpc_duration_seconds).
#pragma once

#include <chrono>

namespace gpujoin::server::detail {

using Clock = std::chrono::steady_clock;

/// Seconds from `start` to now.
inline double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace gpujoin::server::detail
