// The request operations of the GpuJoin service, independent of gRPC transport:
// decode and validate a request (wire/), turn it into an engine command graph, run
// it on the backend and encode the response (wire/). Called on executor threads by
// the reactors in rpc/stream_reactor.cpp and rpc/build_reactor.cpp; every method
// is thread-safe. One file per operation defines its methods: lookup.cpp,
// join.cpp (with result_budget.cpp), aggregate.cpp, hash.cpp, index_admin.cpp
// (drop, list, describe, server info), index_files.cpp (save, load, the data
// directory's files), build_session.cpp; operations.cpp holds what they share.
//
// Errors are absl::Status values whose codes map one-to-one onto gRPC codes; their
// messages name the request field and the sizes involved.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "gpujoin/engine/aggregation.hpp"
#include "gpujoin/engine/backend.hpp"
#include "gpujoin/engine/mutation.hpp"
#include "wire/column_codec.hpp"
#include "gpujoin/server/config.hpp"
#include "state/payload_dictionaries.hpp"
#include "ops/gather.hpp"
#include "state/index_registry.hpp"
#include "wire/key_columns_wire.hpp"
#include "wire/lookup_wire.hpp"
#include "state/memory_budget.hpp"
#include "observe/metrics.hpp"
#include "wire/payload_staging.hpp"
#include "ops/aggregate.hpp"
#include "ops/build_session.hpp"
#include "ops/query.hpp"
#include "gpujoin/v1/gpujoin.pb.h"

namespace gpujoin::server {

class SnapshotStore;
class MutationLogs;

/// The shared state the operations work on. Not owned.
struct ServiceState {
  engine::Backend* backend = nullptr;
  engine::BackendInfo backend_info;
  IndexRegistry* registry = nullptr;
  MemoryBudget* budget = nullptr;
  /// Host memory for build input held by open builds (--max-staged-bytes); the
  /// same bytes also count against `budget` while they are held.
  MemoryBudget* staging = nullptr;
  /// Host memory held by stream responses waiting to be written
  /// (--max-pending-response-bytes; the stream reactors reserve and release it).
  /// Null: not bounded (operation tests without a server).
  MemoryBudget* pending_responses = nullptr;
  Metrics* metrics = nullptr;
  ServerConfig config;
  /// Called (possibly repeatedly, from any thread) when a backend call failed and
  /// the backend reports itself unhealthy afterwards (a fatal device error).
  std::function<void()> on_backend_fatal;
  /// --data-dir's snapshots (builds schedule writes, drops delete them, SaveIndex
  /// and LoadIndex use it); null when --data-dir is unset.
  SnapshotStore* snapshots = nullptr;
  /// --data-dir's write-ahead logs of Mutate batches (with `snapshots`).
  MutationLogs* mutation_logs = nullptr;
};

class Operations {
 public:
  explicit Operations(ServiceState state) : state_(std::move(state)) {}

  const ServiceState& state() const { return state_; }

  /// One Lookup batch; fills `response` (except batch_id).
  absl::Status Lookup(const v1::LookupRequest& request, v1::LookupResponse* response);
  /// One Lookup batch whose keys are `rows` (> 0) packed keys of `key_type` (sent
  /// in `keys` for uint32, `keys64` for uint64) that `copy_keys` writes to the
  /// address it is given (rows x 4 or 8 bytes of a backend host buffer: the only
  /// host copy of the keys); `fields` holds the request's other fields (the field
  /// of those keys is ignored). Same checks, errors and metrics as Lookup; the
  /// outputs are left in `result->outputs` (a backend host buffer) instead of a
  /// response message.
  absl::Status LookupPacked(const v1::LookupRequest& fields, engine::KeyType key_type,
                            uint64_t rows, const std::function<void(uint8_t*)>& copy_keys,
                            PackedLookupResult* result);
  /// One Join request (one or several left batches), its whole result in
  /// `response` (JoinBatchResult.batch set), which may exceed --max-message-bytes:
  /// JoinParts cuts it into messages. Its host bytes (pairs, found, probes,
  /// gathered columns) are bounded by --max-result-bytes (RESOURCE_EXHAUSTED).
  absl::Status Join(const v1::JoinRequest& request, v1::JoinResponse* response);
  /// One Aggregate batch: this batch's result into `response` and `partial`
  /// (accumulation happens in AggregateStream::Complete, in stream order).
  absl::Status Aggregate(const v1::AggregateRequest& request, v1::AggregateResponse* response,
                         AggregatePartial* partial);
  /// One Mutate batch (ops/mutate.cpp): applied whole or not at all; fills
  /// `response` (except batch_id). With --data-dir the batch is in the index's
  /// write-ahead log, durable as --wal-sync says, before this returns.
  absl::Status Mutate(const v1::MutateRequest& request, v1::MutateResponse* response);
  /// Start-up: applies a batch of `version`'s write-ahead log again (not
  /// logged).
  absl::Status ReplayMutation(const IndexVersion& version, const v1::MutateRequest& request);
  /// One message of a Query stream (ops/query.cpp), in stream order: the
  /// first compiles the plan; each batch runs it; `end` is the client's
  /// half-close (aggregate plans answer it with their groups).
  absl::Status Query(QueryStream& stream, const v1::QueryRequest& request, bool end,
                     QueryAnswer* answer);
  /// One Hash batch.
  absl::Status Hash(const v1::HashRequest& request, v1::HashResponse* response);

  absl::Status DropIndex(const v1::DropIndexRequest& request, v1::DropIndexResponse* response);
  absl::Status ListIndexes(v1::ListIndexesResponse* response);
  absl::Status DescribeIndex(const v1::DescribeIndexRequest& request,
                             v1::DescribeIndexResponse* response);
  /// `serving`: the health state to report.
  absl::Status GetServerInfo(bool serving, v1::GetServerInfoResponse* response);
  /// Writes the live version of request.name to a file under --data-dir now
  /// (FAILED_PRECONDITION without --data-dir; INVALID_ARGUMENT for a file name
  /// that is not a plain name; RESOURCE_EXHAUSTED for --max-snapshot-bytes or a
  /// full disk).
  absl::Status SaveIndex(const v1::SaveIndexRequest& request, v1::SaveIndexResponse* response);
  /// Loads a snapshot file under --data-dir as index request.name (its memory
  /// reserved first: RESOURCE_EXHAUSTED naming the budget), installs it and
  /// schedules its own snapshot. The file's errors: NOT_FOUND, DATA_LOSS
  /// (corrupt), OUT_OF_RANGE (truncated), FAILED_PRECONDITION (newer format).
  absl::Status LoadIndex(const v1::LoadIndexRequest& request, v1::LoadIndexResponse* response);
  /// The files under --data-dir (FAILED_PRECONDITION without it).
  absl::Status ListFiles(v1::ListFilesResponse* response);
  /// Deletes a file under --data-dir: a copy, or the snapshot of an index that
  /// is not live (FAILED_PRECONDITION for a live one's; NOT_FOUND when absent).
  absl::Status DeleteFile(const v1::DeleteFileRequest& request, v1::DeleteFileResponse* response);

  /// Copies a version's description into `info` (with the version its
  /// snapshot holds, under --data-dir).
  void FillIndexInfo(const IndexVersion& v, v1::IndexInfo* info) const;

  /// Runs `graph`, reporting a fatal backend error through on_backend_fatal.
  absl::Status RunGraph(const engine::CommandGraph& graph);

  /// Publishes device memory and index count gauges.
  void UpdateServiceGauges();

 private:
  friend class BuildSession;
  /// The live version of `name` (validating the name as `field`), or NOT_FOUND.
  absl::StatusOr<std::shared_ptr<const IndexVersion>> FindIndex(const std::string& name,
                                                                std::string_view field);
  /// The bytes a response message may carry: --max-message-bytes less room for
  /// framing (min(4096, half of it)).
  uint64_t ResponseLimit() const;
  /// INVALID_ARGUMENT when a response of `bytes` would exceed ResponseLimit().
  absl::Status CheckResponseSize(uint64_t bytes, std::string_view what) const;
  /// --max-result-bytes (kDefaultMaxResultBytes when unresolved).
  uint64_t ResultLimit() const;
  /// The checks of a lookup of `rows` keys on `version` gathering `selected`, after
  /// its keys decoded: the probe bound, the response size (INVALID_ARGUMENT) and
  /// --max-result-bytes (RESOURCE_EXHAUSTED). Returns the value bytes each selected
  /// string column may gather: an equal share of what is left of the smaller limit.
  absl::StatusOr<uint64_t> CheckLookup(const IndexVersion& version,
                                       const v1::LookupRequest& request, uint64_t rows,
                                       std::span<const SelectedColumn> selected) const;
  /// Runs a prepared lookup of keys of the index's key word Key into the given
  /// outputs (`probes` and `match_counts` empty unless asked; `gather` the
  /// selected columns' outputs) and records its metrics. Key: the index's key
  /// kind (a key word or engine::ColumnKey).
  template <typename Key>
  absl::Status RunLookup(const IndexVersion& version, const v1::LookupRequest& request,
                         engine::KeyChunks<Key> keys, std::span<uint32_t> values,
                         std::span<uint8_t> found, std::span<uint32_t> probes,
                         std::span<uint32_t> match_counts, std::vector<engine::GatherOutput> gather,
                         engine::QueryStatistics* stats);
  /// Join for an index whose key kind is Key.
  template <typename Key>
  absl::Status JoinOf(const IndexVersion& version, const v1::JoinRequest& request,
                      v1::JoinResponse* response);

  /// Mutate for an index whose key kind is Key, with the index's mutations
  /// serialized (its mutate_mu held). `ticket` non-null: the batch is
  /// appended to the index's write-ahead log before it is swapped in, and
  /// `ticket` receives what to Sync; `rewrite_snapshot` is set when the log
  /// asks for a snapshot (MutationLogs::Append).
  template <typename Key>
  absl::Status MutateOf(const IndexVersion& version, const v1::MutateRequest& request,
                        v1::MutateResponse* response, uint64_t* ticket, bool* rewrite_snapshot);
  /// MutateOf's path for what the backend does not change in place: the batch
  /// merged with the index's content and built beside the live table (grown
  /// when needed), logged and swapped in; its counts, whether it grew and the
  /// sequence after it.
  template <typename Key>
  absl::Status MutateByRebuild(const IndexVersion& version, const v1::MutateRequest& request,
                               const engine::MutationBatchT<Key>& batch,
                               const DictionaryAppend& dictionary_codes, uint64_t* ticket,
                               bool* rewrite_snapshot, engine::MutationCounts* counts,
                               bool* rehashed, uint64_t* sequence);

  ServiceState state_;
};

/// The key schema of `version` (empty for a key word), as requests are checked against it.
inline KeySchemaView KeySchemaOf(const IndexVersion& version) {
  return KeySchemaView{version.key_column_names, version.index->spec().key_columns};
}

/// "INVALID_ARGUMENT", "NOT_FOUND", ... (gRPC code names).
std::string StatusCodeName(absl::StatusCode code);

}  // namespace gpujoin::server
