// Sizes of key columns once stored (key_columns.hpp).
#include "gpujoin/engine/key_columns.hpp"

#include "common/key_columns.hpp"
#include "gpujoin/common/bitmap.hpp"

namespace gpujoin::engine {

uint64_t KeyColumnBytes(const KeyColumns& keys) {
  const uint64_t rows = keys.rows();
  uint64_t bytes = 0;
  for (const HashColumn& c : keys.columns) {
    if (IsVariableWidth(c.type)) {
      bytes += (rows + 1) * sizeof(int64_t);
      if (rows > 0) {
        const int64_t begin =
            c.large_offsets.empty() ? c.offsets[c.offset] : c.large_offsets[c.offset];
        const int64_t end = c.large_offsets.empty() ? c.offsets[c.offset + rows]
                                                    : c.large_offsets[c.offset + rows];
        bytes += static_cast<uint64_t>(end - begin);
      }
    } else {
      bytes += rows * ColumnWidth(c.type);
    }
    if (!c.validity.empty()) bytes += BitmapBytes(rows);
  }
  return bytes;
}

}  // namespace gpujoin::engine
