// CUDA vs CPU differential tests. Every test draws fresh random inputs (the seed
// is printed on failure), poisons the outputs of both backends, runs the same
// graph on each and compares (the index and join suites for both key words:
// uint32, and uint64 with keys above 2^32, pairs that differ only in their high
// 32 bits and 0xffffffff as an ordinary key): exactly wherever the contract is deterministic
// (values, found, pairs and their order, counts, unique/duplicate/invalid
// statistics without overflow, the table layout and every lookup probe count
// without overflow, count/min/max aggregation) and to float tolerance for sum and
// mean.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "backends.hpp"
#include "gpujoin/engine/backend.hpp"
#include "gpujoin/engine/detail/slot_hash.hpp"
#include "gpujoin/engine/graph.hpp"

#if defined(GPUJOIN_HAVE_CUDA)
#include "cuda/graphs/join_graph_cache.hpp"  // engine/src: JoinGraphCounters
#endif

namespace gpujoin::engine {
namespace {

// One index build + lookup scenario on both backends.
struct BuildCase {
  size_t rows;
  uint32_t capacity;
  double duplicate_fraction;  // share of rows repeating an earlier key
  bool explicit_values;
  double empty_key_fraction;  // rows holding kEmptyKey
};

void PrintTo(const BuildCase& c, std::ostream* os) {
  *os << "{rows " << c.rows << ", capacity " << c.capacity << ", duplicates "
      << c.duplicate_fraction << ", "
      << (c.explicit_values ? "explicit values" : "generated values") << ", reserved keys "
      << c.empty_key_fraction << "}";
}

class Differential : public CudaVsCpuTest {
 protected:
  Differential() : CudaVsCpuTest("CUDA-vs-CPU differential tests skipped") {}

  std::vector<uint32_t> RandomU32(size_t n) { return RandomKeys<uint32_t>(n); }

  // `n` random keys of key word K (the reserved key included, rarely).
  template <KeyWord K>
  std::vector<K> RandomKeys(size_t n) {
    std::vector<K> v(n);
    for (auto& x : v) x = K(rng_());
    return v;
  }

  // A key that is almost always absent: random, or for uint64 keys, half the
  // time `near` with other high 32 bits (the low half of a present key).
  template <KeyWord K>
  K MissNear(K near) {
    if constexpr (std::is_same_v<K, uint64_t>) {
      if (rng_() % 2) return near ^ ((rng_() | 1u) << 32);
    }
    return K(rng_());
  }

  // `n` query keys, each a random one of `keys` (a hit) or MissNear a random one
  // (almost always a miss), with even odds.
  template <KeyWord K>
  std::vector<K> HalfHits(const std::vector<K>& keys, size_t n) {
    std::vector<K> q(n);
    for (auto& x : q) {
      const K k = keys[rng_() % keys.size()];
      x = rng_() % 2 ? k : MissNear(k);
    }
    return q;
  }

  std::unique_ptr<HashIndex> NewIndex(Backend& b, uint32_t capacity, uint32_t max_probe = 0,
                                      KeyType key_type = KeyType::kUint32) {
    auto index = b.CreateIndex(HashIndexSpec{capacity, max_probe, key_type});
    EXPECT_TRUE(index.ok()) << index.status();
    return index.ok() ? std::move(*index) : nullptr;
  }
  template <KeyWord K>
  std::unique_ptr<HashIndex> NewIndexOf(Backend& b, uint32_t capacity, uint32_t max_probe = 0) {
    return NewIndex(b, capacity, max_probe, KeyTypeOf<K>());
  }

  void RunOk(Backend& b, const CommandGraph& g) {
    const absl::Status s = b.Run(g);
    ASSERT_TRUE(s.ok()) << BackendKindName(b.Info().kind) << ": " << s;
  }

  // Builds `keys` as one chunk (value = first_value + row) into the CPU index and
  // into the CUDA index.
  template <KeyWord K>
  void BuildBoth(HashIndex& cpu_index, HashIndex& gpu_index, const std::vector<K>& keys,
                 uint32_t first_value = 0) {
    for (auto [b, idx] : {std::pair{cpu_.get(), &cpu_index}, std::pair{cuda_.get(), &gpu_index}}) {
      BuildIndexNodeT<K> node;
      node.index = idx;
      node.keys = Chunked<K>{std::span<const K>(keys)};
      node.first_value = first_value;
      CommandGraph g;
      g.Add(node);
      RunOk(*b, g);
    }
  }

  struct LookupOut {
    std::vector<uint32_t> values;
    std::vector<uint8_t> found;
    std::vector<uint32_t> probes;
    QueryStatistics stats{111, 222, 333, 444};
  };

  // One lookup node into `out` (poisoned first); the Run's status.
  template <KeyWord K>
  absl::Status TryLookup(Backend& b, const HashIndex& index, const Chunked<K>& keys, bool optional,
                         LookupOut& out, uint32_t max_probe = 0) {
    const size_t n = TotalRows(keys);
    out.values.assign(n, kPoison32);
    out.found.assign(optional ? n : 0, kPoison8);
    out.probes.assign(optional ? n : 0, kPoison32);
    LookupNodeT<K> node;
    node.index = &index;
    node.keys = keys;
    node.values = out.values;
    node.found = out.found;
    node.probes = out.probes;
    node.statistics = &out.stats;
    node.max_probe_count = max_probe;
    CommandGraph g;
    g.Add(node);
    return b.Run(g);
  }

  template <KeyWord K>
  LookupOut Lookup(Backend& b, const HashIndex& index, const Chunked<K>& keys, bool optional,
                   uint32_t max_probe = 0) {
    LookupOut out;
    const absl::Status s = TryLookup(b, index, keys, optional, out, max_probe);
    EXPECT_TRUE(s.ok()) << BackendKindName(b.Info().kind) << ": " << s;
    return out;
  }

  // (key, value) pairs of a built table of key word K, sorted by key.
  template <KeyWord K = uint32_t>
  static std::vector<std::pair<K, uint32_t>> Contents(const HashIndex& index) {
    auto snap = index.SnapshotAs<K>();
    EXPECT_TRUE(snap.ok()) << snap.status();
    std::vector<std::pair<K, uint32_t>> m;
    if (!snap.ok()) return m;
    for (size_t i = 0; i < snap->keys.size(); ++i) {
      if (snap->keys[i] != kEmptyKeyOf<K>) m.emplace_back(snap->keys[i], snap->values[i]);
    }
    std::sort(m.begin(), m.end());
    return m;
  }

  // The raw table (keys and values slot by slot): without overflow both backends
  // store the same Robin Hood layout, whatever the insertion order.
  template <KeyWord K = uint32_t>
  static TableSnapshotOf<K> Layout(const HashIndex& index) {
    auto snap = index.SnapshotAs<K>();
    EXPECT_TRUE(snap.ok()) << snap.status();
    return snap.ok() ? *snap : TableSnapshotOf<K>{};
  }
  template <KeyWord K = uint32_t>
  static bool SameLayout(const HashIndex& a, const HashIndex& b) {
    const TableSnapshotOf<K> x = Layout<K>(a), y = Layout<K>(b);
    return x.keys == y.keys && x.values == y.values;
  }

  // Compares a lookup on both backends (indexes built from the same rows without
  // overflow, so with the same layout): values, found, every row's probes and the
  // statistics exact.
  void ExpectSameLookup(const LookupOut& cpu, const LookupOut& gpu, bool optional) {
    ASSERT_EQ(cpu.values.size(), gpu.values.size());
    size_t value_mismatch = 0, probe_mismatch = 0;
    for (size_t i = 0; i < cpu.values.size(); ++i) {
      value_mismatch += cpu.values[i] != gpu.values[i];
      if (!optional) continue;
      ASSERT_EQ(cpu.found[i], gpu.found[i]) << "row " << i << " " << Seed();
      probe_mismatch += cpu.probes[i] != gpu.probes[i];
    }
    EXPECT_EQ(value_mismatch, 0u) << Seed();
    EXPECT_EQ(probe_mismatch, 0u) << Seed();
    EXPECT_EQ(cpu.stats, gpu.stats) << Seed();
    if (optional) {
      uint64_t total = 0, max = 0;
      for (uint32_t p : gpu.probes) {
        total += p;
        max = std::max<uint64_t>(max, p);
      }
      EXPECT_EQ(gpu.stats.total_probes, total) << "probe statistics vs per-row probes";
      EXPECT_EQ(gpu.stats.max_probes, max);
    }
  }

  // One join batch's outputs.
  struct JoinOut {
    std::vector<uint32_t> left, right, probes;
    std::vector<uint8_t> found;
    JoinResult result{999, true, QueryStatistics{1, 2, 3, 4}};
    // Poisoned outputs for `capacity` pairs and, when wanted, `rows` found
    // flags and probe counts.
    void Reset(size_t capacity, size_t rows = 0) {
      left.assign(capacity, kPoison32);
      right.assign(capacity, kPoison32);
      found.assign(rows, kPoison8);
      probes.assign(rows, kPoison32);
    }
  };

  // One join node of one batch into `out` (poisoned first); the Run's status.
  template <KeyWord K>
  static absl::Status TryJoin(Backend& b, const HashIndex& index, const Chunked<K>& keys,
                              std::span<const uint32_t> left_rows, uint32_t first_left,
                              size_t capacity, JoinOut& out) {
    out.Reset(capacity);
    JoinNodeT<K> node;
    node.index = &index;
    node.batches.push_back(
        JoinBatchT<K>{keys, left_rows, first_left, out.left, out.right, &out.result});
    CommandGraph g;
    g.Add(node);
    return b.Run(g);
  }

  // Repeated small join shapes replayed from captured graphs (defined below).
  template <KeyWord K>
  void RepeatedJoinShapes();

  // Compares one join batch on both backends: count, overflow, statistics, the
  // pairs (the stable prefix; the rest untouched), found flags and the probes of
  // missed rows.
  void ExpectSameJoin(const JoinOut& cpu, const JoinOut& gpu, const std::string& what) {
    const std::string where = what + ", " + Seed();
    EXPECT_EQ(gpu.result.count, cpu.result.count) << where;
    EXPECT_EQ(gpu.result.overflow, cpu.result.overflow) << where;
    EXPECT_EQ(gpu.result.statistics.found, cpu.result.statistics.found) << where;
    EXPECT_EQ(gpu.result.statistics.missing, cpu.result.statistics.missing) << where;
    EXPECT_EQ(gpu.left, cpu.left) << where;
    EXPECT_EQ(gpu.right, cpu.right) << where;
    EXPECT_EQ(gpu.found, cpu.found) << where;
    // Both tables have the same layout (no overflow), so every row's probes and
    // the probe statistics are exact.
    EXPECT_EQ(gpu.probes, cpu.probes) << where;
    EXPECT_EQ(gpu.result.statistics.total_probes, cpu.result.statistics.total_probes) << where;
    EXPECT_EQ(gpu.result.statistics.max_probes, cpu.result.statistics.max_probes) << where;
  }

  // Builds the same rows on both backends and compares statistics, contents and
  // lookups of every build key, fresh keys and the reserved key.
  template <KeyWord K>
  void BuildAndCompare(const BuildCase& c) {
    // Keys: distinct base keys, some rows repeat an earlier (or later) key so that
    // duplicates straddle chunk boundaries; some rows hold the reserved key.
    std::vector<K> keys = DistinctKeysOf<K>(c.rows);
    for (size_t i = 0; i < c.rows; ++i) {
      const double u = double(rng_() % 1000000) / 1e6;
      if (u < c.duplicate_fraction && c.rows > 1)
        keys[i] = keys[rng_() % c.rows];
      else if (u < c.duplicate_fraction + c.empty_key_fraction)
        keys[i] = kEmptyKeyOf<K>;
    }
    const std::vector<uint32_t> values = RandomU32(c.rows);
    const uint32_t first_value = uint32_t(rng_());  // may wrap: exercises finalisation
    const Chunked<K> key_chunks = RandomChunks(keys);
    const ChunkedU32 value_chunks = RandomChunks(values);

    auto cpu_index = NewIndexOf<K>(*cpu_, c.capacity);
    auto gpu_index = NewIndexOf<K>(*cuda_, c.capacity);
    ASSERT_TRUE(cpu_index && gpu_index);
    BuildStatistics cpu_stats, gpu_stats{7, 7, 7, 7, 7, 7};
    for (auto [b, idx, st] : {std::tuple{cpu_.get(), cpu_index.get(), &cpu_stats},
                              std::tuple{cuda_.get(), gpu_index.get(), &gpu_stats}}) {
      BuildIndexNodeT<K> node;
      node.index = idx;
      node.keys = key_chunks;
      if (c.explicit_values) node.values = value_chunks;
      node.first_value = first_value;
      node.statistics = st;
      CommandGraph g;
      g.Add(node);
      RunOk(*b, g);
    }
    ASSERT_EQ(cpu_stats.overflow_rows, 0u) << "test case must not overflow";
    EXPECT_EQ(gpu_stats.unique_keys, cpu_stats.unique_keys) << Seed();
    EXPECT_EQ(gpu_stats.duplicate_rows, cpu_stats.duplicate_rows) << Seed();
    EXPECT_EQ(gpu_stats.overflow_rows, 0u) << Seed();
    EXPECT_EQ(gpu_stats.invalid_rows, cpu_stats.invalid_rows) << Seed();
    EXPECT_EQ(gpu_index->build_statistics(), gpu_stats);
    EXPECT_EQ(gpu_index->built_rows(), c.rows);
    // Total probes: every key adds its final displacement + 1 (exact without
    // duplicates); a duplicate row adds where it met its key, which later keys
    // may have moved on (the CPU inserts in row order, the GPU in parallel), so
    // with duplicates the total lies between one probe per duplicate and the
    // duplicate's key's final place.
    {
      const TableSnapshotOf<K> layout = Layout<K>(*cpu_index);
      std::unordered_map<K, uint64_t> place;  // key -> final displacement + 1
      for (uint32_t i = 0; i < c.capacity; ++i) {
        const K k = layout.keys[i];
        if (k != kEmptyKeyOf<K>)
          place[k] = ((i - detail::HomeSlot(k, c.capacity)) & (c.capacity - 1u)) + 1;
      }
      uint64_t keys_total = 0, rows_total = 0;
      for (const auto& [k, p] : place) keys_total += p;
      for (const K k : keys)
        if (k != kEmptyKeyOf<K>) rows_total += place.at(k);
      if (cpu_stats.duplicate_rows == 0) {
        EXPECT_EQ(gpu_stats.total_probes, keys_total) << Seed();
        EXPECT_EQ(cpu_stats.total_probes, keys_total) << Seed();
      } else {
        EXPECT_GE(gpu_stats.total_probes, keys_total + gpu_stats.duplicate_rows) << Seed();
        EXPECT_LE(gpu_stats.total_probes, rows_total) << Seed();
      }
    }
    // The largest displacement + 1 of a stored key: a property of the layout.
    EXPECT_EQ(gpu_stats.max_probes, cpu_stats.max_probes) << Seed();
    EXPECT_EQ(Contents<K>(*gpu_index), Contents<K>(*cpu_index)) << Seed();
    EXPECT_TRUE(SameLayout<K>(*gpu_index, *cpu_index)) << Seed();

    // Queries: every build key (hits), fresh keys (mostly misses; for uint64
    // keys half of them a build key with other high bits), reserved keys.
    std::vector<K> queries = keys;
    for (size_t i = 0; i < c.rows / 2 + 3; ++i)
      queries.push_back(MissNear<K>(c.rows == 0 ? K(1) : keys[rng_() % c.rows]));
    queries.push_back(kEmptyKeyOf<K>);
    std::shuffle(queries.begin(), queries.end(), rng_);
    const Chunked<K> query_chunks = RandomChunks(queries);
    for (bool optional : {true, false}) {
      const LookupOut cpu_out = Lookup(*cpu_, *cpu_index, query_chunks, optional);
      const LookupOut gpu_out = Lookup(*cuda_, *gpu_index, query_chunks, optional);
      ExpectSameLookup(cpu_out, gpu_out, optional);
    }
  }

  // Batch build with validity masks, row bases and duplicates across chunks (the
  // earliest row across chunks must win) on both backends.
  // Explicit values with duplicates and reserved keys, generated values with
  // duplicates, then a batch build: the cases a path that is forced (or falls back)
  // must still get right.
  template <KeyWord K>
  void MixedBuildsCompare() {
    for (const BuildCase& c :
         {BuildCase{1000, 2048, 0.3, true, 0.02}, BuildCase{100003, 1u << 17, 0.4, false, 0.01}}) {
      SCOPED_TRACE(::testing::PrintToString(c));
      BuildAndCompare<K>(c);
      if (::testing::Test::HasFatalFailure()) return;
    }
    BatchBuildCompare<K>();
  }

  template <KeyWord K>
  void BatchBuildCompare() {
    // Chunks with their own row bases, some with validity masks; duplicates across
    // chunks so the earliest row across chunks must win.
    std::vector<std::vector<K>> chunk_keys;
    std::vector<std::vector<uint32_t>> chunk_masks;
    std::vector<K> pool = DistinctKeysOf<K>(4000);
    const int chunks = 6;
    for (int c = 0; c < chunks; ++c) {
      const size_t n = c == 2 ? 0 : 500 + rng_() % 1500;  // chunk 2 is empty
      std::vector<K> k(n);
      std::vector<uint32_t> m;
      for (auto& x : k) x = (rng_() % 50 == 0) ? kEmptyKeyOf<K> : pool[rng_() % pool.size()];
      if (c % 2 == 1) {
        m.resize(n);
        for (auto& x : m) x = (rng_() % 4 == 0) ? 0u : uint32_t(rng_() | 1u);
      }
      chunk_keys.push_back(std::move(k));
      chunk_masks.push_back(std::move(m));
    }
    std::vector<BatchChunkT<K>> batch;
    for (int c = 0; c < chunks; ++c) {
      batch.push_back(BatchChunkT<K>{chunk_keys[c], uint32_t(rng_()), chunk_masks[c]});
    }
    auto cpu_index = NewIndexOf<K>(*cpu_, 1u << 14);
    auto gpu_index = NewIndexOf<K>(*cuda_, 1u << 14);
    BuildStatistics cpu_stats, gpu_stats;
    for (auto [b, idx, st] : {std::tuple{cpu_.get(), cpu_index.get(), &cpu_stats},
                              std::tuple{cuda_.get(), gpu_index.get(), &gpu_stats}}) {
      BuildBatchIndexNodeT<K> node;
      node.index = idx;
      node.chunks = batch;
      node.statistics = st;
      CommandGraph g;
      g.Add(node);
      RunOk(*b, g);
    }
    EXPECT_EQ(gpu_stats.unique_keys, cpu_stats.unique_keys) << Seed();
    EXPECT_EQ(gpu_stats.duplicate_rows, cpu_stats.duplicate_rows) << Seed();
    EXPECT_EQ(gpu_stats.invalid_rows, cpu_stats.invalid_rows) << Seed();
    EXPECT_EQ(gpu_stats.overflow_rows, 0u);
    EXPECT_EQ(Contents<K>(*gpu_index), Contents<K>(*cpu_index)) << Seed();
    EXPECT_TRUE(SameLayout<K>(*gpu_index, *cpu_index)) << Seed();
  }

  // A small bound and a nearly full table force overflow. The retained subset may
  // differ from the CPU's, but counts add up, and every retained key holds the value
  // of its lowest source row; a join against the index reports overflow.
  template <KeyWord K>
  void OverflowCheck() {
    // A small bound and a nearly full table force overflow. The retained subset may
    // differ from the CPU's, but counts add up, and every retained key holds the value
    // of its lowest source row.
    const uint32_t capacity = 1u << 12;
    std::vector<K> keys = DistinctKeysOf<K>(6000);
    for (size_t i = 0; i < keys.size(); i += 7) keys[i] = keys[(i * 13) % keys.size()];
    const std::vector<uint32_t> values = RandomU32(keys.size());
    auto gpu_index = NewIndexOf<K>(*cuda_, capacity, 8);
    BuildStatistics stats;
    BuildIndexNodeT<K> node;
    node.index = gpu_index.get();
    node.keys = RandomChunks(keys);
    node.values = RandomChunks(values);
    node.statistics = &stats;
    CommandGraph g;
    g.Add(node);
    RunOk(*cuda_, g);
    EXPECT_GT(stats.overflow_rows, 0u);
    EXPECT_EQ(stats.unique_keys + stats.duplicate_rows + stats.overflow_rows + stats.invalid_rows,
              keys.size());
    EXPECT_LE(stats.max_probes, 8u);
    std::unordered_map<K, uint32_t> lowest;
    for (size_t i = 0; i < keys.size(); ++i) lowest.emplace(keys[i], values[i]);
    const auto contents = Contents<K>(*gpu_index);
    EXPECT_EQ(contents.size(), stats.unique_keys);
    for (const auto& [k, v] : contents) EXPECT_EQ(v, lowest.at(k)) << "key " << k << " " << Seed();

    // A join against an overflowed index reports overflow even when the pairs fit.
    const std::vector<K> left = {keys[1], keys[2]};
    std::vector<uint32_t> out_l(8, kPoison32), out_r(8, kPoison32);
    JoinResult result;
    JoinNodeT<K> join;
    join.index = gpu_index.get();
    join.batches.push_back(
        JoinBatchT<K>{Chunked<K>{std::span(left)}, {}, 0, out_l, out_r, &result});
    CommandGraph jg;
    jg.Add(join);
    RunOk(*cuda_, jg);
    EXPECT_TRUE(result.overflow);
  }

  // A lookup bound below the build's: both backends hold the same layout, so
  // misses and hits (a key placed further from home than the bound is cut off)
  // compare exactly with the CPU; hits are also checked against the rows built.
  template <KeyWord K>
  void BoundOverrideCompare() {
    const uint32_t capacity = 1u << 16;
    const std::vector<K> keys = DistinctKeysOf<K>(size_t(capacity * 0.85));
    auto cpu_index = NewIndexOf<K>(*cpu_, capacity);
    auto gpu_index = NewIndexOf<K>(*cuda_, capacity);
    BuildBoth(*cpu_index, *gpu_index, keys);
    const std::unordered_set<K> present(keys.begin(), keys.end());
    std::vector<K> misses;
    while (misses.size() < 50000) {
      const K k = MissNear<K>(keys[rng_() % keys.size()]);
      if (!present.count(k)) misses.push_back(k);  // the reserved key included: also a miss
    }
    std::unordered_map<K, uint32_t> row_of;
    for (size_t i = 0; i < keys.size(); ++i) row_of.emplace(keys[i], uint32_t(i));
    std::vector<K> hits(20000);
    for (auto& k : hits) k = keys[rng_() % keys.size()];
    for (uint32_t bound : {1u, 3u, 17u}) {
      const LookupOut cpu_out = Lookup(*cpu_, *cpu_index, RandomChunks(misses), true, bound);
      const LookupOut gpu_out = Lookup(*cuda_, *gpu_index, RandomChunks(misses), true, bound);
      ExpectSameLookup(cpu_out, gpu_out, true);
      EXPECT_EQ(gpu_out.stats.found, 0u) << Seed();
      EXPECT_LE(gpu_out.stats.max_probes, bound);

      const LookupOut hit_out = Lookup(*cuda_, *gpu_index, RandomChunks(hits), true, bound);
      ExpectSameLookup(Lookup(*cpu_, *cpu_index, RandomChunks(hits), true, bound), hit_out, true);
      size_t wrong = 0, over = 0, found = 0;
      for (size_t i = 0; i < hits.size(); ++i) {
        over += hit_out.probes[i] > bound || hit_out.probes[i] == 0;
        if (hit_out.found[i] == 1) {
          ++found;
          wrong += hit_out.values[i] != row_of.at(hits[i]);
        } else {
          wrong += hit_out.found[i] != 0 || hit_out.values[i] != kEmptyKey;
        }
      }
      EXPECT_EQ(wrong, 0u) << "bound " << bound << " " << Seed();
      EXPECT_EQ(over, 0u) << "bound " << bound << " " << Seed();
      EXPECT_EQ(hit_out.stats.found, found);
      EXPECT_LE(hit_out.stats.max_probes, bound);
      if (bound == 17u) EXPECT_GT(found, hits.size() / 2) << Seed();  // most runs are short
    }
  }
};

// The suites below that take a KeyType run for both key words.
class KeyedDifferential : public Differential, public ::testing::WithParamInterface<KeyType> {};

TEST_P(KeyedDifferential, BatchBuildWithMasksAndRowBasesMatchesCpu) {
  ForKeyType(GetParam(), [&]<KeyWord K>() { BatchBuildCompare<K>(); });
}

TEST_P(KeyedDifferential, OverflowKeepsLowestRowPerRetainedKeyAndPropagatesToJoin) {
  ForKeyType(GetParam(), [&]<KeyWord K>() { OverflowCheck<K>(); });
}

TEST_P(KeyedDifferential, LookupWithProbeBoundOverrideMatchesCpu) {
  ForKeyType(GetParam(), [&]<KeyWord K>() { BoundOverrideCompare<K>(); });
}

INSTANTIATE_TEST_SUITE_P(KeyTypes, KeyedDifferential,
                         ::testing::Values(KeyType::kUint32, KeyType::kUint64),
                         [](const ::testing::TestParamInfo<KeyType>& info) {
                           return KeyTypeTag(info.param);
                         });

// Each build path forced on small inputs, against the CPU (the tile path is the
// default only for large builds: tables >= 128 MiB, >= 2^22 rows; the direct
// path for the rest). The tile path sorts the rows by 2048-slot tile, lays each
// tile out in shared memory and carries runs across tiles; its fallback to the
// direct insert (a tile of more than 2560 keys, a full table, a key past the
// bound) is exercised by the full and nearly full tables and the overflow case.
// Cases: duplicates across chunks, explicit values, generated values with and
// without wrap-around, reserved keys, a full table, batch builds with masks,
// overflow, and lookups with a bound override.
class ForcedPathDifferential
    : public Differential,
      public ::testing::WithParamInterface<std::tuple<CudaBuildPath, KeyType>> {
 protected:
  void SetUp() override {
    cuda_options_.cuda_build_path = std::get<0>(GetParam());
    Differential::SetUp();
  }
  KeyType key_type() const { return std::get<1>(GetParam()); }

  template <KeyWord K>
  void ForcedBuilds() {
    for (const BuildCase& c :
         {BuildCase{1, 1, 0.0, false, 0.0}, BuildCase{1, 8, 0.0, true, 0.0},
          BuildCase{1000, 2048, 0.3, true, 0.02}, BuildCase{1000, 2048, 0.3, false, 0.02},
          BuildCase{1000, 1024, 0.0, false, 0.0}, BuildCase{100003, 1u << 17, 0.4, true, 0.01},
          BuildCase{100003, 1u << 17, 0.4, false, 0.01},
          BuildCase{943718, 1u << 20, 0.0, true, 0.0},
          BuildCase{300000, 1u << 20, 0.2, true, 0.0}}) {
      SCOPED_TRACE(::testing::PrintToString(c));
      BuildAndCompare<K>(c);
      if (HasFatalFailure()) return;
    }
  }

  // first_value 0: generated values grow with the row, so the tile and direct
  // paths store them directly (no finalisation).
  template <KeyWord K>
  void GeneratedRowIds() {
    std::vector<K> keys = DistinctKeysOf<K>(50000);
    for (size_t i = 0; i < keys.size(); i += 3) keys[i] = keys[rng_() % keys.size()];
    auto cpu_index = NewIndexOf<K>(*cpu_, 1u << 17);
    auto gpu_index = NewIndexOf<K>(*cuda_, 1u << 17);
    BuildStatistics cpu_stats, gpu_stats;
    for (auto [b, idx, st] : {std::tuple{cpu_.get(), cpu_index.get(), &cpu_stats},
                              std::tuple{cuda_.get(), gpu_index.get(), &gpu_stats}}) {
      BuildIndexNodeT<K> node;
      node.index = idx;
      node.keys = RandomChunks(keys);
      node.first_value = 0;
      node.statistics = st;
      CommandGraph g;
      g.Add(node);
      RunOk(*b, g);
    }
    EXPECT_EQ(gpu_stats.unique_keys, cpu_stats.unique_keys) << Seed();
    EXPECT_EQ(gpu_stats.duplicate_rows, cpu_stats.duplicate_rows) << Seed();
    EXPECT_EQ(gpu_stats.invalid_rows, cpu_stats.invalid_rows) << Seed();
    EXPECT_EQ(Contents<K>(*gpu_index), Contents<K>(*cpu_index)) << Seed();
    EXPECT_TRUE(SameLayout<K>(*gpu_index, *cpu_index)) << Seed();
  }
};

TEST_P(ForcedPathDifferential, BuildMatchesCpu) {
  ForKeyType(key_type(), [&]<KeyWord K>() { ForcedBuilds<K>(); });
}

TEST_P(ForcedPathDifferential, GeneratedRowIdsMatchCpu) {
  ForKeyType(key_type(), [&]<KeyWord K>() { GeneratedRowIds<K>(); });
}

TEST_P(ForcedPathDifferential, BatchBuildMatchesCpu) {
  ForKeyType(key_type(), [&]<KeyWord K>() { BatchBuildCompare<K>(); });
}

TEST_P(ForcedPathDifferential, OverflowKeepsLowestRow) {
  ForKeyType(key_type(), [&]<KeyWord K>() { OverflowCheck<K>(); });
}

TEST_P(ForcedPathDifferential, LookupWithProbeBoundOverride) {
  ForKeyType(key_type(), [&]<KeyWord K>() { BoundOverrideCompare<K>(); });
}

INSTANTIATE_TEST_SUITE_P(
    Paths, ForcedPathDifferential,
    ::testing::Combine(::testing::Values(CudaBuildPath::kDirect, CudaBuildPath::kTiles),
                       ::testing::Values(KeyType::kUint32, KeyType::kUint64)),
    [](const ::testing::TestParamInfo<std::tuple<CudaBuildPath, KeyType>>& info) {
      return std::string(std::get<0>(info.param) == CudaBuildPath::kTiles ? "tiles" : "direct") +
             "_" + KeyTypeTag(std::get<1>(info.param));
    });

// A tile build whose transient buffer cannot be had (here: over
// BackendOptions::cuda_build_transient_max_bytes, which takes the same branch as
// a failed allocation) clears the table and takes the direct path: same results.
class TransientCapDifferential : public Differential {
 protected:
  void SetUp() override {
    cuda_options_.cuda_build_path = CudaBuildPath::kTiles;
    cuda_options_.cuda_build_transient_max_bytes = 1;
    Differential::SetUp();
  }
};

TEST_F(TransientCapDifferential, BufferOverLimitFallsBackToDirect) {
  MixedBuildsCompare<uint32_t>();
  if (HasFatalFailure()) return;
  MixedBuildsCompare<uint64_t>();
}

class BuildLookupDifferential
    : public Differential,
      public ::testing::WithParamInterface<std::tuple<KeyType, BuildCase>> {};

TEST_P(BuildLookupDifferential, TableStatisticsAndLookupsMatchCpu) {
  ForKeyType(std::get<0>(GetParam()),
             [&]<KeyWord K>() { BuildAndCompare<K>(std::get<1>(GetParam())); });
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, BuildLookupDifferential,
    ::testing::Combine(
        ::testing::Values(KeyType::kUint32, KeyType::kUint64),
        ::testing::Values(BuildCase{0, 16, 0.0, true, 0.0},        // empty build
                          BuildCase{1, 1, 0.0, false, 0.0},        // one row, one slot
                          BuildCase{1, 8, 0.0, true, 0.0},         // one row
                          BuildCase{1000, 2048, 0.3, true, 0.02},  // not a block multiple
                          BuildCase{1000, 1024, 0.0, false, 0.0},  // load ~0.98 (no bound)
                          BuildCase{300007, 1u << 19, 0.25, true, 0.01},
                          BuildCase{943718, 1u << 20, 0.0, true, 0.0},             // load 0.9
                          BuildCase{(1u << 24) + 3, 1u << 25, 0.1, false, 0.001},  // > 2^24 rows
                          BuildCase{(1u << 24) + 5, 1u << 25, 0.05, true, 0.0})),
    [](const ::testing::TestParamInfo<std::tuple<KeyType, BuildCase>>& info) {
      const BuildCase& c = std::get<1>(info.param);
      return KeyTypeTag(std::get<0>(info.param)) + "_rows" + std::to_string(c.rows) + "_cap" +
             std::to_string(c.capacity) + (c.explicit_values ? "_values" : "_generated");
    });

TEST_P(KeyedDifferential, RepeatedLookupShapeReplaysCapturedGraphCorrectly) {
  // The same shape three times (capture on the second, replay on the third) with
  // fresh keys each time; then a rebuild of the same index is seen by a replay.
  ForKeyType(GetParam(), [&]<KeyWord K>() {
    const uint32_t capacity = 1u << 12;
    std::vector<K> keys = DistinctKeysOf<K>(3000);
    auto cpu_index = NewIndexOf<K>(*cpu_, capacity);
    auto gpu_index = NewIndexOf<K>(*cuda_, capacity);
    BuildBoth(*cpu_index, *gpu_index, keys, 100);
    for (int round = 0; round < 5; ++round) {
      if (round == 3) {
        keys = DistinctKeysOf<K>(3000);
        BuildBoth(*cpu_index, *gpu_index, keys, 7);
      }
      const std::vector<K> q = HalfHits(keys, 2000);
      const LookupOut cpu_out = Lookup(*cpu_, *cpu_index, Chunked<K>{std::span(q)}, true);
      const LookupOut gpu_out = Lookup(*cuda_, *gpu_index, RandomChunks(q), true);
      ExpectSameLookup(cpu_out, gpu_out, true);
    }
  });
}

struct JoinCase {
  size_t left_rows;
  size_t capacity;  // pair capacity
  bool explicit_left_rows;
  int batches;
  bool without_found_probes = false;  // join without the optional found/probes outputs
};

void PrintTo(const JoinCase& c, std::ostream* os) {
  *os << "{left rows " << c.left_rows << ", pair capacity " << c.capacity << ", "
      << (c.explicit_left_rows ? "explicit" : "generated") << " left rows, batches " << c.batches
      << (c.without_found_probes ? ", no found/probes" : "") << "}";
}

class JoinDifferential : public Differential,
                         public ::testing::WithParamInterface<std::tuple<KeyType, JoinCase>> {
 protected:
  template <KeyWord K>
  void PairsOrderCountsAndOverflow(const JoinCase& c);
};

TEST_P(JoinDifferential, PairsOrderCountsAndOverflowMatchCpu) {
  ForKeyType(std::get<0>(GetParam()),
             [&]<KeyWord K>() { PairsOrderCountsAndOverflow<K>(std::get<1>(GetParam())); });
}

template <KeyWord K>
void JoinDifferential::PairsOrderCountsAndOverflow(const JoinCase& c) {
  const std::vector<K> right = DistinctKeysOf<K>(20000);
  auto cpu_index = NewIndexOf<K>(*cpu_, 1u << 16);
  auto gpu_index = NewIndexOf<K>(*cuda_, 1u << 16);
  BuildBoth(*cpu_index, *gpu_index, right, 1000);
  struct Batch {
    std::vector<uint32_t> left_rows, out_l, out_r, probes;
    std::vector<uint8_t> found;
    JoinResult result;
  };
  auto make_batches = [&]() {
    std::vector<Batch> bs(size_t(c.batches));
    return bs;
  };
  std::vector<Batch> cpu_b = make_batches(), gpu_b = make_batches();
  std::vector<std::vector<K>> left_keys(size_t(c.batches));
  std::vector<std::vector<uint32_t>> left_ids(size_t(c.batches));
  for (int k = 0; k < c.batches; ++k) {
    auto& lk = left_keys[size_t(k)];
    lk.resize(c.left_rows);
    for (auto& x : lk) {
      const uint32_t r = uint32_t(rng_() % 10);
      const K hit = right[rng_() % right.size()];
      x = r < 5 ? hit : (r < 9 ? MissNear<K>(hit) : kEmptyKeyOf<K>);
    }
    left_ids[size_t(k)] = RandomU32(c.explicit_left_rows ? c.left_rows : 0);
  }
  const uint32_t first_left = uint32_t(rng_());
  for (auto [b, idx, bs] : {std::tuple{cpu_.get(), cpu_index.get(), &cpu_b},
                            std::tuple{cuda_.get(), gpu_index.get(), &gpu_b}}) {
    JoinNodeT<K> node;
    node.index = idx;
    for (int k = 0; k < c.batches; ++k) {
      Batch& bt = (*bs)[size_t(k)];
      bt.out_l.assign(c.capacity, kPoison32);
      bt.out_r.assign(c.capacity, kPoison32);
      bt.found.assign(c.without_found_probes ? 0 : c.left_rows, kPoison8);
      bt.probes.assign(c.without_found_probes ? 0 : c.left_rows, kPoison32);
      bt.result = JoinResult{999, true, QueryStatistics{1, 2, 3, 4}};
      node.batches.push_back(JoinBatchT<K>{RandomChunks(left_keys[size_t(k)]), left_ids[size_t(k)],
                                           first_left, bt.out_l, bt.out_r, &bt.result, bt.found,
                                           bt.probes});
    }
    CommandGraph g;
    g.Add(node);
    RunOk(*b, g);
  }
  for (int k = 0; k < c.batches; ++k) {
    const Batch& x = cpu_b[size_t(k)];
    const Batch& y = gpu_b[size_t(k)];
    EXPECT_EQ(y.result.count, x.result.count) << "batch " << k << " " << Seed();
    EXPECT_EQ(y.result.overflow, x.result.overflow) << "batch " << k;
    EXPECT_EQ(y.result.statistics.found, x.result.statistics.found);
    EXPECT_EQ(y.result.statistics.missing, x.result.statistics.missing);
    EXPECT_EQ(y.found, x.found) << "batch " << k << " " << Seed();
    // Pairs: the stable prefix, exactly; slots past the written prefix untouched.
    EXPECT_EQ(y.out_l, x.out_l) << "batch " << k << " " << Seed();
    EXPECT_EQ(y.out_r, x.out_r) << "batch " << k << " " << Seed();
    // Same layout on both backends: every row's probes and the probe statistics
    // are exact.
    EXPECT_EQ(y.probes, x.probes) << "batch " << k << " " << Seed();
    EXPECT_EQ(y.result.statistics.total_probes, x.result.statistics.total_probes) << "batch " << k;
    EXPECT_EQ(y.result.statistics.max_probes, x.result.statistics.max_probes) << "batch " << k;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, JoinDifferential,
    ::testing::Combine(
        ::testing::Values(KeyType::kUint32, KeyType::kUint64),
        ::testing::Values(JoinCase{0, 4, false, 1}, JoinCase{1, 1, false, 1},
                          JoinCase{1000, 2000, false, 1},       // room for all pairs
                          JoinCase{5000, 100, true, 1},         // truncated: stable prefix
                          JoinCase{70001, 70001, true, 3},      // several tiles, batches
                          JoinCase{70001, 0, false, 2},         // zero capacity: count only
                          JoinCase{3000, 3000, true, 2, true},  // pairs only (gathered download)
                          // Results larger than one staging buffer: count first, then pairs.
                          JoinCase{700001, 700001, true, 1},
                          JoinCase{1500000, 200000, false, 1},  // ... truncated
                          JoinCase{1200000, 1200000, true, 1, true},
                          // The compaction works on 32-row groups, 128 rows per warp:
                          // whole warps, one row past a group, truncation inside one.
                          JoinCase{4096, 4096, false, 2}, JoinCase{33, 7, true, 1},
                          JoinCase{129, 40, false, 1, true},
                          JoinCase{(size_t{1} << 24) + 77, size_t{1} << 23, false, 1, true})),
    [](const ::testing::TestParamInfo<std::tuple<KeyType, JoinCase>>& info) {
      const JoinCase& c = std::get<1>(info.param);
      return KeyTypeTag(std::get<0>(info.param)) + "_left" + std::to_string(c.left_rows) + "_cap" +
             std::to_string(c.capacity) + "_batches" + std::to_string(c.batches) +
             (c.explicit_left_rows ? "_ids" : "") + (c.without_found_probes ? "_pairs_only" : "");
    });

// Repeated small join shapes: the CUDA backend captures each shape on its second
// sight on a stream context and replays the graph afterwards. Inputs change on
// every run (keys, explicit left rows, the generated left row base), four shapes
// alternate so the cache holds several graphs, outputs are truncated or overflow,
// found/probes are on or off; then the same shape runs against a second index of
// the same capacity (another table: must not replay the first one's graph) and
// against the first index rebuilt in place. Every result equals the CPU backend.
TEST_P(KeyedDifferential, RepeatedJoinShapesReplayCapturedGraphsLikeCpu) {
  ForKeyType(GetParam(), [&]<KeyWord K>() { RepeatedJoinShapes<K>(); });
}

template <KeyWord K>
void Differential::RepeatedJoinShapes() {
  constexpr uint32_t kCapacity = 1u << 16;
  std::vector<K> right_a = DistinctKeysOf<K>(20000);
  const std::vector<K> right_b = DistinctKeysOf<K>(15000);
  auto cpu_a = NewIndexOf<K>(*cpu_, kCapacity), gpu_a = NewIndexOf<K>(*cuda_, kCapacity);
  auto cpu_b = NewIndexOf<K>(*cpu_, kCapacity), gpu_b = NewIndexOf<K>(*cuda_, kCapacity);
  ASSERT_TRUE(cpu_a && gpu_a && cpu_b && gpu_b);
  BuildBoth(*cpu_a, *gpu_a, right_a, 1000);
  BuildBoth(*cpu_b, *gpu_b, right_b, 5);

  struct Shape {
    size_t rows;
    size_t capacity;  // pair capacity
    bool explicit_left_rows;
    bool found_probes;
    int batches;
  };
  const Shape shapes[] = {
      {1000, 2000, false, true, 1},  // room for all pairs, generated left rows
      {1000, 100, true, false, 1},   // truncated (overflow), explicit left rows
      {3000, 3000, true, true, 2},   // two batches of one shape in one node
      {2500, 0, false, false, 1},    // zero capacity: count only
  };
  // One join node of `shape` on both backends with fresh inputs; results compared.
  auto join_and_compare = [&](const Shape& shape, const HashIndex& cpu_index,
                              const HashIndex& gpu_index, const std::vector<K>& right,
                              const std::string& what) {
    const size_t nb = size_t(shape.batches);
    std::vector<std::vector<K>> keys(nb);
    std::vector<std::vector<uint32_t>> ids(nb);
    for (size_t k = 0; k < nb; ++k) {
      keys[k].resize(shape.rows);
      for (auto& x : keys[k]) {
        const uint32_t r = uint32_t(rng_() % 10);
        const K hit = right[rng_() % right.size()];
        x = r < 6 ? hit : (r < 9 ? MissNear<K>(hit) : kEmptyKeyOf<K>);
      }
      ids[k] = RandomU32(shape.explicit_left_rows ? shape.rows : 0);
    }
    const uint32_t first_left = uint32_t(rng_());
    std::vector<JoinOut> cpu_out(nb), gpu_out(nb);
    for (auto [b, idx, outs] : {std::tuple{cpu_.get(), &cpu_index, &cpu_out},
                                std::tuple{cuda_.get(), &gpu_index, &gpu_out}}) {
      JoinNodeT<K> node;
      node.index = idx;
      for (size_t k = 0; k < nb; ++k) {
        JoinOut& o = (*outs)[k];
        o.Reset(shape.capacity, shape.found_probes ? shape.rows : 0);
        node.batches.push_back(JoinBatchT<K>{RandomChunks(keys[k]), ids[k],
                                             first_left + uint32_t(k) * 7919u, o.left, o.right,
                                             &o.result, o.found, o.probes});
      }
      CommandGraph g;
      g.Add(node);
      RunOk(*b, g);
    }
    for (size_t k = 0; k < nb; ++k)
      ExpectSameJoin(cpu_out[k], gpu_out[k], what + ", batch " + std::to_string(k));
  };

#if defined(GPUJOIN_HAVE_CUDA)
  const detail::JoinGraphTotals before = detail::JoinGraphCounters();
#endif
  constexpr int kRounds = 6;
  for (int round = 0; round < kRounds; ++round) {
    for (size_t s = 0; s < std::size(shapes); ++s) {
      join_and_compare(shapes[s], *cpu_a, *gpu_a, right_a,
                       "round " + std::to_string(round) + ", shape " + std::to_string(s));
    }
  }
#if defined(GPUJOIN_HAVE_CUDA)
  const detail::JoinGraphTotals after = detail::JoinGraphCounters();
  EXPECT_EQ(after.capture_failures, before.capture_failures) << "a join graph capture failed";
  if (cuda_options_.cuda_join_graphs) {
    // Sequential Runs reuse one stream context: each shape is seen in round 0,
    // captured in round 1 (its second batch in a node already replays) and
    // replayed from round 2 on.
    EXPECT_GE(after.captures - before.captures, std::size(shapes));
    EXPECT_GE(after.replays - before.replays, std::size(shapes) * (kRounds - 2));
  } else {
    EXPECT_EQ(after.captures, before.captures) << "cuda_join_graphs = false captured a graph";
  }
#endif
  // Another index of the same capacity (a different table), alternating with the
  // first: each join must read its own table.
  for (int round = 0; round < 3; ++round) {
    join_and_compare(shapes[0], *cpu_b, *gpu_b, right_b, "index b, round " + std::to_string(round));
    join_and_compare(shapes[0], *cpu_a, *gpu_a, right_a, "index a, round " + std::to_string(round));
  }
  // The first index rebuilt in place (same table memory, new contents): replays
  // see the new contents.
  right_a = DistinctKeysOf<K>(18000);
  BuildBoth(*cpu_a, *gpu_a, right_a, 31);
  for (int round = 0; round < 2; ++round) {
    for (const Shape& shape : shapes) {
      join_and_compare(shape, *cpu_a, *gpu_a, right_a,
                       "rebuilt index a, round " + std::to_string(round));
    }
  }
}

TEST_F(Differential, ConcurrentRunsOnSeparateStreamsMatchCpu) {
  // Several threads look up and aggregate at once against one shared, built index:
  // each Run gets its own stream context; results must equal the CPU's.
  const std::vector<uint32_t> keys = DistinctKeys(50000);
  auto cpu_index = NewIndex(*cpu_, 1u << 17);
  auto gpu_index = NewIndex(*cuda_, 1u << 17);
  BuildBoth(*cpu_index, *gpu_index, keys, 5);
  constexpr int kThreads = 4;
  constexpr int kRounds = 6;
  std::vector<std::vector<uint32_t>> queries(kThreads * kRounds);
  for (auto& q : queries) q = HalfHits(keys, 7000 + rng_() % 5000);
  std::vector<LookupOut> expected;
  for (const auto& q : queries)
    expected.push_back(Lookup(*cpu_, *cpu_index, ChunkedU32{std::span(q)}, true));
  std::vector<LookupOut> got(queries.size());
  std::vector<absl::Status> status(queries.size());
  OnThreads(kThreads, kRounds, [&](size_t k) {
    status[k] = TryLookup(*cuda_, *gpu_index, ChunkedU32{std::span(queries[k])}, true, got[k]);
  });
  for (size_t k = 0; k < queries.size(); ++k) {
    ASSERT_TRUE(status[k].ok()) << "run " << k << ": " << status[k];
    ExpectSameLookup(expected[k], got[k], true);
  }
}

TEST_F(Differential, ManyConcurrentSmallJoinsMatchCpu) {
  // More concurrent Runs than the old 16-context pool and than most hosts' cores:
  // each small join takes the one-wait gathered download on its own stream, with
  // blocking waits; pairs, counts and statistics must equal the CPU's.
  const std::vector<uint32_t> right = DistinctKeys(30000);
  auto cpu_index = NewIndex(*cpu_, 1u << 16);
  auto gpu_index = NewIndex(*cuda_, 1u << 16);
  BuildBoth(*cpu_index, *gpu_index, right, 77);
  constexpr int kThreads = 40;
  constexpr int kRounds = 5;
  std::vector<std::vector<uint32_t>> queries(kThreads * kRounds);
  std::vector<size_t> capacity(queries.size());
  for (size_t k = 0; k < queries.size(); ++k) {
    queries[k] = HalfHits(right, 1000 + rng_() % 200);
    capacity[k] = k % 3 == 0 ? 300 : queries[k].size();  // some truncated
  }
  auto join = [&](Backend& b, const HashIndex& index, size_t k, JoinOut& out) {
    return TryJoin(b, index, ChunkedU32{std::span(queries[k])}, {}, uint32_t(k) << 12, capacity[k],
                   out);
  };
  std::vector<JoinOut> expected(queries.size()), got(queries.size());
  for (size_t k = 0; k < queries.size(); ++k)
    ASSERT_TRUE(join(*cpu_, *cpu_index, k, expected[k]).ok());
  std::vector<absl::Status> status(queries.size());
  OnThreads(kThreads, kRounds, [&](size_t k) { status[k] = join(*cuda_, *gpu_index, k, got[k]); });
  for (size_t k = 0; k < queries.size(); ++k) {
    ASSERT_TRUE(status[k].ok()) << "run " << k << ": " << status[k];
    ExpectSameJoin(expected[k], got[k], "run " + std::to_string(k));
  }
}

TEST_F(Differential, ConcurrentRepeatedJoinShapesCaptureAndReplayLikeCpu) {
  // Several threads join batches of two fixed shapes (generated and explicit left
  // rows) at once: each stream context captures its graphs while others launch,
  // replay or capture theirs. Every result equals the CPU's; no capture fails.
  const std::vector<uint32_t> right = DistinctKeys(30000);
  auto cpu_index = NewIndex(*cpu_, 1u << 16);
  auto gpu_index = NewIndex(*cuda_, 1u << 16);
  BuildBoth(*cpu_index, *gpu_index, right, 3);
  constexpr int kThreads = 8;
  constexpr int kRounds = 12;
  constexpr size_t kRows = 1024;
  const size_t runs = size_t(kThreads) * kRounds;
  std::vector<std::vector<uint32_t>> keys(runs), ids(runs);
  for (size_t k = 0; k < runs; ++k) {
    keys[k] = HalfHits(right, kRows);
    if (k % 2 == 1) ids[k] = RandomU32(kRows);  // odd runs: explicit left rows
  }
  auto join = [&](Backend& b, const HashIndex& index, size_t k, JoinOut& out) {
    const size_t capacity = k % 2 == 1 ? 200 : kRows;  // explicit ones truncated
    return TryJoin(b, index, ChunkedU32{std::span(keys[k])}, ids[k], uint32_t(k) * 100003u,
                   capacity, out);
  };
  std::vector<JoinOut> expected(runs), got(runs);
  for (size_t k = 0; k < runs; ++k) ASSERT_TRUE(join(*cpu_, *cpu_index, k, expected[k]).ok());
#if defined(GPUJOIN_HAVE_CUDA)
  const detail::JoinGraphTotals before = detail::JoinGraphCounters();
#endif
  std::vector<absl::Status> status(runs);
  OnThreads(kThreads, kRounds, [&](size_t k) { status[k] = join(*cuda_, *gpu_index, k, got[k]); });
#if defined(GPUJOIN_HAVE_CUDA)
  EXPECT_EQ(detail::JoinGraphCounters().capture_failures, before.capture_failures)
      << "a join graph capture failed";
#endif
  for (size_t k = 0; k < runs; ++k) {
    ASSERT_TRUE(status[k].ok()) << "run " << k << ": " << status[k];
    ExpectSameJoin(expected[k], got[k], "run " + std::to_string(k));
  }
}

TEST_F(Differential, IndexFromOtherBackendIsRejected) {
  auto cpu_index = NewIndex(*cpu_, 16);
  const std::vector<uint32_t> keys = {1, 2, 3};
  BuildIndexNode node;
  node.index = cpu_index.get();
  node.keys = ChunkedU32{std::span(keys)};
  CommandGraph g;
  g.Add(node);
  const absl::Status s = cuda_->Run(g);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_TRUE(cuda_->Healthy());
}

TEST_F(Differential, InfoDescribesTheDevice) {
  const BackendInfo info = cuda_->Info();
  EXPECT_EQ(info.kind, BackendKind::kCuda);
  EXPECT_FALSE(info.device_name.empty());
  EXPECT_GT(info.memory_total_bytes, 0u);
  EXPECT_GT(info.parallelism, 0u);
}

TEST_F(Differential, OversizedIndexIsResourceExhaustedAndBackendStaysHealthy) {
  // 2^31 slots of 8 bytes = 16 GiB fit an H200; ask for more than the device has
  // by holding several.
  std::vector<std::unique_ptr<HashIndex>> held;
  absl::Status last;
  for (int i = 0; i < 64; ++i) {
    auto index = cuda_->CreateIndex(HashIndexSpec{1u << 31, 0});
    if (!index.ok()) {
      last = index.status();
      break;
    }
    held.push_back(std::move(*index));
  }
  EXPECT_EQ(last.code(), absl::StatusCode::kResourceExhausted) << last;
  held.clear();
  EXPECT_TRUE(cuda_->Healthy());
  auto small = NewIndex(*cuda_, 16);
  EXPECT_NE(small, nullptr);
}

// Without a usable device (CI), asking for the CUDA backend must fail cleanly with
// FAILED_PRECONDITION (never crash), and "auto" must fall back to the CPU.
TEST(CudaBackendWithoutDevice, CreateFailsCleanlyAndAutoPicksCpu) {
  if (CudaDeviceAvailable())
    GTEST_SKIP() << "a CUDA device is present; this checks the no-device path";
  auto cuda = CreateBackend(BackendKind::kCuda);
  ASSERT_FALSE(cuda.ok());
  EXPECT_EQ(cuda.status().code(), absl::StatusCode::kFailedPrecondition) << cuda.status();
  auto chosen = CreateBackend(BackendKind::kAuto);
  ASSERT_TRUE(chosen.ok()) << chosen.status();
  EXPECT_EQ((*chosen)->Info().kind, BackendKind::kCpu);
}

}  // namespace
}  // namespace gpujoin::engine
