// RouterService: the gpujoin.v1 service of gpujoin-router. The calls that
// fan out to every shard and merge (server information, the index list,
// descriptions, drops, snapshots, files) are here; the streams that split by
// key or by rows have rooms of their own (routes.hpp).
#include "router/router_service.hpp"

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "router/merge.hpp"
#include "router/routes.hpp"
#include "router/shard_calls.hpp"
#include "transport/connection_streams.hpp"

namespace gpujoin::server::router {
namespace {

// --max-streams-per-connection (ConnectionStreams, as gpujoind counts them):
// a slot is held while its call runs.
class StreamSlots {
 public:
  explicit StreamSlots(uint32_t max) : max_(max) {}

  class Slot {
   public:
    Slot(ConnectionStreams* streams, std::string peer)
        : streams_(streams), peer_(std::move(peer)) {}
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;
    ~Slot() { streams_->Release(peer_); }

   private:
    ConnectionStreams* streams_;
    std::string peer_;
  };

  /// A slot for `ctx`'s connection, or RESOURCE_EXHAUSTED naming the limit.
  std::optional<Slot> Acquire(grpc::ServerContext* ctx, const char* rpc, grpc::Status* refused) {
    std::string peer = ctx->peer();
    const absl::Status admitted = streams_.Acquire(peer, rpc, max_);
    if (!admitted.ok()) {
      *refused = ToGrpc(admitted);
      return std::nullopt;
    }
    return std::optional<Slot>(std::in_place, &streams_, std::move(peer));
  }

 private:
  const uint32_t max_;
  ConnectionStreams streams_;
};

class RouterService final : public v1::GpuJoin::Service {
 public:
  RouterService(const RouterConfig& config, std::vector<Shard>* shards,
                const TokenAuthenticator* auth, std::string shard_token, ShardMetrics* metrics)
      : calls_(config, shards, auth, std::move(shard_token), metrics),
        slots_(config.max_streams_per_connection) {}

  grpc::Status GetServerInfo(grpc::ServerContext* ctx, const v1::GetServerInfoRequest* request,
                             v1::GetServerInfoResponse* response) override {
    std::vector<v1::GetServerInfoResponse> answers;
    grpc::Status s = calls_.FanOut<v1::GetServerInfoRequest, v1::GetServerInfoResponse>(
        ctx, "GetServerInfo", *request, &v1::GpuJoin::Stub::GetServerInfo, &answers);
    if (!s.ok()) return s;
    *response = answers[0];
    bool serving = true;
    for (size_t i = 1; i < answers.size(); ++i) {
      const auto& a = answers[i];
      response->set_device_memory_total_bytes(
          calls_.config().shards_share_memory
              ? std::max(response->device_memory_total_bytes(), a.device_memory_total_bytes())
              : response->device_memory_total_bytes() + a.device_memory_total_bytes());
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
    response->set_device_name(absl::StrCat(answers.size(), " ", calls_.config().shards_noun, ": ",
                                           answers[0].device_name()));
    response->set_max_message_bytes(
        std::min<uint64_t>(response->max_message_bytes(), calls_.config().max_message_bytes));
    response->set_max_streams_per_connection(calls_.config().max_streams_per_connection);
    return grpc::Status::OK;
  }

  grpc::Status ListIndexes(grpc::ServerContext* ctx, const v1::ListIndexesRequest* request,
                           v1::ListIndexesResponse* response) override {
    std::vector<v1::ListIndexesResponse> answers;
    grpc::Status s = calls_.FanOut<v1::ListIndexesRequest, v1::ListIndexesResponse>(
        ctx, "ListIndexes", *request, &v1::GpuJoin::Stub::ListIndexes, &answers);
    if (!s.ok()) return s;
    std::map<std::string, std::vector<v1::IndexInfo>> by_name;
    for (const auto& a : answers) {
      for (const auto& i : a.indexes()) by_name[i.name()].push_back(i);
    }
    for (auto& [name, infos] : by_name) {
      if (infos.size() != calls_.count()) {
        return grpc::Status(grpc::StatusCode::ABORTED,
                            absl::StrCat("index \"", name, "\" is on ", infos.size(), " of ",
                                         calls_.count(), " shards (rebuild or drop it through "
                                                         "the router)"));
      }
      absl::StatusOr<v1::IndexInfo> merged = MergeIndexInfos(infos, calls_.names());
      if (!merged.ok()) return ToGrpc(merged.status());
      *response->add_indexes() = *std::move(merged);
    }
    return grpc::Status::OK;
  }

  grpc::Status DescribeIndex(grpc::ServerContext* ctx, const v1::DescribeIndexRequest* request,
                             v1::DescribeIndexResponse* response) override {
    grpc::Status denied = calls_.Authorize(ctx);
    if (!denied.ok()) return denied;
    std::vector<v1::DescribeIndexResponse> answers;
    std::vector<grpc::Status> statuses;
    calls_.CallEach(ctx, "DescribeIndex", *request, &v1::GpuJoin::Stub::DescribeIndex, &answers,
                    &statuses);
    // A replicated index is described by the replicas that answer while others
    // are down or failing, as its batches pass those over.
    std::vector<v1::IndexInfo> replicas;
    std::vector<std::string> names;
    bool others_down = true;
    for (size_t s = 0; s < answers.size(); ++s) {
      if (statuses[s].ok()) {
        if (answers[s].index().placement() != v1::INDEX_PLACEMENT_REPLICATED) others_down = false;
        replicas.push_back(answers[s].index());
        names.push_back(calls_.names()[s]);
      } else {
        others_down &= !CallersError(statuses[s]);
      }
    }
    if (!replicas.empty() && replicas.size() < answers.size() && others_down) {
      absl::StatusOr<v1::IndexInfo> merged = MergeIndexInfos(replicas, names);
      if (!merged.ok()) return ToGrpc(merged.status());
      *response->mutable_index() = *std::move(merged);
      return grpc::Status::OK;
    }
    grpc::Status s = calls_.Failure(statuses);
    if (!s.ok()) return s;
    return MergedIndex(answers, response);
  }

  grpc::Status DropIndex(grpc::ServerContext* ctx, const v1::DropIndexRequest* request,
                         v1::DropIndexResponse* response) override {
    calls_.placements().Forget(request->name());
    std::vector<v1::DropIndexResponse> answers;
    std::vector<grpc::Status> statuses;
    grpc::Status s = calls_.RemoveEverywhere<v1::DropIndexRequest, v1::DropIndexResponse>(
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
                          v1::BuildIndexResponse* response) override {
    // Authorised first (as gpujoind): a caller without the token learns nothing of the slots.
    grpc::Status refused = calls_.Authorize(ctx);
    if (!refused.ok()) return refused;
    auto slot = slots_.Acquire(ctx, "BuildIndex", &refused);
    if (!slot) return refused;
    return RouteBuild(calls_, ctx, reader, response);
  }

  grpc::Status Lookup(
      grpc::ServerContext* ctx,
      grpc::ServerReaderWriter<v1::LookupResponse, v1::LookupRequest>* stream) override {
    // Authorised first (as gpujoind): a caller without the token learns nothing of the slots.
    grpc::Status refused = calls_.Authorize(ctx);
    if (!refused.ok()) return refused;
    auto slot = slots_.Acquire(ctx, "Lookup", &refused);
    if (!slot) return refused;
    return RouteLookup(calls_, ctx, stream);
  }

  // Hash needs no index: any shard answers (they take turns, call by call).
  grpc::Status Hash(grpc::ServerContext* ctx,
                    grpc::ServerReaderWriter<v1::HashResponse, v1::HashRequest>* stream) override {
    grpc::Status denied = calls_.Authorize(ctx);
    if (!denied.ok()) return denied;
    auto slot = slots_.Acquire(ctx, "Hash", &denied);
    if (!slot) return denied;
    const size_t shard = next_hash_shard_.fetch_add(1) % calls_.count();
    return calls_.Passthrough(ctx, stream, shard, "Hash", &v1::GpuJoin::Stub::Hash);
  }

  // Snapshots: every shard saves, loads, lists or deletes its own part
  // (under its own --data-dir), as one call.
  grpc::Status SaveIndex(grpc::ServerContext* ctx, const v1::SaveIndexRequest* request,
                         v1::SaveIndexResponse* response) override {
    std::vector<v1::SaveIndexResponse> answers;
    grpc::Status s = calls_.FanOut<v1::SaveIndexRequest, v1::SaveIndexResponse>(
        ctx, "SaveIndex", *request, &v1::GpuJoin::Stub::SaveIndex, &answers);
    if (!s.ok()) return s;
    *response = answers[0];
    for (size_t i = 1; i < answers.size(); ++i) {
      if (answers[i].version() != answers[0].version()) {
        return grpc::Status(grpc::StatusCode::ABORTED,
                            absl::StrCat("index \"", request->name(), "\": ", calls_.names()[0],
                                         " saved version ", answers[0].version(), " but ",
                                         calls_.names()[i], " version ", answers[i].version()));
      }
      response->set_bytes(response->bytes() + answers[i].bytes());
      response->set_seconds(std::max(response->seconds(), answers[i].seconds()));
    }
    return grpc::Status::OK;
  }

  grpc::Status LoadIndex(grpc::ServerContext* ctx, const v1::LoadIndexRequest* request,
                         v1::LoadIndexResponse* response) override {
    std::vector<v1::LoadIndexResponse> answers;
    v1::LoadIndexRequest shard_request = *request;
    shard_request.set_min_version(RouterVersion(request->min_version()));
    grpc::Status s = calls_.FanOut<v1::LoadIndexRequest, v1::LoadIndexResponse>(
        ctx, "LoadIndex", shard_request, &v1::GpuJoin::Stub::LoadIndex, &answers);
    if (!s.ok()) return s;
    return MergedIndex(answers, response);
  }

  grpc::Status ListFiles(grpc::ServerContext* ctx, const v1::ListFilesRequest* request,
                         v1::ListFilesResponse* response) override {
    std::vector<v1::ListFilesResponse> answers;
    grpc::Status s = calls_.FanOut<v1::ListFilesRequest, v1::ListFilesResponse>(
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
      if (parts[name] != calls_.count()) f.set_live(false);
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
    grpc::Status s = calls_.RemoveEverywhere<v1::DeleteFileRequest, v1::DeleteFileResponse>(
        ctx, "DeleteFile", *request, &v1::GpuJoin::Stub::DeleteFile, &answers, &statuses);
    for (size_t i = 0; i < answers.size(); ++i) {
      if (statuses[i].ok()) response->set_bytes(response->bytes() + answers[i].bytes());
    }
    return s;
  }

  grpc::Status Join(
      grpc::ServerContext* ctx,
      grpc::ServerReaderWriter<v1::JoinResponse, v1::JoinRequest>* stream) override {
    // Authorised first (as gpujoind): a caller without the token learns nothing of the slots.
    grpc::Status refused = calls_.Authorize(ctx);
    if (!refused.ok()) return refused;
    auto slot = slots_.Acquire(ctx, "Join", &refused);
    if (!slot) return refused;
    return RouteJoin(calls_, ctx, stream);
  }

  grpc::Status Aggregate(
      grpc::ServerContext* ctx,
      grpc::ServerReaderWriter<v1::AggregateResponse, v1::AggregateRequest>* stream) override {
    // Authorised first (as gpujoind): a caller without the token learns nothing of the slots.
    grpc::Status refused = calls_.Authorize(ctx);
    if (!refused.ok()) return refused;
    auto slot = slots_.Acquire(ctx, "Aggregate", &refused);
    if (!slot) return refused;
    return RouteAggregate(calls_, ctx, stream);
  }

  grpc::Status Mutate(
      grpc::ServerContext* ctx,
      grpc::ServerReaderWriter<v1::MutateResponse, v1::MutateRequest>* stream) override {
    // Authorised first (as gpujoind): a caller without the token learns nothing of the slots.
    grpc::Status refused = calls_.Authorize(ctx);
    if (!refused.ok()) return refused;
    auto slot = slots_.Acquire(ctx, "Mutate", &refused);
    if (!slot) return refused;
    return RouteMutate(calls_, ctx, stream);
  }

  grpc::Status Query(
      grpc::ServerContext* ctx,
      grpc::ServerReaderWriter<v1::QueryResponse, v1::QueryRequest>* stream) override {
    // Authorised first (as gpujoind): a caller without the token learns nothing of the slots.
    grpc::Status refused = calls_.Authorize(ctx);
    if (!refused.ok()) return refused;
    auto slot = slots_.Acquire(ctx, "Query", &refused);
    if (!slot) return refused;
    return RouteQuery(calls_, ctx, stream);
  }

 private:
  // The shards' answers naming one index (DescribeIndex, LoadIndex): their
  // IndexInfos merged into `response`.
  template <class Response>
  grpc::Status MergedIndex(const std::vector<Response>& answers, Response* response) const {
    std::vector<v1::IndexInfo> infos;
    for (const Response& a : answers) infos.push_back(a.index());
    absl::StatusOr<v1::IndexInfo> merged = MergeIndexInfos(infos, calls_.names());
    if (!merged.ok()) return ToGrpc(merged.status());
    *response->mutable_index() = *std::move(merged);
    return grpc::Status::OK;
  }

  ShardCalls calls_;
  StreamSlots slots_;
  std::atomic<size_t> next_hash_shard_{0};
};

}  // namespace

std::unique_ptr<grpc::Service> MakeRouterService(const RouterConfig& config,
                                                 std::vector<Shard>* shards,
                                                 const TokenAuthenticator* auth,
                                                 std::string shard_token, ShardMetrics* metrics) {
  return std::make_unique<RouterService>(config, shards, auth, std::move(shard_token), metrics);
}

}  // namespace gpujoin::server::router
