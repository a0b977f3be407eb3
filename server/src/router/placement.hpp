// Where each index lives over the shards, as the router last learnt it
// (IndexSpec.placement; docs/operations.md "Replicated indexes"). A
// partitioned index's batches are split by key; a replicated index's run
// whole on one replica, in turn. The view is a cache that may be stale: a
// shard refuses a whole batch for a partitioned index (LookupRequest.replica,
// JoinRequest.replica), and the router then forgets the entry and splits the
// batch, which is right for either placement. Mutate and Query streams ask
// every shard when they start instead.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "gpujoin/v1/gpujoin.pb.h"
#include "grpcpp/grpcpp.h"

namespace gpujoin::server::router {

class ShardCalls;

class Placements {
 public:
  /// Most names remembered; past it the view starts afresh.
  static constexpr size_t kMaxEntries = 65536;

  struct Entry {
    uint64_t version = 0;
    bool replicated = false;
  };

  std::optional<Entry> Get(const std::string& index) const;
  void Put(const std::string& index, Entry entry);
  void Forget(const std::string& index);
  /// The shard that runs the next whole batch of a replicated index (in turn).
  uint32_t NextReplica(uint32_t shards) {
    return static_cast<uint32_t>(next_.fetch_add(1, std::memory_order_relaxed) % shards);
  }

 private:
  mutable std::mutex mu_;
  absl::flat_hash_map<std::string, Entry> entries_;
  std::atomic<uint64_t> next_{0};
};

/// Whether `index` is replicated over the shards: the cached entry, else
/// the first serving shard's DescribeIndex (cached when it answers). An index the shard does
/// not know, or a failed call, reads as partitioned: the batch's own routing
/// then reports what is wrong.
bool IsReplicated(const ShardCalls& calls, grpc::ServerContext* ctx, const std::string& index);

/// Whether a shard refused a batch for its placement (engine::kPlacementRefusal).
bool IsPlacementRefusal(const v1::BatchError& error);

}  // namespace gpujoin::server::router
