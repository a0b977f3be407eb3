// Inner join: stable pairs in left order, generated and explicit left rows,
// capacity truncation keeping the stable prefix with the true count, propagated
// build overflow, several batches including empty ones.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "test_backends.hpp"

namespace gpujoin::engine::testing {
namespace {

using ::testing::ElementsAre;

class JoinTest : public BackendTest {
 protected:
  void SetUp() override {
    BackendTest::SetUp();
    if (IsSkipped()) return;
    index_ = NewIndex(64);
    // Right side: key -> right row (generated, first_value 0); 30 appears twice (row 1 wins).
    right_keys_ = {10, 30, 20, 30, 40};
    Build(*index_, One(right_keys_));
  }

  std::unique_ptr<HashIndex> index_;
  std::vector<uint32_t> right_keys_;
};

TEST_P(JoinTest, PairsInLeftOrderWithGeneratedLeftRows) {
  const std::vector<uint32_t> left = {40, 99, 30, 10, 30, kEmptyKey, 20};
  std::vector<uint32_t> out_left(10, 777), out_right(10, 777);
  std::vector<uint8_t> found(left.size());
  std::vector<uint32_t> probes(left.size());
  JoinResult result;
  CommandGraph graph;
  JoinNode join;
  join.index = index_.get();
  join.batches.push_back(
      JoinBatch{Cut(left, {2, 2, 5}), {}, 100, out_left, out_right, &result, found, probes});
  graph.Add(join);
  RunOk(graph);
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
  EXPECT_EQ(probes[5], 0u);
}

TEST_P(JoinTest, ExplicitLeftRowsAndCapacityTruncationKeepTheStablePrefix) {
  const std::vector<uint32_t> left = {20, 10, 77, 40, 30};
  const std::vector<uint32_t> left_rows = {9, 8, 7, 6, 5};
  std::vector<uint32_t> out_left(2), out_right(2);
  JoinResult result;
  CommandGraph graph;
  JoinNode join;
  join.index = index_.get();
  join.batches.push_back(JoinBatch{One(left), left_rows, 0, out_left, out_right, &result, {}, {}});
  graph.Add(join);
  RunOk(graph);
  EXPECT_EQ(result.count, 4u) << "count is the required capacity before truncation";
  EXPECT_TRUE(result.overflow);
  EXPECT_THAT(out_left, ElementsAre(9, 8));
  EXPECT_THAT(out_right, ElementsAre(2, 0));
}

TEST_P(JoinTest, ZeroCapacityStillCounts) {
  const std::vector<uint32_t> left = {10, 20};
  JoinResult result;
  CommandGraph graph;
  JoinNode join;
  join.index = index_.get();
  join.batches.push_back(JoinBatch{One(left), {}, 0, {}, {}, &result, {}, {}});
  graph.Add(join);
  RunOk(graph);
  EXPECT_EQ(result.count, 2u);
  EXPECT_TRUE(result.overflow);
}

TEST_P(JoinTest, BuildOverflowPropagatesToEveryBatch) {
  auto small = NewIndex(2);
  const std::vector<uint32_t> right = {1, 2, 3};
  ASSERT_EQ(Build(*small, One(right)).overflow_rows, 1u);
  const std::vector<uint32_t> left = {1};
  std::vector<uint32_t> out_left(4), out_right(4);
  JoinResult result;
  CommandGraph graph;
  JoinNode join;
  join.index = small.get();
  join.batches.push_back(JoinBatch{One(left), {}, 0, out_left, out_right, &result, {}, {}});
  graph.Add(join);
  RunOk(graph);
  EXPECT_LE(result.count, 1u);
  EXPECT_TRUE(result.overflow) << "an index that dropped keys cannot give a complete join";
}

TEST_P(JoinTest, SeveralBatchesIncludingEmptyOnesHaveTheirOwnResults) {
  const std::vector<uint32_t> b0 = {30, 30};
  const std::vector<uint32_t> b2 = {99, 40, 10};
  std::vector<uint32_t> l0(4), r0(4), l1(4), r1(4), l2(1), r2(1);
  JoinResult res0, res1{5, true, {1, 1, 1, 1}}, res2;
  CommandGraph graph;
  JoinNode join;
  join.index = index_.get();
  join.batches.push_back(JoinBatch{One(b0), {}, 0, l0, r0, &res0, {}, {}});
  join.batches.push_back(JoinBatch{{}, {}, 0, l1, r1, &res1, {}, {}});
  join.batches.push_back(JoinBatch{One(b2), {}, 50, l2, r2, &res2, {}, {}});
  graph.Add(join);
  RunOk(graph);
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

TEST_P(JoinTest, LargeJoinMatchesLookupOrder) {
  // Enough rows to split across threads: every third left row matches.
  auto index = NewIndex(1u << 12);
  std::vector<uint32_t> right(1000);
  for (uint32_t i = 0; i < right.size(); ++i) right[i] = i * 3;
  Build(*index, One(right));
  std::vector<uint32_t> left(100000);
  for (uint32_t i = 0; i < left.size(); ++i) left[i] = i % 3000;
  std::vector<uint32_t> out_left(left.size()), out_right(left.size());
  JoinResult result;
  CommandGraph graph;
  JoinNode join;
  join.index = index.get();
  join.batches.push_back(
      JoinBatch{Cut(left, {333, 50000}), {}, 0, out_left, out_right, &result, {}, {}});
  graph.Add(join);
  RunOk(graph);
  uint64_t expected = 0;
  for (uint32_t i = 0; i < left.size(); ++i) {
    if (left[i] % 3 != 0) continue;
    ASSERT_EQ(out_left[expected], i);
    ASSERT_EQ(out_right[expected], left[i] / 3);
    ++expected;
  }
  EXPECT_EQ(result.count, expected);
  EXPECT_FALSE(result.overflow);
}

INSTANTIATE_TEST_SUITE_P(Backends, JoinTest, ::testing::ValuesIn(AllBackends()), BackendName);

}  // namespace
}  // namespace gpujoin::engine::testing
