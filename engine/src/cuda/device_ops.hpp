// Internal (CUDA builds only): the device-level API of the CUDA backend. Every
// function takes device pointers, enqueues work on the given stream and returns
// without synchronising. The backend lowers command-graph nodes onto these; the
// kernel benchmark (bench/) calls them directly on device-resident data. The
// table and its build and lookup live in cuda/index/ (table.hpp for the layout).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "cuda/index/build.hpp"
#include "cuda/index/lookup.hpp"
#include "cuda/index/table.hpp"

namespace gpujoin::engine::detail {

/// Scratch device memory a join of `rows` left rows needs (bytes).
size_t JoinScratchBytes(uint64_t rows);

/// Inner join of `rows` left keys (rows < 2^32): lookup, then stable compaction of
/// the matches in left order. Pair k is (left row, right value) of the k-th match;
/// only the first `capacity` pairs are written. The left row is left_rows[i] when
/// non-null, else first_left_row + i. `*count` receives the number of matches
/// (before truncation). found/probes are optional aligned outputs. `scratch` holds
/// JoinScratchBytes(rows) bytes. K is the key word (uint32_t or uint64_t,
/// instantiated in join_kernels.cu). Each found row yields its table value, so
/// this is the inner join on an index whose groups have one row, and the semi
/// join on any index (the table holds every key's first match). With `masked`
/// kMissing it is the anti join instead: one pair (left row, kEmptyKey) per
/// missing row.
template <KeyWord K>
cudaError_t JoinKeys(DeviceTableT<K> table, const K* keys, uint64_t rows, uint32_t bound,
                     const uint32_t* left_rows, uint32_t first_left_row, uint32_t* out_left,
                     uint32_t* out_right, uint64_t capacity, unsigned long long* count,
                     uint8_t* found, uint32_t* probes, DeviceQueryStats* stats, void* scratch,
                     cudaStream_t stream, MaskedRows masked = MaskedRows::kFound);

/// Scratch device memory JoinKeysWithSlots needs for `rows` left rows (bytes).
size_t JoinScratchBytesWithSlots(uint64_t rows);

/// JoinKeys that also writes each written pair's slot (the slot of the right
/// key in the table, what the payload gathers read; kNoSlot for an anti join's
/// pairs): out_slots[k] for the first min(count, capacity) pairs. `scratch`
/// holds JoinScratchBytesWithSlots(rows) bytes.
template <KeyWord K>
cudaError_t JoinKeysWithSlots(DeviceTableT<K> table, const K* keys, uint64_t rows, uint32_t bound,
                              const uint32_t* left_rows, uint32_t first_left_row,
                              uint32_t* out_left, uint32_t* out_right, uint32_t* out_slots,
                              uint64_t capacity, unsigned long long* count, uint8_t* found,
                              uint32_t* probes, DeviceQueryStats* stats, void* scratch,
                              cudaStream_t stream, MaskedRows masked = MaskedRows::kFound);

}  // namespace gpujoin::engine::detail
