// Internal: HashView, a flat column as the row hash (row_hash.hpp) reads it
// on the host and on the device, and the per-row reads of its validity, type
// widths and dictionary indices.
#pragma once

#include <cstdint>

#include "gpujoin/common/xxhash64.hpp"  // defines GPUJOIN_HOST_DEVICE
#include "gpujoin/engine/hashing.hpp"
#include "hashing/xxhash_bytes.hpp"

namespace gpujoin::engine::detail {

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
struct HashView {
  ColumnType type = ColumnType::kUint32;
  const uint8_t* data = nullptr;
  const int32_t* offsets = nullptr;        ///< kBinary, kString
  const int64_t* large_offsets = nullptr;  ///< kLargeBinary, kLargeString
  const uint8_t* validity = nullptr;       ///< null = all rows valid
  uint64_t value_offset = 0;
  uint64_t validity_bit_offset = 0;
  int64_t data_base = 0;                       ///< subtracted from every binary offset
  uint32_t byte_width = 0;                     ///< kFixedSizeBinary: bytes per value
  ColumnType index_type = ColumnType::kInt32;  ///< kDictionary
  const void* dict_hashes = nullptr;           ///< kDictionary: one hash (H) per entry
  const uint8_t* dict_validity = nullptr;      ///< kDictionary: bitmap, one bit per entry
  /// Device lists of flat values (kList, kLargeList: offsets into the child's
  /// rows, shifted down by data_base; kFixedSizeList: byte_width elements per row
  /// from child row 0): the values' view. Null for every other view.
  const HashView* child = nullptr;
};

/// Bytes per value of a fixed-width type (1, 2, 4, 8 or 16); 0 for every other
/// type (bool, the binary types, fixed_size_binary whose width is per column,
/// dictionary, nested types, null).
GPUJOIN_HOST_DEVICE uint32_t FixedWidth(ColumnType type) {
  return static_cast<uint32_t>(ValueWidth(type));  // constexpr: callable on the device
}

/// The binary types with int32 offsets (kBinary, kString) and int64 offsets.
GPUJOIN_HOST_DEVICE bool IsBinaryType(ColumnType type) {
  return type == ColumnType::kBinary || type == ColumnType::kString;
}
GPUJOIN_HOST_DEVICE bool IsLargeBinaryType(ColumnType type) {
  return type == ColumnType::kLargeBinary || type == ColumnType::kLargeString;
}

/// Types the flat row hash reads through a HashView (kDictionary only with
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
GPUJOIN_HOST_DEVICE bool ColumnRowValid(const HashView& c, uint64_t row) {
  if (c.type == ColumnType::kNull) return false;
  if (c.validity != nullptr && !BitmapBit(c.validity, c.validity_bit_offset + row)) return false;
  if (c.type == ColumnType::kDictionary) {
    const int64_t index = LoadIndex(c.data, c.index_type, c.value_offset + row);
    return BitmapBit(c.dict_validity, static_cast<uint64_t>(index));
  }
  return true;
}

}  // namespace gpujoin::engine::detail
