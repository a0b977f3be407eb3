// Encoding of table columns for the Hash RPC (gpujoin hash --cols).
#include "commands/hash/hash_columns.hpp"

#include <gtest/gtest.h>

#include <cstring>

#include "parse_csv.hpp"

namespace gpujoin::cli {
namespace {

using client::ColumnType;
using testing::Csv;

TEST(InferHashType, NarrowestTypeThatParsesEveryCell) {
  Table t = Csv("u,i,big,f,s,n\n1,-1,18446744073709551615,1.5,x,\n2,3,1,2,3,\n", "h.csv");
  EXPECT_EQ(InferHashType(t, 0), ColumnType::kUint32);
  EXPECT_EQ(InferHashType(t, 1), ColumnType::kInt64);
  EXPECT_EQ(InferHashType(t, 2), ColumnType::kUint64);
  EXPECT_EQ(InferHashType(t, 3), ColumnType::kFloat64);
  EXPECT_EQ(InferHashType(t, 4), ColumnType::kBinary);
  EXPECT_EQ(InferHashType(t, 5), ColumnType::kUint32);  // all null
}

TEST(BuildHashInput, FixedWidthWithNulls) {
  Table t = Csv("a,b\n5,x\n,y\n7,z\n", "h.csv");
  auto in = BuildHashInput(t, "a");
  ASSERT_TRUE(in.ok()) << in.status();
  EXPECT_EQ(in->type, ColumnType::kUint32);
  EXPECT_EQ(in->rows, 3u);
  EXPECT_EQ(in->null_count, 1u);
  ASSERT_EQ(in->data.size(), 12u);
  uint32_t v[3];
  std::memcpy(v, in->data.data(), 12);
  EXPECT_EQ(v[0], 5u);
  EXPECT_EQ(v[1], 0u);
  EXPECT_EQ(v[2], 7u);
  ASSERT_EQ(in->validity.size(), 1u);
  EXPECT_EQ(in->validity[0], 0b101);
  client::HashColumn view = in->View();
  EXPECT_EQ(view.length, 3u);
  EXPECT_EQ(view.data.size(), 12u);
}

TEST(BuildHashInput, StringsKeepEmptyDistinctFromNull) {
  Table t = Csv("s\nab\n\"\"\n\"c\"\n", "h.csv");
  // Single-column CSV cannot hold an unquoted null; add one through a second column.
  Table t2 = Csv("s,k\nab,1\n\"\",2\n,3\nc,4\n", "h.csv");
  auto in = BuildHashInput(t2, "s:string");
  ASSERT_TRUE(in.ok()) << in.status();
  EXPECT_EQ(in->type, ColumnType::kBinary);
  EXPECT_EQ(in->offsets, (std::vector<int32_t>{0, 2, 2, 2, 3}));
  EXPECT_EQ(std::string(in->data.begin(), in->data.end()), "abc");
  EXPECT_EQ(in->validity[0], 0b1011);  // row 2 (null) invalid, row 1 ("") valid
  EXPECT_EQ(in->null_count, 1u);
  auto single = BuildHashInput(t, "s");
  ASSERT_TRUE(single.ok());
  EXPECT_EQ(single->null_count, 0u);
}

TEST(BuildHashInput, ExplicitTypesAndErrors) {
  Table t = Csv("a,b\n-5,1\n7,x\n", "h.csv");
  auto i32 = BuildHashInput(t, "a:int32");
  ASSERT_TRUE(i32.ok());
  int32_t first;
  std::memcpy(&first, i32->data.data(), 4);
  EXPECT_EQ(first, -5);
  auto bad = BuildHashInput(t, "b:uint64");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "h.csv:3: column 'b' (2): 'x' is not a valid uint64");
  auto badtype = BuildHashInput(t, "a:int128");
  ASSERT_FALSE(badtype.ok());
  EXPECT_NE(badtype.status().message().find("unknown column type 'int128'"), std::string::npos);
  auto missing = BuildHashInput(t, "c");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(), "h.csv: no column 'c' (columns: a, b)");
}

Table Jsonl(std::string_view text) {
  auto t = ParseJsonLines(text, "h.jsonl");
  EXPECT_TRUE(t.ok()) << t.status();
  return *std::move(t);
}

TEST(HashSchema, TypeExpressionsRoundTripAndErrorsNameThePosition) {
  for (const char* text : {"int64", "list<string>", "struct<a: int32, b: list<float64>>",
                           "map<string, list<uint8>>", "fixed_size_list<int16, 3>",
                           "large_list<large_string>", "fixed_size_binary<4>", "struct<>"}) {
    auto s = ParseHashSchema(text);
    ASSERT_TRUE(s.ok()) << text << ": " << s.status();
    EXPECT_EQ(s->ToString(), text);
  }
  EXPECT_EQ(ParseHashSchema("struct<a:int32,b:utf8>")->ToString(), "struct<a: int32, b: string>");
  EXPECT_EQ(ParseHashSchema("list<int32").status().message(),
            "type 'list<int32' at column 11: expected '>'");
  EXPECT_EQ(ParseHashSchema("map<int32, int32>").status().message(),
            "type 'map<int32, int32>' at column 10: map keys are JSON object keys: a string type");
  EXPECT_NE(ParseHashSchema("lst<int32>").status().message().find("unknown type 'lst'"),
            std::string::npos);
}

TEST(HashSchema, InferredFromJsonArraysAndObjects) {
  Table t = Jsonl(
      "{\"tags\": [\"a\", \"b\"], \"user\": {\"id\": 1, \"name\": \"x\"}, \"m\": [[1, 2], []], \"n\": 5}\n"
      "{\"tags\": [], \"user\": {\"id\": -3}, \"m\": null, \"e\": []}\n"
      "{\"tags\": null, \"user\": null, \"m\": [[null, 5000000000]], \"f\": [1.5, 2]}\n");
  auto schema = [&](const std::string& name) {
    auto col = t.Column(name);
    EXPECT_TRUE(col.ok());
    EXPECT_TRUE(IsNestedJsonColumn(t, *col)) << name;
    auto s = InferJsonSchema(t, *col, name);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? s->ToString() : "";
  };
  EXPECT_EQ(schema("tags"), "list<string>");
  EXPECT_EQ(schema("user"), "struct<id: int64, name: string>");
  EXPECT_EQ(schema("m"), "list<list<int64>>");
  EXPECT_EQ(schema("e"), "list<null>");
  EXPECT_EQ(schema("f"), "list<float64>");
  EXPECT_FALSE(IsNestedJsonColumn(t, *t.Column("n")));
  EXPECT_FALSE(IsNestedJsonColumn(Csv("a\n[1]\n", "h.csv"), 0));  // CSV text is never JSON

  Table bad = Jsonl("{\"x\": [1]}\n{\"x\": [\"a\"]}\n");
  auto conflict = InferJsonSchema(bad, 0, "x");
  EXPECT_EQ(conflict.status().message(),
            "h.jsonl:2: column 'x' at []: a string where earlier rows hold a number; give the "
            "type with --cols x:<type>");
}

TEST(BuildHashInput, NestedJsonIsArrowLayout) {
  Table t = Jsonl(
      "{\"tags\": [\"a\", \"b\"], \"user\": {\"id\": 1, \"name\": \"x\"}}\n"
      "{\"tags\": [], \"user\": {\"id\": -3}}\n"
      "{\"tags\": null, \"user\": null}\n");
  auto tags = BuildHashInput(t, "tags");
  ASSERT_TRUE(tags.ok()) << tags.status();
  EXPECT_EQ(tags->TypeName(), "list<string>");
  EXPECT_EQ(tags->null_count, 1u);
  const client::HashColumn v = tags->View();
  EXPECT_EQ(v.type, ColumnType::kList);
  EXPECT_EQ(std::vector<int32_t>(v.offsets.begin(), v.offsets.end()),
            (std::vector<int32_t>{0, 2, 2, 2}));
  ASSERT_EQ(v.validity.size(), 1u);
  EXPECT_EQ(v.validity[0], 0b011);
  ASSERT_EQ(v.children.size(), 1u);
  EXPECT_EQ(std::string(v.children[0].data.begin(), v.children[0].data.end()), "ab");

  auto user = BuildHashInput(t, "user");
  ASSERT_TRUE(user.ok()) << user.status();
  EXPECT_EQ(user->TypeName(), "struct<id: int64, name: string>");
  const client::HashColumn u = user->View();
  ASSERT_EQ(u.children.size(), 2u);
  EXPECT_EQ(u.children[0].length, 3u);
  EXPECT_EQ(u.children[1].length, 3u);
  EXPECT_EQ(u.children[1].validity[0], 0b001);  // "name" missing in row 1, null in row 2
  EXPECT_EQ(u.validity[0], 0b011);
  EXPECT_TRUE(client::CheckHashColumn(u, "user").ok());

  // A type expression after the first ':' (itself holding ':'), and its errors.
  auto typed = BuildHashInput(t, "user:struct<id: int32, name: large_string>");
  ASSERT_TRUE(typed.ok()) << typed.status();
  EXPECT_EQ(typed->View().children[1].type, ColumnType::kLargeString);
  auto wrong = BuildHashInput(t, "tags:list<int32>");
  EXPECT_EQ(wrong.status().message(), "h.jsonl:1: column 'tags' at [0]: '\"a\"' is not a valid int32");
  auto extra = BuildHashInput(t, "user:struct<id: int64>");
  EXPECT_EQ(extra.status().message(),
            "h.jsonl:1: column 'user': field 'name' is not in struct<id: int64>");
  auto badexpr = BuildHashInput(t, "tags:list<int32");
  EXPECT_EQ(badexpr.status().message(),
            "--cols tags:list<int32: type 'list<int32' at column 11: expected '>'");
}

TEST(HashSchema, ColsSplitOutsideAngleBrackets) {
  EXPECT_EQ(SplitHashColumnSpecs("a,b:map<string, int64>,,c:struct<x: int32, y: list<bool>>"),
            (std::vector<std::string>{"a", "b:map<string, int64>",
                                      "c:struct<x: int32, y: list<bool>>"}));
}

TEST(BuildHashInput, TheNarrowTypesFromText) {
  Table t = Csv("a,b\n-5,1\n7,300\n,2\n", "h.csv");
  auto i8 = BuildHashInput(t, "a:int8");
  ASSERT_TRUE(i8.ok()) << i8.status();
  const client::HashColumn v = i8->View();
  EXPECT_EQ(v.type, ColumnType::kInt8);
  EXPECT_EQ(std::vector<uint8_t>(v.data.begin(), v.data.end()), (std::vector<uint8_t>{0xfb, 7, 0}));
  EXPECT_EQ(i8->null_count, 1u);
  EXPECT_EQ(i8->TypeName(), "int8");
  auto u8 = BuildHashInput(t, "b:uint8");
  EXPECT_EQ(u8.status().message(), "h.csv:3: column 'b': '300' is not a valid uint8");
  EXPECT_TRUE(BuildHashInput(t, "b:uint16").ok());
}

}  // namespace
}  // namespace gpujoin::cli
