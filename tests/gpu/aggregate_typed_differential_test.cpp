// Typed grouped aggregation, CUDA against the CPU backend on fresh
// random inputs (the seed is printed on failure), for every value type (int32,
// int64, uint32, uint64, float64) and every value op. Three suites:
//  - AggregateTypedDifferential runs aggregate nodes through both backends' Run
//    over the group counts that pick each accumulation path (16 and 256:
//    block-shared, 4,097 and 65,536: shared-range, 200,000: global), uniform and
//    hot keys, out-of-range keys, masks and chunked inputs, with values at the
//    types' extremes so that int64/uint64 sums overflow in some groups;
//  - AggregateTypedPathTest calls the device-level Aggregate with each path
//    forced, on unaligned columns too (lane-private is refused for typed values);
//  - AggregateTypedGraphReplay repeats small shapes so that they are captured into
//    CUDA Graphs and replayed (aggregate_graph_cache.hpp), each round against the CPU.
// Outputs are poisoned first. Counts, contributing rows, every integer result
// word and the overflow flags are compared exactly (the integer contract is
// order independent), float64 min/max bit for bit. Float64 sums and means are
// compared bit for bit for integer-valued inputs (every sum below 2^53, so exact
// in any order) and otherwise within the float64 summation bound of two orders:
// 2 x rows x 2^-53 x sum |value| (divided by the count for mean) plus the final
// rounding. Skipped (or failed under GPUJOIN_REQUIRE_GPU) without a CUDA device.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "backends.hpp"
#include "gpujoin/engine/aggregation.hpp"
#include "gpujoin/engine/backend.hpp"
#include "gpujoin/engine/graph.hpp"

#if defined(GPUJOIN_HAVE_CUDA)
#include <cuda_runtime.h>

#include "cuda/aggregate/aggregate_ops.hpp"       // engine/src: the device-level Aggregate
#include "cuda/graphs/aggregate_graph_cache.hpp"  // engine/src: AggregateGraphCounters
#endif

namespace gpujoin::engine {
namespace {

constexpr uint64_t kPoison64 = 0xa5a5a5a5a5a5a5a5ull;
constexpr AggregateOp kValueOps[] = {AggregateOp::kSum, AggregateOp::kMin, AggregateOp::kMax,
                                     AggregateOp::kMean};

// A value of V: the type's extremes (1/8), small values, full-range values;
// float64 adds NaN, +-inf, +-0 and, unless `exact`, fractional values.
template <typename V>
V RandomValue(std::mt19937_64& rng, bool exact) {
  const uint64_t bits = rng();
  const uint32_t r = uint32_t(rng() % 100);
  if constexpr (std::is_floating_point_v<V>) {
    if (r == 0) return std::numeric_limits<V>::quiet_NaN();
    if (r == 1) return std::numeric_limits<V>::infinity();
    if (r == 2) return -std::numeric_limits<V>::infinity();
    if (r < 6) return -0.0;
    if (r < 9) return 0.0;
    if (exact || r < 50) return double(int64_t(bits % (uint64_t{1} << 31)) - (int64_t{1} << 30));
    return std::ldexp(double(int64_t(bits >> 11) - (int64_t{1} << 52)), -int(rng() % 60));
  } else {
    if (r < 6) return std::numeric_limits<V>::max();
    if (r < 12) return std::numeric_limits<V>::min();
    if (r < 50) return static_cast<V>(int64_t(bits % 2001) - 1000);
    return static_cast<V>(bits);
  }
}

struct KeysAndMask {
  std::vector<uint32_t> keys, mask;
};

KeysAndMask RandomKeys(std::mt19937_64& rng, size_t rows, uint32_t groups, bool hot, bool masked) {
  KeysAndMask in;
  in.keys.resize(rows);
  const uint32_t hot_group = uint32_t(rng() % groups);
  for (auto& k : in.keys) {
    const uint32_t r = uint32_t(rng() % 8);
    if (r == 0) {
      k = rng() % 2 ? kEmptyKey : groups + uint32_t(rng() % 100);  // out of range
    } else if (hot && r < 5) {
      k = hot_group;
    } else {
      k = uint32_t(rng() % groups);
    }
  }
  if (masked) {
    in.mask.resize(rows);
    for (auto& m : in.mask) m = rng() % 3 == 0 ? 0u : uint32_t(rng() | 1u);
  }
  return in;
}

// One typed run's outputs.
struct TypedOut {
  std::vector<uint64_t> words;
  std::vector<uint8_t> overflow;
  std::vector<uint32_t> rows;
};

// Per group, the sum of |value| over contributing rows (float64 tolerance).
template <typename V>
std::vector<double> AbsSums(const KeysAndMask& in, const std::vector<V>& v, uint32_t groups) {
  std::vector<double> abs(groups, 0.0);
  for (size_t i = 0; i < in.keys.size(); ++i) {
    if (in.keys[i] >= groups || (!in.mask.empty() && in.mask[i] == 0)) continue;
    if (std::isfinite(double(v[i]))) abs[in.keys[i]] += std::fabs(double(v[i]));
  }
  return abs;
}

// CUDA's `got` against the CPU's `want` for `op` over V (see the file comment).
template <typename V>
void ExpectSameTyped(AggregateOp op, bool exact, const TypedOut& want, const TypedOut& got,
                     const std::vector<double>& abs) {
  EXPECT_EQ(got.rows, want.rows);
  EXPECT_EQ(got.overflow, want.overflow);
  ASSERT_EQ(got.words.size(), want.words.size());
  const bool floating = std::is_floating_point_v<V> || op == AggregateOp::kMean;
  // Only float64 sums and means of fractional values depend on the order.
  const bool bitwise =
      !std::is_floating_point_v<V> || exact || op == AggregateOp::kMin || op == AggregateOp::kMax;
  size_t bad = 0;
  for (size_t g = 0; g < want.words.size(); ++g) {
    bool same = got.words[g] == want.words[g];
    if (!same && floating) {
      const double x = std::bit_cast<double>(want.words[g]);
      const double y = std::bit_cast<double>(got.words[g]);
      if (std::isnan(x) || std::isnan(y)) {
        same = std::isnan(x) && std::isnan(y);
      } else if (!bitwise) {
        const double rows = std::max(1.0, double(want.rows[g]));
        const double bound = 2.0 * rows * std::ldexp(1.0, -53) * abs[g];
        const double tol =
            (op == AggregateOp::kMean ? bound / rows : bound) + std::ldexp(std::fabs(x), -52);
        same = std::fabs(x - y) <= tol;
      }
    }
    if (!same && ++bad < 4) {
      ADD_FAILURE() << "group " << g << ": cpu 0x" << std::hex << want.words[g] << " cuda 0x"
                    << got.words[g] << std::dec << " (rows " << want.rows[g] << ")";
    }
  }
  EXPECT_EQ(bad, 0u);
}

struct TypedCase {
  size_t rows;
  uint32_t groups;
  bool hot;
  bool mask;
};

std::string CaseName(const ::testing::TestParamInfo<TypedCase>& info) {
  return "rows" + std::to_string(info.param.rows) + "_groups" + std::to_string(info.param.groups) +
         (info.param.hot ? "_hot" : "_uniform") + (info.param.mask ? "_masked" : "");
}

class AggregateTypedDifferential : public CudaVsCpuTest,
                                   public ::testing::WithParamInterface<TypedCase> {
 protected:
  AggregateTypedDifferential() : CudaVsCpuTest("CUDA-vs-CPU typed aggregation tests skipped") {}

  template <typename V>
  TypedOut RunOn(Backend& b, AggregateOp op, const ChunkedU32& keys, const Chunked<V>& values,
                 const std::optional<ChunkedU32>& mask, uint32_t groups) {
    TypedOut out;
    out.words.assign(groups, kPoison64);
    out.rows.assign(groups, kPoison32);
    if (AggregateReportsOverflow(op, *AggregateValueType(AggregateValues{values}))) {
      out.overflow.assign(groups, kPoison8);
    }
    AggregateNode node;
    node.op = op;
    node.keys = keys;
    node.values = values;
    node.mask = mask;
    node.output = out.words;
    node.overflow = out.overflow;
    node.contributing_rows = out.rows;
    CommandGraph g;
    g.Add(node);
    const absl::Status s = b.Run(g);
    EXPECT_TRUE(s.ok()) << BackendKindName(b.Info().kind) << ": " << s;
    return out;
  }

  template <typename V>
  void Check(bool exact) {
    const TypedCase c = GetParam();
    const KeysAndMask in = RandomKeys(rng_, c.rows, c.groups, c.hot, c.mask);
    std::vector<V> v(c.rows);
    for (auto& x : v) x = RandomValue<V>(rng_, exact);
    const ChunkedU32 kc = RandomChunks(in.keys);
    const Chunked<V> vc = RandomChunks(v);
    const std::optional<ChunkedU32> mc =
        c.mask ? std::optional<ChunkedU32>(RandomChunks(in.mask)) : std::nullopt;
    const std::vector<double> abs = AbsSums(in, v, c.groups);
    for (AggregateOp op : kValueOps) {
      SCOPED_TRACE(std::string(AggregateOpName(op)) + " " + Seed());
      const TypedOut want = RunOn<V>(*cpu_, op, kc, vc, mc, c.groups);
      const TypedOut got = RunOn<V>(*cuda_, op, kc, vc, mc, c.groups);
      ExpectSameTyped<V>(op, exact, want, got, abs);
    }
  }
};

TEST_P(AggregateTypedDifferential, Int32) { Check<int32_t>(true); }
TEST_P(AggregateTypedDifferential, Int64) { Check<int64_t>(true); }
TEST_P(AggregateTypedDifferential, Uint32) { Check<uint32_t>(true); }
TEST_P(AggregateTypedDifferential, Uint64) { Check<uint64_t>(true); }
TEST_P(AggregateTypedDifferential, Float64Exact) { Check<double>(true); }
TEST_P(AggregateTypedDifferential, Float64Fractional) { Check<double>(false); }

INSTANTIATE_TEST_SUITE_P(Shapes, AggregateTypedDifferential,
                         ::testing::Values(TypedCase{0, 5, false, false},  // empty
                                           TypedCase{1, 1, false, true},
                                           TypedCase{100003, 16, true, true},
                                           TypedCase{100003, 256, false, false},
                                           TypedCase{(1u << 21) + 3, 256, true, true},
                                           TypedCase{300007, 4097, true, false},
                                           TypedCase{(1u << 21) + 5, 65536, false, true},
                                           TypedCase{(1u << 21) + 1, 200000, true, true},
                                           TypedCase{100003, 200000, false, false}),
                         CaseName);

#if defined(GPUJOIN_HAVE_CUDA)
using GraphTotals = detail::AggregateGraphTotals;
GraphTotals GraphCounters() { return detail::AggregateGraphCounters(); }
#else
struct GraphTotals {
  uint64_t captures = 0, replays = 0, capture_failures = 0;
};
GraphTotals GraphCounters() { return {}; }
#endif

// Small typed nodes go through the aggregate graph cache
// (engine/src/cuda/graphs/aggregate_graph_cache.hpp) as float32 ones do: a shape (op,
// value type, rows, groups, mask, counts, overflow flags) is seen once, captured
// the second time and replayed from then on, with fresh keys, mask and values
// each round (chunked at random), every round equal to the CPU's.
class AggregateTypedGraphReplay : public AggregateTypedDifferential {
 protected:
  static constexpr int kRounds = 4;

  template <typename V>
  void Rounds() {
    const TypedCase c = GetParam();
    for (AggregateOp op : kValueOps) {
      for (int round = 0; round < kRounds; ++round) {
        SCOPED_TRACE(std::string(AggregateOpName(op)) + " round " + std::to_string(round) + " " +
                     Seed());
        const KeysAndMask in = RandomKeys(rng_, c.rows, c.groups, c.hot, c.mask);
        std::vector<V> v(c.rows);
        for (auto& x : v) x = RandomValue<V>(rng_, /*exact=*/true);
        const ChunkedU32 kc = RandomChunks(in.keys);
        const Chunked<V> vc = RandomChunks(v);
        const std::optional<ChunkedU32> mc =
            c.mask ? std::optional<ChunkedU32>(RandomChunks(in.mask)) : std::nullopt;
        const TypedOut want = RunOn<V>(*cpu_, op, kc, vc, mc, c.groups);
        const TypedOut got = RunOn<V>(*cuda_, op, kc, vc, mc, c.groups);
        ExpectSameTyped<V>(op, true, want, got, AbsSums(in, v, c.groups));
        if (HasFailure()) return;
      }
    }
  }
};

TEST_P(AggregateTypedGraphReplay, RepeatedShapesCaptureOnceAndReplayLikeCpu) {
  const GraphTotals before = GraphCounters();
  Rounds<int32_t>();
  Rounds<int64_t>();
  Rounds<uint32_t>();
  Rounds<uint64_t>();
  Rounds<double>();
  if (HasFailure()) return;
  const GraphTotals after = GraphCounters();
  constexpr uint64_t kShapes = 5 * std::size(kValueOps);  // value types x ops
  EXPECT_EQ(after.capture_failures, before.capture_failures) << "an aggregate graph capture failed";
  EXPECT_EQ(after.captures - before.captures, kShapes);
  EXPECT_EQ(after.replays - before.replays, kShapes * (kRounds - 2));
}

// Within the cache's bounds (aggregate_graph_cache.hpp: at most 2^18 rows and
// groups), at group counts that take the block-shared (16, 256) and the
// shared-range (4,097) paths.
INSTANTIATE_TEST_SUITE_P(Small, AggregateTypedGraphReplay,
                         ::testing::Values(TypedCase{3001, 16, true, true},
                                           TypedCase{4099, 256, false, false},
                                           TypedCase{20000, 4097, true, true}),
                         CaseName);

#if defined(GPUJOIN_HAVE_CUDA)

namespace gd = detail;

// One device allocation of `n` items, starting `offset` items in (so that the
// data can start at an address that is not 16-byte aligned).
template <typename T>
class DeviceArray {
 public:
  DeviceArray(size_t n, size_t offset = 0) : offset_(offset) {
    ok_ = cudaMalloc(reinterpret_cast<void**>(&base_), (n + offset + 1) * sizeof(T)) == cudaSuccess;
  }
  DeviceArray(const std::vector<T>& host, size_t offset) : DeviceArray(host.size(), offset) {
    if (ok_ && !host.empty())
      ok_ = cudaMemcpy(get(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice) ==
            cudaSuccess;
  }
  ~DeviceArray() { cudaFree(base_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  T* get() const { return base_ + offset_; }
  bool ok() const { return ok_; }

 private:
  T* base_ = nullptr;
  size_t offset_ = 0;
  bool ok_ = false;
};

struct PathCase {
  gd::AggregatePath path;
  size_t rows;
  uint32_t groups;
  bool unaligned;  // columns start 4 (keys) and 8 (values) bytes past a 16-byte boundary
};

class AggregateTypedPathTest : public CudaVsCpuTest,
                               public ::testing::WithParamInterface<PathCase> {
 protected:
  AggregateTypedPathTest() : CudaVsCpuTest("device-level typed aggregation tests skipped") {}
  void SetUp() override {
    CudaVsCpuTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), cudaSuccess);
  }
  void TearDown() override {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  template <typename V>
  void Check(ColumnType type) {
    const PathCase c = GetParam();
    const KeysAndMask in = RandomKeys(rng_, c.rows, c.groups, true, true);
    std::vector<V> v(c.rows);
    for (auto& x : v) x = RandomValue<V>(rng_, true);
    const size_t offset = c.unaligned ? 1 : 0;
    DeviceArray<uint32_t> keys(in.keys, offset), mask(in.mask, offset);
    DeviceArray<V> values(v, offset);
    DeviceArray<uint32_t> counts(c.groups);
    DeviceArray<uint64_t> output(2 * size_t(c.groups));
    DeviceArray<uint8_t> overflow(c.groups);
    ASSERT_TRUE(keys.ok() && mask.ok() && values.ok() && counts.ok() && output.ok() &&
                overflow.ok());
    const std::vector<double> abs = AbsSums(in, v, c.groups);
    for (AggregateOp op : kValueOps) {
      SCOPED_TRACE(std::string(AggregateOpName(op)) + " " + Seed());
      gd::AggregateArgs a;
      a.op = op;
      a.keys = keys.get();
      a.mask = mask.get();
      a.rows = c.rows;
      a.groups = c.groups;
      a.counts = counts.get();
      a.value_type = type;
      a.values = values.get();
      a.output = output.get();
      const bool flags = AggregateReportsOverflow(op, type);
      a.overflow = flags ? overflow.get() : nullptr;
      a.force_path = c.path;
      ASSERT_EQ(cudaMemset(output.get(), 0xa5, 2 * size_t(c.groups) * 8), cudaSuccess);
      ASSERT_EQ(cudaMemset(overflow.get(), 0xa5, c.groups), cudaSuccess);
      const cudaError_t e = gd::Aggregate(a, stream_);
      if (!gd::AggregatePathFits(a, c.path)) {
        EXPECT_EQ(e, cudaErrorInvalidValue) << cudaGetErrorString(e);
        continue;
      }
      ASSERT_EQ(e, cudaSuccess) << cudaGetErrorString(e);
      ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
      TypedOut got;
      got.words.resize(c.groups);
      got.rows.resize(c.groups);
      ASSERT_EQ(cudaMemcpy(got.words.data(), output.get(), c.groups * 8, cudaMemcpyDeviceToHost),
                cudaSuccess);
      ASSERT_EQ(cudaMemcpy(got.rows.data(), counts.get(), c.groups * 4, cudaMemcpyDeviceToHost),
                cudaSuccess);
      if (flags) {
        got.overflow.resize(c.groups);
        ASSERT_EQ(cudaMemcpy(got.overflow.data(), overflow.get(), c.groups, cudaMemcpyDeviceToHost),
                  cudaSuccess);
      }
      // The CPU reference.
      TypedOut want;
      want.words.assign(c.groups, kPoison64);
      want.rows.assign(c.groups, kPoison32);
      if (flags) want.overflow.assign(c.groups, kPoison8);
      AggregateNode node;
      node.op = op;
      node.keys = ChunkedU32{in.keys};
      node.mask = ChunkedU32{in.mask};
      node.values = Chunked<V>{v};
      node.output = want.words;
      node.overflow = want.overflow;
      node.contributing_rows = want.rows;
      CommandGraph g;
      g.Add(node);
      ASSERT_TRUE(cpu_->Run(g).ok());
      ExpectSameTyped<V>(op, true, want, got, abs);
    }
  }

  cudaStream_t stream_ = nullptr;
};

TEST_P(AggregateTypedPathTest, EveryTypeMatchesCpuOrIsRefused) {
  Check<int32_t>(ColumnType::kInt32);
  Check<int64_t>(ColumnType::kInt64);
  Check<uint32_t>(ColumnType::kUint32);
  Check<uint64_t>(ColumnType::kUint64);
  Check<double>(ColumnType::kFloat64);
}

INSTANTIATE_TEST_SUITE_P(
    Paths, AggregateTypedPathTest,
    ::testing::Values(PathCase{gd::AggregatePath::kLanePrivate, 1000, 16, false},  // refused
                      PathCase{gd::AggregatePath::kBlockShared, 100003, 256, false},
                      PathCase{gd::AggregatePath::kBlockShared, 5001, 3, true},
                      PathCase{gd::AggregatePath::kSharedRange, 100003, 257, false},
                      PathCase{gd::AggregatePath::kSharedRange, (1u << 21) + 3, 8191, true},
                      PathCase{gd::AggregatePath::kSharedRange, (1u << 21) + 3, 65536, false},
                      PathCase{gd::AggregatePath::kGlobal, 300007, 65536, false},
                      PathCase{gd::AggregatePath::kGlobal, 1000, 5, true}),
    [](const ::testing::TestParamInfo<PathCase>& info) {
      std::string name(gd::AggregatePathName(info.param.path));
      for (char& ch : name) ch = ch == '-' ? '_' : ch;
      return name + "_rows" + std::to_string(info.param.rows) + "_groups" +
             std::to_string(info.param.groups) + (info.param.unaligned ? "_unaligned" : "");
    });

TEST(AggregateTypedPaths, LanePrivateIsFloat32Only) {
  gd::AggregateArgs a;
  a.op = AggregateOp::kSum;
  a.rows = 1000;
  a.groups = 16;
  EXPECT_TRUE(gd::AggregatePathFits(a, gd::AggregatePath::kLanePrivate));
  a.value_type = ColumnType::kInt64;
  EXPECT_FALSE(gd::AggregatePathFits(a, gd::AggregatePath::kLanePrivate));
  EXPECT_EQ(gd::ChosenAggregatePath(a), gd::AggregatePath::kBlockShared);
  EXPECT_EQ(gd::AggregateTypedOutputWords(AggregateOp::kSum, ColumnType::kInt64, 10), 20u);
  EXPECT_EQ(gd::AggregateTypedOutputWords(AggregateOp::kSum, ColumnType::kInt32, 10), 10u);
  EXPECT_EQ(gd::AggregateTypedOutputWords(AggregateOp::kMax, ColumnType::kUint64, 10), 10u);
}

#endif  // GPUJOIN_HAVE_CUDA

}  // namespace
}  // namespace gpujoin::engine
