// gpujoin join's options (--how, --right-duplicates, index build --duplicates)
// and its output rows, without a server: pairs without a match (left outer
// rows with no match, every anti row) print empty right cells and an empty
// right_row, matched pairs the right row; usage errors exit 2 before any call.
#include "commands/join/join_rows.hpp"

#include <gtest/gtest.h>

#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "app.hpp"
#include "gpujoin/client/client.hpp"
#include "input/table.hpp"
#include "output/output.hpp"
#include "parse_csv.hpp"

namespace gpujoin::cli {
namespace {

using client::kNoMatch;
using testing::Csv;

std::string AsCsv(const ResultTable& t) {
  std::ostringstream os;
  WriteDelimited(os, t);
  return os.str();
}

TEST(ParseJoinHow, TheFourKindsRoundTrip) {
  EXPECT_EQ(*ParseJoinHow("inner"), client::JoinKind::kInner);
  EXPECT_EQ(*ParseJoinHow("left"), client::JoinKind::kLeftOuter);
  EXPECT_EQ(*ParseJoinHow("semi"), client::JoinKind::kLeftSemi);
  EXPECT_EQ(*ParseJoinHow("anti"), client::JoinKind::kLeftAnti);
  for (auto k : {client::JoinKind::kInner, client::JoinKind::kLeftOuter,
                 client::JoinKind::kLeftSemi, client::JoinKind::kLeftAnti}) {
    EXPECT_EQ(*ParseJoinHow(JoinHowName(k)), k);
  }
}

TEST(ParseJoinHow, OtherWordsNameTheChoices) {
  for (const char* bad : {"", "outer", "left_outer", "LEFT", "right", "full"}) {
    auto k = ParseJoinHow(bad);
    ASSERT_FALSE(k.ok()) << bad;
    EXPECT_EQ(k.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(k.status().message().find("expected inner, left, semi or anti"), std::string::npos)
        << k.status();
  }
}

TEST(RightDuplicatePolicy, DefaultsToKeepAllAsInSql) {
  EXPECT_EQ(*RightDuplicatePolicy(""), client::DuplicatePolicy::kKeepAll);
  EXPECT_EQ(*RightDuplicatePolicy("keep_all"), client::DuplicatePolicy::kKeepAll);
  EXPECT_EQ(*RightDuplicatePolicy("lowest_row"), client::DuplicatePolicy::kLowestRow);
  auto bad = RightDuplicatePolicy("first");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--right-duplicates 'first'"), std::string::npos);
}

TEST(ClientNames, PolicyAndKindRoundTrip) {
  for (auto p : {client::DuplicatePolicy::kLowestRow, client::DuplicatePolicy::kKeepAll}) {
    EXPECT_EQ(*client::ParseDuplicatePolicy(client::DuplicatePolicyName(p)), p);
  }
  for (auto k : {client::JoinKind::kInner, client::JoinKind::kLeftOuter,
                 client::JoinKind::kLeftSemi, client::JoinKind::kLeftAnti}) {
    EXPECT_EQ(*client::ParseJoinKind(client::JoinKindName(k)), k);
  }
  EXPECT_EQ(client::JoinKindName(client::JoinKind::kLeftOuter), "left_outer");
  EXPECT_FALSE(client::ParseDuplicatePolicy("all").ok());
  EXPECT_FALSE(client::ParseJoinKind("left").ok());
}

// A left outer join of l (keys 7 8 9 7) with r (7 twice, 9 once): the
// unmatched row 8 keeps its place with empty right cells.
TEST(JoinRowsTable, OuterRowsHaveEmptyRightCells) {
  const Table left = Csv("id,n\n7,a\n8,b\n9,c\n7,d\n", "l.csv");
  const Table right = Csv("id,label\n7,x\n9,y\n7,z\n", "r.csv");
  const std::vector<uint32_t> l = {0, 0, 1, 2, 3, 3};
  const std::vector<uint32_t> r = {0, 2, kNoMatch, 1, 0, 2};
  auto t = JoinRowsTable(left, &right, JoinRowShape::kRightFile, "", l, r, {});
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(AsCsv(*t),
            "id,n,id_2,label\n"
            "7,a,7,x\n"
            "7,a,7,z\n"
            "8,b,,\n"
            "9,c,9,y\n"
            "7,d,7,x\n"
            "7,d,7,z\n");
  // JSON: the empty right cells are nulls.
  const auto j = RowsToJson(*t);
  EXPECT_TRUE(j[2]["id_2"].is_null());
  EXPECT_TRUE(j[2]["label"].is_null());
  EXPECT_EQ(j[2]["n"], "b");
}

TEST(JoinRowsTable, AntiRowsAreLeftRowsWithNullRightCells) {
  const Table left = Csv("id,n\n7,a\n8,b\n6,c\n", "l.csv");
  const Table right = Csv("id,label\n7,x\n", "r.csv");
  auto t =
      JoinRowsTable(left, &right, JoinRowShape::kRightFile, "", {1, 2}, {kNoMatch, kNoMatch}, {});
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(AsCsv(*t), "id,n,id_2,label\n8,b,,\n6,c,,\n");
}

TEST(JoinRowsTable, RowNumbersLeaveTheRightRowEmptyWithoutAMatch) {
  const Table left = Csv("id\n1\n2\n", "l.csv");
  auto t =
      JoinRowsTable(left, nullptr, JoinRowShape::kRowNumbers, "idx", {0, 1}, {5, kNoMatch}, {});
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(AsCsv(*t), "left_row,right_row\n0,5\n1,\n");
  const auto j = RowsToJson(*t);
  EXPECT_EQ(j[0]["right_row"], 5);
  EXPECT_TRUE(j[1]["right_row"].is_null());
}

TEST(JoinRowsTable, PayloadJoinsAppendTheGatheredColumns) {
  const Table left = Csv("id,n\n7,a\n8,b\n", "l.csv");
  client::Column price("price", client::ColumnType::kFloat64);
  price.Append(2.5);
  price.AppendNull();  // the server's null for the unmatched pair
  auto t = JoinRowsTable(left, nullptr, JoinRowShape::kLeftOnly, "prices", {0, 1}, {3, kNoMatch},
                         {price});
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(AsCsv(*t), "id,n,price\n7,a,2.5\n8,b,\n");
}

TEST(JoinRowsTable, EmptyJoinHasTheHeaderOnly) {
  const Table left = Csv("id,n\n7,a\n", "l.csv");
  const Table right = Csv("id,label\n9,x\n", "r.csv");
  auto t = JoinRowsTable(left, &right, JoinRowShape::kRightFile, "", {}, {}, {});
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(AsCsv(*t), "id,n,id_2,label\n");
}

TEST(JoinRowsTable, AValueOutsideTheRightFileIsAnErrorNamingTheIndex) {
  const Table left = Csv("id\n1\n", "l.csv");
  const Table right = Csv("id\n1\n", "r.csv");
  auto t = JoinRowsTable(left, &right, JoinRowShape::kRightFile, "dim", {0}, {4}, {});
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("index dim returned value 4, which is not a row of r.csv"),
            std::string::npos)
      << t.status();
}

TEST(JoinRowsTable, PairsAndColumnsOfDifferentLengthsAreRefused) {
  const Table left = Csv("id\n1\n", "l.csv");
  EXPECT_FALSE(JoinRowsTable(left, nullptr, JoinRowShape::kRowNumbers, "", {0}, {}, {}).ok());
  client::Column c("c", client::ColumnType::kInt64);
  EXPECT_FALSE(JoinRowsTable(left, nullptr, JoinRowShape::kLeftOnly, "", {0}, {0}, {c}).ok());
}

// ---------------------------------------------------------------- option parsing

struct CliRun {
  int code;
  std::string err;
};

// Runs the CLI in this process with stderr captured. Each case here fails
// before connecting (nothing listens on the address).
CliRun RunInProcess(std::vector<std::string> args) {
  args.insert(args.begin(), {"gpujoin", "--server", "127.0.0.1:1"});
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  std::ostringstream err;
  std::streambuf* old = std::cerr.rdbuf(err.rdbuf());
  const int code = RunCli(static_cast<int>(argv.size()), argv.data());
  std::cerr.rdbuf(old);
  return {code, err.str()};
}

TEST(JoinOptions, AnUnknownHowIsAUsageError) {
  CliRun r =
      RunInProcess({"join", "--left", "l.csv", "--right", "r.csv", "--on", "id", "--how", "outer"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_NE(r.err.find("--how"), std::string::npos) << r.err;
}

TEST(JoinOptions, AnUnknownRightDuplicatesPolicyIsAUsageError) {
  CliRun r = RunInProcess(
      {"join", "--left", "l.csv", "--right", "r.csv", "--on", "id", "--right-duplicates", "first"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_NE(r.err.find("--right-duplicates"), std::string::npos) << r.err;
}

TEST(JoinOptions, RightDuplicatesIsForAdHocJoinsOnly) {
  for (std::vector<std::string> args :
       {std::vector<std::string>{"join", "dim", "--left", "l.csv", "--on", "id"},
        std::vector<std::string>{"join", "--left", "l.csv", "--right", "index:dim", "--on",
                                 "id"}}) {
    args.insert(args.end(), {"--right-duplicates", "keep_all"});
    CliRun r = RunInProcess(args);
    EXPECT_EQ(r.code, kExitUsage);
    EXPECT_NE(r.err.find("--right-duplicates is for ad-hoc joins; index 'dim' has its own policy"),
              std::string::npos)
        << r.err;
  }
}

TEST(IndexBuildOptions, AnUnknownDuplicatesPolicyIsAUsageError) {
  CliRun r = RunInProcess(
      {"index", "build", "x", "--from", "f.csv", "--key", "id", "--duplicates", "all"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_NE(r.err.find("--duplicates"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace gpujoin::cli
