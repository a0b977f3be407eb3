// Internal: xxHash (XXH32 and XXH64, seed 0 or any) of a value's bytes as
// inline host+device functions, the byte-level half of the row hash
// (row_hash.hpp), with the unaligned loads it reads through.
#pragma once

#include <cstdint>
#include <cstring>

#include "gpujoin/common/xxhash64.hpp"  // also defines GPUJOIN_HOST_DEVICE

namespace gpujoin::engine::detail {

// ---------------------------------------------------------------------------
// Loads. Host: memcpy (any alignment, compiles to one load on x86/arm64).
// Device: byte strings have no alignment, so they are assembled from bytes;
// fixed-width columns live in their own cudaMalloc'd buffer starting at row 0,
// so their loads are naturally aligned.
// ---------------------------------------------------------------------------

/// Little-endian uint32 at `p`, any alignment. On the device it is funnelled
/// from the aligned 4-byte words that hold its bytes (one load when `p` is
/// aligned, two otherwise), so device buffers read this way must be readable up
/// to the end of the aligned word holding their last byte (the uploads round
/// their sizes up to 8 bytes; cudaMalloc'd buffers start 256-byte aligned).
GPUJOIN_HOST_DEVICE uint32_t LoadUnaligned32(const uint8_t* p) {
#if defined(__CUDA_ARCH__)
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  const uint32_t* w = reinterpret_cast<const uint32_t*>(a & ~uintptr_t{3});
  const uint32_t shift = static_cast<uint32_t>(a & 3u) * 8u;
  if (shift == 0) return w[0];
  return __funnelshift_r(w[0], w[1], shift);
#else
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
#endif
}

/// Little-endian uint64 at `p`, any alignment (on the device from the aligned
/// 8-byte words that hold its bytes, as LoadUnaligned32).
GPUJOIN_HOST_DEVICE uint64_t LoadUnaligned64(const uint8_t* p) {
#if defined(__CUDA_ARCH__)
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  const uint64_t* w = reinterpret_cast<const uint64_t*>(a & ~uintptr_t{7});
  const uint32_t shift = static_cast<uint32_t>(a & 7u) * 8u;
  if (shift == 0) return w[0];
  return (w[0] >> shift) | (w[1] << (64u - shift));
#else
  uint64_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
#endif
}

/// Little-endian uint16 at `p`, any alignment.
GPUJOIN_HOST_DEVICE uint32_t LoadUnaligned16(const uint8_t* p) {
  return uint32_t{p[0]} | (uint32_t{p[1]} << 8);
}

/// uint32 at `p`; on the device `p` must be 4-byte aligned.
GPUJOIN_HOST_DEVICE uint32_t LoadWord32(const uint8_t* p) {
#if defined(__CUDA_ARCH__)
  return *reinterpret_cast<const uint32_t*>(p);
#else
  return LoadUnaligned32(p);
#endif
}

/// uint64 at `p`; on the device `p` must be 8-byte aligned.
GPUJOIN_HOST_DEVICE uint64_t LoadWord64(const uint8_t* p) {
#if defined(__CUDA_ARCH__)
  return *reinterpret_cast<const uint64_t*>(p);
#else
  return LoadUnaligned64(p);
#endif
}

GPUJOIN_HOST_DEVICE uint32_t Rotl32(uint32_t x, int r) { return (x << r) | (x >> (32 - r)); }
using xxh64::Rotl64;

// ---------------------------------------------------------------------------
// XXH32 (xxHash specification, https://github.com/Cyan4973/xxHash/blob/dev/doc/xxhash_spec.md)
// ---------------------------------------------------------------------------

inline constexpr uint32_t kXxh32Prime1 = 0x9E3779B1u;
inline constexpr uint32_t kXxh32Prime2 = 0x85EBCA77u;
inline constexpr uint32_t kXxh32Prime3 = 0xC2B2AE3Du;
inline constexpr uint32_t kXxh32Prime4 = 0x27D4EB2Fu;
inline constexpr uint32_t kXxh32Prime5 = 0x165667B1u;

GPUJOIN_HOST_DEVICE uint32_t Xxh32Round(uint32_t acc, uint32_t input) {
  acc += input * kXxh32Prime2;
  acc = Rotl32(acc, 13);
  return acc * kXxh32Prime1;
}

/// XXH32's final mix: a bijection on uint32 with full avalanche.
GPUJOIN_HOST_DEVICE uint32_t Xxh32Avalanche(uint32_t h) {
  h ^= h >> 15;
  h *= kXxh32Prime2;
  h ^= h >> 13;
  h *= kXxh32Prime3;
  h ^= h >> 16;
  return h;
}

/// One 4-byte lane of XXH32's tail.
GPUJOIN_HOST_DEVICE uint32_t Xxh32Tail4(uint32_t h, uint32_t word) {
  h += word * kXxh32Prime3;
  return Rotl32(h, 17) * kXxh32Prime4;
}

/// XXH32 of `len` bytes at `p` with `seed`.
GPUJOIN_HOST_DEVICE uint32_t Xxh32Bytes(const uint8_t* p, uint64_t len, uint32_t seed) {
  const uint8_t* const end = p + len;
  uint32_t h;
  if (len >= 16) {
    uint32_t v1 = seed + kXxh32Prime1 + kXxh32Prime2;
    uint32_t v2 = seed + kXxh32Prime2;
    uint32_t v3 = seed;
    uint32_t v4 = seed - kXxh32Prime1;
    const uint8_t* const limit = end - 16;
    do {
      v1 = Xxh32Round(v1, LoadUnaligned32(p));
      v2 = Xxh32Round(v2, LoadUnaligned32(p + 4));
      v3 = Xxh32Round(v3, LoadUnaligned32(p + 8));
      v4 = Xxh32Round(v4, LoadUnaligned32(p + 12));
      p += 16;
    } while (p <= limit);
    h = Rotl32(v1, 1) + Rotl32(v2, 7) + Rotl32(v3, 12) + Rotl32(v4, 18);
  } else {
    h = seed + kXxh32Prime5;
  }
  h += static_cast<uint32_t>(len);
  while (end - p >= 4) {
    h = Xxh32Tail4(h, LoadUnaligned32(p));
    p += 4;
  }
  while (p < end) {
    h += uint32_t{*p} * kXxh32Prime5;
    h = Rotl32(h, 11) * kXxh32Prime1;
    ++p;
  }
  return Xxh32Avalanche(h);
}

/// One byte of XXH32's tail.
GPUJOIN_HOST_DEVICE uint32_t Xxh32TailByte(uint32_t h, uint32_t byte) {
  h += byte * kXxh32Prime5;
  return Rotl32(h, 11) * kXxh32Prime1;
}

/// XXH32 (seed 0) of the one byte `v` (< 256); equals Xxh32Bytes(&v, 1, 0).
GPUJOIN_HOST_DEVICE uint32_t Xxh32Of1(uint32_t v) {
  return Xxh32Avalanche(Xxh32TailByte(kXxh32Prime5 + 1u, v));
}

/// XXH32 (seed 0) of the 2 little-endian bytes of `v` (< 65536).
GPUJOIN_HOST_DEVICE uint32_t Xxh32Of2(uint32_t v) {
  return Xxh32Avalanche(Xxh32TailByte(Xxh32TailByte(kXxh32Prime5 + 2u, v & 0xFFu), v >> 8));
}

/// XXH32 (seed 0) of the 4 little-endian bytes of `v`; equals Xxh32Bytes(&v, 4, 0).
GPUJOIN_HOST_DEVICE uint32_t Xxh32Of4(uint32_t v) {
  return Xxh32Avalanche(Xxh32Tail4(kXxh32Prime5 + 4u, v));
}

/// XXH32 (seed 0) of the 8 little-endian bytes of `v`; equals Xxh32Bytes(&v, 8, 0).
GPUJOIN_HOST_DEVICE uint32_t Xxh32Of8(uint64_t v) {
  uint32_t h = kXxh32Prime5 + 8u;
  h = Xxh32Tail4(h, static_cast<uint32_t>(v));
  h = Xxh32Tail4(h, static_cast<uint32_t>(v >> 32));
  return Xxh32Avalanche(h);
}

// ---------------------------------------------------------------------------
// XXH64
// ---------------------------------------------------------------------------

// The primes, rounds, tail steps and avalanche are gpujoin/common/xxhash64.hpp's
// (shared with the snapshot file's checksums).

/// XXH64 of `len` bytes at `p` with `seed`.
GPUJOIN_HOST_DEVICE uint64_t Xxh64Bytes(const uint8_t* p, uint64_t len, uint64_t seed) {
  const uint8_t* const end = p + len;
  uint64_t h;
  if (len >= 32) {
    uint64_t v[4];
    xxh64::InitLanes(seed, v);
    const uint8_t* const limit = end - 32;
    do {
      v[0] = xxh64::Round(v[0], LoadUnaligned64(p));
      v[1] = xxh64::Round(v[1], LoadUnaligned64(p + 8));
      v[2] = xxh64::Round(v[2], LoadUnaligned64(p + 16));
      v[3] = xxh64::Round(v[3], LoadUnaligned64(p + 24));
      p += 32;
    } while (p <= limit);
    h = xxh64::Converge(v);
  } else {
    h = xxh64::ShortStart(seed);
  }
  h += len;
  while (end - p >= 8) {
    h = xxh64::Tail8(h, LoadUnaligned64(p));
    p += 8;
  }
  if (end - p >= 4) {
    h = xxh64::Tail4(h, LoadUnaligned32(p));
    p += 4;
  }
  while (p < end) {
    h = xxh64::TailByte(h, *p);
    ++p;
  }
  return xxh64::Avalanche(h);
}

/// XXH64 (seed 0) of the one byte `v` (< 256); equals Xxh64Bytes(&v, 1, 0).
GPUJOIN_HOST_DEVICE uint64_t Xxh64Of1(uint32_t v) {
  return xxh64::Avalanche(xxh64::TailByte(xxh64::kPrime5 + 1u, v));
}

/// XXH64 (seed 0) of the 2 little-endian bytes of `v` (< 65536).
GPUJOIN_HOST_DEVICE uint64_t Xxh64Of2(uint32_t v) {
  return xxh64::Avalanche(xxh64::TailByte(xxh64::TailByte(xxh64::kPrime5 + 2u, v & 0xFFu), v >> 8));
}

/// XXH64 (seed 0) of the 4 little-endian bytes of `v`; equals Xxh64Bytes(&v, 4, 0).
GPUJOIN_HOST_DEVICE uint64_t Xxh64Of4(uint32_t v) {
  return xxh64::Avalanche(xxh64::Tail4(xxh64::kPrime5 + 4u, v));
}

/// XXH64 (seed 0) of the 8 little-endian bytes of `v`; equals Xxh64Bytes(&v, 8, 0).
GPUJOIN_HOST_DEVICE uint64_t Xxh64Of8(uint64_t v) {
  return xxh64::Avalanche(xxh64::Tail8(xxh64::kPrime5 + 8u, v));
}

/// xxHash of width `H` (uint32_t: XXH32, uint64_t: XXH64), seed 0, of 1 byte.
template <typename H>
GPUJOIN_HOST_DEVICE H HashOf1(uint32_t v) {
  if constexpr (sizeof(H) == 8) {
    return Xxh64Of1(v);
  } else {
    return Xxh32Of1(v);
  }
}

/// xxHash of width `H`, seed 0, of 2 little-endian bytes.
template <typename H>
GPUJOIN_HOST_DEVICE H HashOf2(uint32_t v) {
  if constexpr (sizeof(H) == 8) {
    return Xxh64Of2(v);
  } else {
    return Xxh32Of2(v);
  }
}

/// xxHash of width `H`, seed 0, of 4 bytes.
template <typename H>
GPUJOIN_HOST_DEVICE H HashOf4(uint32_t v) {
  if constexpr (sizeof(H) == 8) {
    return Xxh64Of4(v);
  } else {
    return Xxh32Of4(v);
  }
}

/// xxHash of width `H`, seed 0, of 8 bytes.
template <typename H>
GPUJOIN_HOST_DEVICE H HashOf8(uint64_t v) {
  if constexpr (sizeof(H) == 8) {
    return Xxh64Of8(v);
  } else {
    return Xxh32Of8(v);
  }
}

/// xxHash of width `H`, seed 0, of `len` bytes at `p`.
template <typename H>
GPUJOIN_HOST_DEVICE H HashOfBytes(const uint8_t* p, uint64_t len) {
  if constexpr (sizeof(H) == 8) {
    return Xxh64Bytes(p, len, 0);
  } else {
    return Xxh32Bytes(p, len, 0);
  }
}

}  // namespace gpujoin::engine::detail
