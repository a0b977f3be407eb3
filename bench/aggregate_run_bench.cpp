// gpujoin-aggregate-run-bench: small grouped aggregations through Backend::Run,
// the path a gpujoind Aggregate batch takes, on the CUDA backend with aggregate
// graph capture on and off (BackendOptions::cuda_aggregate_graphs, gpujoind
// --cuda-aggregate-graphs). Each row runs one aggregate node of --rows rows and
// --groups groups --runs times on one backend (so one stream context: captured
// on the second run, replayed from the third) and reports runs/s, microseconds
// per run and rows/s, for float32 values and each typed value type. The outputs
// of the two settings are compared (exactly for the integer types and for the
// integer-valued float inputs used here).
//
//   gpujoin-aggregate-run-bench [--rows N] [--groups G] [--runs R] [--op sum|min|max|mean]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "gpujoin/engine/aggregation.hpp"
#include "gpujoin/engine/backend.hpp"
#include "gpujoin/engine/graph.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using gpujoin::engine::AggregateOp;
using gpujoin::engine::Backend;
using gpujoin::engine::BackendKind;

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "gpujoin-aggregate-run-bench: %s\n", what.c_str());
  std::exit(1);
}

struct Options {
  size_t rows = 4096;
  uint32_t groups = 256;
  int runs = 20000;
  AggregateOp op = AggregateOp::kSum;
};

// The outputs of one run.
struct Outputs {
  std::vector<uint64_t> words;
  std::vector<uint8_t> overflow;
  std::vector<uint32_t> rows;
  bool operator==(const Outputs&) const = default;
};

// Runs the node `runs` times on `backend`; the seconds of the timed runs (all
// but the first two: first sight and capture) and the last outputs.
template <typename V>
double Time(Backend& backend, const Options& o, const std::vector<uint32_t>& keys,
            const std::vector<V>& values, Outputs* out) {
  out->rows.assign(o.groups, 0);
  gpujoin::engine::AggregateNode node;
  node.op = o.op;
  node.keys = {std::span<const uint32_t>(keys)};
  node.contributing_rows = out->rows;
  out->words.assign(o.groups, 0);
  node.values = gpujoin::engine::Chunked<V>{std::span<const V>(values)};
  node.output = out->words;
  if (gpujoin::engine::AggregateReportsOverflow(o.op, gpujoin::kColumnTypeOf<V>)) {
    out->overflow.assign(o.groups, 0);
    node.overflow = out->overflow;
  }
  gpujoin::engine::CommandGraph graph;
  graph.Add(std::move(node));
  Clock::time_point start;
  for (int r = 0; r < o.runs + 2; ++r) {
    if (r == 2) start = Clock::now();
    const absl::Status s = backend.Run(graph);
    if (!s.ok()) Die(std::string(s.message()));
  }
  return std::chrono::duration<double>(Clock::now() - start).count();
}

template <typename V>
void Row(const char* type, Backend& on, Backend& off, const Options& o, std::mt19937_64& rng) {
  std::vector<uint32_t> keys(o.rows);
  std::vector<V> values(o.rows);
  for (size_t i = 0; i < o.rows; ++i) {
    keys[i] = uint32_t(rng() % o.groups);
    values[i] = static_cast<V>(int64_t(rng() % 2001) - 1000);
    if constexpr (std::is_unsigned_v<V>) values[i] = static_cast<V>(rng());
  }
  Outputs a, b;
  const double with = Time(on, o, keys, values, &a);
  const double without = Time(off, o, keys, values, &b);
  if (!(a == b)) Die(std::string(type) + ": outputs differ between graphs on and off");
  auto print = [&](const char* setting, double seconds) {
    std::printf("| %s | %s | %zu | %u | %.0f | %.1f | %.1fM |\n", type, setting, o.rows,
                o.groups, o.runs / seconds, 1e6 * seconds / o.runs,
                double(o.rows) * o.runs / seconds / 1e6);
  };
  print("graphs on", with);
  print("graphs off", without);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) Die(a + ": needs a value");
      return argv[++i];
    };
    if (a == "--rows") {
      o.rows = std::stoull(value());
    } else if (a == "--groups") {
      o.groups = uint32_t(std::stoul(value()));
    } else if (a == "--runs") {
      o.runs = std::stoi(value());
    } else if (a == "--op") {
      const std::string op = value();
      if (op == "sum") o.op = AggregateOp::kSum;
      else if (op == "min") o.op = AggregateOp::kMin;
      else if (op == "max") o.op = AggregateOp::kMax;
      else if (op == "mean") o.op = AggregateOp::kMean;
      else Die("--op: sum, min, max or mean, got " + op);
    } else {
      Die("unknown argument " + a +
          " (usage: [--rows N] [--groups G] [--runs R] [--op sum|min|max|mean])");
    }
  }
  if (o.rows == 0 || o.groups == 0 || o.runs <= 0) Die("--rows, --groups and --runs must be > 0");
  gpujoin::engine::BackendOptions on_options, off_options;
  off_options.cuda_aggregate_graphs = false;
  auto on = gpujoin::engine::CreateBackend(BackendKind::kCuda, on_options);
  auto off = gpujoin::engine::CreateBackend(BackendKind::kCuda, off_options);
  if (!on.ok()) Die(std::string(on.status().message()));
  if (!off.ok()) Die(std::string(off.status().message()));
  std::printf("device: %s; op %s\n\n", (*on)->Info().device_name.c_str(),
              std::string(gpujoin::engine::AggregateOpName(o.op)).c_str());
  std::printf("| values | setting | rows | groups | runs/s | us/run | rows/s |\n");
  std::printf("| --- | --- | ---: | ---: | ---: | ---: | ---: |\n");
  std::mt19937_64 rng(42);
  Row<float>("float32", **on, **off, o, rng);
  Row<int32_t>("int32", **on, **off, o, rng);
  Row<int64_t>("int64", **on, **off, o, rng);
  Row<uint32_t>("uint32", **on, **off, o, rng);
  Row<uint64_t>("uint64", **on, **off, o, rng);
  Row<double>("float64", **on, **off, o, rng);
  return 0;
}
