// Common value types of the gpujoin engine: key types and their reserved keys,
// statistics blocks, chunked column views and aggregation operations. Plain C++; no CUDA, gRPC or
// protobuf headers may be included from the engine's public API.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "gpujoin/common/operation_kinds.hpp"

namespace gpujoin::engine {

// The key word of an index (HashIndexSpec::key_type) and the aggregation
// operations (gpujoin/common/operation_kinds.hpp). Values stay uint32 for both
// key words; kCount writes uint32 output.
using ::gpujoin::AggregateOp;
using ::gpujoin::AggregateOpName;
using ::gpujoin::KeyType;
using ::gpujoin::KeyTypeName;

/// The key words an index can hold: the template parameter of the key-carrying
/// nodes and of both backends' implementations.
template <class K>
concept KeyWord = std::same_as<K, uint32_t> || std::same_as<K, uint64_t>;

/// The reserved empty-slot key of key word K: all ones. Build rows holding it are
/// counted invalid and never inserted; query rows holding it are reported missing
/// without probing.
template <class K>
inline constexpr K kEmptyKeyOf = ~K{0};

/// The reserved key of a uint32 index (0xffffffff). Lookup also writes it as the
/// value of every missing row, whatever the key type (values are uint32).
inline constexpr uint32_t kEmptyKey = kEmptyKeyOf<uint32_t>;
/// The reserved key of a uint64 index (0xffffffffffffffff). 0xffffffff is an
/// ordinary key there.
inline constexpr uint64_t kEmptyKey64 = kEmptyKeyOf<uint64_t>;

/// The KeyType of key word K.
template <class K>
constexpr KeyType KeyTypeOf() {
  static_assert(KeyWord<K>, "keys are uint32_t or uint64_t");
  return std::same_as<K, uint32_t> ? KeyType::kUint32 : KeyType::kUint64;
}

/// Bytes of the key word one slot of a `type` index holds: 4 for uint32, 8 for
/// uint64 and for a key schema (its slots hold 64-bit fingerprints).
constexpr size_t KeyBytes(KeyType type) { return type == KeyType::kUint32 ? 4 : 8; }

/// One logical column stored as ordered chunks. Chunk boundaries carry no
/// meaning: row r of the logical column is found by walking the chunks in order.
/// Empty chunks are allowed and add no rows. The views are borrowed: the caller
/// keeps the memory alive until the operation that reads them has finished.
template <typename T>
using Chunked = std::vector<std::span<const T>>;
using ChunkedU32 = Chunked<uint32_t>;
using ChunkedU64 = Chunked<uint64_t>;
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
  uint64_t invalid_rows =
      0;  ///< rows holding the reserved key, or masked out by a batch validity mask
  uint64_t total_probes = 0;  ///< slots examined by all rows (invalid rows examine none)
  uint64_t max_probes = 0;    ///< most slots examined by one row
  /// Extension (DuplicatePolicy::kKeepAll only; 0 for kLowestRow): the most rows
  /// kept under one key.
  uint64_t max_group_rows = 0;

  friend bool operator==(const BuildStatistics&, const BuildStatistics&) = default;
};

/// Statistics of one lookup or join batch, in the reference order
/// [found keys, missing keys, total probes, max probes].
struct QueryStatistics {
  uint64_t found = 0;         ///< query rows whose key is in the table
  uint64_t missing = 0;       ///< query rows whose key is not (including reserved-key rows)
  uint64_t total_probes = 0;  ///< slots examined by all query rows
  uint64_t max_probes = 0;    ///< most slots examined by one query row

  friend bool operator==(const QueryStatistics&, const QueryStatistics&) = default;
};

}  // namespace gpujoin::engine
