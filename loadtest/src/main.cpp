// gpujoin-loadtest: a bounded load generator for gpujoind, in the spirit of
// Triton's perf_analyzer and redis-benchmark. For every setting (batch rows x
// concurrency) it drives Lookup, Join or Aggregate streams for a fixed time or
// number of requests, checks a sample of the answers against the known key ->
// value mapping, and reports throughput, payload MB/s and latency percentiles.
// Mutate streams (--rpc mutate, or --mutate-streams beside lookups) upsert
// keys drawn like the lookups' and are reported apart.
// With --echo the same settings also run against an in-process echo service
// (the transport ceiling), and each server row says what fraction of the echo
// throughput it reached. With --redis ADDR the same lookups also run against
// a Redis server loaded with the index's keys and values (one MGET per batch),
// and a comparison line per setting sets the server's p50 and keys/s beside
// the other targets'.
//
// Exit status: 0 = every answer right and no errors; 1 = wrong answers or
// errors; 2 = bad options or the run could not start.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "echo_service.hpp"
#include "flags.hpp"
#include "gpujoin/client/client.hpp"
#include "options.hpp"
#include "redis_client.hpp"
#include "redis_stream.hpp"
#include "report.hpp"
#include "runner.hpp"
#include "workload.hpp"

namespace gpujoin::loadtest {
namespace {

int Fail(const absl::Status& s) {
  std::cerr << "gpujoin-loadtest: " << s.ToString() << "\n";
  return 2;
}

absl::StatusOr<std::vector<std::unique_ptr<client::Client>>> ConnectAll(
    const client::ConnectOptions& base, const std::string& address, int channels) {
  std::vector<std::unique_ptr<client::Client>> out;
  for (int i = 0; i < channels; ++i) {
    client::ConnectOptions o = base;
    o.address = address;
    o.own_connection = channels > 1;
    auto c = client::Client::Connect(o);
    if (!c.ok()) return c.status();
    out.push_back(std::move(*c));
  }
  return out;
}

std::vector<client::Client*> Raw(const std::vector<std::unique_ptr<client::Client>>& v) {
  std::vector<client::Client*> out;
  for (const auto& c : v) out.push_back(c.get());
  return out;
}

// What the run sweeps over, checked: the settings, the connection and the
// report's header.
struct Plan {
  RunConfig cfg;
  std::vector<uint64_t> batch_rows, concurrency;
  int mutate_streams = 0;
  uint64_t mutate_rows = 0;  // 0: each setting's batch rows
  client::ConnectOptions base;
  RunHeader header;
};

// The workload the flags describe; INVALID_ARGUMENT naming the flag otherwise.
absl::StatusOr<WorkloadSpec> MakeWorkload(const Flags& f) {
  WorkloadSpec w;
  w.rpc = f.rpc_name == "join"        ? Rpc::kJoin
          : f.rpc_name == "aggregate" ? Rpc::kAggregate
          : f.rpc_name == "mutate"    ? Rpc::kMutate
                                      : Rpc::kLookup;
  if (!f.build_keys_text.empty()) {
    auto n = ParseCount(f.build_keys_text, "--build-keys");
    if (!n.ok()) return n.status();
    w.build_keys = *n;
  }
  if (!f.keyspace_text.empty()) {
    auto n = ParseCount(f.keyspace_text, "--keyspace");
    if (!n.ok()) return n.status();
    w.keyspace = *n;
  }
  w.hit_ratio = f.hit_ratio;
  w.seed = f.seed;
  auto key_kind = ParseKeyKind(f.key_type);
  if (!key_kind.ok()) return key_kind.status();
  w.key_kind = *key_kind;
  w.multiplicity = f.multiplicity;
  w.keep_all = f.multiplicity_option->count() > 0;
  w.select_payload = f.payload;
  auto kind = client::ParseJoinKind(f.join_kind);
  if (!kind.ok()) return kind.status();
  w.join_kind = *kind;
  w.groups = f.groups;
  auto op = client::ParseAggregateOp(f.agg_op);
  if (!op.ok()) return op.status();
  w.aggregate_op = *op;
  if (absl::Status s = ValidateWorkloadSpec(w); !s.ok()) return s;
  if (w.rpc == Rpc::kAggregate && w.build_keys > 0) {
    return absl::InvalidArgumentError("--build-keys does not apply to --rpc aggregate");
  }
  if (f.mutate_streams > 0) {
    if (w.select_payload) {
      return absl::InvalidArgumentError(
          "--payload: leave out --mutate-streams (their upserts carry no payload, so the "
          "rows they write would answer nulls)");
    }
    if (w.rpc != Rpc::kLookup) {
      return absl::InvalidArgumentError(
          "--mutate-streams runs Mutate streams beside lookups: it needs --rpc lookup (for "
          "mutations alone, --rpc mutate)");
    }
    WorkloadSpec m = w;
    m.rpc = Rpc::kMutate;
    if (absl::Status s = ValidateWorkloadSpec(m); !s.ok()) return s;
  } else if (!f.mutate_rows_text.empty()) {
    return absl::InvalidArgumentError("--mutate-rows sizes the batches of --mutate-streams");
  }
  return w;
}

// The report's header: the command line and what the run measures.
RunHeader MakeHeader(const Flags& f, const WorkloadSpec& w, int argc, char** argv) {
  RunHeader header;
  header.command_line = absl::StrJoin(std::vector<std::string>(argv, argv + argc), " ");
  header.hit_ratio = w.rpc == Rpc::kAggregate ? 0 : f.hit_ratio;
  header.seed = f.seed;
  if (w.rpc == Rpc::kAggregate) {
    header.aggregate = absl::StrCat(f.agg_op, " over ", f.groups, " groups");
  } else {
    header.index = f.index;
    header.index_rows = BuildRows(w);
    header.key_type = KeyTypeOf(w.key_kind) == client::KeyType::kColumns
                          ? std::string(KeyKindName(w.key_kind))
                          : std::string(client::KeyTypeName(KeyTypeOf(w.key_kind)));
    header.multiplicity = w.build_keys > 0 ? w.multiplicity : 0;
    if (w.build_keys > 0) {
      header.duplicates = std::string(client::DuplicatePolicyName(
          w.keep_all ? client::DuplicatePolicy::kKeepAll : client::DuplicatePolicy::kLowestRow));
    }
    if (w.rpc == Rpc::kJoin) header.join_kind = f.join_kind;
    header.payload = w.select_payload;
  }
  if (f.mutate_streams > 0) {
    header.mutate = absl::StrCat(f.mutate_streams, " Mutate streams of ",
                                 f.mutate_rows_text.empty() ? "--batch-rows" : f.mutate_rows_text,
                                 " upsert rows beside the lookups");
  } else if (w.rpc == Rpc::kMutate) {
    header.mutate = "upserts only";
  }
  return header;
}

// INVALID_ARGUMENT unless the workload is one Redis can answer: MGETs of
// uint32 keys of a known one-value-per-key mapping, without mutations.
absl::Status CheckRedisFlags(const Flags& f, const WorkloadSpec& w) {
  std::string host, port;
  if (absl::Status s = SplitHostPort(f.redis, "--redis", &host, &port); !s.ok()) return s;
  auto bad = [](const char* why) {
    return absl::InvalidArgumentError(absl::StrCat("--redis: ", why));
  };
  if (w.rpc != Rpc::kLookup)
    return bad("Redis answers lookups (one MGET per batch): give --rpc lookup");
  if (w.key_kind != KeyKind::kUint32) {
    return bad("Redis holds the uint32 keys as decimal strings: give --key-type u32");
  }
  if (w.build_keys == 0)
    return bad("the mapping loaded into Redis is the built index's: give --build-keys");
  if (w.keep_all) return bad("Redis holds one value per key: leave out --multiplicity");
  if (f.mutate_streams > 0) return bad("Redis runs lookups alone: leave out --mutate-streams");
  return absl::OkStatus();
}

absl::StatusOr<Plan> MakePlan(const Flags& f, int argc, char** argv) {
  Plan plan;
  auto w = MakeWorkload(f);
  if (!w.ok()) return w.status();
  plan.cfg.workload = *std::move(w);
  auto batch_rows = ParseCountList(f.batch_rows_text, "--batch-rows");
  if (!batch_rows.ok()) return batch_rows.status();
  auto concurrency = f.concurrency_range.empty()
                         ? ParseCountList(f.concurrency_text, "--concurrency")
                         : ParseRange(f.concurrency_range, "--concurrency-range");
  if (!concurrency.ok()) return concurrency.status();
  for (uint64_t c : *concurrency) {
    if (c > 4096) {
      return absl::InvalidArgumentError(
          absl::StrCat("--concurrency: ", c, " streams is more than the limit of 4096"));
    }
  }
  plan.mutate_streams = f.mutate_streams;
  if (!f.redis.empty()) {
    if (absl::Status s = CheckRedisFlags(f, plan.cfg.workload); !s.ok()) return s;
    plan.cfg.redis_address = f.redis;
  }
  if (!f.mutate_rows_text.empty()) {
    auto n = ParseCount(f.mutate_rows_text, "--mutate-rows");
    if (!n.ok()) return n.status();
    plan.mutate_rows = *n;
  }
  // keys + the largest answer (lookup: 5 bytes per row) must fit one message;
  // 8 bytes per row also bounds a request of uint64 keys (and a Mutate
  // request's key and value).
  const bool mutations = plan.cfg.workload.rpc == Rpc::kMutate || plan.mutate_streams > 0;
  // --payload answers about 30 bytes a row (value, found, int64, offset, tag).
  const uint64_t row_bytes =
      std::max<uint64_t>(plan.cfg.workload.select_payload ? 30 : 8,
                         KeyWireBytes(plan.cfg.workload.key_kind) + (mutations ? 4 : 0));
  std::vector<uint64_t> sizes = *batch_rows;
  if (plan.mutate_rows > 0) sizes.push_back(plan.mutate_rows);
  for (uint64_t r : sizes) {
    if (r * row_bytes + 4096 > static_cast<uint64_t>(f.max_message_bytes)) {
      return absl::InvalidArgumentError(
          absl::StrCat(r == plan.mutate_rows ? "--mutate-rows: " : "--batch-rows: ", r,
                       " rows need messages of about ", r * row_bytes,
                       " bytes, above --max-message-bytes ", f.max_message_bytes));
    }
  }
  plan.batch_rows = *std::move(batch_rows);
  plan.concurrency = *std::move(concurrency);
  RunConfig& cfg = plan.cfg;
  cfg.index = f.index;
  cfg.in_flight = f.in_flight;
  cfg.warmup_seconds = f.warmup;
  cfg.duration_seconds = f.duration;
  cfg.requests = f.requests;
  cfg.verify_every = f.verify_every;

  client::ConnectOptions& base = plan.base;
  base.token = f.token;
  base.tls_ca_file = f.tls_ca;
  base.tls_server_name = f.tls_name;
  base.tls_client_cert_file = f.tls_client_cert;
  base.tls_client_key_file = f.tls_client_key;
  base.max_message_bytes = f.max_message_bytes;
  plan.header = MakeHeader(f, cfg.workload, argc, argv);
  return plan;
}

// INVALID_ARGUMENT when an existing index's key is not of `kind` (the key
// word, or the key columns' types), naming the --key-type values that fit.
absl::Status CheckKeysOfIndex(const std::string& index, const client::IndexInfo& d, KeyKind kind) {
  std::vector<client::ColumnType> have, want;
  for (const auto& c : d.key_columns) have.push_back(c.type);
  for (const auto& c : KeyColumnsOf(kind)) want.push_back(c.type);
  if (d.key_type == KeyTypeOf(kind) && have == want) return absl::OkStatus();
  if (d.key_type != client::KeyType::kColumns) {
    return absl::InvalidArgumentError(absl::StrCat(
        "index '", index, "' has ", std::string(client::KeyTypeName(d.key_type)),
        " keys; give --key-type ", d.key_type == client::KeyType::kUint64 ? "u64" : "u32"));
  }
  std::vector<std::string> types;
  for (client::ColumnType t : have) types.push_back(std::string(client::ColumnTypeName(t)));
  const bool one_string = have == std::vector<client::ColumnType>{client::ColumnType::kString};
  const bool pair = have == std::vector<client::ColumnType>{client::ColumnType::kUint32,
                                                            client::ColumnType::kUint32};
  return absl::InvalidArgumentError(
      absl::StrCat("index '", index, "' has key columns (", absl::StrJoin(types, ", "), "); ",
                   one_string ? "give --key-type str16, str32 or uuid"
                   : pair     ? "give --key-type pair"
                              : "the load tester has no --key-type for them"));
}

// Builds --index from --build-keys (`built` then true), or checks that the
// existing index fits the workload, which learns whether it keeps every row
// and, for mutations, whether it takes values and which payload columns.
absl::Status PrepareIndex(const Flags& f, client::Client& c0, Plan& plan, bool* built) {
  WorkloadSpec& w = plan.cfg.workload;
  if (w.build_keys > 0) {
    BuildData data = MakeBuildData(w);
    client::IndexSpec spec;
    spec.name = f.index;
    spec.expected_rows = w.build_keys;  // the table holds one slot per distinct key
    spec.target_load_factor = f.load_factor;
    spec.explicit_values = true;
    spec.replace = true;
    spec.replicated = f.replicated;
    spec.key_type = KeyTypeOf(w.key_kind);
    spec.key_columns = KeyColumnsOf(w.key_kind);
    spec.duplicates =
        w.keep_all ? client::DuplicatePolicy::kKeepAll : client::DuplicatePolicy::kLowestRow;
    std::cerr << "building index '" << f.index << "' with " << w.build_keys << " keys"
              << (w.keep_all ? absl::StrCat(" x ", w.multiplicity, " rows (keep_all)") : "")
              << "...\n";
    std::vector<client::ColumnView> payload;
    for (const client::Column& c : data.payload) {
      spec.payload.push_back({c.name, c.type});
      payload.push_back(c.view());
    }
    auto built_info = c0.BuildIndexFromColumns(spec, data.Keys(), data.values, payload);
    if (!built_info.ok()) return built_info.status();
    *built = true;
    std::cerr << "built in " << built_info->build_seconds << " s (capacity " << built_info->capacity
              << ", load factor " << built_info->load_factor << ", backend " << built_info->backend
              << ")\n";
    return absl::OkStatus();
  }
  auto d = c0.DescribeIndex(f.index);
  if (!d.ok()) return d.status();
  if (absl::Status s = CheckKeysOfIndex(f.index, *d, w.key_kind); !s.ok()) return s;
  w.keep_all = d->duplicates == client::DuplicatePolicy::kKeepAll;
  if (w.rpc == Rpc::kMutate || plan.mutate_streams > 0) {
    if (w.keep_all) {
      return absl::InvalidArgumentError(
          absl::StrCat("index '", f.index,
                       "' keeps every row of a key (keep_all): every upsert would append "
                       "a row to its key's group; mutate a lowest_row index"));
    }
    w.explicit_values = d->explicit_values;
    for (const client::PayloadColumnInfo& p : d->payload) w.payload.push_back({p.name, p.type});
  }
  if (w.keep_all && w.rpc == Rpc::kJoin &&
      (w.join_kind == client::JoinKind::kInner || w.join_kind == client::JoinKind::kLeftOuter)) {
    // Its pairs per left row are unknown, so no capacity is known to be enough.
    return absl::InvalidArgumentError(
        absl::StrCat("index '", f.index, "' keeps every row of a key (keep_all): an ", f.join_kind,
                     " join's pair count is unknown; build the index here (--build-keys N "
                     "--multiplicity M) or use --join-kind left_semi or left_anti"));
  }
  plan.header.duplicates = std::string(client::DuplicatePolicyName(d->duplicates));
  return absl::OkStatus();
}

// Connects --channels clients to the server, names it in the header and, for
// lookups and joins, prepares the index (`built`: PrepareIndex built it).
absl::StatusOr<std::vector<std::unique_ptr<client::Client>>> PrepareServer(const Flags& f,
                                                                           Plan& plan,
                                                                           bool* built) {
  auto clients = ConnectAll(plan.base, f.server, f.channels);
  if (!clients.ok()) return clients.status();
  client::Client& c0 = *(*clients)[0];
  auto info = c0.GetServerInfo();
  if (!info.ok()) {
    return absl::Status(info.status().code(), absl::StrCat("cannot reach gpujoind at ", f.server,
                                                           ": ", info.status().message()));
  }
  plan.header.server = f.server;
  plan.header.backend = info->backend;
  plan.header.device = info->device_name;
  if (plan.cfg.workload.rpc != Rpc::kAggregate) {
    if (absl::Status s = PrepareIndex(f, c0, plan, built); !s.ok()) return s;
  }
  return clients;
}

// The in-process echo service and --channels clients of it.
struct Echo {
  std::unique_ptr<EchoServer> server;
  std::vector<std::unique_ptr<client::Client>> clients;
};

absl::Status StartEcho(const Flags& f, const Plan& plan, Echo* echo) {
  // Same kind of channel as the server's: a unix socket for a unix target, else loopback TCP.
  std::string listen = "127.0.0.1:0";
  if (f.server.rfind("unix:", 0) == 0) {
    listen = absl::StrCat("unix:/tmp/gpujoin-loadtest-echo-", getpid(), ".sock");
  }
  auto es = EchoServer::Start(listen, f.max_message_bytes);
  if (!es.ok()) return es.status();
  echo->server = std::move(*es);
  auto clients = ConnectAll(plan.base, echo->server->address(), f.channels);
  if (!clients.ok()) return clients.status();
  echo->clients = std::move(*clients);
  return absl::OkStatus();
}

// Connects to --redis, names it in the header and loads the mapping the index
// is built with (MakeBuildData of the same spec).
absl::Status PrepareRedis(const Flags& f, Plan& plan) {
  auto conn = RedisConnection::Connect(f.redis);
  if (!conn.ok()) return conn.status();
  auto version = RedisVersion(**conn);
  if (!version.ok()) return version.status();
  plan.header.redis = f.redis;
  plan.header.redis_version = *version;
  const WorkloadSpec& w = plan.cfg.workload;
  std::cerr << "loading " << w.build_keys << " keys into " << *version << " at " << f.redis
            << "...\n";
  const auto t0 = std::chrono::steady_clock::now();
  if (absl::Status s = LoadIntoRedis(**conn, MakeBuildData(w)); !s.ok()) return s;
  std::cerr << "loaded in "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()
            << " s\n";
  return absl::OkStatus();
}

// Every setting (batch rows x concurrency) against each target (the server and
// the echo service when they have clients, Redis when --redis), with the
// Mutate streams of --mutate-streams beside the lookups.
std::vector<SettingResult> RunSettings(const Plan& plan,
                                       const std::vector<client::Client*>& server_raw,
                                       const std::vector<client::Client*>& echo_raw) {
  const WorkloadSpec& w = plan.cfg.workload;
  std::vector<SettingResult> results;
  for (uint64_t rows : plan.batch_rows) {
    const uint32_t pairs_per_row = w.rpc == Rpc::kJoin ? w.multiplicity : 1;
    BatchPool pool = MakeBatchPool(
        w, rows, PoolSizeFor(rows, size_t{96} << 20, pairs_per_row, KeyWireBytes(w.key_kind)));
    std::optional<BatchPool> mutations;
    if (plan.mutate_streams > 0) {
      pool.mutated = true;
      WorkloadSpec m = w;
      m.rpc = Rpc::kMutate;
      const uint64_t mutate_rows = plan.mutate_rows > 0 ? plan.mutate_rows : rows;
      mutations = MakeBatchPool(
          m, mutate_rows, PoolSizeFor(mutate_rows, size_t{96} << 20, 1, KeyWireBytes(w.key_kind)));
    }
    for (uint64_t conc : plan.concurrency) {
      for (Target t : {Target::kServer, Target::kEcho, Target::kRedis}) {
        const auto& clients = t == Target::kServer ? server_raw : echo_raw;
        if (t == Target::kRedis ? plan.cfg.redis_address.empty() : clients.empty()) continue;
        std::cerr << RpcName(w.rpc) << " " << TargetName(t) << " rows=" << rows
                  << " concurrency=" << conc
                  << (mutations ? absl::StrCat(" + ", plan.mutate_streams, " mutate") : "")
                  << " ...";
        const std::vector<SettingResult> setting =
            RunMixedSetting(t, clients, pool, static_cast<int>(conc),
                            mutations ? &*mutations : nullptr, plan.mutate_streams, plan.cfg);
        for (const SettingResult& r : setting) {
          std::cerr << " " << RpcName(r.rpc) << " " << static_cast<uint64_t>(r.KeysPerSecond())
                    << " keys/s, p99 " << r.latency.p99_ms << " ms, errors " << r.ErrorCount()
                    << ", wrong " << r.wrong_answers << ";";
          results.push_back(r);
        }
        std::cerr << "\n";
      }
    }
  }
  return results;
}

// Prints the table or JSON (and --json-file); the exit status of the results.
int Report(const Flags& f, const RunHeader& header, const std::vector<SettingResult>& results) {
  if (!f.json_file.empty()) {
    std::ofstream out(f.json_file);
    out << FormatJson(header, results);
    if (!out) std::cerr << "warning: could not write --json-file '" << f.json_file << "'\n";
  }
  std::cout << (f.json ? FormatJson(header, results) : FormatTable(header, results));
  std::cout.flush();
  for (const SettingResult& r : results) {
    if (r.ErrorCount() > 0 || r.wrong_answers > 0) return 1;
  }
  return 0;
}

int Main(int argc, char** argv) {
  CLI::App app{
      "gpujoin-loadtest: bounded load against gpujoind (lookup, join, aggregate) with answer "
      "checks, latency percentiles, an in-process echo transport ceiling and Redis beside it"};
  Flags f;
  AddFlags(app, f);
  CLI11_PARSE(app, argc, argv);
  auto plan = MakePlan(f, argc, argv);
  if (!plan.ok()) return Fail(plan.status());

  std::vector<std::unique_ptr<client::Client>> server_clients;
  bool built = false;
  if (!f.echo_only) {
    auto clients = PrepareServer(f, *plan, &built);
    if (!clients.ok()) return Fail(clients.status());
    server_clients = std::move(*clients);
  }
  Echo echo;
  if (f.echo || f.echo_only) {
    if (absl::Status s = StartEcho(f, *plan, &echo); !s.ok()) return Fail(s);
  }
  if (!f.redis.empty()) {
    if (absl::Status s = PrepareRedis(f, *plan); !s.ok()) return Fail(s);
  }

  const std::vector<SettingResult> results =
      RunSettings(*plan, Raw(server_clients), Raw(echo.clients));

  if (built && !f.keep_index) {
    auto d = server_clients[0]->DropIndex(f.index);
    if (!d.ok())
      std::cerr << "warning: could not drop index '" << f.index << "': " << d.status() << "\n";
  }
  return Report(f, plan->header, results);
}

}  // namespace
}  // namespace gpujoin::loadtest

int main(int argc, char** argv) { return gpujoin::loadtest::Main(argc, argv); }
