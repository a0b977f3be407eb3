// Client::Impl: the options, channel and stub behind a Client, the one way
// every call prepares its context (the bearer token and the deadline), and the
// one unary call every plain RPC goes through. Internal to the client library.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpujoin/client/client.hpp"
#include "gpujoin/v1/gpujoin.grpc.pb.h"

namespace gpujoin::client {

namespace detail {

/// A gRPC status as an absl::Status: the same code (gRPC and Abseil both use
/// the google.rpc.Code numbering) and the server's message.
inline absl::Status FromGrpc(const grpc::Status& s) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

}  // namespace detail

class Client::Impl {
 public:
  Impl(ConnectOptions options, std::shared_ptr<grpc::Channel> channel)
      : options_(std::move(options)),
        channel_(std::move(channel)),
        stub_(::gpujoin::v1::GpuJoin::NewStub(channel_)) {}

  // Prepares a context with the token and the deadline.
  void Prepare(grpc::ClientContext* ctx,
               std::optional<std::chrono::milliseconds> deadline = std::nullopt) const {
    if (!options_.token.empty()) ctx->AddMetadata("authorization", "Bearer " + options_.token);
    const auto d = deadline.value_or(options_.deadline);
    if (d.count() > 0) ctx->set_deadline(std::chrono::system_clock::now() + d);
  }

  // One unary call of the GpuJoin service (`method` of its stub) with the
  // default deadline: the response, or the call's status.
  template <typename Request, typename Response>
  absl::StatusOr<Response> Unary(grpc::Status (::gpujoin::v1::GpuJoin::Stub::*method)(
                                     grpc::ClientContext*, const Request&, Response*),
                                 const Request& request) const {
    grpc::ClientContext ctx;
    Prepare(&ctx);
    Response response;
    const grpc::Status status = (stub_.get()->*method)(&ctx, request, &response);
    if (!status.ok()) return detail::FromGrpc(status);
    return response;
  }

  ConnectOptions options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<::gpujoin::v1::GpuJoin::Stub> stub_;
};

}  // namespace gpujoin::client
