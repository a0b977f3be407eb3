// Backends are thread-safe: several graphs may run at once against one built
// index (the service runs one graph per request). Every concurrent run must give
// the same answer as a run on its own.
#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "test_backends.hpp"

namespace gpujoin::engine::testing {
namespace {

class ConcurrencyTest : public BackendTest {};

TEST_P(ConcurrencyTest, ConcurrentLookupsJoinsAndAggregationsAgreeWithASoloRun) {
  auto index = NewIndex(1u << 14);
  std::mt19937 rng(42);
  std::vector<uint32_t> right(6000);
  for (auto& k : right) k = rng() % 20000;
  Build(*index, One(right));
  std::vector<uint32_t> left(50000);
  for (auto& k : left) k = rng() % 20000;
  std::vector<uint32_t> group_keys(50000);
  for (auto& k : group_keys) k = rng() % 100;

  struct Answer {
    std::vector<uint32_t> values, out_left, out_right;
    std::vector<uint64_t> counts;
    QueryStatistics stats;
    JoinResult join;
    bool ok = false;
  };
  auto run = [&](Answer& a) {
    a.values.assign(left.size(), 0);
    a.out_left.assign(left.size(), 0);
    a.out_right.assign(left.size(), 0);
    a.counts.assign(100, 0);
    CommandGraph g;
    LookupNode lookup;
    lookup.index = index.get();
    lookup.keys = One(left);
    lookup.values = a.values;
    lookup.statistics = &a.stats;
    g.Add(lookup);
    JoinNode join;
    join.index = index.get();
    join.batches.push_back(JoinBatch{One(left), {}, 0, a.out_left, a.out_right, &a.join, {}, {}});
    g.Add(join);
    AggregateNode agg;
    agg.op = AggregateOp::kCount;
    agg.keys = One(group_keys);
    agg.output = a.counts;
    g.Add(agg);
    a.ok = backend_->Run(g).ok();
  };

  Answer solo;
  run(solo);
  ASSERT_TRUE(solo.ok);
  std::vector<Answer> answers(6);
  std::vector<std::thread> threads;
  for (auto& a : answers) threads.emplace_back([&run, &a] { run(a); });
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < answers.size(); ++i) {
    SCOPED_TRACE(::testing::Message() << "thread " << i);
    ASSERT_TRUE(answers[i].ok);
    EXPECT_EQ(answers[i].values, solo.values);
    EXPECT_EQ(answers[i].stats, solo.stats);
    EXPECT_EQ(answers[i].join.count, solo.join.count);
    EXPECT_EQ(answers[i].out_left, solo.out_left);
    EXPECT_EQ(answers[i].out_right, solo.out_right);
    EXPECT_EQ(answers[i].counts, solo.counts);
  }
}

TEST_P(ConcurrencyTest, ConcurrentBuildsOfSeparateIndexes) {
  std::vector<std::unique_ptr<HashIndex>> indexes;
  for (int i = 0; i < 4; ++i) indexes.push_back(NewIndex(1024));
  std::vector<std::vector<uint32_t>> keys(4);
  std::vector<BuildStatistics> stats(4);
  std::vector<char> ok(4, 0);  // not vector<bool>: threads write neighbouring entries
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    keys[i].resize(500);
    for (uint32_t r = 0; r < 500; ++r) keys[i][r] = r * (i + 1);
    threads.emplace_back([&, i] {
      CommandGraph g;
      g.Add(BuildIndexNode{indexes[i].get(), One(keys[i]), std::nullopt, 0, &stats[i]});
      ok[i] = backend_->Run(g).ok();
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(ok[i]);
    EXPECT_EQ(stats[i].unique_keys, 500u);
    const std::vector<uint32_t> q = {499u * (i + 1)};
    EXPECT_EQ(Lookup(*indexes[i], One(q)).values[0], 499u);
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, ConcurrencyTest, ::testing::ValuesIn(AllBackends()),
                         BackendName);

}  // namespace
}  // namespace gpujoin::engine::testing
