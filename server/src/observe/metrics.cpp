#include "observe/metrics.hpp"

#include <utility>

namespace gpujoin::server {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;

// Per-index gauges, in the order of docs/metrics.md.
constexpr std::pair<const char*, const char*> kIndexGauges[] = {
    {"gpujoin_index_capacity_slots", "Slots of the live index table."},
    {"gpujoin_index_load_factor", "unique_keys / capacity of the live index (0..1)."},
    {"gpujoin_index_unique_keys", "Distinct keys retained by the live build."},
    {"gpujoin_index_duplicate_rows", "Duplicate source rows of the live build."},
    {"gpujoin_index_overflow_rows",
     "Rows of the live build whose key found no slot within the probe bound."},
    {"gpujoin_index_invalid_rows",
     "Rows of the live build holding the reserved key or masked out."},
    {"gpujoin_index_build_probes", "Total slots examined by the live build."},
    {"gpujoin_index_build_max_probes", "Most slots examined by one row of the live build."},
    {"gpujoin_index_probe_bound",
     "Configured probe bound (max_probe_count; capacity when 0) of the live index."},
    {"gpujoin_index_device_bytes", "Device (or host, CPU backend) bytes held by the live index."},
    {"gpujoin_index_payload_bytes",
     "Bytes of the live index's payload columns (included in gpujoin_index_device_bytes)."},
    {"gpujoin_index_version", "Version number of the live index."},
    {"gpujoin_index_source_rows", "Source rows of the live build."},
    {"gpujoin_index_build_seconds", "Wall time of the live build, in seconds."},
    {"gpujoin_index_mutation_sequence",
     "Mutate batches applied to the live index since its build or load."},
    {"gpujoin_index_rehashes", "Times Mutate grew the live index's table since its build."},
};

const char* OpLabel(QueryOp op) { return op == QueryOp::kLookup ? "lookup" : "join"; }

}  // namespace

std::string_view BuildResultName(BuildResult result) {
  switch (result) {
    case BuildResult::kOk:
      return "ok";
    case BuildResult::kInvalidArgument:
      return "invalid_argument";
    case BuildResult::kResourceExhausted:
      return "resource_exhausted";
    case BuildResult::kAlreadyExists:
      return "already_exists";
    case BuildResult::kCancelled:
      return "cancelled";
    case BuildResult::kError:
      return "error";
  }
  return "error";
}

Metrics::Metrics() : registry_(std::make_shared<prometheus::Registry>()) {
  auto& r = *registry_;
  for (const auto& [name, help] : kIndexGauges) {
    index_gauges_[name] = &BuildGauge().Name(name).Help(help).Register(r);
  }
  builds_ = &BuildCounter()
                 .Name("gpujoin_index_builds_total")
                 .Help(
                     "Index builds by result (ok, invalid_argument, resource_exhausted, "
                     "already_exists, cancelled, error).")
                 .Register(r);
  query_rows_ = &BuildCounter()
                     .Name("gpujoin_query_rows_total")
                     .Help("Query rows by index and operation.")
                     .Register(r);
  query_found_ = &BuildCounter()
                      .Name("gpujoin_query_found_total")
                      .Help("Query rows whose key was found.")
                      .Register(r);
  query_missing_ = &BuildCounter()
                        .Name("gpujoin_query_missing_total")
                        .Help("Query rows whose key was missing.")
                        .Register(r);
  query_probes_ = &BuildCounter()
                       .Name("gpujoin_query_probes_total")
                       .Help("Slots examined by query rows.")
                       .Register(r);
  query_max_probes_ = &BuildGauge()
                           .Name("gpujoin_query_max_probes")
                           .Help("Most slots examined by one row of the most recent batch.")
                           .Register(r);
  join_pairs_ = &BuildCounter()
                     .Name("gpujoin_join_pairs_total")
                     .Help("Matching join pairs (before truncation to the batch capacity).")
                     .Register(r);
  index_info_ = &BuildGauge()
                     .Name("gpujoin_index_info")
                     .Help("Always 1 for a live index; label key_type is uint32 or uint64.")
                     .Register(r);
  join_overflow_ =
      &BuildCounter()
           .Name("gpujoin_join_overflow_batches_total")
           .Help("Join batches whose pairs exceeded the capacity or whose index build overflowed.")
           .Register(r);

  auto& gathered = BuildCounter()
                       .Name("gpujoin_gathered_bytes_total")
                       .Help(
                           "Payload bytes gathered into Lookup and Join responses (values, "
                           "bitmaps, string offsets and bytes), by rpc (Lookup, Join, the rpc label of the other series).")
                       .Register(r);
  gathered_lookup_ = &gathered.Add({{"rpc", "Lookup"}});
  gathered_join_ = &gathered.Add({{"rpc", "Join"}});

  rpc_duration_ = &BuildHistogram()
                       .Name("gpujoin_rpc_duration_seconds")
                       .Help(
                           "Duration of a unary call, or of one stream batch from receipt to "
                           "response, in seconds.")
                       .Register(r);
  rpc_phase_ = &BuildHistogram()
                    .Name("gpujoin_rpc_phase_seconds")
                    .Help("Where a stream batch's time goes, by rpc and phase: decode (parsing "
                          "the message), queue (waiting for an executor thread; 0 inline), "
                          "execute (the operation), wait (the answer waiting for its turn to "
                          "be written) and encode (serialising each response message).")
                    .Register(r);
  rpc_batches_ = &BuildCounter()
                      .Name("gpujoin_rpc_batches_total")
                      .Help("Unary calls, stream batches and build chunks by RPC.")
                      .Register(r);
  rpc_rows_ =
      &BuildCounter().Name("gpujoin_rpc_rows_total").Help("Rows received by RPC.").Register(r);
  rpc_errors_ = &BuildCounter()
                     .Name("gpujoin_rpc_errors_total")
                     .Help("Failed calls and in-band batch errors by RPC and gRPC code.")
                     .Register(r);
  const prometheus::Histogram::BucketBoundaries buckets = {
      0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
      0.1,    0.25,    0.5,    1,     2.5,    5,     10,   30};
  for (std::string_view rpc : kRpcNames) {
    const std::string name(rpc);
    RpcSeries s;
    s.duration = &rpc_duration_->Add({{"rpc", name}}, buckets);
    const prometheus::Histogram::BucketBoundaries phase_buckets = {
        0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.01, 0.1, 1};
    const char* phase_names[] = {"decode", "queue", "execute", "wait", "encode"};
    for (size_t p = 0; p < s.phases.size(); ++p) {
      s.phases[p] = &rpc_phase_->Add({{"rpc", name}, {"phase", phase_names[p]}}, phase_buckets);
    }
    s.batches = &rpc_batches_->Add({{"rpc", name}});
    s.rows = &rpc_rows_->Add({{"rpc", name}});
    rpcs_.emplace(name, s);
    for (std::string_view code : kRpcErrorCodes) {
      const std::string code_name(code);
      rpc_errors_by_code_[{name, code_name}] =
          &rpc_errors_->Add({{"rpc", name}, {"code", code_name}});
    }
  }

  memory_used_ = &BuildGauge()
                      .Name("gpujoin_device_memory_used_bytes")
                      .Help("Device memory reserved by gpujoin's indexes, in bytes.")
                      .Register(r)
                      .Add({});
  memory_budget_ = &BuildGauge()
                        .Name("gpujoin_device_memory_budget_bytes")
                        .Help("Device memory budget for indexes (--device-memory-limit), in bytes.")
                        .Register(r)
                        .Add({});
  memory_total_ =
      &BuildGauge()
           .Name("gpujoin_device_memory_total_bytes")
           .Help("Total memory of the device (physical memory on the CPU backend), in bytes.")
           .Register(r)
           .Add({});
  backend_info_ = &BuildGauge()
                       .Name("gpujoin_backend_info")
                       .Help("Always 1; labels name the engine backend and device.")
                       .Register(r);
  build_info_ =
      &BuildGauge()
           .Name("gpujoin_build_info")
           .Help("Always 1; labels name the gpujoind version, the engine backend and the device.")
           .Register(r);
  serving_ = &BuildGauge()
                  .Name("gpujoin_serving")
                  .Help("1 while serving; 0 after a fatal device error or while draining.")
                  .Register(r)
                  .Add({});
  inflight_ = &BuildGauge()
                   .Name("gpujoin_inflight_batches")
                   .Help("Stream batches admitted and not yet answered.")
                   .Register(r)
                   .Add({});
  index_count_ =
      &BuildGauge().Name("gpujoin_indexes").Help("Number of live indexes.").Register(r).Add({});
  pending_response_bytes_ =
      &BuildGauge()
           .Name("gpujoin_pending_response_bytes")
           .Help("Host bytes held by stream responses waiting to be written, counted against "
                 "--max-pending-response-bytes.")
           .Register(r)
           .Add({});
  pending_response_limit_ = &BuildGauge()
                                 .Name("gpujoin_pending_response_limit_bytes")
                                 .Help("--max-pending-response-bytes as resolved, in bytes.")
                                 .Register(r)
                                 .Add({});
  pending_response_refusals_ =
      &BuildCounter()
           .Name("gpujoin_pending_response_refusals_total")
           .Help("Stream batches answered RESOURCE_EXHAUSTED because their response did not fit "
                 "in --max-pending-response-bytes.")
           .Register(r)
           .Add({});
  paused_streams_ = &BuildGauge()
                         .Name("gpujoin_paused_streams")
                         .Help("Streams not reading new batches because their responses waiting "
                               "behind the one being written hold --max-message-bytes or more.")
                         .Register(r)
                         .Add({});
  mutation_batches_ = &BuildCounter()
                           .Name("gpujoin_mutation_batches_total")
                           .Help("Mutate batches applied (refused batches are not counted).")
                           .Register(r)
                           .Add({});
  auto& mutation_rows = BuildCounter()
                            .Name("gpujoin_mutation_rows_total")
                            .Help("Rows applied by Mutate batches: op=\"upsert\" rows upserted, "
                                  "op=\"delete\" rows removed by deletes.")
                            .Register(r);
  mutation_upserted_ = &mutation_rows.Add({{"op", "upsert"}});
  mutation_deleted_ = &mutation_rows.Add({{"op", "delete"}});
  mutation_rehashes_ = &BuildCounter()
                            .Name("gpujoin_mutation_rehashes_total")
                            .Help("Mutate batches that grew their index's table.")
                            .Register(r)
                            .Add({});
  mutation_seconds_ =
      &BuildHistogram()
           .Name("gpujoin_mutation_seconds")
           .Help("Time to apply one Mutate batch (decode to swap, without the log's fsync).")
           .Register(r)
           .Add({}, prometheus::Histogram::BucketBoundaries{0.0001, 0.00025, 0.0005, 0.001, 0.0025,
                                                            0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                                            0.5, 1, 2.5, 5, 10, 30});
}

void Metrics::RecordMutation(uint64_t upsert_rows, uint64_t deleted_rows, bool rehashed,
                             double seconds) {
  mutation_batches_->Increment();
  mutation_upserted_->Increment(double(upsert_rows));
  mutation_deleted_->Increment(double(deleted_rows));
  if (rehashed) mutation_rehashes_->Increment();
  mutation_seconds_->Observe(seconds);
}

void Metrics::SetBackendInfo(std::string_view backend, std::string_view device) {
  std::lock_guard<std::mutex> lock(mu_);
  backend_info_->Add({{"backend", std::string(backend)}, {"device", std::string(device)}}).Set(1);
}

void Metrics::SetBuildInfo(std::string_view version, std::string_view backend,
                           std::string_view device) {
  std::lock_guard<std::mutex> lock(mu_);
  if (build_info_series_ != nullptr) build_info_->Remove(build_info_series_);
  build_info_series_ = &build_info_->Add({{"version", std::string(version)},
                                          {"backend", std::string(backend)},
                                          {"device", std::string(device)}});
  build_info_series_->Set(1);
}

void Metrics::SetDeviceMemory(uint64_t used, uint64_t budget, uint64_t total) {
  memory_used_->Set(static_cast<double>(used));
  memory_budget_->Set(static_cast<double>(budget));
  memory_total_->Set(static_cast<double>(total));
}

void Metrics::SetServing(bool serving) { serving_->Set(serving ? 1 : 0); }
void Metrics::SetInflightBatches(int64_t batches) { inflight_->Set(static_cast<double>(batches)); }
void Metrics::SetIndexCount(size_t count) { index_count_->Set(static_cast<double>(count)); }
void Metrics::SetPendingResponseBytes(uint64_t bytes) {
  pending_response_bytes_->Set(static_cast<double>(bytes));
}
void Metrics::SetPendingResponseLimit(uint64_t bytes) {
  pending_response_limit_->Set(static_cast<double>(bytes));
}
void Metrics::CountPendingResponseRefusal() { pending_response_refusals_->Increment(); }
void Metrics::AddPausedStreams(int delta) { paused_streams_->Increment(delta); }

Metrics::QuerySeries Metrics::MakeQuerySeries(const std::string& name, std::string_view op) {
  const prometheus::Labels labels = {{"index", name}, {"op", std::string(op)}};
  QuerySeries q;
  q.rows = &query_rows_->Add(labels);
  q.found = &query_found_->Add(labels);
  q.missing = &query_missing_->Add(labels);
  q.probes = &query_probes_->Add(labels);
  q.max_probes = &query_max_probes_->Add(labels);
  return q;
}

void Metrics::RemoveQuerySeries(QuerySeries& q) {
  if (q.rows == nullptr) return;
  query_rows_->Remove(q.rows);
  query_found_->Remove(q.found);
  query_missing_->Remove(q.missing);
  query_probes_->Remove(q.probes);
  query_max_probes_->Remove(q.max_probes);
  q = QuerySeries{};
}

Metrics::IndexSeries& Metrics::IndexSeriesLocked(const std::string& name) {
  auto [it, inserted] = indexes_.try_emplace(name);
  if (inserted) {
    for (BuildResult result : kBuildResults) {
      it->second.builds[result] =
          &builds_->Add({{"index", name}, {"result", std::string(BuildResultName(result))}});
    }
  }
  return it->second;
}

void Metrics::SetIndex(const IndexVersion& v) {
  std::lock_guard<std::mutex> lock(mu_);
  IndexSeries& s = IndexSeriesLocked(v.name);
  const prometheus::Labels labels = {{"index", v.name}};
  if (!s.live) {
    s.live = true;
    for (auto& [family_name, family] : index_gauges_) s.gauges[family_name] = &family->Add(labels);
    s.lookup = MakeQuerySeries(v.name, OpLabel(QueryOp::kLookup));
    s.join = MakeQuerySeries(v.name, OpLabel(QueryOp::kJoin));
    s.join_pairs = &join_pairs_->Add(labels);
    s.join_overflow = &join_overflow_->Add(labels);
  }
  const engine::HashIndex& index = *v.index;
  // Replaced rather than updated: the key type is a label (a rebuild may change it).
  if (s.info != nullptr) index_info_->Remove(s.info);
  s.info = &index_info_->Add(
      {{"index", v.name}, {"key_type", std::string(engine::KeyTypeName(index.key_type()))}});
  s.info->Set(1);
  const engine::BuildStatistics& st = index.build_statistics();
  auto set = [&](const char* family, double value) { s.gauges[family]->Set(value); };
  set("gpujoin_index_capacity_slots", index.spec().capacity);
  set("gpujoin_index_load_factor", index.load_factor());
  set("gpujoin_index_unique_keys", static_cast<double>(st.unique_keys));
  set("gpujoin_index_duplicate_rows", static_cast<double>(st.duplicate_rows));
  set("gpujoin_index_overflow_rows", static_cast<double>(st.overflow_rows));
  set("gpujoin_index_invalid_rows", static_cast<double>(st.invalid_rows));
  set("gpujoin_index_build_probes", static_cast<double>(st.total_probes));
  set("gpujoin_index_build_max_probes", static_cast<double>(st.max_probes));
  set("gpujoin_index_probe_bound", index.spec().probe_bound());
  set("gpujoin_index_device_bytes", static_cast<double>(index.held_bytes()));
  uint64_t payload_bytes = 0;
  for (const engine::PayloadColumnInfo& p : index.payload()) payload_bytes += p.bytes;
  // With the dictionaries' values (their codes columns are payload already).
  set("gpujoin_index_payload_bytes", static_cast<double>(payload_bytes + index.dictionary_bytes()));
  set("gpujoin_index_version", static_cast<double>(v.version));
  set("gpujoin_index_source_rows", static_cast<double>(index.built_rows()));
  set("gpujoin_index_build_seconds", v.build_seconds);
  set("gpujoin_index_mutation_sequence", static_cast<double>(v.mutation.sequence));
  set("gpujoin_index_rehashes", static_cast<double>(v.mutation.rehashes));
}

void Metrics::RemoveIndex(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = indexes_.find(name);
  if (it == indexes_.end()) return;
  IndexSeries& s = it->second;
  for (auto& [family_name, gauge] : s.gauges) index_gauges_[family_name]->Remove(gauge);
  RemoveQuerySeries(s.lookup);
  RemoveQuerySeries(s.join);
  if (s.join_pairs != nullptr) join_pairs_->Remove(s.join_pairs);
  if (s.join_overflow != nullptr) join_overflow_->Remove(s.join_overflow);
  if (s.info != nullptr) index_info_->Remove(s.info);
  for (auto& [result, counter] : s.builds) builds_->Remove(counter);
  indexes_.erase(it);
}

void Metrics::CountBuild(const std::string& name, BuildResult result) {
  std::lock_guard<std::mutex> lock(mu_);
  // A name that is not live gets no series: a failed first build (or any number
  // of failed builds with new names) must not leave a series no drop can remove.
  // Those failures are counted in gpujoin_rpc_errors_total{rpc="BuildIndex"}.
  auto it = indexes_.find(name);
  if (it == indexes_.end() || !it->second.live) return;
  it->second.builds.at(result)->Increment();
}

void Metrics::RecordQuery(const std::string& name, QueryOp op, uint64_t rows,
                          const engine::QueryStatistics& stats) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = indexes_.find(name);
  if (it == indexes_.end() || !it->second.live) return;
  QuerySeries& q = op == QueryOp::kLookup ? it->second.lookup : it->second.join;
  q.rows->Increment(static_cast<double>(rows));
  q.found->Increment(static_cast<double>(stats.found));
  q.missing->Increment(static_cast<double>(stats.missing));
  q.probes->Increment(static_cast<double>(stats.total_probes));
  q.max_probes->Set(static_cast<double>(stats.max_probes));
}

void Metrics::RecordJoinBatch(const std::string& name, uint64_t pairs, bool overflow) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = indexes_.find(name);
  if (it == indexes_.end() || !it->second.live) return;
  it->second.join_pairs->Increment(static_cast<double>(pairs));
  if (overflow) it->second.join_overflow->Increment();
}

void Metrics::RecordGathered(QueryOp op, uint64_t bytes) {
  (op == QueryOp::kLookup ? gathered_lookup_ : gathered_join_)
      ->Increment(static_cast<double>(bytes));
}

void Metrics::ObserveRpc(std::string_view rpc, double seconds, uint64_t rows) {
  auto it = rpcs_.find(rpc);  // fixed at construction: no lock needed
  if (it == rpcs_.end()) return;
  it->second.duration->Observe(seconds);
  it->second.batches->Increment();
  it->second.rows->Increment(static_cast<double>(rows));
}

void Metrics::ObserveRpcPhase(std::string_view rpc, RpcPhase phase, double seconds) {
  auto it = rpcs_.find(rpc);  // fixed at construction: no lock needed
  if (it == rpcs_.end()) return;
  it->second.phases[static_cast<size_t>(phase)]->Observe(seconds);
}

void Metrics::CountRpcError(std::string_view rpc, std::string_view code) {
  std::lock_guard<std::mutex> lock(mu_);
  auto key = std::make_pair(std::string(rpc), std::string(code));
  prometheus::Counter*& c = rpc_errors_by_code_[key];
  if (c == nullptr) c = &rpc_errors_->Add({{"rpc", key.first}, {"code", key.second}});
  c->Increment();
}

}  // namespace gpujoin::server
