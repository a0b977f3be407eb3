// StringDictionary and EncodeColumn (gpujoin/engine/dictionary.hpp): dense codes
// in first-seen order, values that differ in one byte or only in length kept
// apart, copies and moves that keep finding their values, the limits, and
// dictionaries read back from their bytes and offsets.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "gpujoin/engine/dictionary.hpp"

namespace gpujoin::engine {
namespace {

struct Strings {
  std::vector<std::byte> bytes;
  std::vector<uint64_t> offsets{0};
  std::vector<uint8_t> validity;
  std::vector<std::optional<std::string>> rows;

  explicit Strings(std::vector<std::optional<std::string>> v) : rows(std::move(v)) {
    validity.assign(BitmapBytes(rows.size()), 0);
    for (size_t i = 0; i < rows.size(); ++i) {
      if (rows[i]) {
        for (char c : *rows[i]) bytes.push_back(static_cast<std::byte>(c));
        validity[i / 8] |= uint8_t(1u << (i % 8));
      }
      offsets.push_back(bytes.size());
    }
  }
  ColumnView View() const { return {ColumnType::kString, rows.size(), bytes, offsets, validity}; }
};

TEST(StringDictionaryTest, CodesAreDenseInFirstSeenOrder) {
  StringDictionary d;
  EXPECT_EQ(d.size(), 0u);
  EXPECT_EQ(d.Find("a"), StringDictionary::kAbsent);
  EXPECT_EQ(d.Add("a"), 0u);
  EXPECT_EQ(d.Add(std::string("a\0", 2)), 1u);  // one byte longer
  EXPECT_EQ(d.Add("b"), 2u);
  EXPECT_EQ(d.Add(""), 3u);
  EXPECT_EQ(d.Add("a"), 0u);
  EXPECT_EQ(d.Find("b"), 2u);
  EXPECT_EQ(d.Find(""), 3u);
  EXPECT_EQ(d.Value(1), std::string_view("a\0", 2));
  EXPECT_EQ(d.size(), 4u);
  EXPECT_GT(d.bytes(), 0u);
}

TEST(StringDictionaryTest, CopiesAndMovesFindTheirValues) {
  StringDictionary d;
  for (int i = 0; i < 1000; ++i) d.Add("v" + std::to_string(i));
  StringDictionary copy = d;
  d.Add("only in d");
  EXPECT_EQ(copy.size(), 1000u);
  EXPECT_EQ(copy.Find("v999"), 999u);
  EXPECT_EQ(copy.Find("only in d"), StringDictionary::kAbsent);
  StringDictionary moved = std::move(d);
  EXPECT_EQ(moved.Find("only in d"), 1000u);
  EXPECT_EQ(moved.Find("v17"), 17u);
  copy = moved;
  EXPECT_EQ(copy.Find("only in d"), 1000u);
  EXPECT_EQ(copy.Add("new"), 1001u);
}

TEST(StringDictionaryTest, EncodeColumnKeepsNullsAndStopsAtItsLimits) {
  const Strings s({"x", std::nullopt, "y", "x", "", "xy"});
  StringDictionary d;
  auto codes = EncodeColumn(s.View(), d, 10, 100);
  ASSERT_TRUE(codes.ok()) << codes.status();
  EXPECT_EQ(codes->codes, (std::vector<uint32_t>{0, 0, 1, 0, 2, 3}));
  ASSERT_EQ(codes->validity.size(), 1u);
  EXPECT_EQ(codes->validity[0], 0b111101);
  const ColumnView v = codes->View();
  EXPECT_EQ(v.type, ColumnType::kUint32);
  EXPECT_EQ(v.rows, 6u);

  StringDictionary few;
  auto refused = EncodeColumn(s.View(), few, 3, 100);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(refused.status().message().find("3 distinct values"), std::string::npos);
  StringDictionary small;
  auto too_long = EncodeColumn(s.View(), small, 10, 2);
  ASSERT_FALSE(too_long.ok());
  EXPECT_NE(too_long.status().message().find("2 bytes"), std::string::npos);
}

TEST(StringDictionaryTest, FromValuesChecksItsInput) {
  StringDictionary d;
  d.Add("one");
  d.Add("two");
  auto back = StringDictionary::FromValues(d.value_bytes(), d.offsets());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->Find("two"), 1u);
  EXPECT_FALSE(StringDictionary::FromValues("onetwo", {0, 3, 5}).ok());      // short of the bytes
  EXPECT_FALSE(StringDictionary::FromValues("onetwo", {0, 4, 3, 6}).ok());   // decreasing
  EXPECT_FALSE(StringDictionary::FromValues("abab", {0, 2, 4}).ok());        // a repeat
  EXPECT_FALSE(StringDictionary::FromValues("", {}).ok());
  auto empty = StringDictionary::FromValues("", {0});
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->size(), 0u);
}

}  // namespace
}  // namespace gpujoin::engine
