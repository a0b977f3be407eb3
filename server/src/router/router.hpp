// gpujoin-router: the gpujoin.v1 API served in front of N gpujoind shards
// (docs/operations.md "Sharding"). Every index is partitioned over the shards
// by engine::PartitionsOf of its keys; a call is split by key, sent to the
// shards concurrently and merged in input order. A shard that fails, or that
// serves another version of the index, fails the call naming the shard:
// never a partial answer.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace grpc {
class Channel;
}
namespace prometheus {
class Registry;
}

namespace gpujoin::server::router {

struct RouterConfig {
  std::string listen = "127.0.0.1:50052";
  std::string metrics_listen = "127.0.0.1:9465";
  std::string tls_cert, tls_key, tls_client_ca;
  std::string auth_token_file;
  /// The shards' addresses, shard i at position i.
  std::vector<std::string> shards;
  /// TLS toward the shards: PEM roots that verify them ("" = plaintext).
  std::string shard_tls_ca;
  /// Bearer token sent to the shards ("" = none).
  std::string shard_token_file;
  /// Deadline of a unary call to a shard (streams to shards carry the
  /// caller's deadline and cancellation).
  double shard_timeout_seconds = 30;
  uint64_t max_message_bytes = uint64_t{256} << 20;
  /// Streams one client connection may hold open at once (RESOURCE_EXHAUSTED
  /// beyond, naming --max-streams-per-connection), as gpujoind's.
  uint32_t max_streams_per_connection = 64;
  /// Most groups of an Aggregate stream (the router holds its totals).
  uint64_t max_aggregate_groups = uint64_t{1} << 22;
  /// Channels to the shards, shard i at position i, instead of dialing
  /// `shards` (which then only names them): a device group's in-process members.
  std::vector<std::shared_ptr<grpc::Channel>> shard_channels;
  /// What GetServerInfo's device_name calls the shards ("3 shards: ...").
  std::string shards_noun = "shards";
  /// The shards' memory is one host's (a device group's host devices):
  /// GetServerInfo's device_memory_total_bytes is one shard's, not their sum.
  bool shards_share_memory = false;
  /// Who says SERVING / NOT_SERVING in the log.
  std::string log_name = "gpujoin-router";
  /// Shutdown: seconds health says NOT_SERVING before the listener closes, then
  /// the most seconds calls in flight may take to end.
  double drain_grace_seconds = 0;
  double drain_timeout_seconds = 5;
};

/// Expands `--shard-pattern` ('gpujoind-{i}.gpujoind:50051') for i = 0 .. count - 1.
absl::StatusOr<std::vector<std::string>> ExpandShardPattern(const std::string& pattern,
                                                            uint32_t count);

class Router {
 public:
  /// Starts serving (the shards need not be up: health says NOT_SERVING until
  /// every shard serves).
  static absl::StatusOr<std::unique_ptr<Router>> Start(const RouterConfig& config);
  virtual ~Router() = default;
  virtual std::string address() const = 0;
  virtual std::string metrics_address() const = 0;
  /// The per-shard metrics (what /metrics exposes).
  virtual std::shared_ptr<prometheus::Registry> metrics_registry() const = 0;
  /// Health as the shards make it (SERVING while every shard serves).
  virtual bool serving() const = 0;
  /// Stops accepting calls and waits for the calls in flight.
  virtual void Shutdown() = 0;
  virtual void Wait() = 0;
};

}  // namespace gpujoin::server::router
