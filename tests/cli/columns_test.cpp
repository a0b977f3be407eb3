// Typed column extraction and group encoding of the gpujoin CLI.
#include "columns.hpp"

#include <gtest/gtest.h>

#include <cmath>

namespace gpujoin::cli {
namespace {

Table Csv(std::string_view text) {
  auto t = ParseDelimited(text, ',', "t.csv");
  EXPECT_TRUE(t.ok()) << t.status();
  return *std::move(t);
}

TEST(ParseU32Text, AcceptsDecimalHexAndSpacesRejectsTheRest) {
  EXPECT_EQ(ParseU32Text("0"), 0u);
  EXPECT_EQ(ParseU32Text(" 4294967295 "), 4294967295u);
  EXPECT_EQ(ParseU32Text("0xDEADbeef"), 0xdeadbeefu);
  EXPECT_FALSE(ParseU32Text("4294967296"));
  EXPECT_FALSE(ParseU32Text("-1"));
  EXPECT_FALSE(ParseU32Text("12a"));
  EXPECT_FALSE(ParseU32Text(""));
  EXPECT_FALSE(ParseU32Text("1.0"));
  EXPECT_FALSE(ParseU32Text("0x"));
}

TEST(ParseF32Text, NumbersSpecialValuesAndJunk) {
  EXPECT_EQ(*ParseF32Text("1.5"), 1.5f);
  EXPECT_EQ(*ParseF32Text("+2e3"), 2000.f);
  EXPECT_TRUE(std::isnan(*ParseF32Text("nan")));
  EXPECT_TRUE(std::isinf(*ParseF32Text("1e99")));
  EXPECT_FALSE(ParseF32Text("abc"));
  EXPECT_FALSE(ParseF32Text("1.5ms"));
}

TEST(KeyColumn, ParsesAndNamesTheBadCell) {
  Table t = Csv("id,k\na,1\nb,0x10\nc,x7\n");
  auto bad = KeyColumn(t, "k");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "t.csv:4: column 'k' (2): 'x7' is not a uint32 key");
  Table good = Csv("k\n1\n0x10\n");
  EXPECT_EQ(*KeyColumn(good, "k"), (std::vector<uint32_t>{1, 16}));
  Table null_key = Csv("a,k\n1,\n");
  EXPECT_EQ(KeyColumn(null_key, "k").status().message(),
            "t.csv:2: column 'k' (2): an empty (null) cell is not a uint32 key");
  EXPECT_EQ(KeyColumn(good, "zz").status().message(), "t.csv: no column 'zz' (columns: k)");
}

TEST(ValueColumn, NullIsNaNJunkIsAnError) {
  Table t = Csv("v\n1.25\n\n-3\n");
  auto v = ValueColumn(t, "v");
  ASSERT_TRUE(v.ok());
  // The blank line is skipped by the reader, so there are two rows.
  ASSERT_EQ(v->size(), 2u);
  Table with_null = Csv("k,v\n1,\n2,2.5\n");
  auto w = ValueColumn(with_null, "v");
  ASSERT_TRUE(w.ok());
  EXPECT_TRUE(std::isnan((*w)[0]));
  EXPECT_EQ((*w)[1], 2.5f);
  Table junk = Csv("k,v\n1,fast\n");
  EXPECT_EQ(ValueColumn(junk, "v").status().message(),
            "t.csv:2: column 'v' (2): 'fast' is not a number");
}

TEST(MaskColumn, NumbersBooleansAndNull) {
  Table t = Csv("m\n0\n7\ntrue\nfalse\n\"\"\n");
  auto m = MaskColumn(t, "m");
  EXPECT_FALSE(m.ok());  // "" (empty string) is neither a number nor a boolean
  Table ok = Csv("k,m\n1,0\n2,7\n3,true\n4,false\n5,\n");
  EXPECT_EQ(*MaskColumn(ok, "m"), (std::vector<uint32_t>{0, 1, 1, 0, 0}));
}

TEST(EncodeGroups, SmallUint32LabelsAreUsedDirectly) {
  Table t = Csv("g\n3\n1\n3\n");
  auto g = EncodeGroups(t, "g");
  ASSERT_TRUE(g.ok());
  EXPECT_FALSE(g->dictionary);
  EXPECT_EQ(g->groups, 4u);
  EXPECT_EQ(g->codes, (std::vector<uint32_t>{3, 1, 3}));
  EXPECT_EQ(g->order, (std::vector<uint32_t>{1, 3}));
  EXPECT_EQ(g->labels[3], "3");
}

TEST(EncodeGroups, StringsAreDictionaryEncodedInSortedOrder) {
  Table t = Csv("g\nwind\nhumidity\nwind\n\ntemp\n");
  auto g = EncodeGroups(t, "g");
  ASSERT_TRUE(g.ok());
  EXPECT_TRUE(g->dictionary);
  EXPECT_EQ(g->labels, (std::vector<std::string>{"humidity", "temp", "wind"}));
  EXPECT_EQ(g->codes, (std::vector<uint32_t>{2, 0, 2, 1}));
  EXPECT_EQ(g->groups, 3u);
}

TEST(EncodeGroups, SparseIdsSortNumericallyAndNullsAreAbsent) {
  Table t = Csv("id,g\n1,3000000000\n2,\n3,70000\n4,900000\n");
  auto g = EncodeGroups(t, "g", /*max_direct=*/65536);
  ASSERT_TRUE(g.ok());
  EXPECT_TRUE(g->dictionary);
  EXPECT_EQ(g->labels, (std::vector<std::string>{"70000", "900000", "3000000000"}));
  EXPECT_EQ(g->present, (std::vector<uint32_t>{1, 0, 1, 1}));
  EXPECT_EQ(g->codes[0], 2u);
  EXPECT_EQ(g->codes[2], 0u);
}

}  // namespace
}  // namespace gpujoin::cli
