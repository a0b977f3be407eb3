// BuildIndex's input: the index parameters (IndexSpec) and the borrowed
// chunks a ChunkSource returns (BuildChunk).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "gpujoin/client/column.hpp"
#include "gpujoin/client/index_info.hpp"
#include "gpujoin/client/keys.hpp"

namespace gpujoin::client {

/// Index parameters (IndexSpec in the proto). Give `capacity` (a power of two),
/// or leave it 0 and give `expected_rows` and `target_load_factor` (0 < f <= 1;
/// 0 = the server's default 0.5) to let the server choose.
struct IndexSpec {
  std::string name;  ///< [A-Za-z0-9_.-]{1,128}
  uint32_t capacity = 0;
  uint64_t expected_rows = 0;
  double target_load_factor = 0;
  uint32_t max_probe_count = 0;  ///< 0 = capacity
  uint32_t first_value = 0;      ///< generated values: first_value + global row
  bool explicit_values = false;  ///< chunks carry `values`; else values are generated
  bool batch_mode = false;       ///< chunks carry a row base and optional validity
  bool replace = false;          ///< rebuild a live name instead of ALREADY_EXISTS
  /// The key: an integer word, or kColumns with `key_columns`; every chunk's
  /// keys must fit it (CheckKeysFor: INVALID_ARGUMENT before the chunk is sent).
  KeyType key_type = KeyType::kUint32;
  /// kColumns only (1 to 8, required then; empty otherwise): the key schema,
  /// in the order chunks carry their key columns (Keys of ColumnViews).
  std::vector<KeyColumnSpec> key_columns;
  /// Payload columns stored beside the index, aligned with the build's source
  /// rows (batch mode: every row of every chunk, masked-out rows included).
  /// Names unique; kString bytes must be UTF-8 (the server checks), kBinary's are not checked.
  std::vector<PayloadColumnSpec> payload;
  /// Which rows of a repeated key the index keeps (kKeepAll: all of them, and
  /// each one's payload).
  DuplicatePolicy duplicates = DuplicatePolicy::kLowestRow;
  /// Answer only once the new version is in its snapshot file (written and
  /// fsync'd) on a server with --data-dir; a write that fails fails the call
  /// (the index is installed and serving). FAILED_PRECONDITION without --data-dir.
  bool wait_durable = false;
  /// Mutate: the most unique keys per slot the table may hold before an upsert
  /// makes it grow (an online rehash into a larger table); 0 < f <= 1, 0 = the
  /// server's default (0.8).
  double max_load_factor = 0;
  /// Through gpujoin-router or `gpujoind --devices`: every shard holds every
  /// row, and each lookup or join batch runs whole on one of them (small, hot
  /// indexes); false = partitioned by key.
  bool replicated = false;
};

/// One build chunk (borrowed; see "Borrowed memory" in client.hpp). With
/// `explicit_values`, values belong to the same logical sequence as the keys;
/// their chunk boundaries may differ but the totals must match at the end.
/// Payload views likewise: each names a declared column and has its type (else
/// INVALID_ARGUMENT before the chunk is sent); each column's views, in chunk
/// order, are its rows, with boundaries of their own; a chunk may carry payload only.
struct BuildChunk {
  Keys keys;                           ///< of IndexSpec::key_type (key columns: its schema)
  std::span<const uint32_t> values;    ///< only with IndexSpec::explicit_values
  uint32_t row_base = 0;               ///< only with IndexSpec::batch_mode
  std::span<const uint32_t> validity;  ///< only with batch_mode; empty = all valid
  std::vector<ColumnView> payload;     ///< rows of declared payload columns
  /// Not OK: the source failed (a bad input cell, an unreadable file). The
  /// upload is abandoned, the call cancelled and this status returned: the
  /// server builds nothing (a live version of the name keeps serving).
  absl::Status error;
};

/// Returns the next chunk, or std::nullopt when there are no more.
using ChunkSource = std::function<std::optional<BuildChunk>()>;

}  // namespace gpujoin::client
