// Client::Health: grpc.health.v1 Check through a generic stub, with its two
// messages encoded by hand so that the client needs no second generated proto.
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client_impl.hpp"
#include "gpujoin/client/client.hpp"
#include "gpujoin/common/status_macros.hpp"

namespace gpujoin::client {
namespace {

using detail::FromGrpc;

// Encodes grpc.health.v1.HealthCheckRequest{service} by hand (field 1, string)
// so that the client needs no second generated proto.
std::string EncodeHealthRequest(const std::string& service) {
  std::string out;
  if (service.empty()) return out;
  out.push_back(0x0a);
  uint64_t n = service.size();
  while (n >= 0x80) {
    out.push_back(static_cast<char>((n & 0x7f) | 0x80));
    n >>= 7;
  }
  out.push_back(static_cast<char>(n));
  out += service;
  return out;
}

// Decodes grpc.health.v1.HealthCheckResponse{status = 1 (enum)}; unknown
// fields are skipped.
absl::StatusOr<int> DecodeHealthResponse(const std::string& bytes) {
  size_t i = 0;
  auto varint = [&](uint64_t* v) -> bool {
    *v = 0;
    for (int shift = 0; shift < 64 && i < bytes.size(); shift += 7) {
      uint8_t b = static_cast<uint8_t>(bytes[i++]);
      *v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return true;
    }
    return false;
  };
  int status = 0;
  while (i < bytes.size()) {
    uint64_t tag;
    if (!varint(&tag)) break;
    uint64_t field = tag >> 3, wire = tag & 7, v;
    if (wire == 0) {
      if (!varint(&v)) break;
      if (field == 1) status = static_cast<int>(v);
    } else if (wire == 2) {
      if (!varint(&v) || v > bytes.size() - i) break;
      i += v;
    } else if (wire == 1) {
      i += 8;
    } else if (wire == 5) {
      i += 4;
    } else {
      break;
    }
  }
  if (i > bytes.size()) return absl::InternalError("malformed health check response");
  return status;
}

}  // namespace

absl::StatusOr<HealthState> Client::Health(const std::string& service) {
  grpc::ClientContext ctx;
  impl_->Prepare(&ctx);
  grpc::GenericStub generic(impl_->channel_);
  const std::string req_bytes = EncodeHealthRequest(service);
  grpc::Slice slice(req_bytes);
  grpc::ByteBuffer request(&slice, 1);
  grpc::ByteBuffer response;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  grpc::Status status;
  generic.UnaryCall(&ctx, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request, &response,
                    [&](grpc::Status s) {
                      std::lock_guard<std::mutex> lock(mu);
                      status = std::move(s);
                      done = true;
                      cv.notify_one();
                    });
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return done; });
  }
  if (!status.ok()) return FromGrpc(status);
  std::vector<grpc::Slice> slices;
  grpc::Status dump = response.Dump(&slices);
  if (!dump.ok()) return FromGrpc(dump);
  std::string bytes;
  for (const auto& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  GPUJOIN_ASSIGN_OR_RETURN(int code, DecodeHealthResponse(bytes));
  switch (code) {
    case 1:
      return HealthState::kServing;
    case 2:
      return HealthState::kNotServing;
    case 3:
      return HealthState::kServiceUnknown;
    default:
      return HealthState::kUnknown;
  }
}

}  // namespace gpujoin::client
