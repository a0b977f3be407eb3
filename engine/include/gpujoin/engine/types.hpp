// Common value types of the gpujoin engine: the reserved key, statistics blocks,
// chunked column views and aggregation operations. Plain C++; no CUDA, gRPC or
// protobuf headers may be included from the engine's public API.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace gpujoin::engine {

/// The reserved empty-slot key. Build rows holding it are counted invalid and
/// never inserted; query rows holding it are reported missing without probing.
/// Lookup writes it as the value of every missing row.
inline constexpr uint32_t kEmptyKey = 0xffffffffu;

/// One logical column stored as ordered chunks. Chunk boundaries carry no
/// meaning: row r of the logical column is found by walking the chunks in order.
/// Empty chunks are allowed and add no rows. The views are borrowed: the caller
/// keeps the memory alive until the operation that reads them has finished.
template <typename T>
using Chunked = std::vector<std::span<const T>>;
using ChunkedU32 = Chunked<uint32_t>;
using ChunkedF32 = Chunked<float>;

/// Total number of logical rows in a chunked column.
template <typename T>
inline size_t TotalRows(const Chunked<T>& chunks) {
  size_t n = 0;
  for (const auto& c : chunks) n += c.size();
  return n;
}

/// Statistics of one build, in the reference order
/// [unique keys, duplicate rows, overflow rows, invalid rows, total probes, max probes].
/// For every build: unique_keys + duplicate_rows + overflow_rows + invalid_rows == rows.
struct BuildStatistics {
  uint64_t unique_keys = 0;     ///< distinct keys retained in the table (occupied slots)
  uint64_t duplicate_rows = 0;  ///< valid rows whose key was already retained
  uint64_t overflow_rows = 0;   ///< valid rows whose key found no slot within the probe bound
  uint64_t invalid_rows = 0;    ///< rows holding kEmptyKey, or masked out by a batch validity mask
  uint64_t total_probes = 0;    ///< slots examined by all rows (invalid rows examine none)
  uint64_t max_probes = 0;      ///< most slots examined by one row

  friend bool operator==(const BuildStatistics&, const BuildStatistics&) = default;
};

/// Statistics of one lookup or join batch, in the reference order
/// [found keys, missing keys, total probes, max probes].
struct QueryStatistics {
  uint64_t found = 0;         ///< query rows whose key is in the table
  uint64_t missing = 0;       ///< query rows whose key is not (including kEmptyKey rows)
  uint64_t total_probes = 0;  ///< slots examined by all query rows
  uint64_t max_probes = 0;    ///< most slots examined by one query row

  friend bool operator==(const QueryStatistics&, const QueryStatistics&) = default;
};

/// Grouped aggregation operations. kCount writes uint32 output; the others read
/// float32 values and write float32 output.
enum class AggregateOp { kCount, kSum, kMin, kMax, kMean };

/// "count", "sum", "min", "max", "mean".
std::string_view AggregateOpName(AggregateOp op);

}  // namespace gpujoin::engine
