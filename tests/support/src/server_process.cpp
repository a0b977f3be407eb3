#include "gpujoin/testing/server_process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>

#include "gpujoin/testing/subprocess.hpp"

namespace gpujoin::testing {

std::string GpujoindBinary() {
  const char* v = std::getenv("GPUJOIND");
  if (v != nullptr && *v != '\0') return v;
  return GPUJOIN_GPUJOIND_PATH;
}

std::string TestBackend() {
  const char* v = std::getenv("GPUJOIN_TEST_BACKEND");
  return v != nullptr && *v != '\0' ? v : "cpu";
}

ServerProcess::ServerProcess(ServerOptions options) {
  std::vector<std::string> args = {
      options.binary.empty() ? GpujoindBinary() : options.binary,
      "--listen=127.0.0.1:0",
      options.metrics ? "--metrics-listen=127.0.0.1:0" : "--metrics-listen=none",
      // $GPUJOIN_TEST_BACKEND (e.g. "cuda" in bench/device_run.sh) replaces the CPU
      // backend for every test that does not pass --backend itself.
      "--backend=" + TestBackend(),
      "--cpu-threads=2",
      "--executor-threads=2",
      "--drain-timeout=10",
      "--drain-grace=0"};
  if (!options.token.empty()) {
    static std::atomic<int> counter{0};
    token_file_ = (std::filesystem::temp_directory_path() /
                   ("gpujoind_token_" + std::to_string(getpid()) + "_" + std::to_string(counter++)))
                      .string();
    std::ofstream(token_file_) << options.token << "\n";
    args.push_back("--auth-token-file=" + token_file_);
  }
  args.insert(args.end(), options.extra_args.begin(), options.extra_args.end());

  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    log_ = "pipe failed";
    return;
  }
  const int in = open("/dev/null", O_RDONLY | O_CLOEXEC);
  std::string error;
  pid_ = Spawn(args, in, fds[1], fds[1], &error);
  close(in);
  close(fds[1]);
  out_fd_ = fds[0];
  if (pid_ < 0) {
    log_ = error;
    return;
  }
  reader_ = std::thread([this] {
    char buf[4096];
    for (;;) {
      const ssize_t n = read(out_fd_, buf, sizeof buf);
      if (n <= 0) return;
      std::lock_guard<std::mutex> lock(mu_);
      log_.append(buf, static_cast<size_t>(n));
    }
  });
  // The whole line up to the backend description, so that a half-written line
  // never yields a truncated address.
  const std::regex ready(R"(gpujoind ready: grpc=(\S+) metrics=(\S+) )");
  const auto deadline = std::chrono::steady_clock::now() + options.ready_timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      std::smatch m;
      if (std::regex_search(log_, m, ready)) {
        grpc_address_ = m[1];
        if (m[2] != "off") metrics_address_ = m[2];
        return;
      }
    }
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      // Everything it printed before dying is then in log().
      if (reader_.joinable()) reader_.join();
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

int ServerProcess::StopWith(int sig, std::chrono::milliseconds grace) {
  if (pid_ <= 0) return -1;
  const int code = StopProcess(pid_, sig, grace);
  pid_ = -1;
  // The pipe reaches EOF once the server is gone.
  if (reader_.joinable()) reader_.join();
  return code;
}

ServerProcess::~ServerProcess() {
  StopWith(SIGKILL);
  if (reader_.joinable()) reader_.join();
  if (out_fd_ >= 0) close(out_fd_);
  if (!token_file_.empty()) {
    std::error_code ec;
    std::filesystem::remove(token_file_, ec);
  }
}

uint64_t ProcessStatusBytes(pid_t pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  const std::string prefix = field + ":";
  while (std::getline(in, line)) {
    if (line.rfind(prefix, 0) != 0) continue;
    // "VmRSS:\t  123456 kB"
    return std::stoull(line.substr(prefix.size())) * 1024;
  }
  return 0;
}

std::string ServerProcess::log() const {
  std::lock_guard<std::mutex> lock(mu_);
  return log_;
}

}  // namespace gpujoin::testing
