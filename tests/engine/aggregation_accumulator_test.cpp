// AggregationAccumulator (merging partial results across runs) and FloatLess.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "gpujoin/engine/aggregation.hpp"

namespace gpujoin::engine {
namespace {

using ::testing::ElementsAre;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

TEST(FloatLessTest, NegativeZeroBelowPositiveZero) {
  EXPECT_TRUE(FloatLess(-0.0f, 0.0f));
  EXPECT_FALSE(FloatLess(0.0f, -0.0f));
  EXPECT_FALSE(FloatLess(0.0f, 0.0f));
  EXPECT_FALSE(FloatLess(-0.0f, -0.0f));
  EXPECT_TRUE(FloatLess(-1.0f, -0.0f));
  EXPECT_TRUE(FloatLess(0.0f, 1e-38f));
  EXPECT_FALSE(FloatLess(2.0f, 1.0f));
}

TEST(AggregationAccumulatorTest, CountsWrapModulo2To32) {
  AggregationAccumulator acc(AggregateOp::kCount, 2);
  const std::vector<uint32_t> a = {0xffffffffu, 3}, b = {2, 4};
  ASSERT_TRUE(acc.Merge(a, {}).ok());
  ASSERT_TRUE(acc.Merge(b, {}).ok());
  EXPECT_THAT(acc.counts(), ElementsAre(1, 7));
  EXPECT_TRUE(acc.Values().empty());
}

TEST(AggregationAccumulatorTest, MeanIsMergedSumOverMergedCount) {
  AggregationAccumulator acc(AggregateOp::kMean, 3);
  EXPECT_EQ(acc.partial_op(), AggregateOp::kSum);
  const std::vector<uint32_t> c1 = {1, 0, 0}, c2 = {2, 0, 1};
  const std::vector<float> s1 = {3.0f, 0.0f, 0.0f}, s2 = {6.0f, 0.0f, -4.0f};
  ASSERT_TRUE(acc.Merge(c1, s1).ok());
  ASSERT_TRUE(acc.Merge(c2, s2).ok());
  const auto v = acc.Values();
  EXPECT_EQ(v[0], 3.0f);
  EXPECT_TRUE(std::isnan(v[1]));
  EXPECT_EQ(v[2], -4.0f);
}

TEST(AggregationAccumulatorTest, MinMaxSkipEmptyPartialsAndOrderZeros) {
  AggregationAccumulator mn(AggregateOp::kMin, 3), mx(AggregateOp::kMax, 3);
  EXPECT_EQ(mn.partial_op(), AggregateOp::kMin);
  const std::vector<uint32_t> c = {1, 1, 0};
  const std::vector<float> p1 = {0.0f, 5.0f, kNaN}, p2 = {-0.0f, kNaN, kNaN};
  for (auto* acc : {&mn, &mx}) {
    ASSERT_TRUE(acc->Merge(c, p1).ok());
    ASSERT_TRUE(acc->Merge(c, p2).ok());
  }
  EXPECT_TRUE(std::signbit(mn.Values()[0]));
  EXPECT_FALSE(std::signbit(mx.Values()[0]));
  EXPECT_EQ(mn.Values()[1], 5.0f);
  EXPECT_TRUE(std::isnan(mn.Values()[2]));
}

TEST(AggregationAccumulatorTest, SizeMismatchesNameTheField) {
  AggregationAccumulator acc(AggregateOp::kSum, 2);
  const std::vector<uint32_t> c3 = {1, 2, 3}, c2 = {1, 2};
  const std::vector<float> v1 = {1.0f};
  absl::Status s = acc.Merge(c3, v1);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("counts has 3 groups"));
  s = acc.Merge(c2, v1);
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("values has 1 groups"));
  AggregationAccumulator count(AggregateOp::kCount, 2);
  EXPECT_EQ(count.Merge(c2, v1).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gpujoin::engine
