// Internal (CUDA builds only): the groups of a multi-value index
// (DuplicatePolicy::kKeepAll, docs/engine.md "Multi-value indexes"). The table
// is the kLowestRow table of the build; beside it, per slot s, the range of its
// key's group in one value list: the winner row w(s) (the lowest valid row with
// the slot's key and value, the payload winner rule) and every later valid row
// of the key, in source-row order. Every function takes device pointers,
// enqueues work on `stream` and returns without synchronising; the build and
// query lowerings and the kernel benchmark (bench/) call them.
//
// The group pass of a build, after the table is built: one thread per source
// row probes the finished table and writes the row's slot as a sort key (a
// sentinel for rows that are not kept); a stable CUB radix sort of (slot, row)
// by slot then lays every group's rows out contiguously in row order; a pass
// over the sorted keys marks each group's first and last position, and one
// over the slots turns those into (start, size) and finds the largest group.
// With overflow, rows of a key that precede its winner (a generation the probe
// bound dropped) are not kept: the probe pass then also finds every slot's
// winner by atomicMin, and a filter pass turns the earlier rows' keys into the
// sentinel. A stable sort makes the order deterministic whatever the thread
// order, and its cost does not depend on the group sizes (one key holding half
// the rows sorts like any other input).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "cuda/index/build.hpp"
#include "cuda/index/key_rows.hpp"
#include "cuda/index/table.hpp"

namespace gpujoin::engine::detail {

/// Where slot s's group lies in the value list: positions [start, start + size).
/// An empty slot (and every slot of an empty build) has size 0.
struct alignas(8) GroupRange {
  uint32_t start;
  uint32_t size;
};

/// The groups of a built kKeepAll index in device memory: `ranges` has one
/// entry per slot of the table's capacity, `values` the kept rows' values
/// (explicit, first_value + row, or batch row_base + position; a key schema's:
/// the kept build rows), group after group. Both null for a kLowestRow index, whose groups are its
/// slots (a match has one row, at position = its slot).
struct DeviceGroups {
  const GroupRange* ranges = nullptr;
  const uint32_t* values = nullptr;
};

/// Counters the group pass accumulates on the device (SortGroupRows zeroes them).
struct DeviceGroupStats {
  unsigned long long kept;            ///< rows kept in all groups (valid only with overflow)
  unsigned long long max_group_rows;  ///< the largest group
};

/// Bytes of scratch SortGroupRows needs for `rows` source rows (at most 2^32 - 1)
/// and a table of `capacity` slots; `overflow`: the build dropped rows (the pass
/// then keeps a winner per slot too). Exact: the lowering allocates this.
size_t GroupScratchBytes(uint32_t capacity, uint64_t rows, bool overflow);

/// Lays out the groups of a kKeepAll build whose table `table` was just built
/// from `source` (rows > 0; its device inputs alive) with probe bound `bound`.
/// `overflow`: the build's overflow_rows is nonzero (known to the caller from
/// its statistics). Writes `ranges` (table.capacity entries), the largest group
/// into group_stats->max_group_rows and, with overflow, the kept rows into
/// group_stats->kept (without overflow every valid row is kept: unique +
/// duplicate rows). `*grouped_rows` receives where in `scratch` the source row
/// of every value-list position lies (its first kept entries), valid until
/// `scratch` is reused: what WriteGroupValues and the payload store read.
template <KeyWord K>
cudaError_t SortGroupRows(DeviceTableT<K> table, const BuildSourceT<K>& source, uint32_t bound,
                          bool overflow, GroupRange* ranges, DeviceGroupStats* group_stats,
                          void* scratch, size_t scratch_bytes, const uint32_t** grouped_rows,
                          cudaStream_t stream);

/// values[p] = the value of source row grouped_rows[p] for p < kept (the value
/// list; SortGroupRows gave grouped_rows).
template <KeyWord K>
cudaError_t WriteGroupValues(const BuildSourceT<K>& source, const uint32_t* grouped_rows,
                             uint64_t kept, uint32_t* values, cudaStream_t stream);

/// SortGroupRows of a key-schema build (key_rows.hpp) just built from
/// `build_rows` (the index's stored keys, their fingerprints and validity;
/// rows > 0); each row's value is stored.row_values[row].
cudaError_t SortGroupRowsKeyRows(DeviceTableT<ColumnKey> table, const StoredKeyRows& stored,
                                 const DeviceKeyRows& build_rows, uint32_t bound, bool overflow,
                                 GroupRange* ranges, DeviceGroupStats* group_stats, void* scratch,
                                 size_t scratch_bytes, const uint32_t** grouped_rows,
                                 cudaStream_t stream);

/// values[p] = grouped_rows[p] for p < kept: a key-schema build's value list,
/// which holds build rows (their values are the index's row values; the index
/// image's layout).
cudaError_t WriteGroupRows(const uint32_t* grouped_rows, uint64_t kept, uint32_t* values,
                           cudaStream_t stream);

/// The groups of matched slots, for lookups and for the gathers of joins that
/// pair a row with its first match: for i < n (n = min(*count, positions) when
/// `count` is non-null, else positions), slot slots[i] (kNoSlot: missing) has
/// match_counts[i] rows (0 when missing; 1 on a kLowestRow index, `ranges`
/// null) and its first match at value-list position first_positions[i]
/// (kLowestRow: the slot; kNoSlot when missing). Either output may be null;
/// first_positions may be `slots` itself (replaced in place).
cudaError_t GroupsOfSlots(const uint32_t* slots, uint64_t positions,
                          const unsigned long long* count, const GroupRange* ranges,
                          uint32_t* match_counts, uint32_t* first_positions, cudaStream_t stream);

}  // namespace gpujoin::engine::detail
