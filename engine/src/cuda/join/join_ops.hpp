// Internal (CUDA builds only): the many-to-one joins of the device-level API
// (join_kernels.cu): JoinKeys, JoinKeysWithSlots, and the entry point that CUDA
// Graph capture needs beside JoinKeys. A captured graph bakes every kernel
// argument, so the one per-batch scalar of a join, the generated left row base,
// is read on the device instead, from memory the graph's input copy fills on
// every replay. The other join kinds count, scan and scatter (group_join.hpp).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

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

/// JoinKeys with the generated left row base read on the device: when `left_rows`
/// is null, left row i is *first_left_row_device + i (a device uint32 written
/// before this work runs on `stream`); otherwise first_left_row_device is unused
/// and may be null. Everything else (outputs, truncation, count, statistics,
/// scratch of JoinScratchBytes(rows), `masked`) is exactly JoinKeys. Enqueues only
/// stream-ordered work with caller-provided memory, so it can be captured.
template <KeyWord K>
cudaError_t JoinKeysGraphable(DeviceTableT<K> table, const K* keys, uint64_t rows, uint32_t bound,
                              const uint32_t* left_rows, const uint32_t* first_left_row_device,
                              uint32_t* out_left, uint32_t* out_right, uint64_t capacity,
                              unsigned long long* count, uint8_t* found, uint32_t* probes,
                              DeviceQueryStats* stats, void* scratch, cudaStream_t stream,
                              MaskedRows masked = MaskedRows::kFound);

/// The join of a key-schema index's left rows `query` (key_rows.hpp): JoinKeys,
/// or with `out_slots` JoinKeysWithSlots (scratch of JoinScratchBytesWithSlots
/// then), with the key-schema lookup (LookupKeyRowsMasked).
cudaError_t JoinKeyRows(DeviceTableT<ColumnKey> table, const StoredKeyRows& stored,
                        const DeviceKeyRows& query, uint32_t bound, const uint32_t* left_rows,
                        uint32_t first_left_row, uint32_t* out_left, uint32_t* out_right,
                        uint32_t* out_slots, uint64_t capacity, unsigned long long* count,
                        uint8_t* found, uint32_t* probes, DeviceQueryStats* stats, void* scratch,
                        cudaStream_t stream, MaskedRows masked);

}  // namespace gpujoin::engine::detail
