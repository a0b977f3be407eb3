#include "router/router_service.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gpujoin/common/status_macros.hpp"
#include "gpujoin/engine/partition.hpp"
#include "router/wire_rows.hpp"

namespace gpujoin::server::router {
namespace {

// Sums a, b into a (statistics), keeping the maxima of max fields.
void AddBuildStatistics(v1::BuildStatistics* a, const v1::BuildStatistics& b) {
  a->set_unique_keys(a->unique_keys() + b.unique_keys());
  a->set_duplicate_rows(a->duplicate_rows() + b.duplicate_rows());
  a->set_overflow_rows(a->overflow_rows() + b.overflow_rows());
  a->set_invalid_rows(a->invalid_rows() + b.invalid_rows());
  a->set_total_probes(a->total_probes() + b.total_probes());
  a->set_max_probes(std::max(a->max_probes(), b.max_probes()));
  a->set_max_group_rows(std::max(a->max_group_rows(), b.max_group_rows()));
}

void AddQueryStatistics(v1::QueryStatistics* a, const v1::QueryStatistics& b) {
  a->set_found(a->found() + b.found());
  a->set_missing(a->missing() + b.missing());
  a->set_total_probes(a->total_probes() + b.total_probes());
  a->set_max_probes(std::max(a->max_probes(), b.max_probes()));
}

}  // namespace

absl::StatusOr<v1::IndexInfo> MergeIndexInfos(const std::vector<v1::IndexInfo>& infos,
                                              const std::vector<std::string>& shard_names) {
  v1::IndexInfo out = infos.at(0);
  for (size_t s = 1; s < infos.size(); ++s) {
    const v1::IndexInfo& i = infos[s];
    if (i.version() != out.version()) {
      return absl::AbortedError(absl::StrCat(
          "index \"", out.name(), "\": ", shard_names[0], " serves version ", out.version(), " but ",
          shard_names[s], " serves version ", i.version(),
          " (an index is built through the router on every shard; rebuild it there)"));
    }
    out.set_capacity(out.capacity() + i.capacity());
    out.set_rows(out.rows() + i.rows());
    AddBuildStatistics(out.mutable_statistics(), i.statistics());
    out.set_device_bytes(out.device_bytes() + i.device_bytes());
    out.set_build_seconds(std::max(out.build_seconds(), i.build_seconds()));
    out.set_built_unix_millis(std::max(out.built_unix_millis(), i.built_unix_millis()));
    out.set_payload_bytes(out.payload_bytes() + i.payload_bytes());
    out.set_durable_version(std::min(out.durable_version(), i.durable_version()));
    out.set_mutation_sequence(out.mutation_sequence() + i.mutation_sequence());
    out.set_next_row_id(std::max(out.next_row_id(), i.next_row_id()));
    out.set_rehashes(out.rehashes() + i.rehashes());
    for (int c = 0; c < out.payload_size() && c < i.payload_size(); ++c) {
      v1::PayloadColumnInfo* p = out.mutable_payload(c);
      const v1::PayloadColumnInfo& q = i.payload(c);
      p->set_null_count(p->null_count() + q.null_count());
      p->set_bytes(p->bytes() + q.bytes());
      p->set_dictionary_bytes(p->dictionary_bytes() + q.dictionary_bytes());
      p->set_dictionary_values(std::max(p->dictionary_values(), q.dictionary_values()));
    }
  }
  out.set_load_factor(out.capacity() == 0
                          ? 0.0
                          : double(out.statistics().unique_keys()) / double(out.capacity()));
  return out;
}

namespace {

class RouterService final : public v1::GpuJoin::Service {
 public:
  RouterService(const RouterConfig& config, std::vector<Shard>* shards,
                const TokenAuthenticator* auth, std::string shard_token, ShardMetrics* metrics)
      : config_(config),
        shards_(*shards),
        auth_(auth),
        shard_token_(std::move(shard_token)),
        metrics_(metrics) {
    for (const Shard& s : shards_) names_.push_back(s.Name());
  }

  grpc::Status GetServerInfo(grpc::ServerContext* ctx, const v1::GetServerInfoRequest* request,
                             v1::GetServerInfoResponse* response) override {
    std::vector<v1::GetServerInfoResponse> answers;
    grpc::Status s = FanOut<v1::GetServerInfoRequest, v1::GetServerInfoResponse>(
        ctx, "GetServerInfo", *request, &v1::GpuJoin::Stub::GetServerInfo, &answers);
    if (!s.ok()) return s;
    *response = answers[0];
    bool serving = true;
    for (size_t i = 1; i < answers.size(); ++i) {
      const auto& a = answers[i];
      response->set_device_memory_total_bytes(response->device_memory_total_bytes() +
                                              a.device_memory_total_bytes());
      response->set_device_memory_used_bytes(response->device_memory_used_bytes() +
                                             a.device_memory_used_bytes());
      response->set_device_memory_budget_bytes(response->device_memory_budget_bytes() +
                                               a.device_memory_budget_bytes());
      response->set_staged_bytes(response->staged_bytes() + a.staged_bytes());
      response->set_pending_response_bytes(response->pending_response_bytes() +
                                           a.pending_response_bytes());
      serving &= a.serving();
    }
    response->set_serving(serving && answers[0].serving());
    response->set_device_name(absl::StrCat(answers.size(), " shards: ", answers[0].device_name()));
    response->set_max_message_bytes(
        std::min<uint64_t>(response->max_message_bytes(), config_.max_message_bytes));
    return grpc::Status::OK;
  }

  grpc::Status ListIndexes(grpc::ServerContext* ctx, const v1::ListIndexesRequest* request,
                           v1::ListIndexesResponse* response) override {
    std::vector<v1::ListIndexesResponse> answers;
    grpc::Status s = FanOut<v1::ListIndexesRequest, v1::ListIndexesResponse>(
        ctx, "ListIndexes", *request, &v1::GpuJoin::Stub::ListIndexes, &answers);
    if (!s.ok()) return s;
    std::map<std::string, std::vector<v1::IndexInfo>> by_name;
    for (const auto& a : answers) {
      for (const auto& i : a.indexes()) by_name[i.name()].push_back(i);
    }
    for (auto& [name, infos] : by_name) {
      if (infos.size() != shards_.size()) {
        return grpc::Status(grpc::StatusCode::ABORTED,
                            absl::StrCat("index \"", name, "\" is on ", infos.size(), " of ",
                                         shards_.size(), " shards (rebuild or drop it through "
                                                         "the router)"));
      }
      absl::StatusOr<v1::IndexInfo> merged = MergeIndexInfos(infos, names_);
      if (!merged.ok()) return ToGrpc(merged.status());
      *response->add_indexes() = *std::move(merged);
    }
    return grpc::Status::OK;
  }

  grpc::Status DescribeIndex(grpc::ServerContext* ctx, const v1::DescribeIndexRequest* request,
                             v1::DescribeIndexResponse* response) override {
    std::vector<v1::DescribeIndexResponse> answers;
    grpc::Status s = FanOut<v1::DescribeIndexRequest, v1::DescribeIndexResponse>(
        ctx, "DescribeIndex", *request, &v1::GpuJoin::Stub::DescribeIndex, &answers);
    if (!s.ok()) return s;
    std::vector<v1::IndexInfo> infos;
    for (const auto& a : answers) infos.push_back(a.index());
    absl::StatusOr<v1::IndexInfo> merged = MergeIndexInfos(infos, names_);
    if (!merged.ok()) return ToGrpc(merged.status());
    *response->mutable_index() = *std::move(merged);
    return grpc::Status::OK;
  }

  grpc::Status DropIndex(grpc::ServerContext* ctx, const v1::DropIndexRequest* request,
                         v1::DropIndexResponse* response) override {
    std::vector<v1::DropIndexResponse> answers;
    std::vector<grpc::Status> statuses;
    grpc::Status s = RemoveEverywhere<v1::DropIndexRequest, v1::DropIndexResponse>(
        ctx, "DropIndex", *request, &v1::GpuJoin::Stub::DropIndex, &answers, &statuses);
    for (size_t i = 0; i < answers.size(); ++i) {
      if (!statuses[i].ok()) continue;
      response->set_dropped_version(answers[i].dropped_version());
      response->set_freed_bytes(response->freed_bytes() + answers[i].freed_bytes());
    }
    return s;
  }

  grpc::Status BuildIndex(grpc::ServerContext* ctx,
                          grpc::ServerReader<v1::BuildIndexRequest>* reader,
                          v1::BuildIndexResponse* response) override;

  grpc::Status Lookup(
      grpc::ServerContext* ctx,
      grpc::ServerReaderWriter<v1::LookupResponse, v1::LookupRequest>* stream) override;

  // Hash needs no index: any shard answers (they take turns, call by call).
  grpc::Status Hash(grpc::ServerContext* ctx,
                    grpc::ServerReaderWriter<v1::HashResponse, v1::HashRequest>* stream) override {
    grpc::Status denied = Authorize(ctx);
    if (!denied.ok()) return denied;
    const size_t shard = next_hash_shard_.fetch_add(1) % shards_.size();
    return Passthrough(ctx, stream, shard, "Hash", &v1::GpuJoin::Stub::Hash);
  }

  // Snapshots: every shard saves, loads, lists or deletes its own part
  // (under its own --data-dir), as one call.
  grpc::Status SaveIndex(grpc::ServerContext* ctx, const v1::SaveIndexRequest* request,
                         v1::SaveIndexResponse* response) override {
    std::vector<v1::SaveIndexResponse> answers;
    grpc::Status s = FanOut<v1::SaveIndexRequest, v1::SaveIndexResponse>(
        ctx, "SaveIndex", *request, &v1::GpuJoin::Stub::SaveIndex, &answers);
    if (!s.ok()) return s;
    *response = answers[0];
    for (size_t i = 1; i < answers.size(); ++i) {
      if (answers[i].version() != answers[0].version()) {
        return grpc::Status(grpc::StatusCode::ABORTED,
                            absl::StrCat("index \"", request->name(), "\": ", names_[0],
                                         " saved version ", answers[0].version(), " but ",
                                         names_[i], " version ", answers[i].version()));
      }
      response->set_bytes(response->bytes() + answers[i].bytes());
      response->set_seconds(std::max(response->seconds(), answers[i].seconds()));
    }
    return grpc::Status::OK;
  }

  grpc::Status LoadIndex(grpc::ServerContext* ctx, const v1::LoadIndexRequest* request,
                         v1::LoadIndexResponse* response) override {
    std::vector<v1::LoadIndexResponse> answers;
    grpc::Status s = FanOut<v1::LoadIndexRequest, v1::LoadIndexResponse>(
        ctx, "LoadIndex", *request, &v1::GpuJoin::Stub::LoadIndex, &answers);
    if (!s.ok()) return s;
    std::vector<v1::IndexInfo> infos;
    for (const auto& a : answers) infos.push_back(a.index());
    absl::StatusOr<v1::IndexInfo> merged = MergeIndexInfos(infos, names_);
    if (!merged.ok()) return ToGrpc(merged.status());
    *response->mutable_index() = *std::move(merged);
    return grpc::Status::OK;
  }

  grpc::Status ListFiles(grpc::ServerContext* ctx, const v1::ListFilesRequest* request,
                         v1::ListFilesResponse* response) override {
    std::vector<v1::ListFilesResponse> answers;
    grpc::Status s = FanOut<v1::ListFilesRequest, v1::ListFilesResponse>(
        ctx, "ListFiles", *request, &v1::GpuJoin::Stub::ListFiles, &answers);
    if (!s.ok()) return s;
    // A file by name: its parts' bytes summed, live only where every part is.
    std::map<std::string, v1::DataFile> files;
    std::map<std::string, size_t> parts;
    for (const auto& a : answers) {
      response->set_snapshot_bytes(response->snapshot_bytes() + a.snapshot_bytes());
      response->set_copy_bytes(response->copy_bytes() + a.copy_bytes());
      for (const v1::DataFile& f : a.files()) {
        auto [it, inserted] = files.try_emplace(f.file(), f);
        ++parts[f.file()];
        if (inserted) continue;
        it->second.set_bytes(it->second.bytes() + f.bytes());
        it->second.set_modified_unix_millis(
            std::max(it->second.modified_unix_millis(), f.modified_unix_millis()));
        it->second.set_live(it->second.live() && f.live());
      }
    }
    for (auto& [name, f] : files) {
      if (parts[name] != shards_.size()) f.set_live(false);
      *response->add_files() = f;
    }
    response->set_max_copy_bytes(answers[0].max_copy_bytes());
    response->set_max_snapshot_bytes(answers[0].max_snapshot_bytes());
    return grpc::Status::OK;
  }

  grpc::Status DeleteFile(grpc::ServerContext* ctx, const v1::DeleteFileRequest* request,
                          v1::DeleteFileResponse* response) override {
    std::vector<v1::DeleteFileResponse> answers;
    std::vector<grpc::Status> statuses;
    grpc::Status s = RemoveEverywhere<v1::DeleteFileRequest, v1::DeleteFileResponse>(
        ctx, "DeleteFile", *request, &v1::GpuJoin::Stub::DeleteFile, &answers, &statuses);
    for (size_t i = 0; i < answers.size(); ++i) {
      if (statuses[i].ok()) response->set_bytes(response->bytes() + answers[i].bytes());
    }
    return s;
  }

#define GPUJOIN_ROUTER_UNIMPLEMENTED(Rpc, Signature)                                          \
  grpc::Status Rpc Signature override {                                                      \
    return grpc::Status(grpc::StatusCode::UNIMPLEMENTED,                                     \
                        #Rpc " is not served by gpujoin-router yet (docs/operations.md, "    \
                             "\"Sharding\"); call a gpujoind directly");                     \
  }
  GPUJOIN_ROUTER_UNIMPLEMENTED(
      Join, (grpc::ServerContext*, grpc::ServerReaderWriter<v1::JoinResponse, v1::JoinRequest>*))
  GPUJOIN_ROUTER_UNIMPLEMENTED(
      Aggregate,
      (grpc::ServerContext*, grpc::ServerReaderWriter<v1::AggregateResponse, v1::AggregateRequest>*))
  GPUJOIN_ROUTER_UNIMPLEMENTED(
      Mutate, (grpc::ServerContext*, grpc::ServerReaderWriter<v1::MutateResponse, v1::MutateRequest>*))
  GPUJOIN_ROUTER_UNIMPLEMENTED(
      Query, (grpc::ServerContext*, grpc::ServerReaderWriter<v1::QueryResponse, v1::QueryRequest>*))
#undef GPUJOIN_ROUTER_UNIMPLEMENTED

 private:
  // A stream forwarded to one shard as it is, both ways at once (batches in
  // flight stay in flight); the shard's failure is the call's, naming it.
  template <class Request, class Response, class Method>
  grpc::Status Passthrough(grpc::ServerContext* ctx,
                           grpc::ServerReaderWriter<Response, Request>* stream, size_t shard,
                           const char* rpc, Method method) {
    auto context = ShardContext(ctx, /*unary=*/false);
    auto peer = (shards_[shard].stub.get()->*method)(context.get());
    std::mutex mu;
    // Batches sent and not yet answered: when they were sent, and their ids.
    std::deque<std::pair<Clock::time_point, uint64_t>> sent;
    bool client_gone = false;
    std::thread answers([&] {
      Response answer;
      while (peer->Read(&answer)) {
        Clock::time_point start;
        {
          std::lock_guard<std::mutex> lock(mu);
          start = sent.empty() ? Clock::now() : sent.front().first;
          if (!sent.empty()) sent.pop_front();
        }
        metrics_->Record(shard, rpc, std::chrono::duration<double>(Clock::now() - start).count(),
                         !answer.has_error());
        if (!stream->Write(answer)) {
          std::lock_guard<std::mutex> lock(mu);
          client_gone = true;
          context->TryCancel();
          return;
        }
      }
      // The shard ended its stream. A batch it left unanswered gets an error
      // naming it (the client may be waiting for that answer before it sends
      // more or half-closes); the call then ends with the shard's status.
      std::lock_guard<std::mutex> lock(mu);
      for (; !sent.empty(); sent.pop_front()) {
        Response error;
        error.set_batch_id(sent.front().second);
        error.mutable_error()->set_code(static_cast<int>(grpc::StatusCode::UNAVAILABLE));
        error.mutable_error()->set_message(
            absl::StrCat(shards_[shard].Name(), ": its stream ended before answering this batch"));
        metrics_->Record(shard, rpc, 0, false);
        if (!stream->Write(error)) break;
      }
    });
    Request request;
    bool shard_broke = false;
    while (stream->Read(&request)) {
      {
        std::lock_guard<std::mutex> lock(mu);
        sent.emplace_back(Clock::now(), request.batch_id());
      }
      if (!peer->Write(request)) {
        shard_broke = true;
        break;
      }
    }
    if (!shard_broke) peer->WritesDone();
    answers.join();
    grpc::Status st = peer->Finish();
    if (client_gone) return grpc::Status::CANCELLED;
    if (!st.ok() || shard_broke) {
      if (st.ok()) st = grpc::Status(grpc::StatusCode::UNAVAILABLE, "ended its stream early");
      return ShardFailed(shards_[shard], st);
    }
    return grpc::Status::OK;
  }

  grpc::Status Authorize(grpc::ServerContext* ctx) const {
    if (auth_ == nullptr) return grpc::Status::OK;
    return ToGrpc(auth_->Check(ctx->client_metadata()));
  }

  // A client context toward a shard: the caller's deadline and cancellation,
  // the shard token, and for unary calls at most --shard-timeout.
  std::unique_ptr<grpc::ClientContext> ShardContext(grpc::ServerContext* ctx, bool unary) const {
    std::unique_ptr<grpc::ClientContext> c = grpc::ClientContext::FromServerContext(*ctx);
    if (!shard_token_.empty()) c->AddMetadata("authorization", "Bearer " + shard_token_);
    if (unary) {
      const auto limit = std::chrono::system_clock::now() +
                         std::chrono::microseconds(
                             static_cast<int64_t>(config_.shard_timeout_seconds * 1e6));
      if (ctx->deadline() > limit) c->set_deadline(limit);
    }
    return c;
  }

  void Record(size_t shard, const char* rpc, Clock::time_point start, const grpc::Status& s) {
    metrics_->Record(shard, rpc,
                     std::chrono::duration<double>(Clock::now() - start).count(), s.ok());
  }

  template <class F>
  void ForEachShard(F&& f) {
    std::vector<std::thread> threads;
    for (size_t s = 1; s < shards_.size(); ++s) threads.emplace_back([&f, s] { f(s); });
    f(0);
    for (std::thread& t : threads) t.join();
  }

  // A unary call on every shard at once: each shard's answer and status.
  template <class Request, class Response, class Method>
  void CallEach(grpc::ServerContext* ctx, const char* rpc, const Request& request, Method method,
                std::vector<Response>* answers, std::vector<grpc::Status>* statuses) {
    answers->assign(shards_.size(), Response{});
    statuses->assign(shards_.size(), grpc::Status::OK);
    ForEachShard([&](size_t s) {
      auto c = ShardContext(ctx, /*unary=*/true);
      const auto start = Clock::now();
      (*statuses)[s] = (shards_[s].stub.get()->*method)(c.get(), request, &(*answers)[s]);
      Record(s, rpc, start, (*statuses)[s]);
    });
  }

  // A removal (an index, a file) on every shard, also where another shard
  // answers NOT_FOUND (a thing on some shards only is removed from them): OK
  // when some shard removed it, NOT_FOUND when none held it, else the first
  // other failure, naming the shard and how many removed it.
  template <class Request, class Response, class Method>
  grpc::Status RemoveEverywhere(grpc::ServerContext* ctx, const char* rpc, const Request& request,
                                Method method, std::vector<Response>* answers,
                                std::vector<grpc::Status>* statuses) {
    grpc::Status denied = Authorize(ctx);
    if (!denied.ok()) return denied;
    CallEach(ctx, rpc, request, method, answers, statuses);
    size_t removed = 0;
    for (const grpc::Status& st : *statuses) removed += st.ok() ? 1 : 0;
    for (size_t s = 0; s < shards_.size(); ++s) {
      const grpc::Status& st = (*statuses)[s];
      if (!st.ok() && st.error_code() != grpc::StatusCode::NOT_FOUND) {
        grpc::Status failed = ShardFailed(shards_[s], st);
        return grpc::Status(failed.error_code(),
                            absl::StrCat(failed.error_message(), " (", removed, " of ",
                                         shards_.size(), " shards removed it; ask again)"));
      }
    }
    return removed == 0 ? (*statuses)[0] : grpc::Status::OK;
  }

  // A unary call on every shard; the first failure (named) or every answer.
  template <class Request, class Response, class Method>
  grpc::Status FanOut(grpc::ServerContext* ctx, const char* rpc, const Request& request,
                      Method method, std::vector<Response>* answers) {
    grpc::Status denied = Authorize(ctx);
    if (!denied.ok()) return denied;
    std::vector<grpc::Status> statuses;
    CallEach(ctx, rpc, request, method, answers, &statuses);
    for (size_t s = 0; s < shards_.size(); ++s) {
      if (!statuses[s].ok()) {
        // What every shard answered alike (an unknown index, a bad argument)
        // is the caller's, as from one server; else the shard is named.
        bool everywhere = CallersError(statuses[s]);
        for (const grpc::Status& t : statuses) {
          everywhere &= t.error_code() == statuses[s].error_code() &&
                        (t.error_code() == grpc::StatusCode::NOT_FOUND ||
                         t.error_message() == statuses[s].error_message());
        }
        return everywhere ? statuses[s] : ShardFailed(shards_[s], statuses[s]);
      }
    }
    return grpc::Status::OK;
  }

  const RouterConfig& config_;
  std::vector<Shard>& shards_;
  std::vector<std::string> names_;
  const TokenAuthenticator* auth_;
  std::string shard_token_;
  ShardMetrics* metrics_;
  std::atomic<size_t> next_hash_shard_{0};
};

// ---------------------------------------------------------------- BuildIndex

uint32_t NextPowerOfTwo(uint64_t v) {
  uint64_t p = 1;
  while (p < v) p <<= 1;
  return static_cast<uint32_t>(std::min<uint64_t>(p, uint64_t{1} << 31));
}

grpc::Status RouterService::BuildIndex(grpc::ServerContext* ctx,
                                       grpc::ServerReader<v1::BuildIndexRequest>* reader,
                                       v1::BuildIndexResponse* response) {
  grpc::Status denied = Authorize(ctx);
  if (!denied.ok()) return denied;
  v1::BuildIndexRequest first;
  if (!reader->Read(&first) || !first.has_spec()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "spec: missing; the first message must carry spec");
  }
  const v1::IndexSpec spec = first.spec();
  if (spec.batch_mode()) {
    return grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                        "spec.batch_mode: batch builds are not served by gpujoin-router yet; "
                        "send the rows in order without batch_mode");
  }
  const uint32_t n = static_cast<uint32_t>(shards_.size());
  // Each shard holds about 1/n of the keys: its table is sized for its share.
  // Generated values are the router's: every row's value is first_value + its
  // global row, sent as explicit values, so the lowest global row still wins.
  v1::IndexSpec shard_spec = spec;
  shard_spec.set_explicit_values(true);
  if (spec.capacity() != 0) {
    // A share with a quarter more room: jump hash balances shards only on
    // average, and a fixed table must hold its fullest shard's keys.
    const uint64_t share = n == 1 ? spec.capacity() : (spec.capacity() * 5 + 4 * n - 1) / (4 * n);
    shard_spec.set_capacity(NextPowerOfTwo(share));
    if (spec.max_probe_count() > shard_spec.capacity()) {
      shard_spec.set_max_probe_count(shard_spec.capacity());
    }
  }
  if (spec.expected_rows() != 0) shard_spec.set_expected_rows((spec.expected_rows() + n - 1) / n);

  struct Writer {
    std::unique_ptr<grpc::ClientContext> context;
    v1::BuildIndexResponse response;
    std::unique_ptr<grpc::ClientWriter<v1::BuildIndexRequest>> writer;
    bool broken = false;
  };
  std::vector<Writer> writers(n);
  for (uint32_t s = 0; s < n; ++s) {
    writers[s].context = ShardContext(ctx, /*unary=*/false);
    writers[s].writer = shards_[s].stub->BuildIndex(writers[s].context.get(), &writers[s].response);
    v1::BuildIndexRequest r;
    *r.mutable_spec() = shard_spec;
    writers[s].broken = !writers[s].writer->Write(r);
  }
  // The part of every key row so far (payload rows may come in later chunks).
  std::vector<uint32_t> row_parts;
  std::vector<uint64_t> payload_rows(spec.payload_size(), 0);
  std::map<std::string, int> payload_index;
  for (int c = 0; c < spec.payload_size(); ++c) payload_index[spec.payload(c).name()] = c;
  absl::Status failed;
  v1::BuildIndexRequest message;
  uint64_t chunk_number = 0;
  while (failed.ok() && reader->Read(&message)) {
    const std::string field = absl::StrCat("chunks[", chunk_number++, "]");
    if (!message.has_chunk()) {
      failed = absl::InvalidArgumentError(absl::StrCat(std::string(field), ": a message after the spec must "
                                                              "carry a chunk"));
      break;
    }
    const v1::BuildChunk& chunk = message.chunk();
    const uint64_t base = row_parts.size();
    std::vector<uint32_t> parts;
    std::vector<uint32_t> words32;
    std::vector<uint64_t> words64;
    if (chunk.key_columns_size() > 0) {
      std::vector<std::vector<int32_t>> offsets;
      absl::StatusOr<engine::KeyColumns> keys =
          KeyColumnsOf(chunk.key_columns(), field + ".key_columns", &offsets);
      if (!keys.ok()) {
        failed = keys.status();
        break;
      }
      parts.resize(keys->rows());
      engine::PartitionsOf(*keys, n, parts);
    } else if (chunk.has_keys64()) {
      absl::StatusOr<std::vector<uint64_t>> w = WordsOf(chunk.keys64(), field + ".keys64");
      if (!w.ok()) {
        failed = w.status();
        break;
      }
      words64 = *std::move(w);
      parts.resize(words64.size());
      engine::PartitionsOf(std::span<const uint64_t>(words64), n, parts);
    } else if (chunk.has_keys()) {
      absl::StatusOr<std::vector<uint32_t>> w = WordsOf(chunk.keys(), field + ".keys");
      if (!w.ok()) {
        failed = w.status();
        break;
      }
      words32 = *std::move(w);
      parts.resize(words32.size());
      engine::PartitionsOf(std::span<const uint32_t>(words32), n, parts);
    }
    const RowSplit split = SplitRows(parts, n);
    row_parts.insert(row_parts.end(), parts.begin(), parts.end());
    std::vector<uint32_t> values;
    if (spec.explicit_values()) {
      absl::StatusOr<std::vector<uint32_t>> v = WordsOf(chunk.values(), field + ".values");
      if (!v.ok()) {
        failed = v.status();
        break;
      }
      values = *std::move(v);
      if (values.size() != parts.size()) {
        failed = absl::UnimplementedError(absl::StrCat(
            field, ".values: ", values.size(), " rows but the chunk has ", parts.size(),
            " keys; gpujoin-router needs each chunk's values beside its keys"));
        break;
      }
    } else {
      values.resize(parts.size());
      for (size_t r = 0; r < parts.size(); ++r) {
        const uint64_t v = spec.first_value() + base + r;
        if (v > 0xfffffffeull) {
          failed = absl::InvalidArgumentError(absl::StrCat(
              field, ": row ", base + r, " would get value ", v,
              ", past 0xfffffffe (spec.first_value + rows)"));
          break;
        }
        values[r] = static_cast<uint32_t>(v);
      }
      if (!failed.ok()) break;
    }
    std::vector<v1::BuildChunk> out(n);
    for (uint32_t s = 0; s < n; ++s) {
      const std::vector<uint32_t>& rows = split.rows[s];
      if (chunk.key_columns_size() > 0) {
        for (int c = 0; c < chunk.key_columns_size() && failed.ok(); ++c) {
          absl::StatusOr<v1::Column> part = TakeColumnRows(
              chunk.key_columns(c), rows, absl::StrCat(std::string(field), ".key_columns[", c, "]"));
          if (!part.ok()) failed = part.status();
          else *out[s].add_key_columns() = *std::move(part);
        }
      } else if (chunk.has_keys64()) {
        *out[s].mutable_keys64() = PackedAt(std::span<const uint64_t>(words64), rows);
      } else if (chunk.has_keys()) {
        *out[s].mutable_keys() = PackedAt(std::span<const uint32_t>(words32), rows);
      }
      *out[s].mutable_values() = PackedAt(std::span<const uint32_t>(values), rows);
    }
    // Payload rows: the rows of each column from where it stands, by the parts
    // of their key rows.
    for (int c = 0; c < chunk.payload_size() && failed.ok(); ++c) {
      const v1::Column& col = chunk.payload(c);
      const std::string f = absl::StrCat(std::string(field), ".payload[", c, "]");
      auto it = payload_index.find(col.name());
      if (it == payload_index.end()) {
        failed = absl::InvalidArgumentError(
            absl::StrCat(f, ": column \"", col.name(), "\" is not declared in spec.payload"));
        break;
      }
      uint64_t& at = payload_rows[it->second];
      if (col.length() > row_parts.size() - at) {
        failed = absl::UnimplementedError(absl::StrCat(
            f, ": payload rows ahead of their keys (rows ", at, " to ", at + col.length(),
            " of ", row_parts.size(), " key rows so far); gpujoin-router needs every payload "
            "row in the chunk of its key or after it"));
        break;
      }
      std::vector<std::vector<uint32_t>> rows(n);
      for (uint64_t r = 0; r < col.length(); ++r) {
        rows[row_parts[at + r]].push_back(static_cast<uint32_t>(r));
      }
      at += col.length();
      for (uint32_t s = 0; s < n && failed.ok(); ++s) {
        absl::StatusOr<v1::Column> part = TakeColumnRows(col, rows[s], f);
        if (!part.ok()) failed = part.status();
        else *out[s].add_payload() = *std::move(part);
      }
    }
    if (!failed.ok()) break;
    for (uint32_t s = 0; s < n; ++s) {
      if (writers[s].broken) continue;
      v1::BuildIndexRequest r;
      *r.mutable_chunk() = std::move(out[s]);
      writers[s].broken = !writers[s].writer->Write(r);
    }
  }
  if (failed.ok() && ctx->IsCancelled()) failed = absl::CancelledError("the build was cancelled");
  // The shards' answers: a refused input cancels every shard's build.
  std::vector<grpc::Status> statuses(n);
  for (uint32_t s = 0; s < n; ++s) {
    if (!failed.ok()) writers[s].context->TryCancel();
    writers[s].writer->WritesDone();
  }
  ForEachShard([&](size_t s) {
    const auto start = Clock::now();
    statuses[s] = writers[s].writer->Finish();
    Record(s, "BuildIndex", start, statuses[s]);
  });
  if (!failed.ok()) return ToGrpc(failed);
  for (uint32_t s = 0; s < n; ++s) {
    if (!statuses[s].ok()) {
      // One message when every shard refused the same input (a bad spec).
      bool same = CallersError(statuses[s]);
      for (const grpc::Status& t : statuses) {
        same &= t.error_code() == statuses[s].error_code() &&
                t.error_message() == statuses[s].error_message();
      }
      return same ? statuses[s] : ShardFailed(shards_[s], statuses[s]);
    }
  }
  std::vector<v1::IndexInfo> infos;
  for (const Writer& w : writers) infos.push_back(w.response.index());
  absl::StatusOr<v1::IndexInfo> merged = MergeIndexInfos(infos, names_);
  if (!merged.ok()) return ToGrpc(merged.status());
  merged->set_explicit_values(spec.explicit_values());
  merged->set_first_value(static_cast<uint32_t>(spec.first_value()));
  *response->mutable_index() = *std::move(merged);
  return grpc::Status::OK;
}

// ---------------------------------------------------------------- Lookup

grpc::Status RouterService::Lookup(
    grpc::ServerContext* ctx,
    grpc::ServerReaderWriter<v1::LookupResponse, v1::LookupRequest>* stream) {
  grpc::Status denied = Authorize(ctx);
  if (!denied.ok()) return denied;
  const uint32_t n = static_cast<uint32_t>(shards_.size());
  struct Peer {
    std::unique_ptr<grpc::ClientContext> context;
    std::unique_ptr<grpc::ClientReaderWriter<v1::LookupRequest, v1::LookupResponse>> stream;
  };
  std::vector<Peer> peers(n);
  auto close = [&](grpc::Status status) {
    for (Peer& p : peers) {
      if (p.stream == nullptr) continue;
      if (!status.ok()) p.context->TryCancel();
      p.stream->WritesDone();
      (void)p.stream->Finish();
    }
    return status;
  };
  // A shard's stream broke: the call fails naming it (unless the client left).
  auto broken = [&](uint32_t s) {
    if (ctx->IsCancelled()) return close(grpc::Status::CANCELLED);
    grpc::Status st = peers[s].stream->Finish();
    peers[s].stream.reset();
    if (st.ok()) st = grpc::Status(grpc::StatusCode::UNAVAILABLE, "ended its stream early");
    return close(ShardFailed(shards_[s], st));
  };
  v1::LookupRequest request;
  if (n == 1) {
    // One shard holds every key: its answers are the answers.
    return Passthrough(ctx, stream, 0, "Lookup", &v1::GpuJoin::Stub::Lookup);
  }
  while (stream->Read(&request)) {
    std::vector<uint32_t> parts;
    std::vector<uint32_t> words32;
    std::vector<uint64_t> words64;
    absl::Status bad;
    if (request.key_columns_size() > 0) {
      std::vector<std::vector<int32_t>> offsets;
      absl::StatusOr<engine::KeyColumns> keys =
          KeyColumnsOf(request.key_columns(), "key_columns", &offsets);
      if (keys.ok()) {
        parts.resize(keys->rows());
        engine::PartitionsOf(*keys, n, parts);
      } else {
        bad = keys.status();
      }
    } else if (request.has_keys64()) {
      absl::StatusOr<std::vector<uint64_t>> w = WordsOf(request.keys64(), "keys64");
      if (w.ok()) {
        words64 = *std::move(w);
        parts.resize(words64.size());
        engine::PartitionsOf(std::span<const uint64_t>(words64), n, parts);
      } else {
        bad = w.status();
      }
    } else if (request.has_keys()) {
      absl::StatusOr<std::vector<uint32_t>> w = WordsOf(request.keys(), "keys");
      if (w.ok()) {
        words32 = *std::move(w);
        parts.resize(words32.size());
        engine::PartitionsOf(std::span<const uint32_t>(words32), n, parts);
      } else {
        bad = w.status();
      }
    }
    if (!bad.ok()) {
      v1::LookupResponse r;
      r.set_batch_id(request.batch_id());
      r.mutable_error()->set_code(static_cast<int>(bad.code()));
      r.mutable_error()->set_message(std::string(bad.message()));
      if (!stream->Write(r)) return close(grpc::Status::CANCELLED);
      continue;
    }
    const RowSplit split = SplitRows(parts, n);
    // Every shard gets its part (maybe no keys), so that every batch sees
    // every shard's version of the index.
    const auto start = Clock::now();
    for (uint32_t s = 0; s < n; ++s) {
      if (peers[s].stream == nullptr) {
        peers[s].context = ShardContext(ctx, /*unary=*/false);
        peers[s].stream = shards_[s].stub->Lookup(peers[s].context.get());
      }
      v1::LookupRequest part = request;
      part.clear_keys();
      part.clear_keys64();
      part.clear_key_columns();
      const std::vector<uint32_t>& rows = split.rows[s];
      if (request.key_columns_size() > 0) {
        for (int c = 0; c < request.key_columns_size(); ++c) {
          absl::StatusOr<v1::Column> col = TakeColumnRows(request.key_columns(c), rows,
                                                          absl::StrCat("key_columns[", c, "]"));
          if (!col.ok()) return close(ToGrpc(col.status()));
          *part.add_key_columns() = *std::move(col);
        }
      } else if (request.has_keys64()) {
        *part.mutable_keys64() = PackedAt(std::span<const uint64_t>(words64), rows);
      } else if (request.has_keys()) {
        *part.mutable_keys() = PackedAt(std::span<const uint32_t>(words32), rows);
      }
      if (!peers[s].stream->Write(part)) return broken(s);
    }
    std::vector<v1::LookupResponse> answers(n);
    for (uint32_t s = 0; s < n; ++s) {
      const bool read = peers[s].stream->Read(&answers[s]);
      metrics_->Record(s, "Lookup", std::chrono::duration<double>(Clock::now() - start).count(),
                       read && !answers[s].has_error());
      if (!read) return broken(s);
    }
    v1::LookupResponse out;
    out.set_batch_id(request.batch_id());
    // A batch refused by a shard is refused: its error, naming the shard
    // unless every shard said the same.
    for (uint32_t s = 0; s < n; ++s) {
      if (!answers[s].has_error()) continue;
      bool same = true;
      for (const auto& a : answers) {
        same &= a.has_error() && a.error().code() == answers[s].error().code() &&
                a.error().message() == answers[s].error().message();
      }
      out.mutable_error()->set_code(answers[s].error().code());
      out.mutable_error()->set_message(
          same ? answers[s].error().message()
               : absl::StrCat(shards_[s].Name(), ": ", answers[s].error().message()));
      break;
    }
    if (!out.has_error()) {
      for (uint32_t s = 1; s < n; ++s) {
        if (answers[s].index_version() != answers[0].index_version()) {
          return close(grpc::Status(
              grpc::StatusCode::ABORTED,
              absl::StrCat("index \"", request.index(), "\": ", shards_[0].Name(),
                           " serves version ", answers[0].index_version(), " but ",
                           shards_[s].Name(), " serves version ", answers[s].index_version(),
                           " (rebuild it through the router)")));
        }
      }
      const uint64_t rows = parts.size();
      out.set_index_version(answers[0].index_version());
      std::string values(4 * rows, '\0'), found(rows, '\0'), probes, counts;
      if (request.want_probes()) probes.assign(4 * rows, '\0');
      if (request.want_match_counts()) counts.assign(4 * rows, '\0');
      for (uint64_t r = 0; r < rows; ++r) {
        const v1::LookupResponse& a = answers[split.part[r]];
        const uint64_t p = split.position[r];
        if (a.values().size() < 4 * (p + 1) || a.found().size() < p + 1 ||
            (request.want_probes() && a.probes().size() < 4 * (p + 1)) ||
            (request.want_match_counts() && a.match_counts().size() < 4 * (p + 1))) {
          return close(grpc::Status(grpc::StatusCode::INTERNAL,
                                    absl::StrCat(shards_[split.part[r]].Name(),
                                                 ": answered fewer rows than it was sent")));
        }
        std::memcpy(values.data() + 4 * r, a.values().data() + 4 * p, 4);
        found[r] = a.found()[p];
        if (request.want_probes()) std::memcpy(probes.data() + 4 * r, a.probes().data() + 4 * p, 4);
        if (request.want_match_counts()) {
          std::memcpy(counts.data() + 4 * r, a.match_counts().data() + 4 * p, 4);
        }
      }
      out.set_values(std::move(values));
      out.set_found(std::move(found));
      if (request.want_probes()) out.set_probes(std::move(probes));
      if (request.want_match_counts()) out.set_match_counts(std::move(counts));
      uint64_t sequence = 0;
      for (const auto& a : answers) {
        AddQueryStatistics(out.mutable_statistics(), a.statistics());
        sequence += a.mutation_sequence();
      }
      out.set_mutation_sequence(sequence);
      std::vector<RowRef> refs(rows);
      for (uint64_t r = 0; r < rows; ++r) refs[r] = {split.part[r], split.position[r]};
      for (uint32_t s = 1; s < n; ++s) {
        if (answers[s].columns_size() != answers[0].columns_size()) {
          return close(grpc::Status(
              grpc::StatusCode::INTERNAL,
              absl::StrCat(shards_[s].Name(), " answered ", answers[s].columns_size(),
                           " payload columns, ", shards_[0].Name(), " ",
                           answers[0].columns_size())));
        }
      }
      for (int c = 0; c < answers[0].columns_size(); ++c) {
        std::vector<const v1::Column*> sources;
        for (const auto& a : answers) {
          if (a.columns_size() <= c) {
            return close(grpc::Status(grpc::StatusCode::INTERNAL,
                                      "a shard answered fewer columns than the others"));
          }
          sources.push_back(&a.columns(c));
        }
        absl::StatusOr<v1::Column> merged =
            GatherColumn(sources, refs, absl::StrCat("columns[", c, "]"));
        if (!merged.ok()) return close(ToGrpc(merged.status()));
        *out.add_columns() = *std::move(merged);
      }
    }
    if (!stream->Write(out)) return close(grpc::Status::CANCELLED);
  }
  return close(grpc::Status::OK);
}

}  // namespace

std::unique_ptr<grpc::Service> MakeRouterService(const RouterConfig& config,
                                                 std::vector<Shard>* shards,
                                                 const TokenAuthenticator* auth,
                                                 std::string shard_token, ShardMetrics* metrics) {
  return std::make_unique<RouterService>(config, shards, auth, std::move(shard_token), metrics);
}

}  // namespace gpujoin::server::router
