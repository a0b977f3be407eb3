// Typed grouped aggregation: int32, int64, uint32, uint64 and float64
// values on every backend. Exact 64-bit integer sums where float32 is wrong (the
// issue's 9M latencies), overflow flagged at the boundary and judged on the exact
// sum (never on an intermediate), min/max at the type extremes, values a narrower
// or float type would confuse (> 2^53, > INT64_MAX as uint64), masks, out-of-range
// keys, empty groups, float64 NaN/+-0/inf, chunk boundaries that differ per column,
// the many-group paths against an exact model, and validation.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <type_traits>

#include "gpujoin/engine/aggregation.hpp"
#include "test_backends.hpp"

namespace gpujoin::engine::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kI64Min = std::numeric_limits<int64_t>::min();
constexpr uint64_t kU64Max = std::numeric_limits<uint64_t>::max();
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr uint64_t kPoison = 0x5a5a5a5a5a5a5a5aull;

uint64_t W(int64_t v) { return static_cast<uint64_t>(v); }
uint64_t D(double v) { return std::bit_cast<uint64_t>(v); }
double AsDouble(uint64_t w) { return std::bit_cast<double>(w); }

// One typed run's outputs (poisoned before the run).
struct TypedOut {
  std::vector<uint64_t> words;
  std::vector<uint8_t> overflow;  // empty unless the op reports it
  std::vector<uint32_t> rows;     // contributing rows
};

class AggregateTypedTest : public BackendTest {
 public:
  template <typename V>
  TypedOut Run(AggregateOp op, const Chunked<uint32_t>& keys, const Chunked<V>& values,
               size_t groups, std::optional<ChunkedU32> mask = std::nullopt) {
    TypedOut out;
    out.words.assign(groups, kPoison);
    out.rows.assign(groups, 0xdeadbeefu);
    const ColumnType type = *AggregateValueType(AggregateValues{values});
    if (AggregateReportsOverflow(op, type)) out.overflow.assign(groups, 0x77);
    AggregateNode node;
    node.op = op;
    node.keys = keys;
    node.values = values;
    node.mask = std::move(mask);
    node.output = out.words;
    node.overflow = out.overflow;
    node.contributing_rows = out.rows;
    CommandGraph graph;
    graph.Add(node);
    RunOk(graph);
    return out;
  }
  template <typename V>
  TypedOut Run(AggregateOp op, const std::vector<uint32_t>& keys, const std::vector<V>& values,
               size_t groups, const std::vector<uint32_t>* mask = nullptr) {
    std::optional<ChunkedU32> m;
    if (mask != nullptr) m = One(*mask);
    return Run<V>(op, One(keys), One(values), groups, std::move(m));
  }

  absl::Status RunStatus(const AggregateNode& node) {
    CommandGraph graph;
    graph.Add(node);
    return backend_->Run(graph);
  }
};

// The report: 9M integer latencies whose exact sum is 548683751; float32
// accumulation answered 548683904.
TEST_P(AggregateTypedTest, Int64SumIsExactWhereFloat32IsNot) {
  const size_t rows = 9'000'000;
  std::vector<uint32_t> keys(rows, 0);
  std::vector<int64_t> latencies(rows);
  std::mt19937 rng(22);
  int64_t sum = 0;
  for (size_t r = 0; r < rows; ++r) {
    latencies[r] = rng() % 122;
    sum += latencies[r];
  }
  latencies[rows - 1] += 548683751 - sum;  // make the exact total the issue's
  ASSERT_GE(latencies[rows - 1], 0);
  const TypedOut out = Run<int64_t>(AggregateOp::kSum, keys, latencies, 1);
  EXPECT_THAT(out.words, ElementsAre(W(548683751)));
  EXPECT_THAT(out.overflow, ElementsAre(0));
  EXPECT_THAT(out.rows, ElementsAre(rows));
  const TypedOut mean = Run<int64_t>(AggregateOp::kMean, keys, latencies, 1);
  EXPECT_EQ(AsDouble(mean.words[0]), 548683751.0 / 9e6);

  // The float32 path, unchanged, cannot represent the answer (ulp 32 at 5e8).
  std::vector<float> f(latencies.begin(), latencies.end());
  const TypedOut fout = Run<float>(AggregateOp::kSum, keys, f, 1);
  EXPECT_NE(static_cast<double>(Float32OfWord(fout.words[0])), 548683751.0);
}

TEST_P(AggregateTypedTest, Int64OverflowIsFlaggedAtTheBoundary) {
  // Group 0: INT64_MAX + 1 overflows. Group 1: INT64_MAX + 0 fits. Group 2:
  // INT64_MIN - 1 overflows. Group 3: INT64_MAX + 1 - 1 fits (the exact sum is
  // judged, whatever the order). Group 4: the +1 is masked out.
  const std::vector<uint32_t> keys = {0, 0, 1, 1, 2, 2, 3, 3, 3, 4, 4};
  const std::vector<int64_t> v = {kI64Max, 1, kI64Max, 0, kI64Min, -1, kI64Max, 1, -1, kI64Max, 1};
  const std::vector<uint32_t> mask = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0};
  const TypedOut sum = Run<int64_t>(AggregateOp::kSum, keys, v, 5, &mask);
  EXPECT_THAT(sum.overflow, ElementsAre(1, 0, 1, 0, 0));
  // An overflowed group holds the low 64 bits of the exact sum.
  EXPECT_EQ(sum.words[0], W(kI64Min));
  EXPECT_EQ(sum.words[1], W(kI64Max));
  EXPECT_EQ(sum.words[2], W(kI64Max));
  EXPECT_EQ(sum.words[3], W(kI64Max));
  EXPECT_EQ(sum.words[4], W(kI64Max));
  const TypedOut mean = Run<int64_t>(AggregateOp::kMean, keys, v, 5, &mask);
  EXPECT_THAT(mean.overflow, ElementsAre(1, 0, 1, 0, 0));
  EXPECT_TRUE(std::isnan(AsDouble(mean.words[0])));
  EXPECT_EQ(AsDouble(mean.words[1]), static_cast<double>(kI64Max) / 2);
  EXPECT_TRUE(std::isnan(AsDouble(mean.words[2])));
  EXPECT_EQ(AsDouble(mean.words[3]), static_cast<double>(kI64Max) / 3);
  EXPECT_EQ(AsDouble(mean.words[4]), static_cast<double>(kI64Max));
}

TEST_P(AggregateTypedTest, Uint64OverflowIsFlaggedAtTheBoundary) {
  const std::vector<uint32_t> keys = {0, 0, 1, 1, 2, 2, 2};
  const std::vector<uint64_t> v = {
      kU64Max, 1, kU64Max, 0, uint64_t{1} << 63, uint64_t{1} << 62, uint64_t{1} << 62};
  const TypedOut sum = Run<uint64_t>(AggregateOp::kSum, keys, v, 3);
  EXPECT_THAT(sum.overflow, ElementsAre(1, 0, 1));
  EXPECT_THAT(sum.words, ElementsAre(0, kU64Max, 0));
  // 2^63 + 2^62 fits uint64 but not int64: unsigned sums are not read as signed.
  const std::vector<uint32_t> k2 = {0, 0};
  const std::vector<uint64_t> v2 = {uint64_t{1} << 63, uint64_t{1} << 62};
  const TypedOut fits = Run<uint64_t>(AggregateOp::kSum, k2, v2, 1);
  EXPECT_THAT(fits.overflow, ElementsAre(0));
  EXPECT_THAT(fits.words, ElementsAre(0xc000000000000000ull));
}

TEST_P(AggregateTypedTest, Int32SumsNeverOverflowTheirInt64) {
  const std::vector<uint32_t> keys = {0, 0, 0, 1, 1, 1};
  const int32_t mx = std::numeric_limits<int32_t>::max();
  const int32_t mn = std::numeric_limits<int32_t>::min();
  const std::vector<int32_t> v = {mx, mx, mx, mn, mn, mn};
  const TypedOut sum = Run<int32_t>(AggregateOp::kSum, keys, v, 2);
  EXPECT_THAT(sum.words, ElementsAre(W(3 * int64_t{mx}), W(3 * int64_t{mn})));
  EXPECT_THAT(sum.overflow, ElementsAre(0, 0));
  const std::vector<uint32_t> uv = {0xffffffffu, 0xffffffffu, 0xffffffffu, 0, 1, 2};
  const TypedOut usum = Run<uint32_t>(AggregateOp::kSum, keys, uv, 2);
  EXPECT_THAT(usum.words, ElementsAre(3 * uint64_t{0xffffffffu}, 3));
}

TEST_P(AggregateTypedTest, MinMaxKeepTheValueTypeAtItsExtremes) {
  const std::vector<uint32_t> keys = {0, 0, 0, 1, 2};
  {
    const std::vector<int64_t> v = {kI64Min, kI64Max, 0, -5, kI64Max};
    EXPECT_THAT(Run<int64_t>(AggregateOp::kMin, keys, v, 4).words,
                ElementsAre(W(kI64Min), W(-5), W(kI64Max), 0));
    EXPECT_THAT(Run<int64_t>(AggregateOp::kMax, keys, v, 4).words,
                ElementsAre(W(kI64Max), W(-5), W(kI64Max), 0));
  }
  {
    // 2^63 is above INT64_MAX as uint64 (a signed compare would call it the least).
    const std::vector<uint64_t> v = {kU64Max, 0, uint64_t{1} << 63, uint64_t{1} << 63, 7};
    const TypedOut mn = Run<uint64_t>(AggregateOp::kMin, keys, v, 4);
    EXPECT_THAT(mn.words, ElementsAre(0, uint64_t{1} << 63, 7, 0));
    EXPECT_THAT(mn.rows, ElementsAre(3, 1, 1, 0));  // group 3 is empty: 0, told by its rows
    EXPECT_THAT(Run<uint64_t>(AggregateOp::kMax, keys, v, 4).words,
                ElementsAre(kU64Max, uint64_t{1} << 63, 7, 0));
  }
  {
    const int32_t mx = std::numeric_limits<int32_t>::max();
    const int32_t mn = std::numeric_limits<int32_t>::min();
    const std::vector<int32_t> v = {mn, mx, -1, -1, 3};
    // int32 words are sign-extended.
    EXPECT_THAT(Run<int32_t>(AggregateOp::kMin, keys, v, 3).words, ElementsAre(W(mn), W(-1), W(3)));
    EXPECT_THAT(Run<int32_t>(AggregateOp::kMax, keys, v, 3).words, ElementsAre(W(mx), W(-1), W(3)));
  }
  {
    const std::vector<uint32_t> v = {0xffffffffu, 0, 0x80000000u, 0x80000000u, 9};
    // uint32 words are zero-extended.
    EXPECT_THAT(Run<uint32_t>(AggregateOp::kMax, keys, v, 3).words,
                ElementsAre(0xffffffffull, 0x80000000ull, 9));
    EXPECT_THAT(Run<uint32_t>(AggregateOp::kMin, keys, v, 3).words,
                ElementsAre(0, 0x80000000ull, 9));
  }
}

TEST_P(AggregateTypedTest, Int64AboveTwoTo53IsNotRoundedThroughDouble) {
  const int64_t big = (int64_t{1} << 53) + 1;  // not a double
  const std::vector<uint32_t> keys = {0, 0, 1, 1};
  const std::vector<int64_t> v = {big, 1, big + 2, big};
  EXPECT_THAT(Run<int64_t>(AggregateOp::kSum, keys, v, 2).words,
              ElementsAre(W(big + 1), W(2 * big + 2)));
  EXPECT_THAT(Run<int64_t>(AggregateOp::kMin, keys, v, 2).words, ElementsAre(W(1), W(big)));
  EXPECT_THAT(Run<int64_t>(AggregateOp::kMax, keys, v, 2).words, ElementsAre(W(big), W(big + 2)));
}

TEST_P(AggregateTypedTest, MasksOutOfRangeKeysAndEmptyGroups) {
  const std::vector<uint32_t> keys = {0, 5, 0, 2, kEmptyKey, 2, 3};
  const std::vector<int64_t> v = {10, 100, 20, -7, 1000, 9, 11};
  const std::vector<uint32_t> mask = {1, 1, 0, 1, 1, 2, 0};
  // Group 1 has no rows; group 3's only row is masked; keys 5 and kEmptyKey are out of range.
  const TypedOut sum = Run<int64_t>(AggregateOp::kSum, keys, v, 4, &mask);
  EXPECT_THAT(sum.words, ElementsAre(W(10), 0, W(2), 0));
  EXPECT_THAT(sum.rows, ElementsAre(1, 0, 2, 0));
  EXPECT_THAT(sum.overflow, ElementsAre(0, 0, 0, 0));
  const TypedOut mn = Run<int64_t>(AggregateOp::kMin, keys, v, 4, &mask);
  EXPECT_THAT(mn.words, ElementsAre(W(10), 0, W(-7), 0));
  EXPECT_THAT(mn.rows, ElementsAre(1, 0, 2, 0));
  const TypedOut mean = Run<int64_t>(AggregateOp::kMean, keys, v, 4, &mask);
  EXPECT_EQ(AsDouble(mean.words[0]), 10.0);
  EXPECT_TRUE(std::isnan(AsDouble(mean.words[1])));
  EXPECT_EQ(AsDouble(mean.words[2]), 1.0);
  EXPECT_TRUE(std::isnan(AsDouble(mean.words[3])));
}

TEST_P(AggregateTypedTest, Float64FollowsTheFloat32Rules) {
  // Group 0: finite values among NaN/inf (ignored). Group 1: only -0 (sum +0,
  // min/max -0). Group 2: -0 and +0 (min -0, max +0). Group 3: only non-finite
  // (empty). Group 4: no rows.
  const std::vector<uint32_t> keys = {0, 0, 0, 0, 0, 1, 1, 2, 2, 3, 3};
  const std::vector<double> v = {1.5, kNaN, 2.25, kInf, -kInf, -0.0, -0.0, 0.0, -0.0, kNaN, kInf};
  const TypedOut sum = Run<double>(AggregateOp::kSum, keys, v, 5);
  EXPECT_THAT(sum.words, ElementsAre(D(3.75), D(0.0), D(0.0), D(0.0), D(0.0)));  // +0 bits
  EXPECT_THAT(sum.rows, ElementsAre(2, 2, 2, 0, 0));
  EXPECT_TRUE(sum.overflow.empty());
  const TypedOut mn = Run<double>(AggregateOp::kMin, keys, v, 5);
  EXPECT_EQ(mn.words[0], D(1.5));
  EXPECT_EQ(mn.words[1], D(-0.0));
  EXPECT_EQ(mn.words[2], D(-0.0));
  EXPECT_TRUE(std::isnan(AsDouble(mn.words[3])));
  EXPECT_TRUE(std::isnan(AsDouble(mn.words[4])));
  const TypedOut mx = Run<double>(AggregateOp::kMax, keys, v, 5);
  EXPECT_EQ(mx.words[0], D(2.25));
  EXPECT_EQ(mx.words[1], D(-0.0));
  EXPECT_EQ(mx.words[2], D(0.0));
  EXPECT_TRUE(std::isnan(AsDouble(mx.words[3])));
  const TypedOut mean = Run<double>(AggregateOp::kMean, keys, v, 5);
  EXPECT_EQ(AsDouble(mean.words[0]), 1.875);
  EXPECT_TRUE(std::isnan(AsDouble(mean.words[3])));
  EXPECT_TRUE(std::isnan(AsDouble(mean.words[4])));
  // Float64 keeps what float32 would lose: 2^24 + 1.
  const std::vector<uint32_t> k2 = {0, 0};
  const std::vector<double> v2 = {16777216.0, 1.0};
  EXPECT_THAT(Run<double>(AggregateOp::kSum, k2, v2, 1).words, ElementsAre(D(16777217.0)));
}

// An exact model of one typed aggregation (integer-valued doubles keep float64 sums exact).
template <typename V>
TypedOut Model(AggregateOp op, const std::vector<uint32_t>& keys, const std::vector<V>& v,
               const std::vector<uint32_t>& mask, size_t groups) {
  TypedOut out;
  out.rows.assign(groups, 0);
  std::vector<__int128> acc(groups, 0);
  std::vector<double> dacc(groups, 0.0);
  for (size_t r = 0; r < keys.size(); ++r) {
    if (keys[r] >= groups || mask[r] == 0) continue;
    if constexpr (std::is_floating_point_v<V>) {
      if (!std::isfinite(v[r])) continue;
    }
    const uint32_t g = keys[r];
    const bool first = out.rows[g]++ == 0;
    if constexpr (std::is_floating_point_v<V>) {
      if (op == AggregateOp::kSum || op == AggregateOp::kMean) dacc[g] += v[r];
      if (op == AggregateOp::kMin && (first || FloatLess(v[r], dacc[g]))) dacc[g] = v[r];
      if (op == AggregateOp::kMax && (first || FloatLess(dacc[g], v[r]))) dacc[g] = v[r];
    } else {
      const __int128 x = v[r];
      if (op == AggregateOp::kSum || op == AggregateOp::kMean) acc[g] += x;
      if (op == AggregateOp::kMin && (first || x < acc[g])) acc[g] = x;
      if (op == AggregateOp::kMax && (first || x > acc[g])) acc[g] = x;
    }
  }
  const ColumnType type = *AggregateValueType(AggregateValues{Chunked<V>{}});
  const bool flags = AggregateReportsOverflow(op, type);
  if (flags) out.overflow.assign(groups, 0);
  for (size_t g = 0; g < groups; ++g) {
    const uint32_t n = out.rows[g];
    if constexpr (std::is_floating_point_v<V>) {
      double r = dacc[g];
      if ((op == AggregateOp::kMin || op == AggregateOp::kMax) && n == 0) r = kNaN;
      if (op == AggregateOp::kMean) r = n == 0 ? kNaN : dacc[g] / n;
      out.words.push_back(D(r));
    } else {
      const bool is_signed = std::is_signed_v<V>;
      const bool over = is_signed ? (acc[g] < kI64Min || acc[g] > kI64Max)
                                  : acc[g] > static_cast<__int128>(kU64Max);
      if (flags) out.overflow[g] = over;
      const uint64_t low = static_cast<uint64_t>(acc[g]);
      if (op == AggregateOp::kMean) {
        const double sum =
            is_signed ? static_cast<double>(static_cast<int64_t>(low)) : static_cast<double>(low);
        out.words.push_back(D(n == 0 || over ? kNaN : sum / n));
      } else {
        out.words.push_back(n == 0 ? 0 : low);
      }
    }
  }
  return out;
}

// Random values of V spread over its whole range (float64: integers below 2^40 so
// that sums are exact, plus NaN, +-inf and +-0).
template <typename V>
std::vector<V> RandomValues(size_t rows, std::mt19937_64& rng) {
  std::vector<V> v(rows);
  for (auto& x : v) {
    const uint64_t bits = rng();
    if constexpr (std::is_floating_point_v<V>) {
      switch (bits % 16) {
        case 0:
          x = kNaN;
          break;
        case 1:
          x = (bits & 16) ? kInf : -kInf;
          break;
        case 2:
          x = (bits & 16) ? 0.0 : -0.0;
          break;
        default:
          x = static_cast<double>(static_cast<int64_t>(bits >> 24) - (int64_t{1} << 39));
      }
    } else if (bits % 8 == 0) {
      // Extremes of the type make overflowing groups likely.
      x = (bits & 8) ? std::numeric_limits<V>::max() : std::numeric_limits<V>::min();
    } else {
      x = static_cast<V>(bits >> (bits % 3 == 0 ? 0 : 16));
    }
  }
  return v;
}

// The backend over random inputs of V against Model, for every value op.
template <typename V>
void CheckRandom(AggregateTypedTest& t, size_t rows, size_t groups, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint32_t> keys(rows), mask(rows);
  for (size_t r = 0; r < rows; ++r) {
    keys[r] = static_cast<uint32_t>(rng() % (groups + groups / 8 + 1));  // some out of range
    mask[r] = rng() % 5 != 0;
  }
  const std::vector<V> v = RandomValues<V>(rows, rng);
  // Differently cut chunks per column, empty chunks included.
  const Chunked<uint32_t> kc = Cut(keys, {rows / 3, rows / 3, rows / 2});
  const Chunked<V> vc = Cut(v, {1, rows / 4, 3 * rows / 4});
  const ChunkedU32 mc = Cut(mask, {rows / 5});
  for (AggregateOp op :
       {AggregateOp::kSum, AggregateOp::kMin, AggregateOp::kMax, AggregateOp::kMean}) {
    SCOPED_TRACE(std::string(AggregateOpName(op)));
    const TypedOut got = t.Run<V>(op, kc, vc, groups, mc);
    const TypedOut want = Model<V>(op, keys, v, mask, groups);
    EXPECT_EQ(got.rows, want.rows);
    EXPECT_EQ(got.overflow, want.overflow);
    ASSERT_EQ(got.words.size(), want.words.size());
    const bool floating = std::is_floating_point_v<V> || op == AggregateOp::kMean;
    for (size_t g = 0; g < groups; ++g) {
      if (floating && std::isnan(AsDouble(got.words[g])) && std::isnan(AsDouble(want.words[g]))) {
        continue;
      }
      ASSERT_EQ(got.words[g], want.words[g]) << "group " << g;
    }
  }
}

// Few groups (the striped CPU path, the shared-memory CUDA paths) and many (the
// CPU's group-range and bucketed paths, the CUDA range path), every type.
TEST_P(AggregateTypedTest, RandomInputsMatchAnExactModel) {
  for (size_t groups : {size_t{1}, size_t{7}, size_t{200}, size_t{5000}}) {
    SCOPED_TRACE(groups);
    const size_t rows = 40000;
    CheckRandom<int32_t>(*this, rows, groups, 1 + groups);
    CheckRandom<int64_t>(*this, rows, groups, 2 + groups);
    CheckRandom<uint32_t>(*this, rows, groups, 3 + groups);
    CheckRandom<uint64_t>(*this, rows, groups, 4 + groups);
    CheckRandom<double>(*this, rows, groups, 5 + groups);
  }
}

TEST_P(AggregateTypedTest, ValidationNamesTheField) {
  const std::vector<uint32_t> keys = {0, 1};
  const std::vector<int64_t> v = {1, 2};
  const std::vector<float> f = {1, 2};
  std::vector<uint64_t> out(2);
  std::vector<uint8_t> flags(2);
  AggregateNode node;
  node.op = AggregateOp::kSum;
  node.keys = One(keys);
  node.values = One(v);
  node.output = out;
  // Integer sums must report overflow.
  absl::Status s = RunStatus(node);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("overflow"));
  node.overflow = flags;
  EXPECT_TRUE(RunStatus(node).ok());
  // A value op without values.
  AggregateNode none = node;
  none.values = {};
  s = RunStatus(none);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("values are unset: sum needs one value per key"));
  // No output.
  AggregateNode no_output = node;
  no_output.output = {};
  s = RunStatus(no_output);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("output is empty"));
  // Row counts.
  const std::vector<int64_t> short_v = {1};
  AggregateNode rows = node;
  rows.values = One(short_v);
  s = RunStatus(rows);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("values have 1 rows but keys have 2"));
  // Overflow flags on an op that has none: float64 and float32 sums.
  const std::vector<double> d = {1, 2};
  AggregateNode dbl = node;
  dbl.values = One(d);
  s = RunStatus(dbl);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("overflow must be empty for sum over float64"));
  AggregateNode flt = node;
  flt.values = One(f);
  s = RunStatus(flt);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("overflow must be empty for sum over float32"));
  flt.overflow = {};
  EXPECT_TRUE(RunStatus(flt).ok());
  // Count takes no values and reports no overflow.
  AggregateNode count;
  count.op = AggregateOp::kCount;
  count.keys = One(keys);
  count.values = One(v);
  count.output = out;
  s = RunStatus(count);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("values must be unset for count"));
  count.values = {};
  count.overflow = flags;
  s = RunStatus(count);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("overflow must be empty for count"));
}

TEST(AggregateResultTypeTest, TypeRules) {
  EXPECT_EQ(AggregateResultType(AggregateOp::kSum, ColumnType::kInt32), ColumnType::kInt64);
  EXPECT_EQ(AggregateResultType(AggregateOp::kSum, ColumnType::kUint32), ColumnType::kUint64);
  EXPECT_EQ(AggregateResultType(AggregateOp::kSum, ColumnType::kFloat64), ColumnType::kFloat64);
  EXPECT_EQ(AggregateResultType(AggregateOp::kMin, ColumnType::kInt32), ColumnType::kInt32);
  EXPECT_EQ(AggregateResultType(AggregateOp::kMax, ColumnType::kUint64), ColumnType::kUint64);
  EXPECT_EQ(AggregateResultType(AggregateOp::kMean, ColumnType::kInt64), ColumnType::kFloat64);
  EXPECT_EQ(AggregateResultType(AggregateOp::kSum, ColumnType::kFloat32), ColumnType::kFloat32);
  EXPECT_TRUE(AggregateReportsOverflow(AggregateOp::kMean, ColumnType::kUint32));
  EXPECT_FALSE(AggregateReportsOverflow(AggregateOp::kMin, ColumnType::kInt64));
  EXPECT_FALSE(AggregateReportsOverflow(AggregateOp::kSum, ColumnType::kFloat64));
}

INSTANTIATE_TEST_SUITE_P(Backends, AggregateTypedTest, ::testing::ValuesIn(AllBackends()),
                         BackendName);

}  // namespace
}  // namespace gpujoin::engine::testing
