// What every pipelined stream (Lookup, Join, Aggregate, Hash, Mutate) takes: its
// options, the source its batches come from and the sink its results go to.
#pragma once

#include <chrono>
#include <functional>
#include <optional>

#include "absl/status/status.h"

namespace gpujoin::client {

/// Options of one streaming call.
struct StreamOptions {
  /// Most batches sent but not yet answered (>= 1). The server may bound this
  /// further (ServerInfo::max_inflight_batches_per_stream); the stream then
  /// simply waits on the server's flow control.
  int max_in_flight = 4;
  /// Overrides ConnectOptions::deadline for this call; nullopt = the default.
  std::optional<std::chrono::milliseconds> deadline;
  /// When given, the call ends with CANCELLED as soon as this returns true
  /// (polled between batches), e.g. on SIGINT.
  std::function<bool()> cancelled;
};

/// Returns the next batch of a stream, or std::nullopt at the end.
template <typename Batch>
using BatchSource = std::function<std::optional<Batch>()>;
/// Receives every result in order. Returning a non-OK status cancels the
/// stream and becomes the return value of the streaming call.
template <typename Result>
using ResultSink = std::function<absl::Status(Result&&)>;

}  // namespace gpujoin::client
