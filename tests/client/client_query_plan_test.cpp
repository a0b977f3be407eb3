// The client library's Query plans without a server: the measure parser (the
// CLI's --agg spelling), the plan builder, the checks of an input batch, the
// cutting of whole columns into batches that fit a message, and the watch on
// a row plan's limit.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gpujoin/client/query.hpp"
#include "wire.hpp"

namespace {

namespace gc = gpujoin::client;
using gc::AggregateOp;
using gc::Column;
using gc::ColumnType;
using gc::ColumnView;

gc::QueryMeasure Parse(std::string_view text) {
  auto m = gc::ParseMeasure(text);
  EXPECT_TRUE(m.ok()) << text << ": " << m.status();
  return m.ok() ? *m : gc::QueryMeasure{};
}

std::string Error(std::string_view text) {
  auto m = gc::ParseMeasures(text);
  EXPECT_FALSE(m.ok()) << text;
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(m.status().message());
}

TEST(ParseMeasure, EveryFunctionWithAndWithoutAColumnAndName) {
  gc::QueryMeasure m = Parse("count()");
  EXPECT_EQ(m.op, AggregateOp::kCount);
  EXPECT_EQ(m.column, "");
  EXPECT_EQ(m.name, "");
  EXPECT_EQ(Parse(" count( * ) ").column, "");
  m = Parse("count(latency_ms)");
  EXPECT_EQ(m.op, AggregateOp::kCount);
  EXPECT_EQ(m.column, "latency_ms");
  EXPECT_EQ(Parse("sum(bytes)").op, AggregateOp::kSum);
  EXPECT_EQ(Parse("MIN(x)").op, AggregateOp::kMin);
  EXPECT_EQ(Parse("Max(x)").op, AggregateOp::kMax);
  EXPECT_EQ(Parse("mean(x)").op, AggregateOp::kMean);
  EXPECT_EQ(Parse("avg(x)").op, AggregateOp::kMean);
  m = Parse("  mean ( sensors.latency )   AS  m1 ");
  EXPECT_EQ(m.column, "sensors.latency");
  EXPECT_EQ(m.name, "m1");
  // Quoted names take any text, "" for a quote.
  m = Parse(R"x(sum("bytes sent, total") as "my ""sum")x");
  EXPECT_EQ(m.column, "bytes sent, total");
  EXPECT_EQ(m.name, R"(my "sum)");
}

TEST(ParseMeasure, ListsSplitAtTopLevelCommas) {
  auto ms = gc::ParseMeasures(R"(count(), mean(latency_ms) as m, sum("a,b"))");
  ASSERT_TRUE(ms.ok()) << ms.status();
  ASSERT_EQ(ms->size(), 3u);
  EXPECT_EQ((*ms)[1].name, "m");
  EXPECT_EQ((*ms)[2].column, "a,b");
}

TEST(ParseMeasure, ErrorsNameTheMeasureAndTheMistake) {
  EXPECT_NE(Error("median(x)").find("measure 'median(x)': unknown function 'median'"),
            std::string::npos);
  EXPECT_NE(Error("sum()").find("sum() needs a column"), std::string::npos);
  EXPECT_NE(Error("count").find("write FUNCTION(COLUMN)"), std::string::npos);
  EXPECT_NE(Error("mean(x").find("missing ')'"), std::string::npos);
  EXPECT_NE(Error("mean(a b)").find("expected ')'"), std::string::npos);
  EXPECT_NE(Error("mean(x) as").find("after the measure"), std::string::npos);
  EXPECT_NE(Error("mean(x) m").find("after the measure"), std::string::npos);
  EXPECT_NE(Error("mean(x) as m n").find("after the name"), std::string::npos);
  EXPECT_NE(Error("count(),,sum(x)").find("measure 2 of 3 is empty"), std::string::npos);
  EXPECT_NE(Error("").find("no measure"), std::string::npos);
  EXPECT_NE(Error("sum(\"x)").find("unterminated"), std::string::npos);
}

TEST(QueryPlan, BuildsStepsInOrder) {
  gc::QueryPlan plan;
  plan.Lookup("sensors", {"sensor_id"}, {"type"}, gc::JoinKind::kLeftOuter)
      .Filter("latency_ms > 2")
      .Aggregate({"type"}, {{AggregateOp::kCount}, {AggregateOp::kMean, "latency_ms", "m"}})
      .Project({{"type", ""}, {"m", "mean"}})
      .Limit(3);
  ASSERT_EQ(plan.steps().size(), 5u);
  EXPECT_TRUE(plan.has_aggregate());
  std::vector<std::string> kinds;
  for (const gc::QueryStep& s : plan.steps()) kinds.emplace_back(gc::QueryStepKind(s));
  EXPECT_EQ(kinds, (std::vector<std::string>{"lookup", "filter", "aggregate", "project", "limit"}));
  const auto& l = std::get<gc::QueryLookup>(plan.steps()[0]);
  EXPECT_EQ(l.kind, gc::JoinKind::kLeftOuter);
  EXPECT_EQ(l.select, std::vector<std::string>{"type"});
  EXPECT_FALSE(gc::QueryPlan().Filter("x = 1").has_aggregate());
}

TEST(CheckQueryBatch, NamesUniqueOneLengthValidBuffers) {
  const Column a = Column::Of<int64_t>("a", std::vector<int64_t>{1, 2, 3});
  const Column b = Column::Of<int64_t>("b", std::vector<int64_t>{1, 2});
  Column unnamed = Column::Of<int64_t>("", std::vector<int64_t>{1, 2, 3});
  auto check = [](std::vector<ColumnView> cols) {
    return gc::CheckQueryBatch(gc::QueryBatch{std::move(cols), false}, "batch 0");
  };
  EXPECT_TRUE(check({a.view()}).ok());
  EXPECT_NE(check({}).message().find("batch 0 has no columns"), std::string::npos);
  EXPECT_NE(check({a.view(), b.view()}).message().find("column 1 ('b') has 2 rows but column 0"),
            std::string::npos);
  EXPECT_NE(check({a.view(), a.view()}).message().find("the name is given twice"),
            std::string::npos);
  EXPECT_NE(check({unnamed.view()}).message().find("has no name"), std::string::npos);
  ColumnView short_data = a.view();
  short_data.data = short_data.data.subspan(0, 8);
  EXPECT_NE(check({short_data}).message().find("data has 8 bytes, needs 24"), std::string::npos);
}

TEST(PlanQueryBatches, CutsByRowsAndBytes) {
  std::vector<int64_t> v(1000);
  const Column a = Column::Of<int64_t>("a", v);
  Column s("s", ColumnType::kString);
  for (int i = 0; i < 1000; ++i)
    ASSERT_TRUE(s.AppendString(std::string(i == 500 ? 100 : 10, 'x')).ok());
  const std::vector<ColumnView> cols = {a.view(), s.view()};

  auto by_rows = gc::PlanQueryBatches(cols, 300, uint64_t{1} << 30);
  ASSERT_TRUE(by_rows.ok()) << by_rows.status();
  ASSERT_EQ(by_rows->size(), 4u);
  EXPECT_EQ((*by_rows)[3].begin, 900u);
  EXPECT_EQ((*by_rows)[3].end, 1000u);

  // By bytes: every batch fits, the batches cover the rows in order.
  const uint64_t max_bytes = 4000;
  auto by_bytes = gc::PlanQueryBatches(cols, 1 << 20, max_bytes);
  ASSERT_TRUE(by_bytes.ok()) << by_bytes.status();
  EXPECT_GT(by_bytes->size(), 5u);
  uint64_t pos = 0;
  for (const gc::QueryBatchRange& r : *by_bytes) {
    EXPECT_EQ(r.begin, pos);
    EXPECT_GT(r.end, r.begin);
    uint64_t bytes = 0;
    for (const ColumnView& c : cols) {
      bytes += gpujoin::client::detail::EncodedColumnBytes(c.Slice(r.begin, r.end - r.begin));
    }
    EXPECT_LE(bytes, max_bytes);
    pos = r.end;
  }
  EXPECT_EQ(pos, 1000u);

  // A row that fits no request is named.
  auto too_big = gc::PlanQueryBatches(cols, 1 << 20, 250);
  ASSERT_FALSE(too_big.ok());
  EXPECT_NE(too_big.status().message().find("input row 500 needs"), std::string::npos)
      << too_big.status();

  // No rows: one empty batch, so the server sees the columns.
  const Column empty = Column::Of<int64_t>("e", std::vector<int64_t>{});
  const std::vector<ColumnView> none = {empty.view()};
  auto one = gc::PlanQueryBatches(none, 10, 100);
  ASSERT_TRUE(one.ok());
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ((*one)[0].end, 0u);
  EXPECT_FALSE(gc::PlanQueryBatches(cols, 0, 100).ok());
}

TEST(QueryLimitTracker, DoneOnceALimitStepLetItsRowsThrough) {
  gc::QueryPlan plan;
  plan.Filter("x > 1").Limit(10).Filter("y > 1").Limit(3);
  gc::QueryLimitTracker t(plan);
  EXPECT_FALSE(t.done());
  auto stats = [](uint64_t first_limit_out, uint64_t second_limit_out) {
    std::vector<gc::QueryStepStatistics> s(4);
    for (uint32_t i = 0; i < 4; ++i) s[i].step = i;
    s[1].rows_out = first_limit_out;
    s[3].rows_out = second_limit_out;
    return s;
  };
  t.Add(stats(4, 1));
  EXPECT_FALSE(t.done());
  t.Add(stats(4, 1));
  EXPECT_FALSE(t.done());
  t.Add(stats(2, 0));  // the first limit is spent: 10 rows through it
  EXPECT_TRUE(t.done());

  gc::QueryPlan zero;
  zero.Limit(0);
  EXPECT_TRUE(gc::QueryLimitTracker(zero).done());
  // An aggregate plan's limit counts groups: never done from batch statistics.
  gc::QueryPlan agg;
  agg.Aggregate({}, {{}}).Limit(0);
  EXPECT_FALSE(gc::QueryLimitTracker(agg).done());
}

}  // namespace
