// Internal: reading key columns row by row, shared by the backends' host code
// (key_columns.hpp has the public types). A key value is the bytes of one row of
// one column (fixed-width little-endian values, or string and binary bytes);
// two keys are equal when every column's values are valid and byte-equal
// (hashing/key_compare.hpp, the one comparison of both backends).
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

#include "gpujoin/common/bitmap.hpp"
#include "gpujoin/engine/key_columns.hpp"
#include "hashing/hash_host.hpp"

namespace gpujoin::engine::detail {

/// Row `r` of key column `c` (its logical row: physical row c.offset + r).
struct KeyValue {
  const uint8_t* data = nullptr;
  uint64_t size = 0;
  bool valid = false;
};

inline KeyValue KeyValueAt(const HashColumn& c, uint64_t r) {
  const uint64_t p = c.offset + r;
  KeyValue v;
  v.valid = c.validity.empty() || BitAt(c.validity, p);
  if (IsVariableWidth(c.type)) {
    const int64_t begin = c.large_offsets.empty() ? c.offsets[p] : c.large_offsets[p];
    const int64_t end = c.large_offsets.empty() ? c.offsets[p + 1] : c.large_offsets[p + 1];
    v.data = c.data.data() + begin;
    v.size = static_cast<uint64_t>(end - begin);
  } else {
    const size_t width = ColumnWidth(c.type);
    v.data = c.data.data() + p * width;
    v.size = width;
  }
  return v;
}

/// Bytes of the values of every row of `c` (fixed width: rows * width).
inline uint64_t KeyValueBytes(const HashColumn& c) {
  if (!IsVariableWidth(c.type)) return c.length * ColumnWidth(c.type);
  if (c.length == 0) return 0;
  const int64_t begin = c.large_offsets.empty() ? c.offsets[c.offset] : c.large_offsets[c.offset];
  const int64_t end = c.large_offsets.empty() ? c.offsets[c.offset + c.length]
                                              : c.large_offsets[c.offset + c.length];
  return static_cast<uint64_t>(end - begin);
}

/// The views of `keys`' columns, in order (how the backends hash and compare
/// them: hashing/key_compare.hpp's KeyViewsEqual).
inline std::vector<HashView> KeyViews(const KeyColumns& keys) {
  std::vector<HashView> views;
  views.reserve(keys.columns.size());
  for (const HashColumn& c : keys.columns) views.push_back(HostView(c));
  return views;
}

/// Whether row `r` of `keys` has a null in any column.
inline bool KeyRowIsNull(const KeyColumns& keys, uint64_t r) {
  for (const HashColumn& c : keys.columns) {
    if (!c.validity.empty() && !BitAt(c.validity, c.offset + r)) return true;
  }
  return false;
}

}  // namespace gpujoin::engine::detail
