// The CUDA tile build (BuildPath::kTiles) driven through the device-level API
// (engine/src/cuda/index/build.hpp) with explicit values, against the CPU
// backend. The backend takes the tile path only for large builds (or when
// BackendOptions force it) and never with explicit values together with a
// validity mask; here every build forces it, so small inputs exercise: the
// stable sort by tile (with and without a clearing pass first), the reduction of tiles
// of more than 2560 rows (hot keys), the fallback to the direct insert (a tile
// of more than 2560 keys; it must still finalise from the source values),
// validity masks and reserved keys, duplicates of one key spread over many
// tiles with distinct values (the lowest row's value must win), runs that cross
// tiles and wrap past the end of the table. The table layout (key, value per
// slot) and every build statistic, probes included, must equal the CPU
// backend's exactly (the Robin Hood layout is deterministic without overflow);
// the CPU reference builds the same rows with masked-out rows replaced by
// the reserved key (both count those as invalid). Every test runs for both key
// words (uint32, then uint64 keys: pairs that differ only in their high 32
// bits, keys above 2^32). Skips with a message when no CUDA device is usable.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <random>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "backends.hpp"
#include "gpujoin/engine/backend.hpp"
#include "gpujoin/engine/graph.hpp"
#include "gpujoin/engine/hash_index.hpp"

#if defined(GPUJOIN_HAVE_CUDA)
#include <cuda_runtime.h>

#include "cuda/device_ops.hpp"
#include "gpujoin/engine/detail/slot_hash.hpp"
#endif

namespace gpujoin::engine {
namespace {

#if defined(GPUJOIN_HAVE_CUDA)

namespace gd = detail;

// One device allocation holding a host vector's copy (or `n` uninitialised items).
template <typename T>
class DeviceArray {
 public:
  explicit DeviceArray(const std::vector<T>& host) : DeviceArray(host.size()) {
    if (ptr_ != nullptr && !host.empty())
      ok_ = cudaMemcpy(ptr_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice) ==
            cudaSuccess;
  }
  explicit DeviceArray(size_t n) {
    ok_ = cudaMalloc(reinterpret_cast<void**>(&ptr_), (n == 0 ? 1 : n) * sizeof(T)) == cudaSuccess;
  }
  ~DeviceArray() { cudaFree(ptr_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  T* get() const { return ptr_; }
  bool ok() const { return ok_; }

 private:
  T* ptr_ = nullptr;
  bool ok_ = false;
};

// How the device build is forced.
struct TileOptions {
  bool clear_first = false;  // ClearTable + BuildTable instead of ClearAndBuildTable
};

void PrintTo(const TileOptions& o, std::ostream* os) {
  *os << "{" << (o.clear_first ? "ClearTable + BuildTable" : "ClearAndBuildTable") << "}";
}

// Every way of forcing the tile path these tests check.
constexpr TileOptions kTileVariants[] = {{false}, {true}};

template <KeyWord K>
struct BuildOutput {
  std::vector<std::pair<K, uint32_t>> contents;  // sorted by key
  BuildStatistics stats;
  std::vector<std::pair<K, uint32_t>> layout;  // (key, value) per slot
  bool fell_back = false;       // device builds: the tile path fell back to the direct insert
  bool untouched_flag = false;  // device builds: the fallback flag was never written
};

class TileBuildDifferential : public CudaVsCpuTest {
 protected:
  TileBuildDifferential() : CudaVsCpuTest("tile build tests skipped") {}

  // Runs body.template operator()<K>() for K = uint32_t, then uint64_t (unless
  // the first ended the test).
  template <class Body>
  void ForEachKeyWord(Body&& body) {
    {
      SCOPED_TRACE("uint32 keys");
      body.template operator()<uint32_t>();
    }
    if (HasFatalFailure() || IsSkipped()) return;
    SCOPED_TRACE("uint64 keys");
    body.template operator()<uint64_t>();
  }

  // Distinct random values (so that a wrong winner shows as a wrong value).
  std::vector<uint32_t> DistinctValues(size_t n) { return DistinctKeys(n); }

  // The CPU backend's build of the same rows (masked-out rows as the reserved key).
  template <KeyWord K>
  BuildOutput<K> CpuBuild(uint32_t capacity, std::vector<K> keys,
                          const std::vector<uint32_t>& values,
                          const std::vector<uint32_t>& validity) {
    BuildOutput<K> out;
    for (size_t i = 0; i < validity.size(); ++i)
      if (validity[i] == 0) keys[i] = kEmptyKeyOf<K>;
    auto index = cpu_->CreateIndex(HashIndexSpec{capacity, 0, KeyTypeOf<K>()});
    EXPECT_TRUE(index.ok()) << index.status();
    if (!index.ok()) return out;
    BuildIndexNodeT<K> node;
    node.index = index->get();
    node.keys = {keys};
    node.values = ChunkedU32{values};
    node.statistics = &out.stats;
    CommandGraph g;
    g.Add(node);
    const absl::Status s = cpu_->Run(g);
    EXPECT_TRUE(s.ok()) << s;
    auto snap = (*index)->template SnapshotAs<K>();
    EXPECT_TRUE(snap.ok()) << snap.status();
    if (!snap.ok()) return out;
    for (size_t i = 0; i < snap->keys.size(); ++i) {
      const bool empty = snap->keys[i] == kEmptyKeyOf<K>;
      out.layout.emplace_back(snap->keys[i], empty ? 0u : snap->values[i]);
      if (!empty) out.contents.emplace_back(snap->keys[i], snap->values[i]);
    }
    std::sort(out.contents.begin(), out.contents.end());
    return out;
  }

  // The device build on the tile path (probe bound = capacity).
  template <KeyWord K>
  BuildOutput<K> TileBuild(uint32_t capacity, const std::vector<K>& keys,
                           const std::vector<uint32_t>& values,
                           const std::vector<uint32_t>& validity, const TileOptions& o) {
    BuildOutput<K> out;
    DeviceArray<K> keys_d(keys);
    DeviceArray<uint32_t> values_d(values), validity_d(validity);
    DeviceArray<gd::SlotWord<K>> slots_d(gd::TableAllocationSlots(capacity));
    DeviceArray<gd::DeviceBuildStats> stats_d(1);
    DeviceArray<unsigned int> fell_back_d(std::vector<unsigned int>{7u});
    EXPECT_TRUE(keys_d.ok() && values_d.ok() && validity_d.ok() && slots_d.ok() && stats_d.ok() &&
                fell_back_d.ok());
    gd::BuildSourceT<K> src;
    src.keys = keys_d.get();
    src.rows = keys.size();
    src.values = values_d.get();
    src.validity = validity.empty() ? nullptr : validity_d.get();
    src.path = gd::BuildPath::kTiles;
    src.fell_back = fell_back_d.get();
    src.transient_max_bytes = transient_max_bytes_;
    const gd::DeviceTableT<K> table{slots_d.get(), capacity};
    cudaError_t e = cudaSuccess;
    if (o.clear_first) {
      e = gd::ClearTable(table, stats_d.get(), nullptr);
      if (e == cudaSuccess) e = gd::BuildTable(table, src, Bound(capacity), stats_d.get(), nullptr);
    } else {
      e = gd::ClearAndBuildTable(table, src, Bound(capacity), stats_d.get(), nullptr);
    }
    if (e == cudaSuccess) e = cudaDeviceSynchronize();
    EXPECT_EQ(e, cudaSuccess) << cudaGetErrorString(e);
    std::vector<gd::SlotWord<K>> slots(gd::TableAllocationSlots(capacity));
    gd::DeviceBuildStats st{};
    EXPECT_EQ(cudaMemcpy(slots.data(), slots_d.get(), slots.size() * sizeof(slots[0]),
                         cudaMemcpyDeviceToHost),
              cudaSuccess);
    EXPECT_EQ(cudaMemcpy(&st, stats_d.get(), sizeof(st), cudaMemcpyDeviceToHost), cudaSuccess);
    unsigned int fell_back = 7u;
    EXPECT_EQ(cudaMemcpy(&fell_back, fell_back_d.get(), sizeof(fell_back), cudaMemcpyDeviceToHost),
              cudaSuccess);
    out.untouched_flag = fell_back == 7u;
    if (transient_max_bytes_ == 0) EXPECT_LE(fell_back, 1u) << "the fallback flag was not reported";
    out.fell_back = fell_back == 1u;
    for (size_t i = 0; i < capacity; ++i) {
      // The slot word (cuda/index/table.hpp): key:value in one uint64, or a key and a tag.
      K key;
      uint32_t value;
      if constexpr (std::is_same_v<K, uint32_t>) {
        key = slots[i] == gd::kEmptySlot ? kEmptyKey : uint32_t(slots[i] >> 32);
        value = uint32_t(slots[i]);
      } else {
        key = slots[i].key;
        value = uint32_t(slots[i].tag);
        if (key != kEmptyKey64) EXPECT_EQ(slots[i].tag >> 32, 0u) << "slot " << i;
      }
      const bool empty = key == kEmptyKeyOf<K>;
      out.layout.emplace_back(key, empty ? 0u : value);
      if (!empty) out.contents.emplace_back(key, value);
    }
    std::sort(out.contents.begin(), out.contents.end());
    out.stats = {st.unique_keys,  st.duplicate_rows, st.overflow_rows,
                 st.invalid_rows, st.total_probes,   st.max_probes};
    return out;
  }

  // Builds on the device and compares contents, the slot layout (Robin Hood
  // order: the same on both backends without overflow) and the statistics that
  // do not depend on thread order with `cpu` (CpuBuild of the same input).
  // `fallback_expected`: whether the tile path should have fallen back to the
  // direct insert (unset: either is fine); an ordinary build must not, or the
  // tile kernels would go untested and slow.
  template <KeyWord K>
  void Compare(uint32_t capacity, const std::vector<K>& keys, const std::vector<uint32_t>& values,
               const std::vector<uint32_t>& validity, const TileOptions& o,
               const BuildOutput<K>& cpu, std::optional<bool> fallback_expected = false) {
    SCOPED_TRACE(::testing::PrintToString(o));
    const BuildOutput<K> gpu = TileBuild(capacity, keys, values, validity, o);
    if (fallback_expected) EXPECT_EQ(gpu.fell_back, *fallback_expected) << Seed();
    ASSERT_EQ(cpu.stats.overflow_rows, 0u) << "test case must not overflow";
    EXPECT_EQ(gpu.stats.unique_keys, cpu.stats.unique_keys) << Seed();
    EXPECT_EQ(gpu.stats.duplicate_rows, cpu.stats.duplicate_rows) << Seed();
    EXPECT_EQ(gpu.stats.overflow_rows, 0u) << Seed();
    EXPECT_EQ(gpu.stats.invalid_rows, cpu.stats.invalid_rows) << Seed();
    // The tile path counts every valid row of a key at the key's final place
    // (the CPU counts a duplicate where it met its key, which later keys may
    // have moved on): exactly FinalPlaceProbes; the CPU's total is the same
    // without duplicates.
    // After a fallback the direct insert counted instead (a duplicate where it
    // met its key): between one probe per duplicate and the final place.
    const uint64_t final_place = FinalPlaceProbes(capacity, keys, validity, cpu.layout);
    if (gpu.fell_back) {
      EXPECT_GE(gpu.stats.total_probes, gpu.stats.unique_keys + gpu.stats.duplicate_rows) << Seed();
      EXPECT_LE(gpu.stats.total_probes, final_place) << Seed();
    } else {
      EXPECT_EQ(gpu.stats.total_probes, final_place) << Seed();
    }
    if (cpu.stats.duplicate_rows == 0)
      EXPECT_EQ(gpu.stats.total_probes, cpu.stats.total_probes) << Seed();
    EXPECT_EQ(gpu.stats.max_probes, cpu.stats.max_probes) << Seed();
    EXPECT_EQ(gpu.contents.size(), cpu.contents.size()) << Seed();
    size_t mismatched = 0;
    for (size_t i = 0; i < std::min(gpu.contents.size(), cpu.contents.size()); ++i)
      mismatched += gpu.contents[i] != cpu.contents[i];
    EXPECT_EQ(mismatched, 0u) << "of " << cpu.contents.size() << " keys; " << Seed();
    ASSERT_EQ(gpu.layout.size(), cpu.layout.size());
    size_t misplaced = 0;
    for (size_t i = 0; i < cpu.layout.size(); ++i) misplaced += gpu.layout[i] != cpu.layout[i];
    EXPECT_EQ(misplaced, 0u) << "slots differ from the CPU layout; " << Seed();
  }

  // `rows` rows: a quarter are copies of `hot` keys spread over the whole input
  // (every tile, segment and block), the rest distinct.
  // Sum over the valid rows of their key's displacement + 1 in `layout` (the
  // CPU's slots, (key, value) per slot).
  template <KeyWord K>
  static uint64_t FinalPlaceProbes(uint32_t capacity, const std::vector<K>& keys,
                                   const std::vector<uint32_t>& validity,
                                   const std::vector<std::pair<K, uint32_t>>& layout) {
    std::unordered_map<K, uint64_t> place;  // key -> displacement + 1
    for (uint32_t i = 0; i < capacity; ++i) {
      const K k = layout[i].first;
      if (k != kEmptyKeyOf<K>) place[k] = ((i - gd::HomeSlot(k, capacity)) & (capacity - 1u)) + 1u;
    }
    uint64_t total = 0;
    for (size_t r = 0; r < keys.size(); ++r) {
      if (keys[r] == kEmptyKeyOf<K> || (!validity.empty() && validity[r] == 0)) continue;
      const auto it = place.find(keys[r]);
      if (it != place.end()) total += it->second;
    }
    return total;
  }

  // BuildSource::transient_max_bytes of the device builds (0: no cap).
  uint64_t transient_max_bytes_ = 0;
  // The probe bound of the device builds (0: the capacity, as the CPU builds).
  uint32_t bound_ = 0;
  uint32_t Bound(uint32_t capacity) const { return bound_ != 0 ? bound_ : capacity; }

  template <KeyWord K>
  std::vector<K> KeysWithHotDuplicates(size_t rows, size_t hot) {
    std::vector<K> keys = DistinctKeysOf<K>(rows);
    for (size_t i = 0; i < rows; ++i)
      if (rng_() % 4 == 0) keys[i] = keys[rng_() % hot];
    return keys;
  }
};

// 2^20 slots, 2^19 + 12345 rows, a quarter of them copies of 64 hot keys
// spread over every tile: the lowest row's value must win.
TEST_F(TileBuildDifferential, HotDuplicatesAcrossTilesKeepTheLowestRowsValue) {
  ForEachKeyWord([&]<KeyWord K>() {
    const uint32_t capacity = 1u << 20;
    const size_t rows = (size_t(1) << 19) + 12345;
    const std::vector<K> keys = KeysWithHotDuplicates<K>(rows, 64);
    const std::vector<uint32_t> values = DistinctValues(rows);
    const BuildOutput<K> cpu = CpuBuild(capacity, keys, values, {});
    for (const TileOptions& o : kTileVariants) {
      Compare(capacity, keys, values, {}, o, cpu);
      if (HasFatalFailure()) return;
    }
  });
}

// One key repeated on every row but the first few: the hot key's tile holds far
// more than 2560 rows and is reduced to one word per key first
// (TileDedupKernel), with no fallback; the first occurrence's value must win.
TEST_F(TileBuildDifferential, OneKeyOnAlmostEveryRow) {
  ForEachKeyWord([&]<KeyWord K>() {
    const uint32_t capacity = 1u << 16;
    const size_t rows = 100003;
    const std::vector<K> distinct = DistinctKeysOf<K>(6);
    std::vector<K> keys(rows, distinct[5]);
    for (size_t i = 0; i < 5; ++i) keys[i * 7 + 1] = distinct[i];  // row 0 holds the hot key
    const std::vector<uint32_t> values = DistinctValues(rows);
    const BuildOutput<K> cpu = CpuBuild(capacity, keys, values, {});
    for (const TileOptions& o : kTileVariants) {
      Compare(capacity, keys, values, {}, o, cpu);
      if (HasFatalFailure()) return;
    }
  });
}

// A tile of more rows than the tile kernels hold: reduced to one word per key
// when it has at most 2560 keys (rows of hot keys, invalid rows and reserved keys
// among them), else the build falls back to the direct insert. Tile 0 of a
// 2^16-slot table gets 4 rows of each of 1900 keys homed there (each key's first
// row valid, the others a fifth invalid or reserved; with the other keys homed
// there about 2400 keys): reduced. Then 2700 such keys: a fallback.
TEST_F(TileBuildDifferential, TileOfManyRowsIsReducedOrFallsBack) {
  ForEachKeyWord([&]<KeyWord K>() {
    const uint32_t capacity = 1u << 16;
    std::vector<K> homed;  // keys homed in tile 0
    for (const K k : DistinctKeysOf<K>(size_t(1) << 22)) {
      if (gd::HomeSlot(k, capacity) < 2048) homed.push_back(k);
      if (homed.size() == 2700) break;
    }
    ASSERT_EQ(homed.size(), 2700u);
    const std::vector<K> others = DistinctKeysOf<K>(capacity / 4);
    for (const size_t tile_keys : {size_t(1900), size_t(2700)}) {
      SCOPED_TRACE(std::to_string(tile_keys) + " keys in tile 0");
      // (key, kept valid): the homed keys' first rows stay valid.
      std::vector<std::pair<K, bool>> rows;
      for (const K k : others) rows.emplace_back(k, false);
      for (size_t i = 0; i < 4 * tile_keys; ++i)
        rows.emplace_back(homed[i < tile_keys ? i : rng_() % tile_keys], i < tile_keys);
      std::shuffle(rows.begin(), rows.end(), rng_);
      std::vector<K> keys(rows.size());
      std::vector<uint32_t> validity(rows.size());
      for (size_t i = 0; i < rows.size(); ++i) {
        const bool kept = rows[i].second;
        keys[i] = !kept && i % 101 == 0 ? kEmptyKeyOf<K> : rows[i].first;
        validity[i] = !kept && rng_() % 5 == 0 ? 0u : 1u;
      }
      const std::vector<uint32_t> values = DistinctValues(keys.size());
      const BuildOutput<K> cpu = CpuBuild(capacity, keys, values, validity);
      if (cpu.stats.overflow_rows != 0) GTEST_SKIP() << "input overflows; " << Seed();
      const bool fallback = tile_keys > 2560;
      Compare(capacity, keys, values, validity, TileOptions{}, cpu, fallback);
      if (HasFatalFailure()) return;
      Compare(capacity, keys, values, validity, TileOptions{true}, cpu, fallback);  // cleared first
      if (HasFatalFailure()) return;
    }
  });
}

// Validity masks and reserved keys with explicit values: masked-out and kEmptyKey
// rows are invalid, and a masked-out earlier copy of a key must not win.
TEST_F(TileBuildDifferential, ValidityMaskAndReservedKeysWithValues) {
  ForEachKeyWord([&]<KeyWord K>() {
    const uint32_t capacity = 1u << 18;
    const size_t rows = 150001;
    std::vector<K> keys = KeysWithHotDuplicates<K>(rows, 1000);
    for (size_t i = 0; i < rows; i += 97) keys[i] = kEmptyKeyOf<K>;
    std::vector<uint32_t> validity(rows);
    for (auto& v : validity) v = rng_() % 5 == 0 ? 0u : uint32_t(rng_() | 1u);
    const std::vector<uint32_t> values = DistinctValues(rows);
    const BuildOutput<K> cpu = CpuBuild(capacity, keys, values, validity);
    for (const TileOptions& o : kTileVariants) {
      Compare(capacity, keys, values, validity, o, cpu);
      if (HasFatalFailure()) return;
    }
  });
}

// The tile layout must be exactly the CPU's Robin Hood layout: loads 0.5, 0.8
// and 0.9, runs that cross tiles and wrap past the end of the table, tables of
// two tiles (the smallest the path takes) and of many. Ordinary loads of the
// larger table must not fall back to the direct insert.
TEST_F(TileBuildDifferential, TilesGiveTheRobinHoodLayout) {
  ForEachKeyWord([&]<KeyWord K>() {
    for (const uint32_t capacity : {4096u, 1u << 16}) {
      for (const double load : {0.5, 0.8, 0.9}) {
        SCOPED_TRACE("capacity " + std::to_string(capacity) + ", load " + std::to_string(load));
        const size_t rows = size_t(load * capacity);
        std::vector<K> keys = DistinctKeysOf<K>(rows);
        for (size_t i = 0; i < rows / 8; ++i) keys.push_back(keys[rng_() % rows]);  // duplicates
        const std::vector<uint32_t> values = DistinctValues(keys.size());
        const std::optional<bool> fallback =
            capacity == (1u << 16) && load < 0.85 ? std::optional<bool>(false) : std::nullopt;
        const BuildOutput<K> cpu = CpuBuild(capacity, keys, values, {});
        for (const TileOptions& o : kTileVariants) {
          Compare(capacity, keys, values, {}, o, cpu, fallback);
          if (HasFatalFailure()) return;
        }
      }
    }
  });
}

// A long run: 2200 keys homed in slots [1000, 1100) of a 2^16-slot table make
// one run from about slot 1000 to 3200, across a tile boundary (the tile holds
// about 2450 rows): placed without a fallback.
TEST_F(TileBuildDifferential, LongRunAcrossTilesIsPlaced) {
  ForEachKeyWord([&]<KeyWord K>() {
    const uint32_t capacity = 1u << 16;
    std::vector<K> keys;
    for (const K k : DistinctKeysOf<K>(size_t(4) << 20)) {
      const uint32_t home = gd::HomeSlot(k, capacity);
      if (home >= 1000 && home < 1100) keys.push_back(k);
      if (keys.size() == 2200) break;
    }
    ASSERT_EQ(keys.size(), 2200u);
    const std::vector<K> others = DistinctKeysOf<K>(capacity / 8);
    keys.insert(keys.end(), others.begin(), others.end());
    std::shuffle(keys.begin(), keys.end(), rng_);
    const std::vector<uint32_t> values = DistinctValues(keys.size());
    const BuildOutput<K> cpu = CpuBuild(capacity, keys, values, {});
    Compare(capacity, keys, values, {}, TileOptions{}, cpu, false);
  });
}

// A tile build whose transient buffer would exceed its cap
// (BuildSource::transient_max_bytes; the same branch as a failed allocation)
// inserts directly: same layout, and the fallback flag is left untouched (the
// tile kernels never ran).
TEST_F(TileBuildDifferential, TransientCapTakesTheDirectPath) {
  ForEachKeyWord([&]<KeyWord K>() {
    const uint32_t capacity = 1u << 16;
    const size_t rows = 30000;
    const std::vector<K> keys = KeysWithHotDuplicates<K>(rows, 100);
    const std::vector<uint32_t> values = DistinctValues(rows);
    const BuildOutput<K> cpu = CpuBuild(capacity, keys, values, {});
    transient_max_bytes_ =
        gd::BuildTransientBytes(capacity, rows, gd::BuildPath::kTiles, KeyTypeOf<K>()) - 1;
    ASSERT_GT(transient_max_bytes_, 24 * rows)
        << "the tile path's buffer is about 24 bytes per row";
    for (const TileOptions& o : kTileVariants) {
      SCOPED_TRACE(::testing::PrintToString(o));
      const BuildOutput<K> gpu = TileBuild(capacity, keys, values, {}, o);
      EXPECT_TRUE(gpu.untouched_flag) << "the tile kernels ran despite the cap";
      EXPECT_EQ(gpu.stats.unique_keys, cpu.stats.unique_keys) << Seed();
      EXPECT_EQ(gpu.stats.duplicate_rows, cpu.stats.duplicate_rows) << Seed();
      EXPECT_EQ(gpu.stats.overflow_rows, 0u) << Seed();
      EXPECT_EQ(gpu.stats.invalid_rows, cpu.stats.invalid_rows) << Seed();
      EXPECT_EQ(gpu.stats.max_probes, cpu.stats.max_probes) << Seed();
      ASSERT_EQ(gpu.layout.size(), cpu.layout.size());
      size_t misplaced = 0;
      for (size_t i = 0; i < cpu.layout.size(); ++i) misplaced += gpu.layout[i] != cpu.layout[i];
      EXPECT_EQ(misplaced, 0u) << "slots differ from the CPU layout; " << Seed();
      // The direct insert counts a duplicate where it met its key: between the
      // first-placement and the final-place totals.
      EXPECT_GE(gpu.stats.total_probes, gpu.stats.unique_keys + gpu.stats.duplicate_rows) << Seed();
      EXPECT_LE(gpu.stats.total_probes, FinalPlaceProbes(capacity, keys, {}, cpu.layout)) << Seed();
    }
  });
}

// A full table of two tiles (4096 keys in 4096 slots, about 2048 keys homed in
// each tile, so no tile is too large): no run has a first slot, so the carry
// scan cannot place the tiles and the build falls back to the direct insert,
// which fills the table as the CPU does.
TEST_F(TileBuildDifferential, FullTableFallsBack) {
  ForEachKeyWord([&]<KeyWord K>() {
    const uint32_t capacity = 4096;
    const std::vector<K> keys = DistinctKeysOf<K>(capacity);
    const std::vector<uint32_t> values = DistinctValues(capacity);
    const BuildOutput<K> cpu = CpuBuild(capacity, keys, values, {});
    ASSERT_EQ(cpu.stats.unique_keys, capacity);
    for (const TileOptions& o : kTileVariants) {
      Compare(capacity, keys, values, {}, o, cpu, /*fallback_expected=*/true);
      if (HasFatalFailure()) return;
    }
  });
}

// A key placed past the probe bound: load 0.8 of 2^16 slots with a bound of 8
// makes some keys' places farther than 8 slots from home, which the tile
// placement detects (it cannot drop keys), so the build falls back to the
// direct insert, which drops them as overflow. Which keys are dropped depends on
// the order of inserts, so the checks are the contract's invariants: every row
// classified once, every stored key within the bound of its home and holding its
// lowest row's value, max probes = the bound.
TEST_F(TileBuildDifferential, KeyPastTheProbeBoundFallsBackAndOverflows) {
  ForEachKeyWord([&]<KeyWord K>() {
    const uint32_t capacity = 1u << 16;
    const size_t rows = size_t(0.8 * capacity);
    const std::vector<K> keys = KeysWithHotDuplicates<K>(rows, 50);
    const std::vector<uint32_t> values = DistinctValues(rows);
    bound_ = 8;
    std::unordered_map<K, uint32_t> first_value;  // key -> its lowest row's value
    for (size_t r = rows; r-- > 0;) first_value[keys[r]] = values[r];
    for (const TileOptions& o : kTileVariants) {
      SCOPED_TRACE(::testing::PrintToString(o));
      const BuildOutput<K> gpu = TileBuild(capacity, keys, values, {}, o);
      EXPECT_TRUE(gpu.fell_back) << Seed();
      const BuildStatistics& st = gpu.stats;
      EXPECT_GT(st.overflow_rows, 0u) << Seed();
      EXPECT_EQ(st.unique_keys + st.duplicate_rows + st.overflow_rows + st.invalid_rows, rows);
      EXPECT_EQ(st.max_probes, bound_);
      uint64_t stored = 0;
      size_t bad = 0;
      for (uint32_t i = 0; i < capacity; ++i) {
        const auto [key, value] = gpu.layout[i];
        if (key == kEmptyKeyOf<K>) continue;
        ++stored;
        const uint32_t displacement = (i - gd::HomeSlot(key, capacity)) & (capacity - 1u);
        const auto it = first_value.find(key);
        bad += displacement >= bound_ || it == first_value.end() || it->second != value;
      }
      EXPECT_EQ(stored, st.unique_keys) << Seed();
      EXPECT_EQ(bad, 0u) << "stored keys past the bound, unknown or with a later row's value; "
                         << Seed();
    }
  });
}

#else

TEST(TileBuildDifferential, Skipped) {
  ::gpujoin::testing::SkipOrFailWithoutGpu(
      "built without the CUDA backend: the device-level tile build tests need it");
}

#endif

}  // namespace
}  // namespace gpujoin::engine
