// Internal device helpers shared by the CUDA kernels: launch shapes and
// block-level reduction of statistics (one global atomic per block).
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>

namespace gpujoin::engine::detail {

inline constexpr int kBlockThreads = 256;

/// Blocks for a grid-stride kernel over `items`: enough to fill the device
/// (`resident_blocks`, from the occupancy calculator) but no more than the items
/// need, so per-block statistics atomics stay few.
inline unsigned GridFor(uint64_t items, int resident_blocks) {
  const uint64_t needed = (items + kBlockThreads - 1) / kBlockThreads;
  const uint64_t cap = resident_blocks > 0 ? uint64_t(resident_blocks) : 1024;
  const uint64_t g = needed < cap ? needed : cap;
  return g == 0 ? 1u : unsigned(g);
}

/// Resident blocks of `kernel` on the current device at kBlockThreads threads.
template <typename Kernel>
int ResidentBlocks(Kernel kernel) {
  int device = 0, sms = 0, per_sm = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return 0;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) return 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kBlockThreads, 0) !=
      cudaSuccess)
    return 0;
  return sms * (per_sm > 0 ? per_sm : 1);
}

// Occupancy is a property of the kernel and device; computed once per variant.
template <typename Kernel>
int CachedResident(Kernel kernel, std::atomic<int>& cache) {
  int v = cache.load(std::memory_order_relaxed);
  if (v == 0) {
    v = ResidentBlocks(kernel);
    cache.store(v, std::memory_order_relaxed);
  }
  return v;
}

__device__ __forceinline__ unsigned long long WarpSum(unsigned long long v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ unsigned long long WarpMax(unsigned long long v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const unsigned long long other = __shfl_down_sync(0xffffffffu, v, o);
    v = other > v ? other : v;
  }
  return v;
}

/// Adds the per-thread `sums[0..kSums)` of the whole block to `global_sums` and
/// folds `max` into `*global_max`, with one global atomic per counter per block.
/// Every thread of the block must call it (it synchronises the block).
template <int kSums>
__device__ __forceinline__ void BlockFlushStats(const unsigned long long (&sums)[kSums],
                                                unsigned long long max,
                                                unsigned long long* global_sums,
                                                unsigned long long* global_max) {
  __shared__ unsigned long long s_sums[kSums];
  __shared__ unsigned long long s_max;
  if (threadIdx.x < kSums) s_sums[threadIdx.x] = 0;
  if (threadIdx.x == 0) s_max = 0;
  __syncthreads();
  const bool lane0 = (threadIdx.x & 31) == 0;
#pragma unroll
  for (int k = 0; k < kSums; ++k) {
    const unsigned long long w = WarpSum(sums[k]);
    if (lane0 && w != 0) atomicAdd(&s_sums[k], w);
  }
  const unsigned long long wm = WarpMax(max);
  if (lane0 && wm != 0) atomicMax(&s_max, wm);
  __syncthreads();
  if (threadIdx.x < kSums && s_sums[threadIdx.x] != 0)
    atomicAdd(&global_sums[threadIdx.x], s_sums[threadIdx.x]);
  if (threadIdx.x == 0 && s_max != 0 && global_max != nullptr) atomicMax(global_max, s_max);
}

}  // namespace gpujoin::engine::detail
