// Splits whole in-memory build columns (keys, values, payload) into build
// chunks that each fit in one message: the splitting behind
// Client::BuildIndexFromColumns. Internal to the client library (and its unit tests).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "gpujoin/client/build.hpp"
#include "gpujoin/client/column.hpp"
#include "gpujoin/client/keys.hpp"

namespace gpujoin::client::detail {

/// Bytes a build chunk's `keys` (integers or key columns) and, with `values`,
/// as many explicit values add to a message, at most.
uint64_t KeyChunkBytes(const Keys& keys, bool values);

/// Chunks in rounds: a round's first chunk carries the next key rows (at most
/// `chunk_rows`, and as many as fit in `max_chunk_bytes` with their values)
/// and as many rows of each payload column, up to the round's last key row, as
/// fit in the bytes left; payload-only chunks follow until every payload column
/// has caught up with the keys. So each chunk's estimated size
/// (KeyChunkBytes + EncodedColumnBytes of its views) is at most
/// `max_chunk_bytes`, payload never runs ahead of the keys, and every column's
/// chunks, in order, are its rows. An empty build is one chunk without rows.
/// The views borrow the caller's columns, which must outlive the chunker.
class BuildChunker {
 public:
  /// `values` is empty or as long as `keys`; every payload view has keys.size()
  /// rows and passes CheckColumnView, and key columns pass CheckKeys (the
  /// caller checks them). INVALID_ARGUMENT when `chunk_rows` is 0 or
  /// `max_chunk_bytes` cannot hold one key row (the widest, for key columns) or
  /// one row of a payload column (naming the column, the row and the bytes).
  static absl::StatusOr<BuildChunker> Make(Keys keys, std::span<const uint32_t> values,
                                           std::span<const ColumnView> payload, size_t chunk_rows,
                                           uint64_t max_chunk_bytes);

  /// The next chunk, or nullopt after the last.
  std::optional<BuildChunk> Next();

 private:
  BuildChunker() = default;

  Keys keys_;
  std::span<const uint32_t> values_;
  std::vector<ColumnView> payload_;
  size_t chunk_rows_ = 0;
  uint64_t max_bytes_ = 0;
  uint64_t key_pos_ = 0;       // key rows chunked so far
  std::vector<uint64_t> pos_;  // rows chunked so far, per payload column
  bool sent_any_ = false;
};

}  // namespace gpujoin::client::detail
