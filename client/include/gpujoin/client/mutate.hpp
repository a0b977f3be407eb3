// Changes to a live index (the Mutate stream): one batch of upserts and
// deletes (MutateBatch), its answer (MutateResult), the options of the
// whole-input helpers (MutateOptions) and what they applied (MutateSummary).
//
// Semantics (docs/api.md "Mutate"): a batch is applied atomically (a lookup or
// join sees all of it or none) once every check passed; a bad batch is
// answered in-band (MutateResult::error) and changes nothing. Deletes are
// applied before upserts. A kLowestRow upsert inserts or assigns (the last
// occurrence of a key in the batch wins); a kKeepAll upsert appends its rows to
// their keys' groups, and a delete removes every row of a key. Row-ID indexes
// (IndexSpec::explicit_values false) give upserted rows the next row IDs
// (IndexInfo::next_row_id on) and take no values.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpujoin/client/column.hpp"
#include "gpujoin/client/index_info.hpp"
#include "gpujoin/client/keys.hpp"
#include "gpujoin/client/progress.hpp"
#include "gpujoin/client/stream_options.hpp"

namespace gpujoin::client {

/// One Mutate batch (borrowed; see "Borrowed memory" in client.hpp): upserts
/// and/or deletes of one index, each keyed as the index is (Keys: uint32,
/// uint64 or key columns). Either side may be empty; a batch with neither is
/// refused by the server.
struct MutateBatch {
  /// The upsert rows' keys.
  Keys upsert_keys;
  /// explicit_values indexes: one value per upsert row (required); row-ID
  /// indexes: empty (the rows get the next row IDs).
  std::span<const uint32_t> values;
  /// One view per payload column of the index, each named and with one row
  /// per upsert row; every declared column is required when there are upserts.
  std::vector<ColumnView> payload;
  /// The keys to delete: every row of each is removed; an absent key is counted
  /// in MutateResult::not_found_keys.
  Keys delete_keys;
};

/// The answer to one Mutate batch (MutateResponse). The counts are zero when
/// `error` is set (the batch changed nothing).
struct MutateResult {
  uint64_t batch_id = 0;           ///< 0-based position of the batch in the stream
  uint64_t index_version = 0;      ///< the build version mutated (a Mutate keeps it)
  uint64_t mutation_sequence = 0;  ///< the index's mutation sequence after this batch
  uint64_t upsert_rows = 0;        ///< upsert rows in the batch
  uint64_t inserted_keys = 0;      ///< distinct upserted keys that were absent
  uint64_t updated_keys = 0;       ///< distinct upserted keys that were present
  uint64_t deleted_keys = 0;       ///< delete keys that were present (now removed)
  uint64_t not_found_keys = 0;     ///< delete keys that were absent (distinct)
  uint64_t deleted_rows = 0;       ///< rows removed (kKeepAll: whole groups)
  BuildStatistics statistics;      ///< the index's statistics after the batch
  uint32_t capacity = 0;           ///< the table's capacity after the batch
  double load_factor = 0;
  bool rehashed = false;  ///< the batch made the table grow
  /// With --data-dir: the batch was in the index's write-ahead log before the answer.
  bool durable = false;
  absl::Status error;                   ///< in-band error of this batch
  std::chrono::nanoseconds latency{0};  ///< from the batch's write to its answer's arrival
};

/// One request of a MutateAll call: the input rows it carried and its answer.
struct MutateRequestResult {
  uint64_t delete_begin = 0;  ///< delete rows [delete_begin, delete_end) of the input
  uint64_t delete_end = 0;
  uint64_t upsert_begin = 0;  ///< upsert rows [upsert_begin, upsert_end) of the input
  uint64_t upsert_end = 0;
  MutateResult result;
};

/// What MutateAll (Upsert, Delete) applied. A call whose input does not fit in
/// one request (MutateOptions::batch_rows, the message size) is split into
/// several Mutate requests: each is atomic on its own, the call as a whole is
/// not (a lookup running beside it may see some requests applied and not
/// others). The requests carry the deletes first, so the call's effect is the
/// one batch's: every delete before any upsert, and among the upserts the
/// input's order (the last occurrence of a key wins; kKeepAll appends in order).
struct MutateSummary {
  /// Every answered request, in order.
  std::vector<MutateRequestResult> requests;
  /// Sums over the applied requests (those without an error).
  uint64_t upsert_rows = 0;
  uint64_t inserted_keys = 0;
  uint64_t updated_keys = 0;
  uint64_t deleted_keys = 0;
  uint64_t not_found_keys = 0;
  uint64_t deleted_rows = 0;
  uint64_t rehashes = 0;          ///< requests that made the table grow
  uint64_t applied_requests = 0;  ///< requests without an error
  /// Of the last applied request (for an empty input, DescribeIndex's): the
  /// index's version, mutation sequence, capacity, load factor and statistics.
  uint64_t index_version = 0;
  uint64_t mutation_sequence = 0;
  uint32_t capacity = 0;
  double load_factor = 0;
  BuildStatistics statistics;
  /// Every applied request was durable (in the write-ahead log; --data-dir).
  bool durable = false;

  /// Adds one answered request (sums only when it has no error).
  void Add(MutateRequestResult&& request);
};

/// Options of MutateAll, Upsert and Delete.
struct MutateOptions {
  /// Most upsert plus delete rows per request (>= 1); the server's
  /// ServerInfo::max_mutation_rows bounds it further (one GetServerInfo call
  /// first). Requests are also cut to fit ConnectOptions::max_message_bytes
  /// (less 1 KiB).
  size_t batch_rows = 1 << 16;
  /// After a request the server refuses, send the next ones anyway (else no
  /// further request is sent; those already in flight are still answered and
  /// reported).
  bool continue_on_error = false;
  StreamOptions stream;
  /// Called as requests are answered: rows_sent counts the answered upsert and
  /// delete rows, total_rows all of them.
  ProgressCallback progress;
  /// When the call fails after requests were sent (an in-band error, a broken
  /// stream), receives the requests answered before, each applied or refused
  /// on its own: what the call left applied. May be null.
  MutateSummary* partial = nullptr;
};

/// The requests of a whole-input mutation: `changes` cut into batches (views
/// of its rows) of at most `max_rows` upsert plus delete rows whose encoded
/// size is at most `max_bytes`, the delete rows first, then the upsert rows
/// (a batch may carry the last deletes and the first upserts). The ranges each
/// batch carries are in `ranges`. An input without rows gives no batch.
/// INVALID_ARGUMENT when `max_rows` is 0, when one row (a key, its value and
/// payload) does not fit in `max_bytes` (naming the row and the bytes), and for
/// inputs that fail CheckMutateBatch.
struct MutatePlan {
  std::vector<MutateBatch> batches;
  std::vector<MutateRequestResult> ranges;  ///< the rows of each batch (results empty)
};
absl::StatusOr<MutatePlan> PlanMutation(const MutateBatch& changes, size_t max_rows,
                                        uint64_t max_bytes);

/// The client-side checks of a batch before it is sent: key columns pass
/// CheckKeys; values are empty or one per upsert key; payload views have
/// distinct, non-empty names, one row per upsert key and pass
/// CheckColumnView; no values or payload without upsert keys. INVALID_ARGUMENT
/// naming `what` and the field otherwise.
absl::Status CheckMutateBatch(const MutateBatch& batch, std::string_view what);

/// CheckMutateBatch, and that the batch fits `index` (a DescribeIndex answer):
/// its keys the index's key (CheckKeysFor), values exactly when it has
/// explicit values, and with upserts one view per payload column of the index,
/// of its type. INVALID_ARGUMENT naming the field and the index otherwise.
absl::Status CheckMutateBatchFor(const MutateBatch& batch, const IndexInfo& index,
                                 std::string_view what);

}  // namespace gpujoin::client
