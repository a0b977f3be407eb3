// gpujoin/common/column_type.hpp and operation_kinds.hpp: every name parses
// back to its value, unknown words and values are refused or named "unknown",
// and the widths and layout predicates agree with Arrow's layouts.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "gpujoin/common/column_type.hpp"
#include "gpujoin/common/operation_kinds.hpp"

namespace gpujoin {
namespace {

template <typename E, typename NameFn, typename ParseFn>
void ExpectRoundTrip(size_t count, NameFn name, ParseFn parse, std::string_view what) {
  std::set<std::string> seen;
  for (size_t i = 0; i < count; ++i) {
    const E value = static_cast<E>(i);
    const std::string_view n = name(value);
    EXPECT_NE(n, "unknown") << what << " " << i;
    EXPECT_TRUE(seen.insert(std::string(n)).second) << what << " name twice: " << n;
    auto parsed = parse(n);
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, value) << n;
  }
  EXPECT_EQ(name(static_cast<E>(count)), "unknown") << what;
  auto bad = parse("no_such_word");
  ASSERT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument) << what;
  const std::string message(bad.status().message());
  EXPECT_NE(message.find(std::string("unknown ") + std::string(what) + " 'no_such_word'"),
            std::string::npos)
      << message;
  // The message lists the choices, the last after "or".
  EXPECT_NE(message.find(std::string(" or ") + std::string(name(static_cast<E>(count - 1))) + ")"),
            std::string::npos)
      << message;
}

TEST(Vocabulary, EveryNameParsesBackToItsValue) {
  ExpectRoundTrip<ColumnType>(kColumnTypeCount, ColumnTypeName, ParseColumnType, "column type");
  ExpectRoundTrip<KeyType>(3, KeyTypeName, ParseKeyType, "key type");
  ExpectRoundTrip<DuplicatePolicy>(2, DuplicatePolicyName, ParseDuplicatePolicy,
                                   "duplicate policy");
  ExpectRoundTrip<JoinKind>(4, JoinKindName, ParseJoinKind, "join kind");
  ExpectRoundTrip<AggregateOp>(5, AggregateOpName, ParseAggregateOp, "aggregate op");
}

TEST(Vocabulary, NamesAreTheWireAndCliSpellings) {
  EXPECT_EQ(ColumnTypeName(ColumnType::kUint32), "uint32");
  EXPECT_EQ(ColumnTypeName(ColumnType::kFixedSizeBinary), "fixed_size_binary");
  EXPECT_EQ(ColumnTypeName(ColumnType::kNull), "null");
  EXPECT_EQ(KeyTypeName(KeyType::kUint64), "uint64");
  EXPECT_EQ(KeyTypeName(KeyType::kColumns), "columns");
  EXPECT_EQ(DuplicatePolicyName(DuplicatePolicy::kKeepAll), "keep_all");
  EXPECT_EQ(JoinKindName(JoinKind::kLeftOuter), "left_outer");
  EXPECT_EQ(AggregateOpName(AggregateOp::kMean), "mean");
  // Near misses are refused: case, a sloppier spelling, a trailing space.
  EXPECT_FALSE(ParseColumnType("UINT32").ok());
  EXPECT_FALSE(ParseColumnType("utf8").ok());
  EXPECT_FALSE(ParseJoinKind("left").ok());
  EXPECT_FALSE(ParseAggregateOp("avg").ok());
  EXPECT_FALSE(ParseDuplicatePolicy("keep_all ").ok());
}

TEST(Vocabulary, WidthsFollowArrowLayouts) {
  EXPECT_EQ(ColumnWidth(ColumnType::kInt32), 4u);
  EXPECT_EQ(ColumnWidth(ColumnType::kFloat64), 8u);
  EXPECT_EQ(ColumnWidth(ColumnType::kBool), 0u);
  EXPECT_EQ(ColumnWidth(ColumnType::kInt8), 0u);  // not a payload type
  EXPECT_EQ(ValueWidth(ColumnType::kInt8), 1u);
  EXPECT_EQ(ValueWidth(ColumnType::kFloat16), 2u);
  EXPECT_EQ(ValueWidth(ColumnType::kDecimal128), 16u);
  EXPECT_EQ(ValueWidth(ColumnType::kUint64), 8u);
  EXPECT_EQ(ValueWidth(ColumnType::kFixedSizeBinary), 0u);
  EXPECT_EQ(ValueWidth(ColumnType::kString), 0u);
  static_assert(kColumnTypeOf<int64_t> == ColumnType::kInt64);
  static_assert(kColumnTypeOf<float> == ColumnType::kFloat32);
}

TEST(Vocabulary, LayoutPredicates) {
  size_t hash_only = 0, byte_strings = 0, offset_lists = 0, index_types = 0;
  for (size_t i = 0; i < kColumnTypeCount; ++i) {
    const auto t = static_cast<ColumnType>(i);
    EXPECT_TRUE(IsKnownColumnType(t));
    hash_only += IsHashOnly(t);
    byte_strings += IsByteStringType(t);
    offset_lists += IsOffsetListType(t);
    index_types += IsDictionaryIndexType(t);
    if (IsVariableWidth(t)) EXPECT_TRUE(IsByteStringType(t) && !IsHashOnly(t));
  }
  EXPECT_FALSE(IsKnownColumnType(static_cast<ColumnType>(kColumnTypeCount)));
  EXPECT_EQ(hash_only, kColumnTypeCount - 9);
  EXPECT_EQ(byte_strings, 4u);
  EXPECT_EQ(offset_lists, 3u);
  EXPECT_EQ(index_types, 8u);
  EXPECT_FALSE(IsDictionaryIndexType(ColumnType::kFloat32));
  EXPECT_EQ(ChildCount(ColumnType::kStruct), -1);
  EXPECT_EQ(ChildCount(ColumnType::kMap), 2);
  EXPECT_EQ(ChildCount(ColumnType::kFixedSizeList), 1);
  EXPECT_EQ(ChildCount(ColumnType::kDictionary), 1);
  EXPECT_EQ(ChildCount(ColumnType::kLargeString), 0);
}

}  // namespace
}  // namespace gpujoin
