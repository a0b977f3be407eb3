// Plans of the device path's shape (gpujoin/engine/plan_device.hpp)
// on every backend against the CPU backend's host path, on fresh random
// inputs: uint32 and uint64 indexes with nullable int32, uint32, int64,
// float32 and float64 payload; input keys with nulls, negatives and values
// beyond the key word; one or two lookups of every kind; random filters with
// SQL nulls, NaN and literals of every numeric kind; group-bys on input,
// payload and found columns, labelled strings through index A's dictionary;
// every measure the device takes. The plans run
// as the backend's lowered batch (on the GPU for CUDA, over the CPU
// backend's nodes for the CPU), the reference step by step on the host path
// (PlanLimits::device_batches off): groups, their order, counts, integer
// sums, minima and maxima must be equal, float sums close
// (plan_trials.hpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "gpujoin/engine/plan.hpp"
#include "gpujoin/engine/plan_device.hpp"
#include "plan_trials.hpp"
#include "test_backends.hpp"

namespace gpujoin::engine::testing {
namespace {

class PlanDeviceTest : public BackendTest {};

TEST_P(PlanDeviceTest, RandomDevicePlansEqualTheHostPath) {
  auto reference = CreateBackend(BackendKind::kCpu);
  ASSERT_TRUE(reference.ok());
  std::mt19937_64 rng(std::random_device{}());
  const uint64_t seed = rng();
  rng.seed(seed);
  for (int trial = 0; trial < 120; ++trial) {
    const Trial t = RandomTrial(rng, trial % 2 == 0);
    const std::string what = "seed " + std::to_string(seed) + " trial " + std::to_string(trial);
    std::vector<ColumnType> input_types;
    for (const PlanColumn& c : t.batches[0].columns) input_types.push_back(c.type);
    const Indexes mine = BuildIndexes(*backend_, t);
    const Indexes theirs = BuildIndexes(**reference, t);
    const std::vector<const HashIndex*> indexes = {mine.a.get(), mine.b.get()};
    ASSERT_TRUE(DevicePlanShapeOf(t.plan, input_types, indexes).has_value()) << what;
    const RunResult got = RunPlan(*backend_, t, mine, PlanLimits{});
    const RunResult want = RunPlan(**reference, t, theirs, HostPath());
    ExpectSameRun(got, want, what);
    if (HasFatalFailure()) return;
    for (size_t b = 0; b < want.statistics.size(); ++b) {
      for (size_t s = 0; s < want.statistics[b].size(); ++s) {
        EXPECT_FALSE(want.statistics[b][s].on_device) << what;
        // The plan's first step runs in the backend's lowered batch.
        if (s == 0) EXPECT_TRUE(got.statistics[b][s].on_device) << what;
      }
    }
  }
}

// More distinct groups than the limit: RESOURCE_EXHAUSTED naming it, and the
// batch adds nothing (a later batch within the limit still aggregates).
TEST_P(PlanDeviceTest, TheGroupLimitHoldsAndAFailedBatchAddsNothing) {
  Plan plan;
  PlanAggregateStep agg;
  agg.group_by = {0};
  agg.measures = {{AggregateOp::kCount, PlanMeasure::kNoColumn}, {AggregateOp::kSum, 1}};
  plan.steps.emplace_back(agg);
  plan.aggregate_input_types = {ColumnType::kInt32, ColumnType::kFloat64};
  PlanLimits limits;
  limits.max_groups = 3;
  limits.groups_limit_name = "--test-groups";
  ASSERT_TRUE(DevicePlanShapeOf(plan, plan.aggregate_input_types, {}).has_value());
  PlanRun run(backend_.get(), plan, limits);
  const auto table = [](std::vector<int32_t> groups) {
    PlanTable t;
    t.rows = groups.size();
    PlanColumn g, v;
    g.type = ColumnType::kInt32;
    g.rows = t.rows;
    g.data.resize(t.rows * 4);
    std::memcpy(g.data.data(), groups.data(), t.rows * 4);
    v.type = ColumnType::kFloat64;
    v.rows = t.rows;
    v.data.resize(t.rows * 8);
    for (uint64_t r = 0; r < t.rows; ++r) {
      const double x = 1.5;
      std::memcpy(v.data.data() + r * 8, &x, 8);
    }
    t.columns = {g, v};
    return t;
  };
  std::vector<PlanStepStatistics> stats;
  ASSERT_TRUE(run.RunBatch(table({7, 7, 9}), {}, &stats).ok());
  auto over = run.RunBatch(table({1, 2, 3, 4, 5, 7}), {}, &stats);
  ASSERT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted) << over.status();
  EXPECT_NE(over.status().message().find("--test-groups"), std::string::npos) << over.status();
  ASSERT_TRUE(run.RunBatch(table({9, 5}), {}, &stats).ok());
  auto groups = run.Groups({}, &stats);
  ASSERT_TRUE(groups.ok()) << groups.status();
  ASSERT_EQ(groups->rows, 3u);
  const int32_t keys[] = {7, 9, 5};
  const uint64_t counts[] = {2, 2, 1};
  for (uint64_t r = 0; r < 3; ++r) {
    EXPECT_EQ(groups->columns[0].value<int32_t>(r), keys[r]);
    EXPECT_EQ(groups->columns[1].value<uint64_t>(r), counts[r]);
    EXPECT_DOUBLE_EQ(groups->columns[2].value<double>(r), 1.5 * counts[r]);
  }
}

// One batch with more groups than come back with the step counters (4096),
// and one with more distinct keys than the limit in itself: the device's
// group table stops there and the batch fails as on the host, adding nothing.
TEST_P(PlanDeviceTest, ManyGroupsInOneBatch) {
  Plan plan;
  PlanAggregateStep agg;
  agg.group_by = {0};
  agg.measures = {{AggregateOp::kCount, PlanMeasure::kNoColumn}, {AggregateOp::kMin, 1}};
  plan.steps.emplace_back(agg);
  plan.aggregate_input_types = {ColumnType::kUint32, ColumnType::kInt32};
  const auto batch = [](uint64_t rows, uint32_t distinct) {
    PlanTable t;
    t.rows = rows;
    PlanColumn g, v;
    g.type = ColumnType::kUint32;
    v.type = ColumnType::kInt32;
    g.rows = v.rows = rows;
    g.data.resize(rows * 4);
    v.data.resize(rows * 4);
    for (uint64_t r = 0; r < rows; ++r) {
      const uint32_t key = static_cast<uint32_t>((r * 7919) % distinct) * 3;
      const int32_t value = static_cast<int32_t>(r % 1000) - 500;
      std::memcpy(g.data.data() + r * 4, &key, 4);
      std::memcpy(v.data.data() + r * 4, &value, 4);
    }
    t.columns = {g, v};
    return t;
  };
  auto reference = CreateBackend(BackendKind::kCpu);
  ASSERT_TRUE(reference.ok());
  PlanLimits limits;
  limits.max_groups = 10000;
  PlanLimits host = limits;
  host.device_batches = false;
  PlanRun mine(backend_.get(), plan, limits), theirs(reference->get(), plan, host);
  std::vector<PlanStepStatistics> stats;
  for (PlanRun* run : {&mine, &theirs}) {
    ASSERT_TRUE(run->RunBatch(batch(30000, 9000), {}, &stats).ok());
    auto over = run->RunBatch(batch(40000, 20000), {}, &stats);
    ASSERT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted) << over.status();
  }
  auto got = mine.Groups({}, &stats);
  auto want = theirs.Groups({}, &stats);
  ASSERT_TRUE(got.ok() && want.ok());
  ASSERT_EQ(want->rows, 9000u);
  ExpectSameTable(*got, *want, "groups", true);
}

INSTANTIATE_TEST_SUITE_P(Backends, PlanDeviceTest, ::testing::ValuesIn(AllBackends()), BackendName);

}  // namespace
}  // namespace gpujoin::engine::testing
