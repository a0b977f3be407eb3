// Host implementations of the command-graph nodes for the CPU backend. Each takes
// a node that CommandGraph::Validate accepted.
#pragma once

#include "cpu/cpu_hash_index.hpp"
#include "cpu/thread_pool.hpp"
#include "gpujoin/engine/graph.hpp"

namespace gpujoin::engine::cpu {

// The key-carrying nodes are templates on the key word K, instantiated for
// uint32_t and uint64_t in cpu_build.cpp and cpu_query.cpp.

/// Rebuilds `index` from the node's rows, sequentially in global row order.
template <KeyWord K>
void RunBuild(const BuildIndexNodeT<K>& node, CpuHashIndex<K>& index);

/// Rebuilds `index` from ordered batch chunks.
template <KeyWord K>
void RunBatchBuild(const BuildBatchIndexNodeT<K>& node, CpuHashIndex<K>& index);

/// Aligned lookup, parallel over query rows.
template <KeyWord K>
void RunLookup(const LookupNodeT<K>& node, const CpuHashIndex<K>& index, ThreadPool& pool);

/// Inner join of each batch, parallel over left rows (count, scan, scatter).
template <KeyWord K>
void RunJoin(const JoinNodeT<K>& node, const CpuHashIndex<K>& index, ThreadPool& pool);

/// Grouped aggregation. Counts, min and max equal a sequential pass. Sums (and
/// means) depend only on the input shape, never on the thread count: with at most
/// kStripedMaxGroups groups, rows are cut into a fixed number of stripes summed in
/// order; above it every group is summed in row order (see cpu_aggregate.cpp).
void RunAggregate(const AggregateNode& node, ThreadPool& pool);

/// Largest group count aggregated with per-stripe partials.
inline constexpr size_t kStripedMaxGroups = 4096;

}  // namespace gpujoin::engine::cpu
