// The Mutate side of the load tester's workloads (--rpc mutate,
// --mutate-streams): the request a pool batch makes and the checks of its
// answer. The batches themselves come from MakeBatchPool (workload.hpp states
// what a Mutate batch upserts).
#pragma once

#include <cstdint>
#include <string>

#include "gpujoin/client/client.hpp"
#include "workload.hpp"

namespace gpujoin::loadtest {

/// The Mutate batch of `batch` (a pool of Rpc::kMutate): its keys upserted
/// with their mapped values (an index with explicit values; unknown mapping:
/// values derived from the row), and the pool's null payload columns. Borrows
/// from `pool` and `batch`.
client::MutateBatch MutateBatchOf(const BatchPool& pool, const PoolBatch& batch);

/// Checks a Mutate answer to `batch`: one upsert row per row, each distinct key
/// counted once as inserted or updated (a hit always as updated when the
/// mapping is known: the build put it there and nothing deletes it), nothing
/// deleted, and a mutation sequence past `previous_sequence` (the stream's last
/// answer's; batches of other streams may come between). Returns a
/// description of the first difference, or "" when the answer is right.
std::string CheckMutate(const BatchPool& pool, const PoolBatch& batch,
                        const client::MutateResult& result, uint64_t previous_sequence);

}  // namespace gpujoin::loadtest
