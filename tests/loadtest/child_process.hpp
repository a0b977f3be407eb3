// Child processes for the load tester's end-to-end test: a background gpujoind
// on a free loopback port, and a bounded run of gpujoin-loadtest whose stdout
// and stderr are captured.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace gpujoin::loadtest::testing {

/// A background gpujoind. Starts `binary --listen=127.0.0.1:0
/// --metrics-listen=none --backend=cpu` plus `extra_args` and waits (up to
/// 30 s) for its "gpujoind ready: grpc=ADDR" line; ready() says whether it came.
class ServerProcess {
 public:
  ServerProcess(const std::string& binary, std::vector<std::string> extra_args = {});
  /// SIGTERM, then SIGKILL after 10 s; always reaps the child.
  ~ServerProcess();
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  bool ready() const { return !address_.empty(); }
  const std::string& address() const { return address_; }
  /// Everything the server printed so far.
  std::string log() const;

 private:
  pid_t pid_ = -1;
  int fd_ = -1;
  std::thread reader_;
  mutable std::mutex mu_;
  std::string log_;
  std::string address_;
};

/// What a finished child printed and how it ended.
struct RunOutput {
  int exit_code = -1;  ///< exit status; 128 + signal when killed; -1 when it could not start
  std::string out, err;
  bool timed_out = false;
};

/// Runs `args` (args[0] is the binary) to completion, killing it after `timeout`.
RunOutput RunToCompletion(const std::vector<std::string>& args, std::chrono::seconds timeout);

}  // namespace gpujoin::loadtest::testing
