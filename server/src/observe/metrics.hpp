// Prometheus metrics of gpujoind (names agreed with deploy/ dashboards and
// alerts; documented in docs/metrics.md). Metrics may be added; a rename changes
// the dashboards, alert rules, their tests and the docs in the same commit and is
// listed under "Renamed metrics" in docs/metrics.md.
//
// Every family exists from construction. Children whose label values are known
// in advance exist from then on with value 0 (per RPC: the RPC, and for errors
// every code in kRpcErrorCodes), so that dashboards show 0 rather than "No data"
// and rate() sees the first increment. Per-index series (label `index`) exist
// while the index is live, all of them from its installation (every build result
// at 0), and are removed when it is dropped; updates for a name that is not live
// (a failed first build, an in-flight batch that outlived a drop) are ignored so
// that a failed build creates no series and a drop really removes them.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "gpujoin/engine/types.hpp"
#include "state/index_registry.hpp"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace gpujoin::server {

/// Query operation label values.
enum class QueryOp { kLookup, kJoin };

/// Build outcome label values of gpujoin_index_builds_total.
enum class BuildResult {
  kOk,
  kInvalidArgument,
  kResourceExhausted,
  kAlreadyExists,
  kCancelled,
  kError
};

/// "ok", "invalid_argument", ...
std::string_view BuildResultName(BuildResult result);

/// The RPC names used as the `rpc` label.
inline constexpr std::string_view kRpcNames[] = {"BuildIndex",    "DropIndex", "ListIndexes",
                                                 "DescribeIndex", "Lookup",    "Join",
                                                 "Aggregate",     "Hash",      "GetServerInfo",
                                                 "SaveIndex",     "LoadIndex", "ListFiles",
                                                 "DeleteFile",    "Mutate",    "Query"};

/// The gRPC code names (`code` label of gpujoin_rpc_errors_total) whose series
/// exist from start-up for every RPC: the codes gpujoind returns (request
/// validation, the registry and budget, the engine, auth, drain and
/// cancellation). Another code, should one occur, gets its series on first use.
inline constexpr std::string_view kRpcErrorCodes[] = {"CANCELLED",           "UNKNOWN",
                                                      "INVALID_ARGUMENT",    "NOT_FOUND",
                                                      "ALREADY_EXISTS",      "RESOURCE_EXHAUSTED",
                                                      "FAILED_PRECONDITION", "INTERNAL",
                                                      "UNAVAILABLE",         "UNAUTHENTICATED"};

/// Every BuildResult, in label order of docs/metrics.md.
inline constexpr BuildResult kBuildResults[] = {BuildResult::kOk,
                                                BuildResult::kInvalidArgument,
                                                BuildResult::kResourceExhausted,
                                                BuildResult::kAlreadyExists,
                                                BuildResult::kCancelled,
                                                BuildResult::kError};

class Metrics {
 public:
  Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  /// The registry to expose (prometheus::Exposer::RegisterCollectable).
  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }

  /// gpujoin_backend_info{backend,device} = 1.
  void SetBackendInfo(std::string_view backend, std::string_view device);
  /// gpujoin_build_info{version,backend,device} = 1: the gpujoind version, the
  /// engine backend ("cpu" or "cuda") and the device name of its BackendInfo.
  /// A second call replaces the series (one build_info series per process).
  void SetBuildInfo(std::string_view version, std::string_view backend, std::string_view device);
  /// gpujoin_device_memory_{used,budget,total}_bytes.
  void SetDeviceMemory(uint64_t used, uint64_t budget, uint64_t total);
  /// gpujoin_serving (1/0).
  void SetServing(bool serving);
  /// gpujoin_inflight_batches.
  void SetInflightBatches(int64_t batches);
  /// gpujoin_indexes.
  void SetIndexCount(size_t count);
  /// gpujoin_pending_response_bytes: stream responses waiting to be written.
  void SetPendingResponseBytes(uint64_t bytes);
  /// gpujoin_pending_response_limit_bytes (--max-pending-response-bytes).
  void SetPendingResponseLimit(uint64_t bytes);
  /// gpujoin_pending_response_refusals_total += 1: a batch refused because its
  /// response did not fit in --max-pending-response-bytes.
  void CountPendingResponseRefusal();
  /// gpujoin_paused_streams += `delta` (+1 when a stream stops reading for its
  /// responses waiting to be written, -1 when it resumes or ends).
  void AddPausedStreams(int delta);

  /// Marks `v`'s name live and sets all its per-index gauges from `v`, including
  /// gpujoin_index_info{index,key_type} = 1 ("uint32" or "uint64"; a rebuild with
  /// another key type replaces the series).
  /// The caller holds `v`'s latch (IndexReadLock) or owns `v` alone.
  void SetIndex(const IndexVersion& v);
  /// One applied Mutate batch: gpujoin_mutation_batches_total, rows upserted
  /// and deleted (gpujoin_mutation_rows_total{op}), a rehash, its duration.
  void RecordMutation(uint64_t upsert_rows, uint64_t deleted_rows, bool rehashed, double seconds);
  /// Removes every series labelled with `name` (gauges, counters, builds).
  void RemoveIndex(const std::string& name);
  /// gpujoin_index_builds_total{index,result} += 1 for a live index (call it after
  /// SetIndex for a successful build). Ignored for a name that is not live (a
  /// failed first build, a build racing a drop): per-index series exist only for
  /// live indexes, so the label stays bounded by the indexes installed.
  void CountBuild(const std::string& name, BuildResult result);
  /// One query batch of `rows` rows on live index `name`.
  void RecordQuery(const std::string& name, QueryOp op, uint64_t rows,
                   const engine::QueryStatistics& stats);
  /// One join batch: `pairs` matching pairs (before truncation), overflow flag.
  void RecordJoinBatch(const std::string& name, uint64_t pairs, bool overflow);
  /// gpujoin_gathered_bytes_total{rpc="Lookup"|"Join"} += `bytes`: payload bytes
  /// (values, bitmaps, string offsets and bytes) gathered into one response.
  void RecordGathered(QueryOp op, uint64_t bytes);

  /// gpujoin_rpc_duration_seconds / batches / rows for one unary call or one batch.
  /// `rows` are the rows accepted: 0 for a rejected call or batch (never the rows
  /// a request claims before it is validated).
  void ObserveRpc(std::string_view rpc, double seconds, uint64_t rows);
  /// Where a stream batch's time goes (gpujoin_rpc_phase_seconds{rpc,phase}):
  /// decode (parsing the message), queue (from admission to an executor
  /// thread taking it; 0 when run inline), execute (the operation), wait (from
  /// the answer being ready to its turn to be written, in stream order) and
  /// encode (serialising each response message).
  enum class RpcPhase { kDecode, kQueue, kExecute, kWait, kEncode };
  void ObserveRpcPhase(std::string_view rpc, RpcPhase phase, double seconds);
  /// gpujoin_rpc_errors_total{rpc,code}; `code` is the gRPC code name.
  void CountRpcError(std::string_view rpc, std::string_view code);

 private:
  struct QuerySeries {
    prometheus::Counter* rows = nullptr;
    prometheus::Counter* found = nullptr;
    prometheus::Counter* missing = nullptr;
    prometheus::Counter* probes = nullptr;
    prometheus::Gauge* max_probes = nullptr;
  };
  struct IndexSeries {
    bool live = false;
    std::map<std::string, prometheus::Gauge*> gauges;  // by family name
    QuerySeries lookup, join;
    prometheus::Counter* join_pairs = nullptr;
    prometheus::Counter* join_overflow = nullptr;
    std::map<BuildResult, prometheus::Counter*> builds;
    prometheus::Gauge* info = nullptr;  // gpujoin_index_info{index,key_type}
  };
  struct RpcSeries {
    prometheus::Histogram* duration = nullptr;
    std::array<prometheus::Histogram*, 5> phases{};  ///< by RpcPhase
    prometheus::Counter* batches = nullptr;
    prometheus::Counter* rows = nullptr;
  };

  QuerySeries MakeQuerySeries(const std::string& name, std::string_view op);
  void RemoveQuerySeries(QuerySeries& q);
  /// The IndexSeries of `name`, created with its build counters (every result at
  /// 0) on first use. Requires mu_.
  IndexSeries& IndexSeriesLocked(const std::string& name);

  std::shared_ptr<prometheus::Registry> registry_;
  std::mutex mu_;

  // Per index.
  std::map<std::string, prometheus::Family<prometheus::Gauge>*> index_gauges_;
  prometheus::Family<prometheus::Counter>* builds_;
  prometheus::Family<prometheus::Counter>* query_rows_;
  prometheus::Family<prometheus::Counter>* query_found_;
  prometheus::Family<prometheus::Counter>* query_missing_;
  prometheus::Family<prometheus::Counter>* query_probes_;
  prometheus::Family<prometheus::Gauge>* query_max_probes_;
  prometheus::Family<prometheus::Counter>* join_pairs_;
  prometheus::Family<prometheus::Counter>* join_overflow_;
  prometheus::Family<prometheus::Gauge>* index_info_;
  std::map<std::string, IndexSeries> indexes_;
  prometheus::Counter* gathered_lookup_;  // gpujoin_gathered_bytes_total{rpc="Lookup"}
  prometheus::Counter* gathered_join_;    // ... {rpc="Join"}

  // Per RPC.
  prometheus::Family<prometheus::Histogram>* rpc_duration_;
  prometheus::Family<prometheus::Histogram>* rpc_phase_;
  prometheus::Family<prometheus::Counter>* rpc_batches_;
  prometheus::Family<prometheus::Counter>* rpc_rows_;
  prometheus::Family<prometheus::Counter>* rpc_errors_;
  std::map<std::string, RpcSeries, std::less<>> rpcs_;
  std::map<std::pair<std::string, std::string>, prometheus::Counter*> rpc_errors_by_code_;

  // Service.
  prometheus::Gauge* memory_used_;
  prometheus::Gauge* memory_budget_;
  prometheus::Gauge* memory_total_;
  prometheus::Family<prometheus::Gauge>* backend_info_;
  prometheus::Family<prometheus::Gauge>* build_info_;
  prometheus::Gauge* build_info_series_ = nullptr;  // guarded by mu_
  prometheus::Gauge* serving_;
  prometheus::Gauge* inflight_;
  prometheus::Gauge* index_count_;
  prometheus::Gauge* pending_response_bytes_;
  prometheus::Gauge* pending_response_limit_;
  prometheus::Counter* pending_response_refusals_;
  prometheus::Gauge* paused_streams_;

  // Mutations.
  prometheus::Counter* mutation_batches_;
  prometheus::Counter* mutation_upserted_;
  prometheus::Counter* mutation_deleted_;
  prometheus::Counter* mutation_rehashes_;
  prometheus::Histogram* mutation_seconds_;
};

}  // namespace gpujoin::server
