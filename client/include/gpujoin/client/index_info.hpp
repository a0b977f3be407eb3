// What the gpujoin C++ client reports about a resident index: its duplicate
// policy, build statistics and description (IndexInfo), and what DropIndex freed.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "gpujoin/client/column.hpp"
#include "gpujoin/client/keys.hpp"
#include "gpujoin/common/operation_kinds.hpp"

namespace gpujoin::client {

// What a build keeps of rows whose key is already present (IndexSpec::duplicates):
// kLowestRow (many-to-one joins) or kKeepAll (every valid row, in source-row order
// per key). The enum, its names and parser: gpujoin/common/operation_kinds.hpp.
using ::gpujoin::DuplicatePolicy;
using ::gpujoin::DuplicatePolicyName;
using ::gpujoin::ParseDuplicatePolicy;

/// Build statistics [unique keys, duplicate rows, overflow rows, invalid rows,
/// total probes, max probes] as the server reports them.
struct BuildStatistics {
  uint64_t unique_keys = 0;
  uint64_t duplicate_rows = 0;  ///< rows beyond the first of each key (kept by kKeepAll)
  uint64_t overflow_rows = 0;
  uint64_t invalid_rows = 0;
  uint64_t total_probes = 0;
  uint64_t max_probes = 0;
  uint64_t max_group_rows = 0;  ///< kKeepAll: most rows kept under one key; kLowestRow: 0
};

/// A resident index as described by the server (IndexInfo in the proto).
struct IndexInfo {
  std::string name;
  uint64_t version = 0;          ///< increases with every successful build of the name
  uint32_t capacity = 0;         ///< table slots (a power of two)
  uint32_t max_probe_count = 0;  ///< effective probe bound
  uint32_t first_value = 0;      ///< generated values: first_value + global source row
  bool explicit_values = false;
  bool batch_mode = false;
  uint64_t rows = 0;  ///< source rows of the build
  BuildStatistics statistics;
  double load_factor = 0;  ///< unique_keys / capacity
  uint64_t device_bytes = 0;
  double build_seconds = 0;
  std::string backend;  ///< "cuda" or "cpu"
  int64_t built_unix_millis = 0;
  KeyType key_type = KeyType::kUint32;
  /// kColumns: the key schema as the spec declared it (its stored key columns
  /// are within device_bytes); empty for integer keys.
  std::vector<KeyColumnSpec> key_columns;
  std::vector<PayloadColumnInfo> payload;  ///< in the order the spec declared them
  uint64_t payload_bytes = 0;              ///< sum of payload[].bytes (within device_bytes)
  DuplicatePolicy duplicates = DuplicatePolicy::kLowestRow;
  /// The version in the index's snapshot file under --data-dir (what a restart
  /// serves): `version` once its background write is done; 0 without one.
  uint64_t durable_version = 0;
  /// Mutate batches applied since the index was built or loaded (a build
  /// starts it at 0; a snapshot keeps it).
  uint64_t mutation_sequence = 0;
  /// The most unique keys per slot before an upsert grows the table (the
  /// spec's, or the server's default 0.8).
  double max_load_factor = 0;
  /// Row-ID indexes: the value the next upserted row gets (first_value + rows,
  /// then one more per upserted row).
  uint64_t next_row_id = 0;
  uint64_t rehashes = 0;  ///< times Mutate grew the table since the build
  bool replicated = false;  ///< IndexSpec::replicated: every shard holds every row
};

/// What DropIndex freed.
struct DropResult {
  uint64_t dropped_version = 0;
  uint64_t freed_bytes = 0;
};

}  // namespace gpujoin::client
