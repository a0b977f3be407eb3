// gpujoind configuration: command-line flags and their parsing.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "gpujoin/engine/hash_index.hpp"
#include "gpujoin/server/logging.hpp"

namespace gpujoin::server {

/// Everything gpujoind can be told on its command line.
struct ServerConfig {
  std::string listen = "127.0.0.1:50051";        ///< gRPC address; port 0 picks a free port
  std::string metrics_listen = "127.0.0.1:9464";  ///< Prometheus /metrics; "" or "none" = off
  engine::BackendKind backend = engine::BackendKind::kAuto;
  /// Index memory budget in bytes; 0 = 80% of the device's free memory at startup.
  uint64_t device_memory_limit = 0;
  /// Largest gRPC message accepted or sent, in bytes.
  uint64_t max_message_bytes = 256ull << 20;
  std::string tls_cert;         ///< PEM certificate chain file (with tls_key: serve TLS)
  std::string tls_key;          ///< PEM private key file
  std::string auth_token_file;  ///< file holding the bearer token; empty = no auth
  LogLevel log_level = LogLevel::kInfo;
  /// Batches of one stream being processed at once; further reads wait (flow control).
  uint32_t max_inflight_per_stream = 8;
  /// Batches being processed at once over all streams; beyond it a batch gets an
  /// in-band RESOURCE_EXHAUSTED error.
  uint32_t max_inflight_batches = 256;
  /// Executor threads running engine work; 0 = hardware concurrency (at least 2).
  uint32_t executor_threads = 0;
  /// CPU backend worker threads; 0 = hardware concurrency.
  uint32_t cpu_threads = 0;
  /// Longest graceful drain on SIGTERM/SIGINT before remaining calls are cancelled.
  double drain_timeout_seconds = 30;
};

/// Parses a byte count: digits with an optional binary suffix K, M, G or T (also
/// KB/KiB, ...; case-insensitive), e.g. "512M" = 512 * 2^20. INVALID_ARGUMENT naming
/// `flag` for malformed values or overflow.
absl::StatusOr<uint64_t> ParseByteSize(std::string_view text, std::string_view flag);

/// Parses gpujoind's flags. Returns std::nullopt after printing help or the version
/// to `out` (the caller exits 0); INVALID_ARGUMENT for bad flags or values.
absl::StatusOr<std::optional<ServerConfig>> ParseServerFlags(int argc, const char* const* argv,
                                                             std::ostream& out);

}  // namespace gpujoin::server
