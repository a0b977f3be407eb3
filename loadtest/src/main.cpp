// gpujoin-loadtest: a bounded load generator for gpujoind, in the spirit of
// Triton's perf_analyzer and redis-benchmark. For every setting (batch rows x
// concurrency) it drives Lookup, Join or Aggregate streams for a fixed time or
// number of requests, checks a sample of the answers against the known key ->
// value mapping, and reports throughput, payload MB/s and latency percentiles.
// With --echo the same settings also run against an in-process echo service
// (the transport ceiling), and each server row says what fraction of the echo
// throughput it reached.
//
// Exit status: 0 = every answer right and no errors; 1 = wrong answers or
// errors; 2 = bad options or the run could not start.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "echo_service.hpp"
#include "gpujoin/client/client.hpp"
#include "options.hpp"
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

int Main(int argc, char** argv) {
  CLI::App app{
      "gpujoin-loadtest: bounded load against gpujoind (lookup, join, aggregate) with answer "
      "checks, latency percentiles and an in-process echo transport ceiling"};
  std::string server = "127.0.0.1:50051";
  std::string token, tls_ca, tls_name, tls_client_cert, tls_client_key;
  std::string rpc_name = "lookup";
  std::string index = "loadtest";
  std::string build_keys_text;
  double load_factor = 0.5;
  bool keep_index = false;
  std::string batch_rows_text = "64K";
  std::string concurrency_text = "1";
  std::string concurrency_range;
  int channels = 1;
  int in_flight = 2;
  double duration = 5.0, warmup = 1.0;
  uint64_t requests = 0;
  double hit_ratio = 0.9;
  std::string keyspace_text;
  uint32_t seed = 1;
  uint32_t groups = 1024;
  std::string agg_op = "sum";
  std::string key_type = "u32";
  uint32_t multiplicity = 1;
  std::string join_kind = "inner";
  int verify_every = 4;
  bool echo = false, echo_only = false, json = false;
  std::string json_file;
  int max_message_bytes = 256 << 20;

  app.add_option("--server", server, "gpujoind address (host:port or unix:/path)")
      ->capture_default_str();
  app.add_option("--token", token, "bearer token sent with every call");
  app.add_option("--tls-ca", tls_ca, "PEM roots for a TLS server (empty = plaintext)");
  app.add_option("--tls-server-name", tls_name, "name checked against the TLS certificate");
  app.add_option("--tls-client-cert", tls_client_cert,
                 "PEM certificate chain presented to a server that requires client "
                 "certificates (gpujoind --tls-client-ca); with --tls-client-key");
  app.add_option("--tls-client-key", tls_client_key, "PEM private key of --tls-client-cert");
  app.add_option("--rpc", rpc_name, "lookup | join | aggregate")
      ->check(CLI::IsMember({"lookup", "join", "aggregate"}))
      ->capture_default_str();
  app.add_option("--index", index, "index to query (lookup, join)")->capture_default_str();
  app.add_option("--build-keys", build_keys_text,
                 "build --index first with this many keys (e.g. 1M) and check every sampled "
                 "answer value by value; without it the index must exist and only the "
                 "structure of answers is checked");
  app.add_option("--load-factor", load_factor, "target load factor of the built index")
      ->capture_default_str();
  app.add_flag("--keep-index", keep_index, "do not drop the index built with --build-keys");
  app.add_option("--batch-rows", batch_rows_text, "rows per batch, a list: 1K,64K,1M")
      ->capture_default_str();
  app.add_option("--concurrency", concurrency_text, "streams, a list: 1,4,16")
      ->capture_default_str();
  app.add_option("--concurrency-range", concurrency_range,
                 "streams as start:end:step (end inclusive); overrides --concurrency");
  app.add_option("--channels", channels, "connections the streams are spread over")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  app.add_option("--in-flight", in_flight, "batches outstanding per stream")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  app.add_option("--duration", duration,
                 "seconds measured per setting (an upper bound with "
                 "--requests)")
      ->check(CLI::Range(0.01, 3600.0))
      ->capture_default_str();
  app.add_option("--requests", requests, "measured batches per setting (0 = by --duration)")
      ->capture_default_str();
  app.add_option("--warmup", warmup, "seconds of unmeasured load before each setting")
      ->check(CLI::Range(0.0, 600.0))
      ->capture_default_str();
  app.add_option("--hit-ratio", hit_ratio, "fraction of query keys present in the index")
      ->capture_default_str();
  app.add_option("--keyspace", keyspace_text,
                 "keys are drawn below this bound (default 2^32; misses from [build-keys, "
                 "keyspace))");
  app.add_option("--seed", seed, "seed of keys, values and batches")->capture_default_str();
  app.add_option("--key-type", key_type,
                 "key word of the index and the query keys (lookup, join): u32, or u64 with "
                 "keys drawn over the full 64-bit range")
      ->check(CLI::IsMember({"u32", "u64"}))
      ->capture_default_str();
  auto* multiplicity_option =
      app.add_option("--multiplicity", multiplicity,
                     "rows per key of the index built with --build-keys (a keep_all index of "
                     "build-keys x N rows; a join hit yields N pairs)")
          ->check(CLI::Range(1u, 1u << 20));
  app.add_option("--join-kind", join_kind, "join: inner | left_outer | left_semi | left_anti")
      ->check(CLI::IsMember({"inner", "left_outer", "left_semi", "left_anti"}))
      ->capture_default_str();
  app.add_option("--groups", groups, "aggregate: number of groups")->capture_default_str();
  app.add_option("--agg-op", agg_op, "aggregate: count | sum | min | max | mean")
      ->check(CLI::IsMember({"count", "sum", "min", "max", "mean"}))
      ->capture_default_str();
  app.add_option("--verify-every", verify_every,
                 "check every n-th answer of a stream value by value (all answers are "
                 "checked structurally)")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_flag("--echo", echo, "also measure every setting against the in-process echo service");
  app.add_flag("--echo-only", echo_only, "measure only the echo service (no server needed)");
  app.add_flag("--json", json, "print JSON instead of the table");
  app.add_option("--json-file", json_file, "also write the JSON document to this file");
  app.add_option("--max-message-bytes", max_message_bytes, "largest gRPC message either way")
      ->check(CLI::Range(1 << 20, 1 << 30))
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  RunConfig cfg;
  WorkloadSpec& w = cfg.workload;
  w.rpc = rpc_name == "join"        ? Rpc::kJoin
          : rpc_name == "aggregate" ? Rpc::kAggregate
                                    : Rpc::kLookup;
  if (!build_keys_text.empty()) {
    auto n = ParseCount(build_keys_text, "--build-keys");
    if (!n.ok()) return Fail(n.status());
    w.build_keys = *n;
  }
  if (!keyspace_text.empty()) {
    auto n = ParseCount(keyspace_text, "--keyspace");
    if (!n.ok()) return Fail(n.status());
    w.keyspace = *n;
  }
  w.hit_ratio = hit_ratio;
  w.seed = seed;
  w.key_type = key_type == "u64" ? client::KeyType::kUint64 : client::KeyType::kUint32;
  w.multiplicity = multiplicity;
  w.keep_all = multiplicity_option->count() > 0;
  auto kind = client::ParseJoinKind(join_kind);
  if (!kind.ok()) return Fail(kind.status());
  w.join_kind = *kind;
  w.groups = groups;
  auto op = client::ParseAggregateOp(agg_op);
  if (!op.ok()) return Fail(op.status());
  w.aggregate_op = *op;
  if (absl::Status s = ValidateWorkloadSpec(w); !s.ok()) return Fail(s);
  if (w.rpc == Rpc::kAggregate && w.build_keys > 0) {
    return Fail(absl::InvalidArgumentError("--build-keys does not apply to --rpc aggregate"));
  }

  auto batch_rows = ParseCountList(batch_rows_text, "--batch-rows");
  if (!batch_rows.ok()) return Fail(batch_rows.status());
  auto concurrency = concurrency_range.empty()
                         ? ParseCountList(concurrency_text, "--concurrency")
                         : ParseRange(concurrency_range, "--concurrency-range");
  if (!concurrency.ok()) return Fail(concurrency.status());
  for (uint64_t c : *concurrency) {
    if (c > 4096) {
      return Fail(absl::InvalidArgumentError(
          absl::StrCat("--concurrency: ", c, " streams is more than the limit of 4096")));
    }
  }
  for (uint64_t r : *batch_rows) {
    // keys + the largest answer (lookup: 5 bytes per row) must fit one message;
    // 8 bytes per row also bounds a request of uint64 keys.
    if (r * 8 + 4096 > static_cast<uint64_t>(max_message_bytes)) {
      return Fail(absl::InvalidArgumentError(
          absl::StrCat("--batch-rows: ", r, " rows need messages of about ", r * 8,
                       " bytes, above --max-message-bytes ", max_message_bytes)));
    }
  }
  cfg.index = index;
  cfg.in_flight = in_flight;
  cfg.warmup_seconds = warmup;
  cfg.duration_seconds = duration;
  cfg.requests = requests;
  cfg.verify_every = verify_every;

  client::ConnectOptions base;
  base.token = token;
  base.tls_ca_file = tls_ca;
  base.tls_server_name = tls_name;
  base.tls_client_cert_file = tls_client_cert;
  base.tls_client_key_file = tls_client_key;
  base.max_message_bytes = max_message_bytes;

  RunHeader header;
  header.command_line = absl::StrJoin(std::vector<std::string>(argv, argv + argc), " ");
  header.hit_ratio = w.rpc == Rpc::kAggregate ? 0 : hit_ratio;
  header.seed = seed;
  if (w.rpc == Rpc::kAggregate) {
    header.aggregate = absl::StrCat(agg_op, " over ", groups, " groups");
  } else {
    header.index = index;
    header.index_rows = BuildRows(w);
    header.key_type = std::string(client::KeyTypeName(w.key_type));
    header.multiplicity = w.build_keys > 0 ? w.multiplicity : 0;
    if (w.build_keys > 0) {
      header.duplicates = std::string(client::DuplicatePolicyName(
          w.keep_all ? client::DuplicatePolicy::kKeepAll : client::DuplicatePolicy::kLowestRow));
    }
    if (w.rpc == Rpc::kJoin) header.join_kind = join_kind;
  }

  std::vector<std::unique_ptr<client::Client>> server_clients;
  bool built = false;
  if (!echo_only) {
    auto clients = ConnectAll(base, server, channels);
    if (!clients.ok()) return Fail(clients.status());
    server_clients = std::move(*clients);
    client::Client& c0 = *server_clients[0];
    auto info = c0.GetServerInfo();
    if (!info.ok()) {
      return Fail(absl::Status(
          info.status().code(),
          absl::StrCat("cannot reach gpujoind at ", server, ": ", info.status().message())));
    }
    header.server = server;
    header.backend = info->backend;
    header.device = info->device_name;
    if (w.rpc != Rpc::kAggregate) {
      if (w.build_keys > 0) {
        BuildData data = MakeBuildData(w);
        client::IndexSpec spec;
        spec.name = index;
        spec.expected_rows = w.build_keys;  // the table holds one slot per distinct key
        spec.target_load_factor = load_factor;
        spec.explicit_values = true;
        spec.replace = true;
        spec.key_type = w.key_type;
        spec.duplicates =
            w.keep_all ? client::DuplicatePolicy::kKeepAll : client::DuplicatePolicy::kLowestRow;
        std::cerr << "building index '" << index << "' with " << w.build_keys << " keys"
                  << (w.keep_all ? absl::StrCat(" x ", w.multiplicity, " rows (keep_all)") : "")
                  << "...\n";
        auto built_info = c0.BuildIndexFromColumns(spec, data.Keys(), data.values);
        if (!built_info.ok()) return Fail(built_info.status());
        built = true;
        std::cerr << "built in " << built_info->build_seconds << " s (capacity "
                  << built_info->capacity << ", load factor " << built_info->load_factor
                  << ", backend " << built_info->backend << ")\n";
      } else {
        auto d = c0.DescribeIndex(index);
        if (!d.ok()) return Fail(d.status());
        if (d->key_type != w.key_type) {
          return Fail(absl::InvalidArgumentError(absl::StrCat(
              "index '", index, "' has ", std::string(client::KeyTypeName(d->key_type)),
              " keys; give --key-type ", d->key_type == client::KeyType::kUint64 ? "u64" : "u32")));
        }
        w.keep_all = d->duplicates == client::DuplicatePolicy::kKeepAll;
        if (w.keep_all && w.rpc == Rpc::kJoin &&
            (w.join_kind == client::JoinKind::kInner ||
             w.join_kind == client::JoinKind::kLeftOuter)) {
          // Its pairs per left row are unknown, so no capacity is known to be enough.
          return Fail(absl::InvalidArgumentError(absl::StrCat(
              "index '", index, "' keeps every row of a key (keep_all): an ", join_kind,
              " join's pair count is unknown; build the index here (--build-keys N "
              "--multiplicity M) or use --join-kind left_semi or left_anti")));
        }
        header.duplicates = std::string(client::DuplicatePolicyName(d->duplicates));
      }
    }
  }

  std::unique_ptr<EchoServer> echo_server;
  std::vector<std::unique_ptr<client::Client>> echo_clients;
  if (echo || echo_only) {
    // Same kind of channel as the server's: a unix socket for a unix target, else loopback TCP.
    std::string listen = "127.0.0.1:0";
    if (server.rfind("unix:", 0) == 0) {
      listen = absl::StrCat("unix:/tmp/gpujoin-loadtest-echo-", getpid(), ".sock");
    }
    auto es = EchoServer::Start(listen, max_message_bytes);
    if (!es.ok()) return Fail(es.status());
    echo_server = std::move(*es);
    auto clients = ConnectAll(base, echo_server->address(), channels);
    if (!clients.ok()) return Fail(clients.status());
    echo_clients = std::move(*clients);
  }

  std::vector<SettingResult> results;
  const auto server_raw = Raw(server_clients);
  const auto echo_raw = Raw(echo_clients);
  for (uint64_t rows : *batch_rows) {
    const uint32_t pairs_per_row = w.rpc == Rpc::kJoin ? w.multiplicity : 1;
    const BatchPool pool =
        MakeBatchPool(w, rows, PoolSizeFor(rows, size_t{96} << 20, pairs_per_row));
    for (uint64_t conc : *concurrency) {
      for (Target t : {Target::kServer, Target::kEcho}) {
        const auto& clients = t == Target::kServer ? server_raw : echo_raw;
        if (clients.empty()) continue;
        std::cerr << RpcName(w.rpc) << " " << TargetName(t) << " rows=" << rows
                  << " concurrency=" << conc << " ...";
        results.push_back(RunSetting(t, clients, pool, static_cast<int>(conc), cfg));
        const SettingResult& r = results.back();
        std::cerr << " " << static_cast<uint64_t>(r.KeysPerSecond()) << " keys/s, p99 "
                  << r.latency.p99_ms << " ms, errors " << r.ErrorCount() << ", wrong "
                  << r.wrong_answers << "\n";
      }
    }
  }

  if (built && !keep_index) {
    auto d = server_clients[0]->DropIndex(index);
    if (!d.ok())
      std::cerr << "warning: could not drop index '" << index << "': " << d.status() << "\n";
  }

  if (!json_file.empty()) {
    std::ofstream f(json_file);
    f << FormatJson(header, results);
    if (!f) std::cerr << "warning: could not write --json-file '" << json_file << "'\n";
  }
  std::cout << (json ? FormatJson(header, results) : FormatTable(header, results));
  std::cout.flush();
  for (const SettingResult& r : results) {
    if (r.ErrorCount() > 0 || r.wrong_answers > 0) return 1;
  }
  return 0;
}

}  // namespace
}  // namespace gpujoin::loadtest

int main(int argc, char** argv) { return gpujoin::loadtest::Main(argc, argv); }
