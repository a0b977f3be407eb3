// Internal: the hash of one value of a flat column (row_hash.hpp), per type:
// floats canonicalised on their bits, fixed-width values by their width, the
// binary types by their bytes, device dictionaries by their entry's hash.
#pragma once

#include <cstdint>

#include "hashing/hash_view.hpp"
#include "hashing/xxhash_bytes.hpp"

namespace gpujoin::engine::detail {

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
GPUJOIN_HOST_DEVICE H FlatValueHash(const HashView& c, uint64_t row) {
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

}  // namespace gpujoin::engine::detail
