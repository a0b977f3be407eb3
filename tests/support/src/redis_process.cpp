#include "gpujoin/testing/redis_process.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "gpujoin/testing/loopback.hpp"
#include "gpujoin/testing/subprocess.hpp"

namespace gpujoin::testing {
namespace {

bool Executable(const std::string& path) {
  return !path.empty() && access(path.c_str(), X_OK) == 0;
}

bool Accepts(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  const bool ok = connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  close(fd);
  return ok;
}

}  // namespace

std::string RedisServerBinary() {
  const char* v = std::getenv("REDIS_SERVER");
  if (v != nullptr && *v != '\0') return Executable(v) ? v : "";
  if (const char* path = std::getenv("PATH")) {
    std::stringstream dirs(path);
    std::string dir;
    while (std::getline(dirs, dir, ':')) {
      if (!dir.empty() && Executable(dir + "/redis-server")) return dir + "/redis-server";
    }
  }
  return Executable("/usr/bin/redis-server") ? "/usr/bin/redis-server" : "";
}

RedisProcess::RedisProcess() {
  const std::string binary = RedisServerBinary();
  if (binary.empty()) {
    error_ = "no redis-server ($REDIS_SERVER, $PATH, /usr/bin)";
    return;
  }
  log_path_ = (std::filesystem::temp_directory_path() /
               ("gpujoin_redis_" + std::to_string(getpid()) + "_" +
                std::to_string(reinterpret_cast<uintptr_t>(this)) + ".log"))
                  .string();
  // A free port can be taken between FreePort() and redis binding it: then
  // redis exits and another port is tried.
  for (int attempt = 0; attempt < 3 && !ready(); ++attempt) {
    const int port = FreePort();
    const int out = open(log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    const int in = open("/dev/null", O_RDONLY | O_CLOEXEC);
    pid_ = Spawn({binary, "--port", std::to_string(port), "--bind", "127.0.0.1", "--save", "",
                  "--appendonly", "no", "--daemonize", "no"},
                 in, out, out, &error_);
    close(in);
    close(out);
    if (pid_ < 0) return;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
      if (Accepts(port)) {
        address_ = "127.0.0.1:" + std::to_string(port);
        break;
      }
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (!ready()) Stop();
  }
}

void RedisProcess::Stop() {
  if (pid_ > 0) StopProcess(pid_, SIGKILL, std::chrono::seconds(5));
  pid_ = -1;
}

RedisProcess::~RedisProcess() {
  Stop();
  if (!log_path_.empty()) {
    std::error_code ec;
    std::filesystem::remove(log_path_, ec);
  }
}

std::string RedisProcess::log() const {
  std::ifstream in(log_path_);
  std::stringstream s;
  s << in.rdbuf();
  return error_.empty() ? s.str() : error_ + "\n" + s.str();
}

}  // namespace gpujoin::testing
