// `gpujoin query` without a server: the --lookup flags with the --select,
// --prefix and --how that follow them, the key columns a --lookup names
// (positional, KEY=COL, a bare INDEX) checked against its index, --project,
// the plan's step order, and the types the input is sent as (--schema, a
// lookup's key, inferred) with the errors naming the flag, file and line.
#include "commands/query/query_flags.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "commands/query/query_input.hpp"
#include "parse_csv.hpp"

namespace gpujoin::cli {
namespace {

using client::ColumnType;
using testing::Csv;

std::vector<OrderedFlag> Flags(std::vector<std::pair<std::string, std::string>> pairs) {
  std::vector<OrderedFlag> out;
  for (auto& [f, v] : pairs) out.push_back({f, v});
  return out;
}

std::string ErrorOf(const absl::Status& s) {
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  return std::string(s.message());
}

client::IndexInfo IntegerIndex(std::string name) {
  client::IndexInfo i;
  i.name = std::move(name);
  i.key_type = client::KeyType::kUint32;
  i.payload = {{"type", ColumnType::kString}, {"site", ColumnType::kString}};
  return i;
}

client::IndexInfo RoomsIndex() {
  client::IndexInfo i;
  i.name = "rooms";
  i.key_type = client::KeyType::kColumns;
  i.key_columns = {{"site", ColumnType::kString}, {"room", ColumnType::kInt32}};
  return i;
}

TEST(QueryFlags, LookupsTakeTheOptionsThatFollowThem) {
  auto l = ParseLookupFlags(Flags({{"--lookup", "sensors:sensor_id"},
                                   {"--how", "left"},
                                   {"--select", "type"},
                                   {"--lookup", "rooms:room=r,site=s"},
                                   {"--prefix", "room_"},
                                   {"--how", "anti"},
                                   {"--lookup", "rooms"}}));
  ASSERT_TRUE(l.ok()) << l.status();
  ASSERT_EQ(l->size(), 3u);
  EXPECT_EQ((*l)[0].index, "sensors");
  EXPECT_EQ((*l)[0].columns, std::vector<std::string>{"sensor_id"});
  EXPECT_EQ((*l)[0].kind, client::JoinKind::kLeftOuter);
  EXPECT_EQ((*l)[0].select, "type");
  EXPECT_EQ((*l)[0].prefix, "");
  EXPECT_EQ((*l)[1].keys, (std::vector<std::string>{"room", "site"}));
  EXPECT_EQ((*l)[1].columns, (std::vector<std::string>{"r", "s"}));
  EXPECT_EQ((*l)[1].prefix, "room_");
  EXPECT_EQ((*l)[1].kind, client::JoinKind::kLeftAnti);
  EXPECT_FALSE((*l)[1].select.has_value());
  EXPECT_TRUE((*l)[2].columns.empty());
  EXPECT_EQ((*l)[2].kind, client::JoinKind::kInner);
}

TEST(QueryFlags, LookupErrorsNameTheFlag) {
  EXPECT_NE(ErrorOf(ParseLookupFlags(Flags({{"--select", "a"}})).status())
                .find("query: --select 'a' comes before any --lookup"),
            std::string::npos);
  EXPECT_NE(
      ErrorOf(ParseLookupFlags(Flags({{"--lookup", "x:k"}, {"--how", "left"}, {"--how", "anti"}}))
                  .status())
          .find("--how is given twice for --lookup 'x:k'"),
      std::string::npos);
  EXPECT_NE(ErrorOf(ParseLookupFlags(Flags({{"--lookup", "x:k"}, {"--how", "full"}})).status())
                .find("--how 'full' (for --lookup 'x:k'): expected inner, left, semi or anti"),
            std::string::npos);
  EXPECT_NE(ErrorOf(ParseLookupFlags(Flags({{"--lookup", ":k"}})).status())
                .find("--lookup ':k': write INDEX:COL"),
            std::string::npos);
  EXPECT_NE(ErrorOf(ParseLookupFlags(Flags({{"--lookup", "x:"}})).status())
                .find("--lookup 'x:' names no key column"),
            std::string::npos);
  EXPECT_NE(ErrorOf(ParseLookupFlags(Flags({{"--lookup", "x:a=b,c"}})).status())
                .find("give every key column as KEY=COL, or none"),
            std::string::npos);
  EXPECT_NE(ErrorOf(ParseLookupFlags(Flags({{"--lookup", "x:a="}})).status())
                .find("'a=' needs a key column and a column"),
            std::string::npos);
}

TEST(QueryFlags, KeyColumnsFollowTheIndexsKey) {
  auto parse = [](std::string spec) {
    auto l = ParseLookupFlags(Flags({{"--lookup", spec}}));
    EXPECT_TRUE(l.ok()) << l.status();
    return (*l)[0];
  };
  const client::IndexInfo sensors = IntegerIndex("sensors");
  const client::IndexInfo rooms = RoomsIndex();
  EXPECT_EQ(*LookupKeyColumns(parse("sensors:id"), sensors), std::vector<std::string>{"id"});
  EXPECT_EQ(*LookupKeyColumns(parse("sensors:sensor_id=id"), sensors),
            std::vector<std::string>{"id"});
  EXPECT_EQ(*LookupKeyColumns(parse("rooms:a,b"), rooms), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(*LookupKeyColumns(parse("rooms:room=b,site=a"), rooms),
            (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(*LookupKeyColumns(parse("rooms"), rooms), (std::vector<std::string>{"site", "room"}));

  EXPECT_NE(ErrorOf(LookupKeyColumns(parse("sensors:a,b"), sensors).status())
                .find("--lookup 'sensors:a,b': index 'sensors' has one uint32 key: give the one "
                      "column holding it"),
            std::string::npos);
  EXPECT_NE(ErrorOf(LookupKeyColumns(parse("sensors"), sensors).status()).find("has one uint32"),
            std::string::npos);
  EXPECT_NE(ErrorOf(LookupKeyColumns(parse("rooms:a"), rooms).status())
                .find("index 'rooms' has key columns site:str, room:i32: give 2 columns in that "
                      "order (or KEY=COL pairs), not 1"),
            std::string::npos);
  EXPECT_NE(ErrorOf(LookupKeyColumns(parse("rooms:site=a"), rooms).status())
                .find("key column 'room' is not given (room=COL)"),
            std::string::npos);
  EXPECT_NE(ErrorOf(LookupKeyColumns(parse("rooms:site=a,room=b,floor=c"), rooms).status())
                .find("'floor' is not one of them"),
            std::string::npos);
  EXPECT_NE(ErrorOf(LookupKeyColumns(parse("rooms:site=a,room=b,site=c"), rooms).status())
                .find("key column 'site' is given twice"),
            std::string::npos);
}

TEST(QueryFlags, Project) {
  auto p = ParseProject(" a , b=new ,c");
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->size(), 3u);
  EXPECT_EQ((*p)[1].column, "b");
  EXPECT_EQ((*p)[1].name, "new");
  EXPECT_EQ((*p)[2].name, "");
  EXPECT_NE(ErrorOf(ParseProject("").status()).find("--project names no column"),
            std::string::npos);
  EXPECT_NE(ErrorOf(ParseProject("a=").status()).find("--project 'a=': write COL or COL=NEW_NAME"),
            std::string::npos);
}

TEST(QueryFlags, PlanStepsRunInTheDocumentedOrder) {
  QueryArgs a;
  a.limit = 5;
  a.project = "type,c=n";
  a.agg = "count() as c";
  a.group_by = "type";
  a.where = {"x > 1", "y is null"};
  auto lookups = ParseLookupFlags(
      Flags({{"--lookup", "sensors:id"}, {"--lookup", "rooms:s,r"}, {"--select", ""}}));
  ASSERT_TRUE(lookups.ok());
  auto plan = BuildQueryPlan(a, *lookups, {IntegerIndex("sensors"), RoomsIndex()});
  ASSERT_TRUE(plan.ok()) << plan.status();
  std::vector<std::string> kinds;
  for (const client::QueryStep& s : plan->steps()) kinds.emplace_back(client::QueryStepKind(s));
  EXPECT_EQ(kinds, (std::vector<std::string>{"lookup", "lookup", "filter", "filter", "aggregate",
                                             "project", "limit"}));
  // Without --select every payload column; --select '' none.
  EXPECT_EQ(std::get<client::QueryLookup>(plan->steps()[0]).select,
            (std::vector<std::string>{"type", "site"}));
  EXPECT_TRUE(std::get<client::QueryLookup>(plan->steps()[1]).select.empty());
  EXPECT_EQ(std::get<client::QueryAggregate>(plan->steps()[4]).measures[0].name, "c");

  // --group-by alone counts.
  QueryArgs g;
  g.group_by = "type";
  auto counted = BuildQueryPlan(g, {}, {});
  ASSERT_TRUE(counted.ok());
  const auto& agg = std::get<client::QueryAggregate>(counted->steps()[0]);
  ASSERT_EQ(agg.measures.size(), 1u);
  EXPECT_EQ(agg.measures[0].op, client::AggregateOp::kCount);
  EXPECT_EQ(agg.measures[0].column, "");

  QueryArgs bad;
  bad.agg = "median(x)";
  EXPECT_NE(ErrorOf(BuildQueryPlan(bad, {}, {}).status())
                .find("query: --agg 'median(x)': measure 'median(x)': unknown function"),
            std::string::npos);
  auto sel = ParseLookupFlags(Flags({{"--lookup", "sensors:id"}, {"--select", "type,colour"}}));
  EXPECT_NE(ErrorOf(BuildQueryPlan(QueryArgs{}, *sel, {IntegerIndex("sensors")}).status())
                .find("--select 'colour' (for --lookup 'sensors:id'): index 'sensors' has no "
                      "payload column 'colour' (payload: type, site)"),
            std::string::npos);
  EXPECT_NE(ErrorOf(BuildQueryPlan(QueryArgs{}, {}, {}).status()).find("the plan has no steps"),
            std::string::npos);
}

TEST(QueryFlags, ServerErrorsAreNamedByTheFlagsOfTheirStep) {
  QueryArgs a;
  a.where = {"x >"};
  a.group_by = "t";
  a.agg = "count()";
  a.limit = 3;
  auto lookups = ParseLookupFlags(Flags({{"--lookup", "s:id"}}));
  const std::vector<std::string> flags = StepFlags(a, *lookups);
  EXPECT_EQ(flags, (std::vector<std::string>{"--lookup 's:id'", "--where 'x >'",
                                             "--group-by 't' --agg 'count()'", "--limit 3"}));
  auto what = [&](std::string message) {
    return FailedQueryWhat(absl::InvalidArgumentError(message), flags);
  };
  EXPECT_EQ(what("the stream's plan was refused: plan.steps[1].filter.where: at character 3"),
            "query --where 'x >'");
  EXPECT_EQ(what("plan.steps[2].aggregate.measures[0]: ..."),
            "query --group-by 't' --agg 'count()'");
  EXPECT_EQ(what("plan.steps[9].limit"), "query");
  EXPECT_EQ(what("plan.steps[x]"), "query");
  EXPECT_EQ(what("no step named"), "query");
}

TEST(QueryInput, TypesFromSchemaKeysAndTheFirstBatch) {
  const Table t =
      Csv("id,big,site,room,x,flag,name\n"
          "1,18446744073709551615,a,3,1.5,true,n1\n"
          "2,5,b,4,,false,\n",
          "f.csv");
  std::vector<KeyNeed> needs = {
      {"big", std::nullopt, "--lookup 'sensors:big': index 'sensors' has uint64 keys"},
      {"site", ColumnType::kString, "rooms site"},
      {"room", ColumnType::kInt32, "rooms room"},
      {"made_by_a_step", ColumnType::kString, "ignored"}};
  auto types = TypeInput(t, "name:bin", needs);
  ASSERT_TRUE(types.ok()) << types.status();
  EXPECT_EQ(types->Text(), "id:i64,big:u64,site:str,room:i32,x:f64,flag:bool,name:bin");
  EXPECT_EQ(types->source[1], needs[0].why);
  EXPECT_EQ(types->source[6], "--schema");
  EXPECT_EQ(types->source[4], "");

  auto cols = TypedColumns(t, *types);
  ASSERT_TRUE(cols.ok()) << cols.status();
  ASSERT_EQ(cols->size(), 7u);
  EXPECT_EQ((*cols)[1].Value<uint64_t>(0), 18446744073709551615ull);
  EXPECT_EQ((*cols)[4].null_count, 1u);
  EXPECT_EQ((*cols)[6].null_count, 1u);

  // Large unsigned integers no lookup reads are uint64 too (not float64).
  auto inferred = TypeInput(t, "", {});
  ASSERT_TRUE(inferred.ok());
  EXPECT_EQ(inferred->columns[1].type, ColumnType::kUint64);
}

TEST(QueryInput, ErrorsNameTheCellAndWhereTheTypeCameFrom) {
  const Table first = Csv("id,v\n1,2\n", "f.csv");
  EXPECT_NE(ErrorOf(TypeInput(first, "w:i64", {}).status())
                .find("--schema: f.csv has no column 'w' (columns: id, v)"),
            std::string::npos);
  EXPECT_NE(ErrorOf(TypeInput(first, "",
                              {{"id", ColumnType::kString, "A"}, {"id", ColumnType::kInt64, "B"}})
                        .status())
                .find("column 'id' is read as str (A) and as i64 (B)"),
            std::string::npos);
  const Table text = Csv("id\n1\nabc\n", "g.csv");
  EXPECT_NE(ErrorOf(TypeInput(text, "", {{"id", std::nullopt, "--lookup 'x:id'"}}).status())
                .find("g.csv:3: column 'id' (1): 'abc' is not a valid i64: an integer key is "
                      "needed (--lookup 'x:id')"),
            std::string::npos);

  // A later batch that does not fit the first batch's types.
  auto types = TypeInput(first, "", {});
  ASSERT_TRUE(types.ok());
  const Table later = Csv("id,v\n3,4.5\n", "f.csv");
  EXPECT_NE(ErrorOf(TypedColumns(later, *types).status())
                .find("'4.5' is not a valid i64 (the first batch made the column i64; give its "
                      "type: --schema v:TYPE)"),
            std::string::npos);
}

}  // namespace
}  // namespace gpujoin::cli
