// gpujoind configuration: command-line flags and their parsing.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "gpujoin/engine/backend.hpp"
#include "gpujoin/engine/hash_index.hpp"
#include "gpujoin/engine/partition.hpp"
#include "gpujoin/server/logging.hpp"

namespace gpujoin::server {

/// The default --max-result-bytes cap (the resolved default is the smaller of
/// this and an eighth of the host's physical memory).
inline constexpr uint64_t kDefaultMaxResultBytes = uint64_t{4} << 30;

/// The default --max-copy-bytes: the most bytes the copies SaveIndex writes
/// under --data-dir may take together.
inline constexpr uint64_t kDefaultMaxCopyBytes = uint64_t{16} << 30;

/// The default --max-pending-response-bytes cap (the resolved default is the
/// smaller of this and an eighth of the host's physical memory).
inline constexpr uint64_t kDefaultMaxPendingResponseBytes = uint64_t{2} << 30;

/// Largest accepted --inline-batch-rows: bigger batches would hold a gRPC thread
/// for milliseconds.
inline constexpr int64_t kMaxInlineBatchRows = int64_t{1} << 16;

/// The default --wal-compact-bytes: the size of an index's write-ahead log past
/// which the server rewrites the index's snapshot and compacts the log.
inline constexpr uint64_t kDefaultWalCompactBytes = uint64_t{64} << 20;

/// How a mutable index's write-ahead log (`<name>.gjwal` under --data-dir)
/// makes a Mutate batch durable before the batch is acknowledged (--wal-sync;
/// docs/operations.md, "Write-ahead log format").
struct WalSyncPolicy {
  enum class Mode {
    /// Every acknowledgement waits for an fsync covering its batch; callers
    /// waiting at once share one fsync (group commit).
    kAlways,
    /// A thread of the log fsyncs at most every `batch_ms` milliseconds while
    /// something was appended; acknowledgements wait for it (more batches per
    /// fsync, up to `batch_ms` more latency, nothing acknowledged is lost).
    kBatch,
    /// Never fsync batches: acknowledged once written to the OS. A process crash
    /// loses nothing; an OS crash or power loss may lose recent batches.
    kOff,
  };
  Mode mode = Mode::kAlways;
  /// kBatch: the most milliseconds between two fsyncs, 1 to kMaxWalBatchMs.
  uint32_t batch_ms = 0;

  /// "always", "batch-ms:N" or "off": the flag's text, which ParseWalSync reads back.
  std::string ToString() const;
  bool operator==(const WalSyncPolicy&) const = default;
};

/// The largest N of --wal-sync=batch-ms:N (ten seconds).
inline constexpr uint32_t kMaxWalBatchMs = 10000;

/// Parses --wal-sync: exactly "always", "batch-ms:N" (N decimal digits, 1 <= N
/// <= kMaxWalBatchMs) or "off"; INVALID_ARGUMENT naming --wal-sync otherwise.
absl::StatusOr<WalSyncPolicy> ParseWalSync(std::string_view text);

/// Most devices --devices may name.
inline constexpr size_t kMaxDevices = 64;

/// Parses --devices: "all" (sets *all) or distinct device numbers "0,2,..."
/// (each in [0, kMaxDevices), at most kMaxDevices of them); INVALID_ARGUMENT
/// naming --devices otherwise.
absl::StatusOr<std::vector<int>> ParseDevices(std::string_view text, bool* all);

/// Which calls --auth-token-file protects (--auth-scope).
enum class AuthScope {
  kRpc,  ///< the gpujoin.v1.GpuJoin calls; health, reflection and /metrics stay open
  kAll,  ///< also reflection and /metrics; health stays open for load balancers
};

/// Everything gpujoind can be told on its command line.
struct ServerConfig {
  std::string listen = "127.0.0.1:50051";         ///< gRPC address; port 0 picks a free port
  std::string metrics_listen = "127.0.0.1:9464";  ///< Prometheus /metrics; "" or "none" = off
  engine::BackendKind backend = engine::BackendKind::kAuto;
  /// Index memory budget in bytes; 0 = 80% of the device's free memory at startup.
  uint64_t device_memory_limit = 0;
  /// Largest gRPC message accepted or sent, in bytes.
  uint64_t max_message_bytes = 256ull << 20;
  std::string tls_cert;  ///< PEM certificate chain file (with tls_key: serve TLS)
  std::string tls_key;   ///< PEM private key file
  /// PEM CA certificate(s); with tls_cert, clients must present a certificate
  /// they signed (mutual TLS). Empty = clients are not asked for one.
  std::string tls_client_ca;
  std::string auth_token_file;             ///< file holding the bearer token; empty = no auth
  AuthScope auth_scope = AuthScope::kRpc;  ///< what the token protects (with auth_token_file)
  LogLevel log_level = LogLevel::kInfo;
  /// Batches of one stream being processed at once; further reads wait (flow control).
  uint32_t max_inflight_per_stream = 8;
  /// Batches being processed at once over all streams; beyond it a batch gets an
  /// in-band RESOURCE_EXHAUSTED error.
  uint32_t max_inflight_batches = 256;
  /// Executor threads running engine work; 0 = a default per backend: the core
  /// count (at least 2) for the CPU backend, the core count clamped to [2, 16] for
  /// the CUDA backend (its workers spin while waiting on the GPU, and it keeps at
  /// most 16 idle stream contexts; more threads measured far slower).
  uint32_t executor_threads = 0;
  /// Lookup/Join batches whose rows (and join pair capacity) are at most this
  /// many run on the gRPC thread that read them instead of being handed to an
  /// executor thread (saves a thread wake-up per small batch). -1 = a default per
  /// backend: 4096 for the CPU backend, 0 (never) for the CUDA backend, which
  /// never runs GPU work on a gRPC thread and so ignores positive values.
  int64_t inline_batch_rows = -1;
  /// CPU backend worker threads; 0 = hardware concurrency.
  uint32_t cpu_threads = 0;
  /// Most BuildIndex streams open at once (RESOURCE_EXHAUSTED beyond).
  uint32_t max_concurrent_builds = 16;
  /// --shard I/N: this gpujoind serves shard I of N behind a gpujoin-router and
  /// refuses keys of other shards (docs/operations.md "Sharding"); 0/1 = all keys.
  engine::ShardIdentity shard;
  /// --devices: the devices this gpujoind serves. Empty = one, the CUDA
  /// backend's device 0 (or the host). One entry = that CUDA device. Two or
  /// more = a device group: every index partitioned over them as over the
  /// shards of a router (docs/operations.md, "Several devices"); with the CPU
  /// backend they are host devices, numbered from 0. ParseServerFlags fills it
  /// from "0,1,..." or, with all_devices, Server::Start from the CUDA devices.
  std::vector<int> devices;
  /// --devices all: every visible CUDA device.
  bool all_devices = false;
  /// Most groups one Aggregate stream may ask for (RESOURCE_EXHAUSTED above).
  uint64_t max_aggregate_groups = uint64_t{1} << 22;
  /// Most distinct values a string or binary payload column's resident
  /// dictionary may hold: a build keeps one for every such column with at most
  /// this many, a Mutate that brings more retires it; 0 = no dictionaries.
  uint64_t dictionary_max_values = uint64_t{1} << 16;
  /// Build input (received chunks) all open builds may hold at once, in host
  /// memory; 0 = a quarter of the host's physical memory (resolved by Server::Start).
  uint64_t max_staged_bytes = 0;
  /// Build input one build may hold; 0 = max_staged_bytes.
  uint64_t max_build_staged_bytes = 0;
  /// Host bytes one Lookup batch or Join request may hold as results before they
  /// are sent (pairs, found, probes and gathered payload columns); above it
  /// RESOURCE_EXHAUSTED naming --max-result-bytes. 0 = the smaller of an eighth of
  /// the host's physical memory and 4 GiB (resolved by Server::Start; Operations
  /// reads an unresolved 0 as 4 GiB).
  uint64_t max_result_bytes = 0;
  /// Upsert rows plus delete rows one Mutate batch may carry (--max-mutation-rows);
  /// beyond it the batch is RESOURCE_EXHAUSTED naming the flag.
  uint64_t max_mutation_rows = 4194304;
  /// Host bytes the responses of all streams (Lookup, Join, Aggregate, Hash)
  /// together may hold while they wait to be written to clients that read slowly
  /// or not at all; a batch whose response would pass it is answered in-band with
  /// RESOURCE_EXHAUSTED naming --max-pending-response-bytes. A stream stops
  /// reading new batches while its responses waiting behind the one being
  /// written hold max_message_bytes or more. A response larger than the whole limit is still sent when no other
  /// response is held (alone). 0 = the smaller of an eighth of the host's
  /// physical memory and 2 GiB (resolved by Server::Start).
  uint64_t max_pending_response_bytes = 0;
  /// Streaming calls (BuildIndex, Lookup, Join, Aggregate, Hash) open at once on
  /// one client connection (RESOURCE_EXHAUSTED beyond).
  uint32_t max_streams_per_connection = 64;
  /// CUDA backend switches (--cuda-build-path, --cuda-build-transient-max-bytes,
  /// --cuda-spin-wait, --cuda-wait-poll-us, --cuda-join-graphs,
  /// --cuda-aggregate-graphs, --cuda-plan-graphs; docs/operations.md). cpu_threads and the device
  /// ordinal are set by Server::Start.
  engine::BackendOptions backend_options;
  /// Longest graceful drain on SIGTERM/SIGINT before remaining calls are cancelled.
  double drain_timeout_seconds = 30;
  /// On SIGTERM/SIGINT, seconds the server keeps listening with health
  /// NOT_SERVING (so that load balancers see it) before the listener closes and
  /// the drain begins counting.
  double drain_grace_seconds = 1;
  /// --data-dir: where index snapshots live (docs/operations.md "Snapshots");
  /// empty = no snapshots (off).
  std::string data_dir;
  /// --max-snapshot-bytes: most bytes the data dir's files may take (a write
  /// that would pass it fails and is counted); 0 = no limit.
  uint64_t max_snapshot_bytes = 0;
  /// --max-copy-bytes: most bytes the copies SaveIndex writes (files under
  /// --data-dir that are not `<index>.gjsnap`) may take together; 0 = no limit.
  uint64_t max_copy_bytes = kDefaultMaxCopyBytes;
  /// --wal-sync: how Mutate batches are made durable in the index's write-ahead
  /// log before they are acknowledged (with data_dir; without it nothing is logged).
  WalSyncPolicy wal_sync;
  /// --wal-compact-bytes: an index's write-ahead log growing past this many
  /// bytes makes the server rewrite the index's snapshot in the background and
  /// compact the log (at least 1).
  uint64_t wal_compact_bytes = kDefaultWalCompactBytes;
  /// --snapshot-test-write-delay-ms (tests only): sleep this long after every
  /// MiB of a snapshot written.
  uint32_t snapshot_test_write_delay_ms = 0;
  /// --snapshot-test-load-delay-ms (tests only): sleep this long before each
  /// snapshot of the start-up load.
  uint32_t snapshot_test_load_delay_ms = 0;
  /// --test-fatal-device (tests only, with --devices and the cpu backend's
  /// --test-fatal-after-runs, backend_options.test_fatal_after_runs): the one
  /// device whose backend fails; -1 = every device.
  int test_fatal_device = -1;
};

/// The executor size for `backend` (kCpu or kCuda, as resolved from kAuto) on a
/// host with `cores` hardware threads: `config.executor_threads` when set, else
/// max(2, cores) for the CPU backend and cores clamped to [2, 16] for the CUDA
/// backend.
uint32_t ResolveExecutorThreads(const ServerConfig& config, engine::BackendKind backend,
                                uint32_t cores);

/// The inline threshold for `backend` (resolved): `config.inline_batch_rows` when
/// >= 0, else 4096 for the CPU backend; always 0 for the CUDA backend (GPU work
/// never runs on a gRPC thread).
uint32_t ResolveInlineBatchRows(const ServerConfig& config, engine::BackendKind backend);

/// --max-pending-response-bytes as served on a host of `physical_bytes` of memory
/// (0 = unknown): `config.max_pending_response_bytes` when set, else the smaller
/// of an eighth of `physical_bytes` and kDefaultMaxPendingResponseBytes.
uint64_t ResolveMaxPendingResponseBytes(const ServerConfig& config, uint64_t physical_bytes);

/// The host's physical memory in bytes (4 GiB when the system cannot tell).
uint64_t PhysicalMemoryBytes();

/// `config` with the host-memory limits whose defaults come from the host's
/// size resolved for a host of `physical_bytes` shared by `shares` servers
/// (a device group's parts; 1 alone): --max-staged-bytes (a quarter),
/// --max-result-bytes and --max-pending-response-bytes (an eighth, at most
/// their caps), each divided among the shares; --max-build-staged-bytes at
/// most --max-staged-bytes. Limits given on the command line are kept.
ServerConfig ResolveHostLimits(const ServerConfig& config, uint64_t physical_bytes,
                               uint32_t shares);

/// Parses a byte count: digits with an optional binary suffix K, M, G or T (also
/// KB/KiB, ...; case-insensitive), e.g. "512M" = 512 * 2^20. INVALID_ARGUMENT naming
/// `flag` for malformed values or overflow.
absl::StatusOr<uint64_t> ParseByteSize(std::string_view text, std::string_view flag);

/// Parses gpujoind's flags. Returns std::nullopt after printing help or the version
/// to `out` (the caller exits 0); INVALID_ARGUMENT for bad flags or values.
absl::StatusOr<std::optional<ServerConfig>> ParseServerFlags(int argc, const char* const* argv,
                                                             std::ostream& out);

}  // namespace gpujoin::server
