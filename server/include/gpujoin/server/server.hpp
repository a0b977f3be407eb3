// The assembled gpujoind: backend, registry, budget, metrics exporter, executor,
// the GpuJoin service, grpc.health.v1 and reflection on one gRPC server.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "gpujoin/server/config.hpp"

namespace gpujoin::server {

class Server {
 public:
  /// Creates the backend named by `config`, starts the metrics exporter and the gRPC
  /// server. Errors: INVALID_ARGUMENT / FAILED_PRECONDITION for unusable flags
  /// (unreadable TLS or token files, unavailable backend), UNAVAILABLE when an
  /// address cannot be bound.
  static absl::StatusOr<std::unique_ptr<Server>> Start(const ServerConfig& config);
  ~Server();

  /// "host:port" of the gRPC listener (with the port actually bound).
  std::string grpc_address() const;
  /// "host:port" of /metrics, or "" when disabled.
  std::string metrics_address() const;
  /// One line naming backend and device, for the startup log.
  std::string backend_description() const;

  /// Periodic housekeeping (call every ~0.5 s): backend health -> grpc.health.v1
  /// and gpujoin_serving, device-memory gauges.
  void Poll();

  /// Graceful shutdown: NOT_SERVING, refuse new calls (UNAVAILABLE), let streams
  /// answer what they read, wait up to --drain-timeout for calls to end, then stop.
  void Shutdown();

  struct Impl;

 private:
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpujoin::server
