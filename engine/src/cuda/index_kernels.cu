// Build and lookup kernels of the CUDA hash index. See device_ops.hpp for the
// table layout and the contracts.
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/device_ops.hpp"
#include "cuda/kernel_utils.cuh"
#include "gpujoin/engine/detail/slot_hash.hpp"

namespace gpujoin::engine::detail {
namespace {

__device__ __forceinline__ uint32_t SlotKey(uint64_t slot) { return uint32_t(slot >> 32); }
__device__ __forceinline__ uint32_t SlotLow(uint64_t slot) { return uint32_t(slot); }

// Inserts rows [0, rows). A row's packed word is key:tag, where tag is either the
// final value (direct mode: generated values that grow with the row, so the
// lowest row has the lowest tag) or the global source row (finalised later). Both
// make "keep the lowest row" a 64-bit minimum among words of the same key, so the
// outcome does not depend on thread order.
template <bool kHasValidity, bool kLoadFirst>
__global__ void __launch_bounds__(kBlockThreads)
    InsertKernel(DeviceTable table, const uint32_t* __restrict__ keys,
                 const uint32_t* __restrict__ validity, uint64_t rows, uint32_t bound,
                 uint32_t tag_offset, DeviceBuildStats* stats) {
  unsigned long long sums[5] = {0, 0, 0, 0, 0};  // unique, duplicate, overflow, invalid, probes
  unsigned long long max_probes = 0;
  const uint32_t mask = table.capacity - 1u;
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  for (uint64_t i = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < rows; i += stride) {
    const uint32_t key = keys[i];
    if (key == kEmptyKey || (kHasValidity && validity[i] == 0)) {
      ++sums[3];
      continue;
    }
    const uint64_t desired = (uint64_t(key) << 32) | uint32_t(tag_offset + uint32_t(i));
    uint32_t pos = HomeSlot(key, table.capacity);
    uint32_t p = 0;
    int outcome = 2;  // overflow unless a slot is found
    for (; p < bound; ++p) {
      unsigned long long* slot = reinterpret_cast<unsigned long long*>(table.slots + pos);
      // kLoadFirst: a plain (L2) read first; slots never change key once claimed,
      // so a stale "occupied by another key" is still true and skipping it saves
      // an atomic. Otherwise the CAS itself is the read (one round trip when the
      // slot is empty, the common case at moderate load).
      unsigned long long cur = kLoadFirst ? __ldcg(slot) : kEmptySlot;
      if (cur == kEmptySlot) {
        cur = atomicCAS(slot, kEmptySlot, desired);
        if (cur == kEmptySlot) {
          outcome = 0;
          break;
        }
      }
      if (SlotKey(cur) == key) {
        if (cur > desired) atomicMin(slot, static_cast<unsigned long long>(desired));
        outcome = 1;
        break;
      }
      pos = (pos + 1u) & mask;
    }
    // Constant indices only: a run-time index would move `sums` to local memory.
    sums[0] += outcome == 0;
    sums[1] += outcome == 1;
    sums[2] += outcome == 2;
    const uint32_t examined = outcome == 2 ? bound : p + 1u;
    sums[4] += examined;
    if (examined > max_probes) max_probes = examined;
  }
  BlockFlushStats<5>(sums, max_probes, &stats->unique_keys, &stats->max_probes);
}

__device__ __forceinline__ uint32_t FinalValue(uint32_t row, const uint32_t* __restrict__ values,
                                               uint32_t first_value,
                                               const uint64_t* __restrict__ chunk_starts,
                                               const uint32_t* __restrict__ chunk_bases,
                                               uint32_t chunk_count) {
  if (values != nullptr) return values[row];
  if (chunk_starts != nullptr) {
    // Last chunk whose start is <= row (chunk_starts[0] == 0).
    uint32_t lo = 0, hi = chunk_count;
    while (hi - lo > 1) {
      const uint32_t mid = (lo + hi) / 2;
      if (chunk_starts[mid] <= row)
        lo = mid;
      else
        hi = mid;
    }
    return chunk_bases[lo] + uint32_t(row - chunk_starts[lo]);
  }
  return first_value + row;
}

// Replaces the winning source row of every occupied slot by that row's value.
// Four slots per thread (the allocation has at least four, padded with empty
// slots) so that up to four value gathers are in flight at once.
__global__ void __launch_bounds__(kBlockThreads)
    FinalizeKernel(DeviceTable table, uint64_t groups_of_four, const uint32_t* __restrict__ values,
                   uint32_t first_value, const uint64_t* __restrict__ chunk_starts,
                   const uint32_t* __restrict__ chunk_bases, uint32_t chunk_count) {
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

struct ProbeResult {
  uint32_t value;
  uint32_t probes;
  bool found;
};

// Linear probing from the key's home slot, reading one 32-byte sector (four
// slots) per step. Probe counts are those of the slot-at-a-time definition: the
// number of slots examined up to and including the deciding one, at most `bound`.
__device__ __forceinline__ ProbeResult Probe(const uint64_t* __restrict__ slots, uint32_t capacity,
                                             uint32_t key, uint32_t bound) {
  if (key == kEmptyKey) return {kEmptyKey, 0u, false};
  const uint32_t mask = capacity - 1u;
  uint32_t pos = HomeSlot(key, capacity);
  uint32_t p = 0;
  if (capacity >= 4) {
    // One loop, one sector per step, for the first and every later step. Variants
    // measured slower on an H200 (50% misses at load 0.8): two sectors per later
    // step 16.3 vs 16.8 Gkeys/s; the first sector peeled out of the loop 12.6;
    // four keys per thread slower everywhere (see docs/PERFORMANCE.md).
    while (true) {
      const uint32_t base = pos & ~3u;
      const ulonglong2* sector = reinterpret_cast<const ulonglong2*>(slots + base);
      const ulonglong2 a = __ldg(sector);
      const ulonglong2 b = __ldg(sector + 1);
      const uint64_t s[4] = {a.x, a.y, b.x, b.y};
      const uint32_t first = pos & 3u;
#pragma unroll
      for (uint32_t j = 0; j < 4; ++j) {
        if (j < first) continue;
        if (p >= bound) return {kEmptyKey, bound, false};
        ++p;
        if (SlotKey(s[j]) == key) return {SlotLow(s[j]), p, true};
        if (s[j] == kEmptySlot) return {kEmptyKey, p, false};
      }
      pos = (base + 4u) & mask;
    }
  }
  while (p < bound) {
    const uint64_t s = __ldg(reinterpret_cast<const unsigned long long*>(slots + pos));
    ++p;
    if (SlotKey(s) == key) return {SlotLow(s), p, true};
    if (s == kEmptySlot) return {kEmptyKey, p, false};
    pos = (pos + 1u) & mask;
  }
  return {kEmptyKey, bound, false};
}

template <bool kFound, bool kProbes>
__global__ void __launch_bounds__(kBlockThreads)
    LookupKernel(DeviceTable table, const uint32_t* __restrict__ keys, uint64_t rows,
                 uint32_t bound, uint32_t* __restrict__ values, uint8_t* __restrict__ found,
                 uint32_t* __restrict__ probes, DeviceQueryStats* stats) {
  unsigned long long sums[2] = {0, 0};  // found, probes
  unsigned long long max_probes = 0;
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  for (uint64_t i = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < rows; i += stride) {
    const ProbeResult r = Probe(table.slots, table.capacity, __ldcs(keys + i), bound);
    __stcs(values + i, r.value);
    if (kFound)
      __stcs(reinterpret_cast<signed char*>(found + i), static_cast<signed char>(r.found));
    if (kProbes) __stcs(probes + i, r.probes);
    sums[0] += r.found ? 1u : 0u;
    sums[1] += r.probes;
    if (r.probes > max_probes) max_probes = r.probes;
  }
  BlockFlushStats<2>(sums, max_probes, &stats->found, &stats->max_probes);
}

}  // namespace

cudaError_t ClearTable(DeviceTable table, DeviceBuildStats* stats, cudaStream_t stream) {
  cudaError_t e = cudaMemsetAsync(table.slots, 0xff,
                                  TableAllocationSlots(table.capacity) * sizeof(uint64_t), stream);
  if (e != cudaSuccess) return e;
  return cudaMemsetAsync(stats, 0, sizeof(DeviceBuildStats), stream);
}

cudaError_t BuildTable(DeviceTable table, const BuildSource& source, uint32_t bound,
                       DeviceBuildStats* stats, cudaStream_t stream) {
  if (source.rows == 0) return cudaSuccess;
  // Generated values that do not wrap grow with the row: store them directly and
  // skip finalisation.
  const bool direct = source.values == nullptr && source.chunk_starts == nullptr &&
                      uint64_t(source.first_value) + source.rows - 1 <= 0xffffffffull;
  const uint32_t tag_offset = direct ? source.first_value : 0u;
  static std::atomic<int> resident_insert[4];
  const uint64_t rows = source.rows;
  const unsigned grid =
      GridFor(rows, CachedResident(InsertKernel<false, true>, resident_insert[0]));
  if (source.validity != nullptr) {
    if (source.load_before_cas)
      InsertKernel<true, true><<<grid, kBlockThreads, 0, stream>>>(
          table, source.keys, source.validity, rows, bound, tag_offset, stats);
    else
      InsertKernel<true, false><<<grid, kBlockThreads, 0, stream>>>(
          table, source.keys, source.validity, rows, bound, tag_offset, stats);
  } else {
    if (source.load_before_cas)
      InsertKernel<false, true><<<grid, kBlockThreads, 0, stream>>>(table, source.keys, nullptr,
                                                                    rows, bound, tag_offset, stats);
    else
      InsertKernel<false, false><<<grid, kBlockThreads, 0, stream>>>(
          table, source.keys, nullptr, rows, bound, tag_offset, stats);
  }
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess || direct) return e;
  static std::atomic<int> resident_finalize{0};
  const uint64_t quads = TableAllocationSlots(table.capacity) / 4;
  const unsigned fgrid = GridFor(quads, CachedResident(FinalizeKernel, resident_finalize));
  FinalizeKernel<<<fgrid, kBlockThreads, 0, stream>>>(table, quads, source.values,
                                                      source.first_value, source.chunk_starts,
                                                      source.chunk_bases, source.chunk_count);
  return cudaGetLastError();
}

cudaError_t LookupKeys(DeviceTable table, const uint32_t* keys, uint64_t rows, uint32_t bound,
                       uint32_t* values, uint8_t* found, uint32_t* probes, DeviceQueryStats* stats,
                       cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  static std::atomic<int> resident[4];
  const int variant = (found != nullptr ? 1 : 0) | (probes != nullptr ? 2 : 0);
  switch (variant) {
    case 0: {
      const unsigned grid = GridFor(rows, CachedResident(LookupKernel<false, false>, resident[0]));
      LookupKernel<false, false><<<grid, kBlockThreads, 0, stream>>>(table, keys, rows, bound,
                                                                     values, found, probes, stats);
      break;
    }
    case 1: {
      const unsigned grid = GridFor(rows, CachedResident(LookupKernel<true, false>, resident[1]));
      LookupKernel<true, false><<<grid, kBlockThreads, 0, stream>>>(table, keys, rows, bound,
                                                                    values, found, probes, stats);
      break;
    }
    case 2: {
      const unsigned grid = GridFor(rows, CachedResident(LookupKernel<false, true>, resident[2]));
      LookupKernel<false, true><<<grid, kBlockThreads, 0, stream>>>(table, keys, rows, bound,
                                                                    values, found, probes, stats);
      break;
    }
    default: {
      const unsigned grid = GridFor(rows, CachedResident(LookupKernel<true, true>, resident[3]));
      LookupKernel<true, true><<<grid, kBlockThreads, 0, stream>>>(table, keys, rows, bound, values,
                                                                   found, probes, stats);
      break;
    }
  }
  return cudaGetLastError();
}

}  // namespace gpujoin::engine::detail
