// Inner join: stable pairs in left order, generated and explicit left rows,
// capacity truncation keeping the stable prefix with the true count, propagated
// build overflow, several batches including empty ones; typed over the key word
// on every backend (uint64 keys above 2^32: KeyedBackendTest::Key).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "test_backends.hpp"

namespace gpujoin::engine::testing {
namespace {

using ::testing::ElementsAre;

// Fills outputs before a join so that an output it never writes shows.
constexpr uint32_t kPoison = 0xdeadbeefu;

template <class Config>
class JoinTest : public KeyedBackendTest<Config> {
 protected:
  using K = typename Config::K;
  void SetUp() override {
    KeyedBackendTest<Config>::SetUp();
    // No backend: skipped, or failed where GPUJOIN_REQUIRE_GPU is set.
    if (this->IsSkipped() || this->HasFatalFailure()) return;
    index_ = this->NewIndex(64);
    // Right side: key -> right row (generated, first_value 0); 30 appears twice (row 1 wins).
    right_keys_ = this->Keys({10, 30, 20, 30, 40});
    this->Build(*index_, One(right_keys_));
  }

  std::unique_ptr<HashIndex> index_;
  std::vector<K> right_keys_;
};
TYPED_TEST_SUITE(JoinTest, KeyedBackends, KeyedBackendNames);

TYPED_TEST(JoinTest, PairsInLeftOrderWithGeneratedLeftRows) {
  using K = typename TestFixture::K;
  [[maybe_unused]] constexpr K kEmpty = TestFixture::kEmpty;
  const std::vector<K> left = {this->Key(40), this->Key(99), this->Key(30), this->Key(10),
                               this->Key(30), kEmpty,        this->Key(20)};
  std::vector<uint32_t> out_left(10, 777), out_right(10, 777);
  // Poisoned, so that a join that never writes them (or writes only some rows) fails.
  std::vector<uint8_t> found(left.size(), 0xab);
  std::vector<uint32_t> probes(left.size(), kPoison);
  JoinResult result;
  CommandGraph graph;
  JoinNodeT<K> join;
  join.index = this->index_.get();
  join.batches.push_back(
      JoinBatchT<K>{Cut(left, {2, 2, 5}), {}, 100, out_left, out_right, &result, found, probes});
  graph.Add(join);
  this->RunOk(graph);
  EXPECT_EQ(result.count, 5u);
  EXPECT_FALSE(result.overflow);
  EXPECT_EQ(result.statistics.found, 5u);
  EXPECT_EQ(result.statistics.missing, 2u);
  EXPECT_THAT(std::vector<uint32_t>(out_left.begin(), out_left.begin() + 5),
              ElementsAre(100, 102, 103, 104, 106));
  EXPECT_THAT(std::vector<uint32_t>(out_right.begin(), out_right.begin() + 5),
              ElementsAre(4, 1, 0, 1, 2));
  // Slots beyond count are left untouched.
  EXPECT_EQ(out_left[5], 777u);
  EXPECT_THAT(found, ElementsAre(1, 0, 1, 1, 1, 0, 1));
  // Every row's probes, exactly: the contract's count on this table, and the
  // lookup's on the same index (reproduces a join that never wrote `probes`).
  const TableSnapshotOf<K> table = SnapshotAs<K>(*this->index_);
  const auto lookup = this->Lookup(*this->index_, One(left));
  QueryStatistics expect_stats{5, 2, 0, 0};
  for (size_t i = 0; i < left.size(); ++i) {
    const ContractRow row = ContractLookup(table, left[i], 64);
    EXPECT_EQ(probes[i], row.probes) << "row " << i;
    EXPECT_EQ(probes[i], lookup.probes[i]) << "row " << i;
    expect_stats.total_probes += row.probes;
    expect_stats.max_probes = std::max<uint64_t>(expect_stats.max_probes, row.probes);
  }
  EXPECT_EQ(probes[5], 0u) << "the reserved key examines no slot";
  EXPECT_EQ(result.statistics, expect_stats);
  EXPECT_EQ(result.statistics, lookup.statistics);
}

// Outputs of one join batch.
struct BoundedJoin {
  std::vector<uint32_t> out_left, out_right, probes;
  std::vector<uint8_t> found;
  JoinResult result;
};

TYPED_TEST(JoinTest, TheJoinsProbeBoundLimitsWhatItFinds) {
  using K = typename TestFixture::K;
  [[maybe_unused]] constexpr K kEmpty = TestFixture::kEmpty;
  // Reproduces a join that ignores JoinNode::max_probe_count (the query's bound).
  // Four keys of home 5 fill slots 5..8 (sorted by key); a key of home 6 is
  // pushed behind them to slot 9. With a bound of 2 only the first two home-5
  // keys are reachable; every other key stops after 2 slots.
  const uint32_t capacity = 16;
  auto index = this->NewIndex(capacity);
  const std::vector<K> h = KeysWithHomeOf<K>(capacity, 5, 5);  // ascending; h[4] stays absent
  const K g = KeysWithHomeOf<K>(capacity, 6, 1)[0];
  // Generated values (first_value 0) = build row: g 0, h[2] 1, h[0] 2, h[3] 3, h[1] 4.
  const std::vector<K> right = {g, h[2], h[0], h[3], h[1]};
  this->Build(*index, One(right));
  const TableSnapshotOf<K> table = SnapshotAs<K>(*index);
  ASSERT_EQ(table.keys.size(), capacity);
  EXPECT_THAT(std::vector<K>(table.keys.begin() + 5, table.keys.begin() + 10),
              ElementsAre(h[0], h[1], h[2], h[3], g));

  //                                    row: 100   101 102   103   104        105   106   107
  const std::vector<K> left = {h[3], g, h[0], h[4], kEmpty, h[1], h[2], h[0]};
  auto run = [&](uint32_t max_probe_count) {
    BoundedJoin out;
    out.out_left.assign(left.size(), kPoison);
    out.out_right.assign(left.size(), kPoison);
    out.probes.assign(left.size(), kPoison);
    out.found.assign(left.size(), 0xab);
    out.result = JoinResult{99, true, {9, 9, 9, 9}};
    CommandGraph graph;
    JoinNodeT<K> join;
    join.index = index.get();
    join.max_probe_count = max_probe_count;
    join.batches.push_back(JoinBatchT<K>{
        Cut(left, {3}), {}, 100, out.out_left, out.out_right, &out.result, out.found, out.probes});
    graph.Add(join);
    this->RunOk(graph);
    return out;
  };

  const BoundedJoin bounded = run(2);
  EXPECT_THAT(bounded.found, ElementsAre(0, 0, 1, 0, 0, 1, 0, 1));
  EXPECT_THAT(bounded.probes, ElementsAre(2, 2, 1, 2, 0, 2, 2, 1));
  EXPECT_EQ(bounded.result.count, 3u);
  EXPECT_FALSE(bounded.result.overflow);
  EXPECT_EQ(bounded.result.statistics, (QueryStatistics{3, 5, 12, 2}));
  EXPECT_THAT(std::vector<uint32_t>(bounded.out_left.begin(), bounded.out_left.begin() + 3),
              ElementsAre(102, 105, 107));
  EXPECT_THAT(std::vector<uint32_t>(bounded.out_right.begin(), bounded.out_right.begin() + 3),
              ElementsAre(2, 4, 2));
  EXPECT_EQ(bounded.out_left[3], kPoison) << "pairs past the count are left untouched";

  // The index's own bound (capacity) when the join gives none: every stored key is found.
  const BoundedJoin unbounded = run(0);
  EXPECT_THAT(unbounded.found, ElementsAre(1, 1, 1, 0, 0, 1, 1, 1));
  // h[4] (absent, after h[3] in slot 8) stops at slot 9, where g comes after it.
  EXPECT_THAT(unbounded.probes, ElementsAre(4, 4, 1, 5, 0, 2, 3, 1));
  EXPECT_EQ(unbounded.result.count, 6u);
  EXPECT_EQ(unbounded.result.statistics, (QueryStatistics{6, 2, 20, 5}));
  EXPECT_THAT(std::vector<uint32_t>(unbounded.out_left.begin(), unbounded.out_left.begin() + 6),
              ElementsAre(100, 101, 102, 105, 106, 107));
  EXPECT_THAT(std::vector<uint32_t>(unbounded.out_right.begin(), unbounded.out_right.begin() + 6),
              ElementsAre(3, 0, 2, 4, 1, 2));

  // Both agree with the lookup under the same bounds.
  for (uint32_t b : {2u, 0u}) {
    SCOPED_TRACE(::testing::Message() << "max_probe_count " << b);
    const auto lookup = this->Lookup(*index, One(left), b);
    const BoundedJoin& join = b == 2 ? bounded : unbounded;
    EXPECT_EQ(join.found, lookup.found);
    EXPECT_EQ(join.probes, lookup.probes);
    EXPECT_EQ(join.result.statistics, lookup.statistics);
  }
}

TYPED_TEST(JoinTest, ABoundedJoinOverManyRowsMatchesTheBoundedContract) {
  using K = typename TestFixture::K;
  [[maybe_unused]] constexpr K kEmpty = TestFixture::kEmpty;
  // Reproduces a join that ignores its probe bound on the parallel paths (CPU
  // parts across threads, CUDA found masks per 32 rows): a table at load 0.85,
  // where many keys sit 2 or more slots from home, joined with a bound of 2.
  // Per row the contract gives min(probes, 2) slots and a match only within them.
  const uint32_t capacity = 1u << 12;
  const uint32_t bound = 2;
  auto index = this->NewIndex(capacity);
  std::vector<K> right(3482);  // 0.85 x 4096
  for (uint32_t i = 0; i < right.size(); ++i) right[i] = this->Key(i * 7 + 1);
  this->Build(*index, One(right));
  const TableSnapshotOf<K> table = SnapshotAs<K>(*index);
  std::mt19937 rng(17);
  std::vector<K> left(150000);
  for (auto& k : left) {
    const uint32_t r = rng() % 16;
    k = r == 0 ? kEmpty : (r < 12 ? right[rng() % right.size()] : this->Key(rng() | 1u));
  }
  std::vector<uint32_t> out_left(left.size(), kPoison), out_right(left.size(), kPoison);
  std::vector<uint32_t> probes(left.size(), kPoison);
  std::vector<uint8_t> found(left.size(), 0xab);
  JoinResult result;
  CommandGraph graph;
  JoinNodeT<K> join;
  join.index = index.get();
  join.max_probe_count = bound;
  join.batches.push_back(
      JoinBatchT<K>{Cut(left, {4097, 70001}), {}, 0, out_left, out_right, &result, found, probes});
  graph.Add(join);
  this->RunOk(graph);

  QueryStatistics expect_stats;
  uint64_t pairs = 0, cut_off = 0;  // cut_off: stored keys the bound hides
  for (uint32_t i = 0; i < left.size(); ++i) {
    const ContractRow row = ContractLookup(table, left[i], bound);
    cut_off += !row.found && ContractLookup(table, left[i], capacity).found;
    ASSERT_EQ(found[i], row.found ? 1 : 0) << "row " << i;
    ASSERT_EQ(probes[i], row.probes) << "row " << i;
    expect_stats.total_probes += row.probes;
    expect_stats.max_probes = std::max<uint64_t>(expect_stats.max_probes, row.probes);
    if (!row.found) {
      ++expect_stats.missing;
      continue;
    }
    ++expect_stats.found;
    ASSERT_EQ(out_left[pairs], i) << "pair " << pairs;
    ASSERT_EQ(out_right[pairs], row.value) << "pair " << pairs;
    ++pairs;
  }
  EXPECT_GT(cut_off, left.size() / 10) << "the bound must hide many stored keys";
  EXPECT_EQ(result.count, pairs);
  EXPECT_FALSE(result.overflow);
  EXPECT_EQ(result.statistics, expect_stats);
  EXPECT_EQ(out_left[pairs], kPoison);
}

TYPED_TEST(JoinTest, ExplicitLeftRowsAndCapacityTruncationKeepTheStablePrefix) {
  using K = typename TestFixture::K;
  [[maybe_unused]] constexpr K kEmpty = TestFixture::kEmpty;
  const std::vector<K> left = this->Keys({20, 10, 77, 40, 30});
  const std::vector<uint32_t> left_rows = {9, 8, 7, 6, 5};
  std::vector<uint32_t> out_left(2), out_right(2);
  JoinResult result;
  CommandGraph graph;
  JoinNodeT<K> join;
  join.index = this->index_.get();
  join.batches.push_back(
      JoinBatchT<K>{One(left), left_rows, 0, out_left, out_right, &result, {}, {}});
  graph.Add(join);
  this->RunOk(graph);
  EXPECT_EQ(result.count, 4u) << "count is the required capacity before truncation";
  EXPECT_TRUE(result.overflow);
  EXPECT_THAT(out_left, ElementsAre(9, 8));
  EXPECT_THAT(out_right, ElementsAre(2, 0));
}

TYPED_TEST(JoinTest, ZeroCapacityStillCounts) {
  using K = typename TestFixture::K;
  [[maybe_unused]] constexpr K kEmpty = TestFixture::kEmpty;
  const std::vector<K> left = this->Keys({10, 20});
  JoinResult result;
  CommandGraph graph;
  JoinNodeT<K> join;
  join.index = this->index_.get();
  join.batches.push_back(JoinBatchT<K>{One(left), {}, 0, {}, {}, &result, {}, {}});
  graph.Add(join);
  this->RunOk(graph);
  EXPECT_EQ(result.count, 2u);
  EXPECT_TRUE(result.overflow);
}

TYPED_TEST(JoinTest, BuildOverflowPropagatesToEveryBatch) {
  using K = typename TestFixture::K;
  [[maybe_unused]] constexpr K kEmpty = TestFixture::kEmpty;
  auto small = this->NewIndex(2);
  const std::vector<K> right = this->Keys({1, 2, 3});
  ASSERT_EQ(this->Build(*small, One(right)).overflow_rows, 1u);
  const std::vector<K> left = this->Keys({1});
  std::vector<uint32_t> out_left(4), out_right(4);
  JoinResult result;
  CommandGraph graph;
  JoinNodeT<K> join;
  join.index = small.get();
  join.batches.push_back(JoinBatchT<K>{One(left), {}, 0, out_left, out_right, &result, {}, {}});
  graph.Add(join);
  this->RunOk(graph);
  EXPECT_LE(result.count, 1u);
  EXPECT_TRUE(result.overflow) << "an index that dropped keys cannot give a complete join";
}

TYPED_TEST(JoinTest, SeveralBatchesIncludingEmptyOnesHaveTheirOwnResults) {
  using K = typename TestFixture::K;
  [[maybe_unused]] constexpr K kEmpty = TestFixture::kEmpty;
  const std::vector<K> b0 = this->Keys({30, 30});
  const std::vector<K> b2 = this->Keys({99, 40, 10});
  std::vector<uint32_t> l0(4), r0(4), l1(4), r1(4), l2(1), r2(1);
  JoinResult res0, res1{5, true, {1, 1, 1, 1}}, res2;
  CommandGraph graph;
  JoinNodeT<K> join;
  join.index = this->index_.get();
  join.batches.push_back(JoinBatchT<K>{One(b0), {}, 0, l0, r0, &res0, {}, {}});
  join.batches.push_back(JoinBatchT<K>{{}, {}, 0, l1, r1, &res1, {}, {}});
  join.batches.push_back(JoinBatchT<K>{One(b2), {}, 50, l2, r2, &res2, {}, {}});
  graph.Add(join);
  this->RunOk(graph);
  EXPECT_EQ(res0.count, 2u);
  EXPECT_FALSE(res0.overflow);
  EXPECT_THAT(std::vector<uint32_t>(l0.begin(), l0.begin() + 2), ElementsAre(0, 1));
  EXPECT_THAT(std::vector<uint32_t>(r0.begin(), r0.begin() + 2), ElementsAre(1, 1));
  // The empty batch gets a cleared result.
  EXPECT_EQ(res1.count, 0u);
  EXPECT_FALSE(res1.overflow);
  EXPECT_EQ(res1.statistics, QueryStatistics{});
  EXPECT_EQ(res2.count, 2u);
  EXPECT_TRUE(res2.overflow);
  EXPECT_THAT(l2, ElementsAre(51));
  EXPECT_THAT(r2, ElementsAre(4));
  EXPECT_EQ(res2.statistics.found, 2u);
  EXPECT_EQ(res2.statistics.missing, 1u);
}

TYPED_TEST(JoinTest, LargeJoinMatchesLookupOrder) {
  using K = typename TestFixture::K;
  [[maybe_unused]] constexpr K kEmpty = TestFixture::kEmpty;
  // Enough rows to split across threads: every third left row matches.
  auto index = this->NewIndex(1u << 12);
  std::vector<K> right(1000);
  for (uint32_t i = 0; i < right.size(); ++i) right[i] = this->Key(i * 3);
  this->Build(*index, One(right));
  std::vector<K> left(100000);
  for (uint32_t i = 0; i < left.size(); ++i) left[i] = this->Key(i % 3000);
  std::vector<uint32_t> out_left(left.size()), out_right(left.size());
  JoinResult result;
  CommandGraph graph;
  JoinNodeT<K> join;
  join.index = index.get();
  join.batches.push_back(
      JoinBatchT<K>{Cut(left, {333, 50000}), {}, 0, out_left, out_right, &result, {}, {}});
  graph.Add(join);
  this->RunOk(graph);
  uint64_t expected = 0;
  for (uint32_t i = 0; i < left.size(); ++i) {
    if ((i % 3000) % 3 != 0) continue;
    ASSERT_EQ(out_left[expected], i);
    ASSERT_EQ(out_right[expected], (i % 3000) / 3);
    ++expected;
  }
  EXPECT_EQ(result.count, expected);
  EXPECT_FALSE(result.overflow);
}

}  // namespace
}  // namespace gpujoin::engine::testing
