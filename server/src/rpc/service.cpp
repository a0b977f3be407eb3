#include "rpc/service.hpp"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "rpc/build_reactor.hpp"
#include "gpujoin/common/host_allocation.hpp"
#include "gpujoin/server/logging.hpp"
#include "rpc/rpc_clock.hpp"
#include "rpc/rpc_traits.hpp"
#include "rpc/stream_reactor.hpp"

namespace gpujoin::server {

using detail::Clock;
using detail::SecondsSince;

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

GpuJoinService::GpuJoinService(Operations* ops, Executor* executor, Executor* control,
                               InflightLimiter* limiter, const TokenAuthenticator* auth)
    : ops_(ops), executor_(executor), control_(control), limiter_(limiter), auth_(auth) {}

absl::Status GpuJoinService::Admit(grpc::CallbackServerContext* context, std::string_view rpc) {
  absl::Status s;
  if (auth_ != nullptr) s = auth_->Check(context->client_metadata());
  if (s.ok() && draining_.load()) {
    s = absl::UnavailableError("server is shutting down; retry on another instance");
  }
  if (s.ok() && loading_.load() && rpc != "GetServerInfo") {
    s = absl::UnavailableError(
        "gpujoind is loading its snapshots from --data-dir (health NOT_SERVING); retry when "
        "health is SERVING");
  }
  if (!s.ok()) metrics()->CountRpcError(rpc, StatusCodeName(s.code()));
  return s;
}

absl::Status GpuJoinService::AcquireBuildSlot() {
  const uint32_t max = ops_->state().config.max_concurrent_builds;
  uint32_t open = open_builds_.load();
  do {
    if (open >= max) {
      metrics()->CountRpcError("BuildIndex", StatusCodeName(absl::StatusCode::kResourceExhausted));
      return absl::ResourceExhaustedError(absl::StrCat(
          "BuildIndex: ", open, " builds are open, the limit --max-concurrent-builds=", max,
          "; retry when one has finished"));
    }
  } while (!open_builds_.compare_exchange_weak(open, open + 1));
  return absl::OkStatus();
}

void GpuJoinService::ReleaseBuildSlot() { open_builds_.fetch_sub(1); }

absl::Status GpuJoinService::AcquireStream(grpc::CallbackServerContext* context,
                                           std::string_view rpc, std::string* peer) {
  *peer = context->peer();
  absl::Status admitted = connection_streams_.Acquire(
      *peer, rpc, ops_->state().config.max_streams_per_connection);
  if (!admitted.ok()) metrics()->CountRpcError(rpc, StatusCodeName(admitted.code()));
  return admitted;
}

void GpuJoinService::ReleaseStream(const std::string& peer) { connection_streams_.Release(peer); }

void GpuJoinService::Register(DrainableStream* stream) {
  std::lock_guard<std::mutex> lock(streams_mu_);
  streams_.insert(stream);
}

void GpuJoinService::Unregister(DrainableStream* stream) {
  std::lock_guard<std::mutex> lock(streams_mu_);
  streams_.erase(stream);
}

void GpuJoinService::BeginDrain() {
  draining_.store(true);
  std::lock_guard<std::mutex> lock(streams_mu_);
  LogDebug(absl::StrCat("draining ", streams_.size(), " open streams"));
  for (DrainableStream* s : streams_) s->Drain();
}

template <typename Fn>
grpc::ServerUnaryReactor* GpuJoinService::Unary(grpc::CallbackServerContext* context,
                                                std::string_view rpc, Fn fn) {
  return UnaryOn(control_, context, rpc, std::move(fn));
}

template <typename Fn>
grpc::ServerUnaryReactor* GpuJoinService::UnaryOn(Executor* executor,
                                                  grpc::CallbackServerContext* context,
                                                  std::string_view rpc, Fn fn) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  absl::Status admitted = Admit(context, rpc);
  if (!admitted.ok()) {
    reactor->Finish(ToGrpcStatus(admitted));
    return reactor;
  }
  const auto start = Clock::now();
  // Unary calls are control calls (list, describe, drop, info): their own small
  // executor keeps them from queueing behind batch work.
  executor->Submit([this, reactor, rpc, start, fn = std::move(fn)]() mutable {
    // A call that cannot get its host memory fails alone (never an abort).
    absl::Status s = CatchHostAllocation([rpc] { return std::string(rpc); }, fn);
    metrics()->ObserveRpc(rpc, SecondsSince(start), 0);
    if (!s.ok()) metrics()->CountRpcError(rpc, StatusCodeName(s.code()));
    reactor->Finish(ToGrpcStatus(s));
  });
  return reactor;
}

grpc::ServerReadReactor<grpc::ByteBuffer>* GpuJoinService::BuildIndex(
    grpc::CallbackServerContext* context, grpc::ByteBuffer* response) {
  return detail::NewBuildReactor(this, context, response);
}

grpc::ServerUnaryReactor* GpuJoinService::DropIndex(grpc::CallbackServerContext* context,
                                                    const v1::DropIndexRequest* request,
                                                    v1::DropIndexResponse* response) {
  return Unary(context, "DropIndex", [=, this] {
    absl::Status s = ops_->DropIndex(*request, response);
    if (s.ok()) LogInfo(absl::StrCat("dropped index \"", request->name(), "\""));
    return s;
  });
}

grpc::ServerUnaryReactor* GpuJoinService::ListIndexes(grpc::CallbackServerContext* context,
                                                      const v1::ListIndexesRequest*,
                                                      v1::ListIndexesResponse* response) {
  return Unary(context, "ListIndexes", [=, this] { return ops_->ListIndexes(response); });
}

grpc::ServerUnaryReactor* GpuJoinService::DescribeIndex(grpc::CallbackServerContext* context,
                                                        const v1::DescribeIndexRequest* request,
                                                        v1::DescribeIndexResponse* response) {
  return Unary(context, "DescribeIndex",
               [=, this] { return ops_->DescribeIndex(*request, response); });
}

grpc::ServerUnaryReactor* GpuJoinService::GetServerInfo(grpc::CallbackServerContext* context,
                                                        const v1::GetServerInfoRequest*,
                                                        v1::GetServerInfoResponse* response) {
  return Unary(context, "GetServerInfo",
               [=, this] { return ops_->GetServerInfo(serving(), response); });
}

grpc::ServerUnaryReactor* GpuJoinService::SaveIndex(grpc::CallbackServerContext* context,
                                                    const v1::SaveIndexRequest* request,
                                                    v1::SaveIndexResponse* response) {
  return UnaryOn(executor_, context, "SaveIndex", [=, this] {
    absl::Status s = ops_->SaveIndex(*request, response);
    if (s.ok()) {
      LogInfo(absl::StrCat("saved index \"", request->name(), "\" to \"", response->file(),
                           "\" (", response->bytes(), " bytes)"));
    }
    return s;
  });
}

grpc::ServerUnaryReactor* GpuJoinService::LoadIndex(grpc::CallbackServerContext* context,
                                                    const v1::LoadIndexRequest* request,
                                                    v1::LoadIndexResponse* response) {
  return UnaryOn(executor_, context, "LoadIndex", [=, this] {
    absl::Status s = ops_->LoadIndex(*request, response);
    if (s.ok()) {
      LogInfo(absl::StrCat("loaded index \"", request->name(), "\" from \"",
                           request->file().empty() ? request->name() + ".gjsnap" : request->file(),
                           "\""));
    }
    return s;
  });
}

grpc::ServerUnaryReactor* GpuJoinService::ListFiles(grpc::CallbackServerContext* context,
                                                    const v1::ListFilesRequest*,
                                                    v1::ListFilesResponse* response) {
  return Unary(context, "ListFiles", [=, this] { return ops_->ListFiles(response); });
}

grpc::ServerUnaryReactor* GpuJoinService::DeleteFile(grpc::CallbackServerContext* context,
                                                     const v1::DeleteFileRequest* request,
                                                     v1::DeleteFileResponse* response) {
  return Unary(context, "DeleteFile", [=, this] { return ops_->DeleteFile(*request, response); });
}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* GpuJoinService::Lookup(
    grpc::CallbackServerContext* context) {
  return detail::NewStreamReactor<detail::LookupTraits>(this, context);
}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* GpuJoinService::Join(
    grpc::CallbackServerContext* context) {
  return detail::NewStreamReactor<detail::JoinTraits>(this, context);
}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* GpuJoinService::Aggregate(
    grpc::CallbackServerContext* context) {
  return detail::NewStreamReactor<detail::AggregateTraits>(this, context);
}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* GpuJoinService::Hash(
    grpc::CallbackServerContext* context) {
  return detail::NewStreamReactor<detail::HashTraits>(this, context);
}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* GpuJoinService::Mutate(
    grpc::CallbackServerContext* context) {
  return detail::NewStreamReactor<detail::MutateTraits>(this, context);
}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* GpuJoinService::Query(
    grpc::CallbackServerContext* context) {
  return detail::NewStreamReactor<detail::QueryTraits>(this, context);
}

}  // namespace gpujoin::server
