// Runs the real gpujoind binary (path in $GPUJOIND) as a child process on free
// loopback ports, for integration tests.
#pragma once

#include <sys/types.h>

#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace gpujoin::server::testing {

class ServerProcess {
 public:
  /// Starts gpujoind with `--listen=127.0.0.1:0 --metrics-listen=127.0.0.1:0
  /// --backend=cpu` plus `extra_args`, and waits (up to 20 s) for its ready line.
  /// Fails the current test (ADD_FAILURE) when it does not come up.
  explicit ServerProcess(std::vector<std::string> extra_args = {});
  /// Kills the process if it is still running.
  ~ServerProcess();

  bool ready() const { return !grpc_address_.empty(); }
  const std::string& grpc_address() const { return grpc_address_; }
  const std::string& metrics_address() const { return metrics_address_; }

  /// Sends `sig` and waits for exit; returns the exit code (128 + signal when killed).
  int StopWith(int sig);
  /// Everything the server logged so far.
  std::string log() const;

 private:
  pid_t pid_ = -1;
  int out_fd_ = -1;
  std::thread reader_;
  mutable std::mutex mu_;
  std::string log_;
  std::string grpc_address_, metrics_address_;
};

/// GET http://<address><path>; returns the body ("" on failure).
std::string HttpGet(const std::string& address, const std::string& path);

/// The value of the sample line `series` (exact name with labels, e.g.
/// `gpujoin_indexes` or `gpujoin_query_rows_total{index="a",op="lookup"}`) in a
/// Prometheus text exposition; NaN when absent.
double MetricValue(const std::string& exposition, const std::string& series);

}  // namespace gpujoin::server::testing
