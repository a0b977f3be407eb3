// Internal (CUDA builds only): the join entry point that CUDA Graph capture needs
// beside JoinKeys (device_ops.hpp). A captured
// graph bakes every kernel argument, so the one per-batch scalar of a join, the
// generated left row base, is read on the device instead, from memory the graph's
// input copy fills on every replay.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/device_ops.hpp"

namespace gpujoin::engine::detail {

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

}  // namespace gpujoin::engine::detail
