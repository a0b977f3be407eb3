// One measured setting of the load tester: `concurrency` streams spread over the
// given clients (connections), each keeping up to `in_flight` batches outstanding,
// a warm-up, then a bounded measurement window, then a drain; optionally with
// Mutate streams beside them, measured apart (RunMixedSetting). Every answer is
// checked (structure always; values for every `verify_every`-th batch of a
// stream); a wrong answer or an error is counted, never averaged away.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "gpujoin/client/client.hpp"
#include "workload.hpp"

namespace gpujoin::loadtest {

/// Where the requests go: gpujoind, the in-process echo service, or a Redis
/// server holding the same mapping (lookups as MGETs, RunConfig::redis_address).
enum class Target { kServer, kEcho, kRedis };

/// "server", "echo" or "redis".
const char* TargetName(Target target);

/// How each setting runs.
struct RunConfig {
  WorkloadSpec workload;
  std::string index;              ///< index name (lookup and join)
  int in_flight = 2;              ///< batches outstanding per stream (>= 1)
  double warmup_seconds = 1.0;    ///< answers in this phase are checked, not counted
  double duration_seconds = 5.0;  ///< measurement window (an upper bound with `requests`)
  uint64_t requests = 0;          ///< > 0: stop after this many measured answers
  int verify_every = 4;           ///< full value check of every n-th batch per stream (>= 1)
  double drain_seconds = 30.0;    ///< extra deadline for streams after the window
  /// Target::kRedis: host:port of the Redis server, loaded with the mapping
  /// (LoadIntoRedis); each stream is one connection of its own.
  std::string redis_address;
};

/// Latency percentiles of the measured batches, in milliseconds.
struct LatencySummary {
  uint64_t count = 0;
  double p50_ms = 0, p90_ms = 0, p99_ms = 0, p999_ms = 0, max_ms = 0, mean_ms = 0;
};

/// Computes the summary of `samples` (nanoseconds; reordered in place). Percentile
/// p is the smallest sample with at least p % of the samples at or below it.
LatencySummary Summarize(std::vector<int64_t>& samples);

/// What one setting measured.
struct SettingResult {
  Target target = Target::kServer;
  Rpc rpc = Rpc::kLookup;
  uint64_t batch_rows = 0;
  int concurrency = 0;
  int channels = 0;  ///< connections (Redis: one per stream)
  int in_flight = 0;
  double seconds = 0;           ///< measurement window actually used
  uint64_t batches = 0;         ///< answered successfully within the window
  uint64_t keys = 0;            ///< rows of those batches
  uint64_t pairs = 0;           ///< join: pairs answered in those batches
  uint64_t request_bytes = 0;   ///< payload bytes sent (columns) for those batches
  uint64_t response_bytes = 0;  ///< payload bytes received (columns)
  LatencySummary latency;
  /// By gRPC code name (WRONG_ANSWER for answers that failed a check), whole run
  /// including the warm-up.
  std::map<std::string, uint64_t> errors;
  uint64_t wrong_answers = 0;  ///< answers that failed a check (whole run)
  uint64_t checked = 0;        ///< answers checked value by value
  std::string first_wrong;     ///< description of the first wrong answer
  std::string first_error;     ///< message of the first error

  double BatchesPerSecond() const { return seconds > 0 ? batches / seconds : 0; }
  double KeysPerSecond() const { return seconds > 0 ? keys / seconds : 0; }
  double PairsPerSecond() const { return seconds > 0 ? pairs / seconds : 0; }
  double RequestMBps() const { return seconds > 0 ? request_bytes / seconds / 1e6 : 0; }
  double ResponseMBps() const { return seconds > 0 ? response_bytes / seconds / 1e6 : 0; }
  uint64_t ErrorCount() const;
};

/// Runs one setting. Stream i uses clients[i % clients.size()] (Target::kRedis:
/// a connection of its own to config.redis_address; `clients` may be empty).
/// Never throws; RPC and connection failures are counted in `errors` and the
/// stream is restarted while the window is open.
SettingResult RunSetting(Target target, std::span<client::Client* const> clients,
                         const BatchPool& pool, int concurrency, const RunConfig& config);

/// Runs one setting of `concurrency` streams of `pool` (config.workload.rpc)
/// with `mutate_streams` Mutate streams of `mutations` (a pool of
/// Rpc::kMutate) beside them in the same window (--mutate-streams), and
/// returns one result per RPC: the pool's, then Mutate's (none without mutate
/// streams). --requests counts the pool's answers only. The Mutate streams
/// follow the others in the numbering of streams over the clients. Redis runs
/// lookups only, without Mutate streams: other RPCs are counted as
/// UNIMPLEMENTED errors.
std::vector<SettingResult> RunMixedSetting(Target target, std::span<client::Client* const> clients,
                                           const BatchPool& pool, int concurrency,
                                           const BatchPool* mutations, int mutate_streams,
                                           const RunConfig& config);

}  // namespace gpujoin::loadtest
