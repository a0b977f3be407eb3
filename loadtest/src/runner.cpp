#include "runner.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "mutate_workload.hpp"
#include "payload.hpp"
#include "redis_stream.hpp"

namespace gpujoin::loadtest {
namespace {

using Clock = std::chrono::steady_clock;

// State shared by the streams of one setting.
struct Shared {
  std::atomic<bool> measuring{false};
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> measured{0};  // answers counted so far (for --requests)
  std::mutex mu;
  std::condition_variable cv;
  Clock::time_point end;  // set by whoever stops the window
  bool ended = false;
};

// What one stream saw; merged after the streams are joined.
struct StreamStats {
  uint64_t batches = 0, keys = 0, pairs = 0, request_bytes = 0, response_bytes = 0;
  std::vector<int64_t> latencies;
  std::map<std::string, uint64_t> errors;
  uint64_t wrong = 0, checked = 0;
  std::string first_wrong, first_error;

  void Error(const absl::Status& s) {
    ++errors[absl::StatusCodeToString(s.code())];
    if (first_error.empty()) first_error = s.ToString();
  }
  // A wrong answer is an error too (code WRONG_ANSWER), not only a statistic.
  void Wrong(std::string what) {
    ++wrong;
    ++errors["WRONG_ANSWER"];
    if (first_wrong.empty()) first_wrong = std::move(what);
  }
};

void EndWindow(Shared& sh, Clock::time_point when) {
  {
    std::lock_guard<std::mutex> lock(sh.mu);
    if (!sh.ended) {
      sh.ended = true;
      sh.end = when;
    }
  }
  sh.stop.store(true);
  sh.cv.notify_all();
}

// Bookkeeping common to every answer; `check` returns "" or what was wrong.
// Answers of a stream that is not `primary` (Mutate beside queries) do not
// count towards --requests.
template <typename Result, typename Check>
void OnAnswer(const RunConfig& cfg, bool primary, Shared& sh, StreamStats& st, Result& r,
              uint64_t rows, uint64_t pairs, uint64_t request_bytes, uint64_t response_bytes,
              Check&& check) {
  const auto now = Clock::now();
  if (!r.error.ok()) {
    st.Error(r.error);
    return;
  }
  const bool full = r.batch_id % static_cast<uint64_t>(cfg.verify_every) == 0;
  std::string wrong = check(full);
  if (!wrong.empty()) {
    st.Wrong(absl::StrCat("batch ", r.batch_id, ": ", wrong));
    return;
  }
  if (full) ++st.checked;
  if (!sh.measuring.load(std::memory_order_relaxed) || sh.stop.load(std::memory_order_relaxed)) {
    return;
  }
  if (cfg.requests > 0 && primary) {
    const uint64_t k = sh.measured.fetch_add(1);
    if (k >= cfg.requests) return;
    if (k + 1 == cfg.requests) EndWindow(sh, now);
  }
  ++st.batches;
  st.keys += rows;
  st.pairs += pairs;
  st.request_bytes += request_bytes;
  st.response_bytes += response_bytes;
  st.latencies.push_back(r.latency.count());
}

std::string CheckEchoSize(size_t got, size_t want, const char* what) {
  if (got == want) return "";
  return absl::StrCat("echo answered ", got, " ", what, ", expected ", want);
}

// The echo answers with the request's keys as values (and as pairs). Sampled echo
// answers are compared with memcmp just like sampled server answers, so that the
// client spends the same effort per answer on both targets.
// For uint64 keys the echo answers their low 32 bits, for key columns the row
// numbers.
bool EchoesKeys(const PoolBatch& b, const uint32_t* words, size_t n) {
  if (!b.key_columns.empty()) {
    for (size_t i = 0; i < n; ++i) {
      if (words[i] != i) return false;
    }
    return true;
  }
  if (b.keys64.empty()) return std::memcmp(words, b.keys.data(), 4 * n) == 0;
  for (size_t i = 0; i < n; ++i) {
    if (words[i] != static_cast<uint32_t>(b.keys64[i])) return false;
  }
  return true;
}

std::string CheckEchoLookup(const BatchPool& pool, const PoolBatch& b,
                            const client::LookupResult& r, bool full) {
  std::string s = CheckEchoSize(r.values.size(), b.rows(), "values");
  if (s.empty() && r.found.size() != b.rows()) s = CheckEchoSize(r.found.size(), b.rows(), "found");
  // The echo's payload rows derive from the values it answers, as a server's do.
  if (s.empty() && pool.select_payload) s = CheckLookupPayload(b, r, full);
  if (!s.empty() || !full) return s;
  if (!EchoesKeys(b, r.values.data(), b.rows()) ||
      std::count(r.found.begin(), r.found.end(), uint8_t{1}) !=
          static_cast<std::ptrdiff_t>(b.rows())) {
    return "echo answer differs from the request";
  }
  return "";
}

// The pair capacity a join batch asks for: with a known mapping exactly its
// expected pairs (none: 0, which the server reads as the batch's rows and
// answers with no pairs), else 0.
uint64_t JoinCapacity(const BatchPool& pool, const PoolBatch& b) {
  return pool.known_mapping ? b.expected_left.size() : 0;
}

// The echo answers `capacity` pairs (0 = the batch's rows), the keys repeated.
std::string CheckEchoJoin(const BatchPool& pool, const PoolBatch& b, const client::JoinResult& r,
                          bool full) {
  if (r.results.size() != 1) return "echo answered no join result";
  const auto& p = r.results[0];
  const uint64_t capacity = JoinCapacity(pool, b);
  const size_t want = capacity ? capacity : b.rows();
  std::string s = CheckEchoSize(p.left_rows.size(), want, "pairs");
  if (!s.empty() || !full || want == 0) return s;
  for (size_t at = 0; at < want; at += b.rows()) {
    const size_t n = std::min(want - at, b.rows());
    if (!EchoesKeys(b, p.left_rows.data() + at, n) || !EchoesKeys(b, p.right_rows.data() + at, n)) {
      return "echo answer differs from the request";
    }
  }
  return "";
}

// The echo answers a Mutate batch with its upsert rows.
std::string CheckEchoMutate(const PoolBatch& b, const client::MutateResult& r) {
  return CheckEchoSize(r.upsert_rows, b.rows(), "upsert rows");
}

// Runs stream `s` of cfg.workload.rpc until the window closes, restarting it
// after an RPC failure.
void RunStream(Target target, client::Client* c, const BatchPool& pool, const RunConfig& cfg,
               bool primary, int s, Shared& sh, StreamStats& st) {
  const size_t pool_size = pool.batches.size();
  const uint64_t req_bytes = pool.RequestBytes(cfg.workload);
  const bool echo = target == Target::kEcho;
  client::StreamOptions opts;
  opts.max_in_flight = cfg.in_flight;
  opts.deadline = std::chrono::milliseconds(
      static_cast<int64_t>(1000 * (cfg.warmup_seconds + cfg.duration_seconds + cfg.drain_seconds)));

  uint64_t last_sequence = 0;  // Mutate: the index's sequence at this stream's last answer
  for (uint64_t call = 0; !sh.stop.load(); ++call) {
    // Streams start at different pool positions so they do not send identical batches.
    const size_t offset = static_cast<size_t>(s) * 7 + call;
    uint64_t issued = 0;
    auto batch_of = [&](uint64_t id) -> const PoolBatch& {
      return pool.batches[(offset + id) % pool_size];
    };
    absl::Status status;
    switch (cfg.workload.rpc) {
      case Rpc::kLookup: {
        auto source = [&]() -> std::optional<client::LookupBatch> {
          if (sh.stop.load(std::memory_order_relaxed)) return std::nullopt;
          client::LookupBatch batch{batch_of(issued++).QueryKeys()};
          batch.want_match_counts = pool.keep_all;
          if (pool.select_payload) {
            batch.select = {std::string(kPayloadInt64Name), std::string(kPayloadStringName)};
          }
          return batch;
        };
        auto sink = [&](client::LookupResult&& r) -> absl::Status {
          const PoolBatch& b = batch_of(r.batch_id);
          uint64_t resp = 4 * r.values.size() + r.found.size() + 4 * r.probes.size() +
                          4 * r.match_counts.size();
          for (const client::Column& c : r.columns)
            resp += c.data.size() + 4 * c.offsets.size() + c.validity.size();
          OnAnswer(cfg, primary, sh, st, r, b.rows(), 0, req_bytes, resp, [&](bool full) {
            return echo ? CheckEchoLookup(pool, b, r, full) : CheckLookup(pool, b, r, full);
          });
          return absl::OkStatus();
        };
        status = c->Lookup(cfg.index, source, sink, opts);
        break;
      }
      case Rpc::kJoin: {
        auto source = [&]() -> std::optional<client::JoinBatch> {
          if (sh.stop.load(std::memory_order_relaxed)) return std::nullopt;
          const PoolBatch& b = batch_of(issued++);
          client::JoinLeft left;
          left.keys = b.QueryKeys();
          // A known pair count makes the capacity exact: no truncation, and the echo
          // answers as many pairs as the server.
          left.capacity = JoinCapacity(pool, b);
          client::JoinBatch batch;
          batch.lefts.push_back(left);
          batch.kind = pool.join_kind;
          return batch;
        };
        auto sink = [&](client::JoinResult&& r) -> absl::Status {
          const PoolBatch& b = batch_of(r.batch_id);
          uint64_t resp = 0, pairs = 0;
          for (const auto& p : r.results) {
            resp += 4 * (p.left_rows.size() + p.right_rows.size());
            pairs += p.left_rows.size();
          }
          OnAnswer(cfg, primary, sh, st, r, b.rows(), pairs, req_bytes, resp, [&](bool full) {
            return echo ? CheckEchoJoin(pool, b, r, full) : CheckJoin(pool, b, r, full);
          });
          return absl::OkStatus();
        };
        status = c->Join(cfg.index, source, sink, opts);
        break;
      }
      case Rpc::kAggregate: {
        const bool count = cfg.workload.aggregate_op == client::AggregateOp::kCount;
        client::AggregateSpec spec{cfg.workload.aggregate_op, cfg.workload.groups};
        auto source = [&]() -> std::optional<client::AggregateBatch> {
          if (sh.stop.load(std::memory_order_relaxed)) return std::nullopt;
          const PoolBatch& b = batch_of(issued++);
          client::AggregateBatch batch;
          batch.keys = b.keys;
          if (!count) batch.values = b.agg_values;
          return batch;
        };
        auto sink = [&](client::AggregateResult&& r) -> absl::Status {
          const PoolBatch& b = batch_of(r.batch_id);
          const uint64_t resp =
              4 * (r.counts.size() + r.values.size() + r.contributing_rows.size() +
                   r.total_counts.size() + r.total_values.size());
          OnAnswer(cfg, primary, sh, st, r, b.keys.size(), 0, req_bytes, resp, [&](bool full) {
            if (!echo) return CheckAggregate(cfg.workload, pool, b, r, full);
            return CheckEchoSize(count ? r.counts.size() : r.values.size(), cfg.workload.groups,
                                 "groups");
          });
          return absl::OkStatus();
        };
        status = c->Aggregate(spec, source, sink, opts);
        break;
      }
      case Rpc::kMutate: {
        auto source = [&]() -> std::optional<client::MutateBatch> {
          if (sh.stop.load(std::memory_order_relaxed)) return std::nullopt;
          return MutateBatchOf(pool, batch_of(issued++));
        };
        auto sink = [&](client::MutateResult&& r) -> absl::Status {
          const PoolBatch& b = batch_of(r.batch_id);
          const uint64_t previous = last_sequence;
          if (r.error.ok()) last_sequence = std::max(last_sequence, r.mutation_sequence);
          // Every Mutate answer is checked whole (its counts are O(1)).
          OnAnswer(cfg, primary, sh, st, r, b.rows(), 0, req_bytes, 0, [&](bool) {
            return echo ? CheckEchoMutate(b, r) : CheckMutate(pool, b, r, previous);
          });
          return absl::OkStatus();
        };
        status = c->Mutate(cfg.index, source, sink, opts);
        break;
      }
    }
    if (!status.ok()) {
      st.Error(status);
      if (!sh.stop.load()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
}

// Runs stream `s` of lookups against Redis: one connection, one MGET per batch,
// reconnecting after a failure while the window is open. A wrong or failed
// answer counts exactly as a server's does.
void RunRedisStreamOf(const BatchPool& pool, const RunConfig& cfg, bool primary, int s, Shared& sh,
                      StreamStats& st) {
  if (cfg.workload.rpc != Rpc::kLookup || !pool.known_mapping) {
    st.Error(absl::UnimplementedError("the redis target runs lookups of a known mapping only"));
    return;
  }
  const size_t pool_size = pool.batches.size();
  const uint64_t req_bytes = pool.RequestBytes(cfg.workload);
  RedisOptions options;
  options.limits = MgetLimits(pool.batch_rows, pool.select_payload);
  options.io_timeout = std::chrono::milliseconds(
      static_cast<int64_t>(1000 * (cfg.warmup_seconds + cfg.duration_seconds + cfg.drain_seconds)));
  for (uint64_t call = 0; !sh.stop.load(); ++call) {
    // As RunStream: streams start at different pool positions.
    const size_t offset = static_cast<size_t>(s) * 7 + call;
    uint64_t issued = 0;
    auto batch_of = [&](uint64_t id) -> const PoolBatch& {
      return pool.batches[(offset + id) % pool_size];
    };
    auto conn = RedisConnection::Connect(cfg.redis_address, options);
    absl::Status status = conn.status();
    if (conn.ok()) {
      auto source = [&]() -> const PoolBatch* {
        if (sh.stop.load(std::memory_order_relaxed)) return nullptr;
        return &batch_of(issued++);
      };
      auto sink = [&](RedisResult&& r) {
        const PoolBatch& b = batch_of(r.batch_id);
        // The payload the answer stands for, as a server's lookup answer packs it:
        // a value and a found flag per key, and the --payload columns.
        OnAnswer(cfg, primary, sh, st, r, b.rows(), 0, req_bytes, 5 * b.rows() + b.payload_bytes,
                 [&](bool full) {
                   return CheckRedisLookup(b, r.reply, full, pool.select_payload);
                 });
      };
      status = RunRedisStream(**conn, cfg.in_flight, source, sink);
    }
    if (!status.ok()) {
      st.Error(status);
      if (!sh.stop.load()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
}

}  // namespace

const char* TargetName(Target target) {
  switch (target) {
    case Target::kServer:
      return "server";
    case Target::kEcho:
      return "echo";
    case Target::kRedis:
      return "redis";
  }
  return "?";
}

uint64_t SettingResult::ErrorCount() const {
  uint64_t n = 0;
  for (const auto& [code, count] : errors) n += count;
  return n;
}

LatencySummary Summarize(std::vector<int64_t>& samples) {
  LatencySummary out;
  out.count = samples.size();
  if (samples.empty()) return out;
  std::sort(samples.begin(), samples.end());
  auto at = [&](double p) {
    // The relative nudge keeps an exact rank exact: 99.9 / 100 * 2000 is
    // 1998.0000000000002 in doubles, whose ceiling would be one rank too high.
    const size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * samples.size() * (1 - 1e-12)));
    return samples[std::clamp<size_t>(rank, 1, samples.size()) - 1] / 1e6;
  };
  out.p50_ms = at(50);
  out.p90_ms = at(90);
  out.p99_ms = at(99);
  out.p999_ms = at(99.9);
  out.max_ms = samples.back() / 1e6;
  long double sum = 0;
  for (int64_t v : samples) sum += v;
  out.mean_ms = static_cast<double>(sum / samples.size() / 1e6);
  return out;
}

SettingResult RunSetting(Target target, std::span<client::Client* const> clients,
                         const BatchPool& pool, int concurrency, const RunConfig& config) {
  return RunMixedSetting(target, clients, pool, concurrency, nullptr, 0, config).front();
}

namespace {

// Adds what the streams of one RPC saw to `result`.
void Merge(std::vector<StreamStats>& stats, SettingResult* result) {
  std::vector<int64_t> latencies;
  for (StreamStats& st : stats) {
    result->batches += st.batches;
    result->keys += st.keys;
    result->pairs += st.pairs;
    result->request_bytes += st.request_bytes;
    result->response_bytes += st.response_bytes;
    latencies.insert(latencies.end(), st.latencies.begin(), st.latencies.end());
    for (const auto& [code, n] : st.errors) result->errors[code] += n;
    result->wrong_answers += st.wrong;
    result->checked += st.checked;
    if (result->first_wrong.empty()) result->first_wrong = st.first_wrong;
    if (result->first_error.empty()) result->first_error = st.first_error;
  }
  result->latency = Summarize(latencies);
}

}  // namespace

std::vector<SettingResult> RunMixedSetting(Target target, std::span<client::Client* const> clients,
                                           const BatchPool& pool, int concurrency,
                                           const BatchPool* mutations, int mutate_streams,
                                           const RunConfig& config) {
  RunConfig cfg = config;
  cfg.in_flight = std::max(1, cfg.in_flight);
  cfg.verify_every = std::max(1, cfg.verify_every);
  RunConfig mutate_cfg = cfg;
  mutate_cfg.workload.rpc = Rpc::kMutate;
  if (mutations == nullptr || target == Target::kRedis) mutate_streams = 0;

  std::vector<SettingResult> results(mutate_streams > 0 ? 2 : 1);
  results[0].rpc = cfg.workload.rpc;
  results[0].batch_rows = pool.batch_rows;
  results[0].concurrency = concurrency;
  if (mutate_streams > 0) {
    results[1].rpc = Rpc::kMutate;
    results[1].batch_rows = mutations->batch_rows;
    results[1].concurrency = mutate_streams;
  }
  for (SettingResult& r : results) {
    r.target = target;
    r.channels = target == Target::kRedis
                     ? r.concurrency
                     : static_cast<int>(std::min<size_t>(clients.size(), r.concurrency));
    r.in_flight = cfg.in_flight;
  }

  Shared sh;
  std::vector<StreamStats> stats(concurrency), mutate_stats(mutate_streams);
  std::vector<std::thread> threads;
  threads.reserve(concurrency + mutate_streams);
  for (int s = 0; s < concurrency + mutate_streams; ++s) {
    if (target == Target::kRedis) {
      threads.emplace_back([&, s] { RunRedisStreamOf(pool, cfg, true, s, sh, stats[s]); });
      continue;
    }
    client::Client* c = clients[static_cast<size_t>(s) % clients.size()];
    if (s < concurrency) {
      threads.emplace_back([&, c, s] { RunStream(target, c, pool, cfg, true, s, sh, stats[s]); });
    } else {
      threads.emplace_back([&, c, s] {
        RunStream(target, c, *mutations, mutate_cfg, false, s, sh, mutate_stats[s - concurrency]);
      });
    }
  }

  auto seconds = [](double s) {
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
  };
  std::this_thread::sleep_for(seconds(cfg.warmup_seconds));
  const auto start = Clock::now();
  sh.measuring.store(true);
  {
    std::unique_lock<std::mutex> lock(sh.mu);
    sh.cv.wait_until(lock, start + seconds(cfg.duration_seconds), [&] { return sh.ended; });
  }
  EndWindow(sh, Clock::now());
  for (auto& t : threads) t.join();

  Merge(stats, &results[0]);
  if (mutate_streams > 0) Merge(mutate_stats, &results[1]);
  for (SettingResult& r : results)
    r.seconds = std::chrono::duration<double>(sh.end - start).count();
  return results;
}

}  // namespace gpujoin::loadtest
