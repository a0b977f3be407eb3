// Index build and aligned lookup: the edge cases of the reference contract
// (empty build, one row, duplicates in and across chunks, differing key/value
// chunk boundaries, generated IDs, the reserved key, batch row bases and validity
// masks, overflow at the probe bound and at full capacity), typed over the key
// word on every backend: uint32, and uint64 with every key above 2^32 (Key()).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "gpujoin/engine/detail/slot_hash.hpp"
#include "test_backends.hpp"

namespace gpujoin::engine::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;

template <class Config>
class BuildLookupTest : public KeyedBackendTest<Config> {};
TYPED_TEST_SUITE(BuildLookupTest, KeyedBackends, KeyedBackendNames);

TYPED_TEST(BuildLookupTest, EmptyBuildHasZeroStatisticsAndFindsNothing) {
  using K = typename TestFixture::K;
  auto index = this->NewIndex(16);
  ASSERT_NE(index, nullptr);
  EXPECT_FALSE(index->built());
  const BuildStatistics stats = this->template Build<K>(*index, {});
  EXPECT_EQ(stats, BuildStatistics{});
  EXPECT_TRUE(index->built());
  EXPECT_EQ(index->built_rows(), 0u);
  const std::vector<K> q = {this->Key(1), this->Key(2), TestFixture::kEmpty};
  const auto out = this->Lookup(*index, One(q));
  EXPECT_THAT(out.values, ElementsAre(kEmptyKey, kEmptyKey, kEmptyKey));
  EXPECT_THAT(out.found, ElementsAre(0, 0, 0));
  // An empty table: a real key stops at its (empty) home slot; the reserved key examines none.
  EXPECT_THAT(out.probes, ElementsAre(1, 1, 0));
  EXPECT_EQ(out.statistics, (QueryStatistics{0, 3, 2, 1}));
}

TYPED_TEST(BuildLookupTest, EmptyBuildClearsAPreviousTableAndStatistics) {
  using K = typename TestFixture::K;
  auto index = this->NewIndex(8);
  const std::vector<K> keys = this->Keys({4, 5, 6});
  this->Build(*index, One(keys));
  EXPECT_EQ(index->build_statistics().unique_keys, 3u);
  // An empty build given as several empty chunks.
  const std::vector<K> none;
  const BuildStatistics stats = this->Build(*index, Chunked<K>{std::span(none), std::span(none)});
  EXPECT_EQ(stats, BuildStatistics{});
  EXPECT_EQ(index->build_statistics(), BuildStatistics{});
  const TableSnapshotOf<K> snap = SnapshotAs<K>(*index);
  EXPECT_EQ(snap.keys.size(), 8u);
  EXPECT_TRUE(std::all_of(snap.keys.begin(), snap.keys.end(),
                          [](K k) { return k == TestFixture::kEmpty; }));
  const auto out = this->Lookup(*index, One(keys));
  EXPECT_THAT(out.found, ElementsAre(0, 0, 0));
}

TYPED_TEST(BuildLookupTest, OneRow) {
  using K = typename TestFixture::K;
  auto index = this->NewIndex(1);
  const std::vector<K> keys = this->Keys({42});
  const std::vector<uint32_t> values = {7};
  const BuildStatistics stats = this->Build(*index, One(keys), One(values));
  EXPECT_EQ(stats, (BuildStatistics{1, 0, 0, 0, 1, 1}));
  const std::vector<K> q = this->Keys({42, 43});
  const auto out = this->Lookup(*index, One(q));
  EXPECT_THAT(out.values, ElementsAre(7, kEmptyKey));
  EXPECT_THAT(out.found, ElementsAre(1, 0));
  // Capacity 1: 43 examines the single (occupied) slot, then the bound ends the probe.
  EXPECT_THAT(out.probes, ElementsAre(1, 1));
  EXPECT_EQ(out.statistics, (QueryStatistics{1, 1, 2, 1}));
}

TYPED_TEST(BuildLookupTest, DuplicatesInsideOneChunkKeepTheLowestRow) {
  using K = typename TestFixture::K;
  auto index = this->NewIndex(16);
  const std::vector<K> keys = this->Keys({5, 7, 5, 5, 7, 9});
  const std::vector<uint32_t> values = {10, 20, 30, 40, 50, 60};
  const BuildStatistics stats = this->Build(*index, One(keys), One(values));
  EXPECT_EQ(stats.unique_keys, 3u);
  EXPECT_EQ(stats.duplicate_rows, 3u);
  EXPECT_EQ(stats.overflow_rows, 0u);
  EXPECT_EQ(stats.invalid_rows, 0u);
  const std::vector<K> q = this->Keys({9, 7, 5});
  EXPECT_THAT(this->Lookup(*index, One(q)).values, ElementsAre(60, 20, 10));
}

TYPED_TEST(BuildLookupTest, DuplicatesAcrossChunksWithDifferentKeyAndValueBoundaries) {
  using K = typename TestFixture::K;
  auto index = this->NewIndex(32);
  //                                          row: 0  1  2  3  4  5  6  7
  const std::vector<K> keys = this->Keys({3, 1, 4, 1, 5, 9, 3, 4});
  const std::vector<uint32_t> values = {100, 101, 102, 103, 104, 105, 106, 107};
  // Keys cut after rows 2, 2 (an empty chunk) and 5; values after 1, 6 and 6.
  const BuildStatistics stats = this->Build(*index, Cut(keys, {2, 2, 5}), Cut(values, {1, 6, 6}));
  EXPECT_EQ(stats.unique_keys, 5u);
  EXPECT_EQ(stats.duplicate_rows, 3u);
  EXPECT_EQ(index->built_rows(), 8u);
  const std::vector<K> q = this->Keys({1, 3, 4, 5, 9, 2});
  EXPECT_THAT(this->Lookup(*index, Cut(q, {0, 3})).values,
              ElementsAre(101, 100, 102, 104, 105, kEmptyKey));
}

TYPED_TEST(BuildLookupTest, GeneratedValuesUseFirstValuePlusGlobalRowAndWrap) {
  using K = typename TestFixture::K;
  auto index = this->NewIndex(8);
  const std::vector<K> keys = this->Keys({10, 11, 12, 10});
  this->Build(*index, Cut(keys, {1, 1, 3}), std::nullopt, 0xfffffffeu);
  const std::vector<K> q = this->Keys({10, 11, 12});
  EXPECT_THAT(this->Lookup(*index, One(q)).values, ElementsAre(0xfffffffeu, 0xffffffffu, 0u));
}

TYPED_TEST(BuildLookupTest, ReservedKeyRowsAreInvalidAndNeverInserted) {
  using K = typename TestFixture::K;
  constexpr K kEmpty = TestFixture::kEmpty;
  const uint32_t capacity = 8;
  auto index = this->NewIndex(capacity);
  // Two valid keys of one home, the larger first: the smaller takes the home slot
  // and carries the larger on to the next one.
  const std::vector<K> home2 = KeysWithHomeOf<K>(capacity, 2, 2);
  const std::vector<K> keys = {kEmpty, home2[1], kEmpty, home2[0]};
  const BuildStatistics stats = this->Build(*index, One(keys));
  EXPECT_EQ(stats.invalid_rows, 2u);
  EXPECT_EQ(stats.unique_keys, 2u);
  // Invalid rows examine no slot; each stored key adds its displacement + 1,
  // exactly: 1 + 2 (reproduces a build that counted a probe for a reserved row).
  EXPECT_EQ(stats.total_probes, 3u);
  EXPECT_EQ(stats.max_probes, 2u);
  const StoredKeyProbes stored = StoredProbes(SnapshotAs<K>(*index));
  EXPECT_EQ(stored.keys, 2u);
  EXPECT_EQ(stored.total, stats.total_probes);
  const std::vector<K> q = {home2[0], kEmpty, home2[1]};
  const auto out = this->Lookup(*index, One(q));
  EXPECT_THAT(out.values, ElementsAre(3, kEmptyKey, 1));
  EXPECT_THAT(out.found, ElementsAre(1, 0, 1));
  EXPECT_THAT(out.probes, ElementsAre(1, 0, 2));
  EXPECT_EQ(out.statistics, (QueryStatistics{2, 1, 3, 2}));
}

TYPED_TEST(BuildLookupTest, AllRowsInvalid) {
  using K = typename TestFixture::K;
  auto index = this->NewIndex(4);
  const std::vector<K> keys(5, TestFixture::kEmpty);
  EXPECT_EQ(this->Build(*index, One(keys)), (BuildStatistics{0, 0, 0, 5, 0, 0}));
}

TYPED_TEST(BuildLookupTest, OverflowAtTheProbeBound) {
  using K = typename TestFixture::K;
  const uint32_t capacity = 8;
  auto index = this->NewIndex(capacity, /*max_probe_count=*/2);
  // Four distinct keys with the same home slot: two fit within the bound of 2.
  const std::vector<K> keys = KeysWithHomeOf<K>(capacity, 3, 4);
  const BuildStatistics stats = this->Build(*index, One(keys));
  EXPECT_EQ(stats.unique_keys, 2u);
  EXPECT_EQ(stats.overflow_rows, 2u);
  EXPECT_EQ(stats.max_probes, 2u);
  // Sequential insertion: probes 1, 2, then 2 and 2 for the overflowed rows.
  if (this->IsCpu()) EXPECT_EQ(stats.total_probes, 7u);
  const auto out = this->Lookup(*index, One(keys));
  EXPECT_EQ(out.statistics.found, 2u);
  EXPECT_EQ(out.statistics.missing, 2u);
  EXPECT_EQ(out.statistics.max_probes, 2u);
  for (size_t i = 0; i < keys.size(); ++i) {
    EXPECT_LE(out.probes[i], 2u);
    if (!out.found[i])
      EXPECT_EQ(out.probes[i], 2u) << "a miss in a full probe window uses the bound";
  }
  if (this->IsCpu()) EXPECT_THAT(out.found, ElementsAre(1, 1, 0, 0));
}

TYPED_TEST(BuildLookupTest, OverflowAtFullCapacityCountsEveryExtraDistinctRow) {
  using K = typename TestFixture::K;
  auto index = this->NewIndex(4);
  const std::vector<K> keys = this->Keys({1, 2, 3, 4, 5, 6, 5});
  const BuildStatistics stats = this->Build(*index, One(keys));
  EXPECT_EQ(stats.unique_keys, 4u);
  if (this->IsCpu()) {
    // Sequential order: rows of keys that found no slot (5, 6 and 5 again) all overflow.
    EXPECT_EQ(stats.overflow_rows, 3u);
    EXPECT_EQ(stats.duplicate_rows, 0u);
  } else {
    // The retained subset is unspecified on parallel backends.
    EXPECT_EQ(stats.overflow_rows + stats.duplicate_rows, 3u);
  }
  EXPECT_EQ(stats.max_probes, 4u);
  EXPECT_EQ(stats.unique_keys + stats.duplicate_rows + stats.overflow_rows + stats.invalid_rows,
            keys.size());
  // A key absent from a full table examines exactly the bound.
  const std::vector<K> q = this->Keys({77});
  const auto out = this->Lookup(*index, One(q));
  EXPECT_THAT(out.probes, ElementsAre(4));
  EXPECT_EQ(out.statistics, (QueryStatistics{0, 1, 4, 4}));
  EXPECT_DOUBLE_EQ(index->load_factor(), 1.0);
}

TYPED_TEST(BuildLookupTest, QueryProbeBoundOverride) {
  using K = typename TestFixture::K;
  const uint32_t capacity = 16;
  auto index = this->NewIndex(capacity);
  const std::vector<K> keys = KeysWithHomeOf<K>(capacity, 5, 4);
  this->Build(*index, One(keys));
  // With a query bound of 1 only the key in its home slot is reachable.
  const auto out = this->Lookup(*index, One(keys), /*max_probe_count=*/1);
  EXPECT_EQ(out.statistics.found, 1u);
  EXPECT_EQ(out.statistics.missing, 3u);
  EXPECT_EQ(out.statistics.total_probes, 4u);
  EXPECT_EQ(out.statistics.max_probes, 1u);
  // The default bound (capacity) finds all of them.
  EXPECT_EQ(this->Lookup(*index, One(keys)).statistics.found, 4u);
}

TYPED_TEST(BuildLookupTest, EmptyQueryClearsItsStatistics) {
  using K = typename TestFixture::K;
  auto index = this->NewIndex(8);
  const std::vector<K> keys = this->Keys({1});
  this->Build(*index, One(keys));
  QueryStatistics stats{9, 9, 9, 9};
  CommandGraph graph;
  LookupNodeT<K> node;
  node.index = index.get();
  node.statistics = &stats;
  graph.Add(node);
  this->RunOk(graph);
  EXPECT_EQ(stats, QueryStatistics{});
}

TYPED_TEST(BuildLookupTest, BatchBuildUsesRowBasesValidityAndEarliestChunkWins) {
  using K = typename TestFixture::K;
  auto index = this->NewIndex(32);
  const std::vector<K> k0 = this->Keys({7, 8, 9});
  const std::vector<uint32_t> v0 = {1, 0, 1};
  const std::vector<K> k1 = {};
  const std::vector<K> k2 = {this->Key(9), this->Key(8), this->Key(10), TestFixture::kEmpty};
  BuildStatistics stats;
  CommandGraph graph;
  BuildBatchIndexNodeT<K> node;
  node.index = index.get();
  // The later chunk has a lower row base: the winner is still the earlier chunk's row.
  node.chunks = {BatchChunkT<K>{k0, 1000, v0}, BatchChunkT<K>{k1, 5, {}},
                 BatchChunkT<K>{k2, 10, {}}};
  node.statistics = &stats;
  graph.Add(node);
  this->RunOk(graph);
  // 8 is masked out in chunk 0, so chunk 2's 8 (row base 10, position 1) is its first valid row.
  EXPECT_EQ(stats.unique_keys, 4u);
  EXPECT_EQ(stats.duplicate_rows, 1u);
  EXPECT_EQ(stats.invalid_rows, 2u);
  EXPECT_EQ(index->built_rows(), 7u);
  const std::vector<K> q = this->Keys({7, 8, 9, 10});
  EXPECT_THAT(this->Lookup(*index, One(q)).values, ElementsAre(1000, 11, 1002, 12));
}

TYPED_TEST(BuildLookupTest, BuildAndLookupInOneGraph) {
  using K = typename TestFixture::K;
  auto index = this->NewIndex(16);
  const std::vector<K> keys = this->Keys({11, 22, 33});
  const std::vector<K> q = this->Keys({33, 44});
  std::vector<uint32_t> values(2);
  BuildStatistics build_stats;
  QueryStatistics query_stats;
  CommandGraph graph;
  graph.Add(BuildIndexNodeT<K>{index.get(), One(keys), std::nullopt, 50, &build_stats});
  LookupNodeT<K> lookup;
  lookup.index = index.get();
  lookup.keys = One(q);
  lookup.values = values;
  lookup.statistics = &query_stats;
  graph.Add(lookup);
  this->RunOk(graph);
  EXPECT_THAT(values, ElementsAre(52, kEmptyKey));
  EXPECT_EQ(build_stats.unique_keys, 3u);
  EXPECT_EQ(query_stats.found, 1u);
}

TYPED_TEST(BuildLookupTest, SnapshotIsTheRobinHoodLayoutOnEveryBackend) {
  using K = typename TestFixture::K;
  const uint32_t capacity = 8;
  auto index = this->NewIndex(capacity);
  // Three keys of home 7 (the run wraps around to 0 and 1), inserted in
  // descending key order: the layout sorts keys of one home by key anyway.
  std::vector<K> keys = KeysWithHomeOf<K>(capacity, 7, 3);
  std::reverse(keys.begin(), keys.end());
  const BuildStatistics stats = this->Build(*index, One(keys));
  // Each key adds its final displacement + 1, however often it moved: 1 + 2 + 3.
  EXPECT_EQ(stats.total_probes, 6u);
  EXPECT_EQ(stats.max_probes, 3u);
  const TableSnapshotOf<K> snap = SnapshotAs<K>(*index);
  ASSERT_EQ(snap.keys.size(), capacity);
  EXPECT_EQ(snap.keys[7], keys[2]);
  EXPECT_EQ(snap.keys[0], keys[1]);
  EXPECT_EQ(snap.keys[1], keys[0]);
  // Generated values: the rows of keys[2], keys[1], keys[0] are 2, 1, 0.
  EXPECT_THAT(snap.values, ElementsAreArray({1u, 0u, 0u, 0u, 0u, 0u, 0u, 2u}));
}

TYPED_TEST(BuildLookupTest, RunsAreSortedByHomeThenKeyAndMissesStopAtTheFirstLaterKey) {
  using K = typename TestFixture::K;
  const uint32_t capacity = 16;
  auto index = this->NewIndex(capacity);
  const std::vector<K> home5 = KeysWithHomeOf<K>(capacity, 5, 4);  // ascending
  const std::vector<K> home6 = KeysWithHomeOf<K>(capacity, 6, 1);
  // Build home5[1], home5[2] and home6[0], with the home-6 key first: the two
  // home-5 keys displace it to slot 7.
  const std::vector<K> keys = {home6[0], home5[2], home5[1]};
  const BuildStatistics stats = this->Build(*index, One(keys));
  EXPECT_EQ(stats.unique_keys, 3u);
  // Each key adds its final displacement + 1: home5[1] 1, home5[2] 2, home6[0] 2.
  EXPECT_EQ(stats.total_probes, 5u);
  EXPECT_EQ(stats.max_probes, 2u);
  const TableSnapshotOf<K> snap = SnapshotAs<K>(*index);
  ASSERT_EQ(snap.keys.size(), capacity);
  EXPECT_EQ(snap.keys[5], home5[1]);
  EXPECT_EQ(snap.keys[6], home5[2]);
  EXPECT_EQ(snap.keys[7], home6[0]);
  EXPECT_EQ(snap.keys[8], TestFixture::kEmpty);
  // home5[0] < home5[1]: it would sit in slot 5, so the miss stops there (1 probe).
  // home5[3] > home5[2]: it would sit in slot 7, where a home-6 key is (3 probes),
  // not at the empty slot 8 as plain linear probing would.
  const std::vector<K> q = {home5[0], home5[3], home5[2], home6[0]};
  const auto out = this->Lookup(*index, One(q));
  EXPECT_THAT(out.found, ElementsAre(0, 0, 1, 1));
  EXPECT_THAT(out.probes, ElementsAre(1, 3, 2, 2));
  EXPECT_THAT(out.values, ElementsAre(kEmptyKey, kEmptyKey, 1, 0));
}

TYPED_TEST(BuildLookupTest, AKeyDisplacedPastTheBoundBecomesTheOverflowRow) {
  using K = typename TestFixture::K;
  const uint32_t capacity = 16;
  auto index = this->NewIndex(capacity, /*max_probe_count=*/2);
  const std::vector<K> home3 = KeysWithHomeOf<K>(capacity, 3, 3);  // ascending
  // The largest key first: each smaller key then takes its place and carries it
  // on, until it is pushed past the bound. The two smallest keys are retained.
  const std::vector<K> keys = {home3[2], home3[1], home3[0], home3[2]};
  const BuildStatistics stats = this->Build(*index, One(keys));
  EXPECT_EQ(stats.unique_keys, 2u);
  if (this->IsCpu()) {
    // In source order: the row that stored home3[2] becomes an overflow row when
    // home3[2] is dropped, and its repeat finds no slot either.
    EXPECT_EQ(stats.overflow_rows, 2u);
    EXPECT_EQ(stats.duplicate_rows, 0u);
  } else {
    // In parallel the repeat may merge into home3[2] (a duplicate) before the drop.
    EXPECT_EQ(stats.overflow_rows + stats.duplicate_rows, 2u);
    EXPECT_GE(stats.overflow_rows, 1u);
  }
  EXPECT_EQ(stats.max_probes, 2u);
  const auto out = this->Lookup(*index, One(home3));
  EXPECT_THAT(out.found, ElementsAre(1, 1, 0));
  EXPECT_THAT(out.values, ElementsAre(2, 1, kEmptyKey));
  EXPECT_THAT(out.probes, ElementsAre(1, 2, 2));
}

TYPED_TEST(BuildLookupTest, IndexReportsItsBackendKeyTypeAndMemory) {
  using K = typename TestFixture::K;
  auto index = this->NewIndex(1024);
  EXPECT_EQ(index->backend(), this->Param().kind);
  EXPECT_EQ(index->key_type(), KeyTypeOf<K>());
  EXPECT_GE(index->memory_bytes(), 1024u * (sizeof(K) == 8 ? 16u : 8u));
  EXPECT_EQ(index->spec().probe_bound(), 1024u);
}

}  // namespace
}  // namespace gpujoin::engine::testing
