// One Hash batch (columns hashed row-wise into one composite hash) and its answer.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "gpujoin/client/hash_column.hpp"

namespace gpujoin::client {

// HashColumn (hash_column.hpp): one hashed column of any type, nested and
// dictionary columns included; a ColumnView converts to it.

/// One Hash batch: columns of equal length hashed row-wise into one composite hash.
struct HashBatch {
  std::vector<HashColumn> columns;
  uint32_t bits = 64;  ///< 32 or 64
};

/// The answer to one Hash batch.
struct HashResult {
  uint64_t batch_id = 0;
  uint32_t bits = 64;
  std::vector<uint64_t> hashes;   ///< one per row (32-bit hashes widened); 0 for null rows
  std::vector<uint8_t> validity;  ///< Arrow bitmap, LSB order: 1 = valid row
  uint64_t null_count = 0;
  absl::Status error;
  std::chrono::nanoseconds latency{0};

  /// True when row r has a hash (is not null).
  bool Valid(size_t r) const { return (validity[r / 8] >> (r % 8)) & 1; }
};

}  // namespace gpujoin::client
