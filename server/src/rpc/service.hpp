// The GpuJoin gRPC service on the callback API. Reactors never run engine work:
// they decode cheap framing, apply flow control and admission, hand batches to
// the Executor and write the responses back in request order.
//
// Streams (Lookup, Join, Aggregate, Hash): each batch gets exactly one response,
// in request order. A bad batch gets an in-band BatchError and the stream goes
// on. At most --max-inflight-per-stream batches of one stream are read but not
// yet answered (further reads wait: flow control); at most --max-inflight-batches
// are processed at once over all streams (beyond that a batch gets an in-band
// RESOURCE_EXHAUSTED naming that limit).
//
// The reactors are internal to the server library: rpc/stream_reactor.cpp serves
// the four streams, each described by its traits (rpc_traits.hpp), and
// rpc/build_reactor.cpp serves BuildIndex; this file's service creates them and
// is their StreamHost (stream_host.hpp), the only part of it they see.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <set>
#include <string_view>

#include "absl/status/status.h"
#include "gpujoin/v1/gpujoin.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "ops/operations.hpp"
#include "rpc/executor.hpp"
#include "rpc/stream_host.hpp"
#include "transport/auth.hpp"
#include "transport/connection_streams.hpp"

namespace gpujoin::server {

/// The callback service with the streaming methods (BuildIndex, Lookup, Join,
/// Aggregate, Hash, Mutate, Query) on the raw (byte buffer) API: their reactors parse each
/// message themselves, so that one that does not parse ends the stream with
/// INVALID_ARGUMENT instead of looking like the client's half-close (gRPC's
/// typed API reports both as a failed read). The unary methods use the generated
/// messages. Reflection still describes every method with its message types.
using GpuJoinServiceBase = v1::GpuJoin::WithRawCallbackMethod_BuildIndex<
    v1::GpuJoin::WithCallbackMethod_DropIndex<v1::GpuJoin::WithCallbackMethod_ListIndexes<
        v1::GpuJoin::WithCallbackMethod_DescribeIndex<v1::GpuJoin::WithRawCallbackMethod_Lookup<
            v1::GpuJoin::WithRawCallbackMethod_Join<v1::GpuJoin::WithRawCallbackMethod_Aggregate<
                v1::GpuJoin::WithRawCallbackMethod_Hash<
                    v1::GpuJoin::WithCallbackMethod_GetServerInfo<
                        v1::GpuJoin::WithCallbackMethod_SaveIndex<
                            v1::GpuJoin::WithCallbackMethod_LoadIndex<
                                v1::GpuJoin::WithCallbackMethod_ListFiles<
                                    v1::GpuJoin::WithCallbackMethod_DeleteFile<
                                        v1::GpuJoin::WithRawCallbackMethod_Mutate<
                                            v1::GpuJoin::WithRawCallbackMethod_Query<
                                                v1::GpuJoin::Service>>>>>>>>>>>>>>>;

class GpuJoinService final : public GpuJoinServiceBase, public StreamHost {
 public:
  /// `auth` may be null (no authentication). None of the pointers is owned; all
  /// must outlive the gRPC server.
  /// `executor` runs batch work (streams); `control` runs the unary calls
  /// (health aside: gRPC's own service), so that they never queue behind batches.
  GpuJoinService(Operations* ops, Executor* executor, Executor* control, InflightLimiter* limiter,
                 const TokenAuthenticator* auth);

  /// BuildIndex on the raw API: serialized BuildIndexRequests in, a
  /// BuildIndexResponse out.
  grpc::ServerReadReactor<grpc::ByteBuffer>* BuildIndex(grpc::CallbackServerContext* context,
                                                        grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* DropIndex(grpc::CallbackServerContext* context,
                                      const v1::DropIndexRequest* request,
                                      v1::DropIndexResponse* response) override;
  grpc::ServerUnaryReactor* ListIndexes(grpc::CallbackServerContext* context,
                                        const v1::ListIndexesRequest* request,
                                        v1::ListIndexesResponse* response) override;
  grpc::ServerUnaryReactor* DescribeIndex(grpc::CallbackServerContext* context,
                                          const v1::DescribeIndexRequest* request,
                                          v1::DescribeIndexResponse* response) override;
  /// Lookup on the raw API: serialized LookupRequest in, LookupResponse out
  /// (see lookup_wire.hpp for the copy-free bytes path).
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* Lookup(
      grpc::CallbackServerContext* context) override;
  /// Join, Aggregate and Hash on the raw API: their serialized requests in,
  /// responses out.
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* Join(
      grpc::CallbackServerContext* context) override;
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* Aggregate(
      grpc::CallbackServerContext* context) override;
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* Hash(
      grpc::CallbackServerContext* context) override;
  /// Mutate on the raw API; a stream's batches are applied one at a time, in
  /// order (MutateTraits::kSerial).
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* Mutate(
      grpc::CallbackServerContext* context) override;
  /// Query on the raw API; a stream's messages run one at a time, in order
  /// (QueryTraits::kSerial), the first compiling the plan.
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* Query(
      grpc::CallbackServerContext* context) override;
  grpc::ServerUnaryReactor* GetServerInfo(grpc::CallbackServerContext* context,
                                          const v1::GetServerInfoRequest* request,
                                          v1::GetServerInfoResponse* response) override;

  /// SaveIndex and LoadIndex: snapshot file I/O, run on the batch executor (they
  /// may take seconds; the control executor stays free for control calls).
  grpc::ServerUnaryReactor* SaveIndex(grpc::CallbackServerContext* context,
                                      const v1::SaveIndexRequest* request,
                                      v1::SaveIndexResponse* response) override;
  grpc::ServerUnaryReactor* LoadIndex(grpc::CallbackServerContext* context,
                                      const v1::LoadIndexRequest* request,
                                      v1::LoadIndexResponse* response) override;
  /// ListFiles and DeleteFile: the --data-dir's files, on the control executor.
  grpc::ServerUnaryReactor* ListFiles(grpc::CallbackServerContext* context,
                                      const v1::ListFilesRequest* request,
                                      v1::ListFilesResponse* response) override;
  grpc::ServerUnaryReactor* DeleteFile(grpc::CallbackServerContext* context,
                                       const v1::DeleteFileRequest* request,
                                       v1::DeleteFileResponse* response) override;

  /// While true (the start-up load of --data-dir), every call but GetServerInfo
  /// gets UNAVAILABLE (health is NOT_SERVING meanwhile).
  void SetLoading(bool loading) { loading_.store(loading); }

  /// Health as reported by GetServerInfo (the caller also sets grpc.health.v1).
  void SetServing(bool serving) { serving_.store(serving); }
  bool serving() const { return serving_.load(); }

  /// Starts a graceful drain: new calls get UNAVAILABLE, open streams answer what
  /// they have read and end with UNAVAILABLE. Builds already streaming finish.
  void BeginDrain();
  bool draining() const { return draining_.load(); }

  // StreamHost, used by the reactors (documented there).
  absl::Status Admit(grpc::CallbackServerContext* context, std::string_view rpc) override;
  void Register(DrainableStream* stream) override;
  void Unregister(DrainableStream* stream) override;
  absl::Status AcquireBuildSlot() override;
  void ReleaseBuildSlot() override;
  absl::Status AcquireStream(grpc::CallbackServerContext* context, std::string_view rpc,
                             std::string* peer) override;
  void ReleaseStream(const std::string& peer) override;
  Operations* ops() const override { return ops_; }
  Executor* executor() const override { return executor_; }
  InflightLimiter* limiter() const override { return limiter_; }
  Metrics* metrics() const override { return ops_->state().metrics; }

 private:
  /// Auth/drain check, then `fn` (returning absl::Status) on the executor, then
  /// Finish with its status; metrics for the call.
  template <typename Fn>
  grpc::ServerUnaryReactor* Unary(grpc::CallbackServerContext* context, std::string_view rpc,
                                  Fn fn);
  /// Unary on `executor`.
  template <typename Fn>
  grpc::ServerUnaryReactor* UnaryOn(Executor* executor, grpc::CallbackServerContext* context,
                                    std::string_view rpc, Fn fn);

  Operations* ops_;
  Executor* executor_;
  Executor* control_;
  InflightLimiter* limiter_;
  const TokenAuthenticator* auth_;
  std::atomic<bool> serving_{true};
  std::atomic<bool> draining_{false};
  std::atomic<bool> loading_{false};
  std::mutex streams_mu_;
  std::set<DrainableStream*> streams_;
  std::atomic<uint32_t> open_builds_{0};
  ConnectionStreams connection_streams_;  // --max-streams-per-connection
};

}  // namespace gpujoin::server
