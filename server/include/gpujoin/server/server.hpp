// The assembled gpujoind: backend, registry, budget, metrics exporter, executor,
// the GpuJoin service, grpc.health.v1 and reflection on one gRPC server.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gpujoin/server/config.hpp"

namespace grpc {
class Channel;
}
namespace prometheus {
class Registry;
}

namespace gpujoin::server {

/// What gpujoind's main loop drives: one Server, or a device group (several
/// Servers behind the router's partitioning, for --devices with two or more).
class Daemon {
 public:
  virtual ~Daemon() = default;
  /// "host:port" of the gRPC listener (with the port actually bound).
  virtual std::string grpc_address() const = 0;
  /// "host:port" of /metrics, or "" when disabled.
  virtual std::string metrics_address() const = 0;
  /// One line naming backend and device(s), for the startup log.
  virtual std::string backend_description() const = 0;
  /// Periodic housekeeping (call every ~0.5 s).
  virtual void Poll() = 0;
  /// Graceful shutdown (see Server::Shutdown).
  virtual void Shutdown() = 0;
};

/// Starts what `config` asks for: a Server, or with two or more --devices (or
/// --devices all finding two or more CUDA devices) a device group. Errors as
/// Server::Start's; --devices all without a CUDA device is FAILED_PRECONDITION.
absl::StatusOr<std::unique_ptr<Daemon>> StartDaemon(const ServerConfig& config);

class Server final : public Daemon {
 public:
  /// Creates the backend named by `config`, starts the metrics exporter and the gRPC
  /// server. Errors: INVALID_ARGUMENT / FAILED_PRECONDITION for unusable flags
  /// (unreadable TLS or token files, unavailable backend), UNAVAILABLE when an
  /// address cannot be bound.
  /// An empty --listen serves in-process only (InProcessChannel; a device
  /// group's members). One --devices entry selects that CUDA device.
  static absl::StatusOr<std::unique_ptr<Server>> Start(const ServerConfig& config);
  ~Server() override;

  std::string grpc_address() const override;
  std::string metrics_address() const override;
  std::string backend_description() const override;

  /// Periodic housekeeping (call every ~0.5 s): backend health -> grpc.health.v1
  /// and gpujoin_serving, device-memory gauges.
  void Poll() override;

  /// Graceful shutdown: NOT_SERVING, refuse new calls (UNAVAILABLE), let streams
  /// answer what they read, wait up to --drain-timeout for calls to end, then stop.
  void Shutdown() override;
  /// Shutdown's first step alone: NOT_SERVING, new calls refused, open streams
  /// answer what they read (a device group drains its members at once).
  void BeginDrain();

  /// A channel to this server's services that bypasses the network.
  std::shared_ptr<grpc::Channel> InProcessChannel() const;
  /// The service's metrics (what /metrics exposes).
  std::shared_ptr<prometheus::Registry> metrics_registry() const;

  struct Impl;

 private:
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpujoin::server
