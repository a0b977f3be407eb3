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
// `validity` is optional (null: every row with a key other than kEmptyKey).
__global__ void __launch_bounds__(kBlockThreads)
    InsertKernel(DeviceTable table, const uint32_t* __restrict__ keys,
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
    const uint32_t key = keys[i];
    if (key == kEmptyKey || (validity != nullptr && validity[i] == 0)) {
      ++sums[3];
      continue;
    }
    const uint64_t desired = (uint64_t(key) << 32) | uint32_t(tag_offset + uint32_t(i));
    InsertWord(table, key, desired, bound, sums, max_probes);
  }
  BlockFlushStats<5>(sums, max_probes, &stats->unique_keys, &stats->max_probes);
}

// Replaces the tag of every occupied slot by the winning row's value. Four
// slots per thread (the allocation has at least four, padded with empty slots)
// so that up to four value gathers are in flight at once; the tag is the
// source row. With `only_if`, the whole grid returns unless *only_if is set
// (the fallback of a large-build path).
__global__ void __launch_bounds__(kBlockThreads)
    FinalizeKernel(DeviceTable table, uint64_t groups_of_four, const uint32_t* __restrict__ values,
                   uint32_t first_value, const uint64_t* __restrict__ chunk_starts,
                   const uint32_t* __restrict__ chunk_bases, uint32_t chunk_count,
                   const unsigned int* only_if) {
  if (only_if != nullptr && *only_if == 0) return;
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  for (uint64_t q = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; q < groups_of_four;
       q += stride) {
    ulonglong2* p = reinterpret_cast<ulonglong2*>(table.slots + 4 * q);
    const ulonglong2 a = p[0], b = p[1];
    uint64_t s[4] = {a.x, a.y, b.x, b.y};
    uint32_t v[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      v[j] = s[j] == kEmptySlot ? 0u
                                : FinalValue(SlotLow(s[j]), values, first_value, chunk_starts,
                                             chunk_bases, chunk_count);
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      if (s[j] != kEmptySlot) s[j] = (s[j] & 0xffffffff00000000ull) | v[j];
    }
    p[0] = make_ulonglong2(s[0], s[1]);
    p[1] = make_ulonglong2(s[2], s[3]);
  }
}

// Fallback of a large-build path, first kernel: when `redo` is set, clears the whole
// table and zeroes the statistics (the direct insert then recounts everything).
__global__ void __launch_bounds__(kBlockThreads)
    RedoClearKernel(DeviceTable table, uint64_t vectors, DeviceBuildStats* stats,
                    const unsigned int* redo) {
  if (*redo == 0) return;
  ulonglong2* p = reinterpret_cast<ulonglong2*>(table.slots);
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  for (uint64_t v = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; v < vectors; v += stride)
    p[v] = make_ulonglong2(kEmptySlot, kEmptySlot);
  if (blockIdx.x == 0 && threadIdx.x == 0) *stats = DeviceBuildStats{};
}

// Enqueues the insert (and, when `finalize`, the finalisation); with `only_if`
// both return at once unless *only_if is set when they run.
cudaError_t InsertAndFinalize(DeviceTable table, const BuildSource& source, uint32_t bound,
                              uint32_t tag_offset, bool finalize, DeviceBuildStats* stats,
                              const unsigned int* only_if, cudaStream_t stream) {
  static std::atomic<int> resident_insert{0}, resident_finalize{0};
  const uint64_t rows = source.rows;
  const unsigned grid = GridFor(rows, CachedResident(InsertKernel, resident_insert));
  InsertKernel<<<grid, kBlockThreads, 0, stream>>>(table, source.keys, source.validity, rows, bound,
                                                   tag_offset, stats, only_if);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  e = MarkPhase(source, 1, stream);
  if (e != cudaSuccess || !finalize) return e;
  const uint64_t quads = TableAllocationSlots(table.capacity) / 4;
  FinalizeKernel<<<GridFor(quads, CachedResident(FinalizeKernel, resident_finalize)), kBlockThreads,
                   0, stream>>>(table, quads, source.values, source.first_value,
                                source.chunk_starts, source.chunk_bases, source.chunk_count,
                                only_if);
  return cudaGetLastError();
}

}  // namespace

cudaError_t BuildDirect(DeviceTable table, const BuildSource& source, uint32_t bound,
                        uint32_t tag_offset, bool finalize, DeviceBuildStats* stats,
                        cudaStream_t stream) {
  cudaError_t e = MarkPhase(source, 0, stream);
  if (e == cudaSuccess)
    e = InsertAndFinalize(table, source, bound, tag_offset, finalize, stats, nullptr, stream);
  if (e == cudaSuccess) e = MarkPhase(source, 2, stream);
  return e;
}

cudaError_t RedoDirectIf(const unsigned int* redo, DeviceTable table, const BuildSource& source,
                         uint32_t bound, uint32_t tag_offset, bool finalize,
                         DeviceBuildStats* stats, cudaStream_t stream) {
  static std::atomic<int> resident_clear{0};
  const uint64_t vectors = TableAllocationSlots(table.capacity) / 2;
  RedoClearKernel<<<GridFor(vectors, CachedResident(RedoClearKernel, resident_clear)),
                    kBlockThreads, 0, stream>>>(table, vectors, stats, redo);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  // The phase marks of the fallback are the caller's.
  BuildSource quiet = source;
  quiet.phase_events = nullptr;
  return InsertAndFinalize(table, quiet, bound, tag_offset, finalize, stats, redo, stream);
}

}  // namespace gpujoin::engine::detail
