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
//
// This file is the composite: how value hashes fold into a list's and a row's
// hash. xxhash_bytes.hpp holds the byte hashes, hash_view.hpp the column
// reads and value_hash.hpp the per-type value hash.
#pragma once

#include <cstdint>

#include "hashing/hash_view.hpp"
#include "hashing/value_hash.hpp"
#include "hashing/xxhash_bytes.hpp"

namespace gpujoin::engine::detail {

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
GPUJOIN_HOST_DEVICE H ListValueHash(const HashView& c, uint64_t row) {
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

/// Hash of one valid value of any HashView (flat, device dictionary, device list).
template <typename H>
GPUJOIN_HOST_DEVICE H ColumnValueHash(const HashView& c, uint64_t row) {
  if (c.child != nullptr) return ListValueHash<H>(c, row);
  return FlatValueHash<H>(c, row);
}

/// Composite hash of logical row `row` over `num_columns` columns. Returns false
/// (and sets *out = 0) when the row is null in any column; reads no value of a
/// null row.
template <typename H>
GPUJOIN_HOST_DEVICE bool HashRow(const HashView* columns, uint32_t num_columns, uint64_t row,
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
