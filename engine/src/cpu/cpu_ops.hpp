// Host implementations of the command-graph nodes for the CPU backend. Each takes
// a node that CommandGraph::Validate accepted.
#pragma once

#include <cstddef>

#include "absl/status/status.h"
#include "cpu/cpu_hash_index.hpp"
#include "cpu/thread_pool.hpp"
#include "gpujoin/engine/graph.hpp"

namespace gpujoin::engine::cpu {

// The key-carrying nodes are templates on the key word K, instantiated for
// uint32_t and uint64_t in cpu_build.cpp and cpu_query.cpp.

// Builds insert sequentially in global row order; their payload columns are
// stored on the pool, and a kKeepAll build lays out its groups in row order. Host allocation
// failure throws std::bad_alloc: before the table is touched (everything but the variable-width
// bytes is allocated first) the index is left as it was, after it the index is left empty, as an
// empty build leaves it (no payload).

/// Rebuilds `index` from the node's rows, sequentially in global row order.
template <KeyWord K>
void RunBuild(const BuildIndexNodeT<K>& node, CpuHashIndex<K>& index, ThreadPool& pool);

/// Rebuilds `index` from ordered batch chunks.
template <KeyWord K>
void RunBatchBuild(const BuildBatchIndexNodeT<K>& node, CpuHashIndex<K>& index, ThreadPool& pool);

/// The same for a key schema: every row's key columns are stored (in row
/// order), its fingerprint computed (in parallel), then rows are inserted in
/// global row order as above.
void RunBuild(const BuildIndexNodeT<ColumnKey>& node, CpuHashIndex<ColumnKey>& index,
              ThreadPool& pool);
void RunBatchBuild(const BuildBatchIndexNodeT<ColumnKey>& node, CpuHashIndex<ColumnKey>& index,
                   ThreadPool& pool);

/// Aligned lookup, parallel over query rows (values and payload of each key's
/// first match, match counts), then its gathers. Errors (RESOURCE_EXHAUSTED
/// from a gather's max_string_bytes) name node `node_index`.
template <IndexKey K>
absl::Status RunLookup(const LookupNodeT<K>& node, const CpuHashIndex<K>& index, ThreadPool& pool,
                       size_t node_index);

/// Join of the node's kind for each batch: count (parallel over left rows),
/// scan, scatter (parallel over output pairs), then the batch's gathers over
/// its written pairs.
template <IndexKey K>
absl::Status RunJoin(const JoinNodeT<K>& node, const CpuHashIndex<K>& index, ThreadPool& pool,
                     size_t node_index);

/// Grouped aggregation. Counts, min and max equal a sequential pass. Sums (and
/// means) depend only on the input shape, never on the thread count: with at most
/// kStripedMaxGroups groups, rows are cut into a fixed number of stripes summed in
/// order; above it every group is summed in row order (see cpu_aggregate.cpp).
void RunAggregate(const AggregateNode& node, ThreadPool& pool);

/// Largest group count aggregated with per-stripe partials.
inline constexpr size_t kStripedMaxGroups = 4096;

}  // namespace gpujoin::engine::cpu
