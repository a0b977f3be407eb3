// The benchmark families of gpujoin-bench, one file each. Every family appends
// its rows (and build phases) to the context and counts its failed checks
// there; none keeps state of its own between runs.
#pragma once

#include "context.hpp"

namespace gpujoin::bench {

/// The copy ceiling: 2 GiB device to device; sets ctx.copy_bps (copy.cpp).
void RunCopy(BenchContext& ctx);
/// uint32 builds per path, value kind, load and hot keys (build.cpp).
void RunBuild(BenchContext& ctx);
/// uint32 lookups with found flags and statistics, and the payload gather (lookup.cpp).
void RunLookup(BenchContext& ctx);
/// uint32 inner joins (pairs), and the payload gather per pair (join.cpp).
void RunJoin(BenchContext& ctx);
/// keep_all builds and the join kinds on multi-value indexes (multi_value.cpp).
void RunMultiValue(BenchContext& ctx);
/// 64-bit key builds and lookups (u64.cpp).
void RunU64(BenchContext& ctx);
/// Key-schema (string and composite key) builds and lookups (key_columns.cpp).
void RunKeyColumns(BenchContext& ctx);
/// float32 grouped count and mean on each path (aggregate.cpp).
void RunAggregate(BenchContext& ctx);
/// The exact int64 grouped sum on each path (aggregate_int64.cpp).
void RunAggregateInt64(BenchContext& ctx);
/// Row hashing of device-resident columns (hash.cpp).
void RunHash(BenchContext& ctx);
/// One index over every GPU, partitioned and replicated, against one (devices.cpp).
void RunDevices(BenchContext& ctx);

}  // namespace gpujoin::bench
