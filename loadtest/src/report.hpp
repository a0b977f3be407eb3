// Output of gpujoin-loadtest: a text table for people, JSON for machines. When a
// setting was measured against the server and the echo service or Redis, the
// server row carries the fraction of the echo throughput it reached and its
// latency and throughput over the others', and the table ends with one
// comparison line per setting.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "runner.hpp"

namespace gpujoin::loadtest {

/// Facts about the run printed above the table / stored at the top of the JSON.
struct RunHeader {
  std::string server;         ///< address, or "" for an echo-only run
  std::string redis;          ///< --redis address, or ""
  std::string redis_version;  ///< "redis 7.0.15" (RedisVersion), or ""
  std::string backend;        ///< the server's backend ("cpu", "cuda"), "" when unknown
  std::string device;         ///< the server's device name, "" when unknown
  std::string index;          ///< index used (lookup, join)
  uint64_t index_rows = 0;    ///< rows of the index the load tester built (0 = existing)
  std::string key_type;       ///< "uint32", "uint64", or the key columns' --key-type (lookup, join)
  std::string duplicates;     ///< the index's policy: "lowest_row" or "keep_all" (lookup, join)
  uint32_t multiplicity = 0;  ///< rows per key of the built index (0 = existing index)
  std::string join_kind;      ///< join: "inner", "left_outer", "left_semi", "left_anti"
  /// Lookups select the --payload columns (lt_int64 INT64, lt_tag STRING).
  bool payload = false;
  double hit_ratio = 0;
  uint32_t seed = 0;
  std::string aggregate;  ///< "sum over 1024 groups" for aggregate runs
  /// Mutate runs: "upserts only", or the Mutate streams beside the lookups.
  std::string mutate;
  std::string command_line;
};

/// Server keys/s over echo keys/s of the same setting, when both were measured.
std::optional<double> EchoFraction(const SettingResult& server,
                                   const std::vector<SettingResult>& all);

/// A server row's ratios to the same setting against the other targets; each
/// present only when that target was measured (and its denominator is > 0).
struct Comparison {
  std::optional<double> p50_over_echo;               ///< server p50 / echo p50
  std::optional<double> p50_over_redis;              ///< server p50 / redis p50
  std::optional<double> keys_per_second_over_redis;  ///< server keys/s / redis keys/s
};

/// The ratios of `server` (a Target::kServer row) to the rows of `all` with the
/// same setting (rpc, batch rows, concurrency, in flight); all empty for other rows.
Comparison Compare(const SettingResult& server, const std::vector<SettingResult>& all);

/// The human-readable table (one line per setting and target).
std::string FormatTable(const RunHeader& header, const std::vector<SettingResult>& results);

/// The JSON document: {"header": {...}, "results": [{...}, ...]}.
std::string FormatJson(const RunHeader& header, const std::vector<SettingResult>& results);

}  // namespace gpujoin::loadtest
