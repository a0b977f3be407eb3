// Arrow bitmaps (bit i in byte i / 8, least significant bit first; 1 = true or
// valid): sizes, reads, writes and bit-range copies, for validity and boolean
// columns on every side of the wire.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <span>

namespace gpujoin {

/// Bytes of a bitmap of `rows` bits.
constexpr uint64_t BitmapBytes(uint64_t rows) { return (rows + 7) / 8; }

/// Bit `i` of a bitmap (which must hold it).
inline bool BitAt(std::span<const uint8_t> bitmap, uint64_t i) {
  return (bitmap[i / 8] >> (i % 8)) & 1u;
}

/// Sets bit `i` of `bitmap` to `value`.
inline void SetBit(uint8_t* bitmap, uint64_t i, bool value) {
  const uint8_t mask = static_cast<uint8_t>(1u << (i % 8));
  if (value) {
    bitmap[i / 8] |= mask;
  } else {
    bitmap[i / 8] &= static_cast<uint8_t>(~mask);
  }
}

/// Copies bits [src_bit, src_bit + n) of `src` to bits [dst_bit, dst_bit + n)
/// of `dst` (both must hold them); the other bits of `dst` are kept.
inline void CopyBits(const uint8_t* src, uint64_t src_bit, uint64_t n, uint8_t* dst,
                     uint64_t dst_bit) {
  auto one = [&] {
    SetBit(dst, dst_bit++, (src[src_bit / 8] >> (src_bit % 8)) & 1u);
    ++src_bit;
    --n;
  };
  while (n > 0 && dst_bit % 8 != 0) one();
  // Whole destination bytes: a memcpy when the source is aligned too, else
  // each byte from two neighbouring source bytes (the second one holds bits of
  // the range whenever the shift is nonzero, so it is inside `src`).
  const uint64_t bytes = n / 8;
  const uint8_t* s = src + src_bit / 8;
  uint8_t* d = dst + dst_bit / 8;
  const unsigned shift = src_bit % 8;
  if (shift == 0) {
    if (bytes > 0) std::memcpy(d, s, bytes);
  } else {
    for (uint64_t i = 0; i < bytes; ++i) {
      d[i] = static_cast<uint8_t>((s[i] >> shift) | (s[i + 1] << (8 - shift)));
    }
  }
  src_bit += 8 * bytes;
  dst_bit += 8 * bytes;
  n -= 8 * bytes;
  while (n > 0) one();
}

/// Number of 1 bits in [begin, begin + n) of `bitmap`.
inline uint64_t CountOnes(const uint8_t* bitmap, uint64_t begin, uint64_t n) {
  uint64_t ones = 0;
  while (n > 0 && begin % 8 != 0) {
    ones += (bitmap[begin / 8] >> (begin % 8)) & 1u;
    ++begin;
    --n;
  }
  for (; n >= 8; n -= 8, begin += 8) ones += std::popcount(bitmap[begin / 8]);
  for (; n > 0; --n, ++begin) ones += (bitmap[begin / 8] >> (begin % 8)) & 1u;
  return ones;
}

}  // namespace gpujoin
