// Test helpers for tests/cli: run a subprocess with captured output, find a
// free port, and start/stop a real gpujoind (CPU backend, port 0, optional
// token) for the duration of a test suite.
#pragma once

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace gpujoin::testing {

/// Exit code and captured output of one subprocess.
struct RunResult {
  int code = -1;
  std::string out;
  std::string err;
};

inline std::string Slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// Runs `argv` (argv[0] is a path) with stdout/stderr captured into files under
/// `dir` and stdin from `stdin_file`; waits for it.
inline RunResult RunProcess(const std::vector<std::string>& argv, const std::filesystem::path& dir,
                            const std::string& stdin_file = "/dev/null") {
  static int counter = 0;
  const auto out = dir / ("out" + std::to_string(counter) + ".txt");
  const auto err = dir / ("err" + std::to_string(counter++) + ".txt");
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, stdin_file.c_str(), O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  RunResult r;
  const int rc = posix_spawn(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    r.err = "spawn failed: " + std::string(std::strerror(rc));
    return r;
  }
  int status = 0;
  waitpid(pid, &status, 0);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = Slurp(out);
  r.err = Slurp(err);
  return r;
}

/// A loopback TCP port that nothing listened on a moment ago.
inline int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

/// A gpujoind child process on 127.0.0.1:<free port>, CPU backend, metrics off.
class ServerProcess {
 public:
  /// Starts `binary` (plus `extra_args`); with a non-empty `token` the server
  /// requires it. Waits up
  /// to 15 s for the "ready: grpc=HOST:PORT" log line; address() is empty when
  /// the server did not come up (log() says why).
  ServerProcess(const std::string& binary, const std::filesystem::path& dir,
                const std::string& token = "", const std::vector<std::string>& extra_args = {}) {
    const auto log = dir / "gpujoind.log";
    std::vector<std::string> argv = {binary, "--listen=127.0.0.1:0", "--metrics-listen=none",
                                     "--backend=cpu", "--cpu-threads=2"};
    if (!token.empty()) {
      std::ofstream(dir / "server_token") << token << "\n";
      argv.push_back("--auth-token-file=" + (dir / "server_token").string());
    }
    argv.insert(argv.end(), extra_args.begin(), extra_args.end());
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    if (posix_spawn(&pid_, args[0], &fa, nullptr, args.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&fa);
    for (int i = 0; i < 300 && pid_ > 0 && address_.empty(); ++i) {
      const std::string text = Slurp(log);
      const size_t at = text.find("ready: grpc=");
      if (at != std::string::npos) {
        const size_t start = at + std::strlen("ready: grpc=");
        const size_t end = text.find(' ', start);
        if (end != std::string::npos) address_ = text.substr(start, end - start);
      }
      int status;
      if (address_.empty() && waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    log_ = Slurp(log);
  }

  /// SIGTERM, then SIGKILL after 5 s.
  ~ServerProcess() {
    if (pid_ <= 0) return;
    kill(pid_, SIGTERM);
    int status;
    for (int i = 0; i < 100; ++i) {
      if (waitpid(pid_, &status, WNOHANG) == pid_) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    kill(pid_, SIGKILL);
    waitpid(pid_, &status, 0);
  }

  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  const std::string& address() const { return address_; }
  const std::string& log() const { return log_; }

 private:
  pid_t pid_ = -1;
  std::string address_;
  std::string log_;
};

}  // namespace gpujoin::testing
