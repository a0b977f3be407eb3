// Host implementations of the command-graph nodes for the CPU backend. Each takes
// a node that CommandGraph::Validate accepted.
#pragma once

#include "cpu/cpu_hash_index.hpp"
#include "cpu/thread_pool.hpp"
#include "gpujoin/engine/graph.hpp"

namespace gpujoin::engine::cpu {

/// Rebuilds `index` from the node's rows, sequentially in global row order.
void RunBuild(const BuildIndexNode& node, CpuHashIndex& index);

/// Rebuilds `index` from ordered batch chunks.
void RunBatchBuild(const BuildBatchIndexNode& node, CpuHashIndex& index);

/// Aligned lookup, parallel over query rows.
void RunLookup(const LookupNode& node, const CpuHashIndex& index, ThreadPool& pool);

/// Inner join of each batch, parallel over left rows (count, scan, scatter).
void RunJoin(const JoinNode& node, const CpuHashIndex& index, ThreadPool& pool);

/// Grouped aggregation. Counts, min and max equal a sequential pass. Sums (and
/// means) depend only on the input shape, never on the thread count: with at most
/// kStripedMaxGroups groups, rows are cut into a fixed number of stripes summed in
/// order; above it every group is summed in row order (see cpu_aggregate.cpp).
void RunAggregate(const AggregateNode& node, ThreadPool& pool);

/// Largest group count aggregated with per-stripe partials.
inline constexpr size_t kStripedMaxGroups = 4096;

}  // namespace gpujoin::engine::cpu
