// gpujoin-router: the gpujoin.v1 API in front of N gpujoind shards
// (docs/operations.md "Sharding").
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gpujoin/server/logging.hpp"
#include "router/router.hpp"

namespace {

int g_signal_pipe[2] = {-1, -1};

extern "C" void OnShutdownSignal(int sig) {
  const unsigned char byte = static_cast<unsigned char>(sig);
  [[maybe_unused]] ssize_t n = write(g_signal_pipe[1], &byte, 1);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace gpujoin::server;
  router::RouterConfig config;
  std::string shards, pattern, log_level = "info";
  uint32_t shard_count = 0;
  std::string max_message;
  CLI::App app{"gpujoin-router: the gpujoin.v1 API in front of N gpujoind shards; every index is "
               "partitioned over them by its keys (docs/operations.md, \"Sharding\")"};
  app.add_option("--listen", config.listen, "gRPC listen address (port 0 = any free port)")
      ->capture_default_str();
  app.add_option("--metrics-listen", config.metrics_listen,
                 "Prometheus /metrics address; empty or \"none\" disables it")
      ->capture_default_str();
  app.add_option("--shards", shards,
                 "The shards' addresses, comma-separated, shard 0 first (gpujoind --shard I/N "
                 "at position I)");
  app.add_option("--shard-pattern", pattern,
                 "Shard address pattern with {i} for the shard number, e.g. "
                 "'gpujoind-{i}.gpujoind:50051' (with --shard-count)");
  app.add_option("--shard-count", shard_count, "Number of shards of --shard-pattern");
  app.add_option("--shard-tls-ca", config.shard_tls_ca,
                 "PEM CA certificate(s) verifying the shards: TLS toward them (default plaintext)");
  app.add_option("--shard-token-file", config.shard_token_file,
                 "File holding the bearer token sent to the shards (their --auth-token-file)");
  app.add_option("--shard-timeout", config.shard_timeout_seconds,
                 "Seconds a shard may take to answer a unary call or a stream's batch")
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            // Finite and bounded: NaN passes CLI::Range, and past about 9e9 s the
            // deadline's nanoseconds overflow.
            char* end = nullptr;
            const double v = std::strtod(text.c_str(), &end);
            if (end == text.c_str() || *end != '\0' || !std::isfinite(v) || v < 0.001 ||
                v > 1e6) {
              return "--shard-timeout must be a number of seconds in [0.001, 1000000], got " +
                     text;
            }
            return "";
          },
          "SECONDS"))
      ->capture_default_str();
  app.add_option("--tls-cert", config.tls_cert, "PEM certificate chain; with --tls-key serves TLS");
  app.add_option("--tls-key", config.tls_key, "PEM private key for --tls-cert");
  app.add_option("--tls-client-ca", config.tls_client_ca,
                 "PEM CA certificate(s): clients must present a certificate signed by one");
  app.add_option("--auth-token-file", config.auth_token_file,
                 "File holding a bearer token that every GpuJoin call must present");
  app.add_option("--max-message-bytes", config.max_message_bytes, "Largest gRPC message in bytes")
      ->capture_default_str();
  app.add_option("--max-streams-per-connection", config.max_streams_per_connection,
                 "Streams one client connection may hold open at once (as gpujoind's)")
      ->check(CLI::Range(uint32_t{1}, uint32_t{0xffffffff}))
      ->capture_default_str();
  app.add_option("--max-aggregate-groups", config.max_aggregate_groups,
                 "Most groups one Aggregate stream may ask for (as gpujoind's)")
      ->check(CLI::Range(uint64_t{1}, uint64_t{0xffffffff}))
      ->capture_default_str();
  app.add_option("--log-level", log_level, "debug, info, warning or error")->capture_default_str();
  bool version = false;
  app.add_flag("--version", version, "Print the version and exit");
  CLI11_PARSE(app, argc, argv);
  if (version) {
    std::cout << "gpujoin-router " << GPUJOIN_VERSION << "\n";
    return 0;
  }
  auto level = ParseLogLevel(log_level);
  if (!level.ok()) {
    std::cerr << "--log-level: " << level.status().message() << "\n";
    return 2;
  }
  SetLogLevel(*level);
  if (!shards.empty() && !pattern.empty()) {
    std::cerr << "--shards and --shard-pattern: give one of them\n";
    return 2;
  }
  if (!shards.empty()) {
    for (absl::string_view s : absl::StrSplit(shards, ',', absl::SkipWhitespace())) {
      config.shards.emplace_back(s);
    }
  } else if (!pattern.empty()) {
    auto expanded = router::ExpandShardPattern(pattern, shard_count);
    if (!expanded.ok()) {
      std::cerr << expanded.status().message() << "\n";
      return 2;
    }
    config.shards = *std::move(expanded);
  }
  if (pipe(g_signal_pipe) != 0) return 1;
  struct sigaction action = {};
  action.sa_handler = OnShutdownSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
  signal(SIGPIPE, SIG_IGN);
  auto router = router::Router::Start(config);
  if (!router.ok()) {
    LogError(absl::StrCat("gpujoin-router failed to start: ", router.status().ToString()));
    return 1;
  }
  LogInfo(absl::StrCat("gpujoin-router ready: grpc=", (*router)->address(), " metrics=",
                       (*router)->metrics_address().empty() ? "off" : (*router)->metrics_address(),
                       " shards=", config.shards.size()));
  for (;;) {
    pollfd fd = {g_signal_pipe[0], POLLIN, 0};
    if (poll(&fd, 1, -1) > 0) {
      unsigned char sig = 0;
      if (read(g_signal_pipe[0], &sig, 1) == 1) break;
    }
  }
  LogInfo("gpujoin-router: shutting down");
  (*router)->Shutdown();
  (*router)->Wait();
  return 0;
}
