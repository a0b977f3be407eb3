// AggregationAccumulator (merging partial results across runs) and FloatLess.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <bit>
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

// Float32 partial words of `values`.
std::vector<uint64_t> F32(std::initializer_list<float> values) {
  std::vector<uint64_t> words;
  for (float v : values) words.push_back(WordOfFloat32(v));
  return words;
}

TEST(AggregationAccumulatorTest, CountsWrapModulo2To32) {
  AggregationAccumulator acc(AggregateOp::kCount, 2);
  const std::vector<uint32_t> a = {0xffffffffu, 3}, b = {2, 4};
  ASSERT_TRUE(acc.Merge(a, {}, {}).ok());
  ASSERT_TRUE(acc.Merge(b, {}, {}).ok());
  EXPECT_THAT(acc.counts(), ElementsAre(1, 7));
  EXPECT_THAT(acc.Words(), ElementsAre(1, 7));  // count's words are its counts
}

TEST(AggregationAccumulatorTest, MeanIsMergedSumOverMergedCount) {
  AggregationAccumulator acc(AggregateOp::kMean, 3);
  EXPECT_EQ(acc.partial_op(), AggregateOp::kSum);
  const std::vector<uint32_t> c1 = {1, 0, 0}, c2 = {2, 0, 1};
  ASSERT_TRUE(acc.Merge(c1, F32({3.0f, 0.0f, 0.0f}), {}).ok());
  ASSERT_TRUE(acc.Merge(c2, F32({6.0f, 0.0f, -4.0f}), {}).ok());
  const auto v = Float32sOfWords(acc.Words());
  EXPECT_EQ(v[0], 3.0f);
  EXPECT_TRUE(std::isnan(v[1]));
  EXPECT_EQ(v[2], -4.0f);
}

TEST(AggregationAccumulatorTest, Float32MeanDividesByTheWrappedCount) {
  // The reference: the float32 sum over the uint32 count, which wraps.
  AggregationAccumulator acc(AggregateOp::kMean, 1);
  const std::vector<uint32_t> big = {0xffffffffu}, two = {2};
  ASSERT_TRUE(acc.Merge(big, F32({1.0f}), {}).ok());
  ASSERT_TRUE(acc.Merge(two, F32({2.0f}), {}).ok());
  EXPECT_EQ(Float32OfWord(acc.Words()[0]), 3.0f);  // 3 / (2^32 + 1 mod 2^32)
  EXPECT_THAT(acc.counts64(), ElementsAre(uint64_t{0x100000001}));
}

TEST(AggregationAccumulatorTest, MinMaxSkipEmptyPartialsAndOrderZeros) {
  AggregationAccumulator mn(AggregateOp::kMin, 3), mx(AggregateOp::kMax, 3);
  EXPECT_EQ(mn.partial_op(), AggregateOp::kMin);
  const std::vector<uint32_t> c = {1, 1, 0};
  const std::vector<uint64_t> p1 = F32({0.0f, 5.0f, kNaN}), p2 = F32({-0.0f, kNaN, kNaN});
  for (auto* acc : {&mn, &mx}) {
    ASSERT_TRUE(acc->Merge(c, p1, {}).ok());
    ASSERT_TRUE(acc->Merge(c, p2, {}).ok());
  }
  const auto lo = Float32sOfWords(mn.Words()), hi = Float32sOfWords(mx.Words());
  EXPECT_TRUE(std::signbit(lo[0]));
  EXPECT_FALSE(std::signbit(hi[0]));
  EXPECT_EQ(lo[1], 5.0f);
  EXPECT_TRUE(std::isnan(lo[2]));
}

TEST(AggregationAccumulatorTest, Float32EmptySumIsPositiveZero) {
  AggregationAccumulator sum(AggregateOp::kSum, 1);
  EXPECT_THAT(sum.Words(), ElementsAre(WordOfFloat32(0.0f)));
}

TEST(AggregationAccumulatorTest, SizeMismatchesNameTheField) {
  AggregationAccumulator acc(AggregateOp::kSum, 2);
  const std::vector<uint32_t> c3 = {1, 2, 3}, c2 = {1, 2};
  const std::vector<uint64_t> v1 = F32({1.0f});
  absl::Status s = acc.Merge(c3, v1, {});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("counts has 3 groups"));
  s = acc.Merge(c2, v1, {});
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("words 1"));
  AggregationAccumulator count(AggregateOp::kCount, 2);
  EXPECT_EQ(count.Merge(c2, F32({1.0f, 2.0f}), {}).code(), absl::StatusCode::kInvalidArgument);
}

// ---- typed accumulators

uint64_t W(int64_t v) { return static_cast<uint64_t>(v); }
uint64_t D(double v) { return std::bit_cast<uint64_t>(v); }

TEST(AggregationAccumulatorTest, Counts64AreExactBeyondTwoTo32) {
  AggregationAccumulator acc(AggregateOp::kCount, 1);
  const std::vector<uint32_t> big = {0xffffffffu};
  ASSERT_TRUE(acc.Merge(big, {}, {}).ok());
  ASSERT_TRUE(acc.Merge(big, {}, {}).ok());
  EXPECT_THAT(acc.counts(), ElementsAre(0xfffffffeu));  // the reference wrap
  EXPECT_THAT(acc.counts64(), ElementsAre(uint64_t{0x1fffffffe}));
}

TEST(AggregationAccumulatorTest, Int64SumsOverflowAcrossPartialsAndStayFlagged) {
  AggregationAccumulator acc(AggregateOp::kSum, 3, ColumnType::kInt64);
  const std::vector<uint32_t> c = {1, 1, 1};
  const int64_t mx = std::numeric_limits<int64_t>::max();
  const std::vector<uint64_t> a = {W(mx), W(mx), W(-5)};
  const std::vector<uint64_t> b = {W(1), W(0), W(7)};
  const std::vector<uint8_t> none = {0, 0, 0}, first = {1, 0, 0};
  ASSERT_TRUE(acc.Merge(c, a, none).ok());
  ASSERT_TRUE(acc.Merge(c, b, none).ok());
  // INT64_MAX + 1 across two partials: flagged, low 64 bits kept.
  EXPECT_THAT(acc.overflow(), ElementsAre(1, 0, 0));
  EXPECT_THAT(acc.Words(), ElementsAre(W(std::numeric_limits<int64_t>::min()), W(mx), W(2)));
  // Sticky: bringing the total back in range does not clear it; a partial's own
  // flag sets it.
  const std::vector<uint64_t> back = {W(-1), W(0), W(0)};
  ASSERT_TRUE(acc.Merge(c, back, none).ok());
  EXPECT_THAT(acc.overflow(), ElementsAre(1, 0, 0));
  AggregationAccumulator other(AggregateOp::kSum, 3, ColumnType::kInt64);
  ASSERT_TRUE(other.Merge(c, b, first).ok());
  EXPECT_THAT(other.overflow(), ElementsAre(1, 0, 0));
}

TEST(AggregationAccumulatorTest, Uint64SumsAndMeans) {
  AggregationAccumulator sum(AggregateOp::kSum, 1, ColumnType::kUint64);
  const std::vector<uint32_t> c = {2};
  const std::vector<uint64_t> half = {uint64_t{1} << 63};
  const std::vector<uint8_t> none = {0};
  ASSERT_TRUE(sum.Merge(c, half, none).ok());
  EXPECT_THAT(sum.overflow(), ElementsAre(0));
  ASSERT_TRUE(sum.Merge(c, half, none).ok());
  EXPECT_THAT(sum.overflow(), ElementsAre(1));
  AggregationAccumulator mean(AggregateOp::kMean, 2, ColumnType::kInt32);
  EXPECT_EQ(mean.partial_op(), AggregateOp::kSum);
  const std::vector<uint32_t> c1 = {1, 0}, c2 = {2, 0};
  const std::vector<uint64_t> s1 = {W(-3), 0}, s2 = {W(10), 0};
  const std::vector<uint8_t> f = {0, 0};
  ASSERT_TRUE(mean.Merge(c1, s1, f).ok());
  ASSERT_TRUE(mean.Merge(c2, s2, f).ok());
  const std::vector<uint64_t> m = mean.Words();
  EXPECT_EQ(std::bit_cast<double>(m[0]), 7.0 / 3.0);
  EXPECT_TRUE(std::isnan(std::bit_cast<double>(m[1])));
}

TEST(AggregationAccumulatorTest, TypedMinMaxSkipEmptyPartials) {
  AggregationAccumulator mn(AggregateOp::kMin, 2, ColumnType::kInt64);
  AggregationAccumulator mx(AggregateOp::kMax, 2, ColumnType::kUint64);
  const std::vector<uint32_t> c1 = {1, 0}, c2 = {1, 1};
  // An empty group's word is 0, which must not win a min or lose a max.
  const std::vector<uint64_t> p1 = {W(5), 0}, p2 = {W(-9), W(4)};
  ASSERT_TRUE(mn.Merge(c1, p1, {}).ok());
  ASSERT_TRUE(mn.Merge(c2, p2, {}).ok());
  EXPECT_THAT(mn.Words(), ElementsAre(W(-9), W(4)));
  const std::vector<uint64_t> q1 = {~uint64_t{0}, 0}, q2 = {uint64_t{1} << 63, 3};
  ASSERT_TRUE(mx.Merge(c1, q1, {}).ok());
  ASSERT_TRUE(mx.Merge(c2, q2, {}).ok());
  EXPECT_THAT(mx.Words(), ElementsAre(~uint64_t{0}, 3));  // unsigned order
}

TEST(AggregationAccumulatorTest, Float64MergesLikeFloat32) {
  AggregationAccumulator mn(AggregateOp::kMin, 2, ColumnType::kFloat64);
  const std::vector<uint32_t> c1 = {1, 0}, c2 = {1, 0};
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<uint64_t> p1 = {D(0.0), D(nan)}, p2 = {D(-0.0), D(nan)};
  ASSERT_TRUE(mn.Merge(c1, p1, {}).ok());
  ASSERT_TRUE(mn.Merge(c2, p2, {}).ok());
  EXPECT_EQ(mn.Words()[0], D(-0.0));
  EXPECT_TRUE(std::isnan(std::bit_cast<double>(mn.Words()[1])));
  AggregationAccumulator sum(AggregateOp::kSum, 1, ColumnType::kFloat64);
  EXPECT_EQ(sum.Words()[0], D(0.0));  // empty sum is +0
}

TEST(AggregationAccumulatorTest, OverflowFlagsBelongToIntegerSums) {
  AggregationAccumulator typed(AggregateOp::kSum, 1, ColumnType::kInt64);
  AggregationAccumulator f32(AggregateOp::kSum, 1);
  const std::vector<uint32_t> c = {1};
  const std::vector<uint64_t> w = {1};
  const std::vector<uint8_t> flag = {0};
  EXPECT_EQ(f32.Merge(c, w, flag).code(), absl::StatusCode::kInvalidArgument);
  // Integer sums need their flags.
  EXPECT_EQ(typed.Merge(c, w, {}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(typed.Merge(c, w, flag).ok());
}

}  // namespace
}  // namespace gpujoin::engine
