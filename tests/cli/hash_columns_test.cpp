// Encoding of table columns for the Hash RPC (gpujoin hash --cols).
#include "hash_columns.hpp"

#include <gtest/gtest.h>

#include <cstring>

namespace gpujoin::cli {
namespace {

using client::ColumnType;

Table Csv(std::string_view text) {
  auto t = ParseDelimited(text, ',', "h.csv");
  EXPECT_TRUE(t.ok()) << t.status();
  return *std::move(t);
}

TEST(InferHashType, NarrowestTypeThatParsesEveryCell) {
  Table t = Csv("u,i,big,f,s,n\n1,-1,18446744073709551615,1.5,x,\n2,3,1,2,3,\n");
  EXPECT_EQ(InferHashType(t, 0), ColumnType::kUint32);
  EXPECT_EQ(InferHashType(t, 1), ColumnType::kInt64);
  EXPECT_EQ(InferHashType(t, 2), ColumnType::kUint64);
  EXPECT_EQ(InferHashType(t, 3), ColumnType::kFloat64);
  EXPECT_EQ(InferHashType(t, 4), ColumnType::kBinary);
  EXPECT_EQ(InferHashType(t, 5), ColumnType::kUint32);  // all null
}

TEST(BuildHashInput, FixedWidthWithNulls) {
  Table t = Csv("a,b\n5,x\n,y\n7,z\n");
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
  Table t = Csv("s\nab\n\"\"\n\"c\"\n");
  // Single-column CSV cannot hold an unquoted null; add one through a second column.
  Table t2 = Csv("s,k\nab,1\n\"\",2\n,3\nc,4\n");
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
  Table t = Csv("a,b\n-5,1\n7,x\n");
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

}  // namespace
}  // namespace gpujoin::cli
