// gpujoind: serves GPU-resident hash indexes over gRPC. See docs/api.md.
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "gpujoin/server/config.hpp"
#include "gpujoin/server/logging.hpp"
#include "gpujoin/server/server.hpp"

namespace {

// Self-pipe: the handler only writes the signal number; the main loop reads it.
// (Libraries may start threads before main, so masking signals is not enough.)
int g_signal_pipe[2] = {-1, -1};

extern "C" void OnShutdownSignal(int sig) {
  const int saved = errno;
  const unsigned char byte = static_cast<unsigned char>(sig);
  [[maybe_unused]] ssize_t n = write(g_signal_pipe[1], &byte, 1);
  errno = saved;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace gpujoin::server;
  auto parsed = ParseServerFlags(argc, argv, std::cout);
  if (!parsed.ok()) {
    std::cerr << "gpujoind: " << parsed.status().message() << "\n";
    return 2;
  }
  if (!parsed->has_value()) return 0;
  const ServerConfig& config = **parsed;
  SetLogLevel(config.log_level);

  if (pipe(g_signal_pipe) != 0) {
    LogError("gpujoind: cannot create the signal pipe");
    return 1;
  }
  struct sigaction action = {};
  action.sa_handler = OnShutdownSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
  signal(SIGPIPE, SIG_IGN);

  auto server = StartDaemon(config);
  if (!server.ok()) {
    LogError(absl::StrCat("gpujoind failed to start: ", server.status().ToString()));
    return 1;
  }
  LogInfo(absl::StrCat("gpujoind ready: grpc=", (*server)->grpc_address(), " metrics=",
                       (*server)->metrics_address().empty() ? "off" : (*server)->metrics_address(),
                       " ", (*server)->backend_description()));

  for (;;) {
    pollfd fd = {g_signal_pipe[0], POLLIN, 0};
    const int ready = poll(&fd, 1, 500);
    if (ready > 0) {
      unsigned char sig = 0;
      if (read(g_signal_pipe[0], &sig, 1) == 1) {
        LogInfo(absl::StrCat("received ", sig == SIGTERM ? "SIGTERM" : "SIGINT",
                             "; shutting down gracefully"));
        break;
      }
    }
    (*server)->Poll();
  }
  (*server)->Shutdown();
  server->reset();
  LogDebug("exiting");
  return 0;
}
