// Mutations of a built index: a batch of upserts and deletes applied to what
// an index holds (docs/engine.md, "Mutations"). Plain C++, like the rest of the
// engine's public API.
//
// The semantics are the same for every index kind and backend:
//  - deletes first, then upserts;
//  - a delete removes every row of its key (kLowestRow: the key and its value
//    and payload; kKeepAll: the key's whole group); each distinct delete key
//    counts once: as deleted when present, else as not found, the reserved key
//    word and keys with a null column (which no index can hold) included (key
//    columns compare null for null and value for value); a key repeated in the
//    delete list counts once;
//  - kLowestRow upsert: insert or assign. Within a batch the last occurrence of
//    a key wins: the key's value and payload are those of that row;
//  - kKeepAll upsert: the row is appended to its key's group (the existing rows
//    first, then the batch's rows in batch order);
//  - an upsert key that no index can hold (the reserved key word, a null key
//    column) is INVALID_ARGUMENT naming its row, and nothing changes.
//
// MutationRebuild applies a batch by building a new index beside the source:
// the source's image (Backend::ExportIndex) and the batch are merged on the
// host into one build input (every live key's rows, then the batch's new
// rows), which the target backend builds like any other build. It serves every
// index kind, and it is how a table grows (a target of larger capacity): the
// result holds no tombstones and its payload is compacted.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpujoin/engine/column.hpp"
#include "gpujoin/engine/hash_index.hpp"
#include "gpujoin/engine/key_columns.hpp"
#include "gpujoin/engine/types.hpp"

namespace gpujoin::engine {

class Backend;

/// One batch of changes to an index of key kind K (borrowed host memory, as
/// for graph nodes).
template <IndexKey K>
struct MutationBatchT {
  /// Keys to delete (applied first).
  KeyChunks<K> delete_keys;
  /// Keys to upsert, one per upsert row.
  KeyChunks<K> upsert_keys;
  /// The value of each upsert row (required when there are upsert rows; a
  /// row-ID index's caller passes the row IDs it assigns).
  ChunkedU32 values;
  /// One column per payload column of the index, in its order and of its
  /// types, with the upsert rows' values. Empty when the index has no payload.
  std::vector<ColumnView> payload;
};

/// OK, or INVALID_ARGUMENT naming the field and sizes when `batch` does not
/// fit `index` (built, of key kind K): key columns of the index's schema,
/// values for every upsert row, and the index's payload columns (types and
/// rows) when there are upsert rows. Prepare and the backends call it first.
template <IndexKey K>
absl::Status ValidateMutationBatch(const MutationBatchT<K>& batch, const HashIndex& index);

/// OK, or INVALID_ARGUMENT naming the first upsert row whose key no index can
/// hold: the reserved key word, or a null in a key column.
template <IndexKey K>
absl::Status CheckUpsertKeys(const MutationBatchT<K>& batch);

/// What a batch did, counted per distinct key.
struct MutationCounts {
  uint64_t upsert_rows = 0;
  /// Distinct upserted keys absent before the upserts (after the deletes).
  uint64_t inserted_keys = 0;
  /// Distinct upserted keys present before the upserts.
  uint64_t updated_keys = 0;
  /// Distinct delete keys that were present.
  uint64_t deleted_keys = 0;
  /// Distinct delete keys that were absent (reserved and null keys included,
  /// each distinct one once).
  uint64_t not_found_keys = 0;
  /// Rows the deletes removed (kKeepAll: every row of each deleted key).
  uint64_t deleted_rows = 0;

  friend bool operator==(const MutationCounts&, const MutationCounts&) = default;
};

/// Reverts an in-place mutation (Backend::MutateInPlace) exactly, as long as
/// nothing else wrote the index since.
class MutationUndo {
 public:
  virtual ~MutationUndo() = default;
  virtual void Undo() = 0;
};

/// What Backend::MutateInPlace did.
struct InPlaceMutation {
  /// False: the backend does not change this index kind in place, or the
  /// batch needs a larger table (max_load_factor, the probe bound); nothing
  /// changed, and the caller applies the batch with MutationRebuild.
  bool applied = false;
  MutationCounts counts;
  /// Applied: reverts the batch (e.g. when it cannot be logged).
  std::unique_ptr<MutationUndo> undo;
};

/// A batch merged with the content of a source index, ready to be built into
/// an index of any capacity (MutationRebuild::Prepare, then BuildInto).
class MutationRebuild {
 public:
  virtual ~MutationRebuild() = default;

  /// Exports `source` from `backend` (synchronous: the caller keeps `source`
  /// from being written meanwhile) and merges `batch` into its content.
  /// INVALID_ARGUMENT for an upsert key no index can hold (naming the row), for
  /// a batch whose values or payload do not match the upsert rows or the
  /// index's payload columns (naming the field and sizes), or whose key kind is
  /// not the index's; RESOURCE_EXHAUSTED when host memory runs out.
  template <IndexKey K>
  static absl::StatusOr<std::unique_ptr<MutationRebuild>> Prepare(const Backend& backend,
                                                                  const HashIndex& source,
                                                                  const MutationBatchT<K>& batch);

  /// The counts of the batch.
  virtual const MutationCounts& counts() const = 0;
  /// Distinct keys the result holds.
  virtual uint64_t live_keys() const = 0;
  /// Rows of the merged build input (kLowestRow: live_keys(); kKeepAll: the
  /// rows of every group).
  virtual uint64_t rows() const = 0;
  /// The source's spec.
  virtual const HashIndexSpec& source_spec() const = 0;
  /// The build input's payload columns and key columns (memory estimates:
  /// Backend::PayloadBytes, KeyColumnBytes) and its shape.
  virtual std::vector<PayloadShape> payload_shapes() const = 0;
  /// kColumns: the bytes the merged key columns occupy once stored (0 else).
  virtual uint64_t key_column_bytes() const = 0;

  /// Builds the merged content into `target` (an index of `backend`, any
  /// capacity, the source's key type and duplicate policy) on `backend`.
  /// FAILED_PRECONDITION when the build had overflow rows (a larger capacity or
  /// probe bound is needed; the target must then be discarded); else the
  /// target holds every live key. `statistics`: the build's.
  virtual absl::Status BuildInto(Backend& backend, HashIndex* target,
                                 BuildStatistics* statistics) = 0;
};

/// The capacity a mutation result of `live_keys` keys needs: the smallest power
/// of two >= `current` holding them at no more than `max_load_factor`
/// (0 < f <= 1). INVALID_ARGUMENT naming the limit when it exceeds 2^31.
absl::StatusOr<uint32_t> GrownCapacity(uint64_t live_keys, uint32_t current,
                                       double max_load_factor);

}  // namespace gpujoin::engine
