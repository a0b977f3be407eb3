// 64-bit keys (HashIndexSpec::key_type = kUint64) beyond what the typed build,
// lookup and join suites check for both key words: keys that differ only in
// their high 32 bits (a backend that truncated keys would merge them), the
// uint32 reserved value 0xffffffff as an ordinary 64-bit key while
// 0xffffffffffffffff is the reserved one, a random build at load 0.9 with
// duplicates across chunks against a lowest-row model, the Robin Hood layout of
// 64-bit keys, the key type checks of graph validation and snapshots, and the
// memory figures per key type. On every backend.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <unordered_map>

#include "gpujoin/engine/detail/slot_hash.hpp"
#include "test_backends.hpp"

namespace gpujoin::engine::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class Key64Test : public BackendTest {
 protected:
  std::unique_ptr<HashIndex> NewIndex64(uint32_t capacity, uint32_t max_probe_count = 0) {
    return NewIndexOf(KeyType::kUint64, capacity, max_probe_count);
  }
};

TEST_P(Key64Test, KeysThatDifferOnlyInTheirHighBitsStayApart) {
  // 64 keys sharing their low 32 bits (including an all-ones low half), each
  // with its own value; a table that kept 32 bits of them would hold 2 keys.
  std::vector<uint64_t> keys;
  for (uint64_t high = 1; high <= 32; ++high) {
    keys.push_back(high << 32 | 0x12345678u);
    keys.push_back(high << 32 | 0xffffffffu);
  }
  std::vector<uint32_t> values(keys.size());
  for (uint32_t i = 0; i < values.size(); ++i) values[i] = 1000 + i;
  auto index = NewIndex64(128);
  const BuildStatistics stats = Build(*index, Cut(keys, {17, 40}), Cut(values, {5}));
  EXPECT_EQ(stats.unique_keys, keys.size());
  EXPECT_EQ(stats.duplicate_rows, 0u);
  EXPECT_EQ(stats.overflow_rows, 0u);
  const auto out = Lookup(*index, One(keys));
  EXPECT_EQ(out.values, values);
  EXPECT_EQ(out.statistics.found, keys.size());
  // The low halves alone, and other high halves, are absent.
  const std::vector<uint64_t> absent = {0x12345678u, 0xffffffffu, uint64_t{33} << 32 | 0x12345678u,
                                        uint64_t{0xffffffff} << 32 | 0x12345678u};
  const auto miss = Lookup(*index, One(absent));
  EXPECT_THAT(miss.found, ElementsAre(0, 0, 0, 0));
  EXPECT_THAT(miss.values, ElementsAre(kEmptyKey, kEmptyKey, kEmptyKey, kEmptyKey));
}

TEST_P(Key64Test, OnlyTheAllOnes64BitKeyIsReserved) {
  auto index = NewIndex64(16);
  // 0xffffffff (the uint32 reserved key) and keys with an all-ones half are
  // ordinary keys; 0xffffffffffffffff is invalid.
  const std::vector<uint64_t> keys = {0xffffffffull,         kEmptyKey64, 0xffffffff00000000ull,
                                      0xfffffffffffffffeull, kEmptyKey64, 0xffffffffull};
  const BuildStatistics stats = Build(*index, One(keys), std::nullopt, 50);
  EXPECT_EQ(stats.unique_keys, 3u);
  EXPECT_EQ(stats.duplicate_rows, 1u);
  EXPECT_EQ(stats.invalid_rows, 2u);
  EXPECT_EQ(index->built_rows(), 6u);
  const std::vector<uint64_t> q = {0xfffffffeull, 0xffffffffull, kEmptyKey64, 0xfffffffffffffffeull,
                                   0xffffffff00000000ull};
  const auto out = Lookup(*index, One(q));
  EXPECT_THAT(out.found, ElementsAre(0, 1, 0, 1, 1));
  EXPECT_THAT(out.values, ElementsAre(kEmptyKey, 50, kEmptyKey, 53, 52));
  EXPECT_EQ(out.probes[2], 0u) << "the reserved key examines no slot";
  const TableSnapshot64 snap = SnapshotAs<uint64_t>(*index);
  EXPECT_EQ(std::count(snap.keys.begin(), snap.keys.end(), kEmptyKey64), 13);
  EXPECT_EQ(std::count(snap.keys.begin(), snap.keys.end(), 0xffffffffull), 1);
}

TEST_P(Key64Test, RandomBuildAtLoad09MatchesTheLowestRowModelAndTheContract) {
  // Random 64-bit keys at load 0.9, a third of the rows repeating earlier or
  // later keys across chunk boundaries, explicit values; queries are every key,
  // keys with flipped high halves (absent) and the reserved key.
  const uint32_t capacity = 1u << 14;
  std::mt19937_64 rng(1919);
  std::vector<uint64_t> distinct(size_t(capacity * 0.9));
  for (auto& k : distinct) k = rng() | 1u;  // distinct with overwhelming odds; never all ones
  std::vector<uint64_t> keys = distinct;
  for (size_t i = 0; i < keys.size(); i += 3) keys.push_back(distinct[rng() % distinct.size()]);
  std::shuffle(keys.begin(), keys.end(), rng);
  std::vector<uint32_t> values(keys.size());
  for (auto& v : values) v = uint32_t(rng());
  std::unordered_map<uint64_t, uint32_t> lowest;
  for (size_t i = 0; i < keys.size(); ++i) lowest.emplace(keys[i], values[i]);
  ASSERT_EQ(lowest.size(), distinct.size());

  auto index = NewIndex64(capacity);
  const BuildStatistics stats = Build(*index, Cut(keys, {1000, 1000, 9000}), Cut(values, {4444}));
  EXPECT_EQ(stats.unique_keys, distinct.size());
  EXPECT_EQ(stats.duplicate_rows, keys.size() - distinct.size());
  EXPECT_EQ(stats.overflow_rows, 0u);
  EXPECT_DOUBLE_EQ(index->load_factor(), double(distinct.size()) / capacity);

  // The layout: every stored key is in Robin Hood order behind its predecessor,
  // and the build's max probes is the largest displacement + 1.
  const TableSnapshot64 table = SnapshotAs<uint64_t>(*index);
  ASSERT_EQ(table.keys.size(), capacity);
  for (uint32_t slot = 0; slot < capacity; ++slot) {
    const uint64_t key = table.keys[slot];
    if (key == kEmptyKey64) continue;
    ASSERT_EQ(table.values[slot], lowest.at(key)) << "slot " << slot;
    const uint32_t d = (slot - detail::HomeSlot(key, capacity)) & (capacity - 1u);
    if (d == 0) continue;
    const uint32_t before = (slot - 1u) & (capacity - 1u);
    ASSERT_NE(table.keys[before], kEmptyKey64) << "slot " << slot;
    ASSERT_TRUE(detail::ResidentComesFirst(table.keys[before], key, d - 1, before, capacity))
        << "slot " << slot;
  }
  EXPECT_EQ(stats.max_probes, StoredProbes(table).max);

  std::vector<uint64_t> q = distinct;
  for (size_t i = 0; i < distinct.size(); i += 2) q.push_back(distinct[i] ^ (rng() << 32 | 0));
  q.push_back(kEmptyKey64);
  const auto out = Lookup(*index, Cut(q, {7, 12000}));
  QueryStatistics expect;
  for (size_t i = 0; i < q.size(); ++i) {
    const ContractRow row = ContractLookup(table, q[i], capacity);
    ASSERT_EQ(out.found[i], row.found ? 1 : 0) << "row " << i;
    ASSERT_EQ(out.values[i], row.value) << "row " << i;
    ASSERT_EQ(out.probes[i], row.probes) << "row " << i;
    if (i < distinct.size()) ASSERT_EQ(out.values[i], lowest.at(q[i])) << "row " << i;
    ++(row.found ? expect.found : expect.missing);
    expect.total_probes += row.probes;
    expect.max_probes = std::max<uint64_t>(expect.max_probes, row.probes);
  }
  EXPECT_EQ(out.statistics, expect);
  EXPECT_EQ(out.statistics.found, distinct.size());
}

TEST_P(Key64Test, NodesWhoseKeyWordIsNotTheIndexsAreRejected) {
  auto index64 = NewIndex64(16);
  auto index32 = NewIndex(16);
  const std::vector<uint64_t> k64 = {1, 2};
  const std::vector<uint32_t> k32 = {1, 2};
  Build(*index64, One(k64));
  Build(*index32, One(k32));
  std::vector<uint32_t> values(2), out_l(2), out_r(2);
  JoinResult result;
  auto expect_invalid = [&](const CommandGraph& g, const std::string& message) {
    const absl::Status status = g.Validate();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_THAT(std::string(status.message()), HasSubstr(message));
    EXPECT_EQ(backend_->Run(g), status);
  };
  {
    CommandGraph g;
    LookupNode n;
    n.index = index64.get();
    n.keys = One(k32);
    n.values = values;
    g.Add(n);
    expect_invalid(g, "node 0 (lookup): keys are uint32 but index has uint64 keys");
  }
  {
    CommandGraph g;
    g.Add(BuildIndexNode64{index32.get(), One(k64), std::nullopt, 0, nullptr});
    expect_invalid(g, "node 0 (build): keys are uint64 but index has uint32 keys");
  }
  {
    CommandGraph g;
    BuildBatchIndexNode n;
    n.index = index64.get();
    n.chunks = {BatchChunk{k32, 0, {}}};
    g.Add(n);
    expect_invalid(g, "node 0 (batch build): keys are uint32 but index has uint64 keys");
  }
  {
    CommandGraph g;
    JoinNode64 n;
    n.index = index32.get();
    n.batches.push_back(JoinBatch64{One(k64), {}, 0, out_l, out_r, &result, {}, {}});
    g.Add(n);
    expect_invalid(g, "node 0 (join): keys are uint64 but index has uint32 keys");
  }
  {
    // A later node of a graph: nothing runs.
    CommandGraph g;
    std::vector<uint32_t> first(2, 7);
    LookupNode64 ok;
    ok.index = index64.get();
    ok.keys = One(k64);
    ok.values = first;
    g.Add(ok);
    LookupNode64 bad = ok;
    bad.index = index32.get();
    bad.values = values;
    g.Add(bad);
    expect_invalid(g, "node 1 (lookup): keys are uint64 but index has uint32 keys");
    EXPECT_THAT(first, ElementsAre(7, 7));
  }
}

TEST_P(Key64Test, SnapshotsOfTheOtherKeyTypeAreAFailedPrecondition) {
  auto index64 = NewIndex64(8);
  auto index32 = NewIndex(8);
  const auto a = index64->Snapshot();
  EXPECT_EQ(a.status().code(), absl::StatusCode::kFailedPrecondition) << a.status();
  EXPECT_THAT(std::string(a.status().message()), HasSubstr("uint64"));
  const auto b = index32->Snapshot64();
  EXPECT_EQ(b.status().code(), absl::StatusCode::kFailedPrecondition) << b.status();
  EXPECT_THAT(std::string(b.status().message()), HasSubstr("uint32"));
  EXPECT_TRUE(index64->Snapshot64().ok());
  EXPECT_TRUE(index32->Snapshot().ok());
}

TEST_P(Key64Test, IndexBytesFollowTheKeyType) {
  for (uint32_t capacity : {1u, 2u, 4u, 1024u, 1u << 16}) {
    for (KeyType type : {KeyType::kUint32, KeyType::kUint64}) {
      const HashIndexSpec spec{capacity, 0, type};
      auto index = backend_->CreateIndex(spec);
      ASSERT_TRUE(index.ok()) << index.status();
      EXPECT_EQ((*index)->key_type(), type);
      EXPECT_EQ(backend_->IndexBytes(spec), (*index)->memory_bytes()) << "capacity " << capacity;
      // 8 bytes a slot for uint32 keys, 16 for uint64 keys (key, value, padding
      // on the CPU; key, tag on CUDA, which pads tables below 4 slots).
      const uint64_t slots = std::max(capacity, IsCpu() ? 1u : 4u);
      EXPECT_EQ(backend_->IndexBytes(spec), slots * (type == KeyType::kUint64 ? 16 : 8))
          << "capacity " << capacity;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, Key64Test, ::testing::ValuesIn(AllBackends()), BackendName);

TEST(KeyTypes, NamesShapesAndSpecValidation) {
  EXPECT_EQ(KeyTypeName(KeyType::kUint32), "uint32");
  EXPECT_EQ(KeyTypeName(KeyType::kUint64), "uint64");
  static_assert(KeyTypeOf<uint32_t>() == KeyType::kUint32 && KeyTypeOf<uint64_t>() == KeyType::kUint64);
  static_assert(kEmptyKeyOf<uint64_t> == 0xffffffffffffffffull && kEmptyKey64 == ~uint64_t{0});
  static_assert(kEmptyKeyOf<uint32_t> == kEmptyKey);
  EXPECT_EQ(HashIndexSpec{}.key_type, KeyType::kUint32);
  const HashIndexSpec bad{16, 0, static_cast<KeyType>(7)};
  EXPECT_EQ(bad.Validate().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.Validate().message()), HasSubstr("key_type 7"));

  const std::vector<uint64_t> keys(5, 1);
  BuildIndexNode64 node{nullptr, One(keys), std::nullopt, 0, nullptr};
  EXPECT_EQ(BuildShapeOf(node).key_type, KeyType::kUint64);
  EXPECT_EQ(BuildShapeOf(node).rows, 5u);
  BuildBatchIndexNode64 batch;
  batch.chunks = {BatchChunk64{keys, 0, {}}};
  EXPECT_EQ(BuildShapeOf(batch).key_type, KeyType::kUint64);
  EXPECT_EQ(BuildShapeOf(BuildIndexNode{}).key_type, KeyType::kUint32);
}

TEST(KeyTypes, SlotHashesArePinned) {
  // The 32-bit slot hash is the reference's and must never change (tables,
  // probe counts and benchmarks depend on it); the 64-bit one is fmix64, whose
  // low bits give the home slot.
  EXPECT_EQ(detail::SlotHash(uint32_t{1}), 0x514e28b7u);
  EXPECT_EQ(detail::SlotHash(uint32_t{0xdeadbeef}), 0x0de5c6a9u);
  EXPECT_EQ(detail::SlotHash(uint64_t{1}), 0xb456bcfc34c2cb2cull);
  EXPECT_EQ(detail::SlotHash(uint64_t{0x123456789abcdef0}), 0x18b8c062f6f42398ull);
  EXPECT_EQ(detail::HomeSlot(uint64_t{1}, 1u << 20), 0xb456bcfc34c2cb2cull & 0xfffff);
  EXPECT_EQ(detail::HomeSlot(uint32_t{1}, 1u << 20), 0x514e28b7u & 0xfffff);
}

}  // namespace
}  // namespace gpujoin::engine::testing
