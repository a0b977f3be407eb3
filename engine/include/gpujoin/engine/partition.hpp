// Partitioning keys over N parts (docs/operations.md "Sharding"): the part of
// a key is the jump consistent hash (Lamping & Veach, 2014) of its 64-bit key
// hash, so that going from N to N + 1 parts moves about 1/(N + 1) of the keys,
// all to the new part. The key hash is the Hash RPC's hash64 of the key as a
// row of key columns: a key word as one column of its width (uint32 or uint64),
// a key schema's row as its columns. An index keyed by a uint32 word and one
// keyed by a single uint32 column therefore partition alike.
//
// The router (gpujoin-router) splits every index's keys by PartitionOf; each
// shard (gpujoind --shard I/N) checks the keys it is sent with the same
// function.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gpujoin/engine/key_columns.hpp"
#include "gpujoin/engine/types.hpp"

namespace gpujoin::engine {

/// The bucket in [0, buckets) of `key` (buckets >= 1).
uint32_t JumpHash(uint64_t key, uint32_t buckets);

/// The part of a key whose 64-bit key hash is `key_hash`.
inline uint32_t PartitionOfHash(uint64_t key_hash, uint32_t parts) {
  return JumpHash(key_hash, parts);
}

/// One part per row of `keys` (a key word span or a key schema's columns):
/// `out[r]` = the part of row r among `parts`. A key-schema row with a null
/// key column has no key and goes to part 0.
void PartitionsOf(std::span<const uint32_t> keys, uint32_t parts, std::span<uint32_t> out);
void PartitionsOf(std::span<const uint64_t> keys, uint32_t parts, std::span<uint32_t> out);
void PartitionsOf(const KeyColumns& keys, uint32_t parts, std::span<uint32_t> out);

/// The start of the FAILED_PRECONDITION message with which a shard refuses a
/// batch routed for another placement than its index has (a router's stale
/// view of IndexSpec.placement): the router then routes it again.
inline constexpr char kPlacementRefusal[] = "placement: ";

/// "I/N": this process serves part I of N (0 <= I < N, 1 <= N <= 65536).
struct ShardIdentity {
  uint32_t index = 0;
  uint32_t count = 1;
  bool sharded() const { return count > 1 || index != 0; }
};

/// Parses "I/N" (INVALID_ARGUMENT naming `flag` and the text otherwise).
absl::StatusOr<ShardIdentity> ParseShardIdentity(const std::string& text, const std::string& flag);

}  // namespace gpujoin::engine
