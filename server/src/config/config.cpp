#include "gpujoin/server/config.hpp"

#include <algorithm>
#include <cctype>
#include <limits>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "gpujoin/engine/backend.hpp"

namespace gpujoin::server {

absl::StatusOr<uint64_t> ParseByteSize(std::string_view text, std::string_view flag) {
  auto bad = [&](std::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(flag), ": \"", std::string(text),
                                                   "\" ", std::string(why),
                                                   " (expected e.g. 1073741824, 512M or 8G)"));
  };
  size_t i = 0;
  uint64_t value = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
    const uint64_t digit = static_cast<uint64_t>(text[i] - '0');
    if (value > (std::numeric_limits<uint64_t>::max() - digit) / 10)
      return bad("overflows 64 bits");
    value = value * 10 + digit;
    ++i;
  }
  if (i == 0) return bad("does not start with a number");
  std::string suffix = absl::AsciiStrToUpper(std::string(text.substr(i)));
  int shift = 0;
  if (suffix.empty() || suffix == "B") {
    shift = 0;
  } else {
    const char unit = suffix[0];
    const std::string rest = suffix.substr(1);
    if (rest != "" && rest != "B" && rest != "IB") return bad("has an unknown unit suffix");
    switch (unit) {
      case 'K':
        shift = 10;
        break;
      case 'M':
        shift = 20;
        break;
      case 'G':
        shift = 30;
        break;
      case 'T':
        shift = 40;
        break;
      default:
        return bad("has an unknown unit suffix");
    }
  }
  if (shift > 0 && value > (std::numeric_limits<uint64_t>::max() >> shift)) {
    return bad("overflows 64 bits");
  }
  return value << shift;
}

uint32_t ResolveExecutorThreads(const ServerConfig& config, engine::BackendKind backend,
                                uint32_t cores) {
  if (config.executor_threads != 0) return config.executor_threads;
  // CUDA: the workers' stream synchronisations spin (default scheduling), and the
  // backend keeps at most 16 idle stream contexts, so no more threads than cores
  // and 16: on the H200 host 32 or 64 threads cut 1K-row lookups at 16 streams
  // from 77.7 K to 5-6 K batches/s (docs/PERFORMANCE.md).
  if (backend == engine::BackendKind::kCuda) return std::clamp(cores, 2u, 16u);
  return std::max(2u, cores);
}

uint32_t ResolveInlineBatchRows(const ServerConfig& config, engine::BackendKind backend) {
  if (backend == engine::BackendKind::kCuda) return 0;
  if (config.inline_batch_rows >= 0) return static_cast<uint32_t>(config.inline_batch_rows);
  return 4096;
}

uint64_t ResolveMaxPendingResponseBytes(const ServerConfig& config, uint64_t physical_bytes) {
  if (config.max_pending_response_bytes != 0) return config.max_pending_response_bytes;
  if (physical_bytes == 0) return kDefaultMaxPendingResponseBytes;
  return std::min(physical_bytes / 8, kDefaultMaxPendingResponseBytes);
}

absl::StatusOr<std::optional<ServerConfig>> ParseServerFlags(int argc, const char* const* argv,
                                                             std::ostream& out) {
  ServerConfig config;
  CLI::App app{"gpujoind: GPU-resident hash indexes served over gRPC", "gpujoind"};
  std::string backend = "auto", memory_limit, max_message, log_level = "info";
  std::string auth_scope = "rpc";
  std::string cuda_build_path = "auto", cuda_transient_max;
  std::string staged, build_staged, max_result, max_pending;
  bool version = false;
  // A repeated flag takes its last value (wrappers can append overrides).
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("--listen", config.listen, "gRPC listen address (port 0 = any free port)")
      ->capture_default_str();
  app.add_option("--metrics-listen", config.metrics_listen,
                 "Prometheus /metrics address; empty or \"none\" disables it")
      ->capture_default_str();
  app.add_option("--backend", backend, "Engine backend: auto, cuda or cpu")->capture_default_str();
  app.add_option(
      "--device-memory-limit", memory_limit,
      "Index memory budget in bytes (K/M/G/T suffixes); default 80% of free device memory");
  app.add_option("--max-message-bytes", max_message,
                 "Largest gRPC message in bytes (K/M/G suffixes); default 256M");
  app.add_option("--tls-cert", config.tls_cert, "PEM certificate chain; with --tls-key serves TLS");
  app.add_option("--tls-key", config.tls_key, "PEM private key for --tls-cert");
  app.add_option("--tls-client-ca", config.tls_client_ca,
                 "PEM CA certificate(s): clients must present a certificate signed by one "
                 "(mutual TLS; needs --tls-cert)");
  app.add_option("--auth-token-file", config.auth_token_file,
                 "File holding a bearer token that every GpuJoin call must present");
  app.add_option("--auth-scope", auth_scope,
                 "What --auth-token-file protects: rpc (the GpuJoin calls) or all (also "
                 "reflection and /metrics); health stays open")
      ->capture_default_str();
  app.add_option("--log-level", log_level, "debug, info, warning or error")->capture_default_str();
  app.add_option("--max-inflight-per-stream", config.max_inflight_per_stream,
                 "Batches of one stream processed at once (further reads wait)")
      ->capture_default_str();
  app.add_option("--max-inflight-batches", config.max_inflight_batches,
                 "Batches processed at once over all streams (beyond: RESOURCE_EXHAUSTED)")
      ->capture_default_str();
  app.add_option("--executor-threads", config.executor_threads,
                 "Threads running engine work; 0 = cores (at least 2) for the CPU backend, "
                 "cores clamped to [2, 16] for the CUDA backend")
      ->capture_default_str();
  app.add_option("--inline-batch-rows", config.inline_batch_rows,
                 "Lookup/Join batches of at most this many rows run on the gRPC thread that "
                 "read them (no executor hand-off); -1 = 4096 for the CPU backend, 0 (off) "
                 "for CUDA, which ignores positive values")
      ->capture_default_str();
  app.add_option("--cpu-threads", config.cpu_threads,
                 "CPU backend threads; 0 = hardware concurrency")
      ->capture_default_str();
  app.add_option("--drain-timeout", config.drain_timeout_seconds,
                 "Seconds to drain on SIGTERM/SIGINT before cancelling remaining calls")
      ->capture_default_str();
  engine::BackendOptions& cuda = config.backend_options;
  app.add_option("--cuda-build-path", cuda_build_path,
                 "CUDA build path: auto (by size), direct or tiles (same results)")
      ->capture_default_str();
  app.add_option("--cuda-build-transient-max-bytes", cuda_transient_max,
                 "Most transient device memory one CUDA build may take (e.g. 2GiB; unset = no "
                 "cap); a tile build that would need more inserts directly");
  app.add_flag("--cuda-spin-wait", cuda.cuda_spin_wait,
               "Spin a core per waiting request instead of sleeping on the GPU");
  app.add_option("--cuda-wait-poll-us", cuda.cuda_wait_poll_us,
                 "Microseconds to poll for GPU completion before sleeping (0 = sleep at once)")
      ->capture_default_str();
  app.add_option("--cuda-join-graphs", cuda.cuda_join_graphs,
                 "Capture repeated small join batches as CUDA Graphs (true/false)")
      ->capture_default_str();
  app.add_option("--cuda-aggregate-graphs", cuda.cuda_aggregate_graphs,
                 "Capture repeated small aggregations as CUDA Graphs (true/false)")
      ->capture_default_str();
  app.add_option("--max-concurrent-builds", config.max_concurrent_builds,
                 "Most BuildIndex streams open at once (each holds its staged input); beyond "
                 "it RESOURCE_EXHAUSTED")
      ->capture_default_str();
  app.add_option("--max-aggregate-groups", config.max_aggregate_groups,
                 "Most groups one Aggregate stream may ask for; above it RESOURCE_EXHAUSTED")
      ->capture_default_str();
  app.add_option("--max-staged-bytes", staged,
                 "Build input all open builds may hold in host memory (K/M/G/T suffixes); "
                 "default a quarter of physical memory; beyond it RESOURCE_EXHAUSTED");
  app.add_option("--max-build-staged-bytes", build_staged,
                 "Build input one build may hold (K/M/G/T suffixes); default "
                 "--max-staged-bytes");
  app.add_option("--max-result-bytes", max_result,
                 "Host bytes one Lookup batch or Join request may hold as results (pairs, "
                 "found, probes, gathered payload columns; K/M/G/T suffixes); default the "
                 "smaller of an eighth of physical memory and 4G; beyond it RESOURCE_EXHAUSTED");
  app.add_option("--max-pending-response-bytes", max_pending,
                 "Host bytes the responses of all streams may hold while they wait to be "
                 "written (clients that read slowly; K/M/G/T suffixes); default the smaller "
                 "of an eighth of physical memory and 2G; beyond it a batch gets "
                 "RESOURCE_EXHAUSTED");
  app.add_option("--max-streams-per-connection", config.max_streams_per_connection,
                 "Streaming calls open at once on one client connection; beyond it "
                 "RESOURCE_EXHAUSTED")
      ->capture_default_str();
  app.add_option("--drain-grace", config.drain_grace_seconds,
                 "Seconds to stay listening with health NOT_SERVING on SIGTERM/SIGINT before "
                 "the listener closes (so load balancers see it)")
      ->capture_default_str();
  std::string max_snapshot;
  std::string max_copy;
  app.add_option("--data-dir", config.data_dir,
                 "Directory of index snapshots: each build writes <name>.gjsnap in the "
                 "background, start-up loads them all (unset = off)");
  app.add_option("--max-snapshot-bytes", max_snapshot,
                 "Most bytes the --data-dir files may take (K/M/G/T suffixes); a snapshot "
                 "write that would pass it fails and is counted; unset = no limit");
  app.add_option("--max-copy-bytes", max_copy,
                 "Most bytes the copies SaveIndex writes under --data-dir (files other than "
                 "<index>.gjsnap) may take together; 0 = no limit")
      ->default_str("16G");
  app.add_option("--snapshot-test-write-delay-ms", config.snapshot_test_write_delay_ms,
                 "Tests only: sleep this many ms after every MiB of a snapshot written")
      ->group("");
  app.add_option("--snapshot-test-load-delay-ms", config.snapshot_test_load_delay_ms,
                 "Tests only: sleep this many ms before each snapshot loaded at start")
      ->group("");
  app.add_flag("--version", version, "Print the version and exit");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    out << app.help();
    return std::optional<ServerConfig>();
  } catch (const CLI::ParseError& e) {
    return absl::InvalidArgumentError(e.what());
  }
  if (version) {
    out << "gpujoind " << GPUJOIN_VERSION << "\n";
    return std::optional<ServerConfig>();
  }

  auto kind = engine::ParseBackendKind(backend);
  if (!kind.ok()) return kind.status();
  config.backend = *kind;
  auto level = ParseLogLevel(log_level);
  if (!level.ok()) return level.status();
  config.log_level = *level;
  if (!memory_limit.empty()) {
    auto bytes = ParseByteSize(memory_limit, "--device-memory-limit");
    if (!bytes.ok()) return bytes.status();
    config.device_memory_limit = *bytes;
  }
  if (!staged.empty()) {
    auto bytes = ParseByteSize(staged, "--max-staged-bytes");
    if (!bytes.ok()) return bytes.status();
    if (*bytes == 0) return absl::InvalidArgumentError("--max-staged-bytes: must be at least 1");
    config.max_staged_bytes = *bytes;
  }
  if (!build_staged.empty()) {
    auto bytes = ParseByteSize(build_staged, "--max-build-staged-bytes");
    if (!bytes.ok()) return bytes.status();
    if (*bytes == 0) {
      return absl::InvalidArgumentError("--max-build-staged-bytes: must be at least 1");
    }
    config.max_build_staged_bytes = *bytes;
  }
  if (!max_result.empty()) {
    auto bytes = ParseByteSize(max_result, "--max-result-bytes");
    if (!bytes.ok()) return bytes.status();
    if (*bytes == 0) return absl::InvalidArgumentError("--max-result-bytes: must be at least 1");
    config.max_result_bytes = *bytes;
  }
  if (!max_pending.empty()) {
    auto bytes = ParseByteSize(max_pending, "--max-pending-response-bytes");
    if (!bytes.ok()) return bytes.status();
    if (*bytes == 0) {
      return absl::InvalidArgumentError("--max-pending-response-bytes: must be at least 1");
    }
    config.max_pending_response_bytes = *bytes;
  }
  if (!max_snapshot.empty()) {
    auto bytes = ParseByteSize(max_snapshot, "--max-snapshot-bytes");
    if (!bytes.ok()) return bytes.status();
    if (config.data_dir.empty()) {
      return absl::InvalidArgumentError("--max-snapshot-bytes requires --data-dir");
    }
    config.max_snapshot_bytes = *bytes;
  }
  if (!max_copy.empty()) {
    auto bytes = ParseByteSize(max_copy, "--max-copy-bytes");
    if (!bytes.ok()) return bytes.status();
    if (config.data_dir.empty()) {
      return absl::InvalidArgumentError("--max-copy-bytes requires --data-dir");
    }
    config.max_copy_bytes = *bytes;
  }
  if (!max_message.empty()) {
    auto bytes = ParseByteSize(max_message, "--max-message-bytes");
    if (!bytes.ok()) return bytes.status();
    if (*bytes < 4096 || *bytes > (2ull << 30) - 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--max-message-bytes: ", *bytes, " is outside [4096, 2147483647] (gRPC's int limit)"));
    }
    config.max_message_bytes = *bytes;
  }
  if (cuda_build_path == "auto") {
    cuda.cuda_build_path = engine::CudaBuildPath::kAuto;
  } else if (cuda_build_path == "direct") {
    cuda.cuda_build_path = engine::CudaBuildPath::kDirect;
  } else if (cuda_build_path == "tiles") {
    cuda.cuda_build_path = engine::CudaBuildPath::kTiles;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--cuda-build-path: '", cuda_build_path, "' is not auto, direct or tiles"));
  }
  if (!cuda_transient_max.empty()) {
    auto bytes = ParseByteSize(cuda_transient_max, "--cuda-build-transient-max-bytes");
    if (!bytes.ok()) return bytes.status();
    cuda.cuda_build_transient_max_bytes = *bytes;
  }
  if (cuda.cuda_wait_poll_us > 1000000) {
    return absl::InvalidArgumentError(absl::StrCat("--cuda-wait-poll-us: ", cuda.cuda_wait_poll_us,
                                                   " is over 1000000 (one second)"));
  }
  if (config.metrics_listen == "none") config.metrics_listen.clear();
  if (config.tls_cert.empty() != config.tls_key.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key must be given together");
  }
  if (!config.tls_client_ca.empty() && config.tls_cert.empty()) {
    return absl::InvalidArgumentError(
        "--tls-client-ca requires --tls-cert and --tls-key (client certificates are checked in "
        "the TLS handshake)");
  }
  if (auth_scope == "rpc") {
    config.auth_scope = AuthScope::kRpc;
  } else if (auth_scope == "all") {
    config.auth_scope = AuthScope::kAll;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--auth-scope: '", auth_scope, "' is not rpc or all"));
  }
  if (config.auth_scope == AuthScope::kAll && config.auth_token_file.empty()) {
    return absl::InvalidArgumentError("--auth-scope=all requires --auth-token-file");
  }
  if (config.max_inflight_per_stream == 0) {
    return absl::InvalidArgumentError("--max-inflight-per-stream: must be at least 1");
  }
  if (config.max_inflight_batches == 0) {
    return absl::InvalidArgumentError("--max-inflight-batches: must be at least 1");
  }
  if (config.inline_batch_rows < -1 || config.inline_batch_rows > kMaxInlineBatchRows) {
    return absl::InvalidArgumentError(
        absl::StrCat("--inline-batch-rows: ", config.inline_batch_rows, " is outside [-1, ",
                     kMaxInlineBatchRows, "]"));
  }
  if (!(config.drain_timeout_seconds >= 0)) {
    return absl::InvalidArgumentError("--drain-timeout: must be >= 0 seconds");
  }
  if (config.max_concurrent_builds == 0) {
    return absl::InvalidArgumentError("--max-concurrent-builds: must be at least 1");
  }
  if (config.max_aggregate_groups == 0 || config.max_aggregate_groups > 0xffffffffull) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--max-aggregate-groups: ", config.max_aggregate_groups, " is outside [1, 4294967295]"));
  }
  if (config.max_streams_per_connection == 0) {
    return absl::InvalidArgumentError("--max-streams-per-connection: must be at least 1");
  }
  if (!(config.drain_grace_seconds >= 0 && config.drain_grace_seconds <= 300)) {
    return absl::InvalidArgumentError("--drain-grace: must be within [0, 300] seconds");
  }
  return std::optional<ServerConfig>(std::move(config));
}

}  // namespace gpujoin::server
