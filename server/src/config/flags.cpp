// gpujoind's command line: the flags by group (service and security,
// concurrency, the CUDA backend, limits, --data-dir and its write-ahead logs),
// then their text values parsed and every flag checked, in that order.
#include <optional>
#include <ostream>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "gpujoin/engine/backend.hpp"
#include "gpujoin/server/config.hpp"

namespace gpujoin::server {
namespace {

// The flags that CLI11 reads as text and ParseServerFlags parses afterwards.
struct FlagText {
  std::string backend = "auto";
  std::string memory_limit, max_message;
  std::string log_level = "info";
  std::string auth_scope = "rpc";
  std::string cuda_build_path = "auto";
  std::string cuda_transient_max;
  std::string staged, build_staged, max_result, max_pending;
  std::string max_snapshot, max_copy;
  std::string wal_sync, wal_compact;
  std::string shard;
  std::string devices;
  CLI::Option* devices_option = nullptr;  // given at all (an empty list is refused)
  bool version = false;
};

// Addresses, backend, memory budget, message size, TLS, auth and logging.
void AddServiceFlags(CLI::App& app, ServerConfig& config, FlagText& text) {
  app.add_option("--listen", config.listen, "gRPC listen address (port 0 = any free port)")
      ->capture_default_str();
  app.add_option("--metrics-listen", config.metrics_listen,
                 "Prometheus /metrics address; empty or \"none\" disables it")
      ->capture_default_str();
  app.add_option("--backend", text.backend, "Engine backend: auto, cuda or cpu")
      ->capture_default_str();
  app.add_option(
      "--device-memory-limit", text.memory_limit,
      "Index memory budget in bytes (K/M/G/T suffixes); default 80% of free device memory");
  app.add_option("--max-message-bytes", text.max_message,
                 "Largest gRPC message in bytes (K/M/G suffixes); default 256M");
  app.add_option("--tls-cert", config.tls_cert, "PEM certificate chain; with --tls-key serves TLS");
  app.add_option("--tls-key", config.tls_key, "PEM private key for --tls-cert");
  app.add_option("--tls-client-ca", config.tls_client_ca,
                 "PEM CA certificate(s): clients must present a certificate signed by one "
                 "(mutual TLS; needs --tls-cert)");
  app.add_option("--auth-token-file", config.auth_token_file,
                 "File holding a bearer token that every GpuJoin call must present");
  app.add_option("--auth-scope", text.auth_scope,
                 "What --auth-token-file protects: rpc (the GpuJoin calls) or all (also "
                 "reflection and /metrics); health stays open")
      ->capture_default_str();
  app.add_option("--log-level", text.log_level, "debug, info, warning or error")
      ->capture_default_str();
}

// Batches in flight, executor and CPU threads, drain timeout.
void AddConcurrencyFlags(CLI::App& app, ServerConfig& config) {
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
}

// The CUDA backend's options.
void AddCudaFlags(CLI::App& app, ServerConfig& config, FlagText& text) {
  app.add_option("--cuda-build-path", text.cuda_build_path,
                 "CUDA build path: auto (by size), direct or tiles (same results)")
      ->capture_default_str();
  app.add_option("--cuda-build-transient-max-bytes", text.cuda_transient_max,
                 "Most transient device memory one CUDA build may take (e.g. 2GiB; unset = no "
                 "cap); a tile build that would need more inserts directly");
  app.add_flag("--cuda-spin-wait", config.backend_options.cuda_spin_wait,
               "Spin a core per waiting request instead of sleeping on the GPU");
  app.add_option("--cuda-wait-poll-us", config.backend_options.cuda_wait_poll_us,
                 "Microseconds to poll for GPU completion before sleeping (0 = sleep at once)")
      ->capture_default_str();
  app.add_option("--cuda-join-graphs", config.backend_options.cuda_join_graphs,
                 "Capture repeated small join batches as CUDA Graphs (true/false)")
      ->capture_default_str();
  app.add_option("--cuda-aggregate-graphs", config.backend_options.cuda_aggregate_graphs,
                 "Capture repeated small aggregations as CUDA Graphs (true/false)")
      ->capture_default_str();
  app.add_option("--cuda-plan-graphs", config.backend_options.cuda_plan_graphs,
                 "Capture repeated small Query plan batches as CUDA Graphs (true/false)")
      ->capture_default_str();
}

// Builds, aggregates, host memory of staged input, results and responses,
// streams per connection, drain grace.
void AddLimitFlags(CLI::App& app, ServerConfig& config, FlagText& text) {
  app.add_option("--max-concurrent-builds", config.max_concurrent_builds,
                 "Most BuildIndex streams open at once (each holds its staged input); beyond "
                 "it RESOURCE_EXHAUSTED")
      ->capture_default_str();
  app.add_option("--max-mutation-rows", config.max_mutation_rows,
                 "Upsert rows plus delete rows one Mutate batch may carry; above it "
                 "RESOURCE_EXHAUSTED")
      ->check(CLI::Range(uint64_t{1}, uint64_t{0x7fffffff}))
      ->capture_default_str();
  app.add_option("--max-aggregate-groups", config.max_aggregate_groups,
                 "Most groups one Aggregate stream may ask for; above it RESOURCE_EXHAUSTED")
      ->capture_default_str();
  app.add_option("--shard", text.shard,
                 "I/N: serve shard I of N behind gpujoin-router, refusing keys of other shards "
                 "(FAILED_PRECONDITION); default: every key");
  text.devices_option = app.add_option("--devices", text.devices,
                 "Devices to serve: all, or device numbers such as 0,1 (host devices with the "
                 "cpu backend); two or more partition every index over them; default: one");
  app.add_option("--dictionary-max-values", config.dictionary_max_values,
                 "Most distinct values of a string or binary payload column that a build keeps "
                 "a resident dictionary for (Query groups by its codes); 0 = none")
      ->check(CLI::Range(uint64_t{0}, uint64_t{0xfffffffe}))
      ->capture_default_str();
  app.add_option("--max-staged-bytes", text.staged,
                 "Build input all open builds may hold in host memory (K/M/G/T suffixes); "
                 "default a quarter of physical memory; beyond it RESOURCE_EXHAUSTED");
  app.add_option("--max-build-staged-bytes", text.build_staged,
                 "Build input one build may hold (K/M/G/T suffixes); default "
                 "--max-staged-bytes");
  app.add_option("--max-result-bytes", text.max_result,
                 "Host bytes one Lookup batch or Join request may hold as results (pairs, "
                 "found, probes, gathered payload columns; K/M/G/T suffixes); default the "
                 "smaller of an eighth of physical memory and 4G; beyond it RESOURCE_EXHAUSTED");
  app.add_option("--max-pending-response-bytes", text.max_pending,
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
}

// Snapshots and write-ahead logs under --data-dir.
void AddDataDirFlags(CLI::App& app, ServerConfig& config, FlagText& text) {
  app.add_option("--data-dir", config.data_dir,
                 "Directory of index snapshots: each build writes <name>.gjsnap in the "
                 "background, start-up loads them all (unset = off)");
  app.add_option("--max-snapshot-bytes", text.max_snapshot,
                 "Most bytes the --data-dir files may take (K/M/G/T suffixes); a snapshot "
                 "write that would pass it fails and is counted; unset = no limit");
  app.add_option("--max-copy-bytes", text.max_copy,
                 "Most bytes the copies SaveIndex writes under --data-dir (files other than "
                 "<index>.gjsnap) may take together; 0 = no limit")
      ->default_str("16G");
  app.add_option("--wal-sync", text.wal_sync,
                 "How Mutate batches are made durable in the index's write-ahead log "
                 "(<name>.gjwal) before they are acknowledged: always (fsync, shared by "
                 "concurrent batches), batch-ms:N (one fsync at most every N ms, 1..10000; "
                 "up to N ms more latency), off (no fsync: an OS crash or power loss may lose "
                 "acknowledged batches); needs --data-dir")
      ->default_str("always");
  app.add_option("--wal-compact-bytes", text.wal_compact,
                 "An index's write-ahead log growing past this many bytes (K/M/G/T suffixes) "
                 "makes the server rewrite the index's snapshot in the background and compact "
                 "the log; needs --data-dir")
      ->default_str("64M");
  app.add_option("--snapshot-test-write-delay-ms", config.snapshot_test_write_delay_ms,
                 "Tests only: sleep this many ms after every MiB of a snapshot written")
      ->group("");
  app.add_option("--snapshot-test-load-delay-ms", config.snapshot_test_load_delay_ms,
                 "Tests only: sleep this many ms before each snapshot loaded at start")
      ->group("");
  app.add_option("--test-fatal-after-runs", config.backend_options.test_fatal_after_runs,
                 "Tests only (cpu backend): after this many graph runs the backend fails as "
                 "after a sticky device error")
      ->group("");
  app.add_option("--test-fatal-device", config.test_fatal_device,
                 "Tests only, with --devices: the device --test-fatal-after-runs applies to")
      ->group("");
}

// A byte-size flag given as text: parsed into `target` when set.
struct ByteFlag {
  const std::string* text;
  const char* flag;
  uint64_t* target;
  bool at_least_one;    // 0 is refused ("must be at least 1")
  bool needs_data_dir;  // refused without --data-dir
};

// The byte sizes, in the order they are checked.
absl::Status ParseByteFlags(const FlagText& text, ServerConfig& config) {
  const ByteFlag flags[] = {
      {&text.memory_limit, "--device-memory-limit", &config.device_memory_limit, false, false},
      {&text.staged, "--max-staged-bytes", &config.max_staged_bytes, true, false},
      {&text.build_staged, "--max-build-staged-bytes", &config.max_build_staged_bytes, true, false},
      {&text.max_result, "--max-result-bytes", &config.max_result_bytes, true, false},
      {&text.max_pending, "--max-pending-response-bytes", &config.max_pending_response_bytes, true,
       false},
      {&text.max_snapshot, "--max-snapshot-bytes", &config.max_snapshot_bytes, false, true},
      {&text.max_copy, "--max-copy-bytes", &config.max_copy_bytes, false, true},
      {&text.wal_compact, "--wal-compact-bytes", &config.wal_compact_bytes, true, true},
  };
  for (const ByteFlag& f : flags) {
    if (f.text->empty()) continue;
    auto bytes = ParseByteSize(*f.text, f.flag);
    if (!bytes.ok()) return bytes.status();
    if (f.at_least_one && *bytes == 0) {
      return absl::InvalidArgumentError(absl::StrCat(f.flag, ": must be at least 1"));
    }
    if (f.needs_data_dir && config.data_dir.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(f.flag, " requires --data-dir"));
    }
    *f.target = *bytes;
  }
  if (!text.max_message.empty()) {
    auto bytes = ParseByteSize(text.max_message, "--max-message-bytes");
    if (!bytes.ok()) return bytes.status();
    if (*bytes < 4096 || *bytes > (2ull << 30) - 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--max-message-bytes: ", *bytes, " is outside [4096, 2147483647] (gRPC's int limit)"));
    }
    config.max_message_bytes = *bytes;
  }
  return absl::OkStatus();
}

// --wal-sync (only beside --data-dir: without it there is no log), --shard and --devices.
absl::Status ParseWalFlags(const FlagText& text, ServerConfig& config) {
  if (!text.shard.empty()) {
    auto shard = engine::ParseShardIdentity(text.shard, "--shard");
    if (!shard.ok()) return shard.status();
    config.shard = *shard;
  }
  if (text.devices_option != nullptr && text.devices_option->count() > 0) {
    auto devices = ParseDevices(text.devices, &config.all_devices);
    if (!devices.ok()) return devices.status();
    config.devices = *std::move(devices);
    if (config.shard.sharded() && (config.all_devices || config.devices.size() > 1)) {
      return absl::InvalidArgumentError(
          "--devices with two or more devices and --shard: a shard serves one device (run one "
          "gpujoind --shard I/N per device behind the router instead)");
    }
  }
  if (text.wal_sync.empty()) return absl::OkStatus();
  auto policy = ParseWalSync(text.wal_sync);
  if (!policy.ok()) return policy.status();
  if (config.data_dir.empty()) return absl::InvalidArgumentError("--wal-sync requires --data-dir");
  config.wal_sync = *policy;
  return absl::OkStatus();
}

// --cuda-build-path, --cuda-build-transient-max-bytes and --cuda-wait-poll-us.
absl::Status ParseCudaFlags(const FlagText& text, engine::BackendOptions& cuda) {
  if (text.cuda_build_path == "auto") {
    cuda.cuda_build_path = engine::CudaBuildPath::kAuto;
  } else if (text.cuda_build_path == "direct") {
    cuda.cuda_build_path = engine::CudaBuildPath::kDirect;
  } else if (text.cuda_build_path == "tiles") {
    cuda.cuda_build_path = engine::CudaBuildPath::kTiles;
  } else {
    return absl::InvalidArgumentError(absl::StrCat("--cuda-build-path: '", text.cuda_build_path,
                                                   "' is not auto, direct or tiles"));
  }
  if (!text.cuda_transient_max.empty()) {
    auto bytes = ParseByteSize(text.cuda_transient_max, "--cuda-build-transient-max-bytes");
    if (!bytes.ok()) return bytes.status();
    cuda.cuda_build_transient_max_bytes = *bytes;
  }
  if (cuda.cuda_wait_poll_us > 1000000) {
    return absl::InvalidArgumentError(absl::StrCat("--cuda-wait-poll-us: ", cuda.cuda_wait_poll_us,
                                                   " is over 1000000 (one second)"));
  }
  return absl::OkStatus();
}

// /metrics, TLS and the auth scope.
absl::Status ParseSecurityFlags(const FlagText& text, ServerConfig& config) {
  if (config.metrics_listen == "none") config.metrics_listen.clear();
  if (config.tls_cert.empty() != config.tls_key.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key must be given together");
  }
  if (!config.tls_client_ca.empty() && config.tls_cert.empty()) {
    return absl::InvalidArgumentError(
        "--tls-client-ca requires --tls-cert and --tls-key (client certificates are checked in "
        "the TLS handshake)");
  }
  if (text.auth_scope == "rpc") {
    config.auth_scope = AuthScope::kRpc;
  } else if (text.auth_scope == "all") {
    config.auth_scope = AuthScope::kAll;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--auth-scope: '", text.auth_scope, "' is not rpc or all"));
  }
  if (config.auth_scope == AuthScope::kAll && config.auth_token_file.empty()) {
    return absl::InvalidArgumentError("--auth-scope=all requires --auth-token-file");
  }
  return absl::OkStatus();
}

// The ranges of the numeric limits.
absl::Status CheckLimits(const ServerConfig& config) {
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
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::optional<ServerConfig>> ParseServerFlags(int argc, const char* const* argv,
                                                             std::ostream& out) {
  ServerConfig config;
  FlagText text;
  CLI::App app{"gpujoind: GPU-resident hash indexes served over gRPC", "gpujoind"};
  // A repeated flag takes its last value (wrappers can append overrides).
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  // Added in this order, which is --help's.
  AddServiceFlags(app, config, text);
  AddConcurrencyFlags(app, config);
  AddCudaFlags(app, config, text);
  AddLimitFlags(app, config, text);
  AddDataDirFlags(app, config, text);
  app.add_flag("--version", text.version, "Print the version and exit");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    out << app.help();
    return std::optional<ServerConfig>();
  } catch (const CLI::ParseError& e) {
    return absl::InvalidArgumentError(e.what());
  }
  if (text.version) {
    out << "gpujoind " << GPUJOIN_VERSION << "\n";
    return std::optional<ServerConfig>();
  }

  auto kind = engine::ParseBackendKind(text.backend);
  if (!kind.ok()) return kind.status();
  config.backend = *kind;
  auto level = ParseLogLevel(text.log_level);
  if (!level.ok()) return level.status();
  config.log_level = *level;
  absl::Status s = ParseByteFlags(text, config);
  if (s.ok()) s = ParseWalFlags(text, config);
  if (s.ok() && config.all_devices && config.backend == engine::BackendKind::kCpu) {
    s = absl::InvalidArgumentError(
        "--devices all: the cpu backend has no devices to count; name host devices such as "
        "--devices 0,1");
  }
  if (s.ok()) s = ParseCudaFlags(text, config.backend_options);
  if (s.ok()) s = ParseSecurityFlags(text, config);
  if (s.ok()) s = CheckLimits(config);
  if (s.ok() && config.listen.empty()) {
    s = absl::InvalidArgumentError("--listen: empty (give HOST:PORT; port 0 picks a free one)");
  }
  if (!s.ok()) return s;
  return std::optional<ServerConfig>(std::move(config));
}

}  // namespace gpujoin::server
