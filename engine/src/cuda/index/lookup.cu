// Lookup kernels of the CUDA hash index (lookup.hpp).
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>

#include "cuda/index/lookup.hpp"
#include "cuda/index/probe.cuh"
#include "cuda/kernel_utils.cuh"

namespace gpujoin::engine::detail {
namespace {

// One thread per key, grid-stride. `found` and `probes` are optional (null: not
// written; the test is uniform across the grid). With kMasks the loop runs warp
// by warp (every lane takes each step, those past the end as misses) and lane 0
// writes the warp's found bits: masks[i / 32] bit (i % 32) for row i, what the
// join's compaction scans.
template <bool kMasks>
__global__ void __launch_bounds__(kBlockThreads, 2048 / kBlockThreads)  // full occupancy
    LookupKernel(DeviceTable table, const uint32_t* __restrict__ keys, uint64_t rows,
                 uint32_t bound, uint32_t* __restrict__ values, uint8_t* __restrict__ found,
                 uint32_t* __restrict__ probes, uint32_t* __restrict__ masks,
                 DeviceQueryStats* stats) {
  unsigned long long sums[2] = {0, 0};  // found, probes
  unsigned long long max_probes = 0;
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  const auto one = [&](uint64_t i) {
    const ProbeResult r = Probe(table.slots, table.capacity, __ldcs(keys + i), bound);
    __stcs(values + i, r.value);
    if (found != nullptr)
      __stcs(reinterpret_cast<signed char*>(found + i), static_cast<signed char>(r.found));
    if (probes != nullptr) __stcs(probes + i, r.probes);
    sums[0] += r.found ? 1u : 0u;
    sums[1] += r.probes;
    if (r.probes > max_probes) max_probes = r.probes;
    return r.found;
  };
  if constexpr (kMasks) {
    const uint32_t lane = threadIdx.x & 31u;
    for (uint64_t base = uint64_t(blockIdx.x) * blockDim.x + (threadIdx.x & ~31u); base < rows;
         base += stride) {
      const bool hit = base + lane < rows && one(base + lane);
      const uint32_t bits = __ballot_sync(0xffffffffu, hit);
      if (lane == 0) __stcs(masks + base / 32, bits);
    }
  } else {
    for (uint64_t i = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < rows; i += stride)
      one(i);
  }
  BlockFlushStats<2>(sums, max_probes, &stats->found, &stats->max_probes);
}

// Launches LookupKernel<kMasks> on a grid sized by its occupancy.
template <bool kMasks>
cudaError_t LookupWith(DeviceTable table, const uint32_t* keys, uint64_t rows, uint32_t bound,
                       uint32_t* values, uint8_t* found, uint32_t* probes, uint32_t* masks,
                       DeviceQueryStats* stats, cudaStream_t stream) {
  static std::atomic<int> resident{0};
  const auto kernel = LookupKernel<kMasks>;
  kernel<<<GridFor(rows, CachedResident(kernel, resident)), kBlockThreads, 0, stream>>>(
      table, keys, rows, bound, values, found, probes, masks, stats);
  return cudaGetLastError();
}

}  // namespace

cudaError_t LookupKeys(DeviceTable table, const uint32_t* keys, uint64_t rows, uint32_t bound,
                       uint32_t* values, uint8_t* found, uint32_t* probes, DeviceQueryStats* stats,
                       cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  return LookupWith<false>(table, keys, rows, bound, values, found, probes, nullptr, stats, stream);
}

cudaError_t LookupKeysMasked(DeviceTable table, const uint32_t* keys, uint64_t rows, uint32_t bound,
                             uint32_t* values, uint8_t* found, uint32_t* probes, uint32_t* masks,
                             DeviceQueryStats* stats, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  return LookupWith<true>(table, keys, rows, bound, values, found, probes, masks, stats, stream);
}

}  // namespace gpujoin::engine::detail
