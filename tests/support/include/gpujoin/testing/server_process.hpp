// A real gpujoind as a child process on free loopback ports (port 0), CPU backend,
// for integration tests of the server, the CLI, the client library and the load tester.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace gpujoin::testing {

/// The gpujoind binary to test: $GPUJOIND when set and non-empty, else the one this
/// build produced (compiled in).
std::string GpujoindBinary();

/// How to start gpujoind.
/// The backend test servers run on: $GPUJOIN_TEST_BACKEND, or "cpu" when unset.
std::string TestBackend();

struct ServerOptions {
  /// Path of the binary; empty means GpujoindBinary().
  std::string binary;
  /// Added after the fixed arguments (`--listen=127.0.0.1:0 --backend=TestBackend()
  /// --cpu-threads=2 --executor-threads=2 --drain-timeout=10 --drain-grace=0` and the
  /// metrics listener; a later repeat of a flag wins).
  std::vector<std::string> extra_args;
  /// Serve Prometheus metrics on 127.0.0.1:<free port> (else `--metrics-listen=none`).
  bool metrics = false;
  /// Non-empty: the server requires this bearer token (written to a temporary
  /// `--auth-token-file` that the ServerProcess removes again).
  std::string token;
  /// How long to wait for the "gpujoind ready: ..." log line.
  std::chrono::seconds ready_timeout = std::chrono::seconds(30);
};

/// A running gpujoind. The constructor starts it and waits for its ready line;
/// ready() says whether it came (log() says why not). Its stdout and stderr are
/// drained continuously into log(), so it never blocks on a full pipe.
class ServerProcess {
 public:
  explicit ServerProcess(ServerOptions options = {});
  /// Kills the server (SIGKILL) when it still runs, and removes the token file. A
  /// test that checks the shutdown path calls StopWith(SIGTERM) itself; everyone else
  /// is spared the drain (up to --drain-timeout when a test left a call open).
  ~ServerProcess();
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  /// Whether the server printed its ready line (and so grpc_address() is known).
  bool ready() const { return !grpc_address_.empty(); }
  /// The gRPC address, `127.0.0.1:PORT`; empty when not ready.
  const std::string& grpc_address() const { return grpc_address_; }
  /// The metrics address, `127.0.0.1:PORT`; empty when not ready or metrics are off.
  const std::string& metrics_address() const { return metrics_address_; }

  /// The server's process ID (-1 when it is not running): for /proc/<pid>/status
  /// and prlimit(2).
  pid_t pid() const { return pid_; }

  /// Sends `sig`, waits up to `grace` for the exit (then SIGKILL) and returns the exit
  /// code (128 + signal when killed; -1 when it was not running).
  int StopWith(int sig, std::chrono::milliseconds grace = std::chrono::seconds(30));
  /// Everything the server printed so far.
  std::string log() const;

 private:
  pid_t pid_ = -1;
  int out_fd_ = -1;
  std::thread reader_;
  mutable std::mutex mu_;
  std::string log_;
  std::string grpc_address_, metrics_address_;
  std::string token_file_;
};

/// A field of /proc/<pid>/status in bytes (e.g. "VmRSS", "VmSize", "VmHWM"); 0
/// when the process or the field is not there.
uint64_t ProcessStatusBytes(pid_t pid, const std::string& field);

}  // namespace gpujoin::testing
