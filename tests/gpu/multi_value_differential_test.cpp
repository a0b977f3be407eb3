// Multi-value indexes and join kinds, CUDA vs CPU: kKeepAll builds
// (the kLowestRow table plus every valid row of each key in its group, in
// source order), lookups with match counts, and joins of every kind (inner,
// left outer, left semi, left anti) on both index kinds (docs/engine.md,
// "Multi-value indexes and join kinds"). Every test draws fresh random inputs
// (the seed is printed on failure) for both key words and both forced CUDA
// build paths, with the group shapes that matter: every key once, groups of
// 2-8 rows, one key holding half the rows, every row one key. Every output is
// poisoned first and each backend's bytes are compared exactly: table layout,
// statistics (max_group_rows too), payload infos and memory, lookup values,
// found, probes and match counts, join pairs in order, counts, overflow, found,
// probes, statistics and every gathered byte (int64 and float32 columns sharing
// a record, a bool and a string column) per pair, with the untouched tails past
// the written pairs; capacities truncate inside groups, at row boundaries, at
// 0 (count only) and 1. The CPU's pairs are also checked against a join of
// the source rows by key that uses no table, and builds past the probe bound (whose retained keys
// may differ between backends) against the model of each backend's own table. Sizes stay small
// enough for compute-sanitizer (bench/device_run.sh runs memcheck and
// racecheck on filters); HotKeySpreadsOverManyBlocks is the large one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "backends.hpp"
#include "gpujoin/engine/backend.hpp"
#include "gpujoin/engine/column.hpp"
#include "gpujoin/engine/graph.hpp"
#include "gpujoin/testing/join_kind_model.hpp"

namespace gpujoin::engine {
namespace {

constexpr uint64_t kPoison64 = 0xa5a5a5a5a5a5a5a5ull;
const std::string kPoisonString = "poison";

constexpr JoinKind kKinds[] = {JoinKind::kInner, JoinKind::kLeftOuter, JoinKind::kLeftSemi,
                               JoinKind::kLeftAnti};
constexpr DuplicatePolicy kPolicies[] = {DuplicatePolicy::kLowestRow, DuplicatePolicy::kKeepAll};

enum class Shape { kSingles, kSmallGroups, kSkewed, kOneKey };
constexpr Shape kShapes[] = {Shape::kSingles, Shape::kSmallGroups, Shape::kSkewed, Shape::kOneKey};

std::string NameOf(Shape s) {
  switch (s) {
    case Shape::kSingles:
      return "every key once";
    case Shape::kSmallGroups:
      return "groups of 2-8";
    case Shape::kSkewed:
      return "one key holding half the rows";
    case Shape::kOneKey:
      return "every row one key";
  }
  return "?";
}

std::string What(DuplicatePolicy p, JoinKind k) {
  return std::string(DuplicatePolicyName(p)) + " " + std::string(JoinKindName(k));
}

// The payload columns of every build here: an int64 (nullable) and a float32
// column (no nulls) that the CUDA backend keeps in one 16-byte record (4 bytes
// of padding per position), a bool and a string column (nullable).
constexpr ColumnType kTypes[] = {ColumnType::kInt64, ColumnType::kFloat32, ColumnType::kBool,
                                 ColumnType::kString};

// An owned payload column; At(r) is row r's value as bytes, or nullopt.
struct Column {
  ColumnType type = ColumnType::kInt64;
  uint64_t rows = 0;
  std::vector<std::byte> data;
  std::vector<uint64_t> offsets;
  std::vector<uint8_t> validity;

  ColumnView View() const { return ColumnView{type, rows, data, offsets, validity}; }
  std::optional<std::string> At(uint64_t r) const {
    if (!validity.empty() && !BitAt(validity, r)) return std::nullopt;
    const auto* bytes = reinterpret_cast<const char*>(data.data());
    if (type == ColumnType::kBool) {
      const auto bits = std::span(reinterpret_cast<const uint8_t*>(data.data()), data.size());
      return std::string(1, char(BitAt(bits, r)));
    }
    if (IsVariableWidth(type)) return std::string(bytes + offsets[r], offsets[r + 1] - offsets[r]);
    const size_t w = ColumnWidth(type);
    return std::string(bytes + r * w, w);
  }
};

Column RandomColumn(std::mt19937_64& rng, ColumnType type, uint64_t rows) {
  Column c;
  c.type = type;
  c.rows = rows;
  if (type != ColumnType::kFloat32) {
    c.validity.assign(BitmapBytes(rows), 0);
    for (uint64_t r = 0; r < rows; ++r) {
      if (rng() % 4 != 0) c.validity[r / 8] |= uint8_t(1u << (r % 8));
    }
  }
  if (type == ColumnType::kBool) {
    c.data.resize(BitmapBytes(rows));
    for (auto& b : c.data) b = std::byte(rng());
  } else if (type == ColumnType::kString) {
    c.offsets.push_back(0);
    for (uint64_t r = 0; r < rows; ++r) {
      const size_t len = rng() % 4 == 0 ? 0 : 1 + rng() % 20;
      for (size_t k = 0; k < len; ++k) c.data.push_back(std::byte('a' + rng() % 26));
      c.offsets.push_back(c.data.size());
    }
  } else {
    c.data.resize(rows * ColumnWidth(type));
    for (auto& b : c.data) b = std::byte(rng());
  }
  return c;
}

std::vector<Column> RandomPayload(std::mt19937_64& rng, uint64_t rows) {
  std::vector<Column> cols;
  for (ColumnType t : kTypes) cols.push_back(RandomColumn(rng, t, rows));
  return cols;
}

std::vector<ColumnView> Views(const std::vector<Column>& cols) {
  std::vector<ColumnView> v;
  for (const Column& c : cols) v.push_back(c.View());
  return v;
}

// One gathered output, owned, poisoned before a run.
struct Gathered {
  ColumnType type = ColumnType::kInt64;
  std::vector<std::byte> data;
  std::vector<uint8_t> validity;
  std::vector<uint32_t> offsets;
  std::string bytes = kPoisonString;
  uint64_t null_count = kPoison64;
  friend bool operator==(const Gathered&, const Gathered&) = default;

  GatherOutput Prepare(uint32_t column, ColumnType t, uint64_t positions) {
    type = t;
    data.assign(IsVariableWidth(t)       ? 0
                : t == ColumnType::kBool ? BitmapBytes(positions)
                                         : positions * ColumnWidth(t),
                std::byte{kPoison8});
    validity.assign(BitmapBytes(positions), kPoison8);
    offsets.assign(IsVariableWidth(t) ? positions + 1 : 0, kPoison32);
    bytes = kPoisonString;
    null_count = kPoison64;
    GatherOutput out;
    out.column = column;
    out.data = data;
    out.validity = validity;
    out.offsets = offsets;
    out.string_bytes = IsVariableWidth(t) ? &bytes : nullptr;
    out.null_count = &null_count;
    return out;
  }

  // Position i as a cell (nullopt where null; fixed width: null rows must hold
  // zero bytes).
  std::optional<std::string> At(uint64_t i) const {
    if (!BitAt(validity, i)) return std::nullopt;
    if (type == ColumnType::kBool) {
      const auto bits = std::span(reinterpret_cast<const uint8_t*>(data.data()), data.size());
      return std::string(1, char(BitAt(bits, i)));
    }
    if (IsVariableWidth(type)) return bytes.substr(offsets[i], offsets[i + 1] - offsets[i]);
    const size_t w = ColumnWidth(type);
    return std::string(reinterpret_cast<const char*>(data.data()) + i * w, w);
  }
};

// The rows of a build: key, value and validity per global row.
template <KeyWord K>
struct SourceRows {
  std::vector<K> keys;
  std::vector<uint32_t> values;
  std::vector<bool> valid;
};

// What an index holds by the contract, from its own table: for every stored
// key its group, the winner row w(s) (the lowest valid row with the slot's key
// and value) and every later valid row of the key (kLowestRow: w(s) alone).
template <KeyWord K>
std::unordered_map<K, std::vector<uint64_t>> GroupsOf(const HashIndex& index,
                                                      const SourceRows<K>& src) {
  std::unordered_map<K, std::vector<uint64_t>> groups;
  auto snap = index.SnapshotAs<K>();
  EXPECT_TRUE(snap.ok()) << snap.status();
  if (!snap.ok()) return groups;
  std::map<std::pair<K, uint32_t>, uint64_t> lowest;
  std::unordered_map<K, std::vector<uint64_t>> rows_of;
  for (uint64_t r = 0; r < src.keys.size(); ++r) {
    if (!src.valid[r]) continue;
    lowest.emplace(std::pair{src.keys[r], src.values[r]}, r);
    rows_of[src.keys[r]].push_back(r);
  }
  const bool keep_all = index.spec().duplicates == DuplicatePolicy::kKeepAll;
  for (size_t s = 0; s < snap->keys.size(); ++s) {
    const K key = snap->keys[s];
    if (key == kEmptyKeyOf<K>) continue;
    const auto it = lowest.find({key, snap->values[s]});
    if (it == lowest.end()) {
      ADD_FAILURE() << "slot " << s << " holds a key and value that no source row has";
      continue;
    }
    std::vector<uint64_t>& g = groups[key];
    for (uint64_t r : rows_of[key]) {
      if (r < it->second) continue;
      g.push_back(r);
      if (!keep_all) break;
    }
  }
  return groups;
}

// One expected pair: left row ID, right value, the source row whose payload it
// carries (none: null).
using Pair = ::gpujoin::testing::ExpectedPair;

// The pairs of join `kind` of left keys `keys` (IDs `ids`) against `groups`
// (values of source rows in `src`), by the shared join-kind model.
template <KeyWord K>
std::vector<Pair> ModelJoin(JoinKind kind,
                            const std::unordered_map<K, std::vector<uint64_t>>& groups,
                            const SourceRows<K>& src, const std::vector<K>& keys,
                            const std::vector<uint32_t>& ids) {
  std::vector<Pair> out;
  std::vector<::gpujoin::testing::SourceRowOf<K>> matches;
  for (size_t i = 0; i < keys.size(); ++i) {
    matches.clear();
    const auto it = keys[i] == kEmptyKeyOf<K> ? groups.end() : groups.find(keys[i]);
    if (it != groups.end()) {
      for (uint64_t r : it->second) matches.push_back({r, keys[i], src.values[r]});
    }
    ::gpujoin::testing::AppendPairs(kind, ids[i], matches, out);
  }
  return out;
}

// The join by the source rows alone, without any table (exact for builds
// without overflow): for every left row, every valid right row of its key in
// row order (kLowestRow: the first).
template <KeyWord K>
std::vector<Pair> ReferenceJoin(JoinKind kind, DuplicatePolicy policy, const SourceRows<K>& src,
                                const std::vector<K>& keys, const std::vector<uint32_t>& ids) {
  std::unordered_map<K, std::vector<uint64_t>> groups;
  for (uint64_t r = 0; r < src.keys.size(); ++r) {
    if (!src.valid[r]) continue;
    std::vector<uint64_t>& g = groups[src.keys[r]];
    if (policy == DuplicatePolicy::kKeepAll || g.empty()) g.push_back(r);
  }
  return ModelJoin<K>(kind, groups, src, keys, ids);
}

// One left batch: its keys (cut at `cuts`), left row IDs and capacity.
template <KeyWord K>
struct BatchIn {
  std::vector<K> keys;
  std::vector<size_t> cuts;
  std::vector<uint32_t> left_rows;  // empty: first_left_row + i
  uint32_t first_left_row = 0;
  size_t capacity = 0;

  std::vector<uint32_t> Ids() const {
    std::vector<uint32_t> ids;
    for (size_t i = 0; i < keys.size(); ++i) {
      ids.push_back(left_rows.empty() ? first_left_row + uint32_t(i) : left_rows[i]);
    }
    return ids;
  }
};

// What a backend wrote for one batch.
struct BatchOut {
  std::vector<uint32_t> l, r, probes;
  std::vector<uint8_t> found;
  JoinResult result;
  std::vector<Gathered> gathered;
};

struct LookupOut {
  std::vector<uint32_t> values, probes, match_counts;
  std::vector<uint8_t> found;
  QueryStatistics stats{1, 2, 3, 4};
  std::vector<Gathered> gathered;
};

// The first difference between two vectors, for messages.
template <class T>
std::string FirstDifference(const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size()) {
    return "sizes " + std::to_string(a.size()) + " vs " + std::to_string(b.size());
  }
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(T)) != 0) return "first at " + std::to_string(i);
  }
  return "none";
}

// CUDA's padding of the int64 + float32 record (16 bytes for 12) per position,
// charged to the float32 column, the last fixed-width one.
constexpr uint64_t kRecordPadding = 4;
constexpr size_t kPaddedColumn = 1;

class MultiValueDifferential
    : public CudaVsCpuTest,
      public ::testing::WithParamInterface<std::tuple<CudaBuildPath, KeyType>> {
 protected:
  MultiValueDifferential() : CudaVsCpuTest("CUDA-vs-CPU multi-value differential tests skipped") {}

  void SetUp() override {
    cuda_options_.cuda_build_path = std::get<0>(GetParam());
    CudaVsCpuTest::SetUp();
  }
  KeyType key_type() const { return std::get<1>(GetParam()); }

  // An index of `policy` on each backend: [0] CPU, [1] CUDA.
  struct Indexes {
    std::unique_ptr<HashIndex> at[2];
  };
  Indexes NewIndexes(DuplicatePolicy policy, uint32_t capacity, uint32_t max_probe = 0) {
    Indexes x;
    Backend* b[2] = {cpu_.get(), cuda_.get()};
    for (int k = 0; k < 2; ++k) {
      auto index = b[k]->CreateIndex(HashIndexSpec{capacity, max_probe, key_type(), policy});
      EXPECT_TRUE(index.ok()) << index.status();
      if (index.ok()) x.at[k] = std::move(*index);
    }
    return x;
  }
  Backend& BackendOf(int k) { return k == 0 ? *cpu_ : *cuda_; }

  void RunOk(Backend& b, const CommandGraph& g) {
    const absl::Status s = b.Run(g);
    ASSERT_TRUE(s.ok()) << BackendKindName(b.Info().kind) << ": " << s << " " << Seed();
  }

  // `rows` keys of `shape` (about 1 % the reserved key), rows of one key spread
  // at random over the sequence.
  template <KeyWord K>
  std::vector<K> ShapeKeys(Shape shape, size_t rows) {
    const std::vector<K> pool = DistinctKeysOf<K>(rows + 1);
    std::vector<K> keys;
    switch (shape) {
      case Shape::kSingles:
        keys.assign(pool.begin(), pool.begin() + rows);
        break;
      case Shape::kSmallGroups:
        for (size_t k = 0; keys.size() < rows; ++k) {
          const size_t n = std::min<size_t>(2 + rng_() % 7, rows - keys.size());
          keys.insert(keys.end(), n, pool[k]);
        }
        break;
      case Shape::kSkewed:
        keys.assign(rows / 2, pool[0]);
        while (keys.size() < rows) keys.push_back(pool[1 + rng_() % (rows / 2)]);
        break;
      case Shape::kOneKey:
        keys.assign(rows, pool[0]);
        break;
    }
    std::shuffle(keys.begin(), keys.end(), rng_);
    for (auto& k : keys) {
      if (rng_() % 100 == 0) k = kEmptyKeyOf<K>;
    }
    return keys;
  }

  // Left keys: random build keys (hits unless reserved) or fresh ones (almost
  // always misses), even odds, and a few reserved keys.
  template <KeyWord K>
  std::vector<K> Queries(const std::vector<K>& keys, size_t n) {
    std::vector<K> q(n);
    for (auto& x : q) {
      const uint64_t pick = rng_() % 100;
      x = pick < 50 ? keys[rng_() % keys.size()] : pick < 98 ? K(rng_()) : kEmptyKeyOf<K>;
    }
    return q;
  }

  template <KeyWord K>
  static SourceRows<K> PlainRows(const std::vector<K>& keys, const std::vector<uint32_t>* values,
                                 uint32_t first_value) {
    SourceRows<K> s;
    s.keys = keys;
    for (size_t r = 0; r < keys.size(); ++r) {
      s.values.push_back(values != nullptr ? (*values)[r] : first_value + uint32_t(r));
      s.valid.push_back(keys[r] != kEmptyKeyOf<K>);
    }
    return s;
  }

  // Builds both indexes of `x` from the same plain build node (chunked at
  // random) with `payload`; returns each backend's statistics.
  template <KeyWord K>
  void BuildBoth(Indexes& x, const std::vector<K>& keys, const std::vector<uint32_t>* values,
                 uint32_t first_value, const std::vector<Column>& payload,
                 BuildStatistics (&st)[2]) {
    const Chunked<K> chunks = RandomChunks(keys);
    std::optional<ChunkedU32> value_chunks;
    if (values != nullptr) value_chunks = RandomChunks(*values);
    for (int k = 0; k < 2; ++k) {
      BuildIndexNodeT<K> node;
      node.index = x.at[k].get();
      node.keys = chunks;
      node.values = value_chunks;
      node.first_value = first_value;
      node.statistics = &st[k];
      node.payload = Views(payload);
      CommandGraph g;
      g.Add(node);
      RunOk(BackendOf(k), g);
    }
  }

  // Without overflow: the same statistics (total_probes aside when keys
  // repeat: the CPU's in-order and the GPU's parallel insert count duplicate
  // rows where they met their key), the same table, the same payload infos but
  // for the CUDA record's padding, the same group storage in memory_bytes; and
  // each index's recorded statistics are what its build node returned.
  template <KeyWord K>
  void ExpectSameBuild(const Indexes& x, const BuildStatistics (&st)[2], uint64_t kept) {
    const HashIndex& cpu = *x.at[0];
    const HashIndex& gpu = *x.at[1];
    EXPECT_EQ(cpu.build_statistics(), st[0]);
    EXPECT_EQ(gpu.build_statistics(), st[1]);
    BuildStatistics g = st[1];
    if (st[0].duplicate_rows > 0) g.total_probes = st[0].total_probes;
    EXPECT_EQ(g, st[0]) << "build statistics " << Seed();
    auto a = cpu.SnapshotAs<K>(), b = gpu.SnapshotAs<K>();
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_TRUE(a->keys == b->keys && a->values == b->values) << "table layouts differ " << Seed();
    std::vector<PayloadColumnInfo> want = cpu.payload();
    const bool keep_all = cpu.spec().duplicates == DuplicatePolicy::kKeepAll;
    // kLowestRow stores payload per slot (the CUDA table pads to at least 4),
    // kKeepAll per kept row.
    const uint64_t positions = keep_all ? kept : std::max<uint64_t>(cpu.spec().capacity, 4);
    if (want.size() > kPaddedColumn && gpu.backend() == BackendKind::kCuda) {
      want[kPaddedColumn].bytes += positions * kRecordPadding;
    }
    if (keep_all || cpu.spec().capacity >= 4) {
      EXPECT_EQ(gpu.payload(), want) << Seed();
    }
    uint64_t sums[2] = {0, 0};
    const HashIndex* idx[2] = {&cpu, &gpu};
    for (int k = 0; k < 2; ++k) {
      for (const PayloadColumnInfo& info : idx[k]->payload()) sums[k] += info.bytes;
      const uint64_t groups = GroupStorageBytes(idx[k]->spec(), idx[k]->spec().capacity, kept);
      EXPECT_EQ(idx[k]->memory_bytes(), BackendOf(k).IndexBytes(idx[k]->spec()) + groups + sums[k])
          << BackendKindName(idx[k]->backend()) << " memory_bytes " << Seed();
    }
  }

  // Rows kept by the groups of `index` by the model.
  template <KeyWord K>
  static uint64_t KeptRows(const HashIndex& index, const SourceRows<K>& src) {
    uint64_t kept = 0;
    for (const auto& [key, rows] : GroupsOf<K>(index, src)) kept += rows.size();
    return kept;
  }

  // A lookup of `queries` on index `k` of `x` with every output and every
  // payload column gathered.
  template <KeyWord K>
  LookupOut Lookup(int k, const HashIndex& index, const Chunked<K>& queries) {
    const size_t n = TotalRows(queries);
    LookupOut o;
    o.values.assign(n, kPoison32);
    o.probes.assign(n, kPoison32);
    o.match_counts.assign(n, kPoison32);
    o.found.assign(n, kPoison8);
    o.gathered.resize(index.payload().size());
    LookupNodeT<K> node;
    node.index = &index;
    node.keys = queries;
    node.values = o.values;
    node.found = o.found;
    node.probes = o.probes;
    node.match_counts = o.match_counts;
    node.statistics = &o.stats;
    for (size_t c = 0; c < o.gathered.size(); ++c) {
      node.gather.push_back(o.gathered[c].Prepare(uint32_t(c), index.payload()[c].type, n));
    }
    CommandGraph g;
    g.Add(node);
    RunOk(BackendOf(k), g);
    return o;
  }

  // Lookups on both: every output byte equal.
  template <KeyWord K>
  void LookupBoth(const Indexes& x, const std::vector<K>& queries) {
    const Chunked<K> chunks = RandomChunks(queries);
    const LookupOut a = Lookup<K>(0, *x.at[0], chunks);
    const LookupOut b = Lookup<K>(1, *x.at[1], chunks);
    EXPECT_EQ(b.values, a.values) << Seed();
    EXPECT_EQ(b.found, a.found) << Seed();
    EXPECT_EQ(b.probes, a.probes) << Seed();
    EXPECT_EQ(b.match_counts, a.match_counts)
        << FirstDifference(b.match_counts, a.match_counts) << " " << Seed();
    EXPECT_EQ(b.stats, a.stats) << Seed();
    ASSERT_EQ(a.gathered.size(), b.gathered.size());
    for (size_t c = 0; c < a.gathered.size(); ++c) {
      EXPECT_TRUE(a.gathered[c] == b.gathered[c])
          << "lookup gather of column " << c << ": data "
          << FirstDifference(a.gathered[c].data, b.gathered[c].data) << ", validity "
          << FirstDifference(a.gathered[c].validity, b.gathered[c].validity) << " " << Seed();
    }
  }

  // A join of `kind` on index `k` with `batches`, every payload column gathered
  // per pair.
  template <KeyWord K>
  std::vector<BatchOut> Join(int k, const HashIndex& index, JoinKind kind,
                             const std::vector<BatchIn<K>>& batches, uint32_t max_probe = 0) {
    std::vector<BatchOut> out(batches.size());
    JoinNodeT<K> node;
    node.index = &index;
    node.kind = kind;
    node.max_probe_count = max_probe;
    for (size_t j = 0; j < batches.size(); ++j) {
      const BatchIn<K>& in = batches[j];
      BatchOut& o = out[j];
      o.l.assign(in.capacity, kPoison32);
      o.r.assign(in.capacity, kPoison32);
      o.probes.assign(in.keys.size(), kPoison32);
      o.found.assign(in.keys.size(), kPoison8);
      o.result = JoinResult{kPoison64, true, {}};
      o.gathered.resize(index.payload().size());
      JoinBatchT<K> b;
      b.keys = testing::Cut(in.keys, in.cuts);
      b.left_rows = in.left_rows;
      b.first_left_row = in.first_left_row;
      b.out_left_rows = o.l;
      b.out_right_rows = o.r;
      b.result = &o.result;
      b.found = o.found;
      b.probes = o.probes;
      for (size_t c = 0; c < o.gathered.size(); ++c) {
        b.gather.push_back(
            o.gathered[c].Prepare(uint32_t(c), index.payload()[c].type, in.capacity));
      }
      node.batches.push_back(std::move(b));
    }
    CommandGraph g;
    g.Add(node);
    RunOk(BackendOf(k), g);
    return out;
  }

  // Joins on both: every output byte equal; returns the CPU's.
  template <KeyWord K>
  std::vector<BatchOut> JoinBoth(const Indexes& x, JoinKind kind,
                                 const std::vector<BatchIn<K>>& batches, uint32_t max_probe = 0) {
    std::vector<BatchOut> a = Join<K>(0, *x.at[0], kind, batches, max_probe);
    const std::vector<BatchOut> b = Join<K>(1, *x.at[1], kind, batches, max_probe);
    for (size_t j = 0; j < batches.size() && !HasFailure(); ++j) {
      SCOPED_TRACE("batch " + std::to_string(j) + " (capacity " +
                   std::to_string(batches[j].capacity) + ")");
      EXPECT_EQ(b[j].result.count, a[j].result.count) << Seed();
      EXPECT_EQ(b[j].result.overflow, a[j].result.overflow) << Seed();
      EXPECT_EQ(b[j].result.statistics, a[j].result.statistics) << Seed();
      EXPECT_TRUE(b[j].l == a[j].l)
          << "left rows " << FirstDifference(b[j].l, a[j].l) << " " << Seed();
      EXPECT_TRUE(b[j].r == a[j].r)
          << "right rows " << FirstDifference(b[j].r, a[j].r) << " " << Seed();
      EXPECT_EQ(b[j].found, a[j].found) << Seed();
      EXPECT_EQ(b[j].probes, a[j].probes) << Seed();
      for (size_t c = 0; c < a[j].gathered.size(); ++c) {
        const Gathered &p = a[j].gathered[c], &q = b[j].gathered[c];
        EXPECT_TRUE(p == q) << "gathered column " << c << " (" << ColumnTypeName(kTypes[c])
                            << "): data " << FirstDifference(p.data, q.data) << ", validity "
                            << FirstDifference(p.validity, q.validity) << ", offsets "
                            << FirstDifference(p.offsets, q.offsets) << ", null counts "
                            << p.null_count << " vs " << q.null_count << " " << Seed();
      }
    }
    return a;
  }

  // Checks one backend's batch against the pairs it must yield: the count,
  // overflow, the written prefix of pairs and of every gathered column, the
  // tails past it untouched (a count-only batch writes no gathered output).
  static void ExpectPairs(const BatchOut& o, size_t capacity, const std::vector<Pair>& want,
                          const std::vector<Column>& payload, bool build_overflow,
                          const std::string& seed) {
    EXPECT_EQ(o.result.count, want.size()) << seed;
    EXPECT_EQ(o.result.overflow, want.size() > capacity || build_overflow) << seed;
    const size_t written = std::min(want.size(), capacity);
    size_t wrong = 0;
    for (size_t p = 0; p < written; ++p) {
      wrong += o.l[p] != want[p].left || o.r[p] != want[p].right;
    }
    EXPECT_EQ(wrong, 0u) << "pairs differ from the model " << seed;
    for (size_t p = written; p < capacity; ++p) {
      ASSERT_EQ(o.l[p], kPoison32) << "pair " << p << " past the written ones " << seed;
      ASSERT_EQ(o.r[p], kPoison32) << "pair " << p << " past the written ones " << seed;
    }
    for (size_t c = 0; c < o.gathered.size(); ++c) {
      const Gathered& g = o.gathered[c];
      if (capacity == 0) {
        EXPECT_EQ(g.null_count, kPoison64) << "count-only batch gathered column " << c;
        EXPECT_EQ(g.bytes, kPoisonString) << "count-only batch gathered column " << c;
        continue;
      }
      size_t bad = 0;
      uint64_t nulls = 0;
      for (size_t p = 0; p < written; ++p) {
        const auto cell = want[p].row ? payload[c].At(*want[p].row) : std::nullopt;
        nulls += !cell.has_value();
        bad += g.At(p) != cell;
        if (!cell && !IsVariableWidth(g.type) && g.type != ColumnType::kBool) {
          const size_t w = ColumnWidth(g.type);
          bad += std::memcmp(g.data.data() + p * w, std::string(w, '\0').data(), w) != 0;
        }
      }
      EXPECT_EQ(bad, 0u) << "gathered column " << c << " differs from the model " << seed;
      EXPECT_EQ(g.null_count, nulls) << "gathered column " << c << " " << seed;
      for (size_t b = BitmapBytes(written); b < g.validity.size(); ++b) {
        ASSERT_EQ(g.validity[b], kPoison8) << "validity byte " << b << " past the written pairs";
      }
      if (!IsVariableWidth(g.type) && g.type != ColumnType::kBool) {
        for (size_t i = written * ColumnWidth(g.type); i < g.data.size(); ++i) {
          ASSERT_EQ(g.data[i], std::byte{kPoison8})
              << "data byte " << i << " past the written pairs";
        }
      }
    }
  }

  // Capacities that cut `pairs` (the CPU's, all of them) at the boundaries that
  // matter: everything and more, one short, inside a group (a left row with
  // pairs before and after the cut), at a left row's first pair, 1 and 0.
  static std::vector<size_t> Capacities(const std::vector<uint32_t>& left, size_t count) {
    std::vector<size_t> caps = {count + 5, count};
    if (count > 1) caps.push_back(count - 1);
    size_t inside = 0, boundary = 0;
    for (size_t p = count / 3; p + 1 < count && (inside == 0 || boundary == 0); ++p) {
      if (p > 0 && left[p - 1] == left[p] && inside == 0) inside = p;
      if (p > 0 && left[p - 1] != left[p] && boundary == 0) boundary = p;
    }
    if (inside != 0) caps.push_back(inside);
    if (boundary != 0) caps.push_back(boundary);
    caps.push_back(1);
    caps.push_back(0);
    return caps;
  }

  // Every kind on both index kinds of `x` (built from `src`, without overflow
  // when `exact`): a count-only batch learns the count, then batches of every
  // capacity of Capacities, one with explicit left row IDs and an empty one;
  // CUDA equals CPU byte for byte, and the CPU equals the reference join
  // (exact) or the model of its own table.
  template <KeyWord K>
  void JoinEveryCapacity(const Indexes& x, JoinKind kind, const SourceRows<K>& src,
                         const std::vector<K>& left, const std::vector<Column>& payload,
                         bool exact) {
    BatchIn<K> probe;
    probe.keys = left;
    probe.first_left_row = 1000;
    const std::vector<BatchOut> counted = JoinBoth<K>(x, kind, {probe});
    if (HasFailure()) return;
    const size_t count = counted[0].result.count;
    BatchIn<K> all = probe;
    all.capacity = count;
    const std::vector<BatchOut> full = Join<K>(0, *x.at[0], kind, {all});
    std::vector<BatchIn<K>> batches;
    for (size_t cap : Capacities(full[0].l, count)) {
      BatchIn<K> b = probe;
      b.capacity = cap;
      b.cuts = {left.size() / 3, left.size() / 3, left.size() / 2};
      b.first_left_row = uint32_t(rng_());
      batches.push_back(b);
    }
    BatchIn<K> ids = probe;
    ids.capacity = count;
    ids.left_rows.resize(left.size());
    for (auto& r : ids.left_rows) r = uint32_t(rng_());
    batches.push_back(ids);
    BatchIn<K> empty;
    empty.capacity = 7;
    batches.push_back(empty);
    const std::vector<BatchOut> cpu = JoinBoth<K>(x, kind, batches);
    if (HasFailure()) return;
    const bool build_overflow = x.at[0]->build_statistics().overflow_rows > 0;
    const auto groups = GroupsOf<K>(*x.at[0], src);
    for (size_t j = 0; j < batches.size(); ++j) {
      SCOPED_TRACE("CPU batch " + std::to_string(j) + " against the model");
      const std::vector<uint32_t> id = batches[j].Ids();
      const std::vector<Pair> want =
          exact ? ReferenceJoin<K>(kind, x.at[0]->spec().duplicates, src, batches[j].keys, id)
                : ModelJoin<K>(kind, groups, src, batches[j].keys, id);
      ExpectPairs(cpu[j], batches[j].capacity, want, payload, build_overflow, Seed());
      if (HasFailure()) return;
    }
  }
};

// For every group shape, with generated and explicit values: a kKeepAll build
// has the kLowestRow build's table and statistics on both backends, plus
// max_group_rows; payload infos and memory_bytes (group storage and payload per
// kept row) as on the CPU but for the record padding; lookups (values, found,
// probes, match counts, first match's payload) like the CPU on both index
// kinds.
TEST_P(MultiValueDifferential, KeepAllBuildsAndLookupsLikeCpu) {
  ForKeyType(key_type(), [&]<KeyWord K>() {
    for (const Shape shape : kShapes) {
      for (const bool explicit_values : {false, true}) {
        SCOPED_TRACE(NameOf(shape) + (explicit_values ? ", explicit values" : ", generated"));
        const size_t rows = 3000;
        const std::vector<K> keys = ShapeKeys<K>(shape, rows);
        std::vector<uint32_t> values(rows);
        for (auto& v : values) v = uint32_t(rng_());
        const uint32_t first_value = uint32_t(rng_());
        const std::vector<Column> payload = RandomPayload(rng_, rows);
        const SourceRows<K> src =
            PlainRows<K>(keys, explicit_values ? &values : nullptr, first_value);
        Indexes by_policy[2];
        for (int p = 0; p < 2; ++p) {
          by_policy[p] = NewIndexes(kPolicies[p], 8192);
          ASSERT_TRUE(by_policy[p].at[0] && by_policy[p].at[1]);
          BuildStatistics st[2];
          BuildBoth<K>(by_policy[p], keys, explicit_values ? &values : nullptr, first_value,
                       payload, st);
          if (HasFailure()) return;
          ExpectSameBuild<K>(by_policy[p], st, KeptRows<K>(*by_policy[p].at[0], src));
          LookupBoth<K>(by_policy[p], Queries(keys, 2500));
          if (HasFailure()) return;
        }
        // The kKeepAll table is the kLowestRow table; only max_group_rows differs.
        auto lowest = by_policy[0].at[1]->SnapshotAs<K>(),
             all = by_policy[1].at[1]->SnapshotAs<K>();
        ASSERT_TRUE(lowest.ok() && all.ok());
        EXPECT_TRUE(lowest->keys == all->keys && lowest->values == all->values) << Seed();
        BuildStatistics a = by_policy[0].at[1]->build_statistics();
        BuildStatistics b = by_policy[1].at[1]->build_statistics();
        EXPECT_EQ(a.max_group_rows, 0u);
        size_t largest = 0;
        for (const auto& [key, g] : GroupsOf<K>(*by_policy[1].at[0], src)) {
          largest = std::max(largest, g.size());
        }
        EXPECT_EQ(b.max_group_rows, largest) << Seed();
        b.max_group_rows = 0;
        a.total_probes = b.total_probes;  // two parallel inserts of repeated keys
        EXPECT_EQ(b, a) << Seed();
      }
    }
  });
}

// Every join kind on both index kinds for every group shape: pairs in left
// order then group order, exact counts, truncation at every boundary,
// count-only and empty batches, explicit left rows, payload per pair.
TEST_P(MultiValueDifferential, EveryJoinKindLikeCpu) {
  ForKeyType(key_type(), [&]<KeyWord K>() {
    for (const Shape shape : kShapes) {
      const size_t rows = shape == Shape::kSkewed || shape == Shape::kOneKey ? 1500 : 3000;
      const std::vector<K> keys = ShapeKeys<K>(shape, rows);
      const std::vector<Column> payload = RandomPayload(rng_, rows);
      const SourceRows<K> src = PlainRows<K>(keys, nullptr, 77);
      const std::vector<K> left = Queries(keys, shape == Shape::kOneKey ? 400 : 2000);
      for (const DuplicatePolicy policy : kPolicies) {
        Indexes x = NewIndexes(policy, 8192);
        ASSERT_TRUE(x.at[0] && x.at[1]);
        BuildStatistics st[2];
        BuildBoth<K>(x, keys, nullptr, 77, payload, st);
        if (HasFailure()) return;
        for (const JoinKind kind : kKinds) {
          SCOPED_TRACE(NameOf(shape) + ", " + What(policy, kind));
          JoinEveryCapacity<K>(x, kind, src, left, payload, true);
          if (HasFailure()) return;
        }
      }
    }
  });
}

// Several batches in one join node over a batch build with masks, row bases
// out of order and keys repeated across chunks, on both index kinds.
TEST_P(MultiValueDifferential, BatchBuildAndBatchJoinsLikeCpu) {
  ForKeyType(key_type(), [&]<KeyWord K>() {
    const std::vector<K> pool = DistinctKeysOf<K>(900);
    std::vector<std::vector<K>> chunk_keys;
    std::vector<std::vector<uint32_t>> masks;
    std::vector<uint32_t> bases;
    SourceRows<K> src;
    for (int c = 0; c < 5; ++c) {
      const size_t n = c == 2 ? 0 : 300 + rng_() % 900;
      std::vector<K> keys(n);
      for (auto& k : keys) k = rng_() % 60 == 0 ? kEmptyKeyOf<K> : pool[rng_() % pool.size()];
      std::vector<uint32_t> mask;
      if (c % 2 == 1) {
        mask.resize(n);
        for (auto& m : mask) m = rng_() % 4 == 0 ? 0u : uint32_t(rng_() | 1);
      }
      const uint32_t base = uint32_t(rng_());
      for (size_t i = 0; i < n; ++i) {
        src.keys.push_back(keys[i]);
        src.values.push_back(base + uint32_t(i));
        src.valid.push_back(keys[i] != kEmptyKeyOf<K> && (mask.empty() || mask[i] != 0));
      }
      chunk_keys.push_back(std::move(keys));
      masks.push_back(std::move(mask));
      bases.push_back(base);
    }
    const std::vector<Column> payload = RandomPayload(rng_, src.keys.size());
    for (const DuplicatePolicy policy : kPolicies) {
      Indexes x = NewIndexes(policy, 4096);
      ASSERT_TRUE(x.at[0] && x.at[1]);
      BuildStatistics st[2];
      for (int k = 0; k < 2; ++k) {
        BuildBatchIndexNodeT<K> node;
        node.index = x.at[k].get();
        for (size_t c = 0; c < chunk_keys.size(); ++c) {
          node.chunks.push_back(BatchChunkT<K>{chunk_keys[c], bases[c], masks[c]});
        }
        node.statistics = &st[k];
        node.payload = Views(payload);
        CommandGraph g;
        g.Add(node);
        RunOk(BackendOf(k), g);
      }
      ExpectSameBuild<K>(x, st, KeptRows<K>(*x.at[0], src));
      LookupBoth<K>(x, Queries(pool, 1500));
      for (const JoinKind kind : kKinds) {
        SCOPED_TRACE(What(policy, kind));
        std::vector<BatchIn<K>> batches(4);
        for (size_t j = 0; j < batches.size(); ++j) {
          batches[j].keys = Queries(pool, j == 2 ? 0 : 200 + rng_() % 900);
          batches[j].cuts = {batches[j].keys.size() / 2};
          batches[j].first_left_row = uint32_t(j * 100000);
          batches[j].capacity = j == 1 ? 37 : 4 * batches[j].keys.size() + 1;
        }
        const std::vector<BatchOut> cpu = JoinBoth<K>(x, kind, batches);
        if (HasFailure()) return;
        for (size_t j = 0; j < batches.size(); ++j) {
          ExpectPairs(cpu[j], batches[j].capacity,
                      ReferenceJoin<K>(kind, policy, src, batches[j].keys, batches[j].Ids()),
                      payload, false, Seed());
        }
        if (HasFailure()) return;
      }
    }
  });
}

// Builds past the probe bound: which keys a parallel build retains is not
// specified, so each backend is checked against the model of its own table
// (groups from the winner w(s) on, rows of a dropped generation left out),
// with the same number of keys and, on a kKeepAll index, max_group_rows and
// memory of its own groups; joins of every kind report overflow.
TEST_P(MultiValueDifferential, OverflowFollowsEachBackendsTable) {
  ForKeyType(key_type(), [&]<KeyWord K>() {
    const size_t rows = 3000;
    const std::vector<K> keys = ShapeKeys<K>(Shape::kSmallGroups, rows);
    const std::vector<Column> payload = RandomPayload(rng_, rows);
    const SourceRows<K> src = PlainRows<K>(keys, nullptr, 5);
    const std::vector<K> left = Queries(keys, 1500);
    for (const DuplicatePolicy policy : kPolicies) {
      SCOPED_TRACE(std::string(DuplicatePolicyName(policy)));
      Indexes x = NewIndexes(policy, 1024, 3);
      ASSERT_TRUE(x.at[0] && x.at[1]);
      BuildStatistics st[2];
      BuildBoth<K>(x, keys, nullptr, 5, payload, st);
      if (HasFailure()) return;
      EXPECT_GT(st[0].overflow_rows, 0u);
      EXPECT_EQ(st[1].unique_keys, st[0].unique_keys) << Seed();
      EXPECT_EQ(st[1].invalid_rows, st[0].invalid_rows) << Seed();
      for (int k = 0; k < 2; ++k) {
        const HashIndex& index = *x.at[k];
        const auto groups = GroupsOf<K>(index, src);
        uint64_t kept = 0, largest = 0;
        for (const auto& [key, g] : groups) {
          kept += g.size();
          largest = std::max<uint64_t>(largest, g.size());
        }
        const bool keep_all = policy == DuplicatePolicy::kKeepAll;
        EXPECT_EQ(st[k].max_group_rows, keep_all ? largest : 0) << Seed();
        uint64_t payload_bytes = 0;
        for (const PayloadColumnInfo& info : index.payload()) payload_bytes += info.bytes;
        EXPECT_EQ(index.memory_bytes(),
                  BackendOf(k).IndexBytes(index.spec()) +
                      GroupStorageBytes(index.spec(), index.spec().capacity, kept) + payload_bytes)
            << Seed();
        for (const JoinKind kind : kKinds) {
          SCOPED_TRACE(std::string(BackendKindName(index.backend())) + " " +
                       std::string(JoinKindName(kind)));
          BatchIn<K> b;
          b.keys = left;
          b.capacity = 4 * left.size();
          const std::vector<BatchOut> out = Join<K>(k, index, kind, {b});
          if (HasFailure()) return;
          ExpectPairs(out[0], b.capacity, ModelJoin<K>(kind, groups, src, b.keys, b.Ids()), payload,
                      true, Seed());
          if (HasFailure()) return;
        }
      }
    }
  });
}

// A key holding most of the rows joined by many left rows: the scatter's
// merge path spreads one row's pairs over many blocks and packs runs of left
// rows without pairs into one, and the pairs cross partition boundaries inside
// groups; truncated at a point inside one of the hot rows.
TEST_P(MultiValueDifferential, HotKeySpreadsOverManyBlocks) {
  ForKeyType(key_type(), [&]<KeyWord K>() {
    const size_t rows = 60000;
    const std::vector<K> pool = DistinctKeysOf<K>(20001);
    std::vector<K> keys(rows);
    for (size_t r = 0; r < rows; ++r) keys[r] = r % 3 == 0 ? pool[1 + rng_() % 20000] : pool[0];
    std::shuffle(keys.begin(), keys.end(), rng_);
    const std::vector<Column> payload = RandomPayload(rng_, rows);
    const SourceRows<K> src = PlainRows<K>(keys, nullptr, 0);
    std::vector<K> left(30000);
    for (size_t i = 0; i < left.size(); ++i) {
      const uint64_t pick = rng_() % 1000;
      left[i] = pick < 2 ? pool[0] : pick < 500 ? pool[1 + rng_() % 20000] : K(rng_());
    }
    Indexes x = NewIndexes(DuplicatePolicy::kKeepAll, 65536);
    ASSERT_TRUE(x.at[0] && x.at[1]);
    BuildStatistics st[2];
    BuildBoth<K>(x, keys, nullptr, 0, payload, st);
    if (HasFailure()) return;
    ExpectSameBuild<K>(x, st, KeptRows<K>(*x.at[0], src));
    for (const JoinKind kind : {JoinKind::kInner, JoinKind::kLeftOuter}) {
      SCOPED_TRACE(std::string(JoinKindName(kind)));
      BatchIn<K> b;
      b.keys = left;
      const std::vector<Pair> want =
          ReferenceJoin<K>(kind, DuplicatePolicy::kKeepAll, src, left, b.Ids());
      std::vector<BatchIn<K>> batches(2, b);
      batches[0].capacity = want.size();
      batches[1].capacity = want.size() / 2 + 12345;
      const std::vector<BatchOut> cpu = JoinBoth<K>(x, kind, batches);
      if (HasFailure()) return;
      for (size_t j = 0; j < batches.size(); ++j) {
        ExpectPairs(cpu[j], batches[j].capacity, want, payload, false, Seed());
      }
      if (HasFailure()) return;
    }
  });
}

// Small batches of one shape repeated (the CUDA backend captures the second
// and replays the third as a CUDA Graph) for semi and anti joins, which take
// the compaction path on either index kind, and for inner and outer joins;
// each like the CPU and the reference join.
TEST_P(MultiValueDifferential, RepeatedSmallBatchesLikeCpu) {
  ForKeyType(key_type(), [&]<KeyWord K>() {
    const std::vector<K> keys = ShapeKeys<K>(Shape::kSmallGroups, 2000);
    const SourceRows<K> src = PlainRows<K>(keys, nullptr, 3);
    for (const DuplicatePolicy policy : kPolicies) {
      Indexes x = NewIndexes(policy, 4096);
      ASSERT_TRUE(x.at[0] && x.at[1]);
      BuildStatistics st[2];
      BuildBoth<K>(x, keys, nullptr, 3, {}, st);
      if (HasFailure()) return;
      for (const JoinKind kind : kKinds) {
        SCOPED_TRACE(What(policy, kind));
        for (int round = 0; round < 3; ++round) {
          BatchIn<K> b;
          b.keys = Queries(keys, 500);
          b.capacity = 300;
          b.first_left_row = uint32_t(round * 1000);
          const std::vector<BatchOut> cpu = JoinBoth<K>(x, kind, {b});
          if (HasFailure()) return;
          ExpectPairs(cpu[0], b.capacity, ReferenceJoin<K>(kind, policy, src, b.keys, b.Ids()), {},
                      false, Seed());
          if (HasFailure()) return;
        }
      }
    }
  });
}

// A kKeepAll rebuild replaces the groups and payload, a build without payload
// drops it, an empty build leaves every key missing with empty groups (the
// per-slot ranges stay in memory_bytes), like the CPU.
TEST_P(MultiValueDifferential, RebuildsAndEmptyBuildsLikeCpu) {
  ForKeyType(key_type(), [&]<KeyWord K>() {
    Indexes x = NewIndexes(DuplicatePolicy::kKeepAll, 4096);
    ASSERT_TRUE(x.at[0] && x.at[1]);
    for (int round = 0; round < 3; ++round) {
      SCOPED_TRACE("round " + std::to_string(round));
      const size_t rows = round == 2 ? 0 : 2500;
      const std::vector<K> keys =
          rows == 0 ? std::vector<K>{}
                    : ShapeKeys<K>(round == 0 ? Shape::kSkewed : Shape::kSmallGroups, rows);
      const std::vector<Column> payload =
          round == 1 ? std::vector<Column>{} : RandomPayload(rng_, rows);
      BuildStatistics st[2];
      BuildBoth<K>(x, keys, nullptr, 11, payload, st);
      if (HasFailure()) return;
      const SourceRows<K> src = PlainRows<K>(keys, nullptr, 11);
      ExpectSameBuild<K>(x, st, KeptRows<K>(*x.at[0], src));
      const std::vector<K> left = rows == 0 ? DistinctKeysOf<K>(300) : Queries(keys, 1200);
      LookupBoth<K>(x, left);
      for (const JoinKind kind : kKinds) {
        BatchIn<K> b;
        b.keys = left;
        b.capacity = 3 * left.size();
        JoinBoth<K>(x, kind, {b});
        if (HasFailure()) return;
      }
    }
  });
}

INSTANTIATE_TEST_SUITE_P(
    Paths, MultiValueDifferential,
    ::testing::Combine(::testing::Values(CudaBuildPath::kDirect, CudaBuildPath::kTiles),
                       ::testing::Values(KeyType::kUint32, KeyType::kUint64)),
    [](const ::testing::TestParamInfo<std::tuple<CudaBuildPath, KeyType>>& info) {
      return std::string(std::get<0>(info.param) == CudaBuildPath::kTiles ? "tiles" : "direct") +
             "_" + KeyTypeTag(std::get<1>(info.param));
    });

}  // namespace
}  // namespace gpujoin::engine
