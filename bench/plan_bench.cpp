// gpujoin-plan-bench: what the plan machinery costs over its kernels, in the
// engine, on either backend. An index of --index-rows uint32 keys with an
// int32 payload column `group` (64 distinct values, the group of the row) and
// a batch of --rows probe rows (uint32 key, float64 latency; 90 % hit) run as
//   plan:    PlanRun: lookup (inner, select group) -> filter latency > 5 ->
//            aggregate by group: mean(latency)
//   kernels: the same work without the plan: one JoinNode gathering `group`,
//            then one AggregateNode (mean of latency, masked by latency > 5,
//            keyed by the gathered group, which is already a dense code);
// each --repeat times (medians), and prints rows/s of both and their ratio
// after checking that both give the same means. --graphs off turns CUDA Graph
// capture off (BackendOptions::cuda_plan_graphs, cuda_join_graphs and
// cuda_aggregate_graphs), on both sides; on (the default) small repeated
// batches replay as graphs on both. --host-path runs the plan's steps one by
// one on the host path instead of the backend's lowered batch
// (PlanLimits::device_batches off).
//
//   gpujoin-plan-bench [--backend cpu|cuda|auto] [--rows N] [--index-rows N] [--repeat R]
//                      [--graphs on|off] [--host-path]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gpujoin/engine/aggregation.hpp"
#include "gpujoin/engine/backend.hpp"
#include "gpujoin/engine/graph.hpp"
#include "gpujoin/engine/plan.hpp"

namespace {

using namespace gpujoin::engine;
using Clock = std::chrono::steady_clock;

[[noreturn]] void Die(const std::string& what, const absl::Status& s) {
  std::fprintf(stderr, "gpujoin-plan-bench: %s: %s\n", what.c_str(), s.ToString().c_str());
  std::exit(1);
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::string backend_name = "auto";
  uint64_t rows = uint64_t{1} << 24, index_rows = uint64_t{1} << 20;
  int repeat = 5;
  bool graphs = true;
  bool host_path = false;
  for (int i = 1; i < argc; ++i) {
    auto next = [&](const char* flag) -> const char* {
      if (std::strcmp(argv[i], flag) == 0 && i + 1 < argc) return argv[++i];
      return nullptr;
    };
    if (const char* v = next("--backend")) {
      backend_name = v;
    } else if (const char* v = next("--rows")) {
      rows = std::strtoull(v, nullptr, 10);
    } else if (const char* v = next("--index-rows")) {
      index_rows = std::strtoull(v, nullptr, 10);
    } else if (const char* v = next("--repeat")) {
      repeat = std::atoi(v);
    } else if (const char* v = next("--graphs")) {
      graphs = std::strcmp(v, "off") != 0;
    } else if (std::strcmp(argv[i], "--host-path") == 0) {
      host_path = true;
    } else {
      std::fprintf(stderr,
                   "usage: gpujoin-plan-bench [--backend cpu|cuda|auto] [--rows N] "
                   "[--index-rows N] [--repeat R] [--graphs on|off] [--host-path]\n");
      return 2;
    }
  }
  auto kind = ParseBackendKind(backend_name);
  if (!kind.ok()) Die("--backend", kind.status());
  BackendOptions options;
  options.cuda_plan_graphs = options.cuda_join_graphs = options.cuda_aggregate_graphs = graphs;
  auto created = CreateBackend(*kind, options);
  if (!created.ok()) Die("backend", created.status());
  Backend& b = **created;
  constexpr uint32_t kGroups = 64;

  // The index: keys 0..index_rows-1, group = key % 64.
  HashIndexSpec spec;
  auto capacity = CapacityForRows(index_rows, 0.5);
  if (!capacity.ok()) Die("--index-rows", capacity.status());
  spec.capacity = *capacity;
  auto index_or = b.CreateIndex(spec);
  if (!index_or.ok()) Die("index", index_or.status());
  std::unique_ptr<HashIndex> index = *std::move(index_or);
  std::vector<uint32_t> keys(index_rows);
  std::vector<int32_t> group(index_rows);
  for (uint64_t i = 0; i < index_rows; ++i) {
    keys[i] = static_cast<uint32_t>(i);
    group[i] = static_cast<int32_t>(i % kGroups);
  }
  {
    BuildIndexNode build;
    build.index = index.get();
    build.keys = ChunkedU32{std::span<const uint32_t>(keys)};
    build.payload.push_back(ColumnView{ColumnType::kInt32, index_rows,
                                       std::as_bytes(std::span<const int32_t>(group)), {}, {}});
    CommandGraph g;
    g.Add(std::move(build));
    if (auto s = b.Run(g); !s.ok()) Die("build", s);
  }

  // The probe batch.
  std::mt19937_64 rng(5);
  std::vector<uint32_t> probe(rows);
  std::vector<double> latency(rows);
  for (uint64_t i = 0; i < rows; ++i) {
    probe[i] = static_cast<uint32_t>(rng() % (index_rows + index_rows / 9));
    latency[i] = static_cast<double>(rng() % 1000) / 100.0;
  }
  PlanTable input;
  input.rows = rows;
  input.names = {"key", "latency"};
  PlanColumn key_col, lat_col;
  key_col.type = ColumnType::kUint32;
  key_col.rows = rows;
  key_col.data.resize(rows * 4);
  std::memcpy(key_col.data.data(), probe.data(), rows * 4);
  lat_col.type = ColumnType::kFloat64;
  lat_col.rows = rows;
  lat_col.data.resize(rows * 8);
  std::memcpy(lat_col.data.data(), latency.data(), rows * 8);
  input.columns = {key_col, lat_col};

  Plan plan;
  plan.index_slots = 1;
  PlanLookupStep lookup;
  lookup.key_columns = {0};
  lookup.select = {0};
  plan.steps.emplace_back(lookup);
  PlanExpr where;
  where.kind = PlanExpr::Kind::kCompare;
  where.column = 1;
  where.op = CompareOp::kGt;
  PlanLiteral five;
  five.kind = PlanLiteral::Kind::kFloat;
  five.real = 5;
  where.literals.push_back(five);
  plan.steps.emplace_back(PlanFilterStep{where});
  PlanAggregateStep agg;
  agg.group_by = {2};
  agg.measures = {{AggregateOp::kMean, 1}};
  plan.steps.emplace_back(agg);
  plan.aggregate_input_types = {ColumnType::kUint32, ColumnType::kFloat64, ColumnType::kInt32,
                                ColumnType::kBool};

  std::vector<double> plan_s, kernel_s;
  std::vector<double> plan_means(kGroups, 0), kernel_means(kGroups, 0);
  const std::vector<const HashIndex*> indexes = {index.get()};
  for (int r = 0; r < repeat; ++r) {
    // Plan.
    {
      // The service moves each batch into its plan: so does the bench (the copy is untimed).
      PlanTable batch_input = input;
      const auto t0 = Clock::now();
      PlanLimits limits;
      limits.device_batches = !host_path;
      PlanRun run(&b, plan, limits);
      std::vector<PlanStepStatistics> stats;
      auto batch = run.RunBatch(std::move(batch_input), indexes, &stats);
      if (!batch.ok()) Die("plan batch", batch.status());
      auto groups = run.Groups(indexes, &stats);
      if (!groups.ok()) Die("plan groups", groups.status());
      plan_s.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
      for (uint64_t g = 0; g < groups->rows; ++g) {
        plan_means[groups->columns[0].value<int32_t>(g)] = groups->columns[1].value<double>(g);
      }
    }
    // Kernels back to back.
    {
      const auto t0 = Clock::now();
      std::vector<uint32_t> left(rows), right(rows);
      std::vector<int32_t> gathered(rows);
      std::vector<uint8_t> validity(BitmapBytes(rows));
      JoinResult result;
      JoinBatch jb;
      jb.keys = ChunkedU32{std::span<const uint32_t>(probe)};
      jb.out_left_rows = left;
      jb.out_right_rows = right;
      jb.result = &result;
      GatherOutput go;
      go.column = 0;
      go.data = std::as_writable_bytes(std::span<int32_t>(gathered));
      go.validity = validity;
      jb.gather.push_back(go);
      JoinNode join;
      join.index = index.get();
      join.batches.push_back(std::move(jb));
      CommandGraph g1;
      g1.Add(std::move(join));
      if (auto s = b.Run(g1); !s.ok()) Die("join", s);
      const uint64_t n = result.count;
      std::vector<uint32_t> codes(n), mask(n);
      std::vector<double> values(n);
      for (uint64_t p = 0; p < n; ++p) {
        codes[p] = static_cast<uint32_t>(gathered[p]);
        values[p] = latency[left[p]];
        mask[p] = values[p] > 5 ? 1u : 0u;
      }
      std::vector<uint64_t> out(kGroups);
      std::vector<uint32_t> counts(kGroups);
      std::vector<uint8_t> overflow(kGroups);
      AggregateNode a;
      a.op = AggregateOp::kSum;
      a.keys = ChunkedU32{std::span<const uint32_t>(codes)};
      a.values = Chunked<double>{std::span<const double>(values)};
      a.mask = ChunkedU32{std::span<const uint32_t>(mask)};
      a.output = out;
      a.contributing_rows = counts;
      CommandGraph g2;
      g2.Add(std::move(a));
      if (auto s = b.Run(g2); !s.ok()) Die("aggregate", s);
      for (uint32_t k = 0; k < kGroups; ++k) {
        double sum;
        std::memcpy(&sum, &out[k], 8);
        kernel_means[k] = counts[k] == 0 ? NAN : sum / counts[k];
      }
      kernel_s.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    }
  }
  for (uint32_t k = 0; k < kGroups; ++k) {
    if (std::fabs(plan_means[k] - kernel_means[k]) > 1e-9 * std::max(1.0, std::fabs(kernel_means[k]))) {
      std::fprintf(stderr, "gpujoin-plan-bench: group %u: plan mean %.17g, kernels %.17g\n", k,
                   plan_means[k], kernel_means[k]);
      return 1;
    }
  }
  const double p = Median(plan_s), k = Median(kernel_s);
  const std::string device = b.Info().device_name;
  std::printf("backend %s (%s), %llu rows, index %llu keys, 64 groups, median of %d, graphs %s%s\n",
              std::string(BackendKindName(b.Info().kind)).c_str(), device.c_str(),
              static_cast<unsigned long long>(rows), static_cast<unsigned long long>(index_rows),
              repeat, graphs ? "on" : "off", host_path ? ", host path" : "");
  std::printf("plan     %8.2f ms  %8.1f M rows/s\n", p * 1e3, rows / p / 1e6);
  std::printf("kernels  %8.2f ms  %8.1f M rows/s\n", k * 1e3, rows / k / 1e6);
  std::printf("plan / kernels speed = %.2f (target >= 0.8)\n", k / p);
  return 0;
}
