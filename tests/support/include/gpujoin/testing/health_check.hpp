// grpc.health.v1.Health/Check from tests, through the generic stub: Debian
// ships no generated health stubs, so the request and the answer are encoded by
// hand (HealthCheckRequest{service = 1}, HealthCheckResponse{status = 1}).
//
// Header only (gRPC++): include it from a test that links gRPC, e.g. through
// gpujoin_server or gpujoin_client.
#pragma once

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <vector>

namespace gpujoin::testing {

/// The health of `service` ("" = the whole server) as `channel` reaches it,
/// waiting at most `timeout`: 1 = SERVING, 2 = NOT_SERVING, 0 = UNKNOWN (no
/// status in the answer), or -(gRPC code) when the call fails. The call sends no
/// metadata (health needs no token).
inline int HealthStatus(const std::shared_ptr<grpc::Channel>& channel,
                        const std::string& service = "",
                        std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  grpc::GenericStub stub(channel);
  std::string request_bytes;  // empty: HealthCheckRequest{} (the whole server)
  if (!service.empty()) {
    request_bytes.push_back(0x0a);  // field 1, length-delimited
    request_bytes.push_back(static_cast<char>(service.size()));
    request_bytes += service;
  }
  grpc::Slice slice(request_bytes);
  grpc::ByteBuffer request(&slice, 1), response;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  std::promise<grpc::Status> done;
  stub.UnaryCall(&ctx, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request, &response,
                 [&](grpc::Status s) { done.set_value(s); });
  const grpc::Status s = done.get_future().get();
  if (!s.ok()) return -static_cast<int>(s.error_code());
  std::vector<grpc::Slice> slices;
  (void)response.Dump(&slices);
  std::string bytes;
  for (const auto& sl : slices) bytes.append(reinterpret_cast<const char*>(sl.begin()), sl.size());
  return bytes.size() == 2 && bytes[0] == 0x08 ? bytes[1] : 0;
}

/// HealthStatus over a fresh insecure channel to `address` (`HOST:PORT`).
inline int HealthStatus(const std::string& address, const std::string& service = "",
                        std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  return HealthStatus(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()), service,
                      timeout);
}

}  // namespace gpujoin::testing
