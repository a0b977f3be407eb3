// Internal: the row hash of gpujoin's Hash operation, written once as inline
// host+device functions so that the CPU backend (hash_host.cpp) and the CUDA
// backend (cuda/hash/hash_device.cu) produce the same bits by construction.
//
// The algorithm (docs/hashing.md is the user-facing description; the values are
// part of the API and must never change):
//   * A column value hashes as xxHash (XXH32 for hash32, XXH64 for hash64, seed 0)
//     of its little-endian bytes: 1, 2, 4, 8 or 16 bytes for the fixed-width
//     types, byte_width bytes for fixed_size_binary, the value bytes for the
//     binary/string types (0 bytes for ""), one byte 0/1 for bool.
//   * Floats are canonicalised first: -0.0 hashes as +0.0 and every NaN as the
//     canonical quiet NaN (0x7e00 / 0x7fc00000 / 0x7ff8000000000000).
//   * Nested types (hash_host.cpp, HashNested*) fold these with CombineHash.
//   * Columns combine left to right: h = k0; h = avalanche(h * PRIME_1 + k_i),
//     with xxHash's PRIME_1 and avalanche of the output width.
//   * A row with a null in any column is null: hash 0, validity bit 0.
#pragma once

#include <cstdint>
#include <cstring>

#include "gpujoin/common/xxhash64.hpp"  // also defines GPUJOIN_HOST_DEVICE
#include "gpujoin/engine/hashing.hpp"

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

// ---------------------------------------------------------------------------
// Float canonicalisation, on bit patterns (no float arithmetic, so no
// flush-to-zero or fast-math differences between host and device).
// ---------------------------------------------------------------------------

inline constexpr uint32_t kCanonicalNan16 = 0x7E00u;
inline constexpr uint32_t kCanonicalNan32 = 0x7FC00000u;
inline constexpr uint64_t kCanonicalNan64 = 0x7FF8000000000000ull;

/// float16 (binary16 bits in the low 16): -0.0 -> +0.0, every NaN -> 0x7e00,
/// anything else unchanged.
GPUJOIN_HOST_DEVICE uint32_t CanonicalFloat16Bits(uint32_t bits) {
  const uint32_t magnitude = bits & 0x7FFFu;
  if (magnitude == 0) return 0;
  if (magnitude > 0x7C00u) return kCanonicalNan16;
  return bits;
}

/// -0.0f -> +0.0f, every NaN -> 0x7fc00000, anything else unchanged.
GPUJOIN_HOST_DEVICE uint32_t CanonicalFloat32Bits(uint32_t bits) {
  const uint32_t magnitude = bits & 0x7FFFFFFFu;
  if (magnitude == 0) return 0;
  if (magnitude > 0x7F800000u) return kCanonicalNan32;
  return bits;
}

/// -0.0 -> +0.0, every NaN -> 0x7ff8000000000000, anything else unchanged.
GPUJOIN_HOST_DEVICE uint64_t CanonicalFloat64Bits(uint64_t bits) {
  const uint64_t magnitude = bits & 0x7FFFFFFFFFFFFFFFull;
  if (magnitude == 0) return 0;
  if (magnitude > 0x7FF0000000000000ull) return kCanonicalNan64;
  return bits;
}

// ---------------------------------------------------------------------------
// Columns and rows.
// ---------------------------------------------------------------------------

/// A flat column as the row hash reads it: raw pointers into host memory (CPU
/// backend) or into device buffers (CUDA backend). Logical row r reads value
/// `value_offset + r` (for kBool the value bit `value_offset + r` of `data`),
/// validity bit `validity_bit_offset + r`, and for the binary types the bytes
/// [offsets[value_offset + r], offsets[value_offset + r + 1]) of `data`, each
/// shifted down by `data_base`. kDictionary views exist on the device only:
/// their `data` holds the indices and `dict_hashes` / `dict_validity` the hash
/// and validity of every dictionary entry (hash the dictionary once, gather by
/// index); the host hashes dictionaries through the nested path instead.
struct ColumnView {
  ColumnType type = ColumnType::kUint32;
  const uint8_t* data = nullptr;
  const int32_t* offsets = nullptr;        ///< kBinary, kString
  const int64_t* large_offsets = nullptr;  ///< kLargeBinary, kLargeString
  const uint8_t* validity = nullptr;       ///< null = all rows valid
  uint64_t value_offset = 0;
  uint64_t validity_bit_offset = 0;
  int64_t data_base = 0;  ///< subtracted from every binary offset
  uint32_t byte_width = 0;  ///< kFixedSizeBinary: bytes per value
  ColumnType index_type = ColumnType::kInt32;  ///< kDictionary
  const void* dict_hashes = nullptr;          ///< kDictionary: one hash (H) per entry
  const uint8_t* dict_validity = nullptr;     ///< kDictionary: bitmap, one bit per entry
  /// Device lists of flat values (kList, kLargeList: offsets into the child's
  /// rows, shifted down by data_base; kFixedSizeList: byte_width elements per row
  /// from child row 0): the values' view. Null for every other view.
  const ColumnView* child = nullptr;
};

/// Bytes per value of a fixed-width type (1, 2, 4, 8 or 16); 0 for every other
/// type (bool, the binary types, fixed_size_binary whose width is per column,
/// dictionary, nested types, null).
GPUJOIN_HOST_DEVICE uint32_t FixedWidth(ColumnType type) {
  switch (type) {
    case ColumnType::kInt8:
    case ColumnType::kUint8:
      return 1;
    case ColumnType::kInt16:
    case ColumnType::kUint16:
    case ColumnType::kFloat16:
      return 2;
    case ColumnType::kUint32:
    case ColumnType::kInt32:
    case ColumnType::kFloat32:
      return 4;
    case ColumnType::kUint64:
    case ColumnType::kInt64:
    case ColumnType::kFloat64:
      return 8;
    case ColumnType::kDecimal128:
      return 16;
    default:
      return 0;
  }
}

/// The binary types with int32 offsets (kBinary, kString) and int64 offsets.
GPUJOIN_HOST_DEVICE bool IsBinaryType(ColumnType type) {
  return type == ColumnType::kBinary || type == ColumnType::kString;
}
GPUJOIN_HOST_DEVICE bool IsLargeBinaryType(ColumnType type) {
  return type == ColumnType::kLargeBinary || type == ColumnType::kLargeString;
}

/// Types the flat row hash reads through a ColumnView (kDictionary only with
/// dict_hashes, i.e. on the device): every type that is not nested.
GPUJOIN_HOST_DEVICE bool IsFlatHashType(ColumnType type) {
  return FixedWidth(type) != 0 || IsBinaryType(type) || IsLargeBinaryType(type) ||
         type == ColumnType::kBool || type == ColumnType::kFixedSizeBinary ||
         type == ColumnType::kNull;
}

/// Index `row` (physical) of an index buffer of `index_type`, sign-extended;
/// validation guarantees valid rows' indices lie in the dictionary.
GPUJOIN_HOST_DEVICE int64_t LoadIndex(const uint8_t* data, ColumnType index_type, uint64_t row) {
  switch (index_type) {
    case ColumnType::kInt8:
      return static_cast<int8_t>(data[row]);
    case ColumnType::kUint8:
      return data[row];
    case ColumnType::kInt16:
      return static_cast<int16_t>(LoadUnaligned16(data + row * 2));
    case ColumnType::kUint16:
      return LoadUnaligned16(data + row * 2);
    case ColumnType::kInt32:
      return static_cast<int32_t>(LoadUnaligned32(data + row * 4));
    case ColumnType::kUint32:
      return LoadUnaligned32(data + row * 4);
    default:  // kInt64, kUint64 (validated: a uint64 index past 2^63 is out of range)
      return static_cast<int64_t>(LoadUnaligned64(data + row * 8));
  }
}

/// Bit `bit` of an LSB-order bitmap.
GPUJOIN_HOST_DEVICE bool BitmapBit(const uint8_t* bitmap, uint64_t bit) {
  return ((bitmap[bit >> 3] >> (bit & 7)) & 1u) != 0;
}

/// Whether logical row `row` of `c` is valid (kNull: never; a device
/// dictionary: its index is valid and points at a valid entry).
GPUJOIN_HOST_DEVICE bool ColumnRowValid(const ColumnView& c, uint64_t row) {
  if (c.type == ColumnType::kNull) return false;
  if (c.validity != nullptr && !BitmapBit(c.validity, c.validity_bit_offset + row)) return false;
  if (c.type == ColumnType::kDictionary) {
    const int64_t index = LoadIndex(c.data, c.index_type, c.value_offset + row);
    return BitmapBit(c.dict_validity, static_cast<uint64_t>(index));
  }
  return true;
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

/// Hash of one value of a fixed-width type of at most 8 bytes (FixedWidth(type)
/// in 1 .. 8) from its little-endian bits, for the output width `H`.
template <typename H>
GPUJOIN_HOST_DEVICE H FixedWidthHash(ColumnType type, uint64_t bits) {
  switch (type) {
    case ColumnType::kInt8:
    case ColumnType::kUint8:
      return HashOf1<H>(static_cast<uint32_t>(bits & 0xFFu));
    case ColumnType::kInt16:
    case ColumnType::kUint16:
      return HashOf2<H>(static_cast<uint32_t>(bits & 0xFFFFu));
    case ColumnType::kFloat16:
      return HashOf2<H>(CanonicalFloat16Bits(static_cast<uint32_t>(bits & 0xFFFFu)));
    case ColumnType::kFloat32:
      return HashOf4<H>(CanonicalFloat32Bits(static_cast<uint32_t>(bits)));
    case ColumnType::kUint32:
    case ColumnType::kInt32:
      return HashOf4<H>(static_cast<uint32_t>(bits));
    case ColumnType::kFloat64:
      return HashOf8<H>(CanonicalFloat64Bits(bits));
    default:  // kUint64, kInt64
      return HashOf8<H>(bits);
  }
}

/// Hash of one valid value of a flat view, for the output width `H` (uint32_t or
/// uint64_t).
template <typename H>
GPUJOIN_HOST_DEVICE H FlatValueHash(const ColumnView& c, uint64_t row) {
  const uint64_t r = c.value_offset + row;
  switch (c.type) {
    case ColumnType::kInt8:
    case ColumnType::kUint8:
      return FixedWidthHash<H>(c.type, c.data[r]);
    case ColumnType::kBool:
      return HashOf1<H>(BitmapBit(c.data, r) ? 1u : 0u);
    case ColumnType::kInt16:
    case ColumnType::kUint16:
    case ColumnType::kFloat16:
      return FixedWidthHash<H>(c.type, LoadUnaligned16(c.data + r * 2));
    case ColumnType::kUint32:
    case ColumnType::kInt32:
    case ColumnType::kFloat32:
      return FixedWidthHash<H>(c.type, LoadWord32(c.data + r * 4));
    case ColumnType::kUint64:
    case ColumnType::kInt64:
    case ColumnType::kFloat64:
      return FixedWidthHash<H>(c.type, LoadWord64(c.data + r * 8));
    case ColumnType::kDecimal128:
      return HashOfBytes<H>(c.data + r * 16, 16);
    case ColumnType::kFixedSizeBinary:
      return HashOfBytes<H>(c.data + r * c.byte_width, c.byte_width);
    case ColumnType::kBinary:
    case ColumnType::kString: {
      const int64_t begin = int64_t{c.offsets[r]} - c.data_base;
      const int64_t end = int64_t{c.offsets[r + 1]} - c.data_base;
      return HashOfBytes<H>(c.data + begin, static_cast<uint64_t>(end - begin));
    }
    case ColumnType::kLargeBinary:
    case ColumnType::kLargeString: {
      const int64_t begin = c.large_offsets[r] - c.data_base;
      const int64_t end = c.large_offsets[r + 1] - c.data_base;
      return HashOfBytes<H>(c.data + begin, static_cast<uint64_t>(end - begin));
    }
    case ColumnType::kDictionary: {
      const int64_t index = LoadIndex(c.data, c.index_type, r);
      return static_cast<const H*>(c.dict_hashes)[index];
    }
    default:  // kNull rows are never valid; lists go through ListValueHash
      return 0;
  }
}

/// Folds the hash `k` of the next column into the running composite hash `h`.
GPUJOIN_HOST_DEVICE uint32_t CombineHash(uint32_t h, uint32_t k) {
  return Xxh32Avalanche(h * kXxh32Prime1 + k);
}
GPUJOIN_HOST_DEVICE uint64_t CombineHash(uint64_t h, uint64_t k) {
  return xxh64::Avalanche(h * xxh64::kPrime1 + k);
}

/// The start of a list fold's value accumulator (so also the hash of every
/// empty list): xxHash's PRIME_5 of the width.
template <typename H>
GPUJOIN_HOST_DEVICE H ListSeed() {
  if constexpr (sizeof(H) == 8) {
    return xxh64::kPrime5;
  } else {
    return kXxh32Prime5;
  }
}

/// The start of a list fold's null accumulator: xxHash's PRIME_4 of the width.
template <typename H>
GPUJOIN_HOST_DEVICE H ListNullSeed() {
  if constexpr (sizeof(H) == 8) {
    return xxh64::kPrime4;
  } else {
    return kXxh32Prime4;
  }
}

/// Folds the elements of one list row in order (docs/hashing.md "Algorithm"):
/// a valid element folds its hash into `values`; a null element folds the hash
/// of its position (uint64, 0-based within the row) into `nulls`; the two mix
/// only when the row has a null element. So [null] != [0], [null, x] !=
/// [x, null], and a list without nulls costs one combine per element.
template <typename H>
struct ListFold {
  H values = ListSeed<H>();
  H nulls = ListNullSeed<H>();
  uint64_t position = 0;
  bool any_null = false;

  GPUJOIN_HOST_DEVICE void Add(bool valid, H element_hash) {
    if (valid) {
      values = CombineHash(values, element_hash);
    } else {
      nulls = CombineHash(nulls, HashOf8<H>(position));
      any_null = true;
    }
    ++position;
  }
  GPUJOIN_HOST_DEVICE H Finish() const { return any_null ? CombineHash(values, nulls) : values; }
};

/// Hash of one valid row of a list view with a flat child (`c.child`, device
/// only): its elements folded in order (ListFold), one thread per row.
template <typename H>
GPUJOIN_HOST_DEVICE H ListValueHash(const ColumnView& c, uint64_t row) {
  const uint64_t r = c.value_offset + row;
  uint64_t begin, end;
  if (c.type == ColumnType::kFixedSizeList) {
    begin = r * c.byte_width;
    end = begin + c.byte_width;
  } else if (c.type == ColumnType::kLargeList) {
    begin = static_cast<uint64_t>(c.large_offsets[r] - c.data_base);
    end = static_cast<uint64_t>(c.large_offsets[r + 1] - c.data_base);
  } else {
    begin = static_cast<uint64_t>(int64_t{c.offsets[r]} - c.data_base);
    end = static_cast<uint64_t>(int64_t{c.offsets[r + 1]} - c.data_base);
  }
  ListFold<H> fold;
  for (uint64_t j = begin; j < end; ++j) {
    const bool valid = ColumnRowValid(*c.child, j);
    fold.Add(valid, valid ? FlatValueHash<H>(*c.child, j) : H{0});
  }
  return fold.Finish();
}

/// Hash of one valid value of any ColumnView (flat, device dictionary, device list).
template <typename H>
GPUJOIN_HOST_DEVICE H ColumnValueHash(const ColumnView& c, uint64_t row) {
  if (c.child != nullptr) return ListValueHash<H>(c, row);
  return FlatValueHash<H>(c, row);
}

/// Composite hash of logical row `row` over `num_columns` columns. Returns false
/// (and sets *out = 0) when the row is null in any column; reads no value of a
/// null row.
template <typename H>
GPUJOIN_HOST_DEVICE bool HashRow(const ColumnView* columns, uint32_t num_columns, uint64_t row,
                                 H* out) {
  for (uint32_t i = 0; i < num_columns; ++i) {
    if (!ColumnRowValid(columns[i], row)) {
      *out = 0;
      return false;
    }
  }
  H h = ColumnValueHash<H>(columns[0], row);
  for (uint32_t i = 1; i < num_columns; ++i)
    h = CombineHash(h, ColumnValueHash<H>(columns[i], row));
  *out = h;
  return true;
}

}  // namespace gpujoin::engine::detail
