// The arithmetic of the CUDA backend's tile build path (BuildPath::kTiles,
// cuda/index/tile_path.cuh), shared with its host test
// (tests/engine/tile_layout_test.cpp).
//
// The table is cut into tiles of kTileSlots slots. Within a tile, keys are
// ranked in (home, key) order; the key of rank r goes to slot
//   r + max(carry, max over ranks u <= r of (home_u - u))
// of the tile (homes and slots counted from the tile's first slot), where the
// carry counts the tile's first slots taken by runs from the tiles before. That
// is where linear probing puts keys inserted in (home, key) order: the Robin
// Hood layout. With n keys and M = max over all its keys of (home - rank), a
// tile passes on the carry max(0, n - kTileSlots + max(carry, M)), a map of the
// form c -> max(a, b + c); such maps compose, so the carries of all tiles are a
// scan over the tiles, and the carry into tile 0 (runs wrapping past the end
// of the table) is the fixed point of the whole table's map.
#pragma once

#include <climits>
#include <cstdint>

#include "gpujoin/engine/detail/slot_hash.hpp"

namespace gpujoin::engine::detail {

inline constexpr uint32_t kTileSlots = 2048;
inline constexpr uint32_t kTileBits = 11;
static_assert(kTileSlots == 1u << kTileBits);

/// c -> max(a, b + c): the carry a run of tiles passes on, given the one it gets.
struct CarryMap {
  long long a, b;
};

/// The identity map's `a` (far below any carry, and safe to add a `b` to).
inline constexpr long long kNoCarry = LLONG_MIN / 4;

GPUJOIN_HOST_DEVICE long long MaxLL(long long x, long long y) { return x > y ? x : y; }

/// The map of one tile with `keys` keys and M = max(home - rank) (ignored
/// when the tile has no key).
GPUJOIN_HOST_DEVICE CarryMap TileCarryMap(uint32_t keys, long long m) {
  const long long b = (long long)keys - kTileSlots;
  return CarryMap{keys == 0 ? 0ll : MaxLL(0ll, b + m), b};
}

/// f, then g.
GPUJOIN_HOST_DEVICE CarryMap ThenCarry(const CarryMap& f, const CarryMap& g) {
  return CarryMap{MaxLL(g.a, g.b + f.a), f.b + g.b};
}

GPUJOIN_HOST_DEVICE long long ApplyCarry(const CarryMap& f, long long c) {
  return MaxLL(f.a, f.b + c);
}

/// The place (slot counted from the tile's first) of the key of rank `rank`,
/// given the tile's carry and the running maximum of (home - rank) up to it.
GPUJOIN_HOST_DEVICE long long TilePlace(uint32_t rank, long long carry, long long running_max) {
  return (long long)rank + MaxLL(carry, running_max);
}

}  // namespace gpujoin::engine::detail
