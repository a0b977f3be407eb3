// gpujoin/common/bitmap.hpp against bit-by-bit references, at every alignment.
#include "gpujoin/common/bitmap.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

namespace gpujoin {
namespace {

int Bit(const std::vector<uint8_t>& v, uint64_t i) { return (v[i / 8] >> (i % 8)) & 1; }

TEST(Bitmap, CopyBitsMatchesABitByBitCopy) {
  std::mt19937_64 rng(8);
  for (int round = 0; round < 4000; ++round) {
    std::vector<uint8_t> src(1 + rng() % 12), dst(1 + rng() % 12);
    for (auto& b : src) b = static_cast<uint8_t>(rng());
    for (auto& b : dst) b = static_cast<uint8_t>(rng());
    const uint64_t src_bit = rng() % (src.size() * 8);
    const uint64_t dst_bit = rng() % (dst.size() * 8);
    const uint64_t bits =
        rng() % (std::min(src.size() * 8 - src_bit, dst.size() * 8 - dst_bit) + 1);
    std::vector<uint8_t> expected = dst;
    for (uint64_t i = 0; i < bits; ++i) {
      const uint64_t at = dst_bit + i;
      expected[at / 8] = static_cast<uint8_t>((expected[at / 8] & ~(1u << (at % 8))) |
                                              (Bit(src, src_bit + i) << (at % 8)));
    }
    CopyBits(src.data(), src_bit, bits, dst.data(), dst_bit);
    ASSERT_EQ(dst, expected) << src_bit << " " << dst_bit << " " << bits;
  }
}

TEST(Bitmap, CountOnesMatchesABitByBitCount) {
  std::mt19937_64 rng(9);
  for (int round = 0; round < 2000; ++round) {
    std::vector<uint8_t> v(1 + rng() % 12);
    for (auto& b : v) b = static_cast<uint8_t>(rng());
    const uint64_t begin = rng() % (v.size() * 8);
    const uint64_t n = rng() % (v.size() * 8 - begin + 1);
    uint64_t want = 0;
    for (uint64_t i = 0; i < n; ++i) want += Bit(v, begin + i);
    ASSERT_EQ(CountOnes(v.data(), begin, n), want) << begin << " " << n;
  }
}

TEST(Bitmap, SetBitAndBitAtAgreeOnLsbFirstOrder) {
  std::vector<uint8_t> v(3, 0);
  SetBit(v.data(), 0, true);
  SetBit(v.data(), 9, true);
  SetBit(v.data(), 23, true);
  EXPECT_EQ(v, (std::vector<uint8_t>{0x01, 0x02, 0x80}));
  EXPECT_TRUE(BitAt(v, 9));
  EXPECT_FALSE(BitAt(v, 8));
  SetBit(v.data(), 9, false);
  EXPECT_EQ(v[1], 0);
  EXPECT_EQ(BitmapBytes(0), 0u);
  EXPECT_EQ(BitmapBytes(1), 1u);
  EXPECT_EQ(BitmapBytes(8), 1u);
  EXPECT_EQ(BitmapBytes(9), 2u);
}

}  // namespace
}  // namespace gpujoin
