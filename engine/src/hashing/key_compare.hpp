// Internal: whether two rows hold the same key, read through ColumnViews
// (hash_view.hpp) on the host and on the device. A key-schema index compares
// a probe's key columns with a stored row's on an equal fingerprint through this
// one function on both backends (docs/engine.md, "Key schemas"): every column
// valid on both sides and byte-equal (fixed-width values as their
// little-endian bytes, strings and binary as their bytes).
#pragma once

#include <cstdint>
#include <cstring>

#include "hashing/hash_view.hpp"

namespace gpujoin::engine::detail {

/// The bytes of logical row `r` of flat view `v`: a fixed-width value, or the
/// bytes of a string or binary value.
struct ViewBytes {
  const uint8_t* data = nullptr;
  uint64_t size = 0;
};

GPUJOIN_HOST_DEVICE ViewBytes ViewBytesAt(const HashView& v, uint64_t r) {
  const uint64_t p = v.value_offset + r;
  if (v.offsets != nullptr) {
    const int64_t begin = int64_t(v.offsets[p]) - v.data_base;
    return {v.data + begin, uint64_t(int64_t(v.offsets[p + 1]) - v.data_base - begin)};
  }
  if (v.large_offsets != nullptr) {
    const int64_t begin = v.large_offsets[p] - v.data_base;
    return {v.data + begin, uint64_t(v.large_offsets[p + 1] - v.data_base - begin)};
  }
  const uint32_t width = FixedWidth(v.type);
  return {v.data + p * width, width};
}

/// Whether `a` and `b` hold the same `size` bytes.
GPUJOIN_HOST_DEVICE bool SameBytes(const uint8_t* a, const uint8_t* b, uint64_t size) {
#ifdef __CUDA_ARCH__
  for (uint64_t i = 0; i < size; ++i) {
    if (a[i] != b[i]) return false;
  }
  return true;
#else
  return size == 0 || std::memcmp(a, b, size) == 0;
#endif
}

/// Whether row `a_row` of the `columns` views `a` and row `b_row` of `b` (the
/// same schema) hold the same key: every column valid on both sides and
/// byte-equal. A null never equals anything (SQL equality).
GPUJOIN_HOST_DEVICE bool KeyViewsEqual(const HashView* a, uint64_t a_row, const HashView* b,
                                       uint64_t b_row, uint32_t columns) {
  for (uint32_t c = 0; c < columns; ++c) {
    if (!ColumnRowValid(a[c], a_row) || !ColumnRowValid(b[c], b_row)) return false;
    const ViewBytes x = ViewBytesAt(a[c], a_row);
    const ViewBytes y = ViewBytesAt(b[c], b_row);
    if (x.size != y.size || !SameBytes(x.data, y.data, x.size)) return false;
  }
  return true;
}

}  // namespace gpujoin::engine::detail
