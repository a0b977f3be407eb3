// The CPU backend's results do not depend on its thread count: every output of
// a mixed graph (build statistics, per-row probes, lookup values, join pairs and
// every aggregation, including order-sensitive float sums) is bit-identical for
// 1, 2, 3 and 8 threads.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "gpujoin/engine/aggregation.hpp"
#include "gpujoin/engine/backend.hpp"

namespace gpujoin::engine {
namespace {

struct Outputs {
  BuildStatistics build;
  std::vector<uint32_t> values, probes, out_left, out_right, contributing;
  std::vector<uint64_t> counts;
  std::vector<uint8_t> found;
  QueryStatistics lookup_stats;
  JoinResult join;
  std::vector<std::vector<float>> aggregates;  // sum, min, max, mean for two group counts

  bool operator==(const Outputs& o) const {
    auto same_floats = [](const std::vector<float>& a, const std::vector<float>& b) {
      return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
    };
    if (aggregates.size() != o.aggregates.size()) return false;
    for (size_t i = 0; i < aggregates.size(); ++i) {
      if (!same_floats(aggregates[i], o.aggregates[i])) return false;
    }
    return build == o.build && values == o.values && probes == o.probes && out_left == o.out_left &&
           out_right == o.out_right && counts == o.counts && contributing == o.contributing &&
           found == o.found && lookup_stats == o.lookup_stats && join.count == o.join.count &&
           join.overflow == o.join.overflow && join.statistics == o.join.statistics;
  }
};

Outputs RunAll(uint32_t threads, uint32_t seed) {
  std::mt19937 rng(seed);
  const size_t rows = 120000;
  std::vector<uint32_t> right(rows / 2), left(rows), group_keys(rows), mask(rows);
  std::vector<float> values(rows);
  for (auto& k : right) k = rng() % 100000;
  for (auto& k : left) k = rng() % 7 == 0 ? kEmptyKey : rng() % 150000;
  for (auto& k : group_keys) k = rng() % 9000;
  for (auto& m : mask) m = rng() % 5;
  for (auto& v : values) v = std::uniform_real_distribution<float>(-1e3f, 1e3f)(rng);

  Outputs out;
  auto backend = *CreateBackend(BackendKind::kCpu, BackendOptions{threads});
  // A tight probe bound makes overflow and bound-limited misses part of the picture.
  auto index = *backend->CreateIndex(HashIndexSpec{1u << 16, 8});
  out.values.resize(rows);
  out.probes.resize(rows);
  out.found.resize(rows);
  out.out_left.resize(rows / 3);
  out.out_right.resize(rows / 3);
  out.counts.resize(9000);
  out.contributing.resize(9000);

  CommandGraph g;
  g.Add(
      BuildIndexNode{index.get(), {std::span<const uint32_t>(right)}, std::nullopt, 5, &out.build});
  LookupNode lookup;
  lookup.index = index.get();
  lookup.keys = {std::span<const uint32_t>(left)};
  lookup.values = out.values;
  lookup.found = out.found;
  lookup.probes = out.probes;
  lookup.statistics = &out.lookup_stats;
  g.Add(lookup);
  JoinNode join;
  join.index = index.get();
  join.batches.push_back(JoinBatch{
      {std::span<const uint32_t>(left)}, {}, 0, out.out_left, out.out_right, &out.join, {}, {}});
  g.Add(join);
  AggregateNode count;
  count.op = AggregateOp::kCount;
  count.keys = {std::span<const uint32_t>(group_keys)};
  count.mask = ChunkedU32{std::span<const uint32_t>(mask)};
  count.output = out.counts;
  count.contributing_rows = out.contributing;
  g.Add(count);
  EXPECT_TRUE(backend->Run(g).ok());

  for (size_t groups : {size_t{50}, size_t{9000}}) {
    for (AggregateOp op :
         {AggregateOp::kSum, AggregateOp::kMin, AggregateOp::kMax, AggregateOp::kMean}) {
      std::vector<uint64_t> result(groups);
      AggregateNode agg;
      agg.op = op;
      agg.keys = {std::span<const uint32_t>(group_keys)};
      agg.values = ChunkedF32{std::span<const float>(values)};
      agg.output = result;
      CommandGraph a;
      a.Add(agg);
      EXPECT_TRUE(backend->Run(a).ok());
      out.aggregates.push_back(Float32sOfWords(result));
    }
  }
  return out;
}

TEST(CpuThreadCountTest, EveryOutputIsIdenticalForEveryThreadCount) {
  for (uint32_t seed : {11u, 12u}) {
    SCOPED_TRACE(::testing::Message() << "seed=" << seed);
    const Outputs reference = RunAll(1, seed);
    EXPECT_GT(reference.build.overflow_rows, 0u) << "the workload should exercise overflow";
    for (uint32_t threads : {2u, 3u, 8u}) {
      EXPECT_TRUE(RunAll(threads, seed) == reference) << "threads " << threads;
    }
  }
}

}  // namespace
}  // namespace gpujoin::engine
