// The random plans of plan_trials.hpp over batches of a repeated shape: on
// CUDA captured as CUDA Graphs and replayed (plan_program.hpp), with
// BackendOptions::cuda_plan_graphs on and off; every round must answer as
// the CPU backend's host path does on the same rows.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "common/plan/plan_table.hpp"  // engine/src: TakeRows
#include "gpujoin/engine/plan.hpp"
#include "plan_trials.hpp"
#include "test_backends.hpp"

#if defined(GPUJOIN_HAVE_CUDA)
#include "cuda/plan/plan_program.hpp"  // engine/src: PlanGraphCounters
#endif

namespace gpujoin::engine::testing {
namespace {

class PlanReplayTest : public BackendTest {};

// A batch's rows in another order: the same shape (rows, column types, a
// validity or not) with other values at each row.
PlanTable Shuffled(const PlanTable& t, std::mt19937_64& rng) {
  std::vector<uint32_t> order(t.rows);
  std::iota(order.begin(), order.end(), 0u);
  std::shuffle(order.begin(), order.end(), rng);
  PlanTable out = plan_detail::TakeRows(t, order);
  out.rows = t.rows;
  for (size_t c = 0; c < t.columns.size(); ++c) {
    // A shuffled column keeps its validity (so its shape) even without nulls.
    if (!t.columns[c].validity.empty() && out.columns[c].validity.empty()) {
      out.columns[c].validity.assign(BitmapBytes(t.rows), 0xff);
    }
  }
  return out;
}

struct GraphCount {
  uint64_t captures = 0, replays = 0, failures = 0;
};
GraphCount PlanGraphs() {
#if defined(GPUJOIN_HAVE_CUDA)
  const detail::GraphTotals t = detail::PlanGraphCounters();
  return {t.captures, t.replays, t.capture_failures};
#else
  return {};
#endif
}

// Each trial's batches run four times, in a new row order each time: on CUDA
// the first round runs as queued, the second captures each batch's shape, the
// later ones replay it (with cuda_plan_graphs off nothing is captured); every
// round answers as the CPU backend's host path does on the same rows.
TEST_P(PlanReplayTest, RepeatedShapesReplayTheSameAnswers) {
  auto reference = CreateBackend(BackendKind::kCpu);
  ASSERT_TRUE(reference.ok());
  const bool cuda = GetParam().kind == BackendKind::kCuda;
  std::mt19937_64 rng(std::random_device{}());
  const uint64_t seed = rng();
  rng.seed(seed);
  for (const bool graphs : {true, false}) {
    std::unique_ptr<Backend> plain;
    Backend* backend = backend_.get();
    if (!graphs) {
      if (!cuda) continue;
      BackendOptions options;
      options.cuda_plan_graphs = false;
      auto created = CreateBackend(BackendKind::kCuda, options);
      ASSERT_TRUE(created.ok()) << created.status();
      plain = std::move(*created);
      backend = plain.get();
    }
    const GraphCount before = PlanGraphs();
    for (int trial = 0; trial < 16; ++trial) {
      const Trial t = RandomTrial(rng, trial % 2 == 0);
      const Indexes mine = BuildIndexes(*backend, t);
      const Indexes theirs = BuildIndexes(**reference, t);
      for (int round = 0; round < 4; ++round) {
        const std::string what = "seed " + std::to_string(seed) + " trial " +
                                 std::to_string(trial) + " round " + std::to_string(round) +
                                 (graphs ? "" : " (graphs off)");
        Trial r = t;
        for (PlanTable& b : r.batches) b = Shuffled(b, rng);
        const RunResult got = RunPlan(*backend, r, mine, PlanLimits{});
        const RunResult want = RunPlan(**reference, r, theirs, HostPath());
        ExpectSameRun(got, want, what);
        if (HasFatalFailure()) return;
      }
    }
    const GraphCount after = PlanGraphs();
    EXPECT_EQ(after.failures, before.failures);
    if (cuda && graphs) {
      EXPECT_GT(after.captures, before.captures);
      EXPECT_GT(after.replays, before.replays);
    } else {
      EXPECT_EQ(after.captures, before.captures);
      EXPECT_EQ(after.replays, before.replays);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, PlanReplayTest, ::testing::ValuesIn(AllBackends()), BackendName);

}  // namespace
}  // namespace gpujoin::engine::testing
