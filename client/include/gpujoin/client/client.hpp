// gpujoin C++ client library: a thin, typed layer over the generated gRPC stubs
// of gpujoin.v1 that the `gpujoin` CLI, the load tester and the tests share.
//
// Shape of the API
//  - `Client::Connect` opens one channel (plaintext or TLS) and remembers the
//    bearer token and the default per-call deadline.
//  - Unary calls (`Health`, `GetServerInfo`, `ListIndexes`, `DescribeIndex`,
//    `DropIndex`) return `absl::StatusOr<T>`.
//  - `BuildIndex` streams chunks pulled from a `ChunkSource` and reports progress.
//  - `Lookup`, `Join`, `Aggregate` and `Hash` are pipelined bidirectional
//    streams: batches are pulled from a source on a writer thread while results
//    are read on the calling thread, with at most `StreamOptions::max_in_flight`
//    batches sent but not yet answered. Results arrive in send order (the
//    server answers in order; `batch_id` is checked) and are handed to a sink.
//  - `...All` helpers split one in-memory column into batches and concatenate
//    the results, for callers that do not need streaming.
//  - Keys are `Keys`: a borrowed column of uint32 keys (a uint32 index, the
//    default) or uint64 keys (a uint64 index; int64 keys as their bit pattern),
//    made implicitly from a span or vector of uint32_t, uint64_t or int64_t.
//  - Payload columns (column.hpp) are declared by IndexSpec::payload, sent as
//    BuildChunk::payload views, and gathered by lookups and joins that name them
//    (`select`): results carry owned `Column`s aligned with the lookup's rows or
//    the join's pairs. A join answer the server split over several messages
//    (JoinResponse.more) reaches the sink reassembled, one JoinPairs per left batch.
//  - Duplicate keys: an index keeps the lowest source row of each key
//    (DuplicatePolicy::kLowestRow, the default) or every row (kKeepAll, a
//    multi-value index: a join yields one pair per kept row, a lookup the first
//    row plus a match count). Joins are inner, left outer, left semi or left
//    anti (JoinKind); unmatched outer and anti rows pair with kNoMatch.
//
// Errors: every function returns an `absl::Status` whose code is the gRPC code
// the server sent (the codes are the same google.rpc.Code values) and whose
// message is the server's message. A per-batch error reported inside a stream
// (`BatchError` in the proto) is delivered in the result's `error` field and
// does not end the stream unless the sink returns it. Client-side misuse (for
// example a batch whose values and keys differ in length) is INVALID_ARGUMENT
// before anything is sent.
//
// Threading: a `Client` is thread-safe; any number of calls, including
// streams, may run on it concurrently (they share one HTTP/2 connection; make
// several clients with ConnectOptions::own_connection to spread load over
// several connections). Sources are
// called on an internal writer thread, sinks and progress callbacks on the
// calling thread; each is never called concurrently with itself.
//
// Borrowed memory: batch and chunk structs hold `std::span`s into caller
// memory. The library copies a batch into its request message before it calls
// the source again, so a span only has to stay valid until the next call of
// the same source (or until the streaming call returns).
#pragma once

#include <algorithm>
#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <ranges>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpujoin/client/column.hpp"
#include "gpujoin/client/hash_column.hpp"

namespace gpujoin::client {

// ---------------------------------------------------------------- connection

/// How to reach a gpujoind server.
struct ConnectOptions {
  /// host:port (or any gRPC target such as unix:/path).
  std::string address = "127.0.0.1:50051";
  /// PEM file with the root certificates that sign the server's certificate.
  /// Empty = plaintext (insecure) channel.
  std::string tls_ca_file;
  /// Overrides the name checked against the server certificate (the SNI /
  /// authority), e.g. when connecting to an IP address. Empty = from `address`.
  std::string tls_server_name;
  /// PEM certificate chain and private key that this client presents to a server
  /// requiring client certificates (mutual TLS, gpujoind --tls-client-ca). Both
  /// or neither; they need tls_ca_file (TLS). Empty = no client certificate.
  std::string tls_client_cert_file;
  std::string tls_client_key_file;
  /// Bearer token sent with every call as metadata `authorization: Bearer <token>`.
  /// Empty = no authorization header.
  std::string token;
  /// Default deadline of every call, measured from the call's start (streams
  /// included). Zero = no deadline.
  std::chrono::milliseconds deadline{0};
  /// Largest message the client sends or accepts, in bytes.
  int max_message_bytes = 64 << 20;
  /// Give this client a TCP connection of its own. gRPC otherwise shares one
  /// connection between all channels of a process with the same address and
  /// options, so several clients would not spread load over several connections.
  bool own_connection = false;
};

/// Serving state reported by the grpc.health.v1 health service.
enum class HealthState { kUnknown, kServing, kNotServing, kServiceUnknown };

/// "UNKNOWN", "SERVING", "NOT_SERVING", "SERVICE_UNKNOWN".
std::string_view HealthStateName(HealthState state);

// ---------------------------------------------------------------- keys

/// The key word of an index (IndexSpec::key_type): uint32 (the default) or
/// uint64. int64 keys travel as their two's-complement bit pattern in a uint64
/// index.
enum class KeyType { kUint32, kUint64 };

/// "uint32" or "uint64".
std::string_view KeyTypeName(KeyType type);

// ---------------------------------------------------------------- duplicates and join kinds

/// What a build keeps of rows whose key is already present (IndexSpec::duplicates).
enum class DuplicatePolicy {
  /// The lowest source row of each key wins; later rows are counted as
  /// duplicate_rows and dropped (many-to-one joins).
  kLowestRow,
  /// A multi-value index: every valid row is kept, in source-row order per key
  /// (one-to-many and many-to-many joins).
  kKeepAll,
};

/// "lowest_row" or "keep_all".
std::string_view DuplicatePolicyName(DuplicatePolicy policy);
/// Parses DuplicatePolicyName's spelling; INVALID_ARGUMENT naming the word otherwise.
absl::StatusOr<DuplicatePolicy> ParseDuplicatePolicy(std::string_view name);

/// Which left rows a join returns (JoinBatch::kind). Pairs come in left-row
/// order, then right source-row order; counts are exact for every kind.
enum class JoinKind {
  kInner,      ///< one pair per matching right row
  kLeftOuter,  ///< as inner; a left row without a match gives one pair (left row, kNoMatch)
  kLeftSemi,   ///< one pair (left row, first match's value) per left row with a match
  kLeftAnti,   ///< one pair (left row, kNoMatch) per left row without a match
};

/// "inner", "left_outer", "left_semi", "left_anti".
std::string_view JoinKindName(JoinKind kind);
/// Parses JoinKindName's spelling; INVALID_ARGUMENT naming the word otherwise.
absl::StatusOr<JoinKind> ParseJoinKind(std::string_view name);

/// The right row (value) of an outer or anti pair without a match, and the
/// value of a missing key in a lookup.
inline constexpr uint32_t kNoMatch = 0xffffffffu;

/// The element types a Keys column is made from.
template <typename T>
concept KeyElement =
    std::same_as<T, uint32_t> || std::same_as<T, uint64_t> || std::same_as<T, int64_t>;

/// A borrowed column of keys of one width (see "Borrowed memory" above): uint32
/// keys for a uint32 index, uint64 keys for a uint64 index. Made implicitly from a
/// span, vector or array of uint32_t, uint64_t or int64_t (int64 keys are sent as
/// their bit pattern, a uint64 column). Sending keys of the wrong width for the
/// index is INVALID_ARGUMENT from the server (a build checks IndexSpec::key_type
/// before anything is sent).
class Keys {
 public:
  /// An empty uint32 column.
  Keys() = default;
  Keys(std::span<const uint32_t> keys)  // NOLINT: implicit by design
      : type_(KeyType::kUint32), data_(keys.data()), size_(keys.size()) {}
  Keys(std::span<const uint64_t> keys)  // NOLINT
      : type_(KeyType::kUint64), data_(keys.data()), size_(keys.size()) {}
  /// int64 keys: their bit patterns (the memory is read as uint64, which the
  /// language allows for the unsigned type of the same width).
  Keys(std::span<const int64_t> keys)  // NOLINT
      : type_(KeyType::kUint64), data_(keys.data()), size_(keys.size()) {}
  /// Any contiguous container of a key element type (std::vector, std::array, ...).
  template <typename Range>
  requires(std::ranges::contiguous_range<const Range&>&& std::ranges::sized_range<const Range&>&&
               KeyElement<std::ranges::range_value_t<Range>> &&
           !std::is_same_v<std::remove_cvref_t<Range>, Keys>) Keys(const Range& keys)  // NOLINT
      : Keys(std::span<const std::ranges::range_value_t<Range>>(std::ranges::data(keys),
                                                                std::ranges::size(keys))) {}

  KeyType type() const { return type_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  /// 4 or 8 bytes per key.
  size_t key_bytes() const { return type_ == KeyType::kUint64 ? 8 : 4; }
  size_t size_bytes() const { return size_ * key_bytes(); }
  /// Rows [offset, offset + count) (clamped to the column), of the same type.
  Keys subspan(size_t offset, size_t count = SIZE_MAX) const {
    Keys k = *this;
    offset = std::min(offset, size_);
    k.size_ = std::min(count, size_ - offset);
    k.data_ = static_cast<const char*>(data_) + offset * key_bytes();
    return k;
  }
  /// The keys of a uint32 column; empty for a uint64 one.
  std::span<const uint32_t> u32() const {
    if (type_ != KeyType::kUint32) return {};
    return {static_cast<const uint32_t*>(data_), size_};
  }
  /// The keys (bit patterns) of a uint64 column; empty for a uint32 one.
  std::span<const uint64_t> u64() const {
    if (type_ != KeyType::kUint64) return {};
    return {static_cast<const uint64_t*>(data_), size_};
  }
  /// The packed little-endian bytes of the column.
  std::string_view bytes() const { return {static_cast<const char*>(data_), size_bytes()}; }

 private:
  KeyType type_ = KeyType::kUint32;
  const void* data_ = nullptr;
  size_t size_ = 0;
};

// ---------------------------------------------------------------- typed results

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

/// Query statistics [found, missing, total probes, max probes] of one batch.
struct QueryStatistics {
  uint64_t found = 0;
  uint64_t missing = 0;
  uint64_t total_probes = 0;
  uint64_t max_probes = 0;

  /// Adds another batch's statistics (sums; max of max_probes).
  void Merge(const QueryStatistics& other);
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
  std::vector<PayloadColumnInfo> payload;  ///< in the order the spec declared them
  uint64_t payload_bytes = 0;              ///< sum of payload[].bytes (within device_bytes)
  DuplicatePolicy duplicates = DuplicatePolicy::kLowestRow;
  /// The version in the index's snapshot file under --data-dir (what a restart
  /// serves): `version` once its background write is done; 0 without one.
  uint64_t durable_version = 0;
};

/// Server identity and memory (GetServerInfoResponse).
struct ServerInfo {
  std::string version;
  std::string backend;  ///< "cuda" or "cpu"
  std::string device_name;
  uint64_t device_memory_total_bytes = 0;
  uint64_t device_memory_used_bytes = 0;  ///< by gpujoin's indexes
  uint64_t device_memory_budget_bytes = 0;
  uint64_t max_message_bytes = 0;
  uint32_t max_inflight_batches_per_stream = 0;
  uint32_t max_inflight_batches = 0;
  uint32_t index_count = 0;
  bool serving = false;
  /// --max-result-bytes: host bytes one Lookup batch or Join request's results may take.
  uint64_t max_result_bytes = 0;
  /// --max-pending-response-bytes: stream responses all clients have yet to
  /// read may hold this much; pending_response_bytes is what they hold now.
  uint64_t max_pending_response_bytes = 0;
  uint64_t pending_response_bytes = 0;
};

/// What DropIndex freed.
struct DropResult {
  uint64_t dropped_version = 0;
  uint64_t freed_bytes = 0;
};

/// What SaveIndex wrote (a snapshot file under the server's --data-dir).
struct SaveResult {
  std::string file;
  uint64_t bytes = 0;
  uint64_t version = 0;
  double seconds = 0;
};

/// One file under the server's --data-dir (ListFiles).
struct DataFile {
  std::string file;
  uint64_t bytes = 0;
  int64_t modified_unix_millis = 0;
  /// The index a "<index>.gjsnap" file is the snapshot of ("" for a copy).
  std::string index;
  bool live = false;  ///< that index is live now
};

/// The server's --data-dir files and their limits (ListFiles).
struct DataFiles {
  std::vector<DataFile> files;  ///< by name
  uint64_t snapshot_bytes = 0;
  uint64_t copy_bytes = 0;
  uint64_t max_copy_bytes = 0;      ///< 0 = no limit
  uint64_t max_snapshot_bytes = 0;  ///< 0 = no limit
};

// ---------------------------------------------------------------- build

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
  /// The key word; every chunk's keys must have it (INVALID_ARGUMENT otherwise,
  /// before the chunk is sent).
  KeyType key_type = KeyType::kUint32;
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
};

/// One build chunk (borrowed; see "Borrowed memory" above). With
/// `explicit_values`, values belong to the same logical sequence as the keys;
/// their chunk boundaries may differ but the totals must match at the end.
/// Payload views likewise: each names a declared column and has its type (else
/// INVALID_ARGUMENT before the chunk is sent); each column's views, in chunk
/// order, are its rows, with boundaries of their own; a chunk may carry payload only.
struct BuildChunk {
  Keys keys;                           ///< of IndexSpec::key_type
  std::span<const uint32_t> values;    ///< only with IndexSpec::explicit_values
  uint32_t row_base = 0;               ///< only with IndexSpec::batch_mode
  std::span<const uint32_t> validity;  ///< only with batch_mode; empty = all valid
  std::vector<ColumnView> payload;     ///< rows of declared payload columns
};

/// Progress of an upload, reported after every chunk sent.
struct Progress {
  uint64_t rows_sent = 0;   ///< key rows sent so far
  uint64_t bytes_sent = 0;  ///< bytes of keys, values, validity and payload columns sent so far
  uint64_t total_rows = 0;  ///< expected total, 0 when unknown
};

/// Returns the next chunk, or std::nullopt when there are no more.
using ChunkSource = std::function<std::optional<BuildChunk>()>;
/// Called after every chunk written; may be empty.
using ProgressCallback = std::function<void(const Progress&)>;

// ---------------------------------------------------------------- streams

/// Options of one streaming call.
struct StreamOptions {
  /// Most batches sent but not yet answered (>= 1). The server may bound this
  /// further (ServerInfo::max_inflight_batches_per_stream); the stream then
  /// simply waits on the server's flow control.
  int max_in_flight = 4;
  /// Overrides ConnectOptions::deadline for this call; nullopt = the default.
  std::optional<std::chrono::milliseconds> deadline;
  /// When given, the call ends with CANCELLED as soon as this returns true
  /// (polled between batches), e.g. on SIGINT.
  std::function<bool()> cancelled;
};

/// One Lookup batch (borrowed).
struct LookupBatch {
  Keys keys;                        ///< of the index's key type
  bool want_probes = false;         ///< return per-row probe counts
  uint32_t max_probe_count = 0;     ///< 0 = the index's bound
  std::vector<std::string> select;  ///< payload columns to gather per row, each at most once
  /// Return per-row match counts (kKeepAll: the key's group size; kLowestRow: 1 or 0).
  bool want_match_counts = false;
};

/// The answer to one Lookup batch.
struct LookupResult {
  uint64_t batch_id = 0;       ///< 0-based position of the batch in the stream
  uint64_t index_version = 0;  ///< the index version this batch ran on
  /// Per row: the value of the key's first (lowest-row) match; kNoMatch where missing.
  std::vector<uint32_t> values;
  std::vector<uint8_t> found;          ///< per row: 1 found, 0 missing
  std::vector<uint32_t> probes;        ///< per row, when asked
  std::vector<uint32_t> match_counts;  ///< per row, when asked: rows the key matches (0 missing)
  QueryStatistics statistics;
  /// The selected payload columns in `select` order, one row per key: the
  /// key's stored value (of its build's lowest source row), null where the key
  /// is missing or the value is null.
  std::vector<Column> columns;
  absl::Status error;                   ///< in-band error for this batch; results empty then
  std::chrono::nanoseconds latency{0};  ///< from the batch's write to its answer's arrival
};

/// One left batch of a Join request (borrowed).
struct JoinLeft {
  Keys keys;                            ///< of the index's key type
  std::span<const uint32_t> left_rows;  ///< optional explicit left row IDs (same length as keys)
  uint32_t first_left_row = 0;          ///< else left row = first_left_row + row
  uint64_t capacity = 0;                ///< pair capacity; 0 = number of left rows
  bool want_found = false;
  bool want_probes = false;
  /// Count only: the result has count, overflow and statistics (found and
  /// probes when asked) but no pairs; `capacity` is ignored. Sizes a later request.
  bool count_only = false;
};

/// One Join request: one left batch is a plain join; several make a batch
/// join with one result per left batch.
struct JoinBatch {
  std::vector<JoinLeft> lefts;
  uint32_t max_probe_count = 0;      ///< 0 = the index's bound
  std::vector<std::string> select;   ///< payload columns to gather per pair, each at most once
  JoinKind kind = JoinKind::kInner;  ///< the kind of every left batch of the request
};

/// Result of one left batch: the [left row, right row] pairs in left order,
/// then right source-row order.
struct JoinPairs {
  std::vector<uint32_t> left_rows;  ///< min(count, capacity) of them
  /// The index values of the matched rows; kNoMatch for a left-outer row without
  /// a match and for every left-anti pair.
  std::vector<uint32_t> right_rows;
  uint64_t count = 0;  ///< pairs of the kind before truncation (exact)
  uint64_t capacity = 0;
  bool overflow = false;  ///< count > capacity, or the index build overflowed
  QueryStatistics statistics;
  std::vector<uint8_t> found;    ///< when asked
  std::vector<uint32_t> probes;  ///< when asked
  /// The selected payload columns in `select` order, one row per pair (the
  /// matched row's stored value; null where it is null or the pair has no match).
  std::vector<Column> columns;
  /// JoinAll: the index version of the last batch's answer (Join reports it in
  /// JoinResult::index_version).
  uint64_t index_version = 0;
};

/// The answer to one Join request.
struct JoinResult {
  uint64_t batch_id = 0;
  uint64_t index_version = 0;
  /// One per JoinBatch::lefts entry, reassembled when the server split the
  /// answer over several messages.
  std::vector<JoinPairs> results;
  absl::Status error;
  std::chrono::nanoseconds latency{0};
};

/// Grouped aggregation operation.
enum class AggregateOp { kCount, kSum, kMin, kMax, kMean };

/// "count", "sum", "min", "max", "mean".
std::string_view AggregateOpName(AggregateOp op);
/// Parses AggregateOpName's spelling; INVALID_ARGUMENT otherwise.
absl::StatusOr<AggregateOp> ParseAggregateOp(std::string_view name);

/// Stream-wide aggregation parameters.
struct AggregateSpec {
  AggregateOp op = AggregateOp::kCount;
  uint32_t groups = 0;  ///< output rows: keys must be < groups (others are ignored)
  /// The values' type: kFloat32 (AggregateBatch::values, the reference float32
  /// path) or kInt32, kInt64, kUint32, kUint64, kFloat64 (AggregateBatch::
  /// typed_values; integer sums exact in 64 bits, overflow reported).
  ColumnType value_type = ColumnType::kFloat32;
  /// Also return total_counts64 for count and float32 streams (typed streams
  /// always get it).
  bool want_counts64 = false;
};

/// Typed aggregation values (borrowed): one span of the spec's value_type.
using AggregateValues =
    std::variant<std::monostate, std::span<const int32_t>, std::span<const int64_t>,
                 std::span<const uint32_t>, std::span<const uint64_t>, std::span<const double>>;

/// One Aggregate batch (borrowed).
struct AggregateBatch {
  std::span<const uint32_t> keys;  ///< dense group keys
  std::span<const float> values;   ///< float32 value ops: same length as keys
  std::span<const uint32_t> mask;  ///< optional; nonzero includes the row
  bool accumulate_only = false;    ///< answer only with the stream's running totals
  /// Typed value ops (spec.value_type other than kFloat32): same length as keys,
  /// of spec.value_type.
  AggregateValues typed_values;
  /// Optional nulls of typed_values: an Arrow bitmap (LSB first, 1 = valid) of
  /// ceil(rows / 8) bytes; empty = no nulls. A null value does not contribute to
  /// its group (sum, min, max, mean, contributing rows), like a row `mask`
  /// leaves out (SQL's aggregates skip nulls). Another size, or a bitmap on a
  /// count or float32 stream (which has no validity: use `mask`), is
  /// INVALID_ARGUMENT before the batch is sent.
  std::span<const uint8_t> validity;
};

/// The answer to one Aggregate batch.
struct AggregateResult {
  uint64_t batch_id = 0;
  std::vector<uint32_t> counts;             ///< kCount: this batch, per group
  std::vector<float> values;                ///< other ops: this batch, per group
  std::vector<uint32_t> contributing_rows;  ///< this batch, per group
  std::vector<uint32_t> total_counts;       ///< kCount: whole stream so far
  std::vector<float> total_values;          ///< other ops: whole stream so far
  uint64_t rows = 0;
  absl::Status error;
  std::chrono::nanoseconds latency{0};
  /// Typed streams: the type of the result words (sum: kInt64, kUint64 or
  /// kFloat64; min/max: the value type; mean: kFloat64).
  ColumnType result_type = ColumnType::kFloat32;
  /// Typed streams, per group, as 64-bit words (int64/uint64 bits, float64
  /// bits; int32 min/max sign-extended, uint32 zero-extended): this batch and
  /// the whole stream so far. An overflowed integer sum holds the low 64 bits of
  /// its exact sum (its mean is NaN).
  std::vector<uint64_t> typed_values;
  std::vector<uint64_t> total_typed_values;
  /// Per group, 0 for a null group (an empty group of an integer min/max, whose
  /// word is 0) and 1 otherwise; empty when the result has no null group.
  std::vector<uint8_t> total_valid;
  /// Exact contributing rows over the stream (typed streams and want_counts64).
  std::vector<uint64_t> total_counts64;
  /// Integer sum/mean, per group: 1 where the exact sum does not fit 64 bits, in
  /// this batch and over the stream (sticky); empty otherwise.
  std::vector<uint8_t> overflow;
  std::vector<uint8_t> total_overflow;
  uint64_t total_overflow_groups = 0;
};

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

/// Returns the next batch of a stream, or std::nullopt at the end.
template <typename Batch>
using BatchSource = std::function<std::optional<Batch>()>;
/// Receives every result in order. Returning a non-OK status cancels the
/// stream and becomes the return value of the streaming call.
template <typename Result>
using ResultSink = std::function<absl::Status(Result&&)>;

/// Options of LookupAll and JoinAll.
struct QueryAllOptions {
  size_t batch_rows = 1 << 20;      ///< keys per request
  std::vector<std::string> select;  ///< payload columns to gather
  /// JoinAll: pairs per batch. 0 = every pair: the batch's rows, or on a
  /// kKeepAll index (inner and left-outer joins) the exact count of a count-only
  /// pass (see JoinAll).
  uint64_t capacity = 0;
  /// JoinAll: most pairs kept over all batches (0 = no bound). Pairs beyond it
  /// are counted in `count` (and make `overflow`) but not returned; no batch
  /// asks for more pairs than it (sized joins: than the batches before leave).
  uint64_t max_pairs = 0;
  bool count_only = false;           ///< JoinAll: counts and statistics only, no pairs
  JoinKind kind = JoinKind::kInner;  ///< JoinAll
  bool want_match_counts = false;    ///< LookupAll: LookupResult::match_counts
  /// Probe bound of every request (LookupBatch/JoinBatch::max_probe_count): 0 =
  /// the index's bound; at most its capacity. A key further than this many
  /// slots from its home slot is missing.
  uint32_t max_probe_count = 0;
  StreamOptions stream;
  ProgressCallback progress;  ///< may be empty; called as batches are answered
};

// ---------------------------------------------------------------- client

/// A connection to one gpujoind server. Create with Connect(); thread-safe.
class Client {
 public:
  /// Opens a channel. Fails with INVALID_ARGUMENT for an empty address, a client
  /// certificate without its key (or the other way round) or without
  /// tls_ca_file, and with NOT_FOUND naming the file when a TLS file cannot be
  /// read (INVALID_ARGUMENT when it is empty). Does not
  /// contact the server (the first call does); use Health() to check it.
  static absl::StatusOr<std::unique_ptr<Client>> Connect(const ConnectOptions& options);

  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  /// The options the client was made with.
  const ConnectOptions& options() const;

  /// grpc.health.v1 Check for `service` ("" = the whole server).
  absl::StatusOr<HealthState> Health(const std::string& service = "");

  absl::StatusOr<ServerInfo> GetServerInfo();
  absl::StatusOr<std::vector<IndexInfo>> ListIndexes();
  absl::StatusOr<IndexInfo> DescribeIndex(const std::string& name);
  absl::StatusOr<DropResult> DropIndex(const std::string& name);
  /// Writes index `name` to `file` under the server's --data-dir now ("" =
  /// "<name>.gjsnap", the file the server loads at start). FAILED_PRECONDITION
  /// when the server has no --data-dir.
  absl::StatusOr<SaveResult> SaveIndex(const std::string& name, const std::string& file = "");
  /// Loads `file` under the server's --data-dir ("" = "<name>.gjsnap") as index
  /// `name` (`replace`: over a live one, else ALREADY_EXISTS); DATA_LOSS for a
  /// corrupt file, OUT_OF_RANGE for a truncated one, FAILED_PRECONDITION for a
  /// newer format or a server without --data-dir.
  absl::StatusOr<IndexInfo> LoadIndex(const std::string& name, const std::string& file = "",
                                      bool replace = false);
  /// The snapshots and copies under the server's --data-dir.
  absl::StatusOr<DataFiles> ListFiles();
  /// Deletes `file` under the server's --data-dir (a copy, or the snapshot of an
  /// index that is not live: FAILED_PRECONDITION for a live one's); returns its
  /// size.
  absl::StatusOr<uint64_t> DeleteFile(const std::string& file);

  /// Builds (or with spec.replace rebuilds) `spec.name` from the chunks that
  /// `next_chunk` returns, calling `progress` after each chunk. `total_rows`
  /// (0 = unknown) is only passed through to `progress`. Returns the new
  /// index's description. Sends the spec first, then the chunks; the build is
  /// atomic on the server: on any error the old version (if any) keeps serving.
  absl::StatusOr<IndexInfo> BuildIndex(const IndexSpec& spec, const ChunkSource& next_chunk,
                                       const ProgressCallback& progress = {},
                                       uint64_t total_rows = 0,
                                       std::optional<std::chrono::milliseconds> deadline = {});

  /// Convenience: builds from whole in-memory columns sent in chunks of
  /// `chunk_rows` rows. `values` must be empty unless spec.explicit_values, and
  /// then as long as `keys`.
  absl::StatusOr<IndexInfo> BuildIndexFromColumns(const IndexSpec& spec, Keys keys,
                                                  std::span<const uint32_t> values = {},
                                                  size_t chunk_rows = 1 << 20,
                                                  const ProgressCallback& progress = {});

  /// The same with payload: `payload` holds one view per column of
  /// spec.payload (any order), each as long as `keys`. Chunks carry at most
  /// `chunk_rows` key rows and at most about ConnectOptions::max_message_bytes
  /// (less 1 KiB) bytes each; a payload column whose rows do not fit in the
  /// chunk with the keys continues in chunks of its own (payload only), so a
  /// long string column never makes a message too large. INVALID_ARGUMENT
  /// before anything is sent for a missing, extra or misshapen column, or a
  /// single string row larger than a message.
  absl::StatusOr<IndexInfo> BuildIndexFromColumns(const IndexSpec& spec, Keys keys,
                                                  std::span<const uint32_t> values,
                                                  std::span<const ColumnView> payload,
                                                  size_t chunk_rows = 1 << 20,
                                                  const ProgressCallback& progress = {});

  /// Pipelined Lookup stream against `index`. Returns OK when every batch was
  /// answered, else the first RPC error or the first non-OK status of `sink`.
  absl::Status Lookup(const std::string& index, const BatchSource<LookupBatch>& source,
                      const ResultSink<LookupResult>& sink, const StreamOptions& options = {});

  /// Pipelined Join stream against `index`.
  absl::Status Join(const std::string& index, const BatchSource<JoinBatch>& source,
                    const ResultSink<JoinResult>& sink, const StreamOptions& options = {});

  /// Pipelined Aggregate stream. `spec.groups` stays fixed for the stream.
  absl::Status Aggregate(const AggregateSpec& spec, const BatchSource<AggregateBatch>& source,
                         const ResultSink<AggregateResult>& sink,
                         const StreamOptions& options = {});

  /// Pipelined Hash stream.
  absl::Status Hash(const BatchSource<HashBatch>& source, const ResultSink<HashResult>& sink,
                    const StreamOptions& options = {});

  /// Convenience: looks up all `keys` in batches of `batch_rows` and returns
  /// one concatenated result (statistics merged, batch_id/latency of the last
  /// batch). The first in-band batch error is returned as the status.
  /// `progress` (may be empty) is called as batches are answered.
  absl::StatusOr<LookupResult> LookupAll(const std::string& index, Keys keys,
                                         size_t batch_rows = 1 << 20,
                                         const StreamOptions& options = {},
                                         const ProgressCallback& progress = {});
  /// The same with QueryAllOptions (batch_rows, select, want_match_counts,
  /// max_probe_count, stream, progress): the selected columns of all batches are concatenated in
  /// `columns` (typed, with no rows, for empty keys: one empty batch is sent then).
  absl::StatusOr<LookupResult> LookupAll(const std::string& index, Keys keys,
                                         const QueryAllOptions& options);

  /// Convenience: inner join of all `keys` (left rows numbered from 0) in
  /// batches of `batch_rows`; the pairs of all batches are concatenated in
  /// left order. `capacity` bounds the pairs of each batch (0 = every pair, as
  /// QueryAllOptions::capacity). count/overflow/statistics are summed over batches.
  absl::StatusOr<JoinPairs> JoinAll(const std::string& index, Keys keys,
                                    size_t batch_rows = 1 << 20, uint64_t capacity = 0,
                                    const StreamOptions& options = {},
                                    const ProgressCallback& progress = {});
  /// The same with QueryAllOptions (batch_rows, select, capacity, max_pairs,
  /// count_only, kind, max_probe_count, stream, progress): the selected columns of all batches
  /// are concatenated in `columns`, aligned with the pairs (as LookupAll's for
  /// empty keys); with count_only there are no pairs and `count` is the total.
  ///
  /// Sizing: with capacity 0 the result holds every pair. Inner and left-outer
  /// joins on a kKeepAll index (DescribeIndex tells, one call first) may yield
  /// more pairs than left rows, so JoinAll then runs two streams: a count-only
  /// pass over all batches, then the same batches each asking for exactly its
  /// count (bounded by what max_pairs leaves). Progress then counts every left
  /// row twice (total_rows is twice the keys). A batch whose second answer
  /// holds more pairs than it was sized for (the index was rebuilt between the
  /// passes) fails the call with ABORTED; run it again. A capacity the caller
  /// gives is used as it is: a batch with more pairs reports overflow, its
  /// stable prefix kept. Every other case (kLowestRow, semi and anti joins)
  /// yields at most one pair per left row and runs one stream.
  absl::StatusOr<JoinPairs> JoinAll(const std::string& index, Keys keys,
                                    const QueryAllOptions& options);

  /// Convenience: aggregates whole columns in batches with accumulate_only and
  /// returns the final totals (in `total_counts` / `total_values`; `rows` is
  /// the total row count). `values` may be empty for kCount, `mask` empty.
  absl::StatusOr<AggregateResult> AggregateAll(
      const AggregateSpec& spec, std::span<const uint32_t> keys, std::span<const float> values = {},
      std::span<const uint32_t> mask = {}, size_t batch_rows = 1 << 20,
      const StreamOptions& options = {}, const ProgressCallback& progress = {});
  /// The same over typed values (`values` of spec.value_type, one per key,
  /// `validity` their nulls as AggregateBatch::validity: ceil(keys / 8) bytes or
  /// empty): the final totals in total_typed_values, total_counts64 and
  /// total_overflow. Each batch carries the bits of its rows.
  absl::StatusOr<AggregateResult> AggregateAllTyped(
      const AggregateSpec& spec, std::span<const uint32_t> keys, const AggregateValues& values,
      std::span<const uint8_t> validity = {}, std::span<const uint32_t> mask = {},
      size_t batch_rows = 1 << 20,
      const StreamOptions& options = {}, const ProgressCallback& progress = {});

  /// Convenience: hashes whole columns (all of the same length) in batches of
  /// `batch_rows` rows and returns the concatenated hashes and validity. Each
  /// batch carries only the bytes its rows need, children included (a
  /// dictionary's values whole). INVALID_ARGUMENT before anything is sent when
  /// a column fails CheckHashColumn.
  absl::StatusOr<HashResult> HashAll(const std::vector<HashColumn>& columns, uint32_t bits,
                                     size_t batch_rows = 1 << 20, const StreamOptions& options = {},
                                     const ProgressCallback& progress = {});

  class Impl;

 private:
  explicit Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpujoin::client
