// The request operations of the GpuJoin service, independent of gRPC transport:
// decode and validate a request, turn it into an engine command graph, run it on
// the backend and encode the response. Called on executor threads by the reactors
// in stream_reactor.cpp and build_reactor.cpp; every method is thread-safe.
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
#include "wire/column_codec.hpp"
#include "gpujoin/server/config.hpp"
#include "ops/gather.hpp"
#include "state/index_registry.hpp"
#include "wire/lookup_wire.hpp"
#include "state/memory_budget.hpp"
#include "observe/metrics.hpp"
#include "wire/payload_staging.hpp"
#include "gpujoin/v1/gpujoin.pb.h"

namespace gpujoin::server {

class SnapshotStore;

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
};

/// The partial result of one aggregate batch, merged in stream order.
struct AggregatePartial {
  std::vector<uint32_t> counts;  ///< kCount output, or contributing rows for value ops
  std::vector<float> values;     ///< output of the partial op (kSum for kMean); empty for kCount
  /// Typed requests: the partial op's result words and (integer sums) overflow flags.
  std::vector<uint64_t> words;
  std::vector<uint8_t> overflow;
};

class Operations;

/// Per-stream state of an Aggregate call: the operation and group count fixed by
/// the first admitted batch, and the running accumulation over all batches.
class AggregateStream {
 public:
  /// Cheap checks run in arrival order: op set, groups in range and equal to the
  /// stream's, the value type (float32 `values` or typed_values' type) equal to
  /// the stream's. The first admitted batch fixes op, groups and value type.
  /// `max_groups`: --max-aggregate-groups (RESOURCE_EXHAUSTED above it).
  absl::Status Admit(const v1::AggregateRequest& request, uint64_t max_message_bytes,
                     uint64_t max_groups);
  /// Merges a successful batch's partial (in stream order) and writes the totals
  /// into `response` (dropping per-batch results when accumulate_only).
  void Complete(const v1::AggregateRequest& request, v1::AggregateResponse* response,
                AggregatePartial& partial);

 private:
  std::optional<engine::AggregationAccumulator> accumulator_;
};

/// Accumulates the messages of one BuildIndex call and runs the build.
class BuildSession {
 public:
  explicit BuildSession(Operations* ops) : ops_(ops) {}

  /// Takes the next message: the spec first, then chunks. Validates it (names and
  /// sizes, the payload declaration and every payload chunk: PayloadStaging), and
  /// for a spec whose capacity is known reserves the budget already (the table
  /// and its fixed-width payload; with expected_rows also the build's expected
  /// transient memory), so oversized or create-only conflicts fail before any
  /// data is sent. Each chunk is counted from its arrival: its bytes (the message
  /// without its payload, decoded copies, and the growth of the staged payload
  /// columns its payload is copied into) against --max-build-staged-bytes and the
  /// host staging budget (--max-staged-bytes), and the reservation in the memory
  /// budget grows to the table and payload for the rows so far (an auto-sized
  /// build is sized from them), the transient memory of a build of those rows,
  /// and the staged bytes; RESOURCE_EXHAUSTED at the first chunk that does not fit.
  absl::Status Add(v1::BuildIndexRequest&& message);

  /// Builds the index from everything added and installs it atomically under its
  /// name (table and payload together). Every payload column must have as many
  /// rows as the keys (INVALID_ARGUMENT naming the column otherwise), and
  /// spec.max_probe_count must fit the final capacity (for a table sized from the
  /// rows sent it is known only now; INVALID_ARGUMENT naming spec.max_probe_count
  /// and that capacity, nothing installed). Before the
  /// build the reservation grows to the table, the payload (Backend::PayloadBytes)
  /// and the build's transient memory (Backend::BuildTransientBytes, payload
  /// included; RESOURCE_EXHAUSTED naming needed, used and budget bytes when that
  /// does not fit), and shrinks to what the index holds once the build is done. When `cancelled` is
  /// true after the build, nothing is installed (CANCELLED). The old version, if any, stays live on
  /// every error.
  absl::StatusOr<std::shared_ptr<const IndexVersion>> Finish(const std::atomic<bool>& cancelled);

  /// As above; `cancelled()` is asked once, after the engine build and right before
  /// the install, and may block briefly (the reactor uses it to let a cancellation
  /// that races the end of input arrive).
  absl::StatusOr<std::shared_ptr<const IndexVersion>> Finish(
      const std::function<bool()>& cancelled);

  /// Gives back everything the session holds (staged input, its reservations) once
  /// the build has failed, so that a refused build frees its memory when its error
  /// is sent rather than when gRPC is done with the call.
  void Release();

  /// The spec's name once a valid spec was added ("" before).
  const std::string& name() const { return name_; }
  uint64_t rows() const { return key_rows_; }
  /// IndexSpec.wait_durable: answer once the installed version is in its snapshot.
  bool wait_durable() const { return have_spec_ && spec_.wait_durable(); }
  /// Bytes of build input held (chunk messages and decoded copies), as counted
  /// against the budgets; 0 again once Finish has installed the index.
  uint64_t staged_bytes() const { return staged_bytes_; }

 private:
  /// Stored key chunks of a build whose key word is Key.
  template <typename Key>
  using KeyChunks = std::vector<DecodedColumn<Key>>;

  absl::Status AddSpec(const v1::IndexSpec& spec);
  absl::Status AddChunk(std::unique_ptr<v1::BuildChunk> chunk);
  /// AddChunk once the key columns decoded, for the spec's key word Key.
  template <typename Key>
  absl::Status AddChunkOf(std::unique_ptr<v1::BuildChunk> chunk, KeyColumns& key_columns);
  /// Finish for the spec's key word Key: the build node, the reservation, the build.
  template <typename Key>
  absl::StatusOr<std::unique_ptr<engine::HashIndex>> BuildOf(double* seconds);
  /// Reserves (or resizes the reservation to) the table bytes of an index of
  /// `capacity` slots and its payload as staged so far, plus, when `shape` is
  /// given, the transient bytes of a build of that shape (its payload set to the
  /// staged columns'), plus the staged input bytes. `grow_only`: keep a larger
  /// reservation (one made for spec.expected_rows). RESOURCE_EXHAUSTED naming
  /// needed, used and budget bytes; INVALID_ARGUMENT for a bad capacity, or from
  /// CheckProbeBound unless `capacity` is a chunk's interim size of a table sized
  /// from the rows sent.
  absl::Status ReserveFor(uint32_t capacity, const engine::BuildShape* shape, bool grow_only);
  /// Counts `bytes` more of staged input (`field` names the chunk) against
  /// --max-build-staged-bytes and the host staging budget, before they are kept.
  absl::Status CountStaged(uint64_t bytes, const std::string& field);
  /// Grows the memory budget reservation for a build of `rows` key rows (see Add).
  absl::Status ReserveRows(uint64_t rows, bool validity, const std::string& field);
  /// The capacity the index gets for `rows` key rows: the spec's, or sized from
  /// spec.expected_rows, or from `rows` at the target load factor.
  absl::StatusOr<uint32_t> CapacityFor(uint64_t rows) const;
  /// The engine spec of the index (key type, probe bound) at `capacity` slots.
  engine::HashIndexSpec EngineSpec(uint32_t capacity) const;
  /// OK when spec.max_probe_count fits `capacity`, the capacity the index will
  /// have: spec.capacity or the one sized for spec.expected_rows (checked with the
  /// spec), or, for a table sized from the rows sent, the one for all of them
  /// (checked at Finish: a chunk's interim size is no bound). Else
  /// INVALID_ARGUMENT naming spec.max_probe_count, the capacity and where it came from.
  absl::Status CheckProbeBound(uint32_t capacity) const;

  Operations* ops_;
  bool have_spec_ = false;
  v1::IndexSpec spec_;
  std::string name_;
  // From spec.duplicates.
  engine::DuplicatePolicy duplicates_ = engine::DuplicatePolicy::kLowestRow;
  engine::KeyType key_type_ = engine::KeyType::kU32;  // from spec.key_type
  std::optional<uint32_t> capacity_;                  // from spec.capacity or spec.expected_rows
  bool reserved_ = false;                             // reservation_ holds part of the budget
  MemoryBudget::Reservation reservation_;
  MemoryBudget::Reservation staging_;  // in the host staging budget
  uint64_t staged_bytes_ = 0;          // chunk messages and decoded copies held
  uint32_t nonempty_chunks_ = 0;
  bool any_validity_ = false;
  std::vector<std::unique_ptr<v1::BuildChunk>> chunks_;
  std::variant<KeyChunks<uint32_t>, KeyChunks<uint64_t>> keys_;  // the spec's key word
  std::vector<DecodedColumn<uint32_t>> values_, validity_;
  std::vector<uint32_t> row_bases_;
  uint64_t key_rows_ = 0;
  uint64_t value_rows_ = 0;
  PayloadStaging payload_;  // spec.payload and the rows staged for it
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
  /// The typed part of Aggregate (typed_values of `value_type`; keys and mask
  /// decoded and checked).
  absl::Status AggregateTyped(const v1::AggregateRequest& request, engine::AggregateOp op,
                              engine::ColumnType value_type, std::span<const uint32_t> keys,
                              std::optional<std::span<const uint32_t>> mask,
                              v1::AggregateResponse* response, AggregatePartial* partial);
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
  /// selected columns' outputs) and records its metrics.
  template <typename Key>
  absl::Status RunLookup(const IndexVersion& version, const v1::LookupRequest& request,
                         std::span<const Key> keys, std::span<uint32_t> values,
                         std::span<uint8_t> found, std::span<uint32_t> probes,
                         std::span<uint32_t> match_counts, std::vector<engine::GatherOutput> gather,
                         engine::QueryStatistics* stats);
  /// Join for an index whose key word is Key.
  template <typename Key>
  absl::Status JoinOf(const IndexVersion& version, const v1::JoinRequest& request,
                      v1::JoinResponse* response);

  ServiceState state_;
};

/// "INVALID_ARGUMENT", "NOT_FOUND", ... (gRPC code names).
std::string StatusCodeName(absl::StatusCode code);

}  // namespace gpujoin::server
