// Internal (CUDA builds only): joins in which a left row may yield any number
// of pairs (inner and left outer joins on a multi-value index, and every join
// kind on either index kind): count -> scan -> scatter (docs/engine.md, "Join
// kinds"). Every function takes device pointers, enqueues work on `stream` and
// returns without synchronising; the join lowering (lowering/lower_join.cpp) and
// the kernel benchmark (bench/) call them.
//
//  1. CountGroupJoin: one thread per left row probes the table and writes the
//     row's pair count for the join kind (kInner: its group's rows; kLeftOuter:
//     at least 1; kLeftSemi: 1 or 0; kLeftAnti: 0 or 1), the value-list
//     position of its first match and that match's value; found, probes and
//     statistics as a lookup; then an inclusive CUB scan of the counts (uint64)
//     gives every row the end of its pairs, and the last end is the count.
//  2. ScatterGroupJoin, once the caller knows how many pairs to write
//     (min(count, capacity)): the pairs are laid out by merge path over the row
//     ends and the output positions, so every block takes the same number of
//     rows plus pairs whatever the group sizes (a key holding half the rows is
//     spread over as many blocks as its pairs fill; runs of rows without pairs
//     cost one step each). A partition kernel finds each block's first row and
//     pair by binary search; each block merges its piece in shared memory and
//     writes its pairs to consecutive positions, in left order and within a row
//     in group order, so truncation keeps the stable prefix.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "cuda/index/groups.hpp"
#include "cuda/index/key_rows.hpp"
#include "cuda/index/table.hpp"
#include "gpujoin/engine/graph.hpp"

namespace gpujoin::engine::detail {

/// Bytes of scratch CountGroupJoin needs for `rows` left rows (at most 2^32 - 1).
size_t GroupJoinCountScratchBytes(uint64_t rows);

/// Counts the pairs join `kind` yields for each of `rows` left keys (rows > 0)
/// against `table` with at most `bound` probes each; `ranges` are the index's
/// groups (null for a kLowestRow index: one row per match, at its slot).
/// `*count` receives the total pairs (before truncation). found/probes are
/// optional aligned outputs; `stats` is added to (zero it first). `scratch`
/// holds GroupJoinCountScratchBytes(rows) bytes and keeps the per-row results
/// ScatterGroupJoin reads.
template <KeyWord K>
cudaError_t CountGroupJoin(DeviceTableT<K> table, const GroupRange* ranges, JoinKind kind,
                           const K* keys, uint64_t rows, uint32_t bound, uint8_t* found,
                           uint32_t* probes, DeviceQueryStats* stats, unsigned long long* count,
                           void* scratch, cudaStream_t stream);

/// CountGroupJoin of a key-schema index's left rows `query` (key_rows.hpp).
cudaError_t CountGroupJoinKeyRows(DeviceTableT<ColumnKey> table, const GroupRange* ranges,
                                  const StoredKeyRows& stored, const DeviceKeyRows& query,
                                  JoinKind kind, uint32_t bound, uint8_t* found, uint32_t* probes,
                                  DeviceQueryStats* stats, unsigned long long* count, void* scratch,
                                  cudaStream_t stream);
/// Bytes of scratch ScatterGroupJoin needs to write `written` pairs of `rows`
/// left rows.
size_t GroupJoinScatterScratchBytes(uint64_t rows, uint64_t written);

/// Writes the first `written` pairs (at most the count) of the join counted in
/// `count_scratch` (CountGroupJoin's scratch, for the same `rows`): pair k is
/// (left row ID, right value) where the left row ID is left_rows[i] when
/// non-null, else first_left_row + i; the right value is the k-th pair's match
/// (`values`: the index's value list, null for a kLowestRow index), kEmptyKey
/// for a left row without a match (outer, anti). With `out_positions`, each
/// pair's value-list position too (kLowestRow: its slot; kNoSlot without a
/// match): what payload gathers read. `scratch` holds
/// GroupJoinScatterScratchBytes(rows, written) bytes. A key schema's value list
/// holds build rows: with `row_values` (its value of every build row) a match
/// after a group's first is mapped through it.
cudaError_t ScatterGroupJoin(const void* count_scratch, uint64_t rows, uint64_t written,
                             const uint32_t* left_rows, uint32_t first_left_row,
                             const uint32_t* values, uint32_t* out_left, uint32_t* out_right,
                             uint32_t* out_positions, void* scratch, cudaStream_t stream,
                             const uint32_t* row_values = nullptr);

}  // namespace gpujoin::engine::detail
