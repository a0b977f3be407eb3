// Device helpers of the payload kernels (store_kernels.cu, gather_kernels.cu):
// reading Arrow bitmaps, writing them a warp (32 bits) at a time, and copying
// the strings of a warp's rows with the whole warp.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace gpujoin::engine::detail {

/// Bit i of a bitmap.
__device__ __forceinline__ bool BitOf(const uint8_t* __restrict__ bitmap, uint64_t i) {
  return (__ldg(bitmap + i / 8) >> (i % 8)) & 1u;
}

/// Writes `bits` as bits [base, base + 32) of a bitmap of `bytes` bytes (4-byte
/// aligned); `base` is a multiple of 32. One 32-bit store where the whole word
/// lies in the bitmap, else the bytes that do.
__device__ __forceinline__ void StoreBitWord(uint8_t* bitmap, uint64_t base, uint32_t bits,
                                             uint64_t bytes) {
  const uint64_t at = base / 8;
  if (at + 4 <= bytes) {
    *reinterpret_cast<uint32_t*>(bitmap + at) = bits;
    return;
  }
  for (uint32_t k = 0; at + k < bytes; ++k) bitmap[at + k] = uint8_t(bits >> (8 * k));
}

/// Bytes of a bitmap of `bits` bits.
__host__ __device__ constexpr uint64_t BitmapBytesOf(uint64_t bits) { return (bits + 7) / 8; }

/// Warp-collective (every lane calls it with its own string): copies each
/// lane's `len` bytes from `from` to `to`, one lane's string after the other,
/// the whole warp copying consecutive bytes of each (coalesced for long
/// strings, one step for short ones).
__device__ __forceinline__ void WarpCopyBytes(const uint8_t* __restrict__ from,
                                              uint8_t* __restrict__ to, uint64_t len) {
  const uint32_t lane = threadIdx.x & 31u;
  for (uint32_t j = 0; j < 32; ++j) {
    const uint64_t n = __shfl_sync(0xffffffffu, len, j);
    if (n == 0) continue;
    const uint8_t* f = reinterpret_cast<const uint8_t*>(
        __shfl_sync(0xffffffffu, reinterpret_cast<uintptr_t>(from), j));
    uint8_t* t =
        reinterpret_cast<uint8_t*>(__shfl_sync(0xffffffffu, reinterpret_cast<uintptr_t>(to), j));
    for (uint64_t k = lane; k < n; k += 32) t[k] = f[k];
  }
}

/// The warp loop of the payload kernels: calls body(base) for every multiple of
/// 32 below `items` that falls to this warp (grid-stride), with every lane of
/// the warp, so bodies may use warp collectives; lane `threadIdx.x % 32`
/// handles item base + lane (which may be >= items).
template <typename Body>
__device__ __forceinline__ void ForEachWarpStep(uint64_t items, Body&& body) {
  const uint64_t warp = (uint64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const uint64_t warps = uint64_t(gridDim.x) * blockDim.x / 32;
  for (uint64_t base = warp * 32; base < items; base += warps * 32) body(base);
}

}  // namespace gpujoin::engine::detail
