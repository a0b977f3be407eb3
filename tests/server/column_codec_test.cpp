#include "wire/column_codec.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace gpujoin::server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ColumnCodec, PackedBytesDecodeLittleEndian) {
  v1::U32Column c;
  c.set_packed(std::string("\x01\x00\x00\x00\xff\xff\xff\xff\x02\x01\x00\x00", 12));
  auto d = DecodeU32Column(true, c, "keys", Presence::kRequired);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_TRUE(d->present());
  EXPECT_THAT(std::vector<uint32_t>(d->span().begin(), d->span().end()),
              ElementsAre(1u, 0xffffffffu, 0x102u));
}

TEST(ColumnCodec, TypedValuesDecode) {
  v1::U32Column c;
  c.mutable_values()->add_v(7);
  c.mutable_values()->add_v(9);
  auto d = DecodeU32Column(true, c, "keys", Presence::kRequired);
  ASSERT_TRUE(d.ok());
  EXPECT_THAT(std::vector<uint32_t>(d->span().begin(), d->span().end()), ElementsAre(7u, 9u));
}

TEST(ColumnCodec, EmptyTypedListIsZeroRows) {
  v1::U32Column c;
  c.mutable_values();
  auto d = DecodeU32Column(true, c, "keys", Presence::kRequired);
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->present());
  EXPECT_EQ(d->size(), 0u);
}

TEST(ColumnCodec, BothSetIsRejectedNamingTheField) {
  v1::U32Column c;
  c.set_packed(std::string(8, '\0'));
  c.mutable_values()->add_v(1);
  auto d = DecodeU32Column(true, c, "batches[1].keys", Presence::kRequired);
  ASSERT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(d.status().message(), HasSubstr("batches[1].keys.packed (8 bytes)"));
  EXPECT_THAT(d.status().message(), HasSubstr("batches[1].keys.values (1 values)"));
}

TEST(ColumnCodec, NeitherSetRequiredIsRejected) {
  v1::U32Column c;
  auto absent = DecodeU32Column(false, c, "keys", Presence::kRequired);
  EXPECT_EQ(absent.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(absent.status().message(), HasSubstr("neither keys.packed nor keys.values"));
  auto empty = DecodeU32Column(true, c, "keys", Presence::kRequired);
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ColumnCodec, NeitherSetOptionalIsAbsent) {
  v1::U32Column c;
  auto d = DecodeU32Column(false, c, "mask", Presence::kOptional);
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->present());
  EXPECT_EQ(d->size(), 0u);
}

TEST(ColumnCodec, PackedLengthNotMultipleOfFourIsRejected) {
  v1::F32Column c;
  c.set_packed(std::string(10, '\0'));
  auto d = DecodeF32Column(true, c, "values", Presence::kRequired);
  ASSERT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(d.status().message(),
              HasSubstr("values.packed: byte length 10 is not a multiple of 4"));
}

TEST(ColumnCodec, UnalignedBytesAreCopied) {
  // Bytes starting one byte into an aligned buffer: the decoder must copy them.
  alignas(8) char backing[1 + 8] = {};
  const uint32_t v[2] = {5, 6};
  std::memcpy(backing + 1, v, 8);
  const std::string_view unaligned(backing + 1, 8);
  auto d = DecodePackedBytes<uint32_t>(unaligned, "x");
  ASSERT_TRUE(d.ok());
  EXPECT_NE(reinterpret_cast<const char*>(d->span().data()), backing + 1);  // a copy
  EXPECT_THAT(std::vector<uint32_t>(d->span().begin(), d->span().end()), ElementsAre(5u, 6u));
  // Aligned bytes are borrowed, not copied.
  const std::string_view aligned(backing, 8);
  auto b = DecodePackedBytes<uint32_t>(aligned, "x");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(reinterpret_cast<const char*>(b->span().data()), backing);
}

TEST(ColumnCodec, DecodedColumnSurvivesMove) {
  auto owned = DecodedColumn<uint32_t>::Own({1, 2, 3});
  DecodedColumn<uint32_t> moved = std::move(owned);
  EXPECT_THAT(std::vector<uint32_t>(moved.span().begin(), moved.span().end()),
              ElementsAre(1u, 2u, 3u));
}

TEST(ColumnCodec, PackedOutputWritesAndTruncates) {
  std::string out;
  PackedOutput<uint32_t> o(&out, 4);
  auto s = o.span();
  ASSERT_EQ(s.size(), 4u);
  for (uint32_t i = 0; i < 4; ++i) s[i] = 10 + i;
  o.Finish(3);
  EXPECT_THAT(UnpackColumn<uint32_t>(out), ElementsAre(10u, 11u, 12u));
}

TEST(ColumnCodec, PackColumnRoundTrips) {
  const std::vector<float> v = {1.5f, -0.0f, 3.25f};
  EXPECT_EQ(UnpackColumn<float>(PackColumn<float>(v)), v);
}

// SliceBits against a bit-by-bit copy, at every alignment (CopyBits itself:
// tests/common/bitmap_test.cpp).
TEST(ColumnCodec, SliceBitsMatchesABitByBitCopy) {
  std::mt19937_64 rng(8);
  auto bit = [](const std::vector<uint8_t>& v, uint64_t i) { return (v[i / 8] >> (i % 8)) & 1; };
  for (int round = 0; round < 2000; ++round) {
    std::vector<uint8_t> src(1 + rng() % 12);
    for (auto& b : src) b = static_cast<uint8_t>(rng());
    const uint64_t src_bit = rng() % (src.size() * 8);
    const uint64_t bits = rng() % (src.size() * 8 - src_bit + 1);
    const std::string slice =
        SliceBits(std::string_view(reinterpret_cast<const char*>(src.data()), src.size()), src_bit,
                  bits);
    ASSERT_EQ(slice.size(), engine::BitmapBytes(bits));
    for (uint64_t i = 0; i < slice.size() * 8; ++i) {
      const int got = (static_cast<uint8_t>(slice[i / 8]) >> (i % 8)) & 1;
      ASSERT_EQ(got, i < bits ? bit(src, src_bit + i) : 0) << i;
    }
  }
  const uint8_t bitmap[] = {0b10110101, 0b11111110};
  EXPECT_EQ(CountZeroBits(bitmap, 0), 0u);
  EXPECT_EQ(CountZeroBits(bitmap, 8), 3u);
  EXPECT_EQ(CountZeroBits(bitmap, 9), 4u);
  EXPECT_EQ(CountZeroBits(bitmap, 16), 4u);
}

TEST(ColumnCodec, FindInvalidUtf8FollowsRfc3629) {
  constexpr size_t kValid = std::string_view::npos;
  EXPECT_EQ(FindInvalidUtf8(""), kValid);
  EXPECT_EQ(FindInvalidUtf8("plain ASCII text, longer than eight bytes"), kValid);
  EXPECT_EQ(FindInvalidUtf8("\xc3\xa4\xe2\x82\xac\xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf"), kValid);
  EXPECT_EQ(FindInvalidUtf8("\xed\x9f\xbf\xee\x80\x80"), kValid);  // around the surrogates
  EXPECT_EQ(FindInvalidUtf8("abc\x80"), 3u);                       // a lone continuation
  EXPECT_EQ(FindInvalidUtf8("abcdefghij\xc3"), 10u);               // cut short
  EXPECT_EQ(FindInvalidUtf8("\xc3\x28"), 0u);                      // bad continuation
  EXPECT_EQ(FindInvalidUtf8("x\xc1\xbf"), 1u);                     // overlong 2 bytes
  EXPECT_EQ(FindInvalidUtf8("\xe0\x9f\xbf"), 0u);                  // overlong 3 bytes
  EXPECT_EQ(FindInvalidUtf8("\xf0\x8f\xbf\xbf"), 0u);              // overlong 4 bytes
  EXPECT_EQ(FindInvalidUtf8("\xed\xa0\x80"), 0u);                  // a surrogate
  EXPECT_EQ(FindInvalidUtf8("\xf4\x90\x80\x80"), 0u);              // above U+10FFFF
  EXPECT_EQ(FindInvalidUtf8("\xf5\x80\x80\x80"), 0u);
  EXPECT_EQ(FindInvalidUtf8("\xe2\x82\x28"), 0u);
  EXPECT_EQ(FindInvalidUtf8(std::string("a\0b", 3)), kValid);  // NUL is a character
}

TEST(ColumnCodec, ColumnTypesMapOntoTheWireEnum) {
  for (int t = v1::COLUMN_TYPE_UINT32; t <= v1::COLUMN_TYPE_STRING; ++t) {
    auto engine_type = FromWireColumnType(t, "type");
    ASSERT_TRUE(engine_type.ok()) << t;
    EXPECT_EQ(static_cast<int>(*engine_type), t - 1);
    EXPECT_EQ(ToWireColumnType(*engine_type), t);
  }
  EXPECT_EQ(ToWireColumnType(engine::ColumnType::kString), v1::COLUMN_TYPE_STRING);
  EXPECT_EQ(ToWireColumnType(engine::ColumnType::kBool), v1::COLUMN_TYPE_BOOL);
  auto bad = FromWireColumnType(0, "spec.payload[2].type");
  EXPECT_THAT(bad.status().message(),
              HasSubstr("spec.payload[2].type: COLUMN_TYPE_UNSPECIFIED is not a column type"));
  EXPECT_THAT(FromWireColumnType(26, "t").status().message(), HasSubstr("t: 26 is not"));
  // The types Hash alone takes are refused by name for payload columns.
  for (int t = v1::COLUMN_TYPE_INT8; t <= v1::COLUMN_TYPE_NULL; ++t) {
    EXPECT_THAT(FromWireColumnType(t, "t").status().message(),
                HasSubstr(absl::StrCat("t: ", v1::ColumnType_Name(static_cast<v1::ColumnType>(t)),
                                       " is a Hash-only type, not a payload column type")));
  }
}

}  // namespace
}  // namespace gpujoin::server
