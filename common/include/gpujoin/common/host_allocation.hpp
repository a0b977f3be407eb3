// A host allocation that cannot be had fails the request that asked for it, never
// the process: the server runs each request's work (a stream batch, a unary call)
// through CatchHostAllocation, which turns std::bad_alloc (and std::length_error
// from a size computation, e.g. std::string::resize past max_size) into
// RESOURCE_EXHAUSTED. Without it the exception would leave an executor thread and
// std::terminate would abort gpujoind with every other client's work.
#pragma once

#include <chrono>
#include <new>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>

#include "absl/status/status.h"

namespace gpujoin {

/// RESOURCE_EXHAUSTED for `what` (e.g. "Join batch 3") whose host allocation
/// failed with `reason` (the exception's name or message).
inline absl::Status HostMemoryExhausted(std::string_view what, std::string_view reason) {
  std::string message(what);
  message.append(": a host memory allocation failed (");
  message.append(reason);
  message.append("); the server is short of host memory: retry later, or send smaller requests");
  return absl::ResourceExhaustedError(message);
}

/// Runs `fn` (returning void), and again while it throws std::bad_alloc, up to
/// `attempts` times `pause` apart, then lets the exception go. For the few small
/// allocations that answer a request which just failed for want of host memory:
/// another thread may hold what was left for a moment. `fn` must be safe to run
/// again after it threw.
template <typename Fn>
void RetryHostAllocation(Fn&& fn, int attempts = 1000,
                         std::chrono::microseconds pause = std::chrono::milliseconds(1)) {
  for (int i = 1;; ++i) {
    try {
      fn();
      return;
    } catch (const std::bad_alloc&) {
      if (i >= attempts) throw;
    }
    std::this_thread::sleep_for(pause);
  }
}

namespace detail {

/// HostMemoryExhausted(what(), prefix + reason), built once the host has room
/// for the message again (RetryHostAllocation, up to 100 ms: another thread may
/// hold what was left for a moment), else RESOURCE_EXHAUSTED with no message,
/// which absl keeps without allocating: the code alone still reaches the client.
template <typename What>
absl::Status Exhausted(What&& what, const char* prefix, const char* reason) {
  absl::Status status(absl::StatusCode::kResourceExhausted, "");
  try {
    RetryHostAllocation(
        [&] {
          std::string why(prefix);
          why.append(reason);
          status = HostMemoryExhausted(what(), why);
        },
        100);
  } catch (const std::bad_alloc&) {
  } catch (const std::length_error&) {
  }
  return status;
}

}  // namespace detail

/// Runs `fn` (returning absl::Status) and returns its status, or
/// HostMemoryExhausted(what(), ...) when it throws std::bad_alloc or
/// std::length_error. `what` is a callable returning the name of the work (e.g.
/// "Join batch 3 of the stream"), called only then, so that the name costs
/// nothing on the way that succeeds. Other exceptions propagate. `fn` must leave
/// shared state consistent when an allocation throws (RAII), as the engine and
/// the server do. The failure path never throws itself.
template <typename What, typename Fn>
absl::Status CatchHostAllocation(What&& what, Fn&& fn) {
  try {
    return std::forward<Fn>(fn)();
  } catch (const std::bad_alloc& e) {
    return detail::Exhausted(std::forward<What>(what), "", e.what());
  } catch (const std::length_error& e) {
    return detail::Exhausted(std::forward<What>(what), "std::length_error: ", e.what());
  }
}

}  // namespace gpujoin
