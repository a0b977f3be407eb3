// Sequential reader of a chunked logical column starting at any row.
#pragma once

#include <cstddef>

#include "gpujoin/engine/types.hpp"

namespace gpujoin::engine::cpu {

/// Reads rows of a Chunked<T> in order from `row`. The caller guarantees that it
/// reads no more rows than the column has.
template <typename T>
class ChunkCursor {
 public:
  ChunkCursor(const Chunked<T>& chunks, size_t row) : chunks_(&chunks) {
    while (chunk_ < chunks.size() && row >= chunks[chunk_].size()) {
      row -= chunks[chunk_].size();
      ++chunk_;
    }
    pos_ = row;
  }

  /// The current row's value; advances to the next row.
  T Next() {
    while (pos_ >= (*chunks_)[chunk_].size()) {  // also skips empty chunks
      ++chunk_;
      pos_ = 0;
    }
    return (*chunks_)[chunk_][pos_++];
  }

 private:
  const Chunked<T>* chunks_;
  size_t chunk_ = 0;
  size_t pos_ = 0;
};

}  // namespace gpujoin::engine::cpu
