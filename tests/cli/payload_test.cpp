// Payload columns in the gpujoin CLI: type inference, --schema parsing, which
// columns a build stores (--columns, --no-payload), encoding cells as typed
// columns with nulls and positioned errors, and the text and JSON of gathered
// columns of every type (floats round-trip exact, nulls empty / null).
#include "columns/payload.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "gpujoin/testing/files.hpp"
#include "output/output.hpp"
#include "output/row_writer.hpp"
#include "parse_csv.hpp"

namespace gpujoin::cli {
namespace {

using client::Column;
using client::ColumnType;
using gpujoin::testing::Slurp;
using testing::Csv;

// ---------------------------------------------------------------- inference

TEST(InferPayloadType, Int64ThenFloat64ThenBoolThenString) {
  Table t =
      Csv("i,neg,big,f,special,b,s,mixed,n,q\n"
          "1,-5, +7 ,1.5,nan,true,x,1,,\"\"\n"
          "2,-9223372036854775808,9223372036854775808,2,inf,FALSE,1,true,,\n"
          ",3,,1e5,-Infinity,,2.5,x,,\n",
          "p.csv");
  EXPECT_EQ(InferPayloadType(t, 0), ColumnType::kInt64);    // null cells skipped
  EXPECT_EQ(InferPayloadType(t, 1), ColumnType::kInt64);    // int64 min
  EXPECT_EQ(InferPayloadType(t, 2), ColumnType::kFloat64);  // above int64: a number
  EXPECT_EQ(InferPayloadType(t, 3), ColumnType::kFloat64);
  EXPECT_EQ(InferPayloadType(t, 4), ColumnType::kFloat64);  // nan and inf are numbers
  EXPECT_EQ(InferPayloadType(t, 5), ColumnType::kBool);     // any case
  EXPECT_EQ(InferPayloadType(t, 6), ColumnType::kString);
  EXPECT_EQ(InferPayloadType(t, 7), ColumnType::kString);
  EXPECT_EQ(InferPayloadType(t, 8), ColumnType::kInt64);  // no values at all
  EXPECT_EQ(InferPayloadType(t, 9), ColumnType::kInt64);  // "" is empty, not a string value
  // Hex and signs the integer reader does not take make a string.
  Table h = Csv("h,pm\n0x10,+-5\n", "p.csv");
  EXPECT_EQ(InferPayloadType(h, 0), ColumnType::kString);
  EXPECT_EQ(InferPayloadType(h, 1), ColumnType::kString);
}

// ---------------------------------------------------------------- --schema

TEST(ParseSchema, ReadsEveryTypeAndNamesBadEntries) {
  auto s = ParseSchema("a:i32, b:u32,c:i64,d:u64,e:f32,f:f64,g:bool,h:str,i:bin,odd:name:str");
  ASSERT_TRUE(s.ok()) << s.status();
  const std::vector<ColumnType> want = {
      ColumnType::kInt32,   ColumnType::kUint32,  ColumnType::kInt64, ColumnType::kUint64,
      ColumnType::kFloat32, ColumnType::kFloat64, ColumnType::kBool,  ColumnType::kString,
      ColumnType::kBinary,  ColumnType::kString};
  ASSERT_EQ(s->size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ((*s)[i].type, want[i]) << i;
  EXPECT_EQ((*s)[1].name, "b");
  EXPECT_EQ((*s)[9].name, "odd:name");  // the last ':' separates the type
  EXPECT_EQ(FormatSchema(*s),
            "a:i32,b:u32,c:i64,d:u64,e:f32,f:f64,g:bool,h:str,i:bin,odd:name:str");
  EXPECT_TRUE(ParseSchema("")->empty());

  auto message = [](std::string_view text) {
    auto r = ParseSchema(text);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << text;
    return std::string(r.status().message());
  };
  EXPECT_EQ(message("a:int"),
            "--schema 'a:int': unknown type 'int' (expected i32, u32, i64, u64, f32, f64, bool, "
            "str or bin)");
  EXPECT_NE(message("price").find("--schema 'price': write NAME:TYPE"), std::string::npos);
  EXPECT_NE(message(":i64").find("write NAME:TYPE"), std::string::npos);
  EXPECT_NE(message("a:").find("write NAME:TYPE"), std::string::npos);
  EXPECT_EQ(message("a:i64,a:str"), "--schema: column 'a' is given twice");
}

// ---------------------------------------------------------------- PlanPayload

TEST(PlanPayload, DefaultsToEveryColumnButKeyAndValue) {
  Table t = Csv("id,type,v,price\n1,a,5,1.5\n2,b,6,\n", "p.csv");
  auto p = PlanPayload(t, "id", "", std::nullopt, "", false);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(FormatSchema(p->schema), "type:str,v:i64,price:f64");
  EXPECT_EQ(p->columns, (std::vector<size_t>{1, 2, 3}));
  auto v = PlanPayload(t, "id", "v", std::nullopt, "price:f32", false);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(FormatSchema(v->schema), "type:str,price:f32");
  EXPECT_EQ(v->from_schema, (std::vector<bool>{false, true}));
  // --columns chooses and orders; the value column may be payload too.
  auto c = PlanPayload(t, "id", "v", std::string("price, v"), "", false);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(FormatSchema(c->schema), "price:f64,v:i64");
  auto none = PlanPayload(t, "id", "", std::nullopt, "", true);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->columns.empty());
  auto empty = PlanPayload(t, "id", "", std::string(""), "", false);
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->columns.empty());
}

TEST(PlanPayload, NamesTheOptionInErrors) {
  Table t = Csv("id,type,room no\n1,a,3\n", "p.csv");
  auto message = [&](const std::optional<std::string>& columns, std::string_view schema,
                     bool no_payload) {
    auto r = PlanPayload(t, "id", "", columns, schema, no_payload);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(r.status().message());
  };
  EXPECT_EQ(message(std::string("type"), "", true), "--no-payload excludes --columns and --schema");
  EXPECT_EQ(message(std::nullopt, "type:str", true),
            "--no-payload excludes --columns and --schema");
  EXPECT_EQ(message(std::string("id"), "", false), "--columns: 'id' is the key column (--key)");
  EXPECT_EQ(message(std::string("type,type"), "", false),
            "--columns: column 'type' is given twice");
  EXPECT_EQ(message(std::string("nope"), "", false),
            "--columns: p.csv: no column 'nope' (columns: id, type, room no)");
  EXPECT_EQ(message(std::string("type"), "nope:i64", false),
            "--schema: p.csv has no column 'nope' (columns: id, type, room no)");
  EXPECT_EQ(message(std::string("type"), "id:i64", false),
            "--schema names 'id', which is not stored as payload (payload: type)");
  EXPECT_NE(message(std::nullopt, "", false)
                .find("p.csv: column 'room no' cannot be a payload column: names are 1 to 128 "
                      "of A-Z a-z 0-9 _ . -"),
            std::string::npos);
  EXPECT_TRUE(ValidPayloadName("a.B-9_"));
  EXPECT_FALSE(ValidPayloadName(""));
  EXPECT_FALSE(ValidPayloadName(std::string(129, 'a')));
}

// ---------------------------------------------------------------- encoding

// Row r of a column as the CLI prints it.
std::vector<Cell> Cells(const Column& c) {
  std::vector<Cell> out;
  for (uint64_t r = 0; r < c.length; ++r) out.push_back(CellOf(c, r));
  return out;
}

// index upsert: the file's columns but the key and value, as the index stores them.
TEST(PlanPayloadForIndex, EveryStoredColumnOfItsTypeAndNoOther) {
  client::IndexInfo info;
  info.name = "dim";
  info.payload = {{"qty", ColumnType::kInt64, 0, 0}, {"note", ColumnType::kString, 0, 0}};
  Table t = Csv("note,k,v,qty\nx,1,2,3\n", "up.csv");
  auto plan = PlanPayloadForIndex(t, "k", "v", info);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->columns, (std::vector<size_t>{0, 3}));  // header order
  ASSERT_EQ(plan->schema.size(), 2u);
  EXPECT_EQ(plan->schema[0].name, "note");
  EXPECT_EQ(plan->schema[0].type, ColumnType::kString);
  EXPECT_EQ(plan->schema[1].type, ColumnType::kInt64);

  auto extra = PlanPayloadForIndex(Csv("k,qty,note,x\n1,2,a,3\n", "up.csv"), "k", "", info);
  EXPECT_EQ(extra.status().message(),
            "up.csv: column 'x' is not a payload column of index 'dim' (its payload: qty, note)");
  auto missing = PlanPayloadForIndex(Csv("k,qty\n1,2\n", "up.csv"), "k", "", info);
  EXPECT_EQ(missing.status().message(),
            "up.csv has no column 'note': index 'dim' stores payload column 'note' (str), and an "
            "upsert carries every payload column of the index (its payload: qty, note)");
  auto as_key = PlanPayloadForIndex(Csv("qty,note\n1,2\n", "up.csv"), "qty", "", info);
  EXPECT_NE(as_key.status().message().find("column 'qty' is read as the key (--key)"),
            std::string::npos)
      << as_key.status();
  client::IndexInfo bare;
  bare.name = "ids";
  auto none = PlanPayloadForIndex(Csv("a,b\n1,2\n", "up.csv"), "a,b", "", bare);
  ASSERT_TRUE(none.ok()) << none.status();  // a composite key, no payload
  EXPECT_TRUE(none->columns.empty());
  auto stray = PlanPayloadForIndex(Csv("a,b\n1,2\n", "up.csv"), "a", "", bare);
  EXPECT_EQ(stray.status().message(),
            "up.csv: column 'b' is not a payload column of index 'ids' (it stores no payload)");
}

TEST(PayloadColumn, EveryTypeWithNulls) {
  Table t = Csv(
      "i32,u32,i64,u64,f32,f64,b,s,bin\n"
      "-2147483648,4294967295,-9223372036854775808,18446744073709551615,0.1,0.1,true,\"a,b\",x\n"
      ",,,,,,,,\n"
      "7, 8 ,9,10,nan,-inf,False,\"\",\"\"\n",
      "p.csv");
  const std::vector<SchemaEntry> schema =
      *ParseSchema("i32:i32,u32:u32,i64:i64,u64:u64,f32:f32,f64:f64,b:bool,s:str,bin:bin");
  std::vector<std::vector<Cell>> got;
  for (size_t c = 0; c < schema.size(); ++c) {
    auto col = PayloadColumn(t, c, schema[c], true);
    ASSERT_TRUE(col.ok()) << col.status();
    EXPECT_EQ(col->type, schema[c].type);
    EXPECT_EQ(col->name, schema[c].name);
    EXPECT_EQ(col->length, 3u);
    EXPECT_EQ(col->null_count, 1u) << schema[c].name;
    EXPECT_FALSE(col->Valid(1));
    got.push_back(Cells(*col));
  }
  using C = std::vector<Cell>;
  EXPECT_EQ(got[0], (C{"-2147483648", std::nullopt, "7"}));
  EXPECT_EQ(got[1], (C{"4294967295", std::nullopt, "8"}));
  EXPECT_EQ(got[2], (C{"-9223372036854775808", std::nullopt, "9"}));
  EXPECT_EQ(got[3], (C{"18446744073709551615", std::nullopt, "10"}));
  EXPECT_EQ(got[4], (C{"0.1", std::nullopt, "NaN"}));
  EXPECT_EQ(got[5], (C{"0.1", std::nullopt, "-inf"}));
  EXPECT_EQ(got[6], (C{"true", std::nullopt, "false"}));
  EXPECT_EQ(got[7], (C{"a,b", std::nullopt, ""}));  // a quoted "" is a value in a str column
  EXPECT_EQ(got[8], (C{"x", std::nullopt, ""}));
}

TEST(PayloadColumn, CellsThatAreNoValueNameThePosition) {
  Table t = Csv("a,b\n1,x\n3000000000,y\n", "p.csv");
  auto i32 = PayloadColumn(t, 0, SchemaEntry{"a", ColumnType::kInt32}, true);
  EXPECT_EQ(i32.status().message(),
            "p.csv:3: column 'a' (1): '3000000000' is not a valid i32 (--schema a:i32)");
  auto f = PayloadColumn(t, 1, SchemaEntry{"b", ColumnType::kFloat64}, false);
  EXPECT_EQ(f.status().message(), "p.csv:2: column 'b' (2): 'x' is not a valid f64");
  auto u = PayloadColumn(Csv("a\n-1\n", "p.csv"), 0, SchemaEntry{"a", ColumnType::kUint64}, true);
  EXPECT_EQ(u.status().message(),
            "p.csv:2: column 'a' (1): '-1' is not a valid u64 (--schema a:u64)");
  auto b = PayloadColumn(Csv("a\nyes\n", "p.csv"), 0, SchemaEntry{"a", ColumnType::kBool}, true);
  EXPECT_EQ(b.status().message(),
            "p.csv:2: column 'a' (1): 'yes' is not a valid bool (--schema a:bool)");
  Table bad = Csv("s\nok\n\xff\xfe\n", "p.csv");
  auto s = PayloadColumn(bad, 0, SchemaEntry{"s", ColumnType::kString}, false);
  EXPECT_NE(s.status().message().find("p.csv:3: column 's' (1): the text is not valid UTF-8"),
            std::string::npos)
      << s.status();
  // Any bytes are a bin value.
  EXPECT_TRUE(PayloadColumn(bad, 0, SchemaEntry{"s", ColumnType::kBinary}, true).ok());
  // Overlong, surrogate and truncated sequences are not UTF-8; the 4-byte maximum is.
  for (std::string_view text : {"\xc0\xaf", "\xed\xa0\x80", "\xe2\x82", "\xf4\x90\x80\x80"}) {
    Table x = Csv(absl::StrCat("s\n", std::string(text), "\n"), "p.csv");
    EXPECT_FALSE(PayloadColumn(x, 0, SchemaEntry{"s", ColumnType::kString}, false).ok());
  }
  Table ok = Csv("s\n\xf4\x8f\xbf\xbf \xc3\xa9\n", "p.csv");
  EXPECT_TRUE(PayloadColumn(ok, 0, SchemaEntry{"s", ColumnType::kString}, false).ok());
}

// ---------------------------------------------------------------- output

TEST(CellOf, FloatsPrintRoundTripExact) {
  Column f("f", ColumnType::kFloat32);
  const std::vector<float> fs = {0.1f,
                                 1.0f / 3,
                                 std::numeric_limits<float>::denorm_min(),
                                 std::numeric_limits<float>::max(),
                                 -0.0f,
                                 16777216.0f};
  for (float v : fs) f.Append(v);
  Column d("d", ColumnType::kFloat64);
  const std::vector<double> ds = {
      0.1,  1.0 / 3, std::numeric_limits<double>::denorm_min(), std::numeric_limits<double>::max(),
      1e23, -2.5};
  for (double v : ds) d.Append(v);
  for (size_t i = 0; i < fs.size(); ++i) {
    const std::string text = *CellOf(f, i);
    float back;
    std::sscanf(text.c_str(), "%f", &back);
    EXPECT_EQ(std::memcmp(&back, &fs[i], 4), 0) << text;
  }
  for (size_t i = 0; i < ds.size(); ++i) {
    const std::string text = *CellOf(d, i);
    EXPECT_EQ(std::strtod(text.c_str(), nullptr), ds[i]) << text;
  }
  EXPECT_EQ(*CellOf(f, 0), "0.1");
  EXPECT_EQ(*CellOf(d, 0), "0.1");
  EXPECT_EQ(*CellOf(d, 4), "1e+23");
}

// Every type and a null through the CSV and JSON Lines writers.
TEST(CellOf, EveryTypeAndNullInCsvAndJsonLines) {
  Table t =
      Csv("i,u,f,d,b,s\n"
          "-3,18446744073709551615,nan,0.25,true,\"say \"\"hi\"\", ok\"\n"
          ",,,,,\n"
          "4,0,inf,-1e-300,false,\"\"\n",
          "p.csv");
  const std::vector<SchemaEntry> schema = *ParseSchema("i:i64,u:u64,f:f32,d:f64,b:bool,s:str");
  ResultTable out;
  std::vector<Column> cols;
  for (size_t c = 0; c < schema.size(); ++c) {
    cols.push_back(*PayloadColumn(t, c, schema[c], true));
    out.AddColumn(schema[c].name, KindOf(schema[c].type));
  }
  for (uint64_t r = 0; r < 3; ++r) {
    std::vector<Cell> row;
    for (const Column& c : cols) row.push_back(CellOf(c, r));
    out.rows.push_back(row);
  }
  std::ostringstream csv;
  WriteDelimited(csv, out);
  EXPECT_EQ(csv.str(),
            "i,u,f,d,b,s\n"
            "-3,18446744073709551615,NaN,0.25,true,\"say \"\"hi\"\", ok\"\n"
            ",,,,,\n"
            "4,0,inf,-1e-300,false,\"\"\n");
  std::ostringstream jl;
  WriteJsonLines(jl, out);
  EXPECT_EQ(jl.str(),
            "{\"i\":-3,\"u\":18446744073709551615,\"f\":\"NaN\",\"d\":0.25,\"b\":true,"
            "\"s\":\"say \\\"hi\\\", ok\"}\n"
            "{\"i\":null,\"u\":null,\"f\":null,\"d\":null,\"b\":null,\"s\":null}\n"
            "{\"i\":4,\"u\":0,\"f\":\"inf\",\"d\":-1e-300,\"b\":false,\"s\":\"\"}\n");
}

// The join and lookup write views (CellViewOf, RowWriter::Write of CellViews)
// where they wrote cells: every type and a null spell the same, and a file of
// view rows is byte for byte the file of cell rows in each output format.
TEST(CellViewOf, SpellsEveryTypeAsCellOfAndWritesTheSameRows) {
  Table t = Csv(
      "i32,u32,i64,u64,f32,f64,b,s,bin\n"
      "-2147483648,4294967295,-9223372036854775808,18446744073709551615,0.1,1e+23,true,\"a,b\",x\n"
      ",,,,,,,,\n"
      "7, 8 ,9,10,nan,-inf,False,\"\",\" lead\"\n"
      "0,0,0,0,-0,0.30000000000000004,true,\"say \"\"hi\"\"\",\"two\nlines\"\n",
      "p.csv");
  const std::vector<SchemaEntry> schema =
      *ParseSchema("i32:i32,u32:u32,i64:i64,u64:u64,f32:f32,f64:f64,b:bool,s:str,bin:bin");
  std::vector<Column> cols;
  std::vector<std::string> names;
  for (size_t c = 0; c < schema.size(); ++c) {
    auto col = PayloadColumn(t, c, schema[c], true);
    ASSERT_TRUE(col.ok()) << col.status();
    cols.push_back(*std::move(col));
    names.push_back(schema[c].name);
  }
  std::vector<std::string> scratch(cols.size());
  for (const std::string ext : {".csv", ".tsv", ".jsonl"}) {
    const std::string dir = ::testing::TempDir();
    const std::string cells_path = dir + "/cells" + ext, views_path = dir + "/views" + ext;
    Globals g;
    RowWriter by_cells(g, cells_path), by_views(g, views_path);
    std::vector<ColumnKind> kinds;
    for (const auto& e : schema) kinds.push_back(KindOf(e.type));
    by_cells.Begin(names, kinds);
    by_views.Begin(names, kinds);
    for (uint64_t r = 0; r < 4; ++r) {
      std::vector<Cell> cells;
      std::vector<CellView> views;
      for (size_t c = 0; c < cols.size(); ++c) {
        cells.push_back(CellOf(cols[c], r));
        views.push_back(CellViewOf(cols[c], r, &scratch[c]));
        ASSERT_EQ(views.back().has_value(), cells.back().has_value()) << names[c] << " " << r;
        if (cells.back()) EXPECT_EQ(*views.back(), *cells.back()) << names[c] << " " << r;
      }
      by_cells.Write(cells);
      by_views.Write(views);
    }
    by_cells.Finish(Json::object());
    by_views.Finish(Json::object());
    const std::string want = Slurp(cells_path);
    EXPECT_GT(want.size(), 100u) << ext;
    EXPECT_EQ(Slurp(views_path), want) << ext;
  }
}

}  // namespace
}  // namespace gpujoin::cli
