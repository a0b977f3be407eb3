// CUDA Graph capture and replay of small repeated aggregate nodes
// (engine/src/cuda/graphs/aggregate_graph_cache.hpp) against the CPU backend. Every run
// draws fresh inputs (the seed is printed on failure): keys partly out of range or
// kEmptyKey, optional masks, values with NaN, +-inf, -0 and +0. With "exact"
// inputs (integers of small magnitude, so every float sum is exact in any order)
// every op must be bit-identical to the CPU backend and to an uncaptured run of a
// fresh CUDA backend; with fractional values sum and mean are compared, on both
// backends and for the uncaptured run, with the exact per-group sums to the
// error bound of float32 summation in any order (rows x 2^-24 x sum of |value|,
// see ReferenceSums), tight enough that a row counted in the wrong group shows.
// Every suite runs twice, with BackendOptions::cuda_aggregate_graphs on
// (".../on") and off (".../off": nothing may be captured, results the same).
// Skipped without a CUDA device (a failure with GPUJOIN_REQUIRE_GPU set).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "backends.hpp"
#include "gpujoin/engine/aggregation.hpp"
#include "gpujoin/engine/backend.hpp"
#include "gpujoin/engine/graph.hpp"

#if defined(GPUJOIN_HAVE_CUDA)
#include "cuda/graphs/aggregate_graph_cache.hpp"  // engine/src: AggregateGraphCounters
#endif

namespace gpujoin::engine {
namespace {

// One aggregate node's shape (what a captured graph bakes in) and its inputs' kind.
struct AggShape {
  AggregateOp op;
  size_t rows;
  uint32_t groups;
  bool mask;
  bool contributing;  // contributing_rows requested
  bool exact;         // integer values: sums exact in any order
};

std::string Describe(const AggShape& s) {
  return std::string(AggregateOpName(s.op)) + " rows " + std::to_string(s.rows) + " groups " +
         std::to_string(s.groups) + (s.mask ? " masked" : "") +
         (s.contributing ? " contributing" : "") + (s.exact ? " exact" : " fractional");
}

struct AggInputs {
  std::vector<uint32_t> keys, mask;
  std::vector<float> values;  // empty for count
};

struct AggOut {
  std::vector<uint32_t> counts;        // count output
  std::vector<float> values;           // value output
  std::vector<uint32_t> contributing;  // when requested
};

AggInputs RandomInputs(const AggShape& s, std::mt19937_64& rng) {
  AggInputs in;
  in.keys.resize(s.rows);
  for (auto& k : in.keys) {
    const uint32_t r = uint32_t(rng() % 10);
    k = r == 0 ? s.groups + uint32_t(rng() % 100)
               : (r == 1 ? kEmptyKey : uint32_t(rng() % s.groups));
  }
  if (s.mask) {
    in.mask.resize(s.rows);
    for (auto& m : in.mask) m = rng() % 3 == 0 ? 0u : uint32_t(rng() | 1u);
  }
  if (s.op != AggregateOp::kCount) {
    in.values.resize(s.rows);
    for (auto& v : in.values) v = EdgeCaseValue(rng, 100, s.exact);
  }
  return in;
}

// `v` cut into up to `max_chunks` chunks (some possibly empty); one chunk when
// `rng` is null.
template <typename T>
Chunked<T> Chunks(const std::vector<T>& v, std::mt19937_64* rng, int max_chunks = 4) {
  Chunked<T> out;
  if (rng == nullptr) {
    out.push_back(std::span<const T>(v));
    return out;
  }
  const int chunks = 1 + int((*rng)() % uint64_t(max_chunks));
  std::vector<size_t> cuts{0};
  for (int c = 1; c < chunks; ++c) cuts.push_back(size_t((*rng)() % (v.size() + 1)));
  cuts.push_back(v.size());
  std::sort(cuts.begin(), cuts.end());
  for (size_t c = 0; c + 1 < cuts.size(); ++c)
    out.push_back(std::span<const T>(v.data() + cuts[c], cuts[c + 1] - cuts[c]));
  return out;
}

// Runs one aggregate node of shape `s` on `b` (outputs poisoned first).
absl::Status RunAggregate(Backend& b, const AggShape& s, const AggInputs& in, AggOut& out,
                          std::mt19937_64* chunk_rng) {
  AggregateNode node;
  node.op = s.op;
  node.keys = Chunks(in.keys, chunk_rng);
  if (s.mask) node.mask = Chunks(in.mask, chunk_rng);
  out.contributing.assign(s.contributing ? s.groups : 0, kPoison32);
  node.contributing_rows = out.contributing;
  std::vector<uint64_t> words(s.groups, 0xdeadbeefdeadbeefull);
  node.output = words;
  if (s.op != AggregateOp::kCount) node.values = Chunks(in.values, chunk_rng);
  CommandGraph g;
  g.Add(node);
  const absl::Status status = b.Run(g);
  out.counts.clear();
  out.values.clear();
  if (s.op == AggregateOp::kCount) {
    out.counts.assign(words.begin(), words.end());
  } else {
    out.values = Float32sOfWords(words);
  }
  return status;
}

// Bitwise equality of two float vectors; reports the first differing group.
void ExpectSameBits(const std::vector<float>& want, const std::vector<float>& got,
                    const std::string& where) {
  ASSERT_EQ(got.size(), want.size()) << where;
  for (size_t g = 0; g < want.size(); ++g) {
    if (std::memcmp(&want[g], &got[g], sizeof(float)) != 0) {
      ADD_FAILURE() << where << ": group " << g << " expected " << want[g] << " got " << got[g];
      return;
    }
  }
}

// One group's contributing values in exact arithmetic.
struct GroupSum {
  double sum = 0;      // exact: see ReferenceSums
  double abs_sum = 0;  // sum of |value|
  uint64_t rows = 0;   // contributing rows (key in range, mask nonzero, finite value)
};

// The exact sum of every group's contributing values. The values are integers of
// magnitude <= 100 or multiples of 2^-10 below 2^10 (EdgeCaseValue), so a double
// holds every partial sum of up to 2^32 such rows exactly.
std::vector<GroupSum> ReferenceSums(const AggShape& s, const AggInputs& in) {
  std::vector<GroupSum> ref(s.groups);
  for (size_t r = 0; r < s.rows; ++r) {
    if (in.keys[r] >= s.groups || (s.mask && in.mask[r] == 0) || !std::isfinite(in.values[r]))
      continue;
    GroupSum& g = ref[in.keys[r]];
    g.sum += in.values[r];
    g.abs_sum += std::fabs(double(in.values[r]));
    ++g.rows;
  }
  return ref;
}

// Checks float32 sums or means (`got`, from `backend`) against the exact sums:
// empty groups give +0 (sum) or NaN (mean); otherwise a float32 sum of n values,
// in any order or tree, is within n x 2^-24 x sum|value| of the exact sum (each
// value passes through at most n - 1 rounded additions), and a mean, the sum
// divided by the exact count, adds at most two roundings of its magnitude.
void ExpectNearExactSums(AggregateOp op, const std::vector<GroupSum>& ref,
                         const std::vector<float>& got, const std::string& backend,
                         const std::string& where) {
  ASSERT_EQ(got.size(), ref.size()) << where;
  constexpr double kUnit = 0x1p-24;  // float32 unit roundoff
  size_t bad = 0;
  for (size_t g = 0; g < ref.size(); ++g) {
    const GroupSum& r = ref[g];
    const float y = got[g];
    bool ok;
    double expect = 0, tol = 0;
    if (r.rows == 0) {
      ok = op == AggregateOp::kSum ? std::bit_cast<uint32_t>(y) == 0u : std::isnan(y);
    } else {
      const double sum_tol = double(r.rows) * kUnit * r.abs_sum;
      expect = op == AggregateOp::kSum ? r.sum : r.sum / double(r.rows);
      tol = op == AggregateOp::kSum
                ? sum_tol
                : (sum_tol + 2 * kUnit * (std::fabs(r.sum) + sum_tol)) / double(r.rows);
      ok = std::fabs(double(y) - expect) <= tol;
    }
    if (!ok && ++bad < 4) {
      ADD_FAILURE() << where << ": " << backend << " group " << g << " (" << r.rows << " rows) got "
                    << y << ", exact " << expect << " +- " << tol;
    }
  }
  EXPECT_EQ(bad, 0u) << where << " (" << backend << ")";
}

// `got` (CUDA) against `want` (CPU) for the inputs `in`: counts, contributing
// rows, min and max exactly; sum and mean exactly for exact inputs (integers, so
// every partial sum is exact in any order), else both against the exact sums
// (ExpectNearExactSums) and, where both are zero, with the same sign.
void ExpectMatchesCpu(const AggShape& s, const AggInputs& in, const AggOut& want, const AggOut& got,
                      const std::string& where) {
  EXPECT_EQ(got.counts, want.counts) << where;
  EXPECT_EQ(got.contributing, want.contributing) << where;
  const bool float_sum = s.op == AggregateOp::kSum || s.op == AggregateOp::kMean;
  if (!float_sum || s.exact) {
    ExpectSameBits(want.values, got.values, where);
    return;
  }
  const std::vector<GroupSum> ref = ReferenceSums(s, in);
  ExpectNearExactSums(s.op, ref, want.values, "cpu", where);
  ExpectNearExactSums(s.op, ref, got.values, "cuda", where);
  for (size_t g = 0; g < std::min(want.values.size(), got.values.size()); ++g) {
    if (want.values[g] == 0.0f && got.values[g] == 0.0f &&
        std::signbit(want.values[g]) != std::signbit(got.values[g])) {
      ADD_FAILURE() << where << ": group " << g << " sums to " << want.values[g] << " on cpu, "
                    << got.values[g] << " on cuda";
      break;
    }
  }
}

#if defined(GPUJOIN_HAVE_CUDA)
using Totals = detail::AggregateGraphTotals;
Totals Counters() { return detail::AggregateGraphCounters(); }
#else
struct Totals {
  uint64_t captures = 0, replays = 0, capture_failures = 0;
};
Totals Counters() { return {}; }
#endif

// Parameter: BackendOptions::cuda_aggregate_graphs of the CUDA backend under test.
class AggregateGraphs : public CudaVsCpuTest, public ::testing::WithParamInterface<bool> {
 protected:
  AggregateGraphs() : CudaVsCpuTest("aggregate graph tests skipped") {
    cuda_options_.cuda_aggregate_graphs = GetParam();
  }

  bool GraphsEnabled() const { return GetParam(); }

  // Fresh inputs of shape `s`, run on both backends (each with its own random
  // chunking) and compared; with `check_uncaptured`, a fresh CUDA backend's first
  // (so uncaptured) run is compared too: bit for bit with the captured or
  // replayed run for exact inputs, like the CPU's (ExpectMatchesCpu) otherwise.
  void RunAndCompare(const AggShape& s, const std::string& what, bool check_uncaptured = false) {
    const std::string where = what + ", " + Describe(s) + ", " + Seed();
    const AggInputs in = RandomInputs(s, rng_);
    AggOut want, got;
    ASSERT_TRUE(RunAggregate(*cpu_, s, in, want, &rng_).ok()) << where;
    const absl::Status st = RunAggregate(*cuda_, s, in, got, &rng_);
    ASSERT_TRUE(st.ok()) << where << ": " << st;
    ExpectMatchesCpu(s, in, want, got, where);
    if (!check_uncaptured) return;
    auto fresh = CreateBackend(BackendKind::kCuda, cuda_options_);
    ASSERT_TRUE(fresh.ok()) << fresh.status();
    AggOut plain;
    ASSERT_TRUE(RunAggregate(**fresh, s, in, plain, &rng_).ok()) << where;
    if (s.exact) {
      EXPECT_EQ(got.counts, plain.counts) << where << " (vs uncaptured)";
      EXPECT_EQ(got.contributing, plain.contributing) << where << " (vs uncaptured)";
      ExpectSameBits(plain.values, got.values, where + " (vs uncaptured)");
    } else {
      ExpectMatchesCpu(s, in, want, plain, where + " (uncaptured)");
    }
  }

  // `rounds` rounds over `shapes`, each run with fresh inputs and compared
  // (RunAndCompare); from round `check_uncaptured_from` on also with an
  // uncaptured run.
  void RunRounds(std::span<const AggShape> shapes, int rounds,
                 int check_uncaptured_from = std::numeric_limits<int>::max()) {
    for (int round = 0; round < rounds; ++round) {
      for (const AggShape& s : shapes) {
        RunAndCompare(s, "round " + std::to_string(round), round >= check_uncaptured_from);
        if (HasFatalFailure()) return;
      }
    }
  }
};

// Four shapes (as many as a stream context's cache holds) alternate for six
// rounds of sequential Runs (which reuse one stream context): each is seen in
// round 0, captured in round 1 and replayed from round 2 on, with fresh inputs
// every time. Covers the three accumulation paths (<= 16, <= 256 and more groups),
// masks on and off, contributing rows on and off.
TEST_P(AggregateGraphs, RepeatedShapesCaptureOnceAndReplayLikeCpu) {
  const AggShape shapes[] = {
      {AggregateOp::kSum, 1000, 16, true, true, true},
      {AggregateOp::kMin, 3001, 200, false, true, true},
      {AggregateOp::kMean, 5000, 1000, true, false, false},
      {AggregateOp::kCount, 2048, 7, true, true, true},
  };
  const Totals before = Counters();
  constexpr int kRounds = 6;
  RunRounds(shapes, kRounds, /*check_uncaptured_from=*/2);
  if (HasFatalFailure()) return;
  const Totals after = Counters();
  EXPECT_EQ(after.capture_failures, before.capture_failures) << "an aggregate graph capture failed";
  if (GraphsEnabled()) {
    EXPECT_EQ(after.captures - before.captures, std::size(shapes));
    EXPECT_EQ(after.replays - before.replays, std::size(shapes) * (kRounds - 2));
  } else {
    EXPECT_EQ(after.captures, before.captures)
        << "cuda_aggregate_graphs = false, yet a graph was captured";
    EXPECT_EQ(after.replays, before.replays);
  }
}

// Every op (count, sum, min, max, mean), masked and unmasked, exact and
// fractional values, in seven shapes that alternate: more than the cache holds,
// so graphs are evicted, shapes seen again and captured again while others
// replay. Every result equals the CPU's and no capture fails.
TEST_P(AggregateGraphs, AlternatingShapesBeyondTheCacheStayCorrect) {
  const AggShape shapes[] = {
      {AggregateOp::kMax, 1500, 16, false, true, true},
      {AggregateOp::kMax, 700, 300, true, false, false},
      {AggregateOp::kCount, 4096, 256, false, true, true},
      {AggregateOp::kSum, 2500, 17, false, false, false},
      {AggregateOp::kMin, 800, 3, true, false, true},
      {AggregateOp::kMean, 1200, 5, false, true, true},
      {AggregateOp::kSum, 10000, 5000, true, true, true},
  };
  const Totals before = Counters();
  // From round 1 on (captures and replays) each result is also compared with an
  // uncaptured run: capturing never changes a result.
  RunRounds(shapes, 5, /*check_uncaptured_from=*/1);
  if (HasFatalFailure()) return;
  const Totals after = Counters();
  EXPECT_EQ(after.capture_failures, before.capture_failures) << "an aggregate graph capture failed";
  if (GraphsEnabled()) {
    // Round 1 captures all seven (the last four stay); round 2 replays those.
    EXPECT_GE(after.captures - before.captures, std::size(shapes));
    EXPECT_GE(after.replays - before.replays, 4u);
  } else {
    EXPECT_EQ(after.captures, before.captures)
        << "cuda_aggregate_graphs = false, yet a graph was captured";
    EXPECT_EQ(after.replays, before.replays);
  }
}

// Shapes the cache never captures: more rows or more groups than its bounds
// (repeated, still equal to the CPU), and nodes with no rows.
TEST_P(AggregateGraphs, LargeAndEmptyNodesAreNotCaptured) {
  const AggShape shapes[] = {
      {AggregateOp::kSum, (size_t{1} << 18) + 1, 64, true, true, true},  // rows over the bound
      {AggregateOp::kCount, 1000, (1u << 18) + 1, false, true, true},    // groups over it
      {AggregateOp::kMax, 0, 9, false, true, true},                      // no rows
  };
  const Totals before = Counters();
  RunRounds(shapes, 3);
  if (HasFatalFailure()) return;
  const Totals after = Counters();
  EXPECT_EQ(after.captures, before.captures);
  EXPECT_EQ(after.replays, before.replays);
  EXPECT_EQ(after.capture_failures, before.capture_failures);
}

// Eight threads aggregate at once, each alternating three shapes (masked sum
// with contributing rows, unmasked count, masked max): stream contexts capture
// while others launch or replay. Every result is bit-identical to the CPU's
// (exact inputs); no capture fails; some graphs are captured and replayed.
TEST_P(AggregateGraphs, ConcurrentRepeatedShapesCaptureAndReplayLikeCpu) {
  const AggShape shapes[] = {
      {AggregateOp::kSum, 1024, 16, true, true, true},
      {AggregateOp::kCount, 3000, 100, false, true, true},
      {AggregateOp::kMax, 512, 700, true, false, true},
  };
  constexpr int kThreads = 8;
  constexpr int kRounds = 12;
  const size_t runs = size_t(kThreads) * kRounds;
  auto shape_of = [&](size_t k) -> const AggShape& { return shapes[k % std::size(shapes)]; };
  std::vector<AggInputs> inputs(runs);
  std::vector<AggOut> want(runs), got(runs);
  for (size_t k = 0; k < runs; ++k) {
    inputs[k] = RandomInputs(shape_of(k), rng_);
    ASSERT_TRUE(RunAggregate(*cpu_, shape_of(k), inputs[k], want[k], nullptr).ok());
  }
  const Totals before = Counters();
  std::vector<absl::Status> status(runs);
  OnThreads(kThreads, kRounds, [&](size_t k) {
    status[k] = RunAggregate(*cuda_, shape_of(k), inputs[k], got[k], nullptr);
  });
  const Totals after = Counters();
  EXPECT_EQ(after.capture_failures, before.capture_failures) << "an aggregate graph capture failed";
  if (GraphsEnabled()) {
    // At most eight contexts serve 96 Runs, so some context sees a shape at
    // least four times: captured on the second, replayed after.
    EXPECT_GT(after.captures, before.captures);
    EXPECT_GT(after.replays, before.replays);
  } else {
    EXPECT_EQ(after.captures, before.captures);
  }
  for (size_t k = 0; k < runs; ++k) {
    ASSERT_TRUE(status[k].ok()) << "run " << k << ": " << status[k];
    ExpectMatchesCpu(shape_of(k), inputs[k], want[k], got[k],
                     "run " + std::to_string(k) + ", " + Describe(shape_of(k)) + ", " + Seed());
  }
}

INSTANTIATE_TEST_SUITE_P(Capture, AggregateGraphs, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return std::string(info.param ? "on" : "off");
                         });

#if defined(GPUJOIN_HAVE_CUDA)
// Host-only parts of the cache (no device needed): the pinned input and output
// layouts (parts 256-byte aligned, absent parts take no room) and the shapes the
// cache turns away before touching a stream.
TEST(AggregateGraphHost, LayoutsHoldEachPartAligned) {
  using detail::AggregateGraph;
  using detail::AggregateShape;
  // Count, unmasked: keys only in; counts only out.
  EXPECT_EQ(AggregateGraph::InputBytes(AggregateShape{AggregateOp::kCount, 1000, 7, false, true}),
            4000u);
  EXPECT_EQ(AggregateGraph::OutputBytes(AggregateShape{AggregateOp::kCount, 1000, 7, false, true}),
            28u);
  // Sum, masked: keys, values at 4096, mask at 8192; no counts: values only out.
  const AggregateShape sum{AggregateOp::kSum, 1000, 5, true, false};
  EXPECT_EQ(AggregateGraph::InputBytes(sum), 8192u + 4000u);
  EXPECT_EQ(AggregateGraph::OutputBytes(sum), 20u);
  // Mean: counts, then the values 256-byte aligned.
  const AggregateShape mean{AggregateOp::kMean, 10, 1000, false, true};
  EXPECT_EQ(AggregateGraph::InputBytes(mean), 256u + 40u);
  EXPECT_EQ(AggregateGraph::OutputBytes(mean), 4096u + 4000u);
  // Typed int64 sum with overflow flags: 8-byte values in; the two accumulator
  // words per group out (the sums of the low and high halves), then the flags.
  const AggregateShape sum64{AggregateOp::kSum, 100, 10, false, false, ColumnType::kInt64, true};
  EXPECT_EQ(AggregateGraph::InputBytes(sum64), 512u + 800u);
  EXPECT_EQ(AggregateGraph::OutputBytes(sum64), 256u + 10u);
  // Typed int32 min: 4-byte values; counts (empty integer groups are null),
  // then one word per group.
  const AggregateShape min32{AggregateOp::kMin, 100, 10, true, true, ColumnType::kInt32, false};
  EXPECT_EQ(AggregateGraph::InputBytes(min32), 1024u + 400u);
  EXPECT_EQ(AggregateGraph::OutputBytes(min32), 256u + 80u);
  // The value type makes a shape of its own.
  AggregateShape sum32 = sum64;
  sum32.value_type = ColumnType::kInt32;
  EXPECT_FALSE(sum32 == sum64);
}

TEST(AggregateGraphHost, EmptyAndOversizedShapesAreNeverCaptured) {
  using Cache = detail::AggregateGraphCache;
  Cache cache;
  const detail::AggregateShape refused[] = {
      {AggregateOp::kSum, 0, 5, false, false},                         // no rows
      {AggregateOp::kSum, Cache::kMaxRows + 1, 5, false, false},       // too many rows
      {AggregateOp::kCount, 100, 0, false, true},                      // no groups
      {AggregateOp::kCount, 100, Cache::kMaxGroups + 1, false, true},  // too many groups
  };
  // Seen three times each: still no graph, and the (null) stream is never used.
  for (int round = 0; round < 3; ++round) {
    for (const auto& shape : refused) {
      auto graph = cache.Get(shape, nullptr);
      ASSERT_TRUE(graph.ok()) << graph.status();
      EXPECT_EQ(*graph, nullptr);
    }
  }
  EXPECT_EQ(cache.captures(), 0u);
  EXPECT_EQ(cache.hits(), 0u);
}
#endif

}  // namespace
}  // namespace gpujoin::engine
