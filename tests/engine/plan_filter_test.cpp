// Plan filters (gpujoin/engine/plan.hpp, PlanFilterStep) on every backend:
// comparisons of each numeric column type with integer and float literals,
// checked row by row against a reference written here.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "gpujoin/engine/plan.hpp"
#include "plan_exprs.hpp"
#include "test_backends.hpp"

namespace gpujoin::engine::testing {
namespace {

class PlanFilterTest : public BackendTest {};

// Writes `v` (an integer column's value) or `real` (a float column's) as
// row `r` of `c`.
void Put(PlanColumn& c, size_t r, __int128 v, double real) {
  std::byte* at = c.data.data() + r * ColumnWidth(c.type);
  const auto put = [at]<class T>(T x) { std::memcpy(at, &x, sizeof x); };
  switch (c.type) {
    case ColumnType::kInt32: return put(static_cast<int32_t>(v));
    case ColumnType::kUint32: return put(static_cast<uint32_t>(v));
    case ColumnType::kInt64: return put(static_cast<int64_t>(v));
    case ColumnType::kUint64: return put(static_cast<uint64_t>(v));
    case ColumnType::kFloat32: return put(static_cast<float>(real));
    default: return put(real);
  }
}
// Integers against integer literals compare exactly (beyond 2^53 and beyond
// the column's range); the rest as doubles, where a NaN satisfies only !=,
// -0 equals +0, and a null is unknown (dropped either way).
TEST_P(PlanFilterTest, NumericComparisonsFollowTheLiteralsKind) {
  constexpr __int128 kBig = (__int128{1} << 63) + 1;  // 2^63 + 1: no double holds it
  struct Case {
    ColumnType type;
    std::vector<__int128> ints;  // integer columns
    std::vector<double> reals;   // float columns
  };
  const std::vector<Case> cases = {
      {ColumnType::kInt32, {INT32_MIN, -1, 0, 7, INT32_MAX}, {}},
      {ColumnType::kInt64, {INT64_MIN, -1, 0, (__int128{1} << 53) + 1, INT64_MAX}, {}},
      {ColumnType::kUint32, {0, 1, 7, UINT32_MAX, 5}, {}},
      {ColumnType::kUint64, {0, 7, kBig - 1, kBig, UINT64_MAX}, {}},
      {ColumnType::kFloat32, {}, {std::nan(""), -0.0, 0.0, 7.5, -INFINITY}},
      {ColumnType::kFloat64, {}, {std::nan(""), -0.0, 7.0, 1e300, INFINITY}},
  };
  std::vector<PlanLiteral> literals = {IntLit(0), IntLit(7), IntLit(-1)};
  literals.push_back(IntLit(kBig));
  for (double real : {0.0, -0.0, 7.5, std::nan("")}) {
    PlanLiteral l;
    l.kind = PlanLiteral::Kind::kFloat;
    l.real = real;
    literals.push_back(l);
  }
  const CompareOp ops[] = {CompareOp::kEq, CompareOp::kNe, CompareOp::kLt,
                           CompareOp::kLe, CompareOp::kGt, CompareOp::kGe};
  const auto holds = [](CompareOp op, auto a, auto b) {
    switch (op) {
      case CompareOp::kEq: return a == b;
      case CompareOp::kNe: return !(a == b);
      case CompareOp::kLt: return a < b;
      case CompareOp::kLe: return a <= b;
      case CompareOp::kGt: return a > b;
      case CompareOp::kGe: return a >= b;
    }
    return false;
  };
  for (const Case& k : cases) {
    const bool integer = k.reals.empty();
    const size_t n = integer ? k.ints.size() : k.reals.size();
    for (int nulls = 0; nulls < 2; ++nulls) {
      PlanColumn c;
      c.type = k.type;
      c.rows = n + 1;  // the last row is a null (nulls = 1) or a copy of row 0
      c.data.resize((n + 1) * ColumnWidth(k.type));
      for (size_t r = 0; r <= n; ++r) {
        const size_t from = r == n ? 0 : r;
        Put(c, r, integer ? k.ints[from] : 0, integer ? 0 : k.reals[from]);
      }
      if (nulls == 1) {
        c.validity.assign(BitmapBytes(n + 1), 0xff);
        SetBit(c.validity.data(), n, false);
        if (!integer) std::memset(c.data.data() + n * ColumnWidth(k.type), 0, ColumnWidth(k.type));
      }
      PlanColumn ids;
      ids.type = ColumnType::kUint32;
      ids.rows = n + 1;
      ids.data.resize((n + 1) * 4);
      for (uint32_t r = 0; r <= n; ++r) std::memcpy(ids.data.data() + r * 4, &r, 4);
      for (const PlanLiteral& lit : literals) {
        for (CompareOp op : ops) {
          Plan plan;
          plan.steps.emplace_back(PlanFilterStep{Compare(0, op, lit)});
          PlanRun run(backend_.get(), plan, PlanLimits{});
          PlanTable t;
          t.rows = n + 1;
          t.columns = {c, ids};
          std::vector<PlanStepStatistics> stats;
          auto out = run.RunBatch(t, {}, &stats);
          ASSERT_TRUE(out.ok()) << out.status();
          std::vector<uint32_t> kept, expected;
          for (uint64_t r = 0; r < out->rows; ++r) kept.push_back(out->columns[1].value<uint32_t>(r));
          for (size_t r = 0; r <= n; ++r) {
            if (nulls == 1 && r == n) continue;
            const size_t from = r == n ? 0 : r;
            bool keep;
            if (integer && lit.kind == PlanLiteral::Kind::kInteger) {
              keep = holds(op, k.ints[from], lit.integer);
            } else {
              const double value = integer ? static_cast<double>(k.ints[from])
                                   : k.type == ColumnType::kFloat32
                                       ? static_cast<double>(static_cast<float>(k.reals[from]))
                                       : k.reals[from];
              const double l = lit.kind == PlanLiteral::Kind::kFloat
                                   ? lit.real
                                   : static_cast<double>(lit.integer);
              keep = holds(op, value, l);
            }
            if (keep) expected.push_back(static_cast<uint32_t>(r));
          }
          EXPECT_EQ(kept, expected) << ColumnTypeName(k.type) << " op " << static_cast<int>(op)
                                    << " literal " << static_cast<double>(lit.integer) << "/"
                                    << lit.real << " nulls " << nulls;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, PlanFilterTest, ::testing::ValuesIn(AllBackends()), BackendName);

}  // namespace
}  // namespace gpujoin::engine::testing
