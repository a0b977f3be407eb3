#include "report.hpp"

#include <cstdio>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace gpujoin::loadtest {
namespace {

// 1234567 -> "1.23M" (decimal units, as throughput is usually quoted).
std::string Si(double v) {
  const char* units[] = {"", "K", "M", "G", "T"};
  int u = 0;
  while (v >= 1000 && u < 4) {
    v /= 1000;
    ++u;
  }
  return absl::StrFormat(v < 10 ? "%.2f%s" : v < 100 ? "%.1f%s" : "%.0f%s", v, units[u]);
}

std::string Rows(uint64_t n) {
  if (n >= (1u << 20) && n % (1u << 20) == 0) return absl::StrCat(n >> 20, "M");
  if (n >= (1u << 10) && n % (1u << 10) == 0) return absl::StrCat(n >> 10, "K");
  return absl::StrCat(n);
}

std::string Errors(const SettingResult& r) {
  if (r.errors.empty()) return "0";
  std::string out;
  for (const auto& [code, n] : r.errors)
    absl::StrAppend(&out, out.empty() ? "" : ",", code, ":", n);
  return out;
}

// Channels are not part of a setting: they follow from --channels for the gRPC
// targets, and Redis has one connection per stream.
bool SameSetting(const SettingResult& a, const SettingResult& b) {
  return a.rpc == b.rpc && a.batch_rows == b.batch_rows && a.concurrency == b.concurrency &&
         a.in_flight == b.in_flight;
}

// The row of `target` with the setting of `server`, or null.
const SettingResult* Counterpart(const SettingResult& server, Target target,
                                 const std::vector<SettingResult>& all) {
  if (server.target != Target::kServer) return nullptr;
  for (const SettingResult& r : all) {
    if (r.target == target && SameSetting(server, r)) return &r;
  }
  return nullptr;
}

std::optional<double> Ratio(double a, double b) {
  if (b > 0) return a / b;
  return std::nullopt;
}

// 1.31 -> "1.31x", 12.4 -> "12.4x".
std::string Times(double v) { return absl::StrFormat(v < 10 ? "%.2fx" : "%.1fx", v); }

}  // namespace

std::optional<double> EchoFraction(const SettingResult& server,
                                   const std::vector<SettingResult>& all) {
  const SettingResult* e = Counterpart(server, Target::kEcho, all);
  if (e == nullptr) return std::nullopt;
  return Ratio(server.KeysPerSecond(), e->KeysPerSecond());
}

Comparison Compare(const SettingResult& server, const std::vector<SettingResult>& all) {
  Comparison c;
  if (const SettingResult* e = Counterpart(server, Target::kEcho, all)) {
    c.p50_over_echo = Ratio(server.latency.p50_ms, e->latency.p50_ms);
  }
  if (const SettingResult* r = Counterpart(server, Target::kRedis, all)) {
    c.p50_over_redis = Ratio(server.latency.p50_ms, r->latency.p50_ms);
    c.keys_per_second_over_redis = Ratio(server.KeysPerSecond(), r->KeysPerSecond());
  }
  return c;
}

std::string FormatTable(const RunHeader& h, const std::vector<SettingResult>& results) {
  std::string out;
  if (!h.server.empty()) {
    absl::StrAppend(&out, "# server ", h.server, "  backend ", h.backend.empty() ? "?" : h.backend,
                    h.device.empty() ? "" : absl::StrCat(" (", h.device, ")"), "\n");
  }
  if (!h.redis.empty()) {
    absl::StrAppend(&out, "# redis ", h.redis,
                    h.redis_version.empty() ? "" : absl::StrCat(" (", h.redis_version, ")"),
                    "  the index's keys and values as decimal strings",
                    h.payload ? " (each value followed by ',int64,tag' of its payload)" : "",
                    "; a batch is one MGET\n");
  }
  if (!h.index.empty()) {
    absl::StrAppend(&out, "# index ", h.index,
                    h.index_rows ? absl::StrCat(" (", h.index_rows, " rows, mapping known)")
                                 : std::string(" (existing)"),
                    h.key_type.empty() ? "" : absl::StrCat("  ", h.key_type, " keys"),
                    h.duplicates.empty() ? "" : absl::StrCat("  ", h.duplicates),
                    h.multiplicity > 1 ? absl::StrCat("  multiplicity ", h.multiplicity) : "",
                    h.payload ? "  payload lt_int64 INT64, lt_tag STRING selected" : "",
                    "  hit ratio ", h.hit_ratio, "  seed ", h.seed, "\n");
  }
  if (!h.join_kind.empty()) {
    absl::StrAppend(&out, "# join kind ", h.join_kind, "; pairs/s of the join settings: ");
    bool first = true;
    for (const SettingResult& r : results) {
      if (r.rpc != Rpc::kJoin) continue;
      absl::StrAppend(&out, first ? "" : ", ", TargetName(r.target), " ", Rows(r.batch_rows), " x",
                      r.concurrency, " ", Si(r.PairsPerSecond()));
      first = false;
    }
    absl::StrAppend(&out, "\n");
  }
  if (!h.aggregate.empty()) absl::StrAppend(&out, "# aggregate ", h.aggregate, "\n");
  if (!h.mutate.empty()) {
    absl::StrAppend(&out, "# mutate: ", h.mutate,
                    "; a mutate row's keys/s are upsert rows per second, its latency that of "
                    "a whole batch (applied, the table rebuilt, answered)\n");
  }
  absl::StrAppend(&out,
                  "# MB/s = 1e6 payload bytes (packed columns) per second; latency from a "
                  "batch's write to its answer\n");
  absl::StrAppend(&out, absl::StrFormat("%-9s %-6s %5s %4s %3s %3s %9s %8s %8s %8s %8s %8s %8s "
                                        "%8s %8s %7s %5s %6s\n",
                                        "rpc", "target", "rows", "conc", "ch", "inf", "batches/s",
                                        "keys/s", "MB/s>", "MB/s<", "p50ms", "p90ms", "p99ms",
                                        "p99.9ms", "maxms", "errors", "wrong", "%echo"));
  for (const SettingResult& r : results) {
    const auto frac = EchoFraction(r, results);
    absl::StrAppend(
        &out, absl::StrFormat("%-9s %-6s %5s %4d %3d %3d %9s %8s %8.1f %8.1f %8.3f %8.3f %8.3f "
                              "%8.3f %8.3f %7s %5d %6s\n",
                              RpcName(r.rpc), TargetName(r.target), Rows(r.batch_rows),
                              r.concurrency, r.channels, r.in_flight, Si(r.BatchesPerSecond()),
                              Si(r.KeysPerSecond()), r.RequestMBps(), r.ResponseMBps(),
                              r.latency.p50_ms, r.latency.p90_ms, r.latency.p99_ms,
                              r.latency.p999_ms, r.latency.max_ms, Errors(r), r.wrong_answers,
                              frac ? absl::StrFormat("%.0f%%", 100 * *frac) : std::string("-")));
  }
  // One line per setting measured against more than the server: the server's
  // p50 over each other target's, and its keys/s over Redis's (over echo's it
  // is the %echo column).
  for (const SettingResult& r : results) {
    const Comparison c = Compare(r, results);
    std::vector<std::string> p50;
    if (c.p50_over_echo) p50.push_back(absl::StrCat("server/echo ", Times(*c.p50_over_echo)));
    if (c.p50_over_redis) p50.push_back(absl::StrCat("server/redis ", Times(*c.p50_over_redis)));
    std::string line;
    if (!p50.empty()) line = absl::StrCat("p50 ", absl::StrJoin(p50, ", "));
    if (c.keys_per_second_over_redis) {
      absl::StrAppend(&line, line.empty() ? "" : "; ", "keys/s server/redis ",
                      Times(*c.keys_per_second_over_redis));
    }
    if (line.empty()) continue;
    absl::StrAppend(&out, "# ", r.rpc == Rpc::kLookup ? "" : absl::StrCat(RpcName(r.rpc), " "),
                    "rows=", Rows(r.batch_rows), " conc=", r.concurrency, ": ", line, "\n");
  }
  for (const SettingResult& r : results) {
    if (!r.first_wrong.empty()) {
      absl::StrAppend(&out, "# WRONG (", TargetName(r.target), " ", Rows(r.batch_rows), " x",
                      r.concurrency, "): ", r.first_wrong, "\n");
    }
    if (!r.first_error.empty()) {
      absl::StrAppend(&out, "# ERROR (", TargetName(r.target), " ", Rows(r.batch_rows), " x",
                      r.concurrency, "): ", r.first_error, "\n");
    }
  }
  return out;
}

std::string FormatJson(const RunHeader& h, const std::vector<SettingResult>& results) {
  nlohmann::json header = {
      {"server", h.server},
      {"backend", h.backend},
      {"device", h.device},
      {"index", h.index},
      {"index_rows", h.index_rows},
      {"hit_ratio", h.hit_ratio},
      {"seed", h.seed},
      {"aggregate", h.aggregate},
      {"command", h.command_line},
      {"key_type", h.key_type},
      {"duplicates", h.duplicates},
      {"multiplicity", h.multiplicity},
      {"payload", h.payload},
      {"join_kind", h.join_kind},
      {"mutate", h.mutate},
      {"redis", h.redis},
      {"redis_version", h.redis_version},
  };

  nlohmann::json rows = nlohmann::json::array();
  uint64_t errors = 0, wrong = 0;
  for (const SettingResult& r : results) {
    nlohmann::json j = {
        {"rpc", RpcName(r.rpc)},
        {"target", TargetName(r.target)},
        {"batch_rows", r.batch_rows},
        {"concurrency", r.concurrency},
        {"channels", r.channels},
        {"in_flight", r.in_flight},
        {"seconds", r.seconds},
        {"batches", r.batches},
        {"keys", r.keys},
        {"pairs", r.pairs},
        {"pairs_per_second", r.PairsPerSecond()},
        {"batches_per_second", r.BatchesPerSecond()},
        {"keys_per_second", r.KeysPerSecond()},
        {"request_mb_per_second", r.RequestMBps()},
        {"response_mb_per_second", r.ResponseMBps()},
        {"latency_ms",
         {{"count", r.latency.count},
          {"mean", r.latency.mean_ms},
          {"p50", r.latency.p50_ms},
          {"p90", r.latency.p90_ms},
          {"p99", r.latency.p99_ms},
          {"p999", r.latency.p999_ms},
          {"max", r.latency.max_ms}}},
        {"errors", r.errors},
        {"error_count", r.ErrorCount()},
        {"wrong_answers", r.wrong_answers},
        {"checked_answers", r.checked},
    };
    if (!r.first_wrong.empty()) j["first_wrong"] = r.first_wrong;
    if (!r.first_error.empty()) j["first_error"] = r.first_error;
    if (auto f = EchoFraction(r, results)) j["fraction_of_echo"] = *f;
    const Comparison c = Compare(r, results);
    if (c.p50_over_echo) j["p50_over_echo"] = *c.p50_over_echo;
    if (c.p50_over_redis) j["p50_over_redis"] = *c.p50_over_redis;
    if (c.keys_per_second_over_redis) {
      j["keys_per_second_over_redis"] = *c.keys_per_second_over_redis;
    }
    errors += r.ErrorCount();
    wrong += r.wrong_answers;
    rows.push_back(std::move(j));
  }
  nlohmann::json doc = {{"header", header},
                        {"results", rows},
                        {"total_errors", errors},
                        {"total_wrong_answers", wrong}};
  return doc.dump(2) + "\n";
}

}  // namespace gpujoin::loadtest
