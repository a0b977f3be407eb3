// Grouped aggregation, CUDA against the CPU backend, on fresh random inputs (the
// seed is printed on failure). Two suites:
//  - AggregateDifferential runs aggregate nodes through both backends' Run, over
//    the shapes that pick each accumulation path (16, 256, 4,097, 65,536 and
//    200,000 groups) with uniform keys, hot groups (half of the rows on one group:
//    what stresses the range paths' 16-bit packed counts), out-of-range keys,
//    masks and chunked inputs;
//  - AggregatePathTest calls the device-level Aggregate (engine/src/cuda/
//    aggregate_ops.hpp) with every path forced, on unaligned columns too, and
//    checks that a forced path that cannot hold the groups is refused.
// Counts, contributing rows, min and max are compared exactly. With "exact"
// values (integers whose per-group sum of magnitudes stays below 2^24, so every
// float sum is exact in any order) sum and mean are compared bit for bit as well,
// which catches a single row counted in the wrong group; fractional values are
// compared to a float tolerance. Skipped (or failed under GPUJOIN_REQUIRE_GPU)
// without a CUDA device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "backends.hpp"
#include "gpujoin/engine/aggregation.hpp"
#include "gpujoin/engine/backend.hpp"
#include "gpujoin/engine/graph.hpp"

#if defined(GPUJOIN_HAVE_CUDA)
#include <cuda_runtime.h>

#include "cuda/aggregate/aggregate_ops.hpp"  // engine/src: the device-level Aggregate
#endif

namespace gpujoin::engine {
namespace {

// Per-group sums of integer magnitudes below this are exact in float in any order.
constexpr uint64_t kExactSumLimit = uint64_t{1} << 24;

enum class KeyShape { kUniform, kSkewed, kHalfOnOne, kOneGroup, kOutOfRange };

std::string ShapeName(KeyShape s) {
  switch (s) {
    case KeyShape::kUniform:
      return "uniform";
    case KeyShape::kSkewed:
      return "skewed";
    case KeyShape::kHalfOnOne:
      return "halfonone";
    case KeyShape::kOneGroup:
      return "onegroup";
    case KeyShape::kOutOfRange:
      return "outofrange";
  }
  return "unknown";
}

// Inputs of one aggregation; `value_range` > 0 when the values are exact
// integers in [-value_range, value_range].
struct AggInputs {
  std::vector<uint32_t> keys, mask;
  std::vector<float> values;
  int value_range = 0;
};

AggInputs RandomInputs(std::mt19937_64& rng, size_t rows, uint32_t groups, KeyShape shape,
                       bool masked, bool exact) {
  AggInputs in;
  in.keys.resize(rows);
  const uint32_t hot = uint32_t(rng() % groups);
  for (auto& k : in.keys) {
    switch (shape) {
      case KeyShape::kUniform:
        k = uint32_t(rng() % groups);
        break;
      case KeyShape::kSkewed: {
        // Most rows in a few hot groups, a tail spread over all of them.
        const uint32_t r = uint32_t(rng() % 100);
        k = r < 70 ? uint32_t(rng() % std::min<uint32_t>(3, groups)) : uint32_t(rng() % groups);
        break;
      }
      case KeyShape::kHalfOnOne:
        k = rng() % 2 == 0 ? hot : uint32_t(rng() % groups);
        break;
      case KeyShape::kOneGroup:
        k = groups - 1;
        break;
      case KeyShape::kOutOfRange: {
        const uint32_t r = uint32_t(rng() % 4);
        k = r == 0 ? groups + uint32_t(rng() % 1000)
                   : (r == 1 ? kEmptyKey : uint32_t(rng() % groups));
        break;
      }
    }
  }
  if (masked) {
    in.mask.resize(rows);
    for (auto& m : in.mask) m = rng() % 3 == 0 ? 0u : uint32_t(rng() | 1u);
  }
  if (exact) {
    // The largest group bounds every group's sum of magnitudes.
    std::vector<uint64_t> per_group(groups, 0);
    uint64_t largest = 1;
    for (uint32_t k : in.keys)
      if (k < groups) largest = std::max(largest, ++per_group[k]);
    const uint64_t range = std::min<uint64_t>(1000, (kExactSumLimit - 1) / largest);
    in.value_range = int(range);
  }
  // Values with the edge cases: NaN, +-inf (ignored), -0 and +0, integers and,
  // unless exact, random floats with 10 fraction bits.
  in.values.resize(rows);
  for (auto& v : in.values)
    v = EdgeCaseValue(rng, in.value_range > 0 ? in.value_range : 1000, in.value_range > 0);
  return in;
}

// Outputs of one aggregation, poisoned before the run.
struct AggOutputs {
  std::vector<uint32_t> counts;  // count output, or contributing rows
  std::vector<float> values;

  // The node's output words: the counts of a count, else float32 values.
  void SetFrom(AggregateOp op, const std::vector<uint64_t>& words) {
    if (op == AggregateOp::kCount) {
      counts.assign(words.begin(), words.end());
    } else {
      values = Float32sOfWords(words);
    }
  }
};

constexpr uint64_t kPoisonWord = 0xdeadbeefdeadbeefull;

// Per group, the sum of |value| over its contributing rows (finite values of
// in-range, unmasked rows): what bounds the float32 rounding of its sum.
std::vector<double> AbsSums(const AggInputs& in, uint32_t groups) {
  std::vector<double> abs(groups, 0.0);
  for (size_t i = 0; i < in.keys.size(); ++i) {
    if (in.keys[i] >= groups || (!in.mask.empty() && in.mask[i] == 0)) continue;
    if (!in.values.empty() && std::isfinite(in.values[i]))
      abs[in.keys[i]] += std::fabs(in.values[i]);
  }
  return abs;
}

// Compares the CUDA outputs of `op` with the CPU's: counts and min/max exactly,
// sum/mean bit for bit when `exact`, else within the float32 summation bound of
// two orders (each within rows x 2^-24 x sum |value| of the exact sum; `abs`
// from AbsSums; divided by the count for mean), tight enough that a row counted
// in the wrong group shows.
void ExpectSameAggregate(AggregateOp op, bool exact, const AggOutputs& cpu, const AggOutputs& cuda,
                         const std::vector<double>& abs = {}) {
  EXPECT_EQ(cuda.counts, cpu.counts);
  if (op == AggregateOp::kCount) return;
  ASSERT_EQ(cuda.values.size(), cpu.values.size());
  size_t bad = 0;
  for (size_t g = 0; g < cpu.values.size(); ++g) {
    const float x = cpu.values[g], y = cuda.values[g];
    bool same = false;
    if (std::isnan(x) || std::isnan(y)) {
      same = std::isnan(x) && std::isnan(y);
    } else if (op == AggregateOp::kMin || op == AggregateOp::kMax || exact) {
      // Exact, including the sign of zero.
      same = std::memcmp(&x, &y, sizeof(float)) == 0;
    } else {
      const double rows = cpu.counts.empty() ? 1.0 : double(cpu.counts[g]);
      const double bound = 2.0 * rows * std::ldexp(1.0, -24) * (abs.empty() ? 0.0 : abs[g]);
      const double tol = (op == AggregateOp::kMean ? bound / std::max(1.0, rows) : bound) +
                         std::ldexp(std::fabs(double(x)), -23);  // the final rounding
      same = std::fabs(double(x) - double(y)) <= tol &&
             (op != AggregateOp::kSum || x != 0.0f || std::signbit(x) == std::signbit(y));
    }
    if (!same && ++bad < 4) ADD_FAILURE() << "group " << g << ": cpu " << x << " cuda " << y;
  }
  EXPECT_EQ(bad, 0u);
}

constexpr AggregateOp kAllOps[] = {AggregateOp::kCount, AggregateOp::kSum, AggregateOp::kMin,
                                   AggregateOp::kMax, AggregateOp::kMean};

struct AggCase {
  size_t rows;
  uint32_t groups;
  KeyShape shape;
  bool mask;
  bool exact;  // exact integer values: sum and mean compared bit for bit
};

void PrintTo(const AggCase& c, std::ostream* os) {
  *os << "{rows " << c.rows << ", groups " << c.groups << ", keys " << ShapeName(c.shape)
      << (c.mask ? ", masked" : "") << (c.exact ? ", exact values" : ", fractional values") << "}";
}

class AggregateDifferential : public CudaVsCpuTest, public ::testing::WithParamInterface<AggCase> {
 protected:
  AggregateDifferential() : CudaVsCpuTest("CUDA-vs-CPU aggregation tests skipped") {}
};

TEST_P(AggregateDifferential, AllOpsMatchCpu) {
  const AggCase c = GetParam();
  const AggInputs in = RandomInputs(rng_, c.rows, c.groups, c.shape, c.mask, c.exact);
  const ChunkedU32 key_chunks = RandomChunks(in.keys);
  const ChunkedF32 value_chunks = RandomChunks(in.values);
  const std::optional<ChunkedU32> mask_chunks =
      c.mask ? std::optional<ChunkedU32>(RandomChunks(in.mask)) : std::nullopt;

  for (AggregateOp op : kAllOps) {
    SCOPED_TRACE(std::string(AggregateOpName(op)) + " " + Seed());
    AggOutputs out[2];
    int k = 0;
    for (Backend* b : {cpu_.get(), cuda_.get()}) {
      AggregateNode node;
      node.op = op;
      node.keys = key_chunks;
      node.mask = mask_chunks;
      out[k].counts.assign(c.groups, kPoison32);
      std::vector<uint64_t> words(c.groups, kPoisonWord);
      node.output = words;
      if (op != AggregateOp::kCount) {
        node.values = value_chunks;
        node.contributing_rows = out[k].counts;
      }
      CommandGraph g;
      g.Add(node);
      const absl::Status s = b->Run(g);
      ASSERT_TRUE(s.ok()) << BackendKindName(b->Info().kind) << ": " << s;
      out[k].SetFrom(op, words);
      ++k;
    }
    ExpectSameAggregate(op, c.exact, out[0], out[1], AbsSums(in, c.groups));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, AggregateDifferential,
    ::testing::Values(
        AggCase{0, 5, KeyShape::kUniform, false, true},  // empty: +0 / NaN
        AggCase{1, 1, KeyShape::kUniform, true, true},
        AggCase{1000, 16, KeyShape::kUniform, true, false},  // lane-private
        AggCase{100003, 16, KeyShape::kOneGroup, false, true},
        AggCase{100003, 7, KeyShape::kSkewed, true, false},
        AggCase{100003, 17, KeyShape::kOutOfRange, true, true},  // block-shared
        AggCase{100003, 256, KeyShape::kSkewed, false, false},
        AggCase{100003, 256, KeyShape::kOneGroup, true, true},
        AggCase{100003, 257, KeyShape::kUniform, true, false},  // range paths from here
        AggCase{(1u << 21) + 3, 4097, KeyShape::kHalfOnOne, true, true},
        AggCase{(1u << 21) + 3, 4097, KeyShape::kHalfOnOne, false, true},
        AggCase{(1u << 21) + 3, 4097, KeyShape::kUniform, false, false},
        AggCase{300007, 65536, KeyShape::kOutOfRange, false, false},
        AggCase{(1u << 21) + 5, 65536, KeyShape::kHalfOnOne, false, true},
        AggCase{(1u << 21) + 5, 65536, KeyShape::kHalfOnOne, true, true},
        AggCase{(1u << 21) + 5, 65536, KeyShape::kUniform, true, false},
        AggCase{(1u << 22) + 1, 200000, KeyShape::kHalfOnOne, false, true},
        AggCase{(1u << 22) + 1, 200000, KeyShape::kHalfOnOne, true, true},
        AggCase{(1u << 22) + 1, 200000, KeyShape::kOutOfRange, true, false},
        AggCase{100003, 200000, KeyShape::kUniform, false, true},       // fewer rows than groups
        AggCase{(1u << 24) + 7, 256, KeyShape::kUniform, true, true}),  // > 2^24 rows
    [](const ::testing::TestParamInfo<AggCase>& info) {
      return "rows" + std::to_string(info.param.rows) + "_groups" +
             std::to_string(info.param.groups) + "_" + ShapeName(info.param.shape) +
             (info.param.mask ? "_masked" : "") + (info.param.exact ? "_exact" : "_fractional");
    });

#if defined(GPUJOIN_HAVE_CUDA)

namespace gd = detail;

// One device allocation of `n` items (plus `offset` leading items, so that the
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
  KeyShape shape;
  bool mask;
  bool unaligned;  // columns start 4 bytes past a 16-byte boundary
};

void PrintTo(const PathCase& c, std::ostream* os) {
  *os << "{" << gd::AggregatePathName(c.path) << ", rows " << c.rows << ", groups " << c.groups
      << ", keys " << ShapeName(c.shape) << (c.mask ? ", masked" : "")
      << (c.unaligned ? ", unaligned" : "") << "}";
}

// The ops of one forced-path run: `counts` says whether per-group counts are
// requested (always for count and mean; optional for sum, min and max).
struct OpCase {
  AggregateOp op;
  bool counts;
};

constexpr OpCase kOpCases[] = {{AggregateOp::kCount, true}, {AggregateOp::kSum, true},
                               {AggregateOp::kSum, false},  {AggregateOp::kMin, true},
                               {AggregateOp::kMin, false},  {AggregateOp::kMax, false},
                               {AggregateOp::kMean, true}};

class AggregatePathTest : public CudaVsCpuTest, public ::testing::WithParamInterface<PathCase> {
 protected:
  AggregatePathTest() : CudaVsCpuTest("device-level aggregation tests skipped") {}

  void SetUp() override {
    CudaVsCpuTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), cudaSuccess);
  }
  void TearDown() override {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  // The CPU backend's result of `oc` over `in`.
  AggOutputs CpuAggregate(const OpCase& oc, const AggInputs& in, uint32_t groups) {
    AggOutputs out;
    AggregateNode node;
    node.op = oc.op;
    node.keys = ChunkedU32{in.keys};
    if (!in.mask.empty()) node.mask = ChunkedU32{in.mask};
    if (oc.counts) out.counts.assign(groups, kPoison32);
    std::vector<uint64_t> words(groups, kPoisonWord);
    node.output = words;
    if (oc.op != AggregateOp::kCount) {
      node.values = ChunkedF32{in.values};
      if (oc.counts) node.contributing_rows = out.counts;
    }
    CommandGraph g;
    g.Add(node);
    const absl::Status s = cpu_->Run(g);
    EXPECT_TRUE(s.ok()) << s;
    out.SetFrom(oc.op, words);
    return out;
  }

  cudaStream_t stream_ = nullptr;
};

TEST_P(AggregatePathTest, ForcedPathMatchesCpuOrIsRefused) {
  const PathCase c = GetParam();
  const AggInputs in = RandomInputs(rng_, c.rows, c.groups, c.shape, c.mask, /*exact=*/true);
  const size_t offset = c.unaligned ? 1 : 0;
  DeviceArray<uint32_t> keys(in.keys, offset), mask(in.mask, offset);
  DeviceArray<float> values(in.values, offset);
  DeviceArray<uint32_t> counts(c.groups);
  DeviceArray<float> output(c.groups);
  ASSERT_TRUE(keys.ok() && mask.ok() && values.ok() && counts.ok() && output.ok());
  int ran = 0;
  for (const OpCase& oc : kOpCases) {
    SCOPED_TRACE(std::string(AggregateOpName(oc.op)) + (oc.counts ? " with counts" : "") + " " +
                 Seed());
    gd::AggregateArgs a;
    a.op = oc.op;
    a.keys = keys.get();
    a.values = oc.op == AggregateOp::kCount ? nullptr : values.get();
    a.mask = c.mask ? mask.get() : nullptr;
    a.rows = c.rows;
    a.groups = c.groups;
    a.counts = oc.counts ? counts.get() : nullptr;
    a.output = oc.op == AggregateOp::kCount ? nullptr : output.get();
    a.force_path = c.path;
    ASSERT_EQ(gd::ChosenAggregatePath(a), c.path);
    ASSERT_EQ(cudaMemset(counts.get(), 0xa5, c.groups * sizeof(uint32_t)), cudaSuccess);
    ASSERT_EQ(cudaMemset(output.get(), 0xa5, c.groups * sizeof(float)), cudaSuccess);
    const cudaError_t e = gd::Aggregate(a, stream_);
    if (!gd::AggregatePathFits(a, c.path)) {
      // Refused before anything is enqueued.
      EXPECT_EQ(e, cudaErrorInvalidValue) << cudaGetErrorString(e);
      continue;
    }
    ASSERT_EQ(e, cudaSuccess) << cudaGetErrorString(e);
    ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    ++ran;
    AggOutputs gpu;
    if (oc.counts) {
      gpu.counts.resize(c.groups);
      ASSERT_EQ(cudaMemcpy(gpu.counts.data(), counts.get(), c.groups * sizeof(uint32_t),
                           cudaMemcpyDeviceToHost),
                cudaSuccess);
    }
    if (oc.op != AggregateOp::kCount) {
      gpu.values.resize(c.groups);
      ASSERT_EQ(cudaMemcpy(gpu.values.data(), output.get(), c.groups * sizeof(float),
                           cudaMemcpyDeviceToHost),
                cudaSuccess);
    }
    ExpectSameAggregate(oc.op, /*exact=*/true, CpuAggregate(oc, in, c.groups), gpu);
  }
  // Every case here runs count at least (lane-private and block-shared cases
  // that cannot hold the groups are in RefusesGroupsItCannotHold).
  EXPECT_GT(ran, 0);
}

constexpr size_t kBig = (size_t{1} << 21) + 3;

INSTANTIATE_TEST_SUITE_P(
    Paths, AggregatePathTest,
    ::testing::Values(
        PathCase{gd::AggregatePath::kLanePrivate, 100003, 16, KeyShape::kHalfOnOne, true, false},
        PathCase{gd::AggregatePath::kLanePrivate, 1000, 1, KeyShape::kUniform, false, true},
        PathCase{gd::AggregatePath::kBlockShared, 100003, 256, KeyShape::kHalfOnOne, true, false},
        PathCase{gd::AggregatePath::kBlockShared, 5001, 17, KeyShape::kOutOfRange, false, true},
        PathCase{gd::AggregatePath::kSharedRange, 100003, 257, KeyShape::kUniform, true, false},
        PathCase{gd::AggregatePath::kSharedRange, kBig, 4097, KeyShape::kHalfOnOne, false, false},
        // 2^21 rows on one group: every block's half passes 0x8000 many times.
        PathCase{gd::AggregatePath::kSharedRange, kBig, 65536, KeyShape::kOneGroup, false, false},
        PathCase{gd::AggregatePath::kSharedRange, kBig, 65536, KeyShape::kHalfOnOne, true, true},
        PathCase{gd::AggregatePath::kSharedRange, kBig, 4097, KeyShape::kHalfOnOne, true, false},
        // Count takes 2 passes, sum/min/max without counts 4; sum or mean with counts
        // would take 6 (refused).
        PathCase{gd::AggregatePath::kSharedRange, kBig, 200000, KeyShape::kHalfOnOne, false, false},
        PathCase{gd::AggregatePath::kSharedRange, kBig, 200000, KeyShape::kHalfOnOne, true, true},
        PathCase{gd::AggregatePath::kSharedRange, 1000, 65536, KeyShape::kOutOfRange, true, false},
        PathCase{gd::AggregatePath::kGlobal, 300007, 65536, KeyShape::kHalfOnOne, true, false},
        PathCase{gd::AggregatePath::kGlobal, 1000, 5, KeyShape::kUniform, false, true}),
    [](const ::testing::TestParamInfo<PathCase>& info) {
      std::string name(gd::AggregatePathName(info.param.path));
      std::replace(name.begin(), name.end(), '-', '_');
      return name + "_rows" + std::to_string(info.param.rows) + "_groups" +
             std::to_string(info.param.groups) + "_" + ShapeName(info.param.shape) +
             (info.param.mask ? "_masked" : "") + (info.param.unaligned ? "_unaligned" : "");
    });

class AggregatePathLimits : public CudaVsCpuTest {
 protected:
  AggregatePathLimits() : CudaVsCpuTest("device-level aggregation tests skipped") {}
};

TEST_F(AggregatePathLimits, RefusesGroupsItCannotHold) {
  DeviceArray<uint32_t> keys(std::vector<uint32_t>(64, 3u), 0);
  DeviceArray<uint32_t> counts(1u << 21);
  ASSERT_TRUE(keys.ok() && counts.ok());
  gd::AggregateArgs a;
  a.keys = keys.get();
  a.rows = 64;
  a.counts = counts.get();
  // Lane-private holds 16 groups, block-shared 256, shared-range what 4 passes of
  // one block's shared memory hold (2^21 16-bit counts need more than 4 x 227 KiB);
  // global holds any number.
  const std::pair<gd::AggregatePath, uint32_t> refused[] = {
      {gd::AggregatePath::kLanePrivate, 17},
      {gd::AggregatePath::kBlockShared, 257},
      {gd::AggregatePath::kSharedRange, 1u << 21}};
  for (const auto& [path, groups] : refused) {
    SCOPED_TRACE(std::string(gd::AggregatePathName(path)) + ", " + std::to_string(groups));
    a.groups = groups;
    a.force_path = path;
    EXPECT_FALSE(gd::AggregatePathFits(a, path));
    EXPECT_EQ(gd::Aggregate(a, nullptr), cudaErrorInvalidValue);
  }
  for (gd::AggregatePath path : {gd::AggregatePath::kLanePrivate, gd::AggregatePath::kBlockShared,
                                 gd::AggregatePath::kSharedRange, gd::AggregatePath::kGlobal}) {
    a.groups = 16;
    EXPECT_TRUE(gd::AggregatePathFits(a, path)) << gd::AggregatePathName(path);
  }
  a.groups = 1u << 21;
  EXPECT_TRUE(gd::AggregatePathFits(a, gd::AggregatePath::kGlobal));
}

TEST_F(AggregatePathLimits, ChoosesThePathByGroupCount) {
  gd::AggregateArgs a;
  a.rows = uint64_t{1} << 28;
  a.counts = reinterpret_cast<uint32_t*>(uintptr_t{16});  // only whether counts are wanted
  const auto chosen = [&](AggregateOp op, uint32_t groups) {
    a.op = op;
    a.groups = groups;
    return gd::ChosenAggregatePath(a);
  };
  EXPECT_EQ(chosen(AggregateOp::kCount, 16), gd::AggregatePath::kLanePrivate);
  EXPECT_EQ(chosen(AggregateOp::kMean, 16), gd::AggregatePath::kLanePrivate);
  EXPECT_EQ(chosen(AggregateOp::kCount, 256), gd::AggregatePath::kBlockShared);
  EXPECT_EQ(chosen(AggregateOp::kCount, 4097), gd::AggregatePath::kSharedRange);
  EXPECT_EQ(chosen(AggregateOp::kCount, 65536), gd::AggregatePath::kSharedRange);   // 1 pass
  EXPECT_EQ(chosen(AggregateOp::kMean, 65536), gd::AggregatePath::kSharedRange);    // 2 passes
  EXPECT_EQ(chosen(AggregateOp::kCount, 200000), gd::AggregatePath::kSharedRange);  // 2 passes
  // Mean of 200,000 groups would take 6 passes, 2^24 counts 145.
  EXPECT_EQ(chosen(AggregateOp::kMean, 200000), gd::AggregatePath::kGlobal);
  EXPECT_EQ(chosen(AggregateOp::kCount, 1u << 24), gd::AggregatePath::kGlobal);
  // Fewer rows than two per group: no privatised copy.
  a.rows = 1000;
  EXPECT_EQ(chosen(AggregateOp::kCount, 65536), gd::AggregatePath::kGlobal);
  EXPECT_EQ(chosen(AggregateOp::kCount, 256), gd::AggregatePath::kBlockShared);
}

#endif  // GPUJOIN_HAVE_CUDA

}  // namespace
}  // namespace gpujoin::engine
