// One Mutate batch (upserts and deletes applied to a live index) and its answer.
#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "gpujoin/client/column.hpp"
#include "gpujoin/client/index_info.hpp"
#include "gpujoin/client/keys.hpp"

namespace gpujoin::client {

/// One Mutate batch (borrowed), applied by the server whole or not at all:
/// deletes first, then upserts. kLowestRow: an upsert inserts or assigns its
/// key (the last occurrence of a key in the batch wins); kKeepAll: it appends
/// a row to the key's group. A delete removes every row of its key.
struct MutateBatch {
  /// Upsert keys, of the index's key (integers or key columns); empty: none.
  Keys keys;
  /// An index built with explicit_values: one value per upsert key. A row-ID
  /// index: empty (the server gives upserted rows the next row IDs).
  std::span<const uint32_t> values;
  /// With upserts: one view per payload column of the index, each named and
  /// with one row per upsert key; else empty.
  std::vector<ColumnView> payload;
  /// Keys to delete, of the index's key; empty: none.
  Keys delete_keys;
};

/// The answer to one Mutate batch (counts per distinct key).
struct MutateResult {
  uint64_t batch_id = 0;           ///< 0-based position of the batch in the stream
  uint64_t index_version = 0;      ///< the build version mutated (a Mutate keeps it)
  uint64_t mutation_sequence = 0;  ///< the index's sequence after this batch
  uint64_t upsert_rows = 0;
  uint64_t inserted_keys = 0;   ///< distinct upserted keys that were absent
  uint64_t updated_keys = 0;    ///< distinct upserted keys that were present
  uint64_t deleted_keys = 0;    ///< distinct delete keys that were present
  uint64_t not_found_keys = 0;  ///< distinct delete keys that were absent
  uint64_t deleted_rows = 0;    ///< rows the deletes removed (kKeepAll: whole groups)
  BuildStatistics statistics;   ///< the index's, after the batch
  uint32_t capacity = 0;        ///< the table's capacity after the batch
  double load_factor = 0;
  bool rehashed = false;  ///< the batch made the table grow
  bool durable = false;   ///< in the index's write-ahead log before the answer (--data-dir)
  absl::Status error;     ///< in-band error for this batch (nothing changed); counts empty then
  std::chrono::nanoseconds latency{0};  ///< from the batch's write to its answer's arrival
};

}  // namespace gpujoin::client
