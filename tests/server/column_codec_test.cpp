#include "gpujoin/server/column_codec.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

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
  EXPECT_THAT(d.status().message(), HasSubstr("values.packed: byte length 10 is not a multiple of 4"));
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

}  // namespace
}  // namespace gpujoin::server
