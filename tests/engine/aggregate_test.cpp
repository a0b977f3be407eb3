// Grouped aggregation: masks, out-of-range keys, NaN/+-inf/-0 values, empty
// groups, count wrap-free basics, chunk boundaries that differ per column, and
// identical results for every CPU thread count.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "gpujoin/engine/aggregation.hpp"
#include "test_backends.hpp"

namespace gpujoin::engine::testing {
namespace {

using ::testing::ElementsAre;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr uint64_t kPoisonWord = 0xdeadbeefdeadbeefull;

class AggregateTest : public BackendTest {
 protected:
  // Runs a value op over single-chunk inputs and returns the output (and contributing rows).
  std::vector<float> RunValues(AggregateOp op, const std::vector<uint32_t>& keys,
                               const std::vector<float>& values, size_t groups,
                               const std::vector<uint32_t>* mask = nullptr,
                               std::vector<uint32_t>* contributing = nullptr) {
    std::vector<uint64_t> out(groups, kPoisonWord);
    AggregateNode node;
    node.op = op;
    node.keys = One(keys);
    node.values = ChunkedF32{std::span(values)};
    if (mask != nullptr) node.mask = One(*mask);
    node.output = out;
    if (contributing != nullptr) {
      contributing->assign(groups, 999);
      node.contributing_rows = *contributing;
    }
    CommandGraph graph;
    graph.Add(node);
    RunOk(graph);
    return Float32sOfWords(out);
  }

  std::vector<uint32_t> RunCount(const ChunkedU32& keys, size_t groups,
                                 std::optional<ChunkedU32> mask = std::nullopt) {
    std::vector<uint64_t> out(groups, kPoisonWord);
    AggregateNode node;
    node.op = AggregateOp::kCount;
    node.keys = keys;
    node.mask = std::move(mask);
    node.output = out;
    CommandGraph graph;
    graph.Add(node);
    RunOk(graph);
    return std::vector<uint32_t>(out.begin(), out.end());
  }
};

bool SameBits(float a, float b) {
  return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b) ||
         (std::isnan(a) && std::isnan(b));
}

TEST_P(AggregateTest, CountWithMaskAndOutOfRangeKeys) {
  const std::vector<uint32_t> keys = {0, 1, 1, 2, 5, kEmptyKey, 2, 2, 0};
  const std::vector<uint32_t> mask = {1, 1, 0, 7, 1, 1, 1, 0, 1};
  // Keys and mask chunked at different boundaries.
  EXPECT_THAT(RunCount(Cut(keys, {4, 4}), 3, Cut(mask, {1, 8})), ElementsAre(2, 1, 2));
  EXPECT_THAT(RunCount(One(keys), 4), ElementsAre(2, 2, 3, 0));
}

TEST_P(AggregateTest, EmptyInputGivesEmptyGroups) {
  EXPECT_THAT(RunCount({}, 2), ElementsAre(0, 0));
  const std::vector<uint32_t> none;
  std::vector<uint32_t> contributing;
  const auto sum = RunValues(AggregateOp::kSum, none, {}, 2, nullptr, &contributing);
  EXPECT_TRUE(SameBits(sum[0], 0.0f)) << "empty sum is +0";
  EXPECT_THAT(contributing, ElementsAre(0, 0));
  for (AggregateOp op : {AggregateOp::kMin, AggregateOp::kMax, AggregateOp::kMean}) {
    const auto out = RunValues(op, none, {}, 2);
    EXPECT_TRUE(std::isnan(out[0]) && std::isnan(out[1])) << AggregateOpName(op);
  }
}

TEST_P(AggregateTest, NonFiniteValuesAreIgnored) {
  const std::vector<uint32_t> keys = {0, 0, 0, 0, 1, 1};
  const std::vector<float> values = {1.5f, kNaN, kInf, -kInf, kNaN, kInf};
  std::vector<uint32_t> contributing;
  const auto sum = RunValues(AggregateOp::kSum, keys, values, 2, nullptr, &contributing);
  EXPECT_EQ(sum[0], 1.5f);
  EXPECT_TRUE(SameBits(sum[1], 0.0f)) << "group 1 only had non-finite values";
  EXPECT_THAT(contributing, ElementsAre(1, 0));
  EXPECT_EQ(RunValues(AggregateOp::kMin, keys, values, 2)[0], 1.5f);
  EXPECT_EQ(RunValues(AggregateOp::kMax, keys, values, 2)[0], 1.5f);
  const auto mean = RunValues(AggregateOp::kMean, keys, values, 2);
  EXPECT_EQ(mean[0], 1.5f);
  EXPECT_TRUE(std::isnan(mean[1]));
}

TEST_P(AggregateTest, NegativeZeroOrdersBelowPositiveZero) {
  const std::vector<uint32_t> keys = {0, 0, 1, 1, 2};
  const std::vector<float> values = {0.0f, -0.0f, -0.0f, 0.0f, -0.0f};
  const auto mn = RunValues(AggregateOp::kMin, keys, values, 3);
  const auto mx = RunValues(AggregateOp::kMax, keys, values, 3);
  EXPECT_TRUE(SameBits(mn[0], -0.0f));
  EXPECT_TRUE(SameBits(mn[1], -0.0f));
  EXPECT_TRUE(SameBits(mx[0], 0.0f));
  EXPECT_TRUE(SameBits(mx[1], 0.0f));
  EXPECT_TRUE(SameBits(mn[2], -0.0f));
  EXPECT_TRUE(SameBits(mx[2], -0.0f));
  // A sum over only -0 starts from the empty +0 and stays +0.
  EXPECT_TRUE(SameBits(RunValues(AggregateOp::kSum, keys, values, 3)[2], 0.0f));
}

TEST_P(AggregateTest, SumMinMaxMeanWithMask) {
  const std::vector<uint32_t> keys = {0, 1, 0, 1, 0, 3, 2};
  const std::vector<float> values = {1.0f, -2.0f, 4.0f, 8.0f, 100.0f, 5.0f, -1.0f};
  const std::vector<uint32_t> mask = {1, 1, 1, 1, 0, 1, 1};
  std::vector<uint32_t> contributing;
  EXPECT_THAT(RunValues(AggregateOp::kSum, keys, values, 3, &mask, &contributing),
              ElementsAre(5.0f, 6.0f, -1.0f));
  EXPECT_THAT(contributing, ElementsAre(2, 2, 1));
  EXPECT_THAT(RunValues(AggregateOp::kMin, keys, values, 3, &mask),
              ElementsAre(1.0f, -2.0f, -1.0f));
  EXPECT_THAT(RunValues(AggregateOp::kMax, keys, values, 3, &mask), ElementsAre(4.0f, 8.0f, -1.0f));
  EXPECT_THAT(RunValues(AggregateOp::kMean, keys, values, 3, &mask),
              ElementsAre(2.5f, 3.0f, -1.0f));
}

TEST_P(AggregateTest, MeanIsFloatSumOverFloatCount) {
  const std::vector<uint32_t> keys = {0, 0, 0};
  const std::vector<float> values = {0.1f, 0.2f, 0.4f};
  const float sum = (0.0f + 0.1f) + 0.2f + 0.4f;
  EXPECT_EQ(RunValues(AggregateOp::kMean, keys, values, 1)[0], sum / 3.0f);
}

TEST_P(AggregateTest, ManyGroupsAndRowsAgreeWithASequentialModel) {
  // Exercises both CPU strategies (striped partials and group ranges) with
  // integer-valued floats, whose sums are exact in any order.
  for (const size_t groups : {size_t{7}, size_t{5000}}) {
    std::mt19937 rng(1234);
    const size_t rows = 200000;
    std::vector<uint32_t> keys(rows), mask(rows);
    std::vector<float> values(rows);
    for (size_t r = 0; r < rows; ++r) {
      keys[r] = rng() % (groups + 3);
      mask[r] = rng() % 4;
      values[r] = static_cast<float>(static_cast<int>(rng() % 200) - 100);
    }
    std::vector<uint32_t> count(groups, 0);
    std::vector<float> sum(groups, 0.0f), mn(groups, kNaN), mx(groups, kNaN);
    for (size_t r = 0; r < rows; ++r) {
      if (mask[r] == 0 || keys[r] >= groups) continue;
      const uint32_t k = keys[r];
      ++count[k];
      sum[k] += values[r];
      if (std::isnan(mn[k]) || values[r] < mn[k]) mn[k] = values[r];
      if (std::isnan(mx[k]) || values[r] > mx[k]) mx[k] = values[r];
    }
    std::vector<uint32_t> contributing;
    EXPECT_EQ(RunValues(AggregateOp::kSum, keys, values, groups, &mask, &contributing), sum);
    EXPECT_EQ(contributing, count);
    EXPECT_EQ(RunValues(AggregateOp::kMin, keys, values, groups, &mask), mn);
    EXPECT_EQ(RunValues(AggregateOp::kMax, keys, values, groups, &mask), mx);
    EXPECT_EQ(RunCount(Cut(keys, {1, 70000}), groups, Cut(mask, {99999})), count);
  }
}

TEST_P(AggregateTest, ManyGroupSumsEqualTheSequentialRowOrderSumOnCpu) {
  // Above 4096 groups the CPU backend accumulates each group in source row order,
  // so even order-sensitive float sums equal a plain sequential loop bit for bit.
  if (!IsCpu()) GTEST_SKIP() << "float sum order is only specified for the CPU backend";
  std::mt19937 rng(77);
  const size_t groups = 6000, rows = 150000;
  std::vector<uint32_t> keys(rows);
  std::vector<float> values(rows);
  for (size_t r = 0; r < rows; ++r) {
    keys[r] = rng() % (groups + 50);
    values[r] = std::uniform_real_distribution<float>(-1e4f, 1e4f)(rng);
  }
  std::vector<float> sum(groups, 0.0f);
  std::vector<uint32_t> count(groups, 0);
  for (size_t r = 0; r < rows; ++r) {
    if (keys[r] >= groups) continue;
    sum[keys[r]] += values[r];
    ++count[keys[r]];
  }
  const auto got = RunValues(AggregateOp::kSum, keys, values, groups);
  const auto mean = RunValues(AggregateOp::kMean, keys, values, groups);
  for (size_t g = 0; g < groups; ++g) {
    ASSERT_TRUE(SameBits(got[g], sum[g])) << "group " << g;
    const float expect_mean = count[g] == 0 ? kNaN : sum[g] / static_cast<float>(count[g]);
    ASSERT_TRUE(SameBits(mean[g], expect_mean)) << "group " << g;
  }
}

TEST(AggregateCpuDeterminism, SumsAreIdenticalForEveryThreadCount) {
  // Non-integer values make float sums order dependent; the CPU backend's split
  // depends only on the input shape, so every thread count gives the same bits.
  std::mt19937 rng(99);
  const size_t rows = 300000;
  std::vector<uint32_t> keys(rows);
  std::vector<float> values(rows);
  for (size_t r = 0; r < rows; ++r) {
    keys[r] = rng() % 10;
    values[r] = std::uniform_real_distribution<float>(-1e3f, 1e3f)(rng);
  }
  std::vector<std::vector<float>> results;
  for (uint32_t threads : {1u, 2u, 5u}) {
    auto backend = CreateBackend(BackendKind::kCpu, BackendOptions{threads});
    ASSERT_TRUE(backend.ok());
    std::vector<uint64_t> out(10, kPoisonWord);
    AggregateNode node;
    node.op = AggregateOp::kSum;
    node.keys = One(keys);
    node.values = ChunkedF32{std::span(values)};
    node.output = out;
    CommandGraph graph;
    graph.Add(node);
    ASSERT_TRUE((*backend)->Run(graph).ok());
    results.push_back(Float32sOfWords(out));
  }
  EXPECT_EQ(results[0], results[1]);
  EXPECT_EQ(results[0], results[2]);
}

INSTANTIATE_TEST_SUITE_P(Backends, AggregateTest, ::testing::ValuesIn(AllBackends()), BackendName);

}  // namespace
}  // namespace gpujoin::engine::testing
