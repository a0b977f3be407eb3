// Tile path, first part: the words and their stable sort by tile, the tile
// starts, the reduction of large tiles and each tile's ordering (see
// tile_path.cuh).
#include <cuda_runtime.h>

#include <atomic>
#include <climits>
#include <cstdint>
#include <cub/block/block_scan.cuh>
#include <cub/device/device_radix_sort.cuh>

#include "cuda/index/tile_path.cuh"
#include "cuda/kernel_utils.cuh"

namespace gpujoin::engine::detail {
namespace {

// Row i -> (tile number, word). Invalid rows become empty words, spread over the
// tiles by row (TileSortKernel counts and drops them).
template <KeyWord K>
__global__ void __launch_bounds__(kBlockThreads)
    TileWordsKernel(const K* __restrict__ keys, const uint32_t* __restrict__ validity,
                    uint64_t rows, uint32_t capacity, bool stores_values, FinalizeArgs fin,
                    uint32_t* __restrict__ tile_of, SlotWord<K>* __restrict__ words) {
  const uint32_t tiles = capacity / kTileSlots;
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  for (uint64_t i = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < rows; i += stride) {
    const K key = keys[i];
    const bool valid = key != kEmptyKeyOf<K> && (validity == nullptr || validity[i] != 0);
    const uint32_t row = uint32_t(i);
    uint32_t value = 0;
    if (valid) {
      value = stores_values ? fin.first_value + row
                            : FinalValue(row, fin.values, fin.first_value, fin.chunk_starts,
                                         fin.chunk_bases, fin.chunk_count);
    }
    tile_of[i] = valid ? HomeSlot(key, capacity) >> kTileBits : row & (tiles - 1u);
    words[i] = valid ? Slots<K>::Make(key, value) : Slots<K>::Empty();
  }
}

// starts[t] = first position of tile t in the sorted tile numbers (starts[tiles] = rows).
__global__ void __launch_bounds__(kBlockThreads)
    TileStartsKernel(const uint32_t* __restrict__ tile_of, uint64_t rows, uint32_t tiles,
                     uint32_t* __restrict__ starts) {
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  for (uint64_t i = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i <= rows; i += stride) {
    const uint32_t from = i == 0 ? 0u : tile_of[i - 1] + 1u;  // tiles that start at i
    const uint32_t to = i == rows ? tiles : tile_of[i];
    for (uint32_t t = from; t <= to; ++t) starts[t] = uint32_t(i);
  }
}

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
// Keys, first positions, row counts.
template <KeyWord K>
constexpr size_t kDedupSharedBytes = kDedupSlots*(sizeof(K) + 2 * sizeof(uint32_t));
constexpr int kDedupItems = 8;  // words in flight per thread
static_assert(kDedupSlots % kTileThreads == 0 && kDedupTilesPerBlock <= kTileThreads);

// The dedup set's slot for `key` (multiplicative hashing, top bits).
__device__ __forceinline__ uint32_t DedupHash(uint32_t key) {
  return (key * 0x9e3779b1u) >> (32 - kDedupSlotBits);
}
__device__ __forceinline__ uint32_t DedupHash(uint64_t key) {
  return uint32_t((key * 0x9e3779b97f4a7c15ull) >> (64 - kDedupSlotBits));
}

// Shared-memory compare-and-swap of a key.
__device__ __forceinline__ uint32_t SharedCas(uint32_t* p, uint32_t expected, uint32_t desired) {
  return atomicCAS(p, expected, desired);
}
__device__ __forceinline__ uint64_t SharedCas(uint64_t* p, uint64_t expected, uint64_t desired) {
  return atomicCAS(reinterpret_cast<unsigned long long*>(p), expected, desired);
}

template <KeyWord K>
__global__ void __launch_bounds__(kTileThreads) TileDedupKernel(TileArgs<K> a) {
  using S = Slots<K>;
  constexpr K kEmpty = kEmptyKeyOf<K>;
  // kDedupSlots keys, first positions, row counts.
  extern __shared__ __align__(16) unsigned char s_dyn[];
  K* const s_key = reinterpret_cast<K*>(s_dyn);
  uint32_t* const s_pos = reinterpret_cast<uint32_t*>(s_dyn + kDedupSlots * sizeof(K));
  uint32_t* const s_count = s_pos + kDedupSlots;
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
      s_key[k] = kEmpty;
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
    K held_key = kEmpty;
    uint32_t held_slot = 0, held_count = 0;
    const uint32_t lane = threadIdx.x & 31u;
    // Rounds of kDedupItems words per thread, all loads issued first: warp w
    // takes rows i0 + w * 32 * kDedupItems + j * 32 + lane.
    for (uint32_t i0 = 0; i0 < n; i0 += kTileThreads * kDedupItems) {
      const uint32_t first = i0 + (threadIdx.x - lane) * kDedupItems + lane;
      SlotWord<K> w[kDedupItems];
#pragma unroll
      for (int j = 0; j < kDedupItems; ++j) {
        const uint32_t i = first + uint32_t(j) * 32u;
        w[j] = i < n ? a.words[base + i] : S::Empty();  // empty: an invalid row
      }
#pragma unroll
      for (int j = 0; j < kDedupItems; ++j) {
        // A warp's rows of one key are counted once, by the lowest lane (the
        // lowest position); a lane adds up the rows of the key it last
        // inserted in a register (its later positions are higher, so its first
        // one stands), so that a hot key does not serialise on one slot.
        const K key = S::Key(w[j]);
        const unsigned peers = __match_any_sync(0xffffffffu, key);
        if (S::IsEmpty(w[j])) continue;
        ++valid;
        if (lane != uint32_t(__ffs(peers)) - 1u) continue;
        if (key == held_key) {
          held_count += uint32_t(__popc(peers));
          continue;
        }
        if (held_count != 0) atomicAdd(&s_count[held_slot], held_count);
        held_count = 0;
        uint32_t h = DedupHash(key);
        bool placed = false;
        for (uint32_t p = 0; p < kDedupSlots && !placed; ++p, h = (h + 1u) & (kDedupSlots - 1u)) {
          K k = s_key[h];
          if (k == kEmpty) {
            k = SharedCas(&s_key[h], kEmpty, key);
            if (k == kEmpty) {
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
          held_key = kEmpty;
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
    SlotWord<K> gw[kPer];
    uint32_t gc[kPer], gi[kPer];
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      const uint32_t k = uint32_t(j) * kTileThreads + threadIdx.x;
      gi[j] = ~0u;
      if (s_key[k] != kEmpty) {
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

// The kept words of a tile staged in rank order in shared memory. uint32 keys:
// the words; uint64 keys: keys and values apart (12 bytes a word instead of 16,
// so that TileSortKernel stays within 48 KiB of static shared memory).
template <KeyWord K>
struct TileStage {
  uint64_t words[kTileMaxRows];
  __device__ void Put(uint32_t r, uint64_t w) { words[r] = w; }
  __device__ uint64_t Get(uint32_t r) const { return words[r]; }
};
template <>
struct TileStage<uint64_t> {
  uint64_t keys[kTileMaxRows];
  uint32_t values[kTileMaxRows];
  __device__ void Put(uint32_t r, Slot64 w) {
    keys[r] = w.key;
    values[r] = uint32_t(w.tag);
  }
  __device__ Slot64 Get(uint32_t r) const { return Slot64{keys[r], values[r]}; }
};

// TileSortKernel's shared memory: the sort's arrays, then (once the ranks are
// known) the kept words staged in rank order, so that they leave in coalesced
// stores.
template <KeyWord K>
union TileSortShared {
  struct {
    uint32_t first[kTileSlots + 1];  // counts, then first index of each home
    K key[kTileMaxRows];             // by word index
    uint16_t by_home[kTileMaxRows];  // word indices grouped by home
    uint8_t keep[kTileMaxRows];      // (home, key, row) order: the key's first row
  } sort;
  struct {
    TileStage<K> words;                   // by rank
    uint32_t multiplicity[kTileMaxRows];  // by rank
  } out;
};

template <KeyWord K>
__global__ void __launch_bounds__(kTileThreads)
    TileSortKernel(DeviceTableT<K> table, TileArgs<K> a) {
  using S = Slots<K>;
  using Scan = cub::BlockScan<uint32_t, kTileThreads>;
  __shared__ TileSortShared<K> s_u;
  __shared__ uint16_t s_rank[kTileMaxRows];  // (home, key, row) order -> rank among kept
  __shared__ typename Scan::TempStorage s_scan;
  __shared__ int s_max;
  uint32_t* const s_first = s_u.sort.first;
  K* const s_key = s_u.sort.key;
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
  SlotWord<K> w[kTileItems];
  uint32_t at[kTileItems];  // rank in its home, then place in (home, key, row) order
#pragma unroll
  for (int j = 0; j < kTileItems; ++j) {
    const uint32_t i = uint32_t(j) * kTileThreads + threadIdx.x;
    w[j] = i < n ? a.words[base + i] : S::Empty();
    at[j] = 0;
  }
  __syncthreads();  // s_first zeroed
#pragma unroll
  for (int j = 0; j < kTileItems; ++j) {
    const uint32_t i = uint32_t(j) * kTileThreads + threadIdx.x;
    if (!S::IsEmpty(w[j])) {
      s_key[i] = S::Key(w[j]);
      at[j] = atomicAdd(&s_first[TileHome<K>(w[j], table.capacity)], 1u);
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
    if (!S::IsEmpty(w[j]))
      s_by_home[s_first[TileHome<K>(w[j], table.capacity)] + at[j]] = uint16_t(i);
  }
  __syncthreads();
  // Each word's place among its home's words: by key, then row (a tile's words
  // are in row order after the stable sort).
  uint32_t rows_of_key[kTileItems];
#pragma unroll
  for (int j = 0; j < kTileItems; ++j) {
    const uint32_t i = uint32_t(j) * kTileThreads + threadIdx.x;
    rows_of_key[j] = 0;
    if (!S::IsEmpty(w[j])) {
      const K key = S::Key(w[j]);
      const uint32_t h = TileHome<K>(w[j], table.capacity);
      const uint32_t g0 = s_first[h], g1 = s_first[h + 1];
      uint32_t before = 0, same = 0;
      bool keep = true;
      for (uint32_t g = g0; g < g1; ++g) {
        const uint32_t other = s_by_home[g];
        const K other_key = s_key[other];
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
      s_u.out.words.Put(r, w[j]);
      s_u.out.multiplicity[r] = rows_of_key[j];
      m = max(m, int(TileHome<K>(w[j], table.capacity)) - int(r));
    }
  }
  m = __reduce_max_sync(0xffffffffu, m);
  if ((threadIdx.x & 31u) == 0) atomicMax(&s_max, m);
  __syncthreads();
  for (uint32_t r = threadIdx.x; r < keys_in_tile; r += kTileThreads) {
    a.words[base + r] = s_u.out.words.Get(r);
    a.multiplicity[base + r] = s_u.out.multiplicity[r];
  }
  if (threadIdx.x == 0) {
    const int valid_rows = deduped ? dedup.y : int(valid);
    a.shape[t] = make_int4(int(keys_in_tile), s_max, valid_rows, int(rows_in_tile));
  }
}

// ThenCarry for CUB's scan (tile_layout.hpp).

uint32_t Log2Pow2(uint32_t pow2) { return 31u - uint32_t(__builtin_clz(pow2)); }

// Words, tile numbers and their stable sort by tile (phase 0), then the tile
// starts. The sort runs on double buffers: the words end up in `words`' current
// buffer, and its alternate is free for the keys' multiplicities. (Sorting
// 16-bit tile numbers where they fit, tables of at most 2^16 tiles, measured 2-3 %
// faster on an H200 but doubles the sort's kernels; one width serves all sizes.)
template <KeyWord K>
cudaError_t SortWordsByTile(DeviceTableT<K> table, const BuildSourceT<K>& source, bool finalize,
                            const TileLayout& l, unsigned char* bytes,
                            cub::DoubleBuffer<SlotWord<K>>& words, uint32_t* starts,
                            cudaStream_t stream) {
  static std::atomic<int> resident_words{0}, resident_starts{0};
  cub::DoubleBuffer<uint32_t> tile(reinterpret_cast<uint32_t*>(bytes + l.tile_a),
                                   reinterpret_cast<uint32_t*>(bytes + l.tile_b));
  const FinalizeArgs fin{source.values, source.first_value, source.chunk_starts, source.chunk_bases,
                         source.chunk_count};
  TileWordsKernel<K><<<GridFor(source.rows, CachedResident(TileWordsKernel<K>, resident_words)),
                       kBlockThreads, 0, stream>>>(source.keys, source.validity, source.rows,
                                                   table.capacity, !finalize, fin, tile.Current(),
                                                   words.Current());
  size_t sort_bytes = l.sort_bytes;
  cudaError_t e = cub::DeviceRadixSort::SortPairs(bytes + l.sort, sort_bytes, tile, words,
                                                  int(source.rows), 0, l.bits, stream);
  if (e == cudaSuccess) e = MarkPhase(source, 0, stream);
  if (e != cudaSuccess) return e;
  TileStartsKernel<<<GridFor(source.rows + 1, CachedResident(TileStartsKernel, resident_starts)),
                     kBlockThreads, 0, stream>>>(tile.Current(), source.rows, l.tiles, starts);
  return cudaGetLastError();
}

}  // namespace

template <KeyWord K>
cudaError_t MakeTileLayout(uint32_t capacity, uint64_t rows, TileLayout* layout) {
  TileLayout l;
  l.tiles = capacity / kTileSlots;
  l.bits = int(Log2Pow2(l.tiles));
  {
    cub::DoubleBuffer<uint32_t> t(nullptr, nullptr);
    cub::DoubleBuffer<SlotWord<K>> w(nullptr, nullptr);
    const cudaError_t e = cub::DeviceRadixSort::SortPairs(nullptr, l.sort_bytes, t, w, int(rows), 0,
                                                          l.bits, cudaStream_t{});
    if (e != cudaSuccess) return e;
  }
  const size_t tile_bytes = sizeof(uint32_t);
  const size_t tiles = l.tiles;
  Carver c;
  l.tile_a = c.Take(rows * tile_bytes);
  l.tile_b = c.Take(rows * tile_bytes);
  l.words_a = c.Take(rows * sizeof(SlotWord<K>));
  l.words_b = c.Take(rows * sizeof(SlotWord<K>));
  l.starts = c.Take((tiles + 1) * sizeof(uint32_t));
  l.shape = c.Take(tiles * sizeof(int4));
  l.carry = c.Take(tiles * sizeof(uint32_t));
  l.probes = c.Take(tiles * sizeof(unsigned long long));
  l.max_probes = c.Take(tiles * sizeof(uint32_t));
  l.deduped = c.Take(tiles * sizeof(int2));
  l.flag = c.Take(sizeof(unsigned int));
  l.sort = c.Take(l.sort_bytes);
  l.bytes = c.offset;
  *layout = l;
  return cudaSuccess;
}

template <KeyWord K>
cudaError_t SortAndOrderTiles(DeviceTableT<K> table, const BuildSourceT<K>& source, bool finalize,
                              const TileLayout& l, unsigned char* bytes, uint32_t bound,
                              TileArgs<K>* out, cudaStream_t stream) {
  TileArgs<K> ta{};
  auto* starts = reinterpret_cast<uint32_t*>(bytes + l.starts);
  ta.starts = starts;
  ta.shape = reinterpret_cast<int4*>(bytes + l.shape);
  ta.carry = reinterpret_cast<uint32_t*>(bytes + l.carry);
  ta.probes = reinterpret_cast<unsigned long long*>(bytes + l.probes);
  ta.max_probes = reinterpret_cast<uint32_t*>(bytes + l.max_probes);
  ta.deduped = reinterpret_cast<int2*>(bytes + l.deduped);
  ta.fall_back = reinterpret_cast<unsigned int*>(bytes + l.flag);
  ta.tiles = l.tiles;
  ta.bound = bound;
  cub::DoubleBuffer<SlotWord<K>> words(reinterpret_cast<SlotWord<K>*>(bytes + l.words_a),
                                       reinterpret_cast<SlotWord<K>*>(bytes + l.words_b));
  cudaError_t e = cudaMemsetAsync(ta.fall_back, 0, sizeof(unsigned int), stream);
  if (e == cudaSuccess) {
    e = SortWordsByTile(table, source, finalize, l, bytes, words, starts, stream);
  }
  ta.words = words.Current();
  ta.multiplicity = reinterpret_cast<uint32_t*>(words.Alternate());
  *out = ta;
  if (e != cudaSuccess) return e;
  // Over the 48 KiB a launch may take without asking (set each time: the
  // attribute belongs to the current device).
  e = cudaFuncSetAttribute(TileDedupKernel<K>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           int(kDedupSharedBytes<K>));
  if (e != cudaSuccess) return e;
  TileDedupKernel<K><<<(l.tiles + kDedupTilesPerBlock - 1) / kDedupTilesPerBlock, kTileThreads,
                       kDedupSharedBytes<K>, stream>>>(ta);
  TileSortKernel<K><<<l.tiles, kTileThreads, 0, stream>>>(table, ta);
  return cudaGetLastError();
}

uint64_t TileTransientBytes(uint32_t capacity, uint64_t rows, KeyType key_type) {
  TileLayout l;
  const cudaError_t e = key_type == KeyType::kUint64 ? MakeTileLayout<uint64_t>(capacity, rows, &l)
                                                  : MakeTileLayout<uint32_t>(capacity, rows, &l);
  return e == cudaSuccess ? l.bytes : 0;
}

template cudaError_t MakeTileLayout<uint32_t>(uint32_t, uint64_t, TileLayout*);
template cudaError_t MakeTileLayout<uint64_t>(uint32_t, uint64_t, TileLayout*);
template cudaError_t SortAndOrderTiles(DeviceTableT<uint32_t>, const BuildSourceT<uint32_t>&, bool,
                                       const TileLayout&, unsigned char*, uint32_t,
                                       TileArgs<uint32_t>*, cudaStream_t);
template cudaError_t SortAndOrderTiles(DeviceTableT<uint64_t>, const BuildSourceT<uint64_t>&, bool,
                                       const TileLayout&, unsigned char*, uint32_t,
                                       TileArgs<uint64_t>*, cudaStream_t);

}  // namespace gpujoin::engine::detail
