// gpujoin C++ client library: a thin, typed layer over the generated gRPC stubs
// of gpujoin.v1 that the `gpujoin` CLI, the load tester and the tests share.
//
// Shape of the API
//  - `Client::Connect` opens one channel (plaintext or TLS) and remembers the
//    bearer token and the default per-call deadline.
//  - Unary calls (`Health`, `GetServerInfo`, `ListIndexes`, `DescribeIndex`,
//    `DropIndex`) return `absl::StatusOr<T>`.
//  - `BuildIndex` streams chunks pulled from a `ChunkSource` and reports progress.
//  - `Lookup`, `Join`, `Aggregate`, `Hash`, `Mutate` and `Query` are pipelined bidirectional
//    streams: batches are pulled from a source on a writer thread while results
//    are read on the calling thread, with at most `StreamOptions::max_in_flight`
//    batches sent but not yet answered. Results arrive in send order (the
//    server answers in order; `batch_id` is checked) and are handed to a sink.
//  - `...All` helpers split one in-memory column into batches and concatenate
//    the results, for callers that do not need streaming.
//  - Keys are `Keys`: a borrowed column of uint32 keys (a uint32 index, the
//    default) or uint64 keys (a uint64 index; int64 keys as their bit pattern),
//    made implicitly from a span or vector of uint32_t, uint64_t or int64_t; or
//    key columns for an index with a key schema (IndexSpec::key_columns: string
//    and composite keys), made implicitly from a span or vector of ColumnView,
//    one per key column. Every call sends either through the same path.
//  - Payload columns (column.hpp) are declared by IndexSpec::payload, sent as
//    BuildChunk::payload views, and gathered by lookups and joins that name them
//    (`select`): results carry owned `Column`s aligned with the lookup's rows or
//    the join's pairs. A join answer the server split over several messages
//    (JoinResponse.more) reaches the sink reassembled, one JoinPairs per left batch.
//  - Plans (query.hpp): `Query` streams input batches of named typed columns
//    through a plan (lookups, filter, aggregate, project, limit) the server
//    runs on each batch; `QueryAll` sends whole columns and assembles the
//    result table.
//  - Mutations (mutate.hpp): `Mutate` streams batches of upserts and deletes,
//    each applied atomically or refused in-band; `Upsert`, `Delete` and
//    `MutateAll` cut one in-memory input into requests that fit a message (each
//    atomic on its own, the call as a whole not) and sum their counts. Lookups
//    and joins report the mutation sequence they saw.
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
//
// Headers: this one declares `Client` and includes every value type it takes
// or returns, each declared in a header named after its concept:
// connect_options.hpp, keys.hpp, column.hpp, hash_column.hpp, index_info.hpp,
// build.hpp, progress.hpp, server_info.hpp, data_files.hpp,
// query_statistics.hpp, stream_options.hpp, lookup.hpp, join.hpp, mutate.hpp,
// aggregate.hpp, hash.hpp, query.hpp and query_all_options.hpp. Code that only handles
// those values may include just the headers it needs.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpujoin/client/aggregate.hpp"
#include "gpujoin/client/build.hpp"
#include "gpujoin/client/column.hpp"
#include "gpujoin/client/connect_options.hpp"
#include "gpujoin/client/data_files.hpp"
#include "gpujoin/client/hash.hpp"
#include "gpujoin/client/hash_column.hpp"
#include "gpujoin/client/index_info.hpp"
#include "gpujoin/client/join.hpp"
#include "gpujoin/client/keys.hpp"
#include "gpujoin/client/lookup.hpp"
#include "gpujoin/client/mutate.hpp"
#include "gpujoin/client/progress.hpp"
#include "gpujoin/client/query.hpp"
#include "gpujoin/client/query_all_options.hpp"
#include "gpujoin/client/query_statistics.hpp"
#include "gpujoin/client/server_info.hpp"
#include "gpujoin/client/stream_options.hpp"

namespace gpujoin::client {

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

  /// Pipelined Mutate stream against `index`: one request per batch (checked
  /// by CheckMutateBatch first; a batch must fit one message), each applied
  /// atomically or refused in-band (MutateResult::error; the stream goes on
  /// unless the sink returns it). Returns OK when every batch was answered,
  /// else the first RPC error or the first non-OK status of `sink`.
  absl::Status Mutate(const std::string& index, const BatchSource<MutateBatch>& source,
                      const ResultSink<MutateResult>& sink, const StreamOptions& options = {});

  /// Convenience: applies `changes` (whole in-memory columns: deletes, then
  /// upserts) to `index` in as many Mutate requests as it takes (at most
  /// options.batch_rows, the server's max_mutation_rows, and
  /// ConnectOptions::max_message_bytes less 1 KiB each). Each request is atomic
  /// on its own; a call split into several is not (see MutateSummary). A
  /// DescribeIndex call first checks the input against the index
  /// (CheckMutateBatchFor: INVALID_ARGUMENT before anything is sent) and a
  /// GetServerInfo call gives max_mutation_rows. Returns the per-request
  /// answers, their summed counts and the final mutation sequence; the first
  /// request the server refuses fails the call with its code and a message
  /// naming the request, its input rows and what was applied before it (with
  /// options.partial set, the answered requests go there). An input without
  /// rows sends nothing and reports DescribeIndex's sequence.
  absl::StatusOr<MutateSummary> MutateAll(const std::string& index, const MutateBatch& changes,
                                          const MutateOptions& options = {});
  /// MutateAll of upserts: `keys` of the index's key, `values` one per key
  /// (explicit_values indexes; empty for row-ID indexes, whose rows get the
  /// next row IDs), `payload` one view per payload column of the index.
  absl::StatusOr<MutateSummary> Upsert(const std::string& index, Keys keys,
                                       std::span<const uint32_t> values = {},
                                       std::span<const ColumnView> payload = {},
                                       const MutateOptions& options = {});
  /// MutateAll of deletes: every row of each key is removed; absent keys are
  /// counted in not_found_keys.
  absl::StatusOr<MutateSummary> Delete(const std::string& index, Keys keys,
                                       const MutateOptions& options = {});

  /// Pipelined Query stream (query.hpp): `plan` rides on the first request
  /// and runs on every batch of `source` (CheckQueryBatch first; a batch must
  /// fit one message of ConnectOptions::max_message_bytes, else
  /// INVALID_ARGUMENT before it is sent). The first batch must have columns
  /// (zero rows for an empty input): the server checks the plan against them.
  /// Every batch gets one QueryResult, its parts reassembled by first_row; a
  /// batch the server refuses has `error` set (the stream goes on unless the
  /// sink returns it; an error in the plan answers every batch). Aggregate
  /// plans get one more result at the end of the stream, `final` set, with
  /// the groups. Returns OK when every batch was answered, else the first RPC
  /// error or the first non-OK status of `sink`.
  absl::Status Query(const QueryPlan& plan, const BatchSource<QueryBatch>& source,
                     const ResultSink<QueryResult>& sink, const StreamOptions& options = {});

  /// Convenience: runs `plan` on whole in-memory `columns` (named, of one
  /// length; CheckQueryBatch) sent in batches of at most options.batch_rows
  /// rows (0: sized for the server's --max-result-bytes; see QueryOptions)
  /// that fit a message (PlanQueryBatches, within the smaller of
  /// ConnectOptions::max_message_bytes and the server's, one GetServerInfo
  /// call first); input without rows sends one batch of zero rows. Returns
  /// the result table (row plans: every batch's rows in input order;
  /// aggregate plans: the groups) and every answer's step statistics. The
  /// first in-band error is returned as the status, with the server's code
  /// and message. A row plan whose limit is spent stops sending input
  /// (options.stop_at_limit).
  absl::StatusOr<QueryTable> QueryAll(const QueryPlan& plan, std::span<const ColumnView> columns,
                                      const QueryOptions& options = {});

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
  /// returns the final totals (`rows` is the total row count): `values` of
  /// spec.value_type, one per key (none for kCount), `validity` their nulls as
  /// AggregateBatch::validity (ceil(keys / 8) bytes or empty; each batch
  /// carries the bits of its rows), `mask` empty or one per key. The totals are
  /// in total_counts (count), total_values (float32) or total_typed_values,
  /// total_counts64 and total_overflow (other value types).
  absl::StatusOr<AggregateResult> AggregateAll(
      const AggregateSpec& spec, std::span<const uint32_t> keys, const AggregateValues& values = {},
      std::span<const uint8_t> validity = {}, std::span<const uint32_t> mask = {},
      size_t batch_rows = 1 << 20, const StreamOptions& options = {},
      const ProgressCallback& progress = {});

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
