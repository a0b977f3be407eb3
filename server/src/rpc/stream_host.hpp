// What the stream reactors (stream_reactor.cpp, build_reactor.cpp) need from the
// service that creates them: admission, drain registration, the stream and build
// slots, the batch executor, the operations and the metrics. GpuJoinService
// implements it; the reactors depend on this interface only, never on the
// service (as in gRPC's route_guide callback server), so service.cpp may create
// them without an include cycle.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "grpcpp/grpcpp.h"
#include "observe/metrics.hpp"
#include "ops/operations.hpp"
#include "rpc/executor.hpp"

namespace gpujoin::server {

/// absl::Status -> grpc::Status (the codes are the same numbers).
grpc::Status ToGrpcStatus(const absl::Status& status);

/// A stream that can be told to finish early when the server drains.
class DrainableStream {
 public:
  virtual ~DrainableStream() = default;
  /// Stop reading; answer the batches already read, then end with UNAVAILABLE.
  virtual void Drain() = 0;
};

/// The host of the stream reactors. Every method is thread-safe; the pointers
/// returned are not owned and outlive every reactor.
class StreamHost {
 public:
  virtual ~StreamHost() = default;

  /// Auth and drain checks at the start of a call; counts the error when not OK.
  virtual absl::Status Admit(grpc::CallbackServerContext* context, std::string_view rpc) = 0;
  /// Registers a stream to be told when the server drains (until Unregister).
  virtual void Register(DrainableStream* stream) = 0;
  virtual void Unregister(DrainableStream* stream) = 0;
  /// Takes one of the --max-concurrent-builds slots for a BuildIndex stream, or
  /// RESOURCE_EXHAUSTED naming the flag when all are taken (an open build holds
  /// its staged input, so the number of them bounds that memory).
  virtual absl::Status AcquireBuildSlot() = 0;
  /// Gives back a slot taken by AcquireBuildSlot.
  virtual void ReleaseBuildSlot() = 0;
  /// Counts a streaming call on its client connection (context->peer()), or
  /// RESOURCE_EXHAUSTED naming --max-streams-per-connection when that many are
  /// open there already. On OK `*peer` is the key ReleaseStream takes.
  virtual absl::Status AcquireStream(grpc::CallbackServerContext* context, std::string_view rpc,
                                     std::string* peer) = 0;
  /// Gives back a stream counted by AcquireStream.
  virtual void ReleaseStream(const std::string& peer) = 0;

  /// The request operations the batches run.
  virtual Operations* ops() const = 0;
  /// The batch executor (stream batches and builds run there).
  virtual Executor* executor() const = 0;
  /// The global --max-inflight-batches bound.
  virtual InflightLimiter* limiter() const = 0;
  virtual Metrics* metrics() const = 0;
};

}  // namespace gpujoin::server
