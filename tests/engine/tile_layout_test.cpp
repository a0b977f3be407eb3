// The arithmetic of the CUDA tile build path (engine/src/cuda/tile_layout.hpp),
// run on the host: keys grouped by 2048-slot home tile, ranked in (home, key)
// order with the lowest row of each key kept, carries from the composed tile
// maps (the carry into tile 0 as the fixed point of the whole table's map),
// places from TilePlace. The layout must be the CPU backend's Robin Hood layout
// slot for slot, values included: loads 0.5 to 0.95, duplicates, runs that
// cross tiles and runs that wrap past the end of the table. (The device kernels
// themselves are compared with the CPU backend by gpu_tile_build_tests.)
#include "cuda/tile_layout.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gpujoin/engine/backend.hpp"
#include "gpujoin/engine/graph.hpp"
#include "gpujoin/engine/hash_index.hpp"

namespace gpujoin::engine {
namespace {

namespace gd = detail;

struct Slot {
  uint32_t key = kEmptyKey;
  uint32_t value = 0;
  bool operator==(const Slot&) const = default;
};

// The CPU backend's table for keys[i] with value values[i].
std::vector<Slot> CpuLayout(uint32_t capacity, const std::vector<uint32_t>& keys,
                            const std::vector<uint32_t>& values) {
  std::vector<Slot> out;
  auto backend = CreateBackend(BackendKind::kCpu);
  EXPECT_TRUE(backend.ok()) << backend.status();
  if (!backend.ok()) return out;
  auto index = (*backend)->CreateIndex(HashIndexSpec{capacity, 0});
  EXPECT_TRUE(index.ok()) << index.status();
  if (!index.ok()) return out;
  BuildStatistics stats;
  BuildIndexNode node;
  node.index = index->get();
  node.keys = {keys};
  node.values = ChunkedU32{values};
  node.statistics = &stats;
  CommandGraph g;
  g.Add(node);
  const absl::Status s = (*backend)->Run(g);
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(stats.overflow_rows, 0u) << "test case must not overflow";
  auto snap = (*index)->Snapshot();
  EXPECT_TRUE(snap.ok()) << snap.status();
  if (!snap.ok()) return out;
  for (size_t i = 0; i < snap->keys.size(); ++i)
    out.push_back(snap->keys[i] == kEmptyKey ? Slot{} : Slot{snap->keys[i], snap->values[i]});
  return out;
}

// The tile path's layout, computed on the host with tile_layout.hpp.
std::vector<Slot> TileLayout(uint32_t capacity, const std::vector<uint32_t>& keys,
                             const std::vector<uint32_t>& values) {
  const uint32_t tiles = capacity / gd::kTileSlots;
  struct Word {
    uint32_t home, key, row;
  };
  std::vector<std::vector<Word>> by_tile(tiles);
  for (uint32_t row = 0; row < keys.size(); ++row) {
    const uint32_t home = gd::HomeSlot(keys[row], capacity);
    by_tile[home >> gd::kTileBits].push_back({home & (gd::kTileSlots - 1u), keys[row], row});
  }
  // Per tile: the kept words in rank order and their running max of (home - rank).
  std::vector<std::vector<Word>> kept(tiles);
  std::vector<std::vector<long long>> running(tiles);
  std::vector<gd::CarryMap> maps(tiles);
  gd::CarryMap all{gd::kNoCarry, 0};
  for (uint32_t t = 0; t < tiles; ++t) {
    std::vector<Word>& w = by_tile[t];
    std::sort(w.begin(), w.end(), [](const Word& x, const Word& y) {
      return std::tie(x.home, x.key, x.row) < std::tie(y.home, y.key, y.row);
    });
    long long m = gd::kNoCarry;
    for (size_t i = 0; i < w.size(); ++i) {
      if (i > 0 && w[i].key == w[i - 1].key) continue;  // not the lowest row
      m = std::max(m, (long long)w[i].home - (long long)kept[t].size());
      kept[t].push_back(w[i]);
      running[t].push_back(m);
    }
    maps[t] = gd::TileCarryMap(uint32_t(kept[t].size()), m);
    all = gd::ThenCarry(all, maps[t]);
  }
  EXPECT_LT(all.b, 0) << "the table must not be full";
  std::vector<Slot> out(capacity);
  std::vector<int> writes(capacity, 0);
  long long carry = all.a;  // into tile 0: the fixed point of the whole map
  for (uint32_t t = 0; t < tiles; ++t) {
    for (uint32_t r = 0; r < kept[t].size(); ++r) {
      const long long place = gd::TilePlace(r, carry, running[t][r]);
      const uint32_t slot = (t * gd::kTileSlots + uint32_t(place)) & (capacity - 1u);
      out[slot] = Slot{kept[t][r].key, values[kept[t][r].row]};
      ++writes[slot];
    }
    carry = gd::ApplyCarry(maps[t], carry);
  }
  EXPECT_EQ(carry, all.a) << "the carry around the table must come back to itself";
  for (uint32_t i = 0; i < capacity; ++i) EXPECT_LE(writes[i], 1) << "slot " << i;
  return out;
}

TEST(TileLayoutTest, EqualsTheCpuRobinHoodLayout) {
  const uint64_t seed = std::random_device{}();
  std::mt19937_64 rng(seed);
  for (const uint32_t capacity : {1u << 12, 1u << 15}) {
    for (const double load : {0.5, 0.8, 0.95}) {
      for (const uint32_t crowd : {0u, 300u}) {  // keys homed in the last 40 slots: runs wrap
        SCOPED_TRACE("capacity " + std::to_string(capacity) + ", load " + std::to_string(load) +
                     ", crowd " + std::to_string(crowd) + ", seed " + std::to_string(seed));
        std::vector<uint32_t> keys;
        const size_t distinct = size_t(load * capacity) - crowd;
        while (keys.size() < distinct) {
          const uint32_t k = uint32_t(rng());
          if (k != kEmptyKey) keys.push_back(k);
        }
        while (keys.size() < distinct + crowd) {
          const uint32_t k = uint32_t(rng());
          if (k != kEmptyKey && gd::HomeSlot(k, capacity) >= capacity - 40) keys.push_back(k);
        }
        for (size_t i = 0; i < distinct / 8; ++i) keys.push_back(keys[rng() % keys.size()]);
        std::shuffle(keys.begin(), keys.end(), rng);
        std::vector<uint32_t> values(keys.size());
        for (auto& v : values) v = uint32_t(rng());
        const std::vector<Slot> cpu = CpuLayout(capacity, keys, values);
        const std::vector<Slot> tile = TileLayout(capacity, keys, values);
        ASSERT_EQ(cpu.size(), tile.size());
        size_t differ = 0;
        for (size_t i = 0; i < cpu.size(); ++i) differ += !(cpu[i] == tile[i]);
        EXPECT_EQ(differ, 0u);
      }
    }
  }
}

TEST(TileLayoutTest, MapsComposeAndTheIdentityIsNeutral) {
  const gd::CarryMap id{gd::kNoCarry, 0};
  const gd::CarryMap f = gd::TileCarryMap(2100, 10);  // passes on at least 62
  const gd::CarryMap g = gd::TileCarryMap(100, -5);   // absorbs all but 1948 less
  for (const long long c : {0ll, 1ll, 61ll, 500ll, 4000ll}) {
    EXPECT_EQ(gd::ApplyCarry(id, c), c);
    EXPECT_EQ(gd::ApplyCarry(gd::ThenCarry(id, f), c), gd::ApplyCarry(f, c));
    EXPECT_EQ(gd::ApplyCarry(gd::ThenCarry(f, id), c), gd::ApplyCarry(f, c));
    EXPECT_EQ(gd::ApplyCarry(gd::ThenCarry(f, g), c), gd::ApplyCarry(g, gd::ApplyCarry(f, c)));
  }
  EXPECT_EQ(gd::ApplyCarry(f, 0), 2100 - 2048 + 10);
  EXPECT_EQ(gd::ApplyCarry(gd::TileCarryMap(0, 0), 3000), 3000 - 2048);  // an empty tile
  EXPECT_EQ(gd::TilePlace(3, 0, -2), 3);
  EXPECT_EQ(gd::TilePlace(3, 7, 1), 10);
}

}  // namespace
}  // namespace gpujoin::engine
