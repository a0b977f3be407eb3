// The CUDA wave build driven through the device-level API (engine/src/cuda/
// device_ops.hpp) with explicit values, against the CPU backend. The backend
// only reaches the wave path for large builds (or with GPUJOIN_CUDA_BUILD_PATH)
// and never with explicit values together with a validity mask; here every
// build forces BuildPath::kWaves and picks the region size, so small inputs
// exercise: the stable warp-multisplit partition with position tags (1 to 32
// regions), the histogram partition with row tags (more than 32 regions, or
// multisplit switched off), the fallback after a spill (which re-inserts with row
// tags, so the finalisation must gather from the source values again), validity
// masks and reserved keys, duplicates of one key spread over many tiles,
// segments and blocks with distinct values (the lowest row's value must win).
// The table contents (key, value pairs) and build statistics must equal the CPU
// backend's exactly; the CPU reference builds the same rows with masked-out rows
// replaced by kEmptyKey (both count those as invalid). Skips with a message when
// no CUDA device is usable.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <random>
#include <string>
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

using Contents = std::vector<std::pair<uint32_t, uint32_t>>;

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
struct WaveOptions {
  uint32_t region_bits = 0;   // 0 = the automatic size (16 regions for these tables)
  bool multisplit = true;     // false: the histogram partition even for <= 32 regions
  bool clear_first = false;   // ClearTable + BuildTable instead of ClearAndBuildTable
  bool position_tags = true;  // false: row tags on the multisplit partition too
  gd::BuildPath path = gd::BuildPath::kWaves;  // or kTiles (the other options do not apply)
  bool wide_tile_numbers = false;              // kTiles: sort 32-bit tile numbers
};

// The tile path; `wide`: with the 32-bit tile numbers that tables of more than
// 2^16 tiles sort (these tables would sort 16-bit ones).
WaveOptions Tiles(bool wide = false) {
  WaveOptions o;
  o.path = gd::BuildPath::kTiles;
  o.wide_tile_numbers = wide;
  return o;
}

void PrintTo(const WaveOptions& o, std::ostream* os) {
  *os << "{region_bits " << o.region_bits << (o.multisplit ? ", multisplit" : ", histogram")
      << (o.clear_first ? ", ClearTable + BuildTable" : ", ClearAndBuildTable")
      << (o.position_tags ? "" : ", row tags")
      << (o.path == gd::BuildPath::kTiles ? ", tile path" : "")
      << (o.wide_tile_numbers ? ", 32-bit tile numbers" : "") << "}";
}

struct BuildOutput {
  Contents contents;
  BuildStatistics stats;
  std::vector<std::pair<uint32_t, uint32_t>> layout;  // (key, value) per slot
  bool fell_back = false;  // device builds: the wave path fell back to the direct insert
};

class WaveBuildDifferential : public CudaVsCpuTest {
 protected:
  WaveBuildDifferential() : CudaVsCpuTest("wave build tests skipped") {}

  // Distinct random values (so that a wrong winner shows as a wrong value).
  std::vector<uint32_t> DistinctValues(size_t n) { return DistinctKeys(n); }

  // The CPU backend's build of the same rows (masked-out rows as kEmptyKey).
  BuildOutput CpuBuild(uint32_t capacity, std::vector<uint32_t> keys,
                       const std::vector<uint32_t>& values, const std::vector<uint32_t>& validity) {
    BuildOutput out;
    for (size_t i = 0; i < validity.size(); ++i)
      if (validity[i] == 0) keys[i] = kEmptyKey;
    auto index = cpu_->CreateIndex(HashIndexSpec{capacity, 0});
    EXPECT_TRUE(index.ok()) << index.status();
    if (!index.ok()) return out;
    BuildIndexNode node;
    node.index = index->get();
    node.keys = {keys};
    node.values = ChunkedU32{values};
    node.statistics = &out.stats;
    CommandGraph g;
    g.Add(node);
    const absl::Status s = cpu_->Run(g);
    EXPECT_TRUE(s.ok()) << s;
    auto snap = (*index)->Snapshot();
    EXPECT_TRUE(snap.ok()) << snap.status();
    if (!snap.ok()) return out;
    for (size_t i = 0; i < snap->keys.size(); ++i) {
      out.layout.emplace_back(snap->keys[i], snap->keys[i] == kEmptyKey ? 0u : snap->values[i]);
      if (snap->keys[i] != kEmptyKey) out.contents.emplace_back(snap->keys[i], snap->values[i]);
    }
    std::sort(out.contents.begin(), out.contents.end());
    return out;
  }

  // The device build on the wave path (probe bound = capacity).
  BuildOutput WaveBuild(uint32_t capacity, const std::vector<uint32_t>& keys,
                        const std::vector<uint32_t>& values, const std::vector<uint32_t>& validity,
                        const WaveOptions& o) {
    BuildOutput out;
    DeviceArray<uint32_t> keys_d(keys), values_d(values), validity_d(validity);
    DeviceArray<uint64_t> slots_d(gd::TableAllocationSlots(capacity));
    DeviceArray<gd::DeviceBuildStats> stats_d(1);
    DeviceArray<unsigned int> fell_back_d(std::vector<unsigned int>{7u});
    EXPECT_TRUE(keys_d.ok() && values_d.ok() && validity_d.ok() && slots_d.ok() && stats_d.ok() &&
                fell_back_d.ok());
    gd::BuildSource src;
    src.keys = keys_d.get();
    src.rows = keys.size();
    src.values = values_d.get();
    src.validity = validity.empty() ? nullptr : validity_d.get();
    src.path = o.path;
    src.region_bits = o.region_bits;
    src.multisplit_partition = o.multisplit;
    src.position_tags = o.position_tags;
    src.wide_tile_numbers = o.wide_tile_numbers;
    src.fell_back = fell_back_d.get();
    const gd::DeviceTable table{slots_d.get(), capacity};
    cudaError_t e = cudaSuccess;
    if (o.clear_first) {
      e = gd::ClearTable(table, stats_d.get(), nullptr);
      if (e == cudaSuccess) e = gd::BuildTable(table, src, capacity, stats_d.get(), nullptr);
    } else {
      e = gd::ClearAndBuildTable(table, src, capacity, stats_d.get(), nullptr);
    }
    if (e == cudaSuccess) e = cudaDeviceSynchronize();
    EXPECT_EQ(e, cudaSuccess) << cudaGetErrorString(e);
    std::vector<uint64_t> slots(gd::TableAllocationSlots(capacity));
    gd::DeviceBuildStats st{};
    EXPECT_EQ(cudaMemcpy(slots.data(), slots_d.get(), slots.size() * 8, cudaMemcpyDeviceToHost),
              cudaSuccess);
    EXPECT_EQ(cudaMemcpy(&st, stats_d.get(), sizeof(st), cudaMemcpyDeviceToHost), cudaSuccess);
    unsigned int fell_back = 7u;
    EXPECT_EQ(cudaMemcpy(&fell_back, fell_back_d.get(), sizeof(fell_back), cudaMemcpyDeviceToHost),
              cudaSuccess);
    EXPECT_LE(fell_back, 1u) << "the fallback flag was not reported";
    out.fell_back = fell_back == 1u;
    for (size_t i = 0; i < capacity; ++i) {
      const uint64_t s = slots[i];
      out.layout.emplace_back(s == gd::kEmptySlot ? kEmptyKey : uint32_t(s >> 32),
                              s == gd::kEmptySlot ? 0u : uint32_t(s));
      if (s != gd::kEmptySlot) out.contents.emplace_back(uint32_t(s >> 32), uint32_t(s));
    }
    std::sort(out.contents.begin(), out.contents.end());
    out.stats = {st.unique_keys,  st.duplicate_rows, st.overflow_rows,
                 st.invalid_rows, st.total_probes,   st.max_probes};
    return out;
  }

  // Builds on the device and compares contents, the slot layout (Robin Hood
  // order: the same on both backends without overflow) and the statistics that
  // do not depend on thread order with `cpu` (CpuBuild of the same input).
  // `fallback_expected`: whether the wave path should have fallen back to the
  // direct insert (unset: either is fine); an ordinary build must not, or the
  // first-come steps and the run sort would go untested and slow.
  void Compare(uint32_t capacity, const std::vector<uint32_t>& keys,
               const std::vector<uint32_t>& values, const std::vector<uint32_t>& validity,
               const WaveOptions& o, const BuildOutput& cpu,
               std::optional<bool> fallback_expected = false) {
    SCOPED_TRACE(::testing::PrintToString(o));
    const BuildOutput gpu = WaveBuild(capacity, keys, values, validity, o);
    if (fallback_expected) EXPECT_EQ(gpu.fell_back, *fallback_expected) << Seed();
    ASSERT_EQ(cpu.stats.overflow_rows, 0u) << "test case must not overflow";
    EXPECT_EQ(gpu.stats.unique_keys, cpu.stats.unique_keys) << Seed();
    EXPECT_EQ(gpu.stats.duplicate_rows, cpu.stats.duplicate_rows) << Seed();
    EXPECT_EQ(gpu.stats.overflow_rows, 0u) << Seed();
    EXPECT_EQ(gpu.stats.invalid_rows, cpu.stats.invalid_rows) << Seed();
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
  std::vector<uint32_t> KeysWithHotDuplicates(size_t rows, size_t hot) {
    std::vector<uint32_t> keys = DistinctKeys(rows);
    for (size_t i = 0; i < rows; ++i)
      if (rng_() % 4 == 0) keys[i] = keys[rng_() % hot];
    return keys;
  }
};

// 2^20 slots; 2^19 + 12345 rows = 33 segments of 16384 rows (the last one
// partial): 32, 16 (automatic), 4, 2 and 1 regions on the stable multisplit
// partition with position tags, and 32 regions on the histogram partition and on
// the multisplit partition with row tags.
TEST_F(WaveBuildDifferential, HotDuplicatesAcrossSegmentsKeepTheLowestRowsValue) {
  const uint32_t capacity = 1u << 20;
  const size_t rows = (size_t(1) << 19) + 12345;
  const std::vector<uint32_t> keys = KeysWithHotDuplicates(rows, 64);
  const std::vector<uint32_t> values = DistinctValues(rows);
  const BuildOutput cpu = CpuBuild(capacity, keys, values, {});
  for (const WaveOptions o : {WaveOptions{15}, WaveOptions{0}, WaveOptions{18}, WaveOptions{19},
                              WaveOptions{20}, WaveOptions{15, false}, WaveOptions{0, true, true},
                              WaveOptions{15, true, false, false}, Tiles(), Tiles(true)}) {
    Compare(capacity, keys, values, {}, o, cpu);
    if (HasFatalFailure()) return;
  }
}

// One key repeated on every row but the first few (every row of every tile has
// the same region): the first occurrence's value must win.
TEST_F(WaveBuildDifferential, OneKeyOnAlmostEveryRow) {
  const uint32_t capacity = 1u << 16;
  const size_t rows = 100003;
  const std::vector<uint32_t> distinct = DistinctKeys(6);
  std::vector<uint32_t> keys(rows, distinct[5]);
  for (size_t i = 0; i < 5; ++i) keys[i * 7 + 1] = distinct[i];  // row 0 holds the hot key
  const std::vector<uint32_t> values = DistinctValues(rows);
  const BuildOutput cpu = CpuBuild(capacity, keys, values, {});
  // The tile path: the hot key's tile holds far more than 2560 rows and is
  // reduced to one word per key first (TileDedupKernel), with no fallback.
  for (const WaveOptions o :
       {WaveOptions{11}, WaveOptions{0}, WaveOptions{11, false}, Tiles(), Tiles(true)}) {
    Compare(capacity, keys, values, {}, o, cpu);
    if (HasFatalFailure()) return;
  }
}

// A tile of more rows than the tile kernels hold: reduced to one word per key
// when it has at most 2560 keys (rows of hot keys, invalid rows and reserved keys
// among them), else the build falls back to the direct insert. Tile 0 of a
// 2^16-slot table gets 4 rows of each of 1900 keys homed there (each key's first
// row valid, the others a fifth invalid or reserved; with the other keys homed
// there about 2400 keys): reduced. Then 2700 such keys: a fallback.
TEST_F(WaveBuildDifferential, TileOfManyRowsIsReducedOrFallsBack) {
  const uint32_t capacity = 1u << 16;
  std::vector<uint32_t> homed;  // keys homed in tile 0
  for (const uint32_t k : DistinctKeys(size_t(1) << 22)) {
    if (gd::HomeSlot(k, capacity) < 2048) homed.push_back(k);
    if (homed.size() == 2700) break;
  }
  ASSERT_EQ(homed.size(), 2700u);
  const std::vector<uint32_t> others = DistinctKeys(capacity / 4);
  for (const size_t tile_keys : {size_t(1900), size_t(2700)}) {
    SCOPED_TRACE(std::to_string(tile_keys) + " keys in tile 0");
    // (key, kept valid): the homed keys' first rows stay valid.
    std::vector<std::pair<uint32_t, bool>> rows;
    for (const uint32_t k : others) rows.emplace_back(k, false);
    for (size_t i = 0; i < 4 * tile_keys; ++i)
      rows.emplace_back(homed[i < tile_keys ? i : rng_() % tile_keys], i < tile_keys);
    std::shuffle(rows.begin(), rows.end(), rng_);
    std::vector<uint32_t> keys(rows.size()), validity(rows.size());
    for (size_t i = 0; i < rows.size(); ++i) {
      const bool kept = rows[i].second;
      keys[i] = !kept && i % 101 == 0 ? kEmptyKey : rows[i].first;
      validity[i] = !kept && rng_() % 5 == 0 ? 0u : 1u;
    }
    const std::vector<uint32_t> values = DistinctValues(keys.size());
    const BuildOutput cpu = CpuBuild(capacity, keys, values, validity);
    if (cpu.stats.overflow_rows != 0) GTEST_SKIP() << "input overflows; " << Seed();
    const bool fallback = tile_keys > 2560;
    Compare(capacity, keys, values, validity, Tiles(), cpu, fallback);
    if (HasFatalFailure()) return;
    Compare(capacity, keys, values, validity, Tiles(true), cpu, fallback);
    if (HasFatalFailure()) return;
  }
}

// Validity masks and reserved keys with explicit values: masked-out and kEmptyKey
// rows are invalid, and a masked-out earlier copy of a key must not win.
TEST_F(WaveBuildDifferential, ValidityMaskAndReservedKeysWithValues) {
  const uint32_t capacity = 1u << 18;
  const size_t rows = 150001;
  std::vector<uint32_t> keys = KeysWithHotDuplicates(rows, 1000);
  for (size_t i = 0; i < rows; i += 97) keys[i] = kEmptyKey;
  std::vector<uint32_t> validity(rows);
  for (auto& v : validity) v = rng_() % 5 == 0 ? 0u : uint32_t(rng_() | 1u);
  const std::vector<uint32_t> values = DistinctValues(rows);
  const BuildOutput cpu = CpuBuild(capacity, keys, values, validity);
  for (const WaveOptions o : {WaveOptions{13}, WaveOptions{0}, WaveOptions{13, false},
                              WaveOptions{8} /* 1024 regions: histogram */, Tiles(),
                              Tiles(true)}) {
    Compare(capacity, keys, values, validity, o, cpu);
    if (HasFatalFailure()) return;
  }
}

// More than 32 regions (the histogram partition, row tags) with explicit values
// and duplicates: 64, 512 and 2048 regions (the most).
TEST_F(WaveBuildDifferential, ManyRegionsHistogramPartitionWithValues) {
  const uint32_t capacity = 1u << 16;
  const size_t rows = 40000;
  const std::vector<uint32_t> keys = KeysWithHotDuplicates(rows, 300);
  const std::vector<uint32_t> values = DistinctValues(rows);
  const BuildOutput cpu = CpuBuild(capacity, keys, values, {});
  for (const WaveOptions o : {WaveOptions{10}, WaveOptions{7}, WaveOptions{5}, Tiles()}) {
    Compare(capacity, keys, values, {}, o, cpu);
    if (HasFatalFailure()) return;
  }
}

// Builds that spill by construction: 4 * region_slots distinct keys whose home
// slots lie in region 0 form one run longer than two regions, so a row of wave
// step 0 reaches the first slot not cleared yet (region 2) and the build is redone
// by the direct insert with row tags; the finalisation must then gather the
// source values, not the partition's. The same crowd in the last region wraps
// through regions 0 and 1 into region 2. Duplicates (with other values) and other
// keys around them; stable multisplit (32 regions), histogram (64 regions; 32
// with the multisplit switched off), each without and with a validity mask.
TEST_F(WaveBuildDifferential, SpilledBuildFallsBackWithValues) {
  const uint32_t capacity = 1u << 12;
  for (const WaveOptions o : {WaveOptions{7}, WaveOptions{6}, WaveOptions{7, false}}) {
    const uint32_t region_slots = 1u << o.region_bits;
    const uint32_t last_region = (capacity >> o.region_bits) - 1;
    for (const uint32_t crowd_region : {0u, last_region}) {
      SCOPED_TRACE("keys crowded into region " + std::to_string(crowd_region));
      std::vector<uint32_t> crowd;
      for (const uint32_t k : DistinctKeys(capacity * 128)) {
        if (gd::HomeSlot(k, capacity) >> o.region_bits == crowd_region) crowd.push_back(k);
        if (crowd.size() == 4 * size_t(region_slots)) break;
      }
      ASSERT_EQ(crowd.size(), 4 * size_t(region_slots));
      // Keys of the crowd may repeat keys of the first part: fine (duplicates too).
      std::vector<uint32_t> keys = DistinctKeys(capacity / 4);
      keys.insert(keys.end(), crowd.begin(), crowd.end());
      for (size_t i = 0; i < crowd.size(); i += 3) keys.push_back(crowd[i]);  // duplicates
      std::shuffle(keys.begin(), keys.end(), rng_);
      const std::vector<uint32_t> values = DistinctValues(keys.size());
      // Region 0's crowd reaches the first slot not cleared yet: a fallback.
      const std::optional<bool> fallback =
          crowd_region == 0 ? std::optional<bool>(true) : std::nullopt;
      Compare(capacity, keys, values, {}, o, CpuBuild(capacity, keys, values, {}), fallback);
      if (HasFatalFailure()) return;
      std::vector<uint32_t> validity(keys.size());
      for (auto& v : validity) v = rng_() % 7 == 0 ? 0u : 1u;
      Compare(capacity, keys, values, validity, o, CpuBuild(capacity, keys, values, validity),
              fallback);
      if (HasFatalFailure()) return;
    }
  }
}

// The first-come steps leave every run's keys in arrival order; the run sort
// (SortTile) must give exactly the CPU's Robin Hood layout: loads 0.5, 0.8 and
// 0.9, runs that wrap past the end of the table, tables of one sort tile (64 and
// 1024 slots, where a wrapped run comes back into the same tile) and of many.
// Ordinary loads of the larger table must not fall back to the direct insert.
TEST_F(WaveBuildDifferential, RunSortGivesTheRobinHoodLayout) {
  for (const uint32_t capacity : {64u, 1024u, 1u << 16}) {
    for (const double load : {0.5, 0.8, 0.9}) {
      SCOPED_TRACE("capacity " + std::to_string(capacity) + ", load " + std::to_string(load));
      const size_t rows = size_t(load * capacity);
      std::vector<uint32_t> keys = DistinctKeys(rows);
      for (size_t i = 0; i < rows / 8; ++i) keys.push_back(keys[rng_() % rows]);  // duplicates
      const std::vector<uint32_t> values = DistinctValues(keys.size());
      const std::optional<bool> fallback =
          capacity == (1u << 16) && load < 0.85 ? std::optional<bool>(false) : std::nullopt;
      const BuildOutput cpu = CpuBuild(capacity, keys, values, {});
      Compare(capacity, keys, values, {}, WaveOptions{}, cpu, fallback);
      if (HasFatalFailure()) return;
      Compare(capacity, keys, values, {}, Tiles(), cpu, fallback);
      if (HasFatalFailure()) return;
      Compare(capacity, keys, values, {}, Tiles(true), cpu, fallback);
      if (HasFatalFailure()) return;
    }
  }
}

// A run reaching more than the sort's extension (1024 slots) past the end of its
// 2048-slot tile cannot be sorted there: 2200 keys homed in slots [1000, 1100)
// of a 2^16-slot table (16 regions of 4096 slots, so no row reaches a wave's
// frontier) make one run from about slot 1000 to 3200. The build must fall back
// to the direct insert and still give the CPU's layout.
TEST_F(WaveBuildDifferential, LongRunPastTheSortExtensionFallsBack) {
  const uint32_t capacity = 1u << 16;
  std::vector<uint32_t> keys;
  for (const uint32_t k : DistinctKeys(size_t(4) << 20)) {
    const uint32_t home = gd::HomeSlot(k, capacity);
    if (home >= 1000 && home < 1100) keys.push_back(k);
    if (keys.size() == 2200) break;
  }
  ASSERT_EQ(keys.size(), 2200u);
  const std::vector<uint32_t> others = DistinctKeys(capacity / 8);
  keys.insert(keys.end(), others.begin(), others.end());
  std::shuffle(keys.begin(), keys.end(), rng_);
  const std::vector<uint32_t> values = DistinctValues(keys.size());
  const BuildOutput cpu = CpuBuild(capacity, keys, values, {});
  Compare(capacity, keys, values, {}, WaveOptions{}, cpu, true);
  // The tile path has no such limit (the tile holds about 2450 rows).
  Compare(capacity, keys, values, {}, Tiles(), cpu, false);
}

// A tile build whose transient buffer cannot be had (here: over
// GPUJOIN_CUDA_PARTITION_MAX_BYTES, which takes the branch of a failed
// allocation) takes the wave path, which needs less: about 12 bytes per row with
// explicit values against 20. The cap lies between the two, and the fallback
// flag is reported, which the direct path would not do.
TEST_F(WaveBuildDifferential, TileBufferOverTheLimitTakesTheWavePath) {
  const uint32_t capacity = 1u << 16;
  const size_t rows = 30000;
  const std::vector<uint32_t> keys = KeysWithHotDuplicates(rows, 100);
  const std::vector<uint32_t> values = DistinctValues(rows);
  const BuildOutput cpu = CpuBuild(capacity, keys, values, {});
  const ScopedEnv cap("GPUJOIN_CUDA_PARTITION_MAX_BYTES", std::to_string(16 * rows).c_str());
  Compare(capacity, keys, values, {}, Tiles(), cpu, false);
}

#else

TEST(WaveBuildDifferential, Skipped) {
  GTEST_SKIP() << "built without the CUDA backend: the device-level wave build tests need it";
}

#endif

}  // namespace
}  // namespace gpujoin::engine
