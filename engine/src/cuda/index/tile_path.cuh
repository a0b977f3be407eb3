// The tile build path (BuildPath::kTiles), shared by tile_sort.cu (phase 0 and
// the per-tile ordering) and tile_build.cu (carries, placement, fallback).
//
// Builds the Robin Hood layout without per-row atomics, for either key word K
// (the words are K's slot words, table.hpp). Every valid row becomes
// a word key:value (the final value: no finalisation pass) with the number of
// its key's 2048-slot home tile; a stable CUB radix sort on the tile number
// (only its log2(tiles) bits), on double buffers (no
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
// insert.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "cuda/index/build_paths.hpp"
#include "cuda/index/insert.cuh"
#include "cuda/tile_layout.hpp"

namespace gpujoin::engine::detail {

constexpr uint32_t kTileMaxRows = 2560;
constexpr uint32_t kTileThreads = 512;  // the tile kernels' blocks
constexpr int kTileItems = int(kTileMaxRows / kTileThreads);
static_assert(kTileItems * kTileThreads == kTileMaxRows, "whole items per thread");
constexpr int kTileCountItems = int(kTileSlots / kTileThreads);

// A word's home slot within its tile.
template <KeyWord K>
__device__ __forceinline__ uint32_t TileHome(SlotWord<K> w, uint32_t capacity) {
  return HomeSlot(Slots<K>::Key(w), capacity) & (kTileSlots - 1u);
}

// The per-tile arrays of the transient buffer (TileLayout), as the kernels see
// them; the words are slot words of key word K.
template <KeyWord K>
struct TileArgs {
  SlotWord<K>* words;          // sorted by tile; TileSortKernel puts each tile's keys first
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

/// Where the pieces of the transient buffer lie (offsets in bytes) and its size.
struct TileLayout {
  uint32_t tiles = 0;
  int bits = 0;           // bits of a tile number
  size_t sort_bytes = 0;  // CUB radix sort temporary storage
  size_t tile_a = 0, tile_b = 0, words_a = 0, words_b = 0;
  size_t starts = 0, shape = 0, carry = 0, probes = 0, max_probes = 0, deduped = 0, flag = 0;
  size_t sort = 0;
  size_t bytes = 0;  // the whole buffer
};

/// The layout for this table and build of key word K (tile_sort.cu);
/// cudaErrorInvalidValue when CUB cannot size its sort.
template <KeyWord K>
cudaError_t MakeTileLayout(uint32_t capacity, uint64_t rows, TileLayout* layout);

/// Phase 0 and the per-tile ordering (tile_sort.cu): the words and their stable
/// sort by tile, the tile starts, the reduction of large tiles and the tile
/// sort, in `buffer` (layout.bytes). Fills `ta` (every pointer into `buffer`)
/// for the kernels after it; *ta.fall_back is zeroed first.
template <KeyWord K>
cudaError_t SortAndOrderTiles(DeviceTableT<K> table, const BuildSourceT<K>& source, bool finalize,
                              const TileLayout& layout, unsigned char* buffer, uint32_t bound,
                              TileArgs<K>* ta, cudaStream_t stream);

}  // namespace gpujoin::engine::detail
