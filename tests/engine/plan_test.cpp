// Plans (gpujoin/engine/plan.hpp) on every backend against a straightforward
// model: random indexes (lowest_row and keep_all, payload with nulls), random
// input batches (keys with nulls, negatives and misses), random plans of a
// lookup of every kind, a filter with SQL's three-valued logic, and either an
// aggregation (group-bys on input and payload columns, every measure) or a
// project and a limit over several batches. Exact: the measures here are
// integer sums, counts, min/max and means of small integers in float64.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "gpujoin/engine/dictionary.hpp"
#include "gpujoin/engine/plan.hpp"
#include "gpujoin/testing/join_kind_model.hpp"
#include "plan_exprs.hpp"
#include "test_backends.hpp"

namespace gpujoin::engine::testing {
namespace {

class PlanTest : public BackendTest {};

// A nullable value of the model (nullopt = null).
using Int = std::optional<int64_t>;
using Str = std::optional<std::string>;

struct Dim {  // the index: key -> payload rows (in build order)
  std::vector<uint32_t> keys;
  std::vector<Int> amount;  // int64 payload
  std::vector<Str> label;   // string payload
};

PlanColumn Int64Col(const std::vector<Int>& v) {
  PlanColumn c;
  c.type = ColumnType::kInt64;
  c.rows = v.size();
  c.data.resize(v.size() * 8);
  c.validity.assign(BitmapBytes(v.size()), 0);
  for (size_t i = 0; i < v.size(); ++i) {
    const int64_t x = v[i].value_or(0);
    std::memcpy(c.data.data() + i * 8, &x, 8);
    SetBit(c.validity.data(), i, v[i].has_value());
  }
  return c;
}

PlanColumn Float64Col(const std::vector<double>& v) {
  PlanColumn c;
  c.type = ColumnType::kFloat64;
  c.rows = v.size();
  c.data.resize(v.size() * 8);
  std::memcpy(c.data.data(), v.data(), v.size() * 8);
  return c;
}

Int IntAt(const PlanColumn& c, uint64_t r) {
  if (!c.valid(r)) return std::nullopt;
  switch (c.type) {
    case ColumnType::kInt64: return c.value<int64_t>(r);
    case ColumnType::kUint64: return static_cast<int64_t>(c.value<uint64_t>(r));
    default: return std::nullopt;
  }
}
Str StrAt(const PlanColumn& c, uint64_t r) {
  if (!c.valid(r)) return std::nullopt;
  return std::string(c.text(r));
}
bool BoolAt(const PlanColumn& c, uint64_t r) {
  return BitAt(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(c.data.data()),
                                        c.data.size()),
               r);
}

// One model row after the lookup: input (key, value, category) + payload + found.
struct Row {
  Int key;
  double value;
  Int category;
  Int amount;
  Str label;
  bool found;
  Str label2 = Str();  // second lookup (keyed by category), when the plan has one
  bool found2 = false;
};

// The filter of the model: (value > 5 and category != 2) or amount is null,
// or its negation, or amount in (..) — picked by `which`.
std::optional<bool> ModelFilter(int which, const Row& row) {
  auto and3 = [](std::optional<bool> a, std::optional<bool> b) -> std::optional<bool> {
    if (a == false || b == false) return false;
    if (!a || !b) return std::nullopt;
    return true;
  };
  auto or3 = [](std::optional<bool> a, std::optional<bool> b) -> std::optional<bool> {
    if (a == true || b == true) return true;
    if (!a || !b) return std::nullopt;
    return false;
  };
  const std::optional<bool> gt = row.value > 5;
  const std::optional<bool> ne =
      row.category ? std::optional<bool>(*row.category != 2) : std::nullopt;
  const std::optional<bool> in =
      row.amount ? std::optional<bool>(*row.amount == 3 || *row.amount == 7) : std::nullopt;
  switch (which) {
    case 0: return or3(and3(gt, ne), !row.amount.has_value());
    case 1: {
      const auto v = or3(and3(gt, ne), !row.amount.has_value());
      return v ? std::optional<bool>(!*v) : std::nullopt;
    }
    default: return or3(in, row.label ? std::optional<bool>(*row.label == "l1") : std::nullopt);
  }
}


// Table columns after the lookup: 0 key, 1 value, 2 category, 3 amount, 4 label, 5 found.
PlanExpr EngineFilter(int which) {
  PlanLiteral five;
  five.kind = PlanLiteral::Kind::kFloat;
  five.real = 5;
  PlanExpr null_amount;
  null_amount.kind = PlanExpr::Kind::kIsNull;
  null_amount.column = 3;
  PlanExpr base = Node(PlanExpr::Kind::kOr,
                       {Node(PlanExpr::Kind::kAnd, {Compare(1, CompareOp::kGt, five),
                                                    Compare(2, CompareOp::kNe, IntLit(2))}),
                        null_amount});
  if (which == 0) return base;
  if (which == 1) return Node(PlanExpr::Kind::kNot, {base});
  PlanExpr in;
  in.kind = PlanExpr::Kind::kIn;
  in.column = 3;
  in.literals = {IntLit(3), IntLit(7)};
  PlanLiteral l1;
  l1.kind = PlanLiteral::Kind::kString;
  l1.text = "l1";
  return Node(PlanExpr::Kind::kOr, {in, Compare(4, CompareOp::kEq, l1)});
}

TEST_P(PlanTest, RandomPlansEqualTheModel) {
  for (int seed = 1; seed <= 48; ++seed) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    std::mt19937_64 rng(seed);
    const bool keep_all = seed % 2 == 0;
    const JoinKind kind = ::gpujoin::testing::kAllJoinKinds[(seed / 2) % 4];
    const int filter = seed % 4 == 3 ? -1 : static_cast<int>((seed / 3) % 3);
    const bool aggregate = seed % 3 != 0;
    // Half the plans look the category up too (a second lookup, keyed by an
    // input column: both run in one graph).
    const bool second = seed % 4 < 2;
    const JoinKind kind2 = ::gpujoin::testing::kAllJoinKinds[(seed / 5) % 4];

    // The index.
    Dim dim;
    const size_t dim_rows = 40 + rng() % 40;
    for (size_t i = 0; i < dim_rows; ++i) {
      dim.keys.push_back(static_cast<uint32_t>(rng() % 30));
      dim.amount.push_back(rng() % 5 == 0 ? Int() : Int(static_cast<int64_t>(rng() % 10)));
      dim.label.push_back(rng() % 6 == 0 ? Str() : Str("l" + std::to_string(rng() % 3)));
    }
    HashIndexSpec spec;
    spec.capacity = 128;
    spec.duplicates = keep_all ? DuplicatePolicy::kKeepAll : DuplicatePolicy::kLowestRow;
    auto created = backend_->CreateIndex(spec);
    ASSERT_TRUE(created.ok()) << created.status();
    std::unique_ptr<HashIndex> index = *std::move(created);
    const PlanColumn amount = Int64Col(dim.amount);
    PlanColumn label;
    {
      label.type = ColumnType::kString;
      label.rows = dim_rows;
      label.offsets.push_back(0);
      label.validity.assign(BitmapBytes(dim_rows), 0);
      for (size_t i = 0; i < dim_rows; ++i) {
        const std::string s = dim.label[i].value_or("");
        label.data.insert(label.data.end(), reinterpret_cast<const std::byte*>(s.data()),
                          reinterpret_cast<const std::byte*>(s.data()) + s.size());
        label.offsets.push_back(static_cast<uint32_t>(label.data.size()));
        SetBit(label.validity.data(), i, dim.label[i].has_value());
      }
    }
    std::vector<uint64_t> label_offsets(label.offsets.begin(), label.offsets.end());
    {
      BuildIndexNode build;
      build.index = index.get();
      build.keys = ChunkedU32{std::span<const uint32_t>(dim.keys)};
      build.payload.push_back(ColumnView{ColumnType::kInt64, dim_rows, amount.data, {}, amount.validity});
      build.payload.push_back(
          ColumnView{ColumnType::kString, dim_rows, label.data, label_offsets, label.validity});
      CommandGraph g;
      g.Add(std::move(build));
      RunOk(g);
    }
    // The model's groups of the index: key -> rows in build order.
    std::map<uint32_t, std::vector<size_t>> groups;
    for (size_t i = 0; i < dim_rows; ++i) {
      auto& g = groups[dim.keys[i]];
      if (keep_all || g.empty()) g.push_back(i);
    }

    // The plan.
    Plan plan;
    PlanLookupStep lookup;
    lookup.key_type = KeyType::kUint32;
    lookup.key_columns = {0};
    lookup.select = {0, 1};
    lookup.kind = kind;
    plan.steps.emplace_back(lookup);
    plan.index_slots = 1;
    if (second) {
      PlanLookupStep by_category;
      by_category.index_slot = 1;
      by_category.key_type = KeyType::kUint32;
      by_category.key_columns = {2};
      by_category.select = {1};
      by_category.kind = kind2;
      plan.steps.emplace_back(by_category);
      plan.index_slots = 2;
    }
    if (filter >= 0) plan.steps.emplace_back(PlanFilterStep{EngineFilter(filter)});
    const uint64_t limit = 7 + rng() % 40;
    if (aggregate) {
      PlanAggregateStep agg;
      agg.group_by = seed % 5 == 0 ? std::vector<uint32_t>{} : std::vector<uint32_t>{2, 4};
      agg.measures = {{AggregateOp::kCount, PlanMeasure::kNoColumn},
                      {AggregateOp::kCount, 3},
                      {AggregateOp::kSum, 3},
                      {AggregateOp::kMin, 1},
                      {AggregateOp::kMax, 3},
                      {AggregateOp::kMean, 1}};
      plan.aggregate_input_types = {ColumnType::kInt64, ColumnType::kFloat64, ColumnType::kInt64,
                                    ColumnType::kInt64, ColumnType::kString, ColumnType::kBool};
      if (second) {
        plan.aggregate_input_types.push_back(ColumnType::kString);
        plan.aggregate_input_types.push_back(ColumnType::kBool);
      }
      plan.steps.emplace_back(agg);
    } else {
      plan.steps.emplace_back(PlanProjectStep{second ? std::vector<uint32_t>{4, 1, 5, 6, 7}
                                                     : std::vector<uint32_t>{4, 1, 5}});
      plan.steps.emplace_back(PlanLimitStep{limit});
    }
    PlanRun run(backend_.get(), plan, PlanLimits{});

    // Batches and the model.
    std::vector<Row> model_rows;  // rows reaching the aggregate / project
    std::vector<std::vector<Row>> model_batches;
    std::vector<PlanTable> results;
    const int batches = 1 + static_cast<int>(rng() % 4);
    for (int b = 0; b < batches; ++b) {
      const size_t n = rng() % 50;  // zero-row batches too
      std::vector<Int> keys, cats;
      std::vector<double> values;
      for (size_t i = 0; i < n; ++i) {
        const int pick = static_cast<int>(rng() % 10);
        keys.push_back(pick == 0   ? Int()
                       : pick == 1 ? Int(-static_cast<int64_t>(rng() % 5) - 1)
                       : pick == 2 ? Int(int64_t{1} << 40)
                                   : Int(static_cast<int64_t>(rng() % 40)));
        values.push_back(static_cast<double>(rng() % 11));
        cats.push_back(rng() % 7 == 0 ? Int() : Int(static_cast<int64_t>(rng() % 4)));
      }
      PlanTable input;
      input.rows = n;
      input.names = {"k", "v", "c"};
      input.columns = {Int64Col(keys), Float64Col(values), Int64Col(cats)};
      std::vector<Row> batch_rows;
      for (size_t i = 0; i < n; ++i) {
        const bool valid_key = keys[i] && *keys[i] >= 0 && *keys[i] < 0xffffffffll;
        auto it = valid_key ? groups.find(static_cast<uint32_t>(*keys[i])) : groups.end();
        const bool hit = it != groups.end();
        Row base{keys[i], values[i], cats[i], Int(), Str(), hit};
        std::vector<Row> out;
        if (kind == JoinKind::kLeftAnti) {
          if (!hit) out.push_back(base);
        } else if (hit) {
          const auto& g = it->second;
          const size_t take = kind == JoinKind::kLeftSemi ? 1 : g.size();
          for (size_t j = 0; j < take; ++j) {
            Row r = base;
            r.amount = dim.amount[g[j]];
            r.label = dim.label[g[j]];
            out.push_back(r);
          }
        } else if (kind == JoinKind::kLeftOuter) {
          out.push_back(base);
        }
        if (second) {
          // Each row looked up again by its category, in the same way.
          std::vector<Row> again;
          for (const Row& row : out) {
            const bool valid_cat = row.category.has_value();
            auto it2 = valid_cat ? groups.find(static_cast<uint32_t>(*row.category)) : groups.end();
            const bool hit2 = it2 != groups.end();
            Row base2 = row;
            base2.found2 = hit2;
            if (kind2 == JoinKind::kLeftAnti) {
              if (!hit2) again.push_back(base2);
            } else if (hit2) {
              const size_t take = kind2 == JoinKind::kLeftSemi ? 1 : it2->second.size();
              for (size_t j = 0; j < take; ++j) {
                Row r2 = base2;
                r2.label2 = dim.label[it2->second[j]];
                again.push_back(r2);
              }
            } else if (kind2 == JoinKind::kLeftOuter) {
              again.push_back(base2);
            }
          }
          out = std::move(again);
        }
        for (const Row& r : out) {
          if (filter < 0 || ModelFilter(filter, r) == true) batch_rows.push_back(r);
        }
      }
      std::vector<PlanStepStatistics> stats;
      auto result = run.RunBatch(std::move(input),
                                 std::vector<const HashIndex*>{index.get(), index.get()}, &stats);
      ASSERT_TRUE(result.ok()) << result.status();
      ASSERT_EQ(stats.size(), plan.steps.size());
      EXPECT_EQ(stats[0].rows_in, n);
      // Every lookup's statistics are those of the rows reaching it.
      for (size_t k = 0; k < (second ? 2u : 1u); ++k) {
        EXPECT_EQ(stats[k].query.found + stats[k].query.missing, stats[k].rows_in) << "step " << k;
      }
      model_rows.insert(model_rows.end(), batch_rows.begin(), batch_rows.end());
      model_batches.push_back(batch_rows);
      results.push_back(*std::move(result));
    }

    if (!aggregate) {
      uint64_t passed = 0;
      for (size_t b = 0; b < results.size(); ++b) {
        const PlanTable& t = results[b];
        const std::vector<Row>& want = model_batches[b];
        const uint64_t keep = std::min<uint64_t>(want.size(), limit - std::min(limit, passed));
        passed += keep;
        ASSERT_EQ(t.rows, keep) << "batch " << b;
        ASSERT_EQ(t.columns.size(), second ? 5u : 3u);
        for (uint64_t r = 0; r < keep; ++r) {
          EXPECT_EQ(StrAt(t.columns[0], r), want[r].label) << "row " << r;
          EXPECT_EQ(t.columns[1].value<double>(r), want[r].value);
          EXPECT_EQ(BoolAt(t.columns[2], r), want[r].found);
          if (second) {
            EXPECT_EQ(StrAt(t.columns[3], r), want[r].label2) << "row " << r;
            EXPECT_EQ(BoolAt(t.columns[4], r), want[r].found2) << "row " << r;
          }
        }
      }
      continue;
    }
    // The aggregate: groups in first-arrival order.
    struct Acc {
      uint64_t rows = 0, amounts = 0;
      __int128 sum = 0;
      std::optional<double> min_v;
      Int max_a;
      double value_sum = 0;
      uint64_t values = 0;
    };
    std::vector<std::pair<std::pair<Int, Str>, Acc>> want;
    const bool by = seed % 5 != 0;
    if (!by) want.push_back({{Int(), Str()}, Acc{}});
    for (const Row& r : model_rows) {
      const std::pair<Int, Str> key = by ? std::make_pair(r.category, r.label)
                                         : std::make_pair(Int(), Str());
      auto it = std::find_if(want.begin(), want.end(), [&](const auto& g) { return g.first == key; });
      if (it == want.end()) {
        want.push_back({key, Acc{}});
        it = want.end() - 1;
      }
      Acc& a = it->second;
      ++a.rows;
      if (r.amount) {
        ++a.amounts;
        a.sum += *r.amount;
        a.max_a = a.max_a ? std::max(*a.max_a, *r.amount) : *r.amount;
      }
      a.min_v = a.min_v ? std::min(*a.min_v, r.value) : r.value;
      a.value_sum += r.value;
      ++a.values;
    }
    std::vector<PlanStepStatistics> stats;
    auto groups_table = run.Groups(std::vector<const HashIndex*>{index.get(), index.get()}, &stats);
    ASSERT_TRUE(groups_table.ok()) << groups_table.status();
    const PlanTable& t = *groups_table;
    ASSERT_EQ(t.rows, want.size());
    const size_t g0 = by ? 2 : 0;
    ASSERT_EQ(t.columns.size(), g0 + 6);
    for (size_t g = 0; g < want.size(); ++g) {
      SCOPED_TRACE(::testing::Message() << "group " << g);
      const Acc& a = want[g].second;
      if (by) {
        EXPECT_EQ(IntAt(t.columns[0], g), want[g].first.first);
        EXPECT_EQ(StrAt(t.columns[1], g), want[g].first.second);
      }
      EXPECT_EQ(t.columns[g0].value<uint64_t>(g), a.rows);
      EXPECT_EQ(t.columns[g0 + 1].value<uint64_t>(g), a.amounts);
      EXPECT_EQ(IntAt(t.columns[g0 + 2], g), a.amounts ? Int(static_cast<int64_t>(a.sum)) : Int());
      EXPECT_EQ(t.columns[g0 + 3].valid(g), a.values > 0);
      if (a.values > 0) EXPECT_EQ(t.columns[g0 + 3].value<double>(g), *a.min_v);
      EXPECT_EQ(IntAt(t.columns[g0 + 4], g), a.max_a);
      if (a.values > 0) {
        EXPECT_NEAR(t.columns[g0 + 5].value<double>(g), a.value_sum / a.values, 1e-12);
      }
    }
  }
}

// A batch that would pass the group limit fails whole; the run goes on as if
// it had not been sent.
TEST_P(PlanTest, AFailedBatchChangesNothing) {
  Plan plan;
  PlanAggregateStep agg;
  agg.group_by = {0};
  agg.measures = {{AggregateOp::kCount, PlanMeasure::kNoColumn}};
  plan.steps.emplace_back(agg);
  plan.aggregate_input_types = {ColumnType::kInt64};
  PlanLimits limits;
  limits.max_groups = 3;
  PlanRun run(backend_.get(), plan, limits);
  auto batch = [](std::vector<Int> v) {
    PlanTable t;
    t.rows = v.size();
    t.names = {"g"};
    t.columns = {Int64Col(v)};
    return t;
  };
  std::vector<PlanStepStatistics> stats;
  ASSERT_TRUE(run.RunBatch(batch({1, 2, 1}), {}, &stats).ok());
  auto refused = run.RunBatch(batch({3, 4, 1}), {}, &stats);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(refused.status().message().find("the plan's groups"), std::string::npos);
  ASSERT_TRUE(run.RunBatch(batch({Int(), 2}), {}, &stats).ok());
  auto groups = run.Groups({}, &stats);
  ASSERT_TRUE(groups.ok());
  ASSERT_EQ(groups->rows, 3u);
  EXPECT_EQ(IntAt(groups->columns[0], 0), Int(1));
  EXPECT_EQ(IntAt(groups->columns[0], 1), Int(2));
  EXPECT_EQ(IntAt(groups->columns[0], 2), Int());
  EXPECT_EQ(groups->columns[1].value<uint64_t>(0), 2u);
  EXPECT_EQ(groups->columns[1].value<uint64_t>(1), 2u);
  EXPECT_EQ(groups->columns[1].value<uint64_t>(2), 1u);
}

// An integer sum that leaves int64 is OUT_OF_RANGE, never a wrapped value.
TEST_P(PlanTest, AnOverflowingSumIsOutOfRange) {
  Plan plan;
  PlanAggregateStep agg;
  agg.measures = {{AggregateOp::kSum, 0}};
  plan.steps.emplace_back(agg);
  plan.aggregate_input_types = {ColumnType::kInt64};
  PlanRun run(backend_.get(), plan, PlanLimits{});
  PlanTable t;
  t.rows = 2;
  t.columns = {Int64Col({Int(INT64_MAX), Int(1)})};
  std::vector<PlanStepStatistics> stats;
  ASSERT_TRUE(run.RunBatch(t, {}, &stats).ok());
  auto groups = run.Groups({}, &stats);
  ASSERT_FALSE(groups.ok());
  EXPECT_EQ(groups.status().code(), absl::StatusCode::kOutOfRange);
}

// Integer sums are exact over the stream: a batch whose own sum leaves int64
// is fine when the total fits, and a mean of such values is exact too.
TEST_P(PlanTest, IntegerSumsAreExactAcrossBatches) {
  Plan plan;
  PlanAggregateStep agg;
  agg.measures = {{AggregateOp::kSum, 0}, {AggregateOp::kMean, 0}, {AggregateOp::kSum, 1}};
  plan.steps.emplace_back(agg);
  plan.aggregate_input_types = {ColumnType::kInt64, ColumnType::kUint64};
  PlanRun run(backend_.get(), plan, PlanLimits{});
  auto batch = [](std::vector<Int> a, std::vector<uint64_t> b) {
    PlanTable t;
    t.rows = a.size();
    PlanColumn u;
    u.type = ColumnType::kUint64;
    u.rows = b.size();
    u.data.resize(b.size() * 8);
    std::memcpy(u.data.data(), b.data(), b.size() * 8);
    t.columns = {Int64Col(a), u};
    return t;
  };
  std::vector<PlanStepStatistics> stats;
  ASSERT_TRUE(
      run.RunBatch(batch({INT64_MAX, INT64_MAX, Int()}, {UINT64_MAX - 6, 1, 5}), {}, &stats).ok());
  ASSERT_TRUE(run.RunBatch(batch({INT64_MIN, INT64_MIN + 10}, {0, 0}), {}, &stats).ok());
  auto groups = run.Groups({}, &stats);
  ASSERT_TRUE(groups.ok()) << groups.status();
  // (2^63 - 1) * 2 - 2^63 * 2 + 10 = 8.
  EXPECT_EQ(groups->columns[0].value<int64_t>(0), 8);
  EXPECT_DOUBLE_EQ(groups->columns[1].value<double>(0), 8.0 / 4);
  EXPECT_EQ(groups->columns[2].value<uint64_t>(0), UINT64_MAX);
  // One more and the uint64 sum does not fit.
  auto more = run.RunBatch(batch({Int(0)}, {1}), {}, &stats);
  ASSERT_TRUE(more.ok());
  auto over = run.Groups({}, &stats);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().code(), absl::StatusCode::kOutOfRange);
}

// COUNT of a float column counts its non-null values; with finite_only the
// finite ones, those SUM and MEAN take (gpujoin-router weighs means by it).
TEST_P(PlanTest, AFiniteOnlyCountCountsWhatAMeanTakes) {
  Plan plan;
  PlanAggregateStep agg;
  PlanMeasure finite{AggregateOp::kCount, 0};
  finite.finite_only = true;
  agg.measures = {{AggregateOp::kCount, 0}, finite, {AggregateOp::kMean, 0}};
  plan.steps.emplace_back(agg);
  plan.aggregate_input_types = {ColumnType::kFloat64};
  PlanRun run(backend_.get(), plan, PlanLimits{});
  PlanTable t;
  t.rows = 6;
  t.columns = {Float64Col({1.0, std::nan(""), 3.0, INFINITY, -INFINITY, 5.0})};
  t.columns[0].validity = {0x3f & ~0x04};  // row 2 (3.0) is null
  std::vector<PlanStepStatistics> stats;
  ASSERT_TRUE(run.RunBatch(t, {}, &stats).ok());
  auto groups = run.Groups({}, &stats);
  ASSERT_TRUE(groups.ok()) << groups.status();
  EXPECT_EQ(groups->columns[0].value<uint64_t>(0), 5u);  // non-null
  EXPECT_EQ(groups->columns[1].value<uint64_t>(0), 2u);  // finite: 1.0 and 5.0
  EXPECT_DOUBLE_EQ(groups->columns[2].value<double>(0), 3.0);
}

// A uint32 key column without nulls is probed as it is (no copy); its
// reserved word is missing, like a null.
TEST_P(PlanTest, AKeyColumnOfTheIndexWordIsProbedAsItIs) {
  auto index = NewIndex(16);
  const std::vector<uint32_t> keys = {7, 9};
  Build(*index, ChunkedU32{std::span<const uint32_t>(keys)});
  Plan plan;
  plan.index_slots = 1;
  PlanLookupStep lookup;
  lookup.key_columns = {0};
  lookup.kind = JoinKind::kLeftOuter;
  plan.steps.emplace_back(lookup);
  PlanRun run(backend_.get(), plan, PlanLimits{});
  PlanTable t;
  t.rows = 4;
  PlanColumn k;
  k.type = ColumnType::kUint32;
  k.rows = 4;
  const std::vector<uint32_t> probe = {9, 8, kEmptyKey, 7};
  k.data.resize(16);
  std::memcpy(k.data.data(), probe.data(), 16);
  t.columns = {k};
  std::vector<PlanStepStatistics> stats;
  auto out = run.RunBatch(t, std::vector<const HashIndex*>{index.get()}, &stats);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->rows, 4u);
  const bool want[] = {true, false, false, true};
  for (uint64_t r = 0; r < 4; ++r) EXPECT_EQ(BoolAt(out->columns[1], r), want[r]) << r;
  EXPECT_EQ(stats[0].query.found, 2u);
  EXPECT_EQ(stats[0].query.missing, 2u);
}

// A labelled select entry (PlanLookupStep::select_labels) reads the codes of
// the index's live dictionary and labels them through it (here a dictionary
// whose values differ from the column's strings, so the labels show which was
// read); without a live dictionary it reads the strings. Groups of the same
// label merge across batches whatever the codes were.
TEST_P(PlanTest, LabelledColumnsReadTheDictionaryCodes) {
  const std::vector<uint32_t> keys = {1, 2, 3, 4};
  const std::vector<std::string> text = {"red", "blue", "red", "green"};
  std::vector<std::byte> bytes;
  std::vector<uint64_t> offsets = {0};
  for (const std::string& t : text) {
    for (char ch : t) bytes.push_back(static_cast<std::byte>(ch));
    offsets.push_back(bytes.size());
  }
  const ColumnView strings{ColumnType::kString, keys.size(), bytes, offsets, {}};
  // Index A codes in first-seen order; index B sees the values in another order.
  StringDictionary a_values, b_values;
  b_values.Add("green");
  b_values.Add("blue");
  auto a_codes = EncodeColumn(strings, a_values, 100, 1000);
  auto b_codes = EncodeColumn(strings, b_values, 100, 1000);
  ASSERT_TRUE(a_codes.ok() && b_codes.ok());
  ASSERT_EQ(a_codes->codes, (std::vector<uint32_t>{0, 1, 0, 2}));
  ASSERT_EQ(b_codes->codes, (std::vector<uint32_t>{2, 1, 2, 0}));
  auto build = [&](const CodesColumn& codes) {
    auto index = NewIndex(16);
    BuildIndexNode node;
    node.index = index.get();
    node.keys = ChunkedU32{std::span<const uint32_t>(keys)};
    node.payload = {strings, codes.View()};
    CommandGraph g;
    g.Add(std::move(node));
    RunOk(g);
    return index;
  };
  auto a = build(*a_codes);
  auto b = build(*b_codes);
  // A's dictionary names its codes differently from the strings.
  auto attach = [](HashIndex& index, StringDictionary values) {
    auto d = std::make_shared<std::vector<PayloadDictionary>>(1);
    (*d)[0].column = 0;
    (*d)[0].codes_column = 1;
    (*d)[0].values = std::move(values);
    index.AttachDictionaries(d);
    return d;
  };
  StringDictionary renamed;
  for (uint32_t c = 0; c < a_values.size(); ++c) renamed.Add("D:" + std::string(a_values.Value(c)));
  auto a_dictionaries = attach(*a, std::move(renamed));
  attach(*b, b_values);

  Plan plan;
  plan.index_slots = 1;
  PlanLookupStep lookup;
  lookup.key_columns = {0};
  lookup.select = {0};
  lookup.select_labels = {0};
  lookup.kind = JoinKind::kLeftOuter;
  plan.steps.emplace_back(lookup);
  plan.label_types = {ColumnType::kString};
  PlanAggregateStep agg;
  agg.group_by = {1};
  agg.group_labels = {0};
  agg.measures = {{AggregateOp::kCount, PlanMeasure::kNoColumn}};
  plan.steps.emplace_back(agg);
  plan.aggregate_input_types = {ColumnType::kUint32, ColumnType::kUint32, ColumnType::kBool};
  PlanRun run(backend_.get(), plan, PlanLimits{});
  auto batch = [](std::vector<uint32_t> probe) {
    PlanTable t;
    t.rows = probe.size();
    PlanColumn k;
    k.type = ColumnType::kUint32;
    k.rows = probe.size();
    k.data.resize(probe.size() * 4);
    std::memcpy(k.data.data(), probe.data(), probe.size() * 4);
    t.columns = {k};
    return t;
  };
  std::vector<PlanStepStatistics> stats;
  // A through its dictionary: D:red twice, D:blue, a miss (null). The codes
  // are grouped in the backend's lowered batch, then named.
  ASSERT_TRUE(run.RunBatch(batch({1, 3, 2, 9}), std::vector<const HashIndex*>{a.get()}, &stats).ok());
  EXPECT_TRUE(stats[0].on_device);
  // B through its own codes: red, green, blue.
  ASSERT_TRUE(run.RunBatch(batch({1, 4, 2}), std::vector<const HashIndex*>{b.get()}, &stats).ok());
  EXPECT_TRUE(stats[0].on_device);
  // A with its dictionary retired: the strings, on the host path.
  (*a_dictionaries)[0].retired = true;
  ASSERT_TRUE(run.RunBatch(batch({3, 4}), std::vector<const HashIndex*>{a.get()}, &stats).ok());
  EXPECT_FALSE(stats[0].on_device);
  auto groups = run.Groups({}, &stats);
  ASSERT_TRUE(groups.ok()) << groups.status();
  std::vector<std::pair<Str, uint64_t>> got;
  for (uint64_t g = 0; g < groups->rows; ++g) {
    got.emplace_back(StrAt(groups->columns[0], g), groups->columns[1].value<uint64_t>(g));
  }
  const std::vector<std::pair<Str, uint64_t>> want = {
      {"D:red", 2}, {"D:blue", 1}, {Str(), 1}, {"red", 2}, {"green", 2}, {"blue", 1}};
  EXPECT_EQ(got, want);
}

INSTANTIATE_TEST_SUITE_P(Backends, PlanTest, ::testing::ValuesIn(AllBackends()), BackendName);

}  // namespace
}  // namespace gpujoin::engine::testing
