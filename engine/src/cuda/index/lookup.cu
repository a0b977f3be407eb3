// Lookup kernels of the CUDA hash index (lookup.hpp).
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>

#include "cuda/index/key_rows.hpp"
#include "cuda/index/lookup.hpp"
#include "cuda/index/query.cuh"
#include "cuda/kernel_utils.cuh"

namespace gpujoin::engine::detail {
namespace {

// One thread per query row (Query: WordQuery or KeyRowQuery, query.cuh),
// grid-stride. `found` and `probes` are optional (null: not
// written; the test is uniform across the grid). With kMasks the loop runs warp
// by warp (every lane takes each step, those past the end as misses) and lane 0
// writes the warp's found bits: masks[i / 32] bit (i % 32) for row i, what the
// join's compaction scans; with kMiss as well, the bits of the rows it missed
// instead (anti joins; rows past the end are never set). With kSlots every
// row's slot is written too (kNoSlot when missing), for the payload gathers;
// without it `slots` is unused.
template <class Query, bool kMasks, bool kSlots, bool kMiss = false>
__global__ void __launch_bounds__(kBlockThreads, 2048 / kBlockThreads)  // full occupancy
    LookupKernel(Query query, uint64_t rows, uint32_t* __restrict__ values,
                 uint8_t* __restrict__ found, uint32_t* __restrict__ probes,
                 uint32_t* __restrict__ masks, uint32_t* __restrict__ slots,
                 DeviceQueryStats* stats) {
  unsigned long long sums[2] = {0, 0};  // found, probes
  unsigned long long max_probes = 0;
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  // A copy in registers: calling the parameter's operator() would take its
  // address and move it to the stack.
  const Query q = query;
  const auto one = [&](uint64_t i) {
    const ProbeResult r = q(i);
    __stcs(values + i, r.value);
    if (found != nullptr)
      __stcs(reinterpret_cast<signed char*>(found + i), static_cast<signed char>(r.found));
    if (probes != nullptr) __stcs(probes + i, r.probes);
    if constexpr (kSlots) __stcs(slots + i, r.found ? r.slot : kNoSlot);
    sums[0] += r.found ? 1u : 0u;
    sums[1] += r.probes;
    if (r.probes > max_probes) max_probes = r.probes;
    return r.found;
  };
  if constexpr (kMasks) {
    const uint32_t lane = threadIdx.x & 31u;
    for (uint64_t base = uint64_t(blockIdx.x) * blockDim.x + (threadIdx.x & ~31u); base < rows;
         base += stride) {
      const bool in = base + lane < rows;
      const bool hit = in && one(base + lane);
      const uint32_t bits = __ballot_sync(0xffffffffu, kMiss ? in && !hit : hit);
      if (lane == 0) __stcs(masks + base / 32, bits);
    }
  } else {
    for (uint64_t i = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < rows; i += stride)
      one(i);
  }
  BlockFlushStats<2>(sums, max_probes, &stats->found, &stats->max_probes);
}

// Launches LookupKernel<Query, kMasks, kSlots, kMiss> on a grid sized by its occupancy.
template <class Query, bool kMasks, bool kSlots, bool kMiss = false>
cudaError_t LookupWith(const Query& query, uint64_t rows, uint32_t* values, uint8_t* found,
                       uint32_t* probes, uint32_t* masks, uint32_t* slots, DeviceQueryStats* stats,
                       cudaStream_t stream) {
  static std::atomic<int> resident{0};
  const auto kernel = LookupKernel<Query, kMasks, kSlots, kMiss>;
  kernel<<<GridFor(rows, CachedResident(kernel, resident)), kBlockThreads, 0, stream>>>(
      query, rows, values, found, probes, masks, slots, stats);
  return cudaGetLastError();
}

// The masked lookups of either key kind (`masks` required, `slots` optional).
template <class Query>
cudaError_t LookupMasked(const Query& query, uint64_t rows, uint32_t* values, uint8_t* found,
                         uint32_t* probes, uint32_t* masks, uint32_t* slots,
                         DeviceQueryStats* stats, cudaStream_t stream, MaskedRows masked) {
  if (rows == 0) return cudaSuccess;
  const bool miss = masked == MaskedRows::kMissing;
  if (slots != nullptr) {
    return miss ? LookupWith<Query, true, true, true>(query, rows, values, found, probes, masks,
                                                      slots, stats, stream)
                : LookupWith<Query, true, true>(query, rows, values, found, probes, masks, slots,
                                                stats, stream);
  }
  return miss ? LookupWith<Query, true, false, true>(query, rows, values, found, probes, masks,
                                                     nullptr, stats, stream)
              : LookupWith<Query, true, false>(query, rows, values, found, probes, masks, nullptr,
                                               stats, stream);
}

}  // namespace

template <KeyWord K>
cudaError_t LookupKeys(DeviceTableT<K> table, const K* keys, uint64_t rows, uint32_t bound,
                       uint32_t* values, uint8_t* found, uint32_t* probes, DeviceQueryStats* stats,
                       cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  return LookupWith<WordQuery<K>, false, false>(WordQuery<K>{table, keys, bound}, rows, values,
                                                found, probes, nullptr, nullptr, stats, stream);
}

template <KeyWord K>
cudaError_t LookupKeysSlots(DeviceTableT<K> table, const K* keys, uint64_t rows, uint32_t bound,
                            uint32_t* values, uint8_t* found, uint32_t* probes, uint32_t* slots,
                            DeviceQueryStats* stats, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  return LookupWith<WordQuery<K>, false, true>(WordQuery<K>{table, keys, bound}, rows, values,
                                               found, probes, nullptr, slots, stats, stream);
}

template <KeyWord K>
cudaError_t LookupKeysMasked(DeviceTableT<K> table, const K* keys, uint64_t rows, uint32_t bound,
                             uint32_t* values, uint8_t* found, uint32_t* probes, uint32_t* masks,
                             DeviceQueryStats* stats, cudaStream_t stream, MaskedRows masked) {
  return LookupMasked(WordQuery<K>{table, keys, bound}, rows, values, found, probes, masks, nullptr,
                      stats, stream, masked);
}

template <KeyWord K>
cudaError_t LookupKeysMaskedSlots(DeviceTableT<K> table, const K* keys, uint64_t rows,
                                  uint32_t bound, uint32_t* values, uint8_t* found,
                                  uint32_t* probes, uint32_t* masks, uint32_t* slots,
                                  DeviceQueryStats* stats, cudaStream_t stream, MaskedRows masked) {
  return LookupMasked(WordQuery<K>{table, keys, bound}, rows, values, found, probes, masks, slots,
                      stats, stream, masked);
}

cudaError_t LookupKeyRows(DeviceTableT<ColumnKey> table, const StoredKeyRows& stored,
                          const DeviceKeyRows& query, uint32_t bound, uint32_t* values,
                          uint8_t* found, uint32_t* probes, uint32_t* slots,
                          DeviceQueryStats* stats, cudaStream_t stream) {
  if (query.rows == 0) return cudaSuccess;
  const KeyRowQuery q{table, stored, query, bound};
  if (slots != nullptr) {
    return LookupWith<KeyRowQuery, false, true>(q, query.rows, values, found, probes, nullptr,
                                                slots, stats, stream);
  }
  return LookupWith<KeyRowQuery, false, false>(q, query.rows, values, found, probes, nullptr,
                                               nullptr, stats, stream);
}

cudaError_t LookupKeyRowsMasked(DeviceTableT<ColumnKey> table, const StoredKeyRows& stored,
                                const DeviceKeyRows& query, uint32_t bound, uint32_t* values,
                                uint8_t* found, uint32_t* probes, uint32_t* masks, uint32_t* slots,
                                DeviceQueryStats* stats, cudaStream_t stream, MaskedRows masked) {
  return LookupMasked(KeyRowQuery{table, stored, query, bound}, query.rows, values, found, probes,
                      masks, slots, stats, stream, masked);
}

#define GPUJOIN_INSTANTIATE_LOOKUP(K)                                                              \
  template cudaError_t LookupKeys(DeviceTableT<K>, const K*, uint64_t, uint32_t, uint32_t*,        \
                                  uint8_t*, uint32_t*, DeviceQueryStats*, cudaStream_t);           \
  template cudaError_t LookupKeysSlots(DeviceTableT<K>, const K*, uint64_t, uint32_t, uint32_t*,   \
                                       uint8_t*, uint32_t*, uint32_t*, DeviceQueryStats*,          \
                                       cudaStream_t);                                              \
  template cudaError_t LookupKeysMasked(DeviceTableT<K>, const K*, uint64_t, uint32_t, uint32_t*,  \
                                        uint8_t*, uint32_t*, uint32_t*, DeviceQueryStats*,         \
                                        cudaStream_t, MaskedRows);                                 \
  template cudaError_t LookupKeysMaskedSlots(DeviceTableT<K>, const K*, uint64_t, uint32_t,        \
                                             uint32_t*, uint8_t*, uint32_t*, uint32_t*, uint32_t*, \
                                             DeviceQueryStats*, cudaStream_t, MaskedRows);
GPUJOIN_INSTANTIATE_LOOKUP(uint32_t)
GPUJOIN_INSTANTIATE_LOOKUP(uint64_t)
#undef GPUJOIN_INSTANTIATE_LOOKUP

}  // namespace gpujoin::engine::detail
