// Build and lookup kernels of the CUDA hash index. See device_ops.hpp for the
// table layout and the contracts.
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>
#include <cuda/functional>
#include <type_traits>

#include "cuda/device_ops.hpp"
#include "cuda/kernel_utils.cuh"
#include "cuda/tile_layout.hpp"
#include "gpujoin/engine/detail/slot_hash.hpp"

namespace gpujoin::engine::detail {
namespace {

__device__ __forceinline__ uint32_t SlotKey(uint64_t slot) { return uint32_t(slot >> 32); }
__device__ __forceinline__ uint32_t SlotLow(uint64_t slot) { return uint32_t(slot); }

// Inserts one packed word key:tag in Robin Hood order (detail::ResidentComesFirst,
// docs/engine.md "Slots and probing"). A row's tag is the final value (direct
// mode: generated values that grow with the row, so the lowest row has the
// lowest tag), the global source row, or the row's position in the wave path's
// stable partition buffer (both finalised later). All three make "keep the lowest
// row" a 64-bit minimum among words of the same key, so the outcome does not
// depend on thread order.
//
// The word walks from its key's home. At each slot: an empty slot is claimed
// (CAS); a word of the same key keeps the smaller of the two (CAS); a resident
// that comes first is passed; otherwise the word takes the slot (CAS) and the
// thread carries the resident on from the next slot. A failed CAS re-examines the
// slot with the value it returned. A slot never empties once claimed and its
// resident only ever changes to one that comes first there (or to the same key
// with a lower tag), so every stored key keeps "all slots from my home to me hold
// keys that come first", and the final layout is the sorted one whatever the
// thread order. Two copies of one key may briefly coexist (one being carried);
// the later one to arrive meets the other and the minimum is kept.
//
// Statistics (`sums`: unique, duplicate, overflow, invalid, probes; `max_probes`):
// each word adds the slots it examines (so a key adds its final displacement + 1
// over its moves), the row's key counts once as unique / duplicate / overflow, a
// carried key that merges into its other copy moves one count from unique to
// duplicate, and one carried past the bound moves one from unique to overflow
// (unsigned wrap-around: the block and grid sums are exact). `max_probes` takes
// displacement + 1 wherever a word is stored or merged, and the bound on overflow.
//
// The insertion is written as a sequence of steps, one slot each (InsertStep).
struct InsertState {
  uint64_t word;      // the word being placed: the row's, then carried ones
  uint32_t word_key;  // SlotKey(word)
  uint32_t pos;       // the slot to examine next
  uint32_t d;         // displacement of `word` at `pos`
  bool own;           // `word` is still the row's own
};

__device__ __forceinline__ InsertState StartInsert(DeviceTable table, uint32_t key,
                                                   uint64_t desired) {
  return InsertState{desired, key, HomeSlot(key, table.capacity), 0u, true};
}

enum class StepResult { kContinue, kSettled };

// Examines slot st.pos for st.word (see above).
template <bool kLoadFirst>
__device__ __forceinline__ StepResult InsertStep(DeviceTable table, InsertState& st, uint32_t bound,
                                                 unsigned long long (&sums)[5],
                                                 unsigned long long& max_probes) {
  constexpr unsigned long long kMinusOne = ~0ull;
  if (st.d >= bound) {
    sums[2] += 1;
    if (!st.own) sums[0] += kMinusOne;
    if (bound > max_probes) max_probes = bound;
    return StepResult::kSettled;
  }
  unsigned long long* slot = reinterpret_cast<unsigned long long*>(table.slots + st.pos);
  // kLoadFirst: a plain (L2) read first; a stale value is safe (residents only
  // move towards "comes first", and a CAS against a stale value fails and
  // re-examines). Otherwise the CAS itself is the read (one round trip when the
  // slot is empty, the common case at moderate load).
  unsigned long long cur = kLoadFirst ? __ldcg(slot) : kEmptySlot;
  ++sums[4];
  while (true) {
    if (cur == kEmptySlot) {
      const unsigned long long prev = atomicCAS(slot, kEmptySlot, st.word);
      if (prev == kEmptySlot) {
        if (st.own) sums[0] += 1;
        if (st.d + 1u > max_probes) max_probes = st.d + 1u;
        return StepResult::kSettled;
      }
      cur = prev;
      continue;
    }
    const uint32_t resident = SlotKey(cur);
    if (resident == st.word_key) {
      if (cur > st.word) {
        const unsigned long long prev = atomicCAS(slot, cur, st.word);
        if (prev != cur) {
          cur = prev;
          continue;
        }
      }
      sums[1] += 1;
      if (!st.own) sums[0] += kMinusOne;
      if (st.d + 1u > max_probes) max_probes = st.d + 1u;
      return StepResult::kSettled;
    }
    if (ResidentComesFirst(resident, st.word_key, st.d, st.pos, table.capacity)) break;
    const unsigned long long prev = atomicCAS(slot, cur, st.word);
    if (prev != cur) {
      cur = prev;
      continue;
    }
    // `word` is stored here; carry the resident on from the next slot.
    if (st.own) sums[0] += 1;
    st.own = false;
    if (st.d + 1u > max_probes) max_probes = st.d + 1u;
    st.word = cur;
    st.word_key = resident;
    st.d = (st.pos - HomeSlot(resident, table.capacity)) & (table.capacity - 1u);
    break;
  }
  st.pos = (st.pos + 1u) & (table.capacity - 1u);
  ++st.d;
  return StepResult::kContinue;
}

// First come, first served (the wave steps; the runs are sorted afterwards,
// SortTilesKernel): the word takes the first empty slot from its home; a word of
// the same key keeps the smaller one (keys never move here, so an atomic minimum
// is enough). Returns false when the word reaches `frontier` (see RunWaves).
template <bool kLoadFirst>
__device__ __forceinline__ bool InsertFirstCome(DeviceTable table, uint32_t key, uint64_t desired,
                                                uint32_t bound, unsigned long long (&sums)[5],
                                                uint32_t frontier) {
  const uint32_t mask = table.capacity - 1u;
  uint32_t pos = HomeSlot(key, table.capacity);
  uint32_t p = 0;
  int outcome = 2;  // overflow unless a slot is found
  for (; p < bound; ++p) {
    if (pos == frontier) return false;
    unsigned long long* slot = reinterpret_cast<unsigned long long*>(table.slots + pos);
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
  sums[4] += outcome == 2 ? bound : p + 1u;
  return true;
}

// The whole insertion of one word (the direct path).
template <bool kLoadFirst>
__device__ __forceinline__ void InsertWord(DeviceTable table, uint32_t key, uint64_t desired,
                                           uint32_t bound, unsigned long long (&sums)[5],
                                           unsigned long long& max_probes) {
  InsertState st = StartInsert(table, key, desired);
  while (InsertStep<kLoadFirst>(table, st, bound, sums, max_probes) == StepResult::kContinue) {
  }
}

// Direct path: inserts rows [0, rows) in row order (one thread per row).
template <bool kHasValidity, bool kLoadFirst>
__global__ void __launch_bounds__(kBlockThreads)
    InsertKernel(DeviceTable table, const uint32_t* __restrict__ keys,
                 const uint32_t* __restrict__ validity, uint64_t rows, uint32_t bound,
                 uint32_t tag_offset, DeviceBuildStats* stats,
                 const unsigned int* only_if = nullptr) {
  // only_if: the wave path's fallback runs only when its flag is set (the flag
  // does not change while this kernel runs, so the whole block returns).
  if (only_if != nullptr && *only_if == 0) return;
  unsigned long long sums[5] = {0, 0, 0, 0, 0};  // unique, duplicate, overflow, invalid, probes
  unsigned long long max_probes = 0;
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  for (uint64_t i = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < rows; i += stride) {
    const uint32_t key = keys[i];
    if (key == kEmptyKey || (kHasValidity && validity[i] == 0)) {
      ++sums[3];
      continue;
    }
    const uint64_t desired = (uint64_t(key) << 32) | uint32_t(tag_offset + uint32_t(i));
    InsertWord<kLoadFirst>(table, key, desired, bound, sums, max_probes);
  }
  BlockFlushStats<5>(sums, max_probes, &stats->unique_keys, &stats->max_probes);
}

// ---- Region partition (wave path) ---------------------------------------------
// The direct insert is bound by random 64-bit atomics into a table that does not
// fit in L2. The wave path first groups the valid rows by table region
// (home slot >> region_bits) into a transient buffer of packed key:tag words,
// then inserts the buffer in region order with the same InsertWord, so the part
// of the table being written stays L2-resident (see "Wave path" below).

constexpr uint32_t kMaxRegions = 2048;
constexpr int kScatterItems = 8;

// Counts valid rows per region (counts[regions], zeroed) and invalid rows.
template <bool kHasValidity>
__global__ void __launch_bounds__(kBlockThreads)
    RegionHistogramKernel(const uint32_t* __restrict__ keys, const uint32_t* __restrict__ validity,
                          uint64_t rows, uint32_t capacity, uint32_t region_bits, uint32_t regions,
                          unsigned long long* counts, DeviceBuildStats* stats) {
  __shared__ unsigned int hist[kMaxRegions];
  for (uint32_t r = threadIdx.x; r < regions; r += blockDim.x) hist[r] = 0;
  __syncthreads();
  unsigned long long invalid[1] = {0};
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  for (uint64_t i = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < rows; i += stride) {
    const uint32_t key = keys[i];
    if (key == kEmptyKey || (kHasValidity && validity[i] == 0)) {
      ++invalid[0];
      continue;
    }
    atomicAdd(&hist[HomeSlot(key, capacity) >> region_bits], 1u);
  }
  __syncthreads();
  for (uint32_t r = threadIdx.x; r < regions; r += blockDim.x)
    if (hist[r] != 0) atomicAdd(&counts[r], static_cast<unsigned long long>(hist[r]));
  BlockFlushStats<1>(invalid, 0, &stats->invalid_rows, nullptr);
}

// counts[r] -> exclusive prefix (the write cursor of region r); counts[regions]
// receives the total. Tiny: one thread.
__global__ void RegionScanKernel(unsigned long long* counts, uint32_t regions) {
  unsigned long long sum = 0;
  for (uint32_t r = 0; r < regions; ++r) {
    const unsigned long long c = counts[r];
    counts[r] = sum;
    sum += c;
  }
  counts[regions] = sum;
}

// Block-staged scatter: per tile of kScatterItems x kBlockThreads rows, a
// shared histogram gives every row its offset inside the block's run of its
// region, and one global atomic per region and tile reserves that run. The
// order inside a run is arbitrary (the words carry row tags and the insert keeps
// the lowest tag anyway).
template <bool kHasValidity>
__global__ void __launch_bounds__(kBlockThreads)
    RegionScatterKernel(const uint32_t* __restrict__ keys, const uint32_t* __restrict__ validity,
                        uint64_t rows, uint32_t capacity, uint32_t region_bits, uint32_t regions,
                        uint32_t tag_offset, unsigned long long* cursor,
                        uint64_t* __restrict__ out_words) {
  __shared__ unsigned int local[kMaxRegions];
  __shared__ unsigned long long base[kMaxRegions];
  constexpr uint64_t kTile = uint64_t(kBlockThreads) * kScatterItems;
  for (uint64_t t0 = uint64_t(blockIdx.x) * kTile; t0 < rows; t0 += uint64_t(gridDim.x) * kTile) {
    for (uint32_t r = threadIdx.x; r < regions; r += blockDim.x) local[r] = 0;
    __syncthreads();
    uint32_t key[kScatterItems], region[kScatterItems], offset[kScatterItems];
#pragma unroll
    for (int j = 0; j < kScatterItems; ++j) {
      const uint64_t i = t0 + uint64_t(j) * kBlockThreads + threadIdx.x;
      region[j] = kEmptyKey;
      if (i < rows) {
        key[j] = __ldcs(keys + i);
        if (key[j] != kEmptyKey && (!kHasValidity || validity[i] != 0)) {
          region[j] = HomeSlot(key[j], capacity) >> region_bits;
          offset[j] = atomicAdd(&local[region[j]], 1u);
        }
      }
    }
    __syncthreads();
    for (uint32_t r = threadIdx.x; r < regions; r += blockDim.x)
      if (local[r] != 0) base[r] = atomicAdd(&cursor[r], static_cast<unsigned long long>(local[r]));
    __syncthreads();
#pragma unroll
    for (int j = 0; j < kScatterItems; ++j) {
      if (region[j] == kEmptyKey) continue;
      const uint64_t i = t0 + uint64_t(j) * kBlockThreads + threadIdx.x;
      const unsigned long long at = base[region[j]] + offset[j];
      out_words[at] = (uint64_t(key[j]) << 32) | uint32_t(tag_offset + uint32_t(i));
    }
    __syncthreads();  // `local` and `base` are reused by the next tile
  }
}

// ---- Warp-multisplit partition (at most 32 regions), stable ---------------------
// The histogram scatter above does one shared-memory atomic per row on few
// addresses (heavy same-address contention with 32 regions) and scatters 8-byte
// words to up to 32 write fronts per warp store. Here a warp classifies 32 rows
// at once with one ballot per region bit: lane r's count of region r is the
// popcount of the AND of the (possibly inverted) bit ballots, and a row's rank
// among the warp's rows of its region is the popcount of its own match mask below
// its lane. The scatter stages each tile sorted by region in shared memory and
// writes every region's run with consecutive threads.
//
// The partition is stable: inside each region's run of the buffer the words are
// in ascending source row order. The rows are cut into segments of
// kSegmentTiles tiles; SegmentCountKernel counts every (region, segment) pair,
// region-major, one exclusive scan over those counts gives each pair its first
// output position, and the scatter handles each segment's tiles in order with
// one block, each warp taking contiguous rows of the tile (warp prefix, then
// item, then lane is row order). So a word's position grows with its row among
// the words of its region; with explicit values the words are tagged with their
// position and the values carried along (see BuildWaves).

constexpr uint32_t kMultisplitMaxRegions = 32;
constexpr int kSplitItems = 8;  // rows per thread and tile
constexpr uint32_t kSplitTile = kBlockThreads * kSplitItems;
constexpr int kWarpsPerBlock = kBlockThreads / 32;
constexpr uint32_t kWarpTileRows = 32 * kSplitItems;  // contiguous rows per warp and tile
/// Tiles per segment: the unit of the per-region counts and of one scatter block's
/// sequential work (16384 rows).
constexpr uint32_t kSegmentTiles = 8;
constexpr uint64_t kSegmentRows = uint64_t(kSplitTile) * kSegmentTiles;

// Lanes (in `valid`) whose region equals `target`, from the bit ballots.
__device__ __forceinline__ unsigned MatchRegion(const unsigned (&ballots)[5], int bits,
                                                uint32_t target, unsigned valid) {
  unsigned m = valid;
#pragma unroll
  for (int b = 0; b < 5; ++b)
    if (b < bits) m &= ((target >> b) & 1u) ? ballots[b] : ~ballots[b];
  return m;
}

// Valid rows of every (region, segment): counts[r * segments + seg]; also
// counts[regions * segments] = 0 (the scan's last input, so that its output is
// the total) and the invalid rows. regions <= 32. Lane-private counters in shared
// memory, region-major (thread t's counter of region r at [r][t]: every lane of a
// warp in its own bank whatever the regions), so counting a row is a shared load,
// add and store with no atomic; the block adds the columns once per segment.
// (A ballot-per-region-bit count measured compute-bound on an H200: 78 % SM
// throughput, 396 us for 2^26 rows under ncu.)
template <bool kHasValidity, typename CountT>
__global__ void __launch_bounds__(kBlockThreads)
    SegmentCountKernel(const uint32_t* __restrict__ keys, const uint32_t* __restrict__ validity,
                       uint64_t rows, uint32_t capacity, uint32_t region_bits, uint32_t regions,
                       uint64_t segments, CountT* __restrict__ counts, DeviceBuildStats* stats) {
  __shared__ uint32_t lane_counts[kMultisplitMaxRegions][kBlockThreads];
  const uint32_t lane = threadIdx.x & 31u;
  const uint32_t warp = threadIdx.x / 32;
  if (blockIdx.x == 0 && threadIdx.x == 0) counts[uint64_t(regions) * segments] = 0;
  unsigned long long invalid[1] = {0};
  for (uint64_t seg = blockIdx.x; seg < segments; seg += gridDim.x) {
    for (uint32_t r = 0; r < regions; ++r) lane_counts[r][threadIdx.x] = 0;  // own column
    const uint64_t end = (seg + 1) * kSegmentRows < rows ? (seg + 1) * kSegmentRows : rows;
    for (uint64_t i = seg * kSegmentRows + threadIdx.x; i < end; i += kBlockThreads) {
      const uint32_t key = __ldcs(keys + i);
      if (key == kEmptyKey || (kHasValidity && validity[i] == 0)) {
        ++invalid[0];
        continue;
      }
      ++lane_counts[HomeSlot(key, capacity) >> region_bits][threadIdx.x];
    }
    __syncthreads();
    for (uint32_t r = warp; r < regions; r += kWarpsPerBlock) {
      uint32_t sum = 0;
#pragma unroll
      for (uint32_t k = 0; k < kBlockThreads / 32; ++k) sum += lane_counts[r][lane + 32 * k];
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) sum += __shfl_down_sync(0xffffffffu, sum, o);
      if (lane == 0) counts[uint64_t(r) * segments + seg] = CountT(sum);
    }
    __syncthreads();  // the columns are cleared for the next segment
  }
  BlockFlushStats<1>(invalid, 0, &stats->invalid_rows, nullptr);
}

// ends[r] = end of region r's words (= the scanned offset of region r + 1's
// first segment), for r < regions, and ends[regions] = the total. One small block.
template <typename CountT>
__global__ void RegionEndsKernel(const CountT* __restrict__ offsets, uint64_t segments,
                                 uint32_t regions, unsigned long long* ends) {
  for (uint32_t r = threadIdx.x; r <= regions; r += blockDim.x)
    ends[r] = offsets[uint64_t(r < regions ? r + 1 : regions) * segments];
}

// Stable scatter of the valid rows into their regions' runs: segment `seg`'s
// words of region r start at offsets[r * segments + seg] (the exclusive scan of
// SegmentCountKernel's counts). One block per segment at a time, its tiles in
// order; warp w of a tile takes rows t0 + w * 256 + j * 32 + lane (j < 8).
// kPositions: tag each word with its position in the buffer instead of
// tag_offset + row, and write the row's explicit value to out_values[position].
template <bool kHasValidity, bool kPositions, typename CountT>
__global__ void __launch_bounds__(kBlockThreads)
    RegionMultisplitKernel(const uint32_t* __restrict__ keys, const uint32_t* __restrict__ validity,
                           const uint32_t* __restrict__ values, uint64_t rows, uint32_t capacity,
                           uint32_t region_bits, uint32_t regions, uint32_t tag_offset,
                           uint64_t segments, const CountT* __restrict__ offsets,
                           uint64_t* __restrict__ out_words, uint32_t* __restrict__ out_values) {
  __shared__ uint64_t stage_words[kSplitTile];
  __shared__ uint32_t stage_values[kPositions ? kSplitTile : 1];
  __shared__ uint8_t stage_region[kSplitTile];
  __shared__ uint32_t warp_counts[kWarpsPerBlock][kMultisplitMaxRegions];
  __shared__ uint32_t tile_start[kMultisplitMaxRegions + 1];
  // Output position of staged entry k of region r: tile_base[r] + k (modulo 2^64).
  __shared__ unsigned long long tile_base[kMultisplitMaxRegions];
  const uint32_t lane = threadIdx.x & 31u;
  const uint32_t warp = threadIdx.x / 32;
  const unsigned lower = (1u << lane) - 1u;
  const int bits = 31 - __clz(regions);
  for (uint64_t seg = blockIdx.x; seg < segments; seg += gridDim.x) {
    // Warp 0, lane r: the next output position of region r in this segment.
    unsigned long long next = 0;
    if (warp == 0 && lane < regions) next = offsets[uint64_t(lane) * segments + seg];
    const uint64_t seg_end = (seg + 1) * kSegmentRows < rows ? (seg + 1) * kSegmentRows : rows;
    for (uint64_t t0 = seg * kSegmentRows; t0 < seg_end; t0 += kSplitTile) {
      const uint64_t warp_rows = t0 + uint64_t(warp) * kWarpTileRows + lane;
      uint32_t key[kSplitItems], region[kSplitItems], rank[kSplitItems];
      uint32_t running = 0;  // this warp's rows of region `lane` so far in the tile
#pragma unroll
      for (int j = 0; j < kSplitItems; ++j) {
        const uint64_t i = warp_rows + uint64_t(j) * 32;
        bool valid = false;
        region[j] = 0;
        key[j] = 0;
        if (i < seg_end) {
          key[j] = __ldcs(keys + i);
          valid = key[j] != kEmptyKey && (!kHasValidity || validity[i] != 0);
          if (valid) region[j] = HomeSlot(key[j], capacity) >> region_bits;
        }
        unsigned ballots[5];
#pragma unroll
        for (int b = 0; b < 5; ++b) ballots[b] = __ballot_sync(0xffffffffu, (region[j] >> b) & 1u);
        const unsigned valid_lanes = __ballot_sync(0xffffffffu, valid);
        const unsigned same = MatchRegion(ballots, bits, region[j], valid_lanes);
        const uint32_t before = __shfl_sync(0xffffffffu, running, region[j]);
        rank[j] = valid ? before + __popc(same & lower) : ~0u;
        if (lane < regions) running += __popc(MatchRegion(ballots, bits, lane, valid_lanes));
      }
      warp_counts[warp][lane] = lane < regions ? running : 0u;
      __syncthreads();
      if (warp == 0) {
        // Per region (lane): prefix over warps, tile total, then the tile's region
        // starts (prefix over regions) and where the region's entries go.
        uint32_t total = 0;
#pragma unroll
        for (int w = 0; w < kWarpsPerBlock; ++w) {
          const uint32_t c = warp_counts[w][lane];
          warp_counts[w][lane] = total;
          total += c;
        }
        uint32_t scan = total;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
          const uint32_t v = __shfl_up_sync(0xffffffffu, scan, o);
          if (lane >= uint32_t(o)) scan += v;
        }
        tile_start[lane] = scan - total;
        if (lane == 31) tile_start[32] = scan;
        tile_base[lane] = next - (scan - total);
        next += total;
      }
      __syncthreads();
#pragma unroll
      for (int j = 0; j < kSplitItems; ++j) {
        if (rank[j] == ~0u) continue;
        const uint64_t i = warp_rows + uint64_t(j) * 32;
        const uint32_t at = tile_start[region[j]] + warp_counts[warp][region[j]] + rank[j];
        stage_words[at] = (uint64_t(key[j]) << 32) | uint32_t(tag_offset + uint32_t(i));
        stage_region[at] = static_cast<uint8_t>(region[j]);
        if (kPositions) stage_values[at] = __ldcs(values + i);
      }
      __syncthreads();
      const uint32_t staged = tile_start[32];
      for (uint32_t k = threadIdx.x; k < staged; k += kBlockThreads) {
        const unsigned long long at = tile_base[stage_region[k]] + k;
        if (kPositions) {
          out_words[at] = (stage_words[k] & 0xffffffff00000000ull) | uint32_t(at);
          out_values[at] = stage_values[k];
        } else {
          out_words[at] = stage_words[k];
        }
      }
      __syncthreads();  // shared staging is reused by the next tile
    }
  }
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

// Replaces the tag of every occupied slot by the winning row's value. Four
// slots per thread (the allocation has at least four, padded with empty slots)
// so that up to four value gathers are in flight at once. The tag is the source
// row, except after a wave build whose partition carried the values
// (`part_values` non-null) and did not spill (`*spilled` == 0): there it is the
// word's position in the partition buffer and the value is part_values[tag]
// (slots in region order read their region's run: L2 hits, not DRAM).
__global__ void __launch_bounds__(kBlockThreads)
    FinalizeKernel(DeviceTable table, uint64_t groups_of_four, const uint32_t* __restrict__ values,
                   uint32_t first_value, const uint64_t* __restrict__ chunk_starts,
                   const uint32_t* __restrict__ chunk_bases, uint32_t chunk_count,
                   const uint32_t* __restrict__ part_values, const unsigned int* spilled,
                   bool only_after_fallback) {
  if (spilled != nullptr && *spilled == 0 && only_after_fallback) return;  // sorted and finalised
  if (part_values != nullptr && *spilled != 0) part_values = nullptr;      // row tags (fallback)
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  for (uint64_t q = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; q < groups_of_four;
       q += stride) {
    ulonglong2* p = reinterpret_cast<ulonglong2*>(table.slots + 4 * q);
    const ulonglong2 a = p[0], b = p[1];
    uint64_t s[4] = {a.x, a.y, b.x, b.y};
    uint32_t v[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      v[j] = s[j] == kEmptySlot       ? 0u
             : part_values != nullptr ? part_values[SlotLow(s[j])]
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

// ---- Robin Hood order after a first-come insert -------------------------------
// A first-come-first-served insert leaves the same slots occupied as the Robin
// Hood insert (with linear probing the occupied set depends only on the keys),
// and every run (maximal sequence of occupied slots) holds the right keys in
// the wrong order. SortTile puts the runs of one tile into Robin Hood order:
// sorted by (home, key), home counted from a point before the run's first slot.
// The build's maximum probes become the largest displacement + 1 of the sorted
// layout; the total probes need no change (a run's displacements sum to the
// same total in any order). SortTilesKernel runs it on every tile after the
// wave steps. (Sorting region s - 2 inside wave step s instead measured slower
// on an H200: the steps grew by what the sort pass took, 4.69 against 3.35 +
// 1.29 ms; docs/PERFORMANCE.md, "Eighth round".) A build that
// overflowed (the first-come overflow rows are not the Robin Hood ones), a full
// table (no run has a first slot), a run reaching more than kSortExtension slots
// past its tile or a sorted displacement past the bound sets `resort`: the build
// is then redone by the Robin Hood direct insert.

// What the finalisation needs besides the table (see FinalizeKernel).
struct FinalizeArgs {
  const uint32_t* values;
  uint32_t first_value;
  const uint64_t* chunk_starts;
  const uint32_t* chunk_bases;
  uint32_t chunk_count;
  const uint32_t* part_values;
};

struct RunSortArgs {
  const unsigned int* spilled;  // set: the fallback's Robin Hood insert ran; nothing to do
  unsigned int* resort;         // zeroed; set when the runs cannot be sorted here
  uint32_t bound;
};

constexpr uint32_t kSortTile = 2048;       // slots per tile
constexpr uint32_t kSortExtension = 1024;  // slots past its tile a run may reach
constexpr uint32_t kSortSlots = kSortTile + kSortExtension;
constexpr uint32_t kSortMaskWords = kSortSlots / 32 + 1;  // + one past the last slot
constexpr uint32_t kNoEnd = 0xffffffffu;
constexpr uint64_t kNoOrder = ~0ull;  // the order of an empty slot
static_assert(kBlockThreads == 256, "SortTile loads a tile in 4 rounds of 16-byte loads");

// The order of the word at tile index k (slot `slot`): its home counted from the
// tile's first slot (k minus its displacement, which also holds past the end of
// the table, where a run wraps to slot 0, and in a table of one tile), then
// its key.
__device__ __forceinline__ uint64_t SlotOrder(uint64_t w, uint32_t k, uint32_t slot,
                                              uint32_t capacity) {
  if (w == kEmptySlot) return kNoOrder;
  const uint32_t home = k - ((slot - HomeSlot(SlotKey(w), capacity)) & (capacity - 1u));
  return (uint64_t(home) << 32) | SlotKey(w);
}

struct SortShared {
  uint64_t order[kSortSlots];
  uint32_t tag[kSortSlots];
  uint32_t occupied[kSortMaskWords], inverted[kSortMaskWords];
  unsigned int first, end;
};

// Before sorting: the maximum probes are those of the sorted layout (the steps
// do not count them; the fallback counts its own).
__global__ void ResetMaxProbesKernel(DeviceBuildStats* stats, const unsigned int* spilled) {
  if (*spilled == 0) stats->max_probes = 0;
}

// Sorts the runs of the tile of min(capacity, kSortTile) slots at tile_start;
// called by a whole block of kBlockThreads. The block owns the runs whose first
// slot lies in the tile (a run that begins before the tile belongs to the tile
// before, which reads past its own end for it). The tile and the end of its last
// run go into shared memory as each slot's order and tag, with bit masks of the
// occupied slots and of the slots whose order is below the slot before (an
// inversion). A key whose run has no inversion stays; in a run with one, every
// key counts the keys of its run that sort before it, which gives its place.
// Only keys whose place changes are written, or with kFinalize every owned key,
// its tag replaced by its value (the finalisation pass folded in: `fin`). No
// other tile reads or writes an owned slot (it only tests whether the slot
// before it is empty, which sorting does not change), so the writes need no
// ordering against other blocks.
template <bool kFinalize>
__device__ __forceinline__ void SortTile(DeviceTable table, const RunSortArgs& a,
                                         const FinalizeArgs& fin, uint32_t tile_start,
                                         SortShared& s, unsigned long long& max_probes,
                                         bool& too_far) {
  const uint32_t capacity = table.capacity;
  const uint32_t mask = capacity - 1u;
  const uint32_t lane = threadIdx.x & 31u;
  const uint32_t tile = min(capacity, kSortTile);
  const uint32_t extension = min(capacity, kSortExtension);
  const unsigned long long* slots = reinterpret_cast<const unsigned long long*>(table.slots);
  // A run that enters the tile from the one before is not ours: we start after
  // the tile's first empty slot.
  const bool enters = slots[(tile_start - 1u) & mask] != kEmptySlot;
  __syncthreads();  // the previous tile is done with `s`
  if (threadIdx.x == 0) {
    s.first = enters ? tile : 0u;
    s.end = tile;  // one past the last owned slot
  }
  uint32_t first_empty = ~0u;
  if (tile == kSortTile) {
    // Two slots per 16-byte load, all loads of the thread issued first.
    constexpr int kLoads = int(kSortTile / (2 * kBlockThreads));
    ulonglong2 v[kLoads];
    const ulonglong2* p = reinterpret_cast<const ulonglong2*>(slots + tile_start);
#pragma unroll
    for (int c = 0; c < kLoads; ++c) v[c] = __ldcs(p + c * kBlockThreads + threadIdx.x);
#pragma unroll
    for (int c = 0; c < kLoads; ++c) {
      const uint32_t k = 2u * (uint32_t(c) * kBlockThreads + threadIdx.x);
      s.order[k] = SlotOrder(v[c].x, k, tile_start + k, capacity);
      s.order[k + 1] = SlotOrder(v[c].y, k + 1, tile_start + k + 1, capacity);
      s.tag[k] = SlotLow(v[c].x);
      s.tag[k + 1] = SlotLow(v[c].y);
      if (v[c].y == kEmptySlot) first_empty = min(first_empty, k + 1);
      if (v[c].x == kEmptySlot) first_empty = min(first_empty, k);
    }
  } else {
    for (uint32_t k = threadIdx.x; k < tile; k += kBlockThreads) {
      const uint64_t w = slots[tile_start + k];
      s.order[k] = SlotOrder(w, k, tile_start + k, capacity);
      s.tag[k] = SlotLow(w);
      if (w == kEmptySlot) first_empty = min(first_empty, k);
    }
  }
  __syncthreads();  // s.first is set before the minimum below
  if (enters) {
    first_empty = __reduce_min_sync(0xffffffffu, first_empty);
    if (lane == 0 && first_empty != ~0u) atomicMin(&s.first, first_empty);
  }
  __syncthreads();
  const uint32_t first = s.first;
  if (first >= tile) return;  // the whole tile belongs to a run from before
  // The last run goes past the tile: read on to its first empty slot.
  if (s.order[tile - 1] != kNoOrder) {
    __syncthreads();  // everyone has read s.first and s.order[tile - 1]
    if (threadIdx.x == 0) s.end = kNoEnd;
    __syncthreads();
    for (uint32_t base = 0; base < extension; base += kBlockThreads) {
      const uint32_t k = tile + base + threadIdx.x;
      uint32_t empty = ~0u;
      if (k < tile + extension) {
        const uint64_t w = __ldcg(slots + ((tile_start + k) & mask));
        s.order[k] = SlotOrder(w, k, tile_start + k, capacity);
        s.tag[k] = SlotLow(w);
        if (w == kEmptySlot) empty = k;
      }
      empty = __reduce_min_sync(0xffffffffu, empty);
      if (lane == 0 && empty != ~0u) atomicMin(&s.end, empty);
      __syncthreads();
      const bool found = s.end != kNoEnd;
      __syncthreads();  // s.end is read before the next chunk may lower it
      if (found) break;
    }
    if (s.end == kNoEnd) {  // the run reaches past the extension
      if (threadIdx.x == 0) atomicExch(a.resort, 1u);
      return;
    }
  }
  const uint32_t end = s.end;
  // Bit masks over [first, end), up to and including the word of `end` (so
  // that every run's end is found within the masks).
  const uint32_t warp = threadIdx.x / 32u;
  for (uint32_t w = warp; w <= end / 32u; w += kBlockThreads / 32u) {
    const uint32_t k = w * 32u + lane;
    const bool owned = k >= first && k < end;
    const uint64_t order = owned ? s.order[k] : kNoOrder;
    uint64_t before = __shfl_up_sync(0xffffffffu, order, 1);
    if (lane == 0) before = k > first && k - 1u < end ? s.order[k - 1u] : kNoOrder;
    const bool occupied = order != kNoOrder;
    const unsigned occ = __ballot_sync(0xffffffffu, occupied);
    const unsigned inv =
        __ballot_sync(0xffffffffu, occupied && before != kNoOrder && before > order);
    if (lane == 0) {
      s.occupied[w] = occ;
      s.inverted[w] = inv;
    }
  }
  __syncthreads();
#pragma unroll 1
  for (uint32_t i = first + threadIdx.x; i < end; i += kBlockThreads) {
    const uint64_t order = s.order[i];
    if (order == kNoOrder) continue;
    const uint32_t home = uint32_t(order >> 32);
    // The run around i: [start, stop).
    uint32_t w = i / 32u;
    const uint32_t b = i % 32u;
    uint32_t gaps = ~s.occupied[w] & ((1u << b) - 1u);
    while (gaps == 0 && w > 0) gaps = ~s.occupied[--w];
    const uint32_t start = gaps == 0 ? 0u : w * 32u + (32u - __clz(gaps));
    w = i / 32u;
    gaps = b == 31u ? 0u : ~s.occupied[w] & ~((2u << b) - 1u);
    while (gaps == 0) gaps = ~s.occupied[++w];
    const uint32_t stop = w * 32u + uint32_t(__ffs(gaps)) - 1u;
    // Inversions at start + 1 .. stop - 1?
    bool inverted = false;
    for (uint32_t x = (start + 1u) / 32u; x <= (stop - 1u) / 32u && !inverted; ++x) {
      uint32_t bits = s.inverted[x];
      if (x == (start + 1u) / 32u) bits &= ~((1u << ((start + 1u) % 32u)) - 1u);
      if (x == (stop - 1u) / 32u && (stop - 1u) % 32u != 31u)
        bits &= (2u << ((stop - 1u) % 32u)) - 1u;
      inverted = bits != 0;
    }
    uint32_t place = i;
    if (inverted) {
      place = start;
      for (uint32_t j = start; j < stop; ++j) place += s.order[j] < order;
    }
    const uint32_t key = uint32_t(order);
    if (kFinalize) {
      const uint32_t tag = s.tag[i];
      const uint32_t value = fin.part_values != nullptr
                                 ? fin.part_values[tag]
                                 : FinalValue(tag, fin.values, fin.first_value, fin.chunk_starts,
                                              fin.chunk_bases, fin.chunk_count);
      table.slots[(tile_start + place) & mask] = (uint64_t(key) << 32) | value;
    } else if (place != i) {
      table.slots[(tile_start + place) & mask] = (uint64_t(key) << 32) | s.tag[i];
    }
    const uint32_t probes = place - home + 1u;
    too_far |= probes > a.bound;
    if (probes > max_probes) max_probes = probes;
  }
}

// After the wave steps: every tile (one block each), unless the build already
// fell back. Also decides the fallback for an overflow or a full table.
template <bool kFinalize>
__global__ void __launch_bounds__(kBlockThreads)
    SortTilesKernel(DeviceTable table, RunSortArgs a, FinalizeArgs fin, DeviceBuildStats* stats) {
  __shared__ SortShared s;
  __shared__ unsigned long long s_max;
  if (*a.spilled != 0) return;
  if (stats->overflow_rows != 0 || stats->unique_keys >= table.capacity) {
    if (blockIdx.x == 0 && threadIdx.x == 0) atomicExch(a.resort, 1u);
    return;
  }
  const uint32_t tile = min(table.capacity, kSortTile);
  const uint32_t tile_start = blockIdx.x * tile;
  if (threadIdx.x == 0) s_max = 0;
  unsigned long long max_probes = 0;
  bool too_far = false;
  SortTile<kFinalize>(table, a, fin, tile_start, s, max_probes, too_far);
  if (__syncthreads_or(too_far) && threadIdx.x == 0) atomicExch(a.resort, 1u);
  const unsigned long long m = WarpMax(max_probes);
  if ((threadIdx.x & 31u) == 0 && m != 0) atomicMax(&s_max, m);
  __syncthreads();
  if (threadIdx.x == 0 && s_max != 0) atomicMax(&stats->max_probes, s_max);
}

// ---- Wave path ----------------------------------------------------------------
// The region-partitioned buffer above, inserted so that the table crosses DRAM once: it is never
// cleared as a whole. Step s of the wave sequence (one launch each, in stream
// order) does, at once:
//   insert the words of region s      (regions s and s + 1 are clean),
//   clear  region s + 2               (inserted in step s + 2).
// The parts touch disjoint data. A key of region s probes at most into region
// s + 1 before reaching the first slot not cleared yet (the start of region s + 2,
// while s + 2 < regions; later waves wrap into region 0 and beyond, all cleared
// by then). A row that reaches that frontier sets `spilled` (it needs a run
// longer than a whole region: only in nearly full or tiny tables); every later
// step then returns at once and the build is redone by the direct path (clear
// all, insert), launched unconditionally after the waves and returning at once
// when `spilled` is 0. Otherwise SortTilesKernel then puts the runs into Robin
// Hood order and, for builds that need finalisation, writes the values in the
// same pass: with explicit values and the stable partition the words carry
// position tags and the values come from the buffer (part_values, in region
// order). After a fallback (row tags) one FinalizeKernel pass reads the source
// values instead. (Marking and writing each region's winners inside the wave
// steps, while the region is still hot, measured slower on an H200: 8.9 vs 6.6
// ms for 2^26 rows with explicit values; docs/PERFORMANCE.md, "Fifth round".)
// Blocks take tiles of both parts from one counter per step.
struct WaveArgs {
  const uint64_t* words;           // key:tag per valid row, grouped by region
  const unsigned long long* ends;  // ends[r]: end of region r's words
  unsigned int* tile_counters;     // one per step, zeroed
  unsigned int* spilled;           // zeroed; set by a row that reached the frontier
  uint32_t region_bits;
  uint32_t regions;
  uint32_t bound;
};

constexpr int kWaveItems = 4;                               // words per thread and tile
constexpr uint32_t kWaveTile = kBlockThreads * kWaveItems;  // words per tile
constexpr int kClearVectors = 8;                            // 16-byte stores per thread and tile
constexpr uint32_t kClearTile = kBlockThreads * kClearVectors * 2;  // slots per clear tile

// The steps insert first come first served (InsertFirstCome):
// in a region held in L2, a Robin Hood insert's chains of dependent CAS swaps
// measured 1.5x slower on an H200 (5.0 vs 3.35 ms of steps for 2^26 rows with
// lanes refilled as their words settled, 6.0 ms without). The runs are put into
// Robin Hood order afterwards (SortTilesKernel). (Trying the home slots of a
// thread's four words with four CAS in flight before walking on measured no
// faster: 3.47 ms.)
template <bool kLoadFirst>
__global__ void __launch_bounds__(kBlockThreads)
    WaveStepKernel(DeviceTable table, WaveArgs a, uint32_t step, DeviceBuildStats* stats) {
  __shared__ unsigned int s_flag, s_tile;
  if (threadIdx.x == 0) s_flag = *reinterpret_cast<volatile unsigned int*>(a.spilled);
  __syncthreads();
  if (s_flag != 0) return;  // the whole block: the fallback redoes the build
  // Work of this step, in tiles: insert, then clear.
  const uint64_t ins_begin = step == 0 ? 0 : a.ends[step - 1];
  const uint64_t ins_end = a.ends[step];
  const uint32_t region_slots = 1u << a.region_bits;
  const bool clear = step + 2 < a.regions;
  const uint32_t ins_tiles = uint32_t((ins_end - ins_begin + kWaveTile - 1) / kWaveTile);
  const uint32_t clear_tiles = clear ? (region_slots + kClearTile - 1) / kClearTile : 0;
  const uint32_t frontier = clear ? (step + 2) << a.region_bits : kEmptyKey;

  unsigned long long sums[5] = {0, 0, 0, 0, 0};
  bool spilled = false;
  while (true) {
    if (threadIdx.x == 0) s_tile = atomicAdd(&a.tile_counters[step], 1u);
    __syncthreads();
    uint32_t t = s_tile;
    __syncthreads();  // s_tile is rewritten by the next iteration
    if (t < ins_tiles) {
      const uint64_t base = ins_begin + uint64_t(t) * kWaveTile + threadIdx.x;
#pragma unroll
      for (int j = 0; j < kWaveItems; ++j) {
        const uint64_t i = base + uint64_t(j) * kBlockThreads;
        if (i >= ins_end) break;
        const uint64_t w = __ldcs(reinterpret_cast<const unsigned long long*>(a.words + i));
        if (!InsertFirstCome<kLoadFirst>(table, SlotKey(w), w, a.bound, sums, frontier))
          spilled = true;
      }
      continue;
    }
    t -= ins_tiles;
    if (t < clear_tiles) {
      // Region step + 2 with 16-byte stores (wave regions hold >= 4 slots, RegionBits).
      ulonglong2* p =
          reinterpret_cast<ulonglong2*>(table.slots + (uint64_t(step + 2) << a.region_bits));
      const uint32_t vectors = region_slots / 2;
      const uint32_t base = t * (kClearTile / 2) + threadIdx.x;
#pragma unroll
      for (int j = 0; j < kClearVectors; ++j) {
        const uint32_t v = base + uint32_t(j) * kBlockThreads;
        if (v < vectors) p[v] = make_ulonglong2(kEmptySlot, kEmptySlot);
      }
      continue;
    }
    break;
  }
  if (spilled) atomicExch(a.spilled, 1u);
  BlockFlushStats<5>(sums, 0, &stats->unique_keys, nullptr);
}

// Wave path fallback, first kernel: when `spilled` is set, clears the whole
// table and zeroes the statistics (the direct insert then recounts everything).
__global__ void __launch_bounds__(kBlockThreads)
    RedoClearKernel(DeviceTable table, uint64_t vectors, DeviceBuildStats* stats,
                    const unsigned int* spilled) {
  if (*spilled == 0) return;
  ulonglong2* p = reinterpret_cast<ulonglong2*>(table.slots);
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  for (uint64_t v = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; v < vectors; v += stride)
    p[v] = make_ulonglong2(kEmptySlot, kEmptySlot);
  if (blockIdx.x == 0 && threadIdx.x == 0) *stats = DeviceBuildStats{};
}

// ---- Tile path ----------------------------------------------------------------
// Builds the Robin Hood layout without per-row atomics. Every valid row becomes
// a word key:value (the final value: no finalisation pass) with the number of
// its key's 2048-slot home tile (16 bits while the table has at most 2^16
// tiles); a stable CUB radix sort on the tile number, on double buffers (no
// copies of its own), groups the words by tile in row order. A tile of more
// than kTileMaxRows words (hot keys) is reduced to one word per key first
// (TileDedupKernel). TileSortKernel then, per tile, orders
// its words by (home, key, row) in shared memory, keeps the first word of each
// key (the lowest row) and records the tile's number of keys n and
// M = max(home - rank) over them. With keys in (home, key) order, linear
// probing puts the key of rank r at r + max(c, max over u <= r of (home_u - u)),
// where c (the tile's carry) counts the tile's first slots taken by runs from
// the tiles before; that is the Robin Hood layout. A tile passes on the carry
// max(0, n - 2048 + max(c, M)), a map c -> max(a, b + c); TileCarryKernel
// composes these maps along the table, and around it for runs that wrap past
// its end, to give every tile its carry. TilePlaceKernel lays each tile's keys
// out in shared memory and writes the tile's own slots, keys and empty ones, so
// every slot of the table is written exactly once (no clear needed). A tile of
// more than kTileMaxRows keys (an extreme load or chosen keys), a full table, or
// a key placed past the probe bound makes the build fall back to the direct
// insert. (Measured on an H200, docs/PERFORMANCE.md "Tenth round": 4.2 ms for
// 2^26 rows at load 0.5, against 5.4 for the wave path.)
constexpr uint32_t kTileMaxRows = 2560;
constexpr uint32_t kTileThreads = 512;  // the tile kernels' blocks
constexpr int kTileItems = int(kTileMaxRows / kTileThreads);
static_assert(kTileItems * kTileThreads == kTileMaxRows, "whole items per thread");
constexpr int kTileCountItems = int(kTileSlots / kTileThreads);

// A word's home slot within its tile.
__device__ __forceinline__ uint32_t TileHome(uint64_t w, uint32_t capacity) {
  return HomeSlot(SlotKey(w), capacity) & (kTileSlots - 1u);
}

// Row i -> (tile number, word). Invalid rows become kEmptySlot, spread over the
// tiles by row (TileSortKernel counts and drops them).
template <typename TileT>
__global__ void __launch_bounds__(kBlockThreads)
    TileWordsKernel(const uint32_t* __restrict__ keys, const uint32_t* __restrict__ validity,
                    uint64_t rows, uint32_t capacity, bool stores_values, FinalizeArgs fin,
                    TileT* __restrict__ tile_of, uint64_t* __restrict__ words) {
  const uint32_t tiles = capacity / kTileSlots;
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  for (uint64_t i = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < rows; i += stride) {
    const uint32_t key = keys[i];
    const bool valid = key != kEmptyKey && (validity == nullptr || validity[i] != 0);
    const uint32_t row = uint32_t(i);
    uint32_t value = 0;
    if (valid) {
      value = stores_values ? fin.first_value + row
                            : FinalValue(row, fin.values, fin.first_value, fin.chunk_starts,
                                         fin.chunk_bases, fin.chunk_count);
    }
    tile_of[i] = TileT(valid ? HomeSlot(key, capacity) >> kTileBits : row & (tiles - 1u));
    words[i] = valid ? (uint64_t(key) << 32) | value : kEmptySlot;
  }
}

// starts[t] = first position of tile t in the sorted tile numbers (starts[tiles] = rows).
template <typename TileT>
__global__ void __launch_bounds__(kBlockThreads)
    TileStartsKernel(const TileT* __restrict__ tile_of, uint64_t rows, uint32_t tiles,
                     uint32_t* __restrict__ starts) {
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  for (uint64_t i = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i <= rows; i += stride) {
    const uint32_t from = i == 0 ? 0u : uint32_t(tile_of[i - 1]) + 1u;  // tiles that start at i
    const uint32_t to = i == rows ? tiles : uint32_t(tile_of[i]);
    for (uint32_t t = from; t <= to; ++t) starts[t] = uint32_t(i);
  }
}

struct TileArgs {
  uint64_t* words;             // sorted by tile; TileSortKernel puts each tile's keys first
  uint32_t* multiplicity;      // TileSortKernel: rows of each kept key (same positions)
  const uint32_t* starts;      // tiles + 1
  int4* shape;                 // per tile: keys, M, valid rows, rows
  uint32_t* carry;             // per tile
  unsigned long long* probes;  // per tile: total probes
  uint32_t* max_probes;        // per tile
  int2* deduped;               // per tile: {words, valid rows} after TileDedupKernel, or {-1, 0}
  unsigned int* fall_back;     // zeroed; set when the build must take the direct path
  uint32_t tiles;
  uint32_t bound;
};

// Tiles of more than kTileMaxRows rows (hot keys: many rows of few keys) do not
// fit TileSortKernel. TileDedupKernel first reduces each of them to one word
// per key, the word of the key's first row in the tile (its lowest row: the
// sort is stable), with the key's row count, in place at the start of the
// tile's words; `deduped` tells TileSortKernel. A block checks
// kDedupTilesPerBlock tiles and reduces its large ones in turn, with a hash set
// of kDedupSlots keys in shared memory (each key's first position by atomic
// minimum, its rows by atomic add). A tile of more than kTileMaxRows keys still
// makes the build fall back.
constexpr uint32_t kDedupSlotBits = 12;
constexpr uint32_t kDedupSlots = 1u << kDedupSlotBits;
constexpr uint32_t kDedupTilesPerBlock = 64;
constexpr size_t kDedupSharedBytes = 3 * kDedupSlots * sizeof(uint32_t);
constexpr int kDedupItems = 8;  // words in flight per thread
static_assert(kDedupSlots % kTileThreads == 0 && kDedupTilesPerBlock <= kTileThreads);

__global__ void __launch_bounds__(kTileThreads) TileDedupKernel(TileArgs a) {
  extern __shared__ uint32_t s_dyn[];  // kDedupSlots keys, first positions, row counts
  uint32_t* const s_key = s_dyn;
  uint32_t* const s_pos = s_dyn + kDedupSlots;
  uint32_t* const s_count = s_dyn + 2 * kDedupSlots;
  __shared__ uint32_t s_large[kDedupTilesPerBlock];
  __shared__ uint32_t s_large_count, s_words, s_valid, s_out;
  __shared__ bool s_full;
  if (threadIdx.x == 0) s_large_count = 0;
  __syncthreads();
  if (threadIdx.x < kDedupTilesPerBlock) {
    const uint32_t t = blockIdx.x * kDedupTilesPerBlock + threadIdx.x;
    if (t < a.tiles) {
      a.deduped[t] = make_int2(-1, 0);
      if (a.starts[t + 1] - a.starts[t] > kTileMaxRows) s_large[atomicAdd(&s_large_count, 1u)] = t;
    }
  }
  __syncthreads();
  const uint32_t large = s_large_count;
  for (uint32_t b = 0; b < large; ++b) {
    const uint32_t t = s_large[b];
    const uint32_t base = a.starts[t];
    const uint32_t n = a.starts[t + 1] - base;
    for (uint32_t k = threadIdx.x; k < kDedupSlots; k += kTileThreads) {
      s_key[k] = kEmptyKey;
      s_pos[k] = ~0u;
      s_count[k] = 0;
    }
    if (threadIdx.x == 0) {
      s_words = 0;
      s_valid = 0;
      s_out = 0;
      s_full = false;
    }
    __syncthreads();
    uint32_t valid = 0;
    uint32_t held_key = kEmptyKey, held_slot = 0, held_count = 0;
    const uint32_t lane = threadIdx.x & 31u;
    // Rounds of kDedupItems words per thread, all loads issued first: warp w
    // takes rows i0 + w * 32 * kDedupItems + j * 32 + lane.
    for (uint32_t i0 = 0; i0 < n; i0 += kTileThreads * kDedupItems) {
      const uint32_t first = i0 + (threadIdx.x - lane) * kDedupItems + lane;
      uint64_t w[kDedupItems];
#pragma unroll
      for (int j = 0; j < kDedupItems; ++j) {
        const uint32_t i = first + uint32_t(j) * 32u;
        w[j] = i < n ? a.words[base + i] : kEmptySlot;  // kEmptySlot: an invalid row
      }
#pragma unroll
      for (int j = 0; j < kDedupItems; ++j) {
        // A warp's rows of one key are counted once, by the lowest lane (the
        // lowest position); a lane adds up the rows of the key it last
        // inserted in a register (its later positions are higher, so its first
        // one stands), so that a hot key does not serialise on one slot.
        const uint32_t key = SlotKey(w[j]);
        const unsigned peers = __match_any_sync(0xffffffffu, key);
        if (w[j] == kEmptySlot) continue;
        ++valid;
        if (lane != uint32_t(__ffs(peers)) - 1u) continue;
        if (key == held_key) {
          held_count += uint32_t(__popc(peers));
          continue;
        }
        if (held_count != 0) atomicAdd(&s_count[held_slot], held_count);
        held_count = 0;
        uint32_t h = (key * 0x9e3779b1u) >> (32 - kDedupSlotBits);
        bool placed = false;
        for (uint32_t p = 0; p < kDedupSlots && !placed; ++p, h = (h + 1u) & (kDedupSlots - 1u)) {
          uint32_t k = s_key[h];
          if (k == kEmptyKey) {
            k = atomicCAS(&s_key[h], kEmptyKey, key);
            if (k == kEmptyKey) {
              atomicAdd(&s_words, 1u);
              k = key;
            }
          }
          if (k == key) {
            atomicMin(&s_pos[h], first + uint32_t(j) * 32u);
            held_key = key;
            held_slot = h;
            held_count = uint32_t(__popc(peers));
            placed = true;
          }
        }
        if (!placed) {
          s_full = true;
          held_key = kEmptyKey;
        }
      }
    }
    if (held_count != 0) atomicAdd(&s_count[held_slot], held_count);
    valid = WarpSum(valid);
    if ((threadIdx.x & 31u) == 0 && valid != 0) atomicAdd(&s_valid, valid);
    __syncthreads();
    if (s_full || s_words > kTileMaxRows) {  // the same for every thread
      if (threadIdx.x == 0) atomicExch(a.fall_back, 1u);
      return;
    }
    // Gather every key's first word, then (all reads done) write them in place.
    constexpr int kPer = int(kDedupSlots / kTileThreads);
    uint64_t gw[kPer];
    uint32_t gc[kPer], gi[kPer];
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      const uint32_t k = uint32_t(j) * kTileThreads + threadIdx.x;
      gi[j] = ~0u;
      if (s_key[k] != kEmptyKey) {
        gi[j] = atomicAdd(&s_out, 1u);
        gw[j] = a.words[base + s_pos[k]];
        gc[j] = s_count[k];
      }
    }
    __syncthreads();
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      if (gi[j] != ~0u) {
        a.words[base + gi[j]] = gw[j];
        a.multiplicity[base + gi[j]] = gc[j];
      }
    }
    if (threadIdx.x == 0) a.deduped[t] = make_int2(int(s_words), int(s_valid));
    __syncthreads();  // before the next tile resets the set
  }
}

// TileSortKernel's shared memory: the sort's arrays, then (once the ranks are
// known) the kept words staged in rank order, so that they leave in coalesced
// stores.
union TileSortShared {
  struct {
    uint32_t first[kTileSlots + 1];  // counts, then first index of each home
    uint32_t key[kTileMaxRows];      // by word index
    uint16_t by_home[kTileMaxRows];  // word indices grouped by home
    uint8_t keep[kTileMaxRows];      // (home, key, row) order: the key's first row
  } sort;
  struct {
    uint64_t words[kTileMaxRows];         // by rank
    uint32_t multiplicity[kTileMaxRows];  // by rank
  } out;
};

__global__ void __launch_bounds__(kTileThreads) TileSortKernel(DeviceTable table, TileArgs a) {
  using Scan = cub::BlockScan<uint32_t, kTileThreads>;
  __shared__ TileSortShared s_u;
  __shared__ uint16_t s_rank[kTileMaxRows];  // (home, key, row) order -> rank among kept
  __shared__ typename Scan::TempStorage s_scan;
  __shared__ int s_max;
  uint32_t* const s_first = s_u.sort.first;
  uint32_t* const s_key = s_u.sort.key;
  uint16_t* const s_by_home = s_u.sort.by_home;
  uint8_t* const s_keep = s_u.sort.keep;
  const uint32_t t = blockIdx.x;
  const uint32_t base = a.starts[t];
  const uint32_t rows_in_tile = a.starts[t + 1] - base;
  // A tile of more than kTileMaxRows rows holds one word per key after
  // TileDedupKernel, and each key's row count in `multiplicity`.
  const int2 dedup = a.deduped[t];
  const bool deduped = dedup.x >= 0;
  const uint32_t n = deduped ? uint32_t(dedup.x) : rows_in_tile;
  if (n > kTileMaxRows) {
    if (threadIdx.x == 0) atomicExch(a.fall_back, 1u);
    return;
  }
  for (uint32_t k = threadIdx.x; k <= kTileSlots; k += kTileThreads) s_first[k] = 0;
  if (threadIdx.x == 0) s_max = INT_MIN;
  // The thread's words (striped) stay in registers; count each home's words (a
  // word's rank among its home's is arbitrary here).
  uint64_t w[kTileItems];
  uint32_t at[kTileItems];  // rank in its home, then place in (home, key, row) order
#pragma unroll
  for (int j = 0; j < kTileItems; ++j) {
    const uint32_t i = uint32_t(j) * kTileThreads + threadIdx.x;
    w[j] = i < n ? a.words[base + i] : kEmptySlot;
    at[j] = 0;
  }
  __syncthreads();  // s_first zeroed
#pragma unroll
  for (int j = 0; j < kTileItems; ++j) {
    const uint32_t i = uint32_t(j) * kTileThreads + threadIdx.x;
    if (w[j] != kEmptySlot) {
      s_key[i] = SlotKey(w[j]);
      at[j] = atomicAdd(&s_first[TileHome(w[j], table.capacity)], 1u);
    }
  }
  __syncthreads();
  uint32_t counts[kTileCountItems];
#pragma unroll
  for (int q = 0; q < kTileCountItems; ++q) counts[q] = s_first[threadIdx.x * kTileCountItems + q];
  uint32_t valid = 0;
  Scan(s_scan).ExclusiveSum(counts, counts, valid);
  __syncthreads();  // every thread has read its counts
#pragma unroll
  for (int q = 0; q < kTileCountItems; ++q) s_first[threadIdx.x * kTileCountItems + q] = counts[q];
  if (threadIdx.x == 0) s_first[kTileSlots] = valid;
  __syncthreads();
#pragma unroll
  for (int j = 0; j < kTileItems; ++j) {
    const uint32_t i = uint32_t(j) * kTileThreads + threadIdx.x;
    if (w[j] != kEmptySlot)
      s_by_home[s_first[TileHome(w[j], table.capacity)] + at[j]] = uint16_t(i);
  }
  __syncthreads();
  // Each word's place among its home's words: by key, then row (a tile's words
  // are in row order after the stable sort).
  uint32_t rows_of_key[kTileItems];
#pragma unroll
  for (int j = 0; j < kTileItems; ++j) {
    const uint32_t i = uint32_t(j) * kTileThreads + threadIdx.x;
    rows_of_key[j] = 0;
    if (w[j] != kEmptySlot) {
      const uint32_t key = SlotKey(w[j]);
      const uint32_t h = TileHome(w[j], table.capacity);
      const uint32_t g0 = s_first[h], g1 = s_first[h + 1];
      uint32_t before = 0, same = 0;
      bool keep = true;
      for (uint32_t g = g0; g < g1; ++g) {
        const uint32_t other = s_by_home[g];
        const uint32_t other_key = s_key[other];
        before += other_key < key || (other_key == key && other < i);
        if (other_key == key) {
          ++same;
          keep = keep && other >= i;
        }
      }
      at[j] = g0 + before;
      s_keep[at[j]] = keep ? 1 : 0;
      rows_of_key[j] = !keep ? 0u : deduped ? a.multiplicity[base + i] : same;
    }
  }
  __syncthreads();
  // Kept words in (home, key, row) order get consecutive ranks: the tile's keys.
  uint32_t keep[kTileItems];
#pragma unroll
  for (int q = 0; q < kTileItems; ++q) {
    const uint32_t p = threadIdx.x * kTileItems + q;
    keep[q] = p < valid ? s_keep[p] : 0u;
  }
  uint32_t keys_in_tile = 0;
  uint32_t rank[kTileItems];
  Scan(s_scan).ExclusiveSum(keep, rank, keys_in_tile);
#pragma unroll
  for (int q = 0; q < kTileItems; ++q) {
    const uint32_t p = threadIdx.x * kTileItems + q;
    if (p < valid) s_rank[p] = uint16_t(rank[q]);
  }
  __syncthreads();  // the sort's arrays are read: `out` may overwrite them
  int m = INT_MIN;
#pragma unroll
  for (int j = 0; j < kTileItems; ++j) {
    if (rows_of_key[j] != 0) {  // a kept word
      const uint32_t r = s_rank[at[j]];
      s_u.out.words[r] = w[j];
      s_u.out.multiplicity[r] = rows_of_key[j];
      m = max(m, int(TileHome(w[j], table.capacity)) - int(r));
    }
  }
  m = __reduce_max_sync(0xffffffffu, m);
  if ((threadIdx.x & 31u) == 0) atomicMax(&s_max, m);
  __syncthreads();
  for (uint32_t r = threadIdx.x; r < keys_in_tile; r += kTileThreads) {
    a.words[base + r] = s_u.out.words[r];
    a.multiplicity[base + r] = s_u.out.multiplicity[r];
  }
  if (threadIdx.x == 0) {
    const int valid_rows = deduped ? dedup.y : int(valid);
    a.shape[t] = make_int4(int(keys_in_tile), s_max, valid_rows, int(rows_in_tile));
  }
}

// ThenCarry for CUB's scan (tile_layout.hpp).
struct ThenMap {
  __device__ CarryMap operator()(const CarryMap& f, const CarryMap& g) const {
    return ThenCarry(f, g);
  }
};

// One block: every tile's carry, and the build's key, duplicate and invalid counts.
constexpr int kCarryThreads = 1024;
__global__ void __launch_bounds__(kCarryThreads)
    TileCarryKernel(TileArgs a, uint32_t capacity, DeviceBuildStats* stats) {
  using MapScan = cub::BlockScan<CarryMap, kCarryThreads>;
  using Sum = cub::BlockReduce<unsigned long long, kCarryThreads>;
  __shared__ typename MapScan::TempStorage s_scan;
  __shared__ typename Sum::TempStorage s_sum;
  if (*a.fall_back != 0) return;
  const uint32_t per = (a.tiles + kCarryThreads - 1) / kCarryThreads;
  const uint32_t begin = min(a.tiles, threadIdx.x * per), end = min(a.tiles, begin + per);
  auto map_of = [&](uint32_t t) {
    const int4 s = a.shape[t];
    return TileCarryMap(uint32_t(s.x), s.y);
  };
  CarryMap mine{kNoCarry, 0};
  unsigned long long keys = 0, valid = 0, rows = 0;
  for (uint32_t t = begin; t < end; ++t) {
    mine = ThenMap()(mine, map_of(t));
    const int4 s = a.shape[t];
    keys += uint32_t(s.x);
    valid += uint32_t(s.z);
    rows += uint32_t(s.w);
  }
  CarryMap before, all;
  MapScan(s_scan).ExclusiveScan(mine, before, CarryMap{kNoCarry, 0}, ThenMap(), all);
  // Runs that wrap past the end of the table: the carry into tile 0 is the
  // fixed point of the whole table's map, all.a (all.b < 0 unless it is full).
  const long long c0 = all.a;
  const bool full = all.b >= 0 || c0 >= (long long)capacity;
  long long c = ApplyCarry(before, c0);
  for (uint32_t t = begin; t < end; ++t) {
    a.carry[t] = uint32_t(c);
    c = ApplyCarry(map_of(t), c);
  }
  keys = Sum(s_sum).Sum(keys);
  __syncthreads();
  valid = Sum(s_sum).Sum(valid);
  __syncthreads();
  rows = Sum(s_sum).Sum(rows);
  if (threadIdx.x == 0) {
    if (full) atomicExch(a.fall_back, 1u);
    atomicAdd(&stats->unique_keys, keys);
    atomicAdd(&stats->duplicate_rows, valid - keys);
    atomicAdd(&stats->invalid_rows, rows - valid);
  }
}

// Places a tile's keys (in rank order from TileSortKernel) in a shared image
// of its 2048 slots and writes the slots it owns, [min(carry, 2048), 2048), in
// coalesced stores; a key placed past the tile (its run goes on into the next
// tiles, whose carry counts it) is written directly. The rank-order loads and
// the multiplicities are read striped (coalesced); the running maximum of home
// minus rank is scanned blocked through shared memory.
__global__ void __launch_bounds__(kTileThreads) TilePlaceKernel(DeviceTable table, TileArgs a) {
  using MaxScan = cub::BlockScan<int, kTileThreads>;
  __shared__ typename MaxScan::TempStorage s_scan;
  __shared__ uint64_t s_tile[kTileSlots];
  __shared__ int s_q[kTileMaxRows];  // home - rank, then its running maximum
  __shared__ unsigned long long s_probes;
  __shared__ uint32_t s_max;
  if (*a.fall_back != 0) return;
  const uint32_t t = blockIdx.x;
  const uint32_t base = a.starts[t];
  const int keys = a.shape[t].x;
  const uint32_t c = a.carry[t];
  const uint32_t tile_start = t * kTileSlots;
  const uint32_t mask = table.capacity - 1u;
  for (uint32_t k = threadIdx.x; k < kTileSlots; k += kTileThreads) s_tile[k] = kEmptySlot;
  if (threadIdx.x == 0) {
    s_probes = 0;
    s_max = 0;
  }
  uint64_t w[kTileItems];
  uint32_t home[kTileItems];
#pragma unroll
  for (int j = 0; j < kTileItems; ++j) {
    const int r = j * int(kTileThreads) + int(threadIdx.x);
    w[j] = r < keys ? a.words[base + r] : kEmptySlot;
    home[j] = r < keys ? TileHome(w[j], table.capacity) : 0u;
    if (r < keys) s_q[r] = int(home[j]) - r;
  }
  __syncthreads();
  int q[kTileItems];
#pragma unroll
  for (int j = 0; j < kTileItems; ++j) {
    const int r = int(threadIdx.x) * kTileItems + j;
    q[j] = r < keys ? s_q[r] : INT_MIN;
  }
  MaxScan(s_scan).InclusiveScan(q, q, ::cuda::maximum<>{});
#pragma unroll
  for (int j = 0; j < kTileItems; ++j) {  // the thread's own entries: no barrier needed before
    const int r = int(threadIdx.x) * kTileItems + j;
    if (r < keys) s_q[r] = q[j];
  }
  __syncthreads();
  unsigned long long probes = 0;
  uint32_t max_probes = 0;
  bool too_far = false;
#pragma unroll
  for (int j = 0; j < kTileItems; ++j) {
    const int r = j * int(kTileThreads) + int(threadIdx.x);
    if (r < keys) {
      const long long place = TilePlace(uint32_t(r), c, s_q[r]);
      const uint32_t p = uint32_t(place - home[j] + 1);
      if (place < kTileSlots)
        s_tile[place] = w[j];
      else
        table.slots[(tile_start + uint32_t(place)) & mask] = w[j];
      too_far |= p > a.bound;
      probes += (unsigned long long)p * a.multiplicity[base + r];
      max_probes = max(max_probes, p);
    }
  }
  if (too_far) atomicExch(a.fall_back, 1u);
  probes = WarpSum(probes);
  max_probes = __reduce_max_sync(0xffffffffu, max_probes);
  if ((threadIdx.x & 31u) == 0) {
    atomicAdd(&s_probes, probes);
    atomicMax(&s_max, max_probes);
  }
  __syncthreads();
  for (uint32_t k = min(c, kTileSlots) + threadIdx.x; k < kTileSlots; k += kTileThreads)
    table.slots[tile_start + k] = s_tile[k];
  if (threadIdx.x == 0) {
    a.probes[t] = s_probes;
    a.max_probes[t] = s_max;
  }
}

// One block: the build's total and maximum probes.
__global__ void __launch_bounds__(kCarryThreads)
    TileProbesKernel(TileArgs a, DeviceBuildStats* stats) {
  using Sum = cub::BlockReduce<unsigned long long, kCarryThreads>;
  __shared__ typename Sum::TempStorage s_sum;
  if (*a.fall_back != 0) return;
  unsigned long long total = 0, most = 0;
  for (uint32_t t = threadIdx.x; t < a.tiles; t += kCarryThreads) {
    total += a.probes[t];
    most = max(most, (unsigned long long)a.max_probes[t]);
  }
  total = Sum(s_sum).Sum(total);
  __syncthreads();
  most = Sum(s_sum).Reduce(most, ::cuda::maximum<>{});
  if (threadIdx.x == 0) {
    atomicAdd(&stats->total_probes, total);
    atomicMax(&stats->max_probes, most);
  }
}

// After a `resort` redo (clear and the Robin Hood direct insert, which use row
// tags): marks the build as spilled, so that finalisation reads values[row].
__global__ void MarkResortedKernel(const unsigned int* resort, unsigned int* spilled) {
  if (*resort != 0) *spilled = 1;
}

struct ProbeResult {
  uint32_t value;
  uint32_t probes;
  bool found;
};

// Reads the 32-byte sector at `p` (four slots) with two 16-byte read-only loads.
// kPrefetch (ProbeFetch's sizes: 0, 64 or 128) asks L2 to fetch that many
// bytes around the first load from DRAM (PTX `.L2::<n>B`), so that the sectors a
// long run reads next are L2 hits.
template <int kPrefetch>
__device__ __forceinline__ void LoadSector(const uint64_t* p, uint64_t (&s)[4]) {
  const ulonglong2* v = reinterpret_cast<const ulonglong2*>(p);
  if constexpr (kPrefetch == 64) {
    asm("ld.global.nc.L2::64B.v2.u64 {%0, %1}, [%2];" : "=l"(s[0]), "=l"(s[1]) : "l"(v));
  } else if constexpr (kPrefetch == 128) {
    asm("ld.global.nc.L2::128B.v2.u64 {%0, %1}, [%2];" : "=l"(s[0]), "=l"(s[1]) : "l"(v));
  } else {
    const ulonglong2 a = __ldg(v);
    s[0] = a.x;
    s[1] = a.y;
  }
  const ulonglong2 b = __ldg(v + 1);
  s[2] = b.x;
  s[3] = b.y;
}

// Linear probing from the key's home slot, reading one 32-byte sector (four
// slots) per step; the first sector with prefetch size kFirst, later ones with
// kLater (see LoadSector). A miss stops at an empty slot or at the first resident
// that comes after the key in the table's Robin Hood order (ResidentComesFirst).
// Probe counts are those of the slot-at-a-time definition: the number of slots
// examined up to and including the deciding one, at most `bound`. (Deciding a sector with
// match/empty bit masks and __ffs instead of the slot loop measured no faster on an H200: 16.4-16.7
// vs 16.8 Gkeys/s for half misses at load 0.8.)
template <int kFirst = 0, int kLater = 0>
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
    bool first_step = true;
    while (true) {
      const uint32_t base = pos & ~3u;
      uint64_t s[4];
      if (kFirst == kLater || !first_step)
        LoadSector<kLater>(slots + base, s);
      else
        LoadSector<kFirst>(slots + base, s);
      first_step = false;
      const uint32_t first = pos & 3u;
#pragma unroll
      for (uint32_t j = 0; j < 4; ++j) {
        if (j < first) continue;
        if (p >= bound) return {kEmptyKey, bound, false};
        ++p;
        if (SlotKey(s[j]) == key) return {SlotLow(s[j]), p, true};
        if (s[j] == kEmptySlot ||
            !ResidentComesFirst(SlotKey(s[j]), key, p - 1u, base + j, capacity))
          return {kEmptyKey, p, false};
      }
      pos = (base + 4u) & mask;
    }
  }
  while (p < bound) {
    const uint64_t s = __ldg(reinterpret_cast<const unsigned long long*>(slots + pos));
    ++p;
    if (SlotKey(s) == key) return {SlotLow(s), p, true};
    if (s == kEmptySlot || !ResidentComesFirst(SlotKey(s), key, p - 1u, pos, capacity))
      return {kEmptyKey, p, false};
    pos = (pos + 1u) & mask;
  }
  return {kEmptyKey, bound, false};
}

// One thread per key, grid-stride. With kMasks the loop runs warp by warp (every
// lane takes each step, those past the end as misses) and lane 0 writes the
// warp's found bits: masks[i / 32] bit (i % 32) for row i, what the join's
// compaction scans.
template <bool kFound, bool kProbes, bool kMasks, int kFirst = 0, int kLater = 0>
__global__ void __launch_bounds__(kBlockThreads, 2048 / kBlockThreads)  // full occupancy
    LookupKernel(DeviceTable table, const uint32_t* __restrict__ keys, uint64_t rows,
                 uint32_t bound, uint32_t* __restrict__ values, uint8_t* __restrict__ found,
                 uint32_t* __restrict__ probes, uint32_t* __restrict__ masks,
                 DeviceQueryStats* stats) {
  unsigned long long sums[2] = {0, 0};  // found, probes
  unsigned long long max_probes = 0;
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  const auto one = [&](uint64_t i) {
    const ProbeResult r =
        Probe<kFirst, kLater>(table.slots, table.capacity, __ldcs(keys + i), bound);
    __stcs(values + i, r.value);
    if (kFound)
      __stcs(reinterpret_cast<signed char*>(found + i), static_cast<signed char>(r.found));
    if (kProbes) __stcs(probes + i, r.probes);
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

// Launches LookupKernel<kFound, kProbes, kMasks, kFirst, kLater> on a grid sized
// by its occupancy.
template <bool kFound, bool kProbes, bool kMasks, int kFirst, int kLater>
cudaError_t LaunchLookup(DeviceTable table, const uint32_t* keys, uint64_t rows, uint32_t bound,
                         uint32_t* values, uint8_t* found, uint32_t* probes, uint32_t* masks,
                         DeviceQueryStats* stats, cudaStream_t stream) {
  static std::atomic<int> resident{0};
  const auto kernel = LookupKernel<kFound, kProbes, kMasks, kFirst, kLater>;
  kernel<<<GridFor(rows, CachedResident(kernel, resident)), kBlockThreads, 0, stream>>>(
      table, keys, rows, bound, values, found, probes, masks, stats);
  return cudaGetLastError();
}

// Picks the LookupKernel instance for the optional outputs that are non-null.
template <bool kMasks, int kFirst, int kLater>
cudaError_t LookupWithFetch(DeviceTable table, const uint32_t* keys, uint64_t rows, uint32_t bound,
                            uint32_t* values, uint8_t* found, uint32_t* probes, uint32_t* masks,
                            DeviceQueryStats* stats, cudaStream_t stream) {
  if (found != nullptr && probes != nullptr)
    return LaunchLookup<true, true, kMasks, kFirst, kLater>(table, keys, rows, bound, values,
                                                            found, probes, masks, stats, stream);
  if (found != nullptr)
    return LaunchLookup<true, false, kMasks, kFirst, kLater>(table, keys, rows, bound, values,
                                                             found, probes, masks, stats, stream);
  if (probes != nullptr)
    return LaunchLookup<false, true, kMasks, kFirst, kLater>(table, keys, rows, bound, values,
                                                             found, probes, masks, stats, stream);
  return LaunchLookup<false, false, kMasks, kFirst, kLater>(table, keys, rows, bound, values,
                                                            found, probes, masks, stats, stream);
}

}  // namespace

cudaError_t KeepTransientMemory(int device) {
  size_t free_bytes = 0, total_bytes = 0;
  cudaError_t e = cudaSetDevice(device);
  if (e == cudaSuccess) e = cudaMemGetInfo(&free_bytes, &total_bytes);
  cudaMemPool_t pool = nullptr;
  if (e == cudaSuccess) e = cudaDeviceGetDefaultMemPool(&pool, device);
  if (e != cudaSuccess) return e;
  uint64_t threshold = std::max<uint64_t>(uint64_t{1} << 30, total_bytes / 4);
  return cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold);
}

cudaError_t ClearTable(DeviceTable table, DeviceBuildStats* stats, cudaStream_t stream) {
  cudaError_t e = cudaMemsetAsync(table.slots, 0xff,
                                  TableAllocationSlots(table.capacity) * sizeof(uint64_t), stream);
  if (e != cudaSuccess) return e;
  return cudaMemsetAsync(stats, 0, sizeof(DeviceBuildStats), stream);
}

namespace {

uint32_t Log2Pow2(uint32_t pow2) { return 31u - uint32_t(__builtin_clz(pow2)); }

cudaError_t BuildDirect(DeviceTable table, const BuildSource& source, uint32_t bound,
                        uint32_t tag_offset, DeviceBuildStats* stats, cudaStream_t stream) {
  static std::atomic<int> resident_insert{0};
  const uint64_t rows = source.rows;
  const unsigned grid = GridFor(rows, CachedResident(InsertKernel<false, true>, resident_insert));
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
  return cudaGetLastError();
}

// The finalisation pass over the table (FinalizeKernel; `part_values` and
// `spilled`: a wave build's position-tagged values, else null).
cudaError_t FinalizeDirect(DeviceTable table, const BuildSource& source, cudaStream_t stream,
                           const uint32_t* part_values = nullptr,
                           const unsigned int* spilled = nullptr,
                           bool only_after_fallback = false) {
  static std::atomic<int> resident_finalize{0};
  const uint64_t quads = TableAllocationSlots(table.capacity) / 4;
  const unsigned fgrid = GridFor(quads, CachedResident(FinalizeKernel, resident_finalize));
  FinalizeKernel<<<fgrid, kBlockThreads, 0, stream>>>(
      table, quads, source.values, source.first_value, source.chunk_starts, source.chunk_bases,
      source.chunk_count, part_values, spilled, only_after_fallback);
  return cudaGetLastError();
}

// Records phase event k of a build when the caller asked for them (bench only).
cudaError_t MarkPhase(const BuildSource& source, int k, cudaStream_t stream) {
  if (source.phase_events == nullptr) return cudaSuccess;
  return cudaEventRecord(source.phase_events[k], stream);
}

// Where the partition writes and what it needs besides the table and source.
struct PartitionBuffers {
  uint64_t* words = nullptr;           // key:tag per valid row, grouped by region
  uint32_t* part_values = nullptr;     // positions: the values, by position; else null
  unsigned long long* ends = nullptr;  // regions + 1, zeroed; ends[r] = end of region r
  void* offsets = nullptr;             // multisplit: (regions * segments + 1) counts
  bool wide_offsets = false;           // multisplit: 64-bit counts (else 32-bit)
  void* scan_temp = nullptr;           // multisplit: CUB scan temporary storage
  size_t scan_temp_bytes = 0;
};

// Whether the partition is the stable warp multisplit (else the histogram
// scatter, unstable).
bool StablePartition(const BuildSource& source, uint32_t regions) {
  return regions <= kMultisplitMaxRegions && source.multisplit_partition;
}

// Segments of the stable partition.
uint64_t Segments(uint64_t rows) { return (rows + kSegmentRows - 1) / kSegmentRows; }

// CUB scan temporary bytes for `items` counts of type CountT (0 on error: the
// scan call itself then reports it).
template <typename CountT>
size_t ScanTempBytes(uint64_t items) {
  size_t bytes = 0;
  if (cub::DeviceScan::ExclusiveSum(nullptr, bytes, static_cast<CountT*>(nullptr), int(items)) !=
      cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return bytes;
}

// Stable warp-multisplit partition (regions <= 32): per-(region, segment)
// counts, their exclusive scan, the region ends, the scatter. positions: tag
// words with their buffer position and carry the explicit values.
template <typename CountT>
cudaError_t PartitionMultisplit(DeviceTable table, const BuildSource& source, uint32_t tag_offset,
                                uint32_t region_bits, uint32_t regions, bool positions,
                                const PartitionBuffers& b, DeviceBuildStats* stats,
                                cudaStream_t stream) {
  const uint64_t rows = source.rows;
  const uint64_t segments = Segments(rows);
  auto* offsets = static_cast<CountT*>(b.offsets);
  const bool validity = source.validity != nullptr;
  static std::atomic<int> resident_count{0}, resident_split{0};
  const unsigned cgrid = GridFor(segments * kBlockThreads,
                                 CachedResident(SegmentCountKernel<true, CountT>, resident_count));
  if (validity)
    SegmentCountKernel<true, CountT>
        <<<cgrid, kBlockThreads, 0, stream>>>(source.keys, source.validity, rows, table.capacity,
                                              region_bits, regions, segments, offsets, stats);
  else
    SegmentCountKernel<false, CountT><<<cgrid, kBlockThreads, 0, stream>>>(
        source.keys, nullptr, rows, table.capacity, region_bits, regions, segments, offsets, stats);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  size_t temp_bytes = b.scan_temp_bytes;
  e = cub::DeviceScan::ExclusiveSum(b.scan_temp, temp_bytes, offsets,
                                    int(uint64_t(regions) * segments + 1), stream);
  if (e != cudaSuccess) return e;
  RegionEndsKernel<CountT><<<1, 64, 0, stream>>>(offsets, segments, regions, b.ends);
  const unsigned sgrid =
      GridFor(segments * kBlockThreads,
              CachedResident(RegionMultisplitKernel<true, true, CountT>, resident_split));
  const uint32_t* values = positions ? source.values : nullptr;
  uint32_t* part_values = positions ? b.part_values : nullptr;
  if (validity && positions)
    RegionMultisplitKernel<true, true, CountT><<<sgrid, kBlockThreads, 0, stream>>>(
        source.keys, source.validity, values, rows, table.capacity, region_bits, regions,
        tag_offset, segments, offsets, b.words, part_values);
  else if (validity)
    RegionMultisplitKernel<true, false, CountT><<<sgrid, kBlockThreads, 0, stream>>>(
        source.keys, source.validity, nullptr, rows, table.capacity, region_bits, regions,
        tag_offset, segments, offsets, b.words, nullptr);
  else if (positions)
    RegionMultisplitKernel<false, true, CountT><<<sgrid, kBlockThreads, 0, stream>>>(
        source.keys, nullptr, values, rows, table.capacity, region_bits, regions, tag_offset,
        segments, offsets, b.words, part_values);
  else
    RegionMultisplitKernel<false, false, CountT><<<sgrid, kBlockThreads, 0, stream>>>(
        source.keys, nullptr, nullptr, rows, table.capacity, region_bits, regions, tag_offset,
        segments, offsets, b.words, nullptr);
  return cudaGetLastError();
}

// Groups the valid rows by region into b.words; afterwards b.ends[r] is the end
// of region r's words and b.ends[regions] the total. Stable partitions (see
// StablePartition) write positions tags and values when `positions`; the
// histogram scatter (more than 32 regions) writes row tags in arbitrary order.
cudaError_t Partition(DeviceTable table, const BuildSource& source, uint32_t tag_offset,
                      uint32_t region_bits, uint32_t regions, bool positions,
                      const PartitionBuffers& b, DeviceBuildStats* stats, cudaStream_t stream) {
  if (StablePartition(source, regions))
    return b.wide_offsets
               ? PartitionMultisplit<unsigned long long>(table, source, tag_offset, region_bits,
                                                         regions, positions, b, stats, stream)
               : PartitionMultisplit<uint32_t>(table, source, tag_offset, region_bits, regions,
                                               positions, b, stats, stream);
  const uint64_t rows = source.rows;
  const bool validity = source.validity != nullptr;
  unsigned long long* counts = b.ends;
  static std::atomic<int> resident_hist{0}, resident_scatter{0};
  const unsigned hgrid = GridFor(rows, CachedResident(RegionHistogramKernel<true>, resident_hist));
  if (validity)
    RegionHistogramKernel<true><<<hgrid, kBlockThreads, 0, stream>>>(
        source.keys, source.validity, rows, table.capacity, region_bits, regions, counts, stats);
  else
    RegionHistogramKernel<false><<<hgrid, kBlockThreads, 0, stream>>>(
        source.keys, nullptr, rows, table.capacity, region_bits, regions, counts, stats);
  RegionScanKernel<<<1, 1, 0, stream>>>(counts, regions);
  const uint64_t tiles =
      (rows + kBlockThreads * kScatterItems - 1) / (kBlockThreads * kScatterItems);
  const unsigned sgrid =
      GridFor(tiles * kBlockThreads, CachedResident(RegionScatterKernel<true>, resident_scatter));
  if (validity)
    RegionScatterKernel<true>
        <<<sgrid, kBlockThreads, 0, stream>>>(source.keys, source.validity, rows, table.capacity,
                                              region_bits, regions, tag_offset, counts, b.words);
  else
    RegionScatterKernel<false>
        <<<sgrid, kBlockThreads, 0, stream>>>(source.keys, nullptr, rows, table.capacity,
                                              region_bits, regions, tag_offset, counts, b.words);
  return cudaGetLastError();
}

// Wave path after the partition: the wave steps (see WaveStepKernel), then the
// fallback launches, which return at once unless a row reached the frontier.
// Regions 0 and 1 (the whole allocation with at most two regions) are cleared
// first; the steps clear the rest.
cudaError_t RunWaves(DeviceTable table, const BuildSource& source, uint32_t bound,
                     uint32_t tag_offset, uint32_t region_bits, uint32_t regions,
                     const uint64_t* words, const unsigned long long* counts,
                     unsigned int* tile_counters, unsigned int* spilled, RunSortArgs sort,
                     const FinalizeArgs* fin, DeviceBuildStats* stats, cudaStream_t stream) {
  const size_t first_slots =
      regions <= 2 ? TableAllocationSlots(table.capacity) : size_t(2) << region_bits;
  cudaError_t e = cudaMemsetAsync(table.slots, 0xff, first_slots * sizeof(uint64_t), stream);
  if (e != cudaSuccess) return e;
  WaveArgs a{};
  a.words = words;
  a.ends = counts;
  a.tile_counters = tile_counters;
  a.spilled = spilled;
  a.region_bits = region_bits;
  a.regions = regions;
  a.bound = bound;
  static std::atomic<int> resident_wave{0};
  // Persistent blocks: as many as fit (the steps are small; tiles balance them).
  const unsigned grid = unsigned(std::max(1, CachedResident(WaveStepKernel<true>, resident_wave)));
  for (uint32_t step = 0; step < regions; ++step) {
    if (source.load_before_cas) {
      WaveStepKernel<true><<<grid, kBlockThreads, 0, stream>>>(table, a, step, stats);
    } else {
      WaveStepKernel<false><<<grid, kBlockThreads, 0, stream>>>(table, a, step, stats);
    }
  }
  e = cudaGetLastError();
  if (e == cudaSuccess) e = MarkPhase(source, 1, stream);
  if (e != cudaSuccess) return e;
  // Fallback: the direct insert, only when `spilled` is set.
  static std::atomic<int> resident_redo{0}, resident_insert{0};
  const uint64_t vectors = TableAllocationSlots(table.capacity) / 2;
  RedoClearKernel<<<GridFor(vectors, CachedResident(RedoClearKernel, resident_redo)), kBlockThreads,
                    0, stream>>>(table, vectors, stats, spilled);
  const uint64_t rows = source.rows;
  const unsigned igrid = GridFor(rows, CachedResident(InsertKernel<false, true>, resident_insert));
  auto redo_insert = [&](const unsigned int* only_if) {
    if (source.validity != nullptr)
      InsertKernel<true, true><<<igrid, kBlockThreads, 0, stream>>>(
          table, source.keys, source.validity, rows, bound, tag_offset, stats, only_if);
    else
      InsertKernel<false, true><<<igrid, kBlockThreads, 0, stream>>>(
          table, source.keys, nullptr, rows, bound, tag_offset, stats, only_if);
  };
  redo_insert(spilled);
  // Robin Hood order for the first-come runs of the steps (see SortTile); when
  // that is not possible (`resort`), the same redo as a spill, then marked as
  // one so that finalisation reads values by row.
  sort.spilled = spilled;
  sort.bound = bound;
  ResetMaxProbesKernel<<<1, 1, 0, stream>>>(stats, spilled);
  const uint32_t tiles = table.capacity > kSortTile ? table.capacity / kSortTile : 1u;
  if (fin != nullptr)
    SortTilesKernel<true><<<tiles, kBlockThreads, 0, stream>>>(table, sort, *fin, stats);
  else
    SortTilesKernel<false><<<tiles, kBlockThreads, 0, stream>>>(table, sort, FinalizeArgs{}, stats);
  RedoClearKernel<<<GridFor(vectors, CachedResident(RedoClearKernel, resident_redo)), kBlockThreads,
                    0, stream>>>(table, vectors, stats, sort.resort);
  redo_insert(sort.resort);
  MarkResortedKernel<<<1, 1, 0, stream>>>(sort.resort, spilled);
  return cudaGetLastError();
}

// log2 of the slots per region of the wave path: kWaveRegionBits (32 MiB) for
// large tables, 16 regions for small ones, at least 4 slots per region (16-byte
// clears), one region below 64 slots, at most kMaxRegions.
uint32_t RegionBits(uint32_t capacity, const BuildSource& source) {
  const uint32_t log2cap = Log2Pow2(capacity);
  uint32_t bits;
  if (source.region_bits != 0)
    bits = std::min(source.region_bits, log2cap);
  else
    bits = log2cap >= 25 ? kWaveRegionBits : (log2cap > 4 ? log2cap - 4 : log2cap);
  bits = log2cap < 6 ? log2cap : std::max(bits, 2u);
  if (log2cap > 11 && bits < log2cap - 11) bits = log2cap - 11;  // at most kMaxRegions
  return bits;
}

// The transient buffer of the wave and tile paths, stream-ordered.
// GPUJOIN_CUDA_PARTITION_MAX_BYTES caps it: a build that would need more is
// treated as one whose buffer cannot be allocated (the caller then takes the
// direct path). An allocation failure is not sticky; the caller reports it.
cudaError_t AllocateTransient(size_t bytes, void** buffer, cudaStream_t stream) {
  if (const char* cap = std::getenv("GPUJOIN_CUDA_PARTITION_MAX_BYTES")) {
    char* end = nullptr;
    const unsigned long long max_bytes = std::strtoull(cap, &end, 10);
    if (end != cap && *end == '\0' && bytes > max_bytes) return cudaErrorMemoryAllocation;
  }
  const cudaError_t e = cudaMallocAsync(buffer, bytes, stream);
  if (e != cudaSuccess) (void)cudaGetLastError();
  return e;
}

// Carves aligned pieces out of one stream-ordered allocation.
struct Carver {
  size_t offset = 0;
  size_t Take(size_t bytes) {
    const size_t at = offset;
    offset = (offset + bytes + 255) & ~size_t{255};
    return at;
  }
};

// The wave path: partition, wave steps (with the fallback launches), then the
// finalisation pass over the table when `finalize`.
cudaError_t BuildWaves(DeviceTable table, const BuildSource& source, uint32_t bound,
                       uint32_t tag_offset, bool finalize, DeviceBuildStats* stats,
                       cudaStream_t stream) {
  const uint32_t bits = RegionBits(table.capacity, source);
  const uint32_t regions = table.capacity >> bits;
  const uint64_t rows = source.rows;
  // Position tags: with explicit values and the stable partition, a word's tag
  // is its position in the buffer. A key's words all lie in its region's run, in
  // row order, so the lowest tag is still the lowest row; the values travel with
  // the words (part_values) and the finalisation reads them in region order.
  const bool stable = StablePartition(source, regions);
  const bool positions = stable && source.values != nullptr && source.position_tags;
  // 64-bit counts only when a position could reach 2^32.
  const bool wide = rows > 0xffffffffull;
  const uint64_t offset_items = stable ? uint64_t(regions) * Segments(rows) + 1 : 0;
  const size_t offset_bytes = offset_items * (wide ? 8 : 4);
  const size_t scan_bytes = !stable ? 0
                            : wide  ? ScanTempBytes<unsigned long long>(offset_items)
                                    : ScanTempBytes<uint32_t>(offset_items);
  // One allocation: words | values | ends (regions + 1) + tile counters
  // (regions + 2) + spilled flag + resort flag | offsets | scan storage. Ends,
  // counters and flags are zeroed by one memset (they are adjacent).
  const size_t ends_bytes = (size_t(regions) + 1) * sizeof(unsigned long long);
  // Tile counters (regions + 2), spilled, resort.
  const size_t control_bytes = ((size_t(regions) + 4) * sizeof(unsigned int) + 7) & ~size_t{7};
  Carver c;
  const size_t at_words = c.Take(rows * sizeof(uint64_t));
  const size_t at_values = c.Take(positions ? rows * sizeof(uint32_t) : 0);
  const size_t at_ends = c.Take(ends_bytes + control_bytes);
  const size_t at_offsets = c.Take(offset_bytes);
  const size_t at_scan = c.Take(scan_bytes);
  void* buffer = nullptr;
  cudaError_t e = AllocateTransient(c.offset, &buffer, stream);
  if (e != cudaSuccess) return e;
  auto* bytes = static_cast<unsigned char*>(buffer);
  PartitionBuffers b;
  b.words = reinterpret_cast<uint64_t*>(bytes + at_words);
  b.part_values = positions ? reinterpret_cast<uint32_t*>(bytes + at_values) : nullptr;
  b.ends = reinterpret_cast<unsigned long long*>(bytes + at_ends);
  b.offsets = stable ? bytes + at_offsets : nullptr;
  b.wide_offsets = wide;
  b.scan_temp = stable ? bytes + at_scan : nullptr;
  b.scan_temp_bytes = scan_bytes;
  auto* tile_counters = reinterpret_cast<unsigned int*>(bytes + at_ends + ends_bytes);
  unsigned int* spilled = tile_counters + regions + 2;
  RunSortArgs sort{};
  sort.resort = tile_counters + regions + 3;
  e = cudaMemsetAsync(b.ends, 0, ends_bytes + control_bytes, stream);
  if (e == cudaSuccess)
    e = Partition(table, source, tag_offset, bits, regions, positions, b, stats, stream);
  if (e == cudaSuccess) e = MarkPhase(source, 0, stream);
  const FinalizeArgs fin{source.values,      source.first_value, source.chunk_starts,
                         source.chunk_bases, source.chunk_count, b.part_values};
  if (e == cudaSuccess)
    e = RunWaves(table, source, bound, tag_offset, bits, regions, b.words, b.ends, tile_counters,
                 spilled, sort, finalize ? &fin : nullptr, stats, stream);
  if (e == cudaSuccess && finalize) {
    // The sort finalised the table, unless the build fell back to the direct
    // insert (row tags): then one finalisation pass (FinalizeKernel reads `spilled`).
    e = FinalizeDirect(table, source, stream, b.part_values, spilled, true);
  }
  if (e == cudaSuccess && source.fell_back != nullptr)
    e = cudaMemcpyAsync(source.fell_back, spilled, sizeof(unsigned int), cudaMemcpyDeviceToDevice,
                        stream);
  const cudaError_t f = cudaFreeAsync(buffer, stream);
  if (e == cudaSuccess) e = MarkPhase(source, 2, stream);
  return e != cudaSuccess ? e : f;
}

// The tile path (see TileSortKernel): the words, their stable sort by tile,
// the tile kernels, then the direct insert when `fall_back` was set.
// Words, tile numbers of type TileT and their sort by tile (phase 0 of the
// tile path). The sort runs on double buffers: `tile` and `words` end up holding
// the sorted numbers and words as their current buffers, and the alternate
// words buffer is free for the keys' multiplicities.
template <typename TileT>
cudaError_t SortWordsByTile(DeviceTable table, const BuildSource& source, bool finalize,
                            void* temp, size_t temp_bytes, cub::DoubleBuffer<TileT>& tile,
                            cub::DoubleBuffer<uint64_t>& words, int bits, cudaStream_t stream) {
  static std::atomic<int> resident{0};
  const FinalizeArgs fin{source.values,      source.first_value, source.chunk_starts,
                         source.chunk_bases, source.chunk_count, nullptr};
  TileWordsKernel<TileT>
      <<<GridFor(source.rows, CachedResident(TileWordsKernel<TileT>, resident)), kBlockThreads, 0,
         stream>>>(source.keys, source.validity, source.rows, table.capacity, !finalize, fin,
                   tile.Current(), words.Current());
  return cub::DeviceRadixSort::SortPairs(temp, temp_bytes, tile, words, int(source.rows), 0, bits,
                                         stream);
}

template <typename TileT>
cudaError_t TileStarts(const TileT* sorted, uint64_t rows, uint32_t tiles, uint32_t* starts,
                       cudaStream_t stream) {
  static std::atomic<int> resident{0};
  TileStartsKernel<TileT>
      <<<GridFor(rows + 1, CachedResident(TileStartsKernel<TileT>, resident)), kBlockThreads, 0,
         stream>>>(sorted, rows, tiles, starts);
  return cudaGetLastError();
}

cudaError_t BuildTiles(DeviceTable table, const BuildSource& source, uint32_t bound,
                       uint32_t tag_offset, bool finalize, DeviceBuildStats* stats,
                       cudaStream_t stream) {
  const uint32_t tiles = table.capacity / kTileSlots;
  const uint64_t rows = source.rows;
  const int bits = int(Log2Pow2(tiles));
  // 16-bit tile numbers while they fit: less traffic in each sort pass.
  const bool narrow = tiles <= 65536u && !source.wide_tile_numbers;
  const size_t tile_bytes = narrow ? sizeof(uint16_t) : sizeof(uint32_t);
  size_t sort_bytes = 0;
  cudaError_t e = cudaSuccess;
  if (narrow) {
    cub::DoubleBuffer<uint16_t> t(nullptr, nullptr);
    cub::DoubleBuffer<uint64_t> w(nullptr, nullptr);
    e = cub::DeviceRadixSort::SortPairs(nullptr, sort_bytes, t, w, int(rows), 0, bits, stream);
  } else {
    cub::DoubleBuffer<uint32_t> t(nullptr, nullptr);
    cub::DoubleBuffer<uint64_t> w(nullptr, nullptr);
    e = cub::DeviceRadixSort::SortPairs(nullptr, sort_bytes, t, w, int(rows), 0, bits, stream);
  }
  if (e != cudaSuccess) return e;
  Carver c;
  const size_t at_tile_a = c.Take(rows * tile_bytes);
  const size_t at_tile_b = c.Take(rows * tile_bytes);
  const size_t at_words_a = c.Take(rows * sizeof(uint64_t));
  const size_t at_words_b = c.Take(rows * sizeof(uint64_t));
  const size_t at_starts = c.Take((size_t(tiles) + 1) * sizeof(uint32_t));
  const size_t at_shape = c.Take(size_t(tiles) * sizeof(int4));
  const size_t at_carry = c.Take(size_t(tiles) * sizeof(uint32_t));
  const size_t at_probes = c.Take(size_t(tiles) * sizeof(unsigned long long));
  const size_t at_max = c.Take(size_t(tiles) * sizeof(uint32_t));
  const size_t at_deduped = c.Take(size_t(tiles) * sizeof(int2));
  const size_t at_flag = c.Take(sizeof(unsigned int));
  const size_t at_sort = c.Take(sort_bytes);
  void* buffer = nullptr;
  e = AllocateTransient(c.offset, &buffer, stream);
  if (e != cudaSuccess) return e;
  auto* bytes = static_cast<unsigned char*>(buffer);
  cub::DoubleBuffer<uint64_t> words(reinterpret_cast<uint64_t*>(bytes + at_words_a),
                                    reinterpret_cast<uint64_t*>(bytes + at_words_b));
  TileArgs ta{};
  ta.starts = reinterpret_cast<uint32_t*>(bytes + at_starts);
  ta.shape = reinterpret_cast<int4*>(bytes + at_shape);
  ta.carry = reinterpret_cast<uint32_t*>(bytes + at_carry);
  ta.probes = reinterpret_cast<unsigned long long*>(bytes + at_probes);
  ta.max_probes = reinterpret_cast<uint32_t*>(bytes + at_max);
  ta.deduped = reinterpret_cast<int2*>(bytes + at_deduped);
  ta.fall_back = reinterpret_cast<unsigned int*>(bytes + at_flag);
  ta.tiles = tiles;
  ta.bound = bound;
  e = cudaMemsetAsync(ta.fall_back, 0, sizeof(unsigned int), stream);
  // Sorted tile numbers (the starts are made from them after the phase mark).
  const void* sorted_tiles = nullptr;
  if (e == cudaSuccess) {
    auto sort = [&](auto tile_tag) {
      using TileT = decltype(tile_tag);
      cub::DoubleBuffer<TileT> tile(reinterpret_cast<TileT*>(bytes + at_tile_a),
                                    reinterpret_cast<TileT*>(bytes + at_tile_b));
      const cudaError_t r = SortWordsByTile(table, source, finalize, bytes + at_sort, sort_bytes,
                                            tile, words, bits, stream);
      sorted_tiles = tile.Current();
      return r;
    };
    e = narrow ? sort(uint16_t{}) : sort(uint32_t{});
  }
  ta.words = words.Current();
  ta.multiplicity = reinterpret_cast<uint32_t*>(words.Alternate());
  if (e == cudaSuccess) e = MarkPhase(source, 0, stream);
  if (e == cudaSuccess) {
    e = narrow ? TileStarts(static_cast<const uint16_t*>(sorted_tiles), rows, tiles,
                            const_cast<uint32_t*>(ta.starts), stream)
               : TileStarts(static_cast<const uint32_t*>(sorted_tiles), rows, tiles,
                            const_cast<uint32_t*>(ta.starts), stream);
  }
  if (e == cudaSuccess) {
    // Over the 48 KiB a launch may take without asking (set each time: the
    // attribute belongs to the current device).
    e = cudaFuncSetAttribute(TileDedupKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             int(kDedupSharedBytes));
  }
  if (e == cudaSuccess) {
    TileDedupKernel<<<(tiles + kDedupTilesPerBlock - 1) / kDedupTilesPerBlock, kTileThreads,
                      kDedupSharedBytes, stream>>>(ta);
    TileSortKernel<<<tiles, kTileThreads, 0, stream>>>(table, ta);
    TileCarryKernel<<<1, kCarryThreads, 0, stream>>>(ta, table.capacity, stats);
    TilePlaceKernel<<<tiles, kTileThreads, 0, stream>>>(table, ta);
    TileProbesKernel<<<1, kCarryThreads, 0, stream>>>(ta, stats);
    e = cudaGetLastError();
  }
  if (e == cudaSuccess) e = MarkPhase(source, 1, stream);
  if (e == cudaSuccess) {
    // Fallback: clear, the direct insert and its finalisation, only when set.
    static std::atomic<int> resident_redo{0}, resident_insert{0};
    const uint64_t vectors = TableAllocationSlots(table.capacity) / 2;
    RedoClearKernel<<<GridFor(vectors, CachedResident(RedoClearKernel, resident_redo)),
                      kBlockThreads, 0, stream>>>(table, vectors, stats, ta.fall_back);
    const unsigned igrid =
        GridFor(rows, CachedResident(InsertKernel<false, true>, resident_insert));
    if (source.validity != nullptr)
      InsertKernel<true, true><<<igrid, kBlockThreads, 0, stream>>>(
          table, source.keys, source.validity, rows, bound, tag_offset, stats, ta.fall_back);
    else
      InsertKernel<false, true><<<igrid, kBlockThreads, 0, stream>>>(
          table, source.keys, nullptr, rows, bound, tag_offset, stats, ta.fall_back);
    e = cudaGetLastError();
    if (e == cudaSuccess && finalize)
      e = FinalizeDirect(table, source, stream, nullptr, ta.fall_back, true);
  }
  if (e == cudaSuccess && source.fell_back != nullptr)
    e = cudaMemcpyAsync(source.fell_back, ta.fall_back, sizeof(unsigned int),
                        cudaMemcpyDeviceToDevice, stream);
  const cudaError_t f = cudaFreeAsync(buffer, stream);
  if (e == cudaSuccess) e = MarkPhase(source, 2, stream);
  return e != cudaSuccess ? e : f;
}

// Whether a build stores generated values directly and skips finalisation:
// generated values that do not wrap grow with the row.
bool StoresFinalValues(const BuildSource& source) {
  return source.values == nullptr && source.chunk_starts == nullptr &&
         uint64_t(source.first_value) + source.rows - 1 <= 0xffffffffull;
}

// The direct path: insert, then finalise unless the tags are the values.
cudaError_t BuildDirectPath(DeviceTable table, const BuildSource& source, uint32_t bound,
                            uint32_t tag_offset, bool finalize, DeviceBuildStats* stats,
                            cudaStream_t stream) {
  cudaError_t e = MarkPhase(source, 0, stream);
  if (e == cudaSuccess) e = BuildDirect(table, source, bound, tag_offset, stats, stream);
  if (e == cudaSuccess) e = MarkPhase(source, 1, stream);
  if (e != cudaSuccess || !finalize) return e == cudaSuccess ? MarkPhase(source, 2, stream) : e;
  e = FinalizeDirect(table, source, stream);
  if (e == cudaSuccess) e = MarkPhase(source, 2, stream);
  return e;
}

// Shared by BuildTable and ClearAndBuildTable; `cleared`: the caller cleared
// the table and statistics already.
cudaError_t Build(DeviceTable table, const BuildSource& source, uint32_t bound,
                  DeviceBuildStats* stats, bool cleared, cudaStream_t stream) {
  if (source.rows == 0) return cleared ? cudaSuccess : ClearTable(table, stats, stream);
  const bool direct = StoresFinalValues(source);
  const BuildPath path = ChooseBuildPath(table.capacity, source.rows, source.path, !direct);
  cudaError_t e = cudaSuccess;
  if (!cleared) {
    // The wave path clears the table itself, region by region; the tile path
    // writes every slot.
    e = path != BuildPath::kDirect ? cudaMemsetAsync(stats, 0, sizeof(DeviceBuildStats), stream)
                                   : ClearTable(table, stats, stream);
    if (e != cudaSuccess) return e;
  }
  const uint32_t tag_offset = direct ? source.first_value : 0u;
  if (path != BuildPath::kDirect) {
    // The tile path needs two tiles and a CUB item count (int); else waves.
    const bool tiles_fit = table.capacity >= 2 * kTileSlots && source.rows < (uint64_t{1} << 31);
    const bool tiles = path == BuildPath::kTiles && tiles_fit;
    e = tiles ? BuildTiles(table, source, bound, tag_offset, !direct, stats, stream)
              : BuildWaves(table, source, bound, tag_offset, !direct, stats, stream);
    // No memory for the transient buffer (nothing was enqueued after the
    // statistics reset): the wave path needs less (8-12 bytes per row against
    // about 20), the direct path none.
    if (e == cudaErrorMemoryAllocation && tiles)
      e = BuildWaves(table, source, bound, tag_offset, !direct, stats, stream);
    if (e != cudaErrorMemoryAllocation) return e;
    e = ClearTable(table, stats, stream);
    if (e != cudaSuccess) return e;
  }
  return BuildDirectPath(table, source, bound, tag_offset, !direct, stats, stream);
}

}  // namespace

BuildPath ChooseBuildPath(uint32_t capacity, uint64_t rows, BuildPath path, bool finalize) {
  if (path != BuildPath::kAuto) return path;
  if (const char* env = std::getenv("GPUJOIN_CUDA_BUILD_PATH")) {
    if (std::strcmp(env, "direct") == 0) return BuildPath::kDirect;
    if (std::strcmp(env, "waves") == 0) return BuildPath::kWaves;
    if (std::strcmp(env, "tiles") == 0) return BuildPath::kTiles;
  }
  const bool large =
      uint64_t(TableAllocationSlots(capacity)) * sizeof(uint64_t) >= kPartitionMinTableBytes &&
      rows >= kPartitionMinRows;
  if (!large) return BuildPath::kDirect;
  return finalize ? kLargeFinalizedBuildPath : kLargeBuildPath;
}

cudaError_t BuildTable(DeviceTable table, const BuildSource& source, uint32_t bound,
                       DeviceBuildStats* stats, cudaStream_t stream) {
  return Build(table, source, bound, stats, /*cleared=*/true, stream);
}

cudaError_t ClearAndBuildTable(DeviceTable table, const BuildSource& source, uint32_t bound,
                               DeviceBuildStats* stats, cudaStream_t stream) {
  return Build(table, source, bound, stats, /*cleared=*/false, stream);
}

cudaError_t LookupKeys(DeviceTable table, const uint32_t* keys, uint64_t rows, uint32_t bound,
                       uint32_t* values, uint8_t* found, uint32_t* probes, DeviceQueryStats* stats,
                       cudaStream_t stream, ProbeFetch fetch) {
  if (rows == 0) return cudaSuccess;
  switch (fetch == ProbeFetch::kDefault ? kDefaultProbeFetch : fetch) {
    case ProbeFetch::kL2_64B:
      return LookupWithFetch<false, 64, 64>(table, keys, rows, bound, values, found, probes,
                                            nullptr, stats, stream);
    case ProbeFetch::kL2_128B:
      return LookupWithFetch<false, 128, 128>(table, keys, rows, bound, values, found, probes,
                                              nullptr, stats, stream);
    case ProbeFetch::kPlainThen128B:
      return LookupWithFetch<false, 0, 128>(table, keys, rows, bound, values, found, probes,
                                            nullptr, stats, stream);
    case ProbeFetch::k64BThen128B:
      return LookupWithFetch<false, 64, 128>(table, keys, rows, bound, values, found, probes,
                                             nullptr, stats, stream);
    default:
      return LookupWithFetch<false, 0, 0>(table, keys, rows, bound, values, found, probes, nullptr,
                                          stats, stream);
  }
}

cudaError_t LookupKeysMasked(DeviceTable table, const uint32_t* keys, uint64_t rows,
                             uint32_t bound, uint32_t* values, uint8_t* found, uint32_t* probes,
                             uint32_t* masks, DeviceQueryStats* stats, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  static_assert(kDefaultProbeFetch == ProbeFetch::k64BThen128B, "LookupKeysMasked's fetch");
  return LookupWithFetch<true, 64, 128>(table, keys, rows, bound, values, found, probes, masks,
                                        stats, stream);
}

}  // namespace gpujoin::engine::detail
