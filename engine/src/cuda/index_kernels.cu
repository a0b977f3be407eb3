// Build and lookup kernels of the CUDA hash index. See device_ops.hpp for the
// table layout and the contracts.
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <cub/device/device_scan.cuh>

#include "cuda/device_ops.hpp"
#include "cuda/kernel_utils.cuh"
#include "gpujoin/engine/detail/slot_hash.hpp"

namespace gpujoin::engine::detail {
namespace {

__device__ __forceinline__ uint32_t SlotKey(uint64_t slot) { return uint32_t(slot >> 32); }

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

// Inserts rows [0, rows) directly into the blocked layout: a 32-bit CAS claims
// the key word, then every row of that key (winner and duplicates alike) folds
// its tag into the value word with a 32-bit atomicMin (no return value, so a
// fire-and-forget reduction). Value words start at all ones (cleared table), so
// the value word ends as the lowest tag of the key whatever the thread order.
template <bool kHasValidity, bool kLoadFirst>
__global__ void __launch_bounds__(kBlockThreads)
    InsertSplitKernel(DeviceTable table, const uint32_t* __restrict__ keys,
                      const uint32_t* __restrict__ validity, uint64_t rows, uint32_t bound,
                      uint32_t tag_offset, DeviceBuildStats* stats) {
  unsigned long long sums[5] = {0, 0, 0, 0, 0};  // unique, duplicate, overflow, invalid, probes
  unsigned long long max_probes = 0;
  uint32_t* const words = table.words();
  const uint32_t mask = table.capacity - 1u;
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  for (uint64_t i = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < rows; i += stride) {
    const uint32_t key = keys[i];
    if (key == kEmptyKey || (kHasValidity && validity[i] == 0)) {
      ++sums[3];
      continue;
    }
    const uint32_t tag = tag_offset + uint32_t(i);
    uint32_t pos = HomeSlot(key, table.capacity);
    uint32_t p = 0;
    int outcome = 2;  // overflow unless a slot is found
    for (; p < bound; ++p) {
      uint32_t* slot = words + KeyWord(pos);
      // Key words never change once claimed, so a stale "other key" read is final.
      uint32_t cur = kLoadFirst ? __ldcg(slot) : kEmptyKey;
      if (cur == kEmptyKey) cur = atomicCAS(slot, kEmptyKey, key);
      if (cur == kEmptyKey || cur == key) {
        atomicMin(slot + 8, tag);
        outcome = cur == kEmptyKey ? 0 : 1;
        break;
      }
      pos = (pos + 1u) & mask;
    }
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

// One pass over the 64-byte blocks (one block per thread iteration, rewritten in
// place). kPackedInput: the block holds eight packed key:tag words and is
// rewritten as eight keys then eight values. kFinalize: the tag of every
// occupied slot is a winning source row, replaced by that row's value. Empty
// slots get key and value kEmptyKey.
template <bool kPackedInput, bool kFinalize>
__global__ void __launch_bounds__(kBlockThreads)
    RewriteBlocksKernel(DeviceTable table, uint64_t blocks, const uint32_t* __restrict__ values,
                        uint32_t first_value, const uint64_t* __restrict__ chunk_starts,
                        const uint32_t* __restrict__ chunk_bases, uint32_t chunk_count) {
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  for (uint64_t q = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; q < blocks; q += stride) {
    uint4* p = reinterpret_cast<uint4*>(table.words() + 16 * q);
    uint32_t k[8], v[8];
    if (kPackedInput) {
      const uint4 a = p[0], b = p[1], c = p[2], d = p[3];
      // Little-endian uint64 key:tag = (low word tag, high word key).
      const uint32_t w[16] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w,
                              c.x, c.y, c.z, c.w, d.x, d.y, d.z, d.w};
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        v[j] = w[2 * j];
        k[j] = w[2 * j + 1];
      }
    } else {
      const uint4 a = p[0], b = p[1], c = p[2], d = p[3];
      k[0] = a.x, k[1] = a.y, k[2] = a.z, k[3] = a.w, k[4] = b.x, k[5] = b.y, k[6] = b.z,
      k[7] = b.w;
      v[0] = c.x, v[1] = c.y, v[2] = c.z, v[3] = c.w, v[4] = d.x, v[5] = d.y, v[6] = d.z,
      v[7] = d.w;
    }
    if (kFinalize) {
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        v[j] = k[j] == kEmptyKey ? kEmptyKey
                                 : FinalValue(v[j], values, first_value, chunk_starts,
                                              chunk_bases, chunk_count);
      }
    } else {
#pragma unroll
      for (int j = 0; j < 8; ++j) v[j] = k[j] == kEmptyKey ? kEmptyKey : v[j];
    }
    if (kPackedInput) {
      p[0] = make_uint4(k[0], k[1], k[2], k[3]);
      p[1] = make_uint4(k[4], k[5], k[6], k[7]);
    }
    p[2] = make_uint4(v[0], v[1], v[2], v[3]);
    p[3] = make_uint4(v[4], v[5], v[6], v[7]);
  }
}

struct ProbeResult {
  uint32_t value;
  uint32_t probes;
  bool found;
};

// Linear probing from the key's home slot over the blocked layout, reading one
// 32-byte key sector (eight keys) per step and the value word only on a hit.
// Probe counts are those of the slot-at-a-time definition: the number of slots
// examined up to and including the deciding one (the key or an empty slot), at
// most `bound`.
__device__ __forceinline__ ProbeResult Probe(const uint32_t* __restrict__ words, uint32_t capacity,
                                             uint32_t key, uint32_t bound) {
  if (key == kEmptyKey) return {kEmptyKey, 0u, false};
  const uint32_t mask = capacity - 1u;
  uint32_t pos = HomeSlot(key, capacity);
  uint32_t p = 0;
  if (capacity >= 8) {
    while (true) {
      const uint32_t base = pos & ~7u;
      const uint4* sector = reinterpret_cast<const uint4*>(words + uint64_t(base) * 2u);
      const uint4 a = __ldg(sector);
      const uint4 b = __ldg(sector + 1);
      const uint32_t k[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
      uint32_t hit = 0, empty = 0;
#pragma unroll
      for (uint32_t j = 0; j < 8; ++j) {
        hit |= uint32_t(k[j] == key) << j;
        empty |= uint32_t(k[j] == kEmptyKey) << j;
      }
      const uint32_t first = pos & 7u;
      const uint32_t stop = (hit | empty) >> first;  // lanes first.., from bit 0
      const uint32_t left = bound - p;                // slots still allowed
      if (stop != 0) {
        const uint32_t examined = uint32_t(__ffs(int(stop)));  // 1-based lane offset
        if (examined > left) return {kEmptyKey, bound, false};
        p += examined;
        const uint32_t lane = first + examined - 1u;
        if ((hit >> lane) & 1u) return {__ldg(words + uint64_t(base) * 2u + 8u + lane), p, true};
        return {kEmptyKey, p, false};
      }
      if (8u - first >= left) return {kEmptyKey, bound, false};
      p += 8u - first;
      pos = (base + 8u) & mask;
    }
  }
  while (p < bound) {
    const uint32_t k = __ldg(words + KeyWord(pos));
    ++p;
    if (k == key) return {__ldg(words + ValueWord(pos)), p, true};
    if (k == kEmptyKey) return {kEmptyKey, p, false};
    pos = (pos + 1u) & mask;
  }
  return {kEmptyKey, bound, false};
}

// ---- Region-partitioned build (InsertStrategy::kRegions) ----
// The table is cut into regions of kRegionSlots slots. Pass 1 counts the valid
// rows of each region (block-private shared histograms), a scan gives each
// region a segment of an entry buffer, pass 2 scatters (key, tag[, value]) into
// the segments, then one block per region inserts its entries into the region
// held in shared memory (64-bit key:tag words, CAS + atomicMin, so the lowest
// tag wins whatever the order) and writes the region out whole in the blocked
// layout, values final. A row whose probe run reaches its region's end without
// a decision (a spill) is listed and finished afterwards with global atomics
// from the next region's first slot: since slots only ever fill, every row of a
// key is decided the same way (all in the region, all spilled or all
// overflowing), so a spilled key never has a copy inside its home region.
constexpr int kRegionLog = 13;
constexpr uint32_t kRegionSlots = 1u << kRegionLog;
constexpr int kRegionThreads = 512;
constexpr uint32_t kMinRegionCapacity = 2u * kRegionSlots;
constexpr uint32_t kMaxRegionCapacity = 1u << 28;  // histogram of 32768 regions = 128 KiB

template <bool kHasValidity>
__device__ __forceinline__ bool ValidRow(const uint32_t* __restrict__ keys,
                                         const uint32_t* __restrict__ validity, uint64_t i,
                                         uint32_t& key) {
  key = keys[i];
  return key != kEmptyKey && (!kHasValidity || validity[i] != 0);
}

// Pass 1: valid rows per region into `counts`; invalid rows into the statistics.
// Block b handles rows [b * chunk, (b + 1) * chunk).
template <bool kHasValidity>
__global__ void __launch_bounds__(kBlockThreads)
    RegionCountKernel(const uint32_t* __restrict__ keys, const uint32_t* __restrict__ validity,
                      uint64_t rows, uint64_t chunk, uint32_t capacity, uint32_t* counts,
                      DeviceBuildStats* stats) {
  extern __shared__ uint32_t hist[];
  const uint32_t regions = capacity >> kRegionLog;
  for (uint32_t b = threadIdx.x; b < regions; b += blockDim.x) hist[b] = 0;
  __syncthreads();
  const uint64_t begin = uint64_t(blockIdx.x) * chunk;
  const uint64_t end = begin + chunk < rows ? begin + chunk : rows;
  unsigned long long sums[1] = {0};
  for (uint64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    uint32_t key;
    if (!ValidRow<kHasValidity>(keys, validity, i, key)) {
      ++sums[0];
      continue;
    }
    atomicAdd(&hist[HomeSlot(key, capacity) >> kRegionLog], 1u);
  }
  __syncthreads();
  for (uint32_t b = threadIdx.x; b < regions; b += blockDim.x)
    if (hist[b] != 0) atomicAdd(&counts[b], hist[b]);
  BlockFlushStats<1>(sums, 0, &stats->invalid_rows, nullptr);
}

// Pass 2: the same rows per block as pass 1; each block reserves its range of
// every region's segment (`cursor` starts at the segment offsets) and scatters.
template <bool kHasValidity>
__global__ void __launch_bounds__(kBlockThreads)
    RegionScatterKernel(const uint32_t* __restrict__ keys, const uint32_t* __restrict__ validity,
                        const uint32_t* __restrict__ values, uint64_t rows, uint64_t chunk,
                        uint32_t capacity, uint32_t tag_offset, uint32_t* cursor,
                        uint32_t* __restrict__ entry_keys, uint32_t* __restrict__ entry_tags,
                        uint32_t* __restrict__ entry_values) {
  extern __shared__ uint32_t hist[];
  const uint32_t regions = capacity >> kRegionLog;
  for (uint32_t b = threadIdx.x; b < regions; b += blockDim.x) hist[b] = 0;
  __syncthreads();
  const uint64_t begin = uint64_t(blockIdx.x) * chunk;
  const uint64_t end = begin + chunk < rows ? begin + chunk : rows;
  for (uint64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    uint32_t key;
    if (ValidRow<kHasValidity>(keys, validity, i, key))
      atomicAdd(&hist[HomeSlot(key, capacity) >> kRegionLog], 1u);
  }
  __syncthreads();
  for (uint32_t b = threadIdx.x; b < regions; b += blockDim.x) {
    const uint32_t c = hist[b];
    hist[b] = c != 0 ? atomicAdd(&cursor[b], c) : 0u;
  }
  __syncthreads();
  for (uint64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    uint32_t key;
    if (!ValidRow<kHasValidity>(keys, validity, i, key)) continue;
    const uint32_t d = atomicAdd(&hist[HomeSlot(key, capacity) >> kRegionLog], 1u);
    entry_keys[d] = key;
    entry_tags[d] = tag_offset + uint32_t(i);
    if (values != nullptr) entry_values[d] = values[i];
  }
}

// Value written for a retained slot whose tag is `tag`.
struct FinalValueSource {
  const uint32_t* values;  // explicit values (rows), or null
  uint32_t first_value;
  const uint64_t* chunk_starts;
  const uint32_t* chunk_bases;
  uint32_t chunk_count;
  bool direct;  // the tag is the value
};

__device__ __forceinline__ uint32_t TagValue(const FinalValueSource& f, uint32_t tag) {
  if (f.direct) return tag;
  return FinalValue(tag, f.values, f.first_value, f.chunk_starts, f.chunk_bases, f.chunk_count);
}

// One block per region. kCarried: explicit values travel with the entries (no
// gather); otherwise the value comes from the tag.
template <bool kCarried>
__global__ void __launch_bounds__(kRegionThreads)
    RegionInsertKernel(DeviceTable table, const uint32_t* __restrict__ offsets,
                       const uint32_t* __restrict__ entry_keys,
                       const uint32_t* __restrict__ entry_tags,
                       const uint32_t* __restrict__ entry_values, uint32_t bound,
                       FinalValueSource fv, uint32_t* __restrict__ spill_list,
                       uint32_t* spill_count, DeviceBuildStats* stats) {
  extern __shared__ unsigned long long region[];  // kRegionSlots words, then values
  uint32_t* region_values = reinterpret_cast<uint32_t*>(region + kRegionSlots);
  for (uint32_t j = threadIdx.x; j < kRegionSlots; j += blockDim.x) region[j] = kEmptySlot;
  __syncthreads();
  const uint32_t begin = offsets[blockIdx.x], end = offsets[blockIdx.x + 1];
  unsigned long long sums[5] = {0, 0, 0, 0, 0};  // unique, duplicate, overflow, invalid, probes
  unsigned long long max_probes = 0;
  for (uint64_t e = begin + threadIdx.x; e < end; e += blockDim.x) {
    const uint32_t key = entry_keys[e];
    const unsigned long long desired = (static_cast<unsigned long long>(key) << 32) | entry_tags[e];
    uint32_t local = HomeSlot(key, table.capacity) & (kRegionSlots - 1u);
    uint32_t p = 0;
    int outcome;  // 0 claimed, 1 duplicate, 2 overflow, 3 spill
    while (true) {
      if (p >= bound) {
        outcome = 2;
        break;
      }
      if (local >= kRegionSlots) {
        outcome = 3;
        break;
      }
      ++p;
      const unsigned long long cur = atomicCAS(&region[local], kEmptySlot, desired);
      if (cur == kEmptySlot) {
        outcome = 0;
        break;
      }
      if (uint32_t(cur >> 32) == key) {
        if (cur > desired) atomicMin(&region[local], desired);
        outcome = 1;
        break;
      }
      ++local;
    }
    if (outcome == 3) {
      spill_list[atomicAdd(spill_count, 1u)] = uint32_t(e);
      continue;
    }
    sums[0] += outcome == 0;
    sums[1] += outcome == 1;
    sums[2] += outcome == 2;
    sums[4] += p;
    if (p > max_probes) max_probes = p;
  }
  __syncthreads();
  if (kCarried) {
    // The winning entry of each retained key puts its value next to the slot.
    for (uint64_t e = begin + threadIdx.x; e < end; e += blockDim.x) {
      const uint32_t key = entry_keys[e];
      const uint32_t tag = entry_tags[e];
      uint32_t local = HomeSlot(key, table.capacity) & (kRegionSlots - 1u);
      for (uint32_t p = 0; p < bound && local < kRegionSlots; ++p, ++local) {
        const unsigned long long cur = region[local];
        if (uint32_t(cur >> 32) == key) {
          if (uint32_t(cur) == tag) region_values[local] = entry_values[e];
          break;
        }
        if (cur == kEmptySlot) break;
      }
    }
    __syncthreads();
  }
  // Write the region out: one 64-byte block (8 keys, then 8 values) per step.
  uint4* out = reinterpret_cast<uint4*>(table.words() + uint64_t(blockIdx.x) * kRegionSlots * 2u);
  for (uint32_t b = threadIdx.x; b < kRegionSlots / 8; b += blockDim.x) {
    uint32_t k[8], v[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const unsigned long long w = region[8 * b + j];
      k[j] = uint32_t(w >> 32);
      v[j] = k[j] == kEmptyKey ? kEmptyKey
                               : (kCarried ? region_values[8 * b + j] : TagValue(fv, uint32_t(w)));
    }
    out[4 * b + 0] = make_uint4(k[0], k[1], k[2], k[3]);
    out[4 * b + 1] = make_uint4(k[4], k[5], k[6], k[7]);
    out[4 * b + 2] = make_uint4(v[0], v[1], v[2], v[3]);
    out[4 * b + 3] = make_uint4(v[4], v[5], v[6], v[7]);
  }
  BlockFlushStats<5>(sums, max_probes, &stats->unique_keys, &stats->max_probes);
}

// Finishes the spilled entries with global atomics on the written table (split
// style: CAS on the key word, atomicMin of the tag on the value word), from the
// first slot after the home region. Writes, per spill, the slot it claimed (or
// kEmptyKey) back into the list for SpillFinalizeKernel.
__global__ void __launch_bounds__(kBlockThreads)
    SpillInsertKernel(DeviceTable table, const uint32_t* __restrict__ entry_keys,
                      const uint32_t* __restrict__ entry_tags, uint32_t* spill_list,
                      const uint32_t* spill_count, uint32_t bound, DeviceBuildStats* stats) {
  unsigned long long sums[5] = {0, 0, 0, 0, 0};
  unsigned long long max_probes = 0;
  uint32_t* const words = table.words();
  const uint32_t mask = table.capacity - 1u;
  const uint32_t n = *spill_count;
  for (uint32_t k = blockIdx.x * blockDim.x + threadIdx.x; k < n; k += gridDim.x * blockDim.x) {
    const uint32_t e = spill_list[k];
    const uint32_t key = entry_keys[e];
    const uint32_t tag = entry_tags[e];
    const uint32_t home = HomeSlot(key, table.capacity);
    const uint32_t next = ((home >> kRegionLog) + 1u) << kRegionLog;
    uint32_t p = next - home;  // slots examined in the home region
    uint32_t pos = next & mask;
    int outcome = 2;
    uint32_t claimed = kEmptyKey;
    while (p < bound) {
      uint32_t* slot = words + KeyWord(pos);
      ++p;
      uint32_t cur = __ldcg(slot);
      if (cur == kEmptyKey) cur = atomicCAS(slot, kEmptyKey, key);
      if (cur == kEmptyKey || cur == key) {
        atomicMin(slot + 8, tag);
        outcome = cur == kEmptyKey ? 0 : 1;
        if (outcome == 0) claimed = pos;
        break;
      }
      pos = (pos + 1u) & mask;
    }
    spill_list[k] = claimed;
    sums[0] += outcome == 0;
    sums[1] += outcome == 1;
    sums[2] += outcome == 2;
    const uint32_t examined = outcome == 2 ? bound : p;
    sums[4] += examined;
    if (examined > max_probes) max_probes = examined;
  }
  BlockFlushStats<5>(sums, max_probes, &stats->unique_keys, &stats->max_probes);
}

// Replaces the winning tag of every slot claimed by a spill with its value.
__global__ void __launch_bounds__(kBlockThreads)
    SpillFinalizeKernel(DeviceTable table, const uint32_t* __restrict__ spill_list,
                        const uint32_t* spill_count, FinalValueSource fv) {
  const uint32_t n = *spill_count;
  for (uint32_t k = blockIdx.x * blockDim.x + threadIdx.x; k < n; k += gridDim.x * blockDim.x) {
    const uint32_t slot = spill_list[k];
    if (slot == kEmptyKey) continue;
    uint32_t* v = table.words() + ValueWord(slot);
    *v = TagValue(fv, *v);
  }
}

// Scratch of one region build, carved from one allocation.
struct RegionScratch {
  uint32_t* counts = nullptr;   // regions + 1 (last stays 0)
  uint32_t* offsets = nullptr;  // regions + 1: exclusive scan of counts
  uint32_t* cursor = nullptr;   // regions
  uint32_t* spill_count = nullptr;
  uint32_t* entry_keys = nullptr;
  uint32_t* entry_tags = nullptr;
  uint32_t* entry_values = nullptr;  // explicit values only
  uint32_t* spill_list = nullptr;
  void* scan_temp = nullptr;
  size_t scan_temp_bytes = 0;
  size_t total = 0;
};

RegionScratch CarveRegionScratch(uint32_t regions, uint64_t rows, bool carried, void* base) {
  RegionScratch s;
  cub::DeviceScan::ExclusiveSum(nullptr, s.scan_temp_bytes, static_cast<uint32_t*>(nullptr),
                                static_cast<uint32_t*>(nullptr), int64_t(regions) + 1);
  auto* p = static_cast<uint8_t*>(base);
  auto take = [&](size_t bytes) {
    uint8_t* q = p == nullptr ? nullptr : p + s.total;
    s.total += (bytes + 255) & ~size_t(255);
    return q;
  };
  s.counts = reinterpret_cast<uint32_t*>(take((regions + 1) * 4ull));
  s.offsets = reinterpret_cast<uint32_t*>(take((regions + 1) * 4ull));
  s.cursor = reinterpret_cast<uint32_t*>(take(regions * 4ull));
  s.spill_count = reinterpret_cast<uint32_t*>(take(4));
  s.entry_keys = reinterpret_cast<uint32_t*>(take(rows * 4));
  s.entry_tags = reinterpret_cast<uint32_t*>(take(rows * 4));
  if (carried) s.entry_values = reinterpret_cast<uint32_t*>(take(rows * 4));
  s.spill_list = reinterpret_cast<uint32_t*>(take(rows * 4));
  s.scan_temp = take(s.scan_temp_bytes == 0 ? 1 : s.scan_temp_bytes);
  return s;
}

template <typename Kernel>
int ResidentBlocksWithShared(Kernel kernel, int threads, size_t shared) {
  int device = 0, sms = 0, per_sm = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return 0;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) return 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, shared) !=
      cudaSuccess)
    return 0;
  return sms * (per_sm > 0 ? per_sm : 1);
}

// Enqueues a region build. Returns cudaErrorMemoryAllocation (error state
// cleared, nothing enqueued) when the scratch cannot be allocated.
cudaError_t RegionBuild(DeviceTable table, const BuildSource& source, uint32_t bound,
                        bool direct, uint32_t tag_offset, DeviceBuildStats* stats,
                        cudaStream_t stream) {
  const uint32_t regions = table.capacity >> kRegionLog;
  const uint64_t rows = source.rows;
  const bool carried = source.values != nullptr;
  void* base = nullptr;
  const RegionScratch sizes = CarveRegionScratch(regions, rows, carried, nullptr);
  cudaError_t e = cudaMallocAsync(&base, sizes.total, stream);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return cudaErrorMemoryAllocation;
  }
  RegionScratch s = CarveRegionScratch(regions, rows, carried, base);
  const size_t hist_bytes = size_t(regions) * 4;
  const size_t region_bytes = size_t(kRegionSlots) * (carried ? 12 : 8);
  const bool validity = source.validity != nullptr;
  auto* count_kernel = validity ? RegionCountKernel<true> : RegionCountKernel<false>;
  auto* scatter_kernel = validity ? RegionScatterKernel<true> : RegionScatterKernel<false>;
  auto* insert = carried ? RegionInsertKernel<true> : RegionInsertKernel<false>;
  // Above 48 KiB of dynamic shared memory needs an opt-in (per device context,
  // so set on every call; it is a host-side attribute write).
  e = cudaFuncSetAttribute(count_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           int(hist_bytes));
  if (e == cudaSuccess)
    e = cudaFuncSetAttribute(scatter_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             int(hist_bytes));
  if (e == cudaSuccess)
    e = cudaFuncSetAttribute(insert, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             int(region_bytes));
  if (e != cudaSuccess) {
    (void)cudaFreeAsync(base, stream);
    return e;
  }
  int resident = ResidentBlocksWithShared(scatter_kernel, kBlockThreads, hist_bytes);
  if (resident <= 0) resident = 1024;
  // Enough rows per block that each block's share of a region is a run of
  // entries, not single scattered words.
  uint64_t grid = (rows + 4095) / 4096;
  if (grid > uint64_t(resident)) grid = uint64_t(resident);
  if (grid == 0) grid = 1;
  const uint64_t chunk = (rows + grid - 1) / grid;
  auto check = [&](cudaError_t err) {
    if (err == cudaSuccess) err = cudaGetLastError();
    return err;
  };
  e = cudaMemsetAsync(s.counts, 0, (regions + 1) * 4ull, stream);
  if (e == cudaSuccess) e = cudaMemsetAsync(s.spill_count, 0, 4, stream);
  if (e == cudaSuccess) {
    count_kernel<<<unsigned(grid), kBlockThreads, hist_bytes, stream>>>(
        source.keys, source.validity, rows, chunk, table.capacity, s.counts, stats);
    e = check(cudaSuccess);
  }
  if (e == cudaSuccess)
    e = cub::DeviceScan::ExclusiveSum(s.scan_temp, s.scan_temp_bytes, s.counts, s.offsets,
                                      int64_t(regions) + 1, stream);
  if (e == cudaSuccess)
    e = cudaMemcpyAsync(s.cursor, s.offsets, regions * 4ull, cudaMemcpyDeviceToDevice, stream);
  if (e == cudaSuccess) {
    scatter_kernel<<<unsigned(grid), kBlockThreads, hist_bytes, stream>>>(
        source.keys, source.validity, source.values, rows, chunk, table.capacity, tag_offset,
        s.cursor, s.entry_keys, s.entry_tags, s.entry_values);
    e = check(cudaSuccess);
  }
  const FinalValueSource fv{source.values,       source.first_value, source.chunk_starts,
                            source.chunk_bases,  source.chunk_count, direct};
  if (e == cudaSuccess) {
    insert<<<regions, kRegionThreads, region_bytes, stream>>>(
        table, s.offsets, s.entry_keys, s.entry_tags, s.entry_values, bound, fv, s.spill_list,
        s.spill_count, stats);
    e = check(cudaSuccess);
  }
  static std::atomic<int> resident_spill{0};
  const unsigned sgrid = unsigned(CachedResident(SpillInsertKernel, resident_spill));
  if (e == cudaSuccess) {
    SpillInsertKernel<<<sgrid > 0 ? sgrid : 1u, kBlockThreads, 0, stream>>>(
        table, s.entry_keys, s.entry_tags, s.spill_list, s.spill_count, bound, stats);
    e = check(cudaSuccess);
  }
  if (e == cudaSuccess && !direct) {
    SpillFinalizeKernel<<<sgrid > 0 ? sgrid : 1u, kBlockThreads, 0, stream>>>(
        table, s.spill_list, s.spill_count, fv);
    e = check(cudaSuccess);
  }
  const cudaError_t f = cudaFreeAsync(base, stream);
  return e != cudaSuccess ? e : f;
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
    const ProbeResult r = Probe(table.words(), table.capacity, __ldcs(keys + i), bound);
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
  const uint64_t rows = source.rows;
  const uint32_t* validity = source.validity;
  const bool load = source.load_before_cas;
  cudaError_t e = cudaSuccess;
  InsertStrategy strategy = source.strategy;
  if (strategy == InsertStrategy::kRegions) {
    if (table.capacity >= kMinRegionCapacity && table.capacity <= kMaxRegionCapacity &&
        rows < (uint64_t{1} << 32)) {
      e = RegionBuild(table, source, bound, direct, tag_offset, stats, stream);
      if (e != cudaErrorMemoryAllocation) return e;
    }
    strategy = InsertStrategy::kSplit;  // out of range, or no scratch memory
  }
  const bool split = strategy == InsertStrategy::kSplit;
  if (split) {
    static std::atomic<int> resident_split{0};
    const unsigned grid =
        GridFor(rows, CachedResident(InsertSplitKernel<false, true>, resident_split));
    auto* kernel = validity != nullptr ? (load ? InsertSplitKernel<true, true>
                                               : InsertSplitKernel<true, false>)
                                       : (load ? InsertSplitKernel<false, true>
                                               : InsertSplitKernel<false, false>);
    kernel<<<grid, kBlockThreads, 0, stream>>>(table, source.keys, validity, rows, bound,
                                               tag_offset, stats);
  } else {
    static std::atomic<int> resident_packed{0};
    const unsigned grid = GridFor(rows, CachedResident(InsertKernel<false, true>, resident_packed));
    auto* kernel = validity != nullptr
                       ? (load ? InsertKernel<true, true> : InsertKernel<true, false>)
                       : (load ? InsertKernel<false, true> : InsertKernel<false, false>);
    kernel<<<grid, kBlockThreads, 0, stream>>>(table, source.keys, validity, rows, bound,
                                               tag_offset, stats);
  }
  e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  // Split inserts with tags that are the final values leave nothing to do; every
  // other case takes one in-place pass over the 64-byte blocks.
  if (split && direct) return cudaSuccess;
  const uint64_t blocks = TableAllocationSlots(table.capacity) / 8;
  auto* rewrite = split ? RewriteBlocksKernel<false, true>
                                      : (direct ? RewriteBlocksKernel<true, false>
                                                : RewriteBlocksKernel<true, true>);
  static std::atomic<int> resident_rewrite{0};
  const unsigned rgrid =
      GridFor(blocks, CachedResident(RewriteBlocksKernel<true, true>, resident_rewrite));
  rewrite<<<rgrid, kBlockThreads, 0, stream>>>(table, blocks, source.values, source.first_value,
                                               source.chunk_starts, source.chunk_bases,
                                               source.chunk_count);
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
