// Typed column extraction and group encoding of the gpujoin CLI.
#include "columns/columns.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "parse_csv.hpp"

namespace gpujoin::cli {
namespace {

using testing::Csv;

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
  EXPECT_EQ(*ParseF32Text("-1e99"), -std::numeric_limits<float>::infinity());
  // Too small for float32: rounds to zero (keeping the sign) or a subnormal, never inf.
  EXPECT_EQ(*ParseF32Text("1e-50"), 0.0f);
  EXPECT_TRUE(std::signbit(*ParseF32Text("-1e-50")));
  EXPECT_EQ(*ParseF32Text("-1e-50"), 0.0f);
  EXPECT_GT(*ParseF32Text("1e-40"), 0.0f);  // subnormal
  EXPECT_LT(*ParseF32Text("1e-40"), std::numeric_limits<float>::min());
  EXPECT_FALSE(ParseF32Text("abc"));
  EXPECT_FALSE(ParseF32Text("1.5ms"));
}

TEST(KeyColumn, ParsesAndNamesTheBadCell) {
  Table t = Csv("id,k\na,1\nb,0x10\nc,x7\n");
  auto bad = KeyColumn(t, "k");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "t.csv:4: column 'k' (2): 'x7' is not an integer key (for a string key give --key-type str)");
  Table good = Csv("k\n1\n0x10\n");
  EXPECT_EQ(*KeyColumn(good, "k"), (std::vector<uint32_t>{1, 16}));
  Table null_key = Csv("a,k\n1,\n");
  EXPECT_EQ(KeyColumn(null_key, "k").status().message(),
            "t.csv:2: column 'k' (2): an empty (null) cell is not a uint32 key");
  EXPECT_EQ(KeyColumn(good, "zz").status().message(), "t.csv: no column 'zz' (columns: k)");
}

TEST(ParseKeyText, EveryKeyTypeWithItsRangeAndHexBits) {
  EXPECT_EQ(ParseKeyText<uint64_t>("18446744073709551615"), ~uint64_t{0});
  EXPECT_FALSE(ParseKeyText<uint64_t>("18446744073709551616"));
  EXPECT_FALSE(ParseKeyText<uint64_t>("-1"));
  EXPECT_EQ(ParseKeyText<uint64_t>(" 0x100000005 "), 0x100000005ull);
  EXPECT_EQ(ParseKeyText<int64_t>("-9223372036854775808"), INT64_MIN);
  EXPECT_EQ(ParseKeyText<int64_t>("9223372036854775807"), INT64_MAX);
  EXPECT_FALSE(ParseKeyText<int64_t>("9223372036854775808"));
  EXPECT_EQ(ParseKeyText<int64_t>("0xffffffffffffffff"), -1);  // hex spells the bits
  EXPECT_FALSE(ParseKeyText<int64_t>("0x-1"));
  EXPECT_FALSE(ParseKeyText<int64_t>("--1"));
  EXPECT_FALSE(ParseKeyText<uint32_t>("4294967296"));
}

TEST(InferKeyKind, NegativeIsInt64AboveUint32IsUint64ElseUint32) {
  EXPECT_EQ(*InferKeyKind(Csv("k\n1\n4294967295\n0xff\n"), "k"), KeyKind::kU32);
  EXPECT_EQ(*InferKeyKind(Csv("k\n1\n4294967296\n"), "k"), KeyKind::kU64);
  EXPECT_EQ(*InferKeyKind(Csv("k\n18446744073709551615\n"), "k"), KeyKind::kU64);
  EXPECT_EQ(*InferKeyKind(Csv("k\n5000000000\n-1\n"), "k"), KeyKind::kI64);
  EXPECT_EQ(InferKeyKind(Csv("k\n1\nabc\n"), "k").status().message(),
            "t.csv:3: column 'k' (1): 'abc' is not an integer key (for a string key give --key-type str)");
  EXPECT_EQ(InferKeyKind(Csv("a,k\n1,\n"), "k").status().message(),
            "t.csv:2: column 'k' (2): an empty (null) cell is not an integer key");
  EXPECT_EQ(InferKeyKind(Csv("k\n-3\n1\n9223372036854775808\n"), "k").status().message(),
            "t.csv:4: column 'k' (1): '9223372036854775808' fits no key type: it is above "
            "9223372036854775807 (uint64 only) but line 2 holds '-3', a negative key");
  EXPECT_EQ(InferKeyKind(Csv("k\n9223372036854775808\n-3\n"), "k").status().message(),
            "t.csv:3: column 'k' (1): '-3' fits no key type: it is negative (int64) but line 2 "
            "holds '9223372036854775808', above 9223372036854775807");
  EXPECT_NE(InferKeyKind(Csv("k\n99999999999999999999\n"), "k")
                .status()
                .message()
                .find("fits no key type (it needs more than 64 bits)"),
            std::string::npos);
  // A binary file says what it holds, whatever its values.
  const uint64_t one = 1;
  auto u64 = ParseBinaryColumn<uint64_t>(std::string_view(reinterpret_cast<const char*>(&one), 8),
                                         "k.u64");
  EXPECT_EQ(*InferKeyKind(*u64, "key"), KeyKind::kU64);
}

// The tracker skips plain decimals of up to 18 digits once a key above
// 4294967295 was seen (and up to 9 digits before): the kinds and the errors
// stay those of a full check, at each digit count around the cut.
TEST(KeyKindTracker, ShortDecimalsChangeNothingAcrossBatches) {
  KeyKindTracker t;
  EXPECT_EQ(*t.Observe(Csv("k\n999999999\n4294967295\n"), "k"), KeyKind::kU32);
  EXPECT_EQ(*t.Observe(Csv("k\n4294967296\n"), "k"), KeyKind::kU64);
  EXPECT_EQ(*t.Observe(Csv("k\n999999999999999999\n000000000000000001\n"), "k"), KeyKind::kU64);
  EXPECT_EQ(*t.Observe(Csv("k\n9223372036854775807\n"), "k"), KeyKind::kU64);
  EXPECT_EQ(*t.Observe(Csv("k\n-1\n"), "k"), KeyKind::kI64);
  EXPECT_EQ(t.Observe(Csv("k\n123456789012345678\n9223372036854775808\n"), "k").status().message(),
            "t.csv:3: column 'k' (1): '9223372036854775808' fits no key type: it is above "
            "9223372036854775807 (uint64 only) but line 2 holds '-1', a negative key");
  // Ten digits alone, below 2^32 or not, decide between uint32 and uint64.
  KeyKindTracker small;
  EXPECT_EQ(*small.Observe(Csv("k\n4294967295\n0000000001\n"), "k"), KeyKind::kU32);
  EXPECT_EQ(*small.Observe(Csv("k\n1\n0004294967296\n"), "k"), KeyKind::kU64);
  KeyKindTracker junk;
  EXPECT_EQ(junk.Observe(Csv("k\n4294967296\n12a\n"), "k").status().message(),
            "t.csv:3: column 'k' (1): '12a' is not an integer key (for a string key give --key-type str)");
}
// PlainKeys is Observe and KeyColumn in one pass for batches of plain decimal
// keys: on random batches it gives their keys and leaves the tracker where
// Observe leaves it, and it declines every batch that is not plain.
TEST(KeyKindTracker, PlainKeysEqualObserveThenKeyColumn) {
  std::mt19937_64 rng(24);
  const std::vector<std::string> odd = {
      "-5", "0x1f", " 7", "18446744073709551615", "1234567890123456789", "\"\"", "abc", "+3"};
  for (int trial = 0; trial < 300; ++trial) {
    const KeyKind kind =
        std::vector<KeyKind>{KeyKind::kU32, KeyKind::kU64, KeyKind::kI64}[trial % 3];
    std::string csv = "k\n";
    bool plain = true;
    const int rows = 1 + static_cast<int>(rng() % 20);
    for (int r = 0; r < rows; ++r) {
      const uint64_t pick = rng() % 100;
      if (pick < 2) {
        csv += odd[rng() % odd.size()];
        plain = false;
      } else {
        const int digits = 1 + static_cast<int>(rng() % (pick < 50 ? 9 : 18));
        for (int d = 0; d < digits; ++d) csv += static_cast<char>('0' + rng() % 10);
      }
      csv += "\n";
    }
    const Table t = Csv(csv);
    KeyKindTracker fast, slow;
    std::optional<KeyVector> got = fast.PlainKeys(t, "k", kind);
    auto seen = slow.Observe(t, "k");
    auto want = KeyColumn(t, "k", kind);
    if (!plain || !want.ok()) {
      EXPECT_FALSE(got.has_value()) << csv;
      continue;
    }
    ASSERT_TRUE(got.has_value()) << csv;
    ASSERT_TRUE(seen.ok()) << csv;
    EXPECT_EQ(got->kind, want->kind);
    EXPECT_EQ(got->u32, want->u32) << csv;
    EXPECT_EQ(got->u64, want->u64) << csv;
    EXPECT_EQ(fast.kind(), slow.kind()) << csv;
  }
  KeyKindTracker t;
  EXPECT_FALSE(t.PlainKeys(Csv("k\n1\n"), "other", KeyKind::kU64).has_value());
  EXPECT_FALSE(t.PlainKeys(Csv("k\n1\n"), "k", KeyKind::kAuto).has_value());
}

TEST(KeyColumn, ReadsEachKindAndNamesWhyACellDoesNotFit) {
  Table t = Csv("k\n-1\n0x10\n9223372036854775807\n");
  auto i = KeyColumn(t, "k", KeyKind::kI64);
  ASSERT_TRUE(i.ok()) << i.status();
  EXPECT_EQ(i->kind, KeyKind::kI64);
  EXPECT_EQ(i->u64, (std::vector<uint64_t>{~uint64_t{0}, 16, 0x7fffffffffffffffull}));
  EXPECT_EQ(i->keys().type(), client::KeyType::kUint64);
  auto a = KeyColumn(t, "k", KeyKind::kAuto);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->kind, KeyKind::kI64);
  EXPECT_EQ(KeyColumn(t, "k", KeyKind::kU64).status().message(),
            "t.csv:2: column 'k' (1): '-1' is not a uint64 key (it is negative)");
  EXPECT_EQ(KeyColumn(Csv("k\n5000000000\n"), "k", KeyKind::kU32).status().message(),
            "t.csv:2: column 'k' (1): '5000000000' is not a uint32 key (it is above 4294967295)");
  EXPECT_EQ(KeyColumn(Csv("k\n18446744073709551615\n"), "k", KeyKind::kI64).status().message(),
            "t.csv:2: column 'k' (1): '18446744073709551615' is not an int64 key (it is above "
            "9223372036854775807)");
  auto u = KeyColumn(Csv("k\n7\n"), "k", KeyKind::kU32);
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->u32, (std::vector<uint32_t>{7}));
  EXPECT_EQ(u->keys().type(), client::KeyType::kUint32);
  EXPECT_EQ(U32ValueColumn(Csv("v\nx\n"), "v").status().message(),
            "t.csv:2: column 'v' (1): 'x' is not a uint32 value");
}

TEST(KeyKinds, WiderOfTwoAndTheKindForAResidentIndex) {
  EXPECT_EQ(WiderKeyKind(KeyKind::kU32, KeyKind::kU64), KeyKind::kU64);
  EXPECT_EQ(WiderKeyKind(KeyKind::kU64, KeyKind::kU32), KeyKind::kU64);
  EXPECT_EQ(WiderKeyKind(KeyKind::kU32, KeyKind::kI64), KeyKind::kI64);
  EXPECT_EQ(WiderKeyKind(KeyKind::kU64, KeyKind::kI64), KeyKind::kI64);
  EXPECT_EQ(WiderKeyKind(KeyKind::kU32, KeyKind::kU32), KeyKind::kU32);
  using client::KeyType;
  EXPECT_EQ(*KindForIndex(KeyKind::kAuto, KeyKind::kU32, KeyType::kUint64, "x"), KeyKind::kU64);
  EXPECT_EQ(*KindForIndex(KeyKind::kAuto, KeyKind::kI64, KeyType::kUint64, "x"), KeyKind::kI64);
  EXPECT_EQ(*KindForIndex(KeyKind::kAuto, KeyKind::kU64, KeyType::kUint32, "x"), KeyKind::kU32);
  EXPECT_EQ(*KindForIndex(KeyKind::kI64, KeyKind::kI64, KeyType::kUint64, "x"), KeyKind::kI64);
  EXPECT_EQ(KindForIndex(KeyKind::kU64, KeyKind::kU64, KeyType::kUint32, "x").status().message(),
            "--key-type u64: index 'x' has uint32 keys; use --key-type u32 (or auto)");
  EXPECT_EQ(*ParseKeyKind("i64"), KeyKind::kI64);
  EXPECT_FALSE(ParseKeyKind("int64").ok());
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
