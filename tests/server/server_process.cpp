#include "server_process.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <regex>
#include <sstream>

#include <gtest/gtest.h>

namespace gpujoin::server::testing {

ServerProcess::ServerProcess(std::vector<std::string> extra_args) {
  const char* binary = std::getenv("GPUJOIND");
  if (binary == nullptr) {
    ADD_FAILURE() << "GPUJOIND (path of the gpujoind binary) is not set";
    return;
  }
  std::vector<std::string> args = {binary, "--listen=127.0.0.1:0", "--metrics-listen=127.0.0.1:0",
                                   "--backend=cpu", "--cpu-threads=2", "--executor-threads=2",
                                   "--drain-timeout=10"};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    ADD_FAILURE() << "pipe failed";
    return;
  }
  pid_ = fork();
  if (pid_ == 0) {
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(fds[1]);
  out_fd_ = fds[0];
  // Drain the child's output continuously so that it never blocks on a full pipe.
  reader_ = std::thread([this] {
    char buf[4096];
    for (;;) {
      ssize_t n = read(out_fd_, buf, sizeof buf);
      if (n <= 0) return;
      std::lock_guard<std::mutex> lock(mu_);
      log_.append(buf, static_cast<size_t>(n));
    }
  });
  const std::regex ready(R"(gpujoind ready: grpc=(\S+) metrics=(\S+))");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      std::smatch m;
      if (std::regex_search(log_, m, ready)) {
        grpc_address_ = m[1];
        metrics_address_ = m[2];
        return;
      }
    }
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ADD_FAILURE() << "gpujoind did not become ready; log:\n" << log();
}

int ServerProcess::StopWith(int sig) {
  if (pid_ <= 0) return -1;
  kill(pid_, sig);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
  if (reader_.joinable()) reader_.join();
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + WTERMSIG(status);
}

ServerProcess::~ServerProcess() {
  if (pid_ > 0) StopWith(SIGKILL);
  if (reader_.joinable()) reader_.join();
  if (out_fd_ >= 0) close(out_fd_);
}

std::string ServerProcess::log() const {
  std::lock_guard<std::mutex> lock(mu_);
  return log_;
}

std::string HttpGet(const std::string& address, const std::string& path) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) return "";
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(std::stoi(address.substr(colon + 1))));
  if (inet_pton(AF_INET, address.substr(0, colon).c_str(), &addr.sin_addr) != 1) return "";
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return "";
  std::string response;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    const std::string request = "GET " + path + " HTTP/1.0\r\nHost: " + address + "\r\n\r\n";
    if (write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size())) {
      char buf[8192];
      pollfd p = {fd, POLLIN, 0};
      while (poll(&p, 1, 10000) > 0) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n <= 0) break;
        response.append(buf, static_cast<size_t>(n));
      }
    }
  }
  close(fd);
  const size_t body = response.find("\r\n\r\n");
  return body == std::string::npos ? "" : response.substr(body + 4);
}

double MetricValue(const std::string& exposition, const std::string& series) {
  std::istringstream in(exposition);
  std::string line;
  while (std::getline(in, line)) {
    if (line.size() > series.size() && line.compare(0, series.size(), series) == 0 &&
        line[series.size()] == ' ') {
      return std::strtod(line.c_str() + series.size() + 1, nullptr);
    }
  }
  return std::nan("");
}

}  // namespace gpujoin::server::testing
