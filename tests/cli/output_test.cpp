// Result rendering of the gpujoin CLI: CSV quoting round trip, JSON typing,
// aligned tables, number formatting, progress text.
#include "output/output.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <sstream>

#include <nlohmann/json.hpp>

#include "output/progress.hpp"

namespace gpujoin::cli {
namespace {

ResultTable Sample() {
  ResultTable t;
  t.AddColumn("name", ColumnKind::kString);
  t.AddColumn("value", ColumnKind::kNumber);
  t.AddColumn("found", ColumnKind::kBool);
  t.rows.push_back({"plain", "42", "true"});
  t.rows.push_back({"a,b \"q\"", std::nullopt, "false"});
  t.rows.push_back({"", "NaN", "true"});
  return t;
}

TEST(ResultTable, AddColumnAvoidsClashes) {
  ResultTable t;
  EXPECT_EQ(t.AddColumn("id", ColumnKind::kString), "id");
  EXPECT_EQ(t.AddColumn("id", ColumnKind::kString), "id_2");
  EXPECT_EQ(t.AddColumn("id", ColumnKind::kString), "id_3");
}

TEST(WriteDelimited, QuotesWhatNeedsQuotingAndRoundTrips) {
  std::ostringstream os;
  WriteDelimited(os, Sample());
  EXPECT_EQ(os.str(),
            "name,value,found\n"
            "plain,42,true\n"
            "\"a,b \"\"q\"\"\",,false\n"
            "\"\",NaN,true\n");
  auto back = ParseDelimited(os.str(), ',', "out.csv");
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->rows.size(), 3u);
  EXPECT_EQ(*back->rows[1].cells[0], "a,b \"q\"");
  EXPECT_FALSE(back->rows[1].cells[1].has_value());  // null stays null
  EXPECT_EQ(*back->rows[2].cells[0], "");            // empty string stays empty string
}

TEST(RowsToJson, TypesCellsByColumnKind) {
  auto j = RowsToJson(Sample());
  ASSERT_EQ(j.size(), 3u);
  EXPECT_EQ(j[0]["name"], "plain");
  EXPECT_EQ(j[0]["value"], 42);
  EXPECT_EQ(j[0]["found"], true);
  EXPECT_TRUE(j[1]["value"].is_null());
  EXPECT_TRUE(j[2]["value"].is_null());  // NaN is not JSON
  // Keys keep the column order.
  EXPECT_EQ(j[0].begin().key(), "name");
}

TEST(WriteJsonLines, OneParsableObjectPerRow) {
  std::ostringstream os;
  WriteJsonLines(os, Sample());
  std::istringstream is(os.str());
  std::string line;
  int n = 0;
  while (std::getline(is, line)) {
    auto j = nlohmann::json::parse(line);
    EXPECT_TRUE(j.is_object());
    ++n;
  }
  EXPECT_EQ(n, 3);
}

TEST(WriteAligned, PadsColumnsAndRightAlignsNumbers) {
  ResultTable t;
  t.AddColumn("type", ColumnKind::kString);
  t.AddColumn("mean", ColumnKind::kNumber);
  t.rows.push_back({"humidity", "1.5"});
  t.rows.push_back({"co2", "12.25"});
  std::ostringstream os;
  WriteAligned(os, t);
  EXPECT_EQ(os.str(),
            "type       mean\n"
            "--------  -----\n"
            "humidity    1.5\n"
            "co2       12.25\n");
}

TEST(FormatFloat, ShortestRoundTrip) {
  EXPECT_EQ(FormatFloat(0.1f), "0.1");
  EXPECT_EQ(FormatFloat(3.0f), "3");
  EXPECT_EQ(FormatFloat(-0.0f), "-0");
  EXPECT_EQ(FormatFloat(std::numeric_limits<float>::quiet_NaN()), "NaN");
  EXPECT_EQ(FormatFloat(-std::numeric_limits<float>::infinity()), "-inf");
  const float x = 123.456789f;
  EXPECT_EQ(std::stof(FormatFloat(x)), x);
}

TEST(FormatBytes, Units) {
  EXPECT_EQ(FormatBytes(512), "512 B");
  EXPECT_EQ(FormatBytes(1536), "1.5 KiB");
  EXPECT_EQ(FormatBytes(3.0 * (1 << 30)), "3.0 GiB");
}

TEST(ProgressBar, RenderShowsRowsBytesRateAndEta) {
  const std::string line = ProgressBar::Render("upload", 500000, 1000000, 2000000, 2.0);
  EXPECT_NE(line.find("upload ["), std::string::npos) << line;
  EXPECT_NE(line.find(" 50% "), std::string::npos) << line;
  EXPECT_NE(line.find("500.0k/1.00M rows"), std::string::npos) << line;
  EXPECT_NE(line.find("1.9 MiB"), std::string::npos) << line;
  EXPECT_NE(line.find("250.0k rows/s"), std::string::npos) << line;
  EXPECT_NE(line.find("ETA 2s"), std::string::npos) << line;
  const std::string unknown = ProgressBar::Render("lookup", 10, 0, 40, 0);
  EXPECT_EQ(unknown, "lookup 10 rows, 40 B");
}

// The input bar: the fraction of the input's bytes, rows, both rates and the ETA
// by bytes; a pipe (no total) shows the bytes alone; before any time has passed
// no rates.
TEST(ProgressBar, RenderInputShowsBytesOfTheInputRowsRatesAndEta) {
  EXPECT_EQ(ProgressBar::RenderInput("lookup", 300000, 1 << 20, 4 << 20, 2.0),
            "lookup [======                  ]  25% 1.0 MiB/4.0 MiB, 300.0k rows, 150.0k rows/s, "
            "512.0 KiB/s, ETA 6s");
  EXPECT_EQ(ProgressBar::RenderInput("join", 42, 2048, 0, 0), "join 2.0 KiB, 42 rows");
  const std::string done = ProgressBar::RenderInput("build", 5, 100, 100, 1.0);
  EXPECT_NE(done.find("[========================] 100% "), std::string::npos) << done;
  EXPECT_EQ(done.find("ETA"), std::string::npos) << done;
}

}  // namespace
}  // namespace gpujoin::cli

namespace gpujoin::cli {
namespace {

TEST(ResultTable, GeneratedRowsRenderLikeStoredRows) {
  ResultTable stored = Sample();
  ResultTable generated;
  generated.columns = stored.columns;
  generated.kinds = stored.kinds;
  generated.SetGenerator(stored.rows.size(), [&](size_t r, std::vector<Cell>* out) {
    *out = stored.rows[r];
  });
  EXPECT_EQ(generated.RowCount(), 3u);
  std::ostringstream a, b, c, d;
  WriteDelimited(a, stored);
  WriteDelimited(b, generated);
  EXPECT_EQ(a.str(), b.str());
  WriteAligned(c, stored);
  WriteAligned(d, generated);
  EXPECT_EQ(c.str(), d.str());
  EXPECT_EQ(RowsToJson(stored), RowsToJson(generated));
}

}  // namespace
}  // namespace gpujoin::cli
