// The shards as gpujoin-router sees them (router.hpp): their stubs, the
// per-shard metrics, and how a shard's failure becomes the call's error.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gpujoin/v1/gpujoin.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace gpujoin::server::router {

using Clock = std::chrono::steady_clock;
inline constexpr const char* kServiceName = "gpujoin.v1.GpuJoin";

inline grpc::Status ToGrpc(const absl::Status& s) {
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

// Per-shard counters of the calls the router makes.
class ShardMetrics {
 public:
  explicit ShardMetrics(size_t shards)
      : serving_flags_(std::make_unique<std::atomic<bool>[]>(shards)),
        registry_(std::make_shared<prometheus::Registry>()),
        requests_(prometheus::BuildCounter()
                      .Name("gpujoin_router_shard_requests_total")
                      .Help("Calls and stream batches the router sent to each shard, by RPC")
                      .Register(*registry_)),
        errors_(prometheus::BuildCounter()
                    .Name("gpujoin_router_shard_errors_total")
                    .Help("Calls and stream batches that failed at a shard, by RPC")
                    .Register(*registry_)),
        seconds_(prometheus::BuildHistogram()
                     .Name("gpujoin_router_shard_seconds")
                     .Help("Seconds a shard took to answer a call or a stream batch, by RPC")
                     .Register(*registry_)),
        serving_(prometheus::BuildGauge()
                     .Name("gpujoin_router_shard_serving")
                     .Help("1 while the shard reports serving, else 0")
                     .Register(*registry_)) {
    for (size_t s = 0; s < shards; ++s) {
      serving_gauges_.push_back(&serving_.Add({{"shard", std::to_string(s)}}));
    }
  }
  void Record(size_t shard, const char* rpc, double seconds, bool ok) {
    const std::map<std::string, std::string> labels{{"shard", std::to_string(shard)}, {"rpc", rpc}};
    std::lock_guard<std::mutex> lock(mu_);
    requests_.Add(labels).Increment();
    if (!ok) errors_.Add(labels).Increment();
    seconds_
        .Add(labels, prometheus::Histogram::BucketBoundaries{0.0001, 0.00025, 0.0005, 0.001, 0.0025,
                                                             0.005, 0.01, 0.025, 0.1, 0.5, 2.5})
        .Observe(seconds);
  }
  void SetServing(size_t shard, bool serving) {
    serving_gauges_[shard]->Set(serving ? 1 : 0);
    serving_flags_[shard].store(serving);
  }
  /// Whether the shard said it serves at the last health poll (false before the first).
  bool Serving(size_t shard) const { return serving_flags_[shard].load(); }
  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }

 private:
  std::unique_ptr<std::atomic<bool>[]> serving_flags_;
  std::shared_ptr<prometheus::Registry> registry_;
  std::mutex mu_;
  prometheus::Family<prometheus::Counter>& requests_;
  prometheus::Family<prometheus::Counter>& errors_;
  prometheus::Family<prometheus::Histogram>& seconds_;
  prometheus::Family<prometheus::Gauge>& serving_;
  std::vector<prometheus::Gauge*> serving_gauges_;
};

struct Shard {
  uint32_t index = 0;
  std::string address;
  std::unique_ptr<v1::GpuJoin::Stub> stub;
  std::string Name() const { return absl::StrCat("shard ", index, " (", address, ")"); }
};

// The error a call gets when `shard` failed it: UNAVAILABLE for a shard that
// cannot be reached or timed out, else the shard's own code; the message names
// the shard.
inline grpc::Status ShardFailed(const Shard& shard, const grpc::Status& s) {
  grpc::StatusCode code = s.error_code();
  if (code == grpc::StatusCode::DEADLINE_EXCEEDED || code == grpc::StatusCode::CANCELLED) {
    code = grpc::StatusCode::UNAVAILABLE;
  }
  return grpc::Status(code, absl::StrCat(shard.Name(), ": ", s.error_message()));
}

// Whether `s` says something of the call itself (its arguments, an index it
// names, the caller's rights) rather than of the shard that answered it.
inline bool CallersError(const grpc::Status& s) {
  switch (s.error_code()) {
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::NOT_FOUND:
    case grpc::StatusCode::ALREADY_EXISTS:
    case grpc::StatusCode::FAILED_PRECONDITION:
    case grpc::StatusCode::OUT_OF_RANGE:
    case grpc::StatusCode::UNAUTHENTICATED:
    case grpc::StatusCode::PERMISSION_DENIED:
    case grpc::StatusCode::UNIMPLEMENTED:
      return true;
    default:
      return false;
  }
}

}  // namespace gpujoin::server::router
