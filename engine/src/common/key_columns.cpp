// Sizes of key columns once stored (key_columns.hpp).
#include "gpujoin/engine/key_columns.hpp"

#include "common/key_columns.hpp"
#include "gpujoin/common/bitmap.hpp"

namespace gpujoin::engine {

uint64_t KeyColumnBytes(const KeyColumns& keys) {
  const uint64_t rows = keys.rows();
  uint64_t bytes = 0;
  for (const HashColumn& c : keys.columns) {
    bytes += detail::KeyValueBytes(c);
    if (IsVariableWidth(c.type)) bytes += (rows + 1) * sizeof(int64_t);
    if (!c.validity.empty()) bytes += BitmapBytes(rows);
  }
  return bytes;
}

}  // namespace gpujoin::engine
