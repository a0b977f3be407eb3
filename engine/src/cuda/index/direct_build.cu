// The direct build path: one thread per row inserting straight into the table
// in Robin Hood order (insert.cuh), then a finalisation pass for builds whose
// slots hold source rows. Also the fallback of the tile path.
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>

#include "cuda/index/build_paths.hpp"
#include "cuda/index/insert.cuh"
#include "cuda/kernel_utils.cuh"

namespace gpujoin::engine::detail {
namespace {

// Inserts rows [0, rows) in row order (one thread per row, grid-stride);
// `validity` is optional (null: every row with a key other than the reserved one).
template <KeyWord K>
__global__ void __launch_bounds__(kBlockThreads)
    InsertKernel(DeviceTableT<K> table, const K* __restrict__ keys,
                 const uint32_t* __restrict__ validity, uint64_t rows, uint32_t bound,
                 uint32_t tag_offset, DeviceBuildStats* stats,
                 const unsigned int* only_if = nullptr) {
  // only_if: a large-build fallback runs only when its flag is set (the flag
  // does not change while this kernel runs, so the whole grid returns).
  if (only_if != nullptr && *only_if == 0) return;
  unsigned long long sums[5] = {0, 0, 0, 0, 0};  // unique, duplicate, overflow, invalid, probes
  unsigned long long max_probes = 0;
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  for (uint64_t i = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < rows; i += stride) {
    const K key = keys[i];
    if (key == kEmptyKeyOf<K> || (validity != nullptr && validity[i] == 0)) {
      ++sums[3];
      continue;
    }
    InsertWord(table, key, Slots<K>::Make(key, tag_offset + uint32_t(i)), bound, sums, max_probes);
  }
  BlockFlushStats<5>(sums, max_probes, &stats->unique_keys, &stats->max_probes);
}

// Replaces the tag of every occupied slot by the winning row's value. Four
// slots per thread (the allocation has at least four, padded with empty slots)
// so that up to four value gathers are in flight at once; the tag is the
// source row. With `only_if`, the whole grid returns unless *only_if is set
// (the fallback of a large-build path).
template <KeyWord K>
__global__ void __launch_bounds__(kBlockThreads)
    FinalizeKernel(DeviceTableT<K> table, uint64_t groups_of_four,
                   const uint32_t* __restrict__ values, uint32_t first_value,
                   const uint64_t* __restrict__ chunk_starts,
                   const uint32_t* __restrict__ chunk_bases, uint32_t chunk_count,
                   const unsigned int* only_if) {
  if (only_if != nullptr && *only_if == 0) return;
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  for (uint64_t q = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; q < groups_of_four;
       q += stride) {
    using S = Slots<K>;
    SlotWord<K>* p = table.slots + 4 * q;
    SlotWord<K> s[4];
    S::Load4(p, s);
    uint32_t v[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      v[j] = S::IsEmpty(s[j]) ? 0u
                              : FinalValue(S::Low(s[j]), values, first_value, chunk_starts,
                                           chunk_bases, chunk_count);
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      if (!S::IsEmpty(s[j])) s[j] = S::WithLow(s[j], v[j]);
    }
    S::Store4(p, s);
  }
}

// Fallback of a large-build path, first kernel: when `redo` is set, clears the whole
// table (`vectors` 16-byte vectors at `table`) and zeroes the statistics (the
// direct insert then recounts everything).
__global__ void __launch_bounds__(kBlockThreads)
    RedoClearKernel(ulonglong2* table, uint64_t vectors, DeviceBuildStats* stats,
                    const unsigned int* redo) {
  if (*redo == 0) return;
  ulonglong2* p = table;
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  for (uint64_t v = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; v < vectors; v += stride)
    p[v] = make_ulonglong2(kEmptySlot, kEmptySlot);
  if (blockIdx.x == 0 && threadIdx.x == 0) *stats = DeviceBuildStats{};
}

// Enqueues the insert (and, when `finalize`, the finalisation); with `only_if`
// both return at once unless *only_if is set when they run.
template <KeyWord K>
cudaError_t InsertAndFinalize(DeviceTableT<K> table, const BuildSourceT<K>& source, uint32_t bound,
                              uint32_t tag_offset, bool finalize, DeviceBuildStats* stats,
                              const unsigned int* only_if, cudaStream_t stream) {
  static std::atomic<int> resident_insert{0}, resident_finalize{0};
  const uint64_t rows = source.rows;
  const unsigned grid = GridFor(rows, CachedResident(InsertKernel<K>, resident_insert));
  InsertKernel<K><<<grid, kBlockThreads, 0, stream>>>(table, source.keys, source.validity, rows,
                                                      bound, tag_offset, stats, only_if);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  e = MarkPhase(source, 1, stream);
  if (e != cudaSuccess || !finalize) return e;
  const uint64_t quads = TableAllocationSlots(table.capacity) / 4;
  FinalizeKernel<K><<<GridFor(quads, CachedResident(FinalizeKernel<K>, resident_finalize)),
                      kBlockThreads, 0, stream>>>(table, quads, source.values, source.first_value,
                                                  source.chunk_starts, source.chunk_bases,
                                                  source.chunk_count, only_if);
  return cudaGetLastError();
}

}  // namespace

template <KeyWord K>
cudaError_t BuildDirect(DeviceTableT<K> table, const BuildSourceT<K>& source, uint32_t bound,
                        uint32_t tag_offset, bool finalize, DeviceBuildStats* stats,
                        cudaStream_t stream) {
  cudaError_t e = MarkPhase(source, 0, stream);
  if (e == cudaSuccess)
    e = InsertAndFinalize(table, source, bound, tag_offset, finalize, stats, nullptr, stream);
  if (e == cudaSuccess) e = MarkPhase(source, 2, stream);
  return e;
}

template <KeyWord K>
cudaError_t RedoDirectIf(const unsigned int* redo, DeviceTableT<K> table,
                         const BuildSourceT<K>& source, uint32_t bound, uint32_t tag_offset,
                         bool finalize, DeviceBuildStats* stats, cudaStream_t stream) {
  static std::atomic<int> resident_clear{0};
  const uint64_t vectors = TableAllocationBytes(table.capacity, KeyTypeOf<K>()) / 16;
  RedoClearKernel<<<GridFor(vectors, CachedResident(RedoClearKernel, resident_clear)),
                    kBlockThreads, 0, stream>>>(reinterpret_cast<ulonglong2*>(table.slots), vectors,
                                                stats, redo);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  // The phase marks of the fallback are the caller's.
  BuildSourceT<K> quiet = source;
  quiet.phase_events = nullptr;
  return InsertAndFinalize(table, quiet, bound, tag_offset, finalize, stats, redo, stream);
}

template cudaError_t BuildDirect(DeviceTableT<uint32_t>, const BuildSourceT<uint32_t>&, uint32_t,
                                 uint32_t, bool, DeviceBuildStats*, cudaStream_t);
template cudaError_t BuildDirect(DeviceTableT<uint64_t>, const BuildSourceT<uint64_t>&, uint32_t,
                                 uint32_t, bool, DeviceBuildStats*, cudaStream_t);
template cudaError_t RedoDirectIf(const unsigned int*, DeviceTableT<uint32_t>,
                                  const BuildSourceT<uint32_t>&, uint32_t, uint32_t, bool,
                                  DeviceBuildStats*, cudaStream_t);
template cudaError_t RedoDirectIf(const unsigned int*, DeviceTableT<uint64_t>,
                                  const BuildSourceT<uint64_t>&, uint32_t, uint32_t, bool,
                                  DeviceBuildStats*, cudaStream_t);

}  // namespace gpujoin::engine::detail
