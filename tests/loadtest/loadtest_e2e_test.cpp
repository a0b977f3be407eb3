// End-to-end: short, bounded gpujoin-loadtest runs against a real gpujoind (CPU
// backend, free loopback port). Every run must finish by itself with exit code 0,
// print JSON that parses, and report zero errors and zero wrong answers; the
// answers it checked are the proof that the service path returns the right rows.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "gpujoin/testing/redis_process.hpp"
#include "gpujoin/testing/server_process.hpp"
#include "gpujoin/testing/subprocess.hpp"

namespace gpujoin::loadtest::testing {
namespace {

using gpujoin::testing::RedisProcess;
using gpujoin::testing::RedisServerBinary;
using gpujoin::testing::RunProcess;
using gpujoin::testing::RunResult;
using gpujoin::testing::ServerProcess;

// The load tester binary: $GPUJOIN_LOADTEST, else the path compiled in.
std::string LoadtestBinary() {
  const char* v = std::getenv("GPUJOIN_LOADTEST");
  if (v != nullptr && *v != '\0') return v;
  return GPUJOIN_LOADTEST_PATH;
}

class LoadtestAgainstServer : public ::testing::Test {
 protected:
  void SetUp() override {
    // gpujoind: $GPUJOIND, else this build's binary.
    server_ = std::make_unique<ServerProcess>();
    ASSERT_TRUE(server_->ready()) << "gpujoind did not start; log:\n" << server_->log();
  }

  // Runs the load tester with `args` (plus --server and --json) and returns its JSON.
  nlohmann::json RunJson(std::vector<std::string> args) {
    args.insert(args.begin(), {LoadtestBinary(), "--server", server_->grpc_address(), "--json"});
    const RunResult out = RunProcess(args, {.timeout = std::chrono::seconds(120)});
    EXPECT_FALSE(out.timed_out) << "the load tester did not stop by itself";
    EXPECT_EQ(out.code, 0) << "stderr:\n"
                           << out.err << "\nstdout:\n"
                           << out.out << "\nserver log:\n"
                           << server_->log();
    nlohmann::json doc = nlohmann::json::parse(out.out, nullptr, /*allow_exceptions=*/false);
    EXPECT_FALSE(doc.is_discarded()) << "--json output does not parse:\n" << out.out;
    return doc;
  }

  // The common assertions: no errors, no wrong answers, answers actually checked.
  static void ExpectClean(const nlohmann::json& doc, size_t settings) {
    ASSERT_TRUE(doc.is_object());
    EXPECT_EQ(doc["total_errors"].get<uint64_t>(), 0u) << doc.dump(2);
    EXPECT_EQ(doc["total_wrong_answers"].get<uint64_t>(), 0u) << doc.dump(2);
    ASSERT_EQ(doc["results"].size(), settings) << doc.dump(2);
    for (const auto& r : doc["results"]) {
      EXPECT_EQ(r["error_count"].get<uint64_t>(), 0u) << r.dump(2);
      EXPECT_EQ(r["wrong_answers"].get<uint64_t>(), 0u) << r.dump(2);
      EXPECT_GT(r["batches"].get<uint64_t>(), 0u) << r.dump(2);
      EXPECT_GT(r["checked_answers"].get<uint64_t>(), 0u) << r.dump(2);
      EXPECT_EQ(r["keys"].get<uint64_t>(),
                r["batches"].get<uint64_t>() * r["batch_rows"].get<uint64_t>());
    }
  }

  std::unique_ptr<ServerProcess> server_;
};

TEST_F(LoadtestAgainstServer, LookupWithEchoCeiling) {
  const auto doc =
      RunJson({"--rpc", "lookup", "--build-keys", "20000", "--batch-rows", "1K,16K",
               "--concurrency", "1,3", "--channels", "2", "--in-flight", "2", "--duration", "0.3",
               "--warmup", "0.1", "--verify-every", "1", "--echo"});
  ExpectClean(doc, 8);
  EXPECT_EQ(doc["header"]["backend"], "cpu");
  int with_fraction = 0;
  for (const auto& r : doc["results"]) {
    if (r["target"] == "server") {
      ASSERT_TRUE(r.contains("fraction_of_echo")) << r.dump(2);
      EXPECT_GT(r["fraction_of_echo"].get<double>(), 0.0);
      ++with_fraction;
    }
  }
  EXPECT_EQ(with_fraction, 4);
}

// --payload: the built index gets two payload columns, every lookup selects
// them, and every answer's payload rows (server and echo) are checked.
TEST_F(LoadtestAgainstServer, LookupSelectingPayload) {
  const auto doc = RunJson({"--rpc", "lookup", "--build-keys", "20000", "--payload",
                            "--batch-rows", "100,4K", "--concurrency", "1,2", "--duration",
                            "0.3", "--warmup", "0.1", "--verify-every", "1", "--echo"});
  ExpectClean(doc, 8);
  EXPECT_EQ(doc["header"]["payload"], true);
}

TEST_F(LoadtestAgainstServer, JoinWithMisses) {
  const auto doc = RunJson({"--rpc", "join", "--build-keys", "10000", "--hit-ratio", "0.6",
                            "--batch-rows", "4K", "--concurrency", "2", "--duration", "0.3",
                            "--warmup", "0.1", "--verify-every", "1"});
  ExpectClean(doc, 1);
  EXPECT_EQ(doc["results"][0]["rpc"], "join");
}

TEST_F(LoadtestAgainstServer, AggregateByRequestCount) {
  const auto doc =
      RunJson({"--rpc", "aggregate", "--agg-op", "sum", "--groups", "100", "--batch-rows", "2K",
               "--concurrency", "2", "--requests", "20", "--duration", "30", "--warmup", "0"});
  ExpectClean(doc, 1);
  EXPECT_EQ(doc["results"][0]["batches"].get<uint64_t>(), 20u);
}

// --key-type u64: a uint64 index with keys over the full 64-bit range,
// every sampled lookup and join answer checked value by value.
TEST_F(LoadtestAgainstServer, Uint64KeysLookupAndJoin) {
  for (const char* rpc : {"lookup", "join"}) {
    SCOPED_TRACE(rpc);
    const auto doc = RunJson({"--rpc", rpc, "--key-type", "u64", "--build-keys", "20000",
                              "--hit-ratio", "0.7", "--batch-rows", "4K", "--concurrency", "2",
                              "--duration", "0.3", "--warmup", "0.1", "--verify-every", "1"});
    ExpectClean(doc, 1);
    EXPECT_EQ(doc["header"]["key_type"], "uint64");
  }
}

// --key-type str16, str32, uuid, pair: an index with a key schema (one string
// column, or two uint32 columns) built by the load tester; every sampled
// lookup and join answer checked value by value and the found count exact.
TEST_F(LoadtestAgainstServer, KeyColumnsLookupAndJoin) {
  for (const char* kind : {"str16", "str32", "uuid", "pair"}) {
    for (const char* rpc : {"lookup", "join"}) {
      SCOPED_TRACE(std::string(kind) + " " + rpc);
      const auto doc = RunJson({"--rpc", rpc, "--key-type", kind, "--build-keys", "20000",
                                "--hit-ratio", "0.7", "--batch-rows", "4K", "--concurrency", "2",
                                "--duration", "0.3", "--warmup", "0.1", "--verify-every", "1"});
      ExpectClean(doc, 1);
      EXPECT_EQ(doc["header"]["key_type"], kind);
      const auto& r = doc["results"][0];
      // --verify-every 1: every answer, warm-up ones too, checked value by value.
      EXPECT_GE(r["checked_answers"].get<uint64_t>(), r["batches"].get<uint64_t>()) << r.dump(2);
    }
  }
}

// A string-keyed index left behind answers a later run of the same kind
// (keys drawn from the keyspace, answers checked for structure); another
// kind is a startup error naming the ones that fit.
TEST_F(LoadtestAgainstServer, KeyColumnsOfAnExistingIndexMustMatch) {
  RunJson({"--rpc", "lookup", "--key-type", "uuid", "--build-keys", "1000", "--keep-index",
           "--index", "uuids", "--batch-rows", "1K", "--requests", "2", "--warmup", "0"});
  const auto doc =
      RunJson({"--rpc", "join", "--key-type", "str16", "--index", "uuids", "--keyspace", "2000",
               "--batch-rows", "1K", "--duration", "0.2", "--warmup", "0", "--verify-every", "1"});
  ExpectClean(doc, 1);
  for (const char* wrong : {"u32", "pair"}) {
    const RunResult out =
        RunProcess({LoadtestBinary(), "--server", server_->grpc_address(), "--index", "uuids",
                    "--key-type", wrong, "--duration", "0.1", "--warmup", "0"},
                   {.timeout = std::chrono::seconds(60)});
    EXPECT_EQ(out.code, 2) << out.err;
    EXPECT_NE(out.err.find("index 'uuids' has key columns (string); give --key-type str16, "
                           "str32 or uuid"),
              std::string::npos)
        << out.err;
  }
}

TEST_F(LoadtestAgainstServer, KeyTypeOfAnExistingIndexMustMatch) {
  // Leave a uint64 index behind, then query it as uint32.
  RunJson({"--rpc", "lookup", "--key-type", "u64", "--build-keys", "1000", "--keep-index",
           "--index", "wide", "--batch-rows", "1K", "--requests", "2", "--warmup", "0"});
  const RunResult out = RunProcess({LoadtestBinary(), "--server", server_->grpc_address(),
                                    "--index", "wide", "--duration", "0.1", "--warmup", "0"},
                                   {.timeout = std::chrono::seconds(60)});
  EXPECT_EQ(out.code, 2) << out.err;
  EXPECT_NE(out.err.find("index 'wide' has uint64 keys; give --key-type u64"), std::string::npos)
      << out.err;
}

// --multiplicity: a keep_all index of build-keys x 3 rows, each key's
// rows in different chunks; every sampled join answer of every --join-kind is
// compared pair by pair with the known rows, and lookups with the group size.
TEST_F(LoadtestAgainstServer, MultiplicityJoinsEveryKindAndLooksUp) {
  for (const char* kind : {"inner", "left_outer", "left_semi", "left_anti"}) {
    SCOPED_TRACE(kind);
    const auto doc =
        RunJson({"--rpc",          "join", "--build-keys", "4000", "--multiplicity", "3",
                 "--join-kind",    kind,   "--hit-ratio",  "0.6",  "--batch-rows",   "2K",
                 "--concurrency",  "2",    "--duration",   "0.3",  "--warmup",       "0.1",
                 "--verify-every", "1"});
    ExpectClean(doc, 1);
    EXPECT_EQ(doc["header"]["multiplicity"], 3);
    EXPECT_EQ(doc["header"]["duplicates"], "keep_all");
    EXPECT_EQ(doc["header"]["join_kind"], kind);
    EXPECT_EQ(doc["header"]["index_rows"], 12000);
    // Pairs per batch of 2048 rows with round(0.6 x 2048) = 1229 hits: 3 per hit
    // (inner), and one per miss (left outer, anti), or one per hit (semi).
    const std::map<std::string, uint64_t> per_batch = {{"inner", 3 * 1229},
                                                       {"left_outer", 3 * 1229 + 819},
                                                       {"left_semi", 1229},
                                                       {"left_anti", 819}};
    const auto& r = doc["results"][0];
    EXPECT_EQ(r["pairs"].get<uint64_t>(), per_batch.at(kind) * r["batches"].get<uint64_t>())
        << r.dump(2);
  }
  const auto lookup = RunJson({"--rpc", "lookup", "--build-keys", "4000", "--multiplicity", "4",
                               "--key-type", "u64", "--batch-rows", "2K", "--duration", "0.3",
                               "--warmup", "0.1", "--verify-every", "1"});
  ExpectClean(lookup, 1);
}

// An existing keep_all index has unknown groups: joins that repeat left rows
// are refused at startup; semi joins run.
TEST_F(LoadtestAgainstServer, ExistingKeepAllIndexRunsOnlyKindsOfKnownSize) {
  RunJson({"--rpc", "lookup", "--build-keys", "1000", "--multiplicity", "2", "--keep-index",
           "--index", "multi", "--batch-rows", "1K", "--requests", "2", "--warmup", "0"});
  const RunResult out =
      RunProcess({LoadtestBinary(), "--server", server_->grpc_address(), "--rpc", "join", "--index",
                  "multi", "--duration", "0.1", "--warmup", "0"},
                 {.timeout = std::chrono::seconds(60)});
  EXPECT_EQ(out.code, 2) << out.err;
  EXPECT_NE(out.err.find("index 'multi' keeps every row of a key (keep_all)"), std::string::npos)
      << out.err;
  const auto semi = RunJson({"--rpc", "join", "--index", "multi", "--join-kind", "left_semi",
                             "--keyspace", "4096", "--batch-rows", "1K", "--duration", "0.2",
                             "--warmup", "0", "--verify-every", "1"});
  ExpectClean(semi, 1);
  EXPECT_EQ(semi["header"]["duplicates"], "keep_all");
}

// Upserts alone (--rpc mutate), then beside lookups (--mutate-streams) over a
// small keyspace, so that lookups keep meeting misses the mutations inserted:
// every answer of both checked, each RPC a row of its own.
TEST_F(LoadtestAgainstServer, MutateAloneAndBesideLookups) {
  const auto alone = RunJson({"--rpc", "mutate", "--build-keys", "20000", "--keyspace", "40000",
                              "--batch-rows", "1K", "--concurrency", "1,2", "--duration", "0.4",
                              "--warmup", "0.1"});
  ExpectClean(alone, 2);
  EXPECT_EQ(alone["header"]["mutate"], "upserts only");
  for (const auto& r : alone["results"]) EXPECT_EQ(r["rpc"], "mutate") << r.dump(2);

  const auto mixed =
      RunJson({"--rpc", "lookup", "--build-keys", "20000", "--keyspace", "40000", "--batch-rows",
               "4K", "--concurrency", "2", "--mutate-streams", "1", "--mutate-rows", "512",
               "--duration", "0.6", "--warmup", "0.1", "--verify-every", "1", "--echo"});
  ExpectClean(mixed, 4);
  int lookups = 0, mutations = 0;
  for (const auto& r : mixed["results"]) {
    if (r["rpc"] == "lookup") {
      ++lookups;
      EXPECT_EQ(r["batch_rows"], 4096) << r.dump(2);
      EXPECT_EQ(r["concurrency"], 2) << r.dump(2);
    } else {
      ++mutations;
      EXPECT_EQ(r["rpc"], "mutate") << r.dump(2);
      EXPECT_EQ(r["batch_rows"], 512) << r.dump(2);
      EXPECT_EQ(r["concurrency"], 1) << r.dump(2);
      EXPECT_GT(r["latency_ms"]["p99"].get<double>(), 0.0) << r.dump(2);
    }
  }
  EXPECT_EQ(lookups, 2);  // server and echo
  EXPECT_EQ(mutations, 2);
}

// Mutations need a lowest_row index (an upsert into a keep_all index appends)
// and run beside lookups only.
TEST_F(LoadtestAgainstServer, MutationsNeedALowestRowIndexAndLookups) {
  RunJson({"--rpc", "lookup", "--build-keys", "1000", "--multiplicity", "2", "--keep-index",
           "--index", "multi", "--batch-rows", "1K", "--requests", "2", "--warmup", "0"});
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--rpc", "mutate", "--index", "multi"}, "index 'multi' keeps every row of a key"},
      {{"--rpc", "mutate", "--build-keys", "1000", "--multiplicity", "2"}, "keep_all"},
      {{"--rpc", "join", "--build-keys", "1000", "--mutate-streams", "1"}, "--rpc lookup"},
      {{"--build-keys", "1000", "--mutate-rows", "64"}, "--mutate-streams"},
  };
  for (const auto& [args, message] : cases) {
    std::vector<std::string> argv{LoadtestBinary(), "--server", server_->grpc_address(),
                                  "--duration", "0.1", "--warmup", "0"};
    argv.insert(argv.end(), args.begin(), args.end());
    const RunResult out = RunProcess(argv, {.timeout = std::chrono::seconds(60)});
    EXPECT_EQ(out.code, 2) << out.err;
    EXPECT_NE(out.err.find(message), std::string::npos) << out.err;
  }
}

// --redis: the same lookups against gpujoind, the echo service and a
// redis-server the load tester loaded with the index's mapping; every target's
// sampled answers checked value by value, and each server row set beside the
// others.
TEST_F(LoadtestAgainstServer, RedisBesideServerAndEcho) {
  if (RedisServerBinary().empty()) {
    GTEST_SKIP() << "redis-server not found ($REDIS_SERVER, $PATH, /usr/bin): the --redis "
                    "target is not tested";
  }
  RedisProcess redis;
  ASSERT_TRUE(redis.ready()) << "redis-server did not start:\n" << redis.log();
  const auto doc = RunJson({"--redis", redis.address(), "--build-keys", "10K", "--batch-rows",
                            "100", "--duration", "0.5", "--echo"});
  ExpectClean(doc, 3);
  EXPECT_EQ(doc["header"]["redis"], redis.address());
  std::map<std::string, nlohmann::json> by_target;
  for (const auto& r : doc["results"]) by_target[r["target"].get<std::string>()] = r;
  ASSERT_EQ(by_target.size(), 3u) << doc.dump(2);
  const auto& redis_row = by_target.at("redis");
  EXPECT_EQ(redis_row["channels"], 1) << redis_row.dump(2);  // one connection per stream
  const auto& server = by_target.at("server");
  for (const char* field : {"p50_over_echo", "p50_over_redis", "keys_per_second_over_redis"}) {
    ASSERT_TRUE(server.contains(field)) << field << "\n" << server.dump(2);
    EXPECT_GT(server[field].get<double>(), 0.0) << field;
  }
  for (const auto& [target, r] : by_target) {
    EXPECT_GE(r["latency_ms"]["p999"].get<double>(), r["latency_ms"]["p99"].get<double>())
        << r.dump(2);
  }
}

// Redis answers lookups of uint32 keys of a known mapping, one value per key:
// anything else is a usage error before anything is measured.
TEST_F(LoadtestAgainstServer, RedisNeedsLookupsOfAKnownUint32Mapping) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--rpc", "join", "--build-keys", "1000"}, "give --rpc lookup"},
      {{"--key-type", "u64", "--build-keys", "1000"}, "give --key-type u32"},
      {{"--index", "loadtest"}, "give --build-keys"},
      {{"--build-keys", "1000", "--multiplicity", "2"}, "leave out --multiplicity"},
      {{"--build-keys", "1000", "--mutate-streams", "1"}, "leave out --mutate-streams"},
  };
  for (const auto& [args, message] : cases) {
    std::vector<std::string> argv{LoadtestBinary(), "--server", server_->grpc_address(), "--redis",
                                  "127.0.0.1:1", "--duration", "0.1", "--warmup", "0"};
    argv.insert(argv.end(), args.begin(), args.end());
    const RunResult out = RunProcess(argv, {.timeout = std::chrono::seconds(60)});
    EXPECT_EQ(out.code, 2) << out.err;
    EXPECT_NE(out.err.find(message), std::string::npos) << out.err;
  }
}

TEST_F(LoadtestAgainstServer, MissingIndexIsAStartupError) {
  const RunResult out =
      RunProcess({LoadtestBinary(), "--server", server_->grpc_address(), "--index", "no_such_index",
                  "--duration", "0.1", "--warmup", "0"},
                 {.timeout = std::chrono::seconds(60)});
  EXPECT_EQ(out.code, 2) << out.err;
  EXPECT_NE(out.err.find("no_such_index"), std::string::npos) << out.err;
}

}  // namespace
}  // namespace gpujoin::loadtest::testing
