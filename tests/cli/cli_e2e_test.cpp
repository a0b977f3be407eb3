// End-to-end tests of the `gpujoin` CLI against a real gpujoind (CPU backend,
// free loopback port, bearer-token auth), on the example data in examples/.
// Expected results are computed here from the raw files with this file's own
// small CSV reader (not the CLI's), and expected hashes with the engine's host
// hasher, so a bug in the CLI's readers or formatting cannot hide itself.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "gpujoin/engine/backend.hpp"
#include "gpujoin/engine/graph.hpp"
#include "gpujoin/engine/hashing.hpp"
#include "gpujoin/testing/csv.hpp"
#include "gpujoin/testing/files.hpp"
#include "gpujoin/testing/loopback.hpp"
#include "gpujoin/testing/server_process.hpp"
#include "gpujoin/testing/subprocess.hpp"
#include "hashing/hash_host.hpp"

namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

const std::string kCli = GPUJOIN_CLI_BIN;
const std::string kExamples = GPUJOIN_EXAMPLES_DIR;
const std::string kToken = "s3cret-token";

using gpujoin::testing::FreePort;
using gpujoin::testing::RunOptions;
using gpujoin::testing::RunProcess;
using gpujoin::testing::RunResult;
using gpujoin::testing::ServerProcess;
using gpujoin::testing::Slurp;

size_t LineCount(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

// ---------------------------------------------------------------- independent CSV reader

using gpujoin::testing::CsvRow;
using gpujoin::testing::ReadCsv;
using gpujoin::testing::ReadCsvText;

size_t Col(const CsvRow& header, const std::string& name) {
  for (size_t i = 0; i < header.size(); ++i) {
    if (header[i] == name) return i;
  }
  ADD_FAILURE() << "no column " << name;
  return 0;
}

// ---------------------------------------------------------------- fixture

// Runs `argv` without the CLI's environment variables GPUJOIN_SERVER and
// GPUJOIN_TOKEN (the tests pass everything explicitly, or through
// options.set_env), never changing this process's environment.
RunResult RunCli(const std::vector<std::string>& argv, RunOptions options = {}) {
  options.unset_env.push_back("GPUJOIN_SERVER");
  options.unset_env.push_back("GPUJOIN_TOKEN");
  return RunProcess(argv, options);
}

class CliEndToEnd : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("gpujoin_cli_e2e_" + std::to_string(getpid()));
    fs::create_directories(dir_);
    server_ = new ServerProcess({.token = kToken});
    address_ = server_->grpc_address();
  }

  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  void SetUp() override {
    ASSERT_FALSE(address_.empty()) << "gpujoind did not start; its log:\n" << server_->log();
  }

  // Runs the CLI against the test server with the right token.
  static RunResult Cli(std::vector<std::string> args, const std::string& stdin_file = "/dev/null") {
    std::vector<std::string> argv = {kCli,   "--server",  address_, "--token",
                                     kToken, "--timeout", "60"};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunCli(argv, {.stdin_path = stdin_file});
  }

  // Builds the "sensors" index (idempotent thanks to --replace).
  static Json BuildSensors() {
    RunResult r = Cli({"--json", "index", "build", "sensors", "--from", Ex("sensors.csv"), "--key",
                       "sensor_id", "--replace"});
    EXPECT_EQ(r.code, 0) << r.err;
    return Json::parse(r.out, nullptr, false);
  }

  static std::string Ex(const std::string& name) { return kExamples + "/" + name; }
  static fs::path Tmp(const std::string& name) { return dir_ / name; }

  static inline fs::path dir_;
  static inline ServerProcess* server_ = nullptr;
  static inline std::string address_;
};

// Position of every sensor ID in sensors.csv (its row number, from 0).
std::unordered_map<uint32_t, uint32_t> SensorRows(const std::vector<CsvRow>& sensors) {
  std::unordered_map<uint32_t, uint32_t> rows;
  const size_t id = Col(sensors[0], "sensor_id");
  for (size_t r = 1; r < sensors.size(); ++r) {
    rows.emplace(static_cast<uint32_t>(std::stoul(*sensors[r][id])), static_cast<uint32_t>(r - 1));
  }
  return rows;
}

// ---------------------------------------------------------------- commands

TEST_F(CliEndToEnd, HealthAndInfo) {
  RunResult h = Cli({"health"});
  EXPECT_EQ(h.code, 0) << h.err;
  EXPECT_EQ(h.out, "SERVING\n");
  RunResult i = Cli({"--json", "info"});
  ASSERT_EQ(i.code, 0) << i.err;
  Json j = Json::parse(i.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << i.out;
  EXPECT_EQ(j["backend"], "cpu");
  EXPECT_EQ(j["serving"], true);
  EXPECT_GT(j["max_pending_response_bytes"].get<uint64_t>(), 0u);
  EXPECT_EQ(j["pending_response_bytes"], 0);
  EXPECT_GT(j["max_result_bytes"].get<uint64_t>(), 0u);
  RunResult human = Cli({"info"});
  ASSERT_EQ(human.code, 0) << human.err;
  EXPECT_NE(human.out.find("backend      cpu"), std::string::npos) << human.out;
  EXPECT_NE(human.out.find("responses    0 B waiting to be read, limit "), std::string::npos)
      << human.out;
}

TEST_F(CliEndToEnd, IndexBuildReportsStatisticsAndVerdict) {
  const auto sensors = ReadCsv(Ex("sensors.csv"));
  Json j = BuildSensors();
  ASSERT_FALSE(j.is_discarded());
  EXPECT_EQ(j["index"]["name"], "sensors");
  EXPECT_EQ(j["index"]["rows"], sensors.size() - 1);
  EXPECT_EQ(j["index"]["statistics"]["unique_keys"], SensorRows(sensors).size());
  EXPECT_EQ(j["index"]["statistics"]["duplicate_rows"], 0);
  EXPECT_EQ(j["index"]["statistics"]["overflow_rows"], 0);
  EXPECT_EQ(j["health"]["verdict"], "ok");

  // Human output: load factor and health line.
  RunResult r = Cli({"index", "build", "sensors_small", "--from", Ex("sensors.csv"), "--key",
                     "sensor_id", "--capacity", "512", "--max-probes", "2", "--replace"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("load factor"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("health       warning"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("NOT in the index"), std::string::npos) << r.out;
  // Without --replace a live name is refused by the server.
  RunResult again = Cli({"index", "build", "sensors_small", "--from", Ex("sensors.csv"), "--key",
                         "sensor_id", "--capacity", "512"});
  EXPECT_EQ(again.code, 1);
  EXPECT_NE(again.err.find("ALREADY_EXISTS"), std::string::npos) << again.err;
  EXPECT_EQ(LineCount(again.err), 1u) << again.err;
  EXPECT_EQ(Cli({"index", "drop", "sensors_small"}).code, 0);
}

TEST_F(CliEndToEnd, IndexLsDescribeDrop) {
  ASSERT_FALSE(BuildSensors().is_discarded());
  RunResult b = Cli({"--json", "index", "build", "scratch", "--from", Ex("sensors.csv"), "--key",
                     "sensor_id", "--row-ids", "--first-row", "1000", "--replace"});
  ASSERT_EQ(b.code, 0) << b.err;
  RunResult ls = Cli({"--json", "index", "ls"});
  ASSERT_EQ(ls.code, 0) << ls.err;
  Json l = Json::parse(ls.out, nullptr, false);
  ASSERT_TRUE(l.contains("indexes")) << ls.out;
  std::vector<std::string> names;
  for (const auto& i : l["indexes"]) names.push_back(i["name"]);
  EXPECT_NE(std::find(names.begin(), names.end(), "sensors"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "scratch"), names.end());
  RunResult csv = Cli({"index", "ls"});  // not a terminal: CSV
  ASSERT_EQ(csv.code, 0);
  EXPECT_EQ(csv.out.rfind("name,version,rows,", 0), 0u) << csv.out;

  RunResult d = Cli({"--json", "index", "describe", "scratch"});
  ASSERT_EQ(d.code, 0) << d.err;
  Json dj = Json::parse(d.out, nullptr, false);
  EXPECT_EQ(dj["index"]["first_value"], 1000);
  EXPECT_EQ(dj["index"]["explicit_values"], false);
  EXPECT_EQ(dj["index"]["placement"], "partitioned");

  // --placement travels with the spec; describe shows it.
  RunResult r = Cli({"--json", "index", "build", "scratch", "--from", Ex("sensors.csv"), "--key",
                     "sensor_id", "--placement", "replicated", "--replace"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(Json::parse(r.out, nullptr, false)["index"]["placement"], "replicated") << r.out;
  RunResult text = Cli({"index", "describe", "scratch"});
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("placement    replicated"), std::string::npos) << text.out;
  RunResult bad = Cli({"index", "build", "scratch", "--from", Ex("sensors.csv"), "--key",
                       "sensor_id", "--placement", "everywhere", "--replace"});
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("--placement"), std::string::npos) << bad.err;

  RunResult drop = Cli({"--json", "index", "drop", "scratch"});
  ASSERT_EQ(drop.code, 0) << drop.err;
  EXPECT_EQ(Json::parse(drop.out)["dropped"], "scratch");
  RunResult gone = Cli({"index", "describe", "scratch"});
  EXPECT_EQ(gone.code, 1);
  EXPECT_NE(gone.err.find("NOT_FOUND"), std::string::npos) << gone.err;
  EXPECT_EQ(LineCount(gone.err), 1u);
}

TEST_F(CliEndToEnd, LookupAppendsValueAndFoundInInputOrder) {
  const auto sensors = ReadCsv(Ex("sensors.csv"));
  const auto events = ReadCsv(Ex("events.csv"));
  const auto pos = SensorRows(sensors);
  ASSERT_FALSE(BuildSensors().is_discarded());
  // Small batches: several batches in flight, results concatenated in order.
  RunResult r = Cli({"--batch-rows", "333", "--in-flight", "3", "lookup", "sensors", "--from",
                     Ex("events.csv"), "--key", "sensor_id", "--out", Tmp("lookup.csv")});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto out = ReadCsv(Tmp("lookup.csv"));
  ASSERT_EQ(out.size(), events.size());
  CsvRow header = events[0];
  header.emplace_back("value");
  header.emplace_back("found");
  EXPECT_EQ(out[0], header);
  const size_t key = Col(events[0], "sensor_id");
  size_t found = 0;
  for (size_t i = 1; i < events.size(); ++i) {
    CsvRow want = events[i];
    auto it = pos.find(static_cast<uint32_t>(std::stoul(*events[i][key])));
    if (it != pos.end()) {
      ++found;
      want.emplace_back(std::to_string(it->second));
      want.emplace_back("true");
    } else {
      want.emplace_back(std::nullopt);
      want.emplace_back("false");
    }
    ASSERT_EQ(out[i], want) << "row " << i;
  }
  EXPECT_GT(found, 0u);
  EXPECT_LT(found, events.size() - 1);  // the data has unknown sensors

  // --json with rows inline, from a raw .u32 file.
  RunResult j = Cli({"--json", "lookup", "sensors", "--from", Ex("probe_ids.u32"), "--key", "key"});
  ASSERT_EQ(j.code, 0) << j.err;
  Json doc = Json::parse(j.out, nullptr, false);
  ASSERT_FALSE(doc.is_discarded());
  const std::string raw = Slurp(Ex("probe_ids.u32"));
  ASSERT_EQ(doc["rows"].size(), raw.size() / 4);
  uint64_t hits = 0;
  for (size_t i = 0; i < raw.size() / 4; ++i) {
    uint32_t k;
    std::memcpy(&k, raw.data() + 4 * i, 4);
    const Json& row = doc["rows"][i];
    EXPECT_EQ(row["key"], std::to_string(k));
    auto it = pos.find(k);
    if (it != pos.end()) {
      ++hits;
      EXPECT_EQ(row["value"], it->second);
      EXPECT_EQ(row["found"], true);
    } else {
      EXPECT_TRUE(row["value"].is_null());
      EXPECT_EQ(row["found"], false);
    }
  }
  EXPECT_EQ(doc["statistics"]["found"], hits);
  EXPECT_EQ(doc["statistics"]["missing"], raw.size() / 4 - hits);
}

// The expected ad-hoc join of events (left) with sensors (right) on sensor_id:
// events columns then sensors columns, in events order, first matching sensor.
std::vector<CsvRow> ExpectedJoin(const std::vector<CsvRow>& events,
                                 const std::vector<CsvRow>& sensors) {
  std::vector<CsvRow> want;
  // The right key is not repeated: it equals the left one.
  CsvRow header = events[0];
  const size_t right_key = Col(sensors[0], "sensor_id");
  for (size_t c = 0; c < sensors[0].size(); ++c) {
    if (c != right_key) header.push_back(sensors[0][c]);
  }
  want.push_back(header);
  const auto pos = SensorRows(sensors);
  const size_t key = Col(events[0], "sensor_id");
  for (size_t i = 1; i < events.size(); ++i) {
    auto it = pos.find(static_cast<uint32_t>(std::stoul(*events[i][key])));
    if (it == pos.end()) continue;
    CsvRow row = events[i];
    const CsvRow& s = sensors[it->second + 1];
    for (size_t c = 0; c < s.size(); ++c) {
      if (c != right_key) row.push_back(s[c]);
    }
    want.push_back(row);
  }
  return want;
}

TEST_F(CliEndToEnd, AdHocJoinWritesJoinedRowsInLeftOrder) {
  const auto sensors = ReadCsv(Ex("sensors.csv"));
  const auto events = ReadCsv(Ex("events.csv"));
  RunResult r = Cli({"--batch-rows", "1000", "join", "--left", Ex("events.csv"), "--right",
                     Ex("sensors.csv"), "--on", "sensor_id"});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto want = ExpectedJoin(events, sensors);
  const auto got = ReadCsvText(r.out);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(got[i], want[i]) << "row " << i;
  EXPECT_NE(r.err.find("required " + std::to_string(want.size() - 1)), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("overflow no"), std::string::npos) << r.err;

  // The temporary index is gone afterwards.
  RunResult ls = Cli({"--json", "index", "ls"});
  EXPECT_EQ(ls.out.find("gpujoin-cli-tmp"), std::string::npos) << ls.out;

  // --capacity truncates and reports overflow and the required count.
  RunResult c = Cli({"--json", "join", "--left", Ex("events.csv"), "--right", Ex("sensors.csv"),
                     "--on", "sensor_id=sensor_id", "--capacity", "100"});
  ASSERT_EQ(c.code, 0) << c.err;
  Json j = Json::parse(c.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << c.out;
  EXPECT_EQ(j["required"], want.size() - 1);
  EXPECT_EQ(j["written"], 100);
  EXPECT_EQ(j["overflow"], true);
  ASSERT_EQ(j["rows"].size(), 100u);
  EXPECT_EQ(j["rows"][99]["event_id"], *want[100][0]);
}

TEST_F(CliEndToEnd, ResidentJoinWritesRowPairsOrJoinedRows) {
  const auto sensors = ReadCsv(Ex("sensors.csv"));
  const auto events = ReadCsv(Ex("events.csv"));
  const auto pos = SensorRows(sensors);
  ASSERT_FALSE(BuildSensors().is_discarded());
  RunResult r = Cli({"--json", "--batch-rows", "700", "join", "sensors", "--left", Ex("events.csv"),
                     "--on", "sensor_id"});
  ASSERT_EQ(r.code, 0) << r.err;
  Json j = Json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  const size_t key = Col(events[0], "sensor_id");
  size_t k = 0;
  for (size_t i = 1; i < events.size(); ++i) {
    auto it = pos.find(static_cast<uint32_t>(std::stoul(*events[i][key])));
    if (it == pos.end()) continue;
    ASSERT_LT(k, j["rows"].size());
    EXPECT_EQ(j["rows"][k]["left_row"], i - 1);
    EXPECT_EQ(j["rows"][k]["right_row"], it->second);
    ++k;
  }
  EXPECT_EQ(j["rows"].size(), k);
  EXPECT_EQ(j["required"], k);
  EXPECT_EQ(j["overflow"], false);

  RunResult joined = Cli({"join", "sensors", "--left", Ex("events.csv"), "--right",
                          Ex("sensors.csv"), "--on", "sensor_id", "--out", Tmp("joined.csv")});
  ASSERT_EQ(joined.code, 0) << joined.err;
  EXPECT_EQ(ReadCsv(Tmp("joined.csv")), ExpectedJoin(events, sensors));
}

// Reproduces a CLI that drops --max-probes (the request's probe bound) on lookup
// or join. 64 keys fill a 64-slot table, so many sit past their home slot; the
// engine, run directly on the same keys with the same bound, says which keys
// are found. A CLI that ignored the bound would find all 64.
TEST_F(CliEndToEnd, LookupAndJoinHonourMaxProbes) {
  constexpr uint32_t kCapacity = 64;
  std::vector<uint32_t> keys;
  std::string csv = "key\n";
  for (uint32_t k = kCapacity; k >= 1; --k) {
    keys.push_back(k);
    csv += std::to_string(k) + "\n";
  }
  {
    std::ofstream f(Tmp("bound_keys.csv"));
    f << csv;
  }
  RunResult b = Cli({"index", "build", "bound", "--from", Tmp("bound_keys.csv"), "--key", "key",
                     "--capacity", std::to_string(kCapacity), "--replace"});
  ASSERT_EQ(b.code, 0) << b.err;

  auto backend = gpujoin::engine::CreateBackend(gpujoin::engine::BackendKind::kCpu);
  ASSERT_TRUE(backend.ok()) << backend.status();
  auto index = (*backend)->CreateIndex(gpujoin::engine::HashIndexSpec{kCapacity, 0});
  ASSERT_TRUE(index.ok()) << index.status();
  {
    gpujoin::engine::CommandGraph g;
    gpujoin::engine::BuildIndexNode node;
    node.index = index->get();
    node.keys = {keys};
    g.Add(std::move(node));
    ASSERT_TRUE((*backend)->Run(g).ok());
  }
  for (uint32_t bound : {1u, 2u}) {
    SCOPED_TRACE(::testing::Message() << "--max-probes " << bound);
    std::vector<uint32_t> values(keys.size());
    std::vector<uint8_t> found(keys.size());
    gpujoin::engine::CommandGraph g;
    gpujoin::engine::LookupNode node;
    node.index = index->get();
    node.keys = {keys};
    node.values = values;
    node.found = found;
    node.max_probe_count = bound;
    g.Add(std::move(node));
    ASSERT_TRUE((*backend)->Run(g).ok());
    size_t hits = 0;
    for (uint8_t f : found) hits += f;
    ASSERT_GT(hits, 0u);
    ASSERT_LT(hits, keys.size()) << "every key within " << bound << " slots: the test shows nothing";

    RunResult l = Cli({"--json", "--batch-rows", "10", "lookup", "bound", "--from",
                       Tmp("bound_keys.csv"), "--key", "key", "--max-probes",
                       std::to_string(bound)});
    ASSERT_EQ(l.code, 0) << l.err;
    Json lj = Json::parse(l.out, nullptr, false);
    ASSERT_FALSE(lj.is_discarded()) << l.out;
    ASSERT_EQ(lj["rows"].size(), keys.size());
    for (size_t i = 0; i < keys.size(); ++i) {
      EXPECT_EQ(lj["rows"][i]["found"], found[i] != 0) << "key " << keys[i];
      if (found[i]) EXPECT_EQ(lj["rows"][i]["value"], values[i]) << "key " << keys[i];
    }
    EXPECT_EQ(lj["statistics"]["found"], hits);
    EXPECT_EQ(lj["statistics"]["max_probes"], bound);

    RunResult j = Cli({"--json", "--batch-rows", "10", "join", "bound", "--left",
                       Tmp("bound_keys.csv"), "--on", "key", "--max-probes",
                       std::to_string(bound)});
    ASSERT_EQ(j.code, 0) << j.err;
    Json jj = Json::parse(j.out, nullptr, false);
    ASSERT_FALSE(jj.is_discarded()) << j.out;
    size_t k = 0;
    for (size_t i = 0; i < keys.size(); ++i) {
      if (!found[i]) continue;
      ASSERT_LT(k, jj["rows"].size());
      EXPECT_EQ(jj["rows"][k]["left_row"], i);
      EXPECT_EQ(jj["rows"][k]["right_row"], values[i]);
      ++k;
    }
    EXPECT_EQ(jj["rows"].size(), hits);
    EXPECT_EQ(jj["required"], hits);
    EXPECT_EQ(jj["overflow"], false);
  }
  // Above the capacity: the server's INVALID_ARGUMENT names the field (exit 1).
  RunResult over = Cli({"lookup", "bound", "--from", Tmp("bound_keys.csv"), "--key", "key",
                        "--max-probes", std::to_string(kCapacity + 1)});
  EXPECT_EQ(over.code, 1);
  EXPECT_NE(over.err.find("max_probe_count"), std::string::npos) << over.err;
}

// Per sensor type over the joined data: count, and the float64 sum for the mean
// (decimal text aggregates as float64 by default).
struct TypeAgg {
  uint32_t count = 0;
  uint32_t values = 0;
  double sum = 0;
  double min = INFINITY, max = -INFINITY;
};

TEST_F(CliEndToEnd, AggregateMeanLatencyBySensorTypeViaStdin) {
  const auto sensors = ReadCsv(Ex("sensors.csv"));
  const auto events = ReadCsv(Ex("events.csv"));
  const auto joined = ExpectedJoin(events, sensors);
  std::map<std::string, TypeAgg> want;
  std::map<std::string, uint32_t> ok_counts;
  const size_t type = Col(joined[0], "type"), lat = Col(joined[0], "latency_ms"),
               ok = Col(joined[0], "ok");
  for (size_t i = 1; i < joined.size(); ++i) {
    TypeAgg& a = want[*joined[i][type]];
    ++a.count;
    if (*joined[i][ok] == "1") ++ok_counts[*joined[i][type]];
    if (!joined[i][lat]) continue;  // a missing latency takes no part
    const double v = std::stod(*joined[i][lat]);
    ++a.values;
    a.sum += v;
    a.min = std::min(a.min, v);
    a.max = std::max(a.max, v);
  }
  // The README pipeline: join to stdout, aggregate from stdin.
  std::ofstream(Tmp("joined_stdin.csv")) << Cli({"join", "--left", Ex("events.csv"), "--right",
                                                 Ex("sensors.csv"), "--on", "sensor_id"})
                                                .out;
  RunResult mean = Cli(
      {"--json", "agg", "--from", "-", "--group", "type", "--op", "mean", "--value", "latency_ms"},
      Tmp("joined_stdin.csv").string());
  ASSERT_EQ(mean.code, 0) << mean.err;
  Json j = Json::parse(mean.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << mean.out;
  EXPECT_EQ(j["dictionary_encoded"], true);
  EXPECT_EQ(j["value_type"], "float64");
  ASSERT_EQ(j["rows"].size(), want.size());
  size_t i = 0;
  for (const auto& [label, a] : want) {  // std::map: sorted labels, as the CLI prints them
    const Json& row = j["rows"][i++];
    EXPECT_EQ(row["type"], label);
    const double expected = a.sum / a.values;
    EXPECT_NEAR(row["mean_latency_ms"].get<double>(), expected, 1e-12 * expected) << label;
  }

  for (const std::string op : {"count", "min", "max"}) {
    std::vector<std::string> args = {"--json",  "agg",  "--from", Tmp("joined_stdin.csv").string(),
                                     "--group", "type", "--op",   op};
    if (op != "count") args.insert(args.end(), {"--value", "latency_ms"});
    RunResult r = Cli(args);
    ASSERT_EQ(r.code, 0) << r.err;
    Json o = Json::parse(r.out, nullptr, false);
    ASSERT_EQ(o["rows"].size(), want.size());
    size_t k = 0;
    for (const auto& [label, a] : want) {
      const Json& row = o["rows"][k++];
      ASSERT_EQ(row["type"], label);
      if (op == "count") EXPECT_EQ(row["count"], a.count) << label;
      if (op == "min") EXPECT_EQ(row["min_latency_ms"].get<double>(), a.min) << label;
      if (op == "max") EXPECT_EQ(row["max_latency_ms"].get<double>(), a.max) << label;
    }
  }

  // --where-mask: only ok == 1 rows count.
  RunResult masked = Cli({"--json", "agg", "--from", Tmp("joined_stdin.csv").string(), "--group",
                          "type", "--op", "count", "--where-mask", "ok"});
  ASSERT_EQ(masked.code, 0) << masked.err;
  Json m = Json::parse(masked.out, nullptr, false);
  size_t k = 0;
  for (const auto& [label, n] : ok_counts) {
    EXPECT_EQ(m["rows"][k]["type"], label);
    EXPECT_EQ(m["rows"][k]["count"], n) << label;
    ++k;
  }
}

TEST_F(CliEndToEnd, AggregateDenseNumericGroupsDirectly) {
  const auto events = ReadCsv(Ex("events.csv"));
  uint32_t ones = 0;
  const size_t ok = Col(events[0], "ok");
  for (size_t i = 1; i < events.size(); ++i) ones += *events[i][ok] == "1";
  RunResult r = Cli({"agg", "--from", Ex("events.csv"), "--group", "ok", "--op", "count"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "ok,count\n0," + std::to_string(events.size() - 1 - ones) + "\n1," +
                       std::to_string(ones) + "\n");
}

// Expected hashes from the engine's host hasher over columns encoded here.
std::vector<std::optional<uint64_t>> ExpectedHashes(const std::vector<CsvRow>& rows, size_t id_col,
                                                    size_t type_col,
                                                    gpujoin::engine::HashBits bits) {
  const size_t n = rows.size() - 1;
  std::vector<uint32_t> ids(n, 0);
  std::vector<uint8_t> id_valid((n + 7) / 8, 0), str_valid((n + 7) / 8, 0);
  std::string bytes;
  std::vector<int32_t> offsets = {0};
  for (size_t r = 0; r < n; ++r) {
    const CsvRow& row = rows[r + 1];
    if (row[id_col]) {
      ids[r] = static_cast<uint32_t>(std::stoul(*row[id_col]));
      id_valid[r / 8] |= 1u << (r % 8);
    }
    if (row[type_col]) {
      bytes += *row[type_col];
      str_valid[r / 8] |= 1u << (r % 8);
    }
    offsets.push_back(static_cast<int32_t>(bytes.size()));
  }
  gpujoin::engine::HashNode node;
  gpujoin::engine::HashColumn a;
  a.type = gpujoin::engine::ColumnType::kUint32;
  a.data = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(ids.data()), n * 4);
  a.validity = id_valid;
  a.length = n;
  gpujoin::engine::HashColumn b;
  b.type = gpujoin::engine::ColumnType::kBinary;
  b.data = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  b.offsets = offsets;
  b.validity = str_valid;
  b.length = n;
  node.columns = {a, b};
  node.bits = bits;
  std::vector<uint32_t> h32(n);
  std::vector<uint64_t> h64(n);
  std::vector<uint8_t> valid((n + 7) / 8);
  node.out32 = h32;
  node.out64 = h64;
  node.out_validity = valid;
  EXPECT_TRUE(gpujoin::engine::detail::ValidateHashNode(node, "test").ok());
  gpujoin::engine::detail::HashRowsHost(node);
  std::vector<std::optional<uint64_t>> out(n);
  for (size_t r = 0; r < n; ++r) {
    if ((valid[r / 8] >> (r % 8)) & 1) {
      out[r] = bits == gpujoin::engine::HashBits::k32 ? h32[r] : h64[r];
    }
  }
  return out;
}

TEST_F(CliEndToEnd, HashAppendsCompositeHashEmptyForNullRows) {
  // sensors.csv plus rows with a null ID and a null type.
  std::string text = Slurp(Ex("sensors.csv"));
  text += ",temperature,plant-a,Lobby,2020-01-01\n";
  text += "12345,,plant-a,Lobby,2020-01-01\n";
  text += "12345,\"\",plant-a,Lobby,2020-01-01\n";  // empty string: not null
  std::ofstream(Tmp("sensors_nulls.csv")) << text;
  const auto rows = ReadCsvText(text);
  for (const auto& [bits, name] : {std::pair{gpujoin::engine::HashBits::k64, "64"},
                                   std::pair{gpujoin::engine::HashBits::k32, "32"}}) {
    RunResult r = Cli({"--batch-rows", "128", "hash", "--from", Tmp("sensors_nulls.csv").string(),
                       "--cols", "sensor_id,type:string", "--bits", name});
    ASSERT_EQ(r.code, 0) << r.err;
    const auto got = ReadCsvText(r.out);
    const auto want = ExpectedHashes(rows, 0, 1, bits);
    ASSERT_EQ(got.size(), rows.size());
    EXPECT_EQ(got[0].back(), "hash");
    for (size_t i = 1; i < got.size(); ++i) {
      ASSERT_EQ(got[i].size(), rows[i].size() + 1);
      const auto& cell = got[i].back();
      if (want[i - 1]) {
        ASSERT_TRUE(cell.has_value()) << "row " << i;
        EXPECT_EQ(*cell, std::to_string(*want[i - 1])) << "row " << i << " bits " << name;
      } else {
        EXPECT_FALSE(cell.has_value()) << "row " << i;
      }
    }
    EXPECT_FALSE(got[got.size() - 3].back().has_value());  // null ID
    EXPECT_FALSE(got[got.size() - 2].back().has_value());  // null type
    EXPECT_TRUE(got[got.size() - 1].back().has_value());   // "" is a value
  }
  RunResult j = Cli({"--json", "hash", "--from", Ex("sensors.csv"), "--cols", "sensor_id"});
  ASSERT_EQ(j.code, 0) << j.err;
  Json doc = Json::parse(j.out, nullptr, false);
  ASSERT_FALSE(doc.is_discarded());
  EXPECT_EQ(doc["column_types"]["sensor_id"], "uint32");
  EXPECT_EQ(doc["null_rows"], 0);
}

// ---------------------------------------------------------------- errors

// Every failure is one line on stderr with the documented exit code.
void ExpectOneLineError(const RunResult& r, int code, const std::string& fragment) {
  EXPECT_EQ(r.code, code) << r.err;
  EXPECT_EQ(LineCount(r.err), 1u) << r.err;
  EXPECT_EQ(r.err.rfind("gpujoin: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find(fragment), std::string::npos) << "want '" << fragment << "' in " << r.err;
}

TEST_F(CliEndToEnd, MalformedCsvIsAnInputError) {
  std::ofstream(Tmp("bad.csv")) << "sensor_id,name\n1,ok\n2,\"unterminated\n3,x\n";
  ExpectOneLineError(
      Cli({"index", "build", "x", "--from", Tmp("bad.csv").string(), "--key", "sensor_id"}), 2,
      "bad.csv:3: field 2: unterminated quoted field");
  std::ofstream(Tmp("ragged.csv")) << "sensor_id,name\n1,ok\n2\n";
  ExpectOneLineError(
      Cli({"lookup", "sensors", "--from", Tmp("ragged.csv").string(), "--key", "sensor_id"}), 2,
      "ragged.csv:3: 1 fields, but the header has 2");
}

TEST_F(CliEndToEnd, NonNumericKeyNamesFileLineAndColumn) {
  // The lookup finds the index before it reads its input (ctest runs each test
  // in a process of its own: build it here).
  ASSERT_FALSE(BuildSensors().is_discarded());
  std::ofstream(Tmp("nonnum.csv")) << "event_id,sensor_id\n1,17\n2,abc\n";
  ExpectOneLineError(
      Cli({"lookup", "sensors", "--from", Tmp("nonnum.csv").string(), "--key", "sensor_id"}), 2,
      "nonnum.csv:3: column 'sensor_id' (2): 'abc' is not an integer key (for a string key give "
      "--key-type str)");
  // With an explicit key type too, and for a build.
  ExpectOneLineError(Cli({"index", "build", "x", "--from", Tmp("nonnum.csv").string(), "--key",
                          "sensor_id", "--key-type", "i64"}),
                     2,
                     "nonnum.csv:3: column 'sensor_id' (2): 'abc' is not an integer key (for a "
                     "string key give --key-type str)");
}

TEST_F(CliEndToEnd, ABadCellInALaterBatchBuildsNothing) {
  // 25 good rows, then a bad key in the third batch of 10: the build is
  // abandoned (nothing of the first two batches is installed), and a live
  // version of the name keeps serving.
  {
    std::ofstream f(Tmp("late_bad.csv"));
    f << "k,v\n";
    for (int i = 0; i < 25; ++i) f << i << "," << i * 2 << "\n";
    f << "x7,1\n";
  }
  ExpectOneLineError(Cli({"--batch-rows", "10", "index", "build", "late_bad", "--from",
                          Tmp("late_bad.csv").string(), "--key", "k", "--key-type", "u32"}),
                     2,
                     "late_bad.csv:27: column 'k' (1): 'x7' is not an integer key (for a string "
                     "key give --key-type str)");
  RunResult d = Cli({"--json", "index", "describe", "late_bad"});
  EXPECT_NE(d.code, 0) << d.out;
  EXPECT_NE(d.err.find("NOT_FOUND"), std::string::npos) << d.err;
  // Over a live version: it keeps serving, unchanged.
  ASSERT_FALSE(BuildSensors().is_discarded());
  RunResult before = Cli({"--json", "index", "describe", "sensors"});
  ASSERT_EQ(before.code, 0) << before.err;
  RunResult r = Cli({"--batch-rows", "10", "index", "build", "sensors", "--replace", "--from",
                     Tmp("late_bad.csv").string(), "--key", "k", "--key-type", "u32"});
  EXPECT_EQ(r.code, 2) << r.err;
  RunResult after = Cli({"--json", "index", "describe", "sensors"});
  ASSERT_EQ(after.code, 0) << after.err;
  EXPECT_EQ(Json::parse(after.out)["index"]["version"],
            Json::parse(before.out)["index"]["version"]);
}

TEST_F(CliEndToEnd, MissingColumnIsAnInputError) {
  ExpectOneLineError(
      Cli({"lookup", "sensors", "--from", Ex("events.csv"), "--key", "sensor"}), 2,
      "events.csv: no column 'sensor' (columns: event_id, sensor_id, ts, latency_ms, reading, ok)");
}

TEST_F(CliEndToEnd, UnknownIndexIsAnRpcError) {
  ExpectOneLineError(
      Cli({"lookup", "no_such_index", "--from", Ex("events.csv"), "--key", "sensor_id"}), 1,
      "lookup no_such_index: NOT_FOUND: ");
}

TEST_F(CliEndToEnd, ServerDownIsAnRpcError) {
  const std::string dead = "127.0.0.1:" + std::to_string(FreePort());
  RunResult r = RunCli({kCli, "--server", dead, "--timeout", "10", "index", "ls"});
  ExpectOneLineError(r, 1, "index ls: UNAVAILABLE: ");
  RunResult h = RunCli({kCli, "--server", dead, "health"});
  ExpectOneLineError(h, 1, "health: UNAVAILABLE: ");
}

TEST_F(CliEndToEnd, WrongTokenIsAnRpcError) {
  RunResult r = RunCli({kCli, "--server", address_, "--token", "wrong", "index", "ls"});
  ExpectOneLineError(r, 1, "index ls: UNAUTHENTICATED: ");
  std::ofstream(Tmp("wrong_token")) << "wrong\n";
  RunResult f =
      RunCli({kCli, "--server", address_, "--token-file", Tmp("wrong_token").string(), "info"});
  ExpectOneLineError(f, 1, "info: UNAUTHENTICATED: ");
  RunResult none = RunCli({kCli, "--server", address_, "index", "ls"});
  ExpectOneLineError(none, 1, "UNAUTHENTICATED");
  // $GPUJOIN_TOKEN and $GPUJOIN_SERVER stand in for the options; --token-file wins over them.
  const RunOptions with_env{.set_env = {"GPUJOIN_TOKEN=" + kToken, "GPUJOIN_SERVER=" + address_}};
  RunResult env = RunCli({kCli, "index", "ls"}, with_env);
  EXPECT_EQ(env.code, 0) << env.err;
  RunResult file_wins =
      RunCli({kCli, "--token-file", Tmp("wrong_token").string(), "index", "ls"}, with_env);
  ExpectOneLineError(file_wins, 1, "UNAUTHENTICATED");
}

TEST_F(CliEndToEnd, UsageErrorsExitTwo) {
  ExpectOneLineError(RunCli({kCli, "lookup", "sensors", "--key", "k"}), 2, "--from");
  ExpectOneLineError(RunCli({kCli, "frobnicate"}), 2, "frobnicate");
  ExpectOneLineError(Cli({"agg", "--from", Ex("events.csv"), "--group", "ok", "--op", "median"}), 2,
                     "unknown aggregate op 'median'");
  ExpectOneLineError(Cli({"agg", "--from", Ex("events.csv"), "--group", "ok", "--op", "mean"}), 2,
                     "--op mean needs --value COL");
  ExpectOneLineError(Cli({"index", "build", "x", "--from", Ex("sensors.csv"), "--key", "sensor_id",
                          "--capacity", "1000"}),
                     2, "power of two");
  ExpectOneLineError(Cli({"join", "--left", Ex("events.csv"), "--on", "sensor_id"}), 2,
                     "give --right FILE");
  ExpectOneLineError(
      Cli({"lookup", "sensors", "--from", Tmp("does_not_exist.csv").string(), "--key", "k"}), 2,
      "does_not_exist.csv: cannot open");
}

}  // namespace

// TLS: a throw-away self-signed certificate (made with the openssl tool) for
// localhost / 127.0.0.1; the CLI trusts it through --tls-ca.
TEST(CliTls, ConnectsWithTheServersCaAndRejectsPlaintext) {
  const fs::path dir = fs::temp_directory_path() / ("gpujoin_cli_tls_" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string cert = (dir / "cert.pem").string(), key = (dir / "key.pem").string();
  RunResult gen =
      RunCli({"/usr/bin/openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
              "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key, "-out", cert, "-days", "2",
              "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"});
  if (gen.code != 0) {
    fs::remove_all(dir);
    GTEST_SKIP() << "cannot make a test certificate with /usr/bin/openssl: " << gen.err;
  }
  {
    ServerProcess server({.extra_args = {"--tls-cert=" + cert, "--tls-key=" + key}});
    ASSERT_FALSE(server.grpc_address().empty()) << server.log();
    RunResult ok = RunCli(
        {kCli, "--server", server.grpc_address(), "--tls-ca", cert, "--timeout", "20", "health"});
    EXPECT_EQ(ok.code, 0) << ok.err;
    EXPECT_EQ(ok.out, "SERVING\n");
    RunResult named = RunCli({kCli, "--server", server.grpc_address(), "--tls-ca", cert,
                              "--tls-server-name", "localhost", "--json", "info"});
    EXPECT_EQ(named.code, 0) << named.err;
    EXPECT_FALSE(Json::parse(named.out, nullptr, false).is_discarded()) << named.out;
    // A plaintext client cannot talk to a TLS server.
    RunResult plain = RunCli({kCli, "--server", server.grpc_address(), "--timeout", "5", "info"});
    EXPECT_EQ(plain.code, 1) << plain.err;
    EXPECT_EQ(LineCount(plain.err), 1u) << plain.err;
    // A CA file that does not exist is a usage error.
    RunResult missing = RunCli(
        {kCli, "--server", server.grpc_address(), "--tls-ca", (dir / "nope.pem").string(), "info"});
    EXPECT_EQ(missing.code, 2) << missing.err;
    EXPECT_NE(missing.err.find("nope.pem"), std::string::npos) << missing.err;
  }
  fs::remove_all(dir);
}

namespace {

// The same lookup from JSON Lines (numbers as JSON numbers) and from TSV read
// from stdin gives the same answers as from CSV.
TEST_F(CliEndToEnd, JsonLinesAndTsvInputsGiveTheSameLookup) {
  const auto sensors = ReadCsv(Ex("sensors.csv"));
  const auto events = ReadCsv(Ex("events.csv"));
  const auto pos = SensorRows(sensors);
  ASSERT_FALSE(BuildSensors().is_discarded());
  std::ofstream jl(Tmp("events.jsonl"));
  std::ofstream tsv(Tmp("events.tsv"));
  for (size_t c = 0; c < events[0].size(); ++c) tsv << (c ? "\t" : "") << *events[0][c];
  tsv << "\n";
  for (size_t i = 1; i < events.size(); ++i) {
    Json o = Json::object();
    for (size_t c = 0; c < events[0].size(); ++c) {
      tsv << (c ? "\t" : "") << events[i][c].value_or("");
      if (!events[i][c]) {
        o[*events[0][c]] = nullptr;
      } else if (*events[0][c] == "sensor_id") {
        o[*events[0][c]] = std::stoul(*events[i][c]);
      } else {
        o[*events[0][c]] = *events[i][c];
      }
    }
    jl << o.dump() << "\n";
    tsv << "\n";
  }
  jl.close();
  tsv.close();
  RunResult a = Cli({"--json", "lookup", "sensors", "--from", Tmp("events.jsonl").string(), "--key",
                     "sensor_id"});
  ASSERT_EQ(a.code, 0) << a.err;
  RunResult b =
      Cli({"--json", "--format", "tsv", "lookup", "sensors", "--from", "-", "--key", "sensor_id"},
          Tmp("events.tsv").string());
  ASSERT_EQ(b.code, 0) << b.err;
  for (const RunResult* r : {&a, &b}) {
    Json j = Json::parse(r->out, nullptr, false);
    ASSERT_FALSE(j.is_discarded());
    ASSERT_EQ(j["rows"].size(), events.size() - 1);
    const size_t key = Col(events[0], "sensor_id");
    for (size_t i = 1; i < events.size(); ++i) {
      const auto it = pos.find(static_cast<uint32_t>(std::stoul(*events[i][key])));
      const Json& row = j["rows"][i - 1];
      EXPECT_EQ(row["event_id"], *events[i][0]);
      ASSERT_EQ(row["found"], it != pos.end()) << i;
      if (it != pos.end()) EXPECT_EQ(row["value"], it->second);
    }
  }
}

}  // namespace

namespace {

// Regression guard for the many-to-one rule of --right-duplicates lowest_row:
// when the right file repeats a key, each left row joins the first right row
// with that key, and a note says how many right rows were shadowed.
TEST_F(CliEndToEnd, AdHocJoinWithRepeatedRightKeysUsesTheFirstRightRow) {
  std::ofstream(Tmp("right_dups.csv")) << "id,label\n7,first\n9,nine\n7,second\n7,third\n";
  std::ofstream(Tmp("left_dups.csv")) << "id,n\n7,a\n8,b\n9,c\n7,d\n";
  RunResult r =
      Cli({"join", "--left", Tmp("left_dups.csv").string(), "--right",
           Tmp("right_dups.csv").string(), "--on", "id", "--right-duplicates", "lowest_row"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "id,n,label\n7,a,first\n9,c,nine\n7,d,first\n");
  EXPECT_NE(r.err.find("has 2 rows with a repeated key"), std::string::npos) << r.err;
}

// ---------------------------------------------------------------- 64-bit keys

// The rows of a --json lookup, as {key text: value or null}.
std::map<std::string, Json> LookupValues(const Json& doc, const std::string& key) {
  std::map<std::string, Json> out;
  for (const auto& row : doc["rows"]) out[row[key].get<std::string>()] = row["value"];
  return out;
}

// Regression for the first finding: the CLI refused the first table with
// database IDs ("'5000000000' is not a uint32 key"). --key-type auto reads the
// data: uint32 for small non-negative keys, uint64 above 2^32-1, int64 with a
// negative key; the index gets the key type and the CLI says which it chose.
TEST_F(CliEndToEnd, AutoKeyTypeInfersUint32Uint64AndInt64) {
  std::ofstream(Tmp("small.csv")) << "id\n1\n4294967294\n0x10\n";
  std::ofstream(Tmp("wide.csv")) << "id\n5000000000\n7\n18446744073709551614\n";
  std::ofstream(Tmp("signed.csv")) << "id\n5000000000\n-7\n0\n";
  const std::vector<std::tuple<std::string, std::string, std::string>> cases = {
      {"small.csv", "u32", "uint32"},
      {"wide.csv", "u64", "uint64"},
      {"signed.csv", "i64", "uint64"}};
  for (const auto& [file, kind, key_type] : cases) {
    SCOPED_TRACE(file);
    RunResult r = Cli({"--json", "index", "build", "auto_" + kind, "--from", Tmp(file).string(),
                       "--key", "id", "--replace"});
    ASSERT_EQ(r.code, 0) << r.err;
    Json j = Json::parse(r.out, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << r.out;
    EXPECT_EQ(j["key_kind"], kind);
    EXPECT_EQ(j["index"]["key_type"], key_type);
    EXPECT_EQ(j["index"]["statistics"]["unique_keys"], 3);
  }
  RunResult human = Cli({"index", "build", "auto_small_h", "--from", Tmp("small.csv").string(),
                         "--key", "id", "--replace"});
  ASSERT_EQ(human.code, 0) << human.err;
  EXPECT_NE(human.out.find("(key id as uint32"), std::string::npos) << human.out;
  // The ls table and describe carry the key type.
  RunResult ls = Cli({"index", "ls"});
  ASSERT_EQ(ls.code, 0) << ls.err;
  EXPECT_NE(ls.out.find(",key_type,duplicates\n"), std::string::npos) << ls.out;
  EXPECT_NE(ls.out.find("auto_i64,"), std::string::npos) << ls.out;
  RunResult d = Cli({"index", "describe", "auto_u64"});
  EXPECT_NE(d.out.find("keys         uint64"), std::string::npos) << d.out;

  // An explicit narrower type names the cell and why it does not fit.
  ExpectOneLineError(Cli({"index", "build", "x", "--from", Tmp("wide.csv").string(), "--key", "id",
                          "--key-type", "u32"}),
                     2,
                     "wide.csv:2: column 'id' (1): '5000000000' is not a uint32 key (it is "
                     "above 4294967295)");
  ExpectOneLineError(Cli({"index", "build", "x", "--from", Tmp("signed.csv").string(), "--key",
                          "id", "--key-type", "u64"}),
                     2, "signed.csv:3: column 'id' (1): '-7' is not a uint64 key (it is negative)");
  // Keys that fit no type.
  std::ofstream(Tmp("nofit.csv")) << "id\n-1\n18446744073709551615\n";
  ExpectOneLineError(
      Cli({"index", "build", "x", "--from", Tmp("nofit.csv").string(), "--key", "id"}), 2,
      "nofit.csv:3: column 'id' (1): '18446744073709551615' fits no key type: it is "
      "above 9223372036854775807 (uint64 only) but line 2 holds '-1', a negative "
      "key");
  std::ofstream(Tmp("huge.csv")) << "id\n123456789012345678901234567890\n";
  ExpectOneLineError(
      Cli({"index", "build", "x", "--from", Tmp("huge.csv").string(), "--key", "id"}), 2,
      "'123456789012345678901234567890' fits no key type (it needs more than 64 "
      "bits)");
}

// int64 IDs round trip: negative keys (INT64_MIN included) are built, looked up
// and printed back exactly as they were written, from CSV and from .i64 files;
// keys equal in their low 32 bits stay distinct.
TEST_F(CliEndToEnd, Int64KeysRoundTripFromCsvAndBinaryFiles) {
  std::ofstream(Tmp("accounts.csv")) << "account_id,name\n-5,a\n-9223372036854775808,b\n"
                                        "9223372036854775807,c\n4294967303,d\n7,e\n";
  RunResult b = Cli({"--json", "index", "build", "accounts", "--from", Tmp("accounts.csv").string(),
                     "--key", "account_id", "--replace"});
  ASSERT_EQ(b.code, 0) << b.err;
  EXPECT_EQ(Json::parse(b.out)["key_kind"], "i64");

  std::ofstream(Tmp("probe.csv")) << "account_id\n7\n-5\n9223372036854775807\n-6\n"
                                     "-9223372036854775808\n4294967303\n";
  RunResult l =
      Cli({"lookup", "accounts", "--from", Tmp("probe.csv").string(), "--key", "account_id"});
  ASSERT_EQ(l.code, 0) << l.err;
  EXPECT_EQ(l.out,
            "account_id,value,found\n7,4,true\n-5,0,true\n9223372036854775807,2,true\n-6,,false\n"
            "-9223372036854775808,1,true\n4294967303,3,true\n");

  // The same probe as a raw .i64 file: rows print back signed.
  const std::vector<int64_t> ids = {-5, -6, INT64_MIN, 4294967303};
  {
    std::ofstream f(Tmp("probe.i64"), std::ios::binary);
    f.write(reinterpret_cast<const char*>(ids.data()), ids.size() * 8);
  }
  RunResult bin =
      Cli({"--json", "lookup", "accounts", "--from", Tmp("probe.i64").string(), "--key", "key"});
  ASSERT_EQ(bin.code, 0) << bin.err;
  auto v = LookupValues(Json::parse(bin.out), "key");
  ASSERT_EQ(v.size(), 4u) << bin.out;
  EXPECT_EQ(v["-5"], 0);
  EXPECT_TRUE(v["-6"].is_null());
  EXPECT_EQ(v["-9223372036854775808"], 1);
  EXPECT_EQ(v["4294967303"], 3);

  // A .u64 build file makes a uint64 index whatever its values; 7 and 2^32 + 7
  // differ only in their high 32 bits.
  const std::vector<uint64_t> wide = {7, (uint64_t{1} << 32) | 7, (uint64_t{2} << 32) | 7};
  {
    std::ofstream f(Tmp("ids.u64"), std::ios::binary);
    f.write(reinterpret_cast<const char*>(wide.data()), wide.size() * 8);
  }
  RunResult w = Cli({"--json", "index", "build", "wide_ids", "--from", Tmp("ids.u64").string(),
                     "--key", "key", "--replace"});
  ASSERT_EQ(w.code, 0) << w.err;
  Json wj = Json::parse(w.out);
  EXPECT_EQ(wj["key_kind"], "u64");
  EXPECT_EQ(wj["index"]["statistics"]["unique_keys"], 3);
  std::ofstream(Tmp("wide_probe.csv")) << "k\n8589934599\n7\n12884901895\n4294967303\n";
  RunResult wl =
      Cli({"--json", "lookup", "wide_ids", "--from", Tmp("wide_probe.csv").string(), "--key", "k"});
  ASSERT_EQ(wl.code, 0) << wl.err;
  auto wv = LookupValues(Json::parse(wl.out), "k");
  EXPECT_EQ(wv["8589934599"], 2);
  EXPECT_EQ(wv["7"], 0);  // small keys are sent as uint64 to a uint64 index
  EXPECT_TRUE(wv["12884901895"].is_null());
  EXPECT_EQ(wv["4294967303"], 1);

  // A wrong explicit type for a resident index, and 64-bit keys for a uint32 one.
  ExpectOneLineError(Cli({"lookup", "accounts", "--from", Tmp("probe.csv").string(), "--key",
                          "account_id", "--key-type", "u32"}),
                     2,
                     "--key-type u32: index 'accounts' has uint64 keys; use --key-type u64 or "
                     "i64 (or auto)");
  ASSERT_FALSE(BuildSensors().is_discarded());
  ExpectOneLineError(
      Cli({"lookup", "sensors", "--from", Tmp("probe.csv").string(), "--key", "account_id"}), 2,
      "probe.csv:3: column 'account_id' (1): '-5' is not a uint32 key (it is "
      "negative); index 'sensors' has uint32 keys");
}

// A join takes the wider key type of both sides: uint32 with uint64 is uint64,
// uint32 with int64 is int64; a resident join uses the index's type.
TEST_F(CliEndToEnd, JoinOfMixedWidthsTakesTheWiderKeyType) {
  std::ofstream(Tmp("left_small.csv")) << "id,l\n7,a\n8,b\n5,c\n";
  std::ofstream(Tmp("right_wide.csv")) << "id,r\n4294967303,x\n7,y\n5,z\n";
  RunResult u = Cli({"join", "--left", Tmp("left_small.csv").string(), "--right",
                     Tmp("right_wide.csv").string(), "--on", "id"});
  ASSERT_EQ(u.code, 0) << u.err;
  EXPECT_EQ(u.out, "id,l,r\n7,a,y\n5,c,z\n");

  std::ofstream(Tmp("right_signed.csv")) << "key,r\n-1,neg\n8,eight\n";
  RunResult i = Cli({"join", "--left", Tmp("left_small.csv").string(), "--right",
                     Tmp("right_signed.csv").string(), "--on", "id=key"});
  ASSERT_EQ(i.code, 0) << i.err;
  EXPECT_EQ(i.out, "id,l,r\n8,b,eight\n");

  // int64 with a uint64 key above 2^63-1 fits neither.
  std::ofstream(Tmp("left_huge.csv")) << "id\n18446744073709551614\n";
  ExpectOneLineError(Cli({"join", "--left", Tmp("left_huge.csv").string(), "--right",
                          Tmp("right_signed.csv").string(), "--on", "id=key"}),
                     2,
                     "left_huge.csv:2: column 'id' (1): '18446744073709551614' is not an int64 "
                     "key (it is above 9223372036854775807) (the join's key type is int64, "
                     "the wider of both sides)");

  // Resident: small left keys against a uint64 index.
  std::ofstream(Tmp("right_index.csv")) << "id\n4294967303\n5\n";
  ASSERT_EQ(Cli({"index", "build", "wide_join", "--from", Tmp("right_index.csv").string(), "--key",
                 "id", "--replace"})
                .code,
            0);
  RunResult r =
      Cli({"--json", "join", "wide_join", "--left", Tmp("left_small.csv").string(), "--on", "id"});
  ASSERT_EQ(r.code, 0) << r.err;
  Json j = Json::parse(r.out, nullptr, false);
  ASSERT_EQ(j["rows"].size(), 1u) << r.out;
  EXPECT_EQ(j["rows"][0]["left_row"], 2);
  EXPECT_EQ(j["rows"][0]["right_row"], 1);
}

TEST_F(CliEndToEnd, MoreInputErrorsNameThePosition) {
  ASSERT_FALSE(BuildSensors().is_discarded());  // the lookups below find it first
  std::ofstream(Tmp("mask.csv")) << "g,m\n1,1\n2,maybe\n";
  ExpectOneLineError(Cli({"agg", "--from", Tmp("mask.csv").string(), "--group", "g", "--op",
                          "count", "--where-mask", "m"}),
                     2, "mask.csv:3: column 'm' (2): 'maybe' is not a mask");
  std::ofstream(Tmp("vals.csv")) << "g,v\n1,1.5\n2,fast\n";
  ExpectOneLineError(Cli({"agg", "--from", Tmp("vals.csv").string(), "--group", "g", "--op", "sum",
                          "--value", "v"}),
                     2, "vals.csv:3: column 'v' (2): 'fast' is not a number");
  ExpectOneLineError(
      Cli({"hash", "--from", Tmp("vals.csv").string(), "--cols", "g", "--bits", "16"}), 2,
      "--bits must be 32 or 64");
  ExpectOneLineError(Cli({"hash", "--from", Tmp("vals.csv").string(), "--cols", "v:int64"}), 2,
                     "vals.csv:2: column 'v' (2): '1.5' is not a valid int64");
  std::ofstream(Tmp("bad.jsonl")) << "{\"k\": 1}\n{\"k\": 2,}\n";
  ExpectOneLineError(Cli({"lookup", "sensors", "--from", Tmp("bad.jsonl").string(), "--key", "k"}),
                     2, "bad.jsonl:2: not valid JSON");
  std::ofstream(Tmp("odd.u32")) << "abcde";
  ExpectOneLineError(Cli({"lookup", "sensors", "--from", Tmp("odd.u32").string(), "--key", "key"}),
                     2, "odd.u32: size 5 bytes is not a multiple of 4");
}

}  // namespace

// ---------------------------------------------------------------- payload columns

namespace {

// index build stores every column but the key as payload, with inferred
// types; describe lists them; lookup --select appends the selected columns of
// each key's row (nulls for missing keys), CSV-quoted where needed.
TEST_F(CliEndToEnd, IndexBuildStoresPayloadAndLookupSelectsIt) {
  const auto sensors = ReadCsv(Ex("sensors.csv"));
  const auto events = ReadCsv(Ex("events.csv"));
  const auto pos = SensorRows(sensors);
  Json b = BuildSensors();
  ASSERT_FALSE(b.is_discarded());
  EXPECT_EQ(b["schema"], "type:str,site:str,room:str,installed:str");
  ASSERT_EQ(b["index"]["payload"].size(), 4u);
  EXPECT_EQ(b["index"]["payload"][2]["name"], "room");
  EXPECT_EQ(b["index"]["payload"][2]["type"], "string");
  EXPECT_EQ(b["index"]["payload"][2]["null_count"], 0);
  EXPECT_GT(b["index"]["payload_bytes"].get<uint64_t>(), 0u);
  RunResult d = Cli({"index", "describe", "sensors"});
  ASSERT_EQ(d.code, 0) << d.err;
  EXPECT_NE(d.out.find("payload      4 columns, "), std::string::npos) << d.out;
  EXPECT_NE(d.out.find("\n  room       str, 0 nulls, "), std::string::npos) << d.out;

  RunResult r = Cli({"--batch-rows", "300", "lookup", "sensors", "--from", Ex("events.csv"),
                     "--key", "sensor_id", "--select", "room,type", "--out", Tmp("sel.csv")});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto out = ReadCsv(Tmp("sel.csv"));
  ASSERT_EQ(out.size(), events.size());
  CsvRow header = events[0];
  for (const char* h : {"value", "found", "room", "type"}) header.emplace_back(h);
  EXPECT_EQ(out[0], header);
  const size_t key = Col(events[0], "sensor_id"), room = Col(sensors[0], "room"),
               type = Col(sensors[0], "type");
  bool quoted_room = false;
  for (size_t i = 1; i < events.size(); ++i) {
    CsvRow want = events[i];
    auto it = pos.find(static_cast<uint32_t>(std::stoul(*events[i][key])));
    if (it != pos.end()) {
      const CsvRow& s = sensors[it->second + 1];
      want.insert(want.end(), {std::to_string(it->second), "true", s[room], s[type]});
      quoted_room = quoted_room || s[room]->find('"') != std::string::npos;
    } else {
      want.insert(want.end(), {std::nullopt, "false", std::nullopt, std::nullopt});
    }
    ASSERT_EQ(out[i], want) << "row " << i;
  }
  EXPECT_TRUE(quoted_room);  // e.g. Dock "B" came back through CSV quoting

  RunResult j = Cli({"--json", "lookup", "sensors", "--from", Ex("probe_ids.u32"), "--key", "key",
                     "--select", "site"});
  ASSERT_EQ(j.code, 0) << j.err;
  Json doc = Json::parse(j.out, nullptr, false);
  ASSERT_FALSE(doc.is_discarded());
  for (const Json& row : doc["rows"]) {
    EXPECT_EQ(row["site"].is_null(), row["found"] == false) << row.dump();
    if (!row["site"].is_null()) EXPECT_TRUE(row["site"].is_string());
  }
}

// Every inferred type through build and lookup: integers, floats (round-trip
// text, NaN and inf), booleans, strings with quotes and commas, empty strings
// and nulls; a repeated key gives its first row's payload.
TEST_F(CliEndToEnd, PayloadTypesRoundTripThroughLookup) {
  std::ofstream(Tmp("dim.csv")) << "id,count,price,ok,label,when\n"
                                   "1,5,0.1,true,\"a,b\",\n"
                                   "2,,1e300,false,\"\",x\n"
                                   "3,-7,nan,,\"say \"\"hi\"\"\",y\n"
                                   "1,99,2.5,false,dup,z\n"
                                   "4,9223372036854775807,-inf,TRUE,,w\n";
  RunResult b = Cli({"--json", "index", "build", "dim", "--from", Tmp("dim.csv").string(), "--key",
                     "id", "--replace"});
  ASSERT_EQ(b.code, 0) << b.err;
  Json bj = Json::parse(b.out);
  EXPECT_EQ(bj["schema"], "count:i64,price:f64,ok:bool,label:str,when:str");
  // Retained rows 0, 1, 2, 4: count is null once, ok once, label once (row 4), when once.
  EXPECT_EQ(bj["index"]["payload"][0]["null_count"], 1);
  EXPECT_EQ(bj["index"]["payload"][3]["null_count"], 1);

  std::ofstream(Tmp("facts.csv")) << "id\n3\n1\n9\n2\n4\n";
  RunResult l = Cli({"lookup", "dim", "--from", Tmp("facts.csv").string(), "--key", "id",
                     "--select", "count,price,ok,label"});
  ASSERT_EQ(l.code, 0) << l.err;
  EXPECT_EQ(l.out,
            "id,value,found,count,price,ok,label\n"
            "3,2,true,-7,NaN,,\"say \"\"hi\"\"\"\n"
            "1,0,true,5,0.1,true,\"a,b\"\n"
            "9,,false,,,,\n"
            "2,1,true,,1e+300,false,\"\"\n"
            "4,4,true,9223372036854775807,-inf,true,\n");
  RunResult jl = Cli({"lookup", "dim", "--from", Tmp("facts.csv").string(), "--key", "id",
                      "--select", "count,price,ok,label", "--out", Tmp("facts.jsonl").string()});
  ASSERT_EQ(jl.code, 0) << jl.err;
  EXPECT_EQ(Slurp(Tmp("facts.jsonl")),
            "{\"id\":\"3\",\"value\":2,\"found\":true,\"count\":-7,\"price\":\"NaN\",\"ok\":null,"
            "\"label\":\"say \\\"hi\\\"\"}\n"
            "{\"id\":\"1\",\"value\":0,\"found\":true,\"count\":5,\"price\":0.1,\"ok\":true,"
            "\"label\":\"a,b\"}\n"
            "{\"id\":\"9\",\"value\":null,\"found\":false,\"count\":null,\"price\":null,"
            "\"ok\":null,\"label\":null}\n"
            "{\"id\":\"2\",\"value\":1,\"found\":true,\"count\":null,\"price\":1e+300,"
            "\"ok\":false,\"label\":\"\"}\n"
            "{\"id\":\"4\",\"value\":4,\"found\":true,\"count\":9223372036854775807,"
            "\"price\":\"-inf\",\"ok\":true,\"label\":null}\n");

  // --schema and --columns: float32 prints its own shortest text (1e300 is inf).
  RunResult s =
      Cli({"--json", "index", "build", "dim32", "--from", Tmp("dim.csv").string(), "--key", "id",
           "--columns", "price,count", "--schema", "price:f32", "--replace"});
  ASSERT_EQ(s.code, 0) << s.err;
  EXPECT_EQ(Json::parse(s.out)["schema"], "price:f32,count:i64");
  RunResult l32 = Cli({"lookup", "dim32", "--from", Tmp("facts.csv").string(), "--key", "id",
                       "--select", "price,count"});
  ASSERT_EQ(l32.code, 0) << l32.err;
  EXPECT_EQ(l32.out,
            "id,value,found,price,count\n3,2,true,NaN,-7\n1,0,true,0.1,5\n9,,false,,\n"
            "2,1,true,inf,\n4,4,true,-inf,9223372036854775807\n");
  // Empty input: the header still names the typed columns.
  std::ofstream(Tmp("no_facts.csv")) << "id\n";
  RunResult none = Cli({"lookup", "dim", "--from", Tmp("no_facts.csv").string(), "--key", "id",
                        "--select", "label,ok"});
  ASSERT_EQ(none.code, 0) << none.err;
  EXPECT_EQ(none.out, "id,value,found,label,ok\n");
  RunResult none_join =
      Cli({"join", "--left", Tmp("no_facts.csv").string(), "--right", "index:dim", "--on", "id"});
  ASSERT_EQ(none_join.code, 0) << none_join.err;
  EXPECT_EQ(none_join.out, "id,count,price,ok,label,when\n");
  ExpectOneLineError(Cli({"index", "build", "dim_bad", "--from", Tmp("dim.csv").string(), "--key",
                          "id", "--columns", "count", "--schema", "count:u32"}),
                     2,
                     "dim.csv:4: column 'count' (2): '-7' is not a valid u32 (--schema "
                     "count:u32)");
}

// The expected join of events with the sensors index's payload: events
// columns, then the sensor row's columns in `cols`, in events order.
std::vector<CsvRow> ExpectedPayloadJoin(const std::vector<CsvRow>& events,
                                        const std::vector<CsvRow>& sensors,
                                        const std::vector<std::string>& cols) {
  std::vector<CsvRow> want;
  CsvRow header = events[0];
  for (const auto& c : cols) header.emplace_back(c);
  want.push_back(header);
  const auto pos = SensorRows(sensors);
  const size_t key = Col(events[0], "sensor_id");
  for (size_t i = 1; i < events.size(); ++i) {
    auto it = pos.find(static_cast<uint32_t>(std::stoul(*events[i][key])));
    if (it == pos.end()) continue;
    CsvRow row = events[i];
    for (const auto& c : cols) row.push_back(sensors[it->second + 1][Col(sensors[0], c)]);
    want.push_back(row);
  }
  return want;
}

// join --right index:NAME joins the resident index instead of uploading a
// right file, and writes its payload columns (all, or --select).
TEST_F(CliEndToEnd, JoinAgainstAResidentIndexGathersItsPayload) {
  const auto sensors = ReadCsv(Ex("sensors.csv"));
  const auto events = ReadCsv(Ex("events.csv"));
  ASSERT_FALSE(BuildSensors().is_discarded());
  RunResult r = Cli({"--batch-rows", "500", "join", "--left", Ex("events.csv"), "--right",
                     "index:sensors", "--on", "sensor_id"});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto all = ExpectedPayloadJoin(events, sensors, {"type", "site", "room", "installed"});
  EXPECT_EQ(ReadCsvText(r.out), all);
  EXPECT_NE(r.err.find("required " + std::to_string(all.size() - 1)), std::string::npos) << r.err;
  // The payload join is the ad-hoc join's output (which does not repeat the key).
  const auto adhoc = ExpectedJoin(events, sensors);
  ASSERT_EQ(adhoc.size(), all.size());
  for (size_t i = 1; i < all.size(); ++i) ASSERT_EQ(adhoc[i], all[i]) << i;

  RunResult s = Cli({"join", "--left", Ex("events.csv"), "--right", "index:sensors", "--on",
                     "sensor_id", "--select", "site", "--out", Tmp("pjoin.csv")});
  ASSERT_EQ(s.code, 0) << s.err;
  EXPECT_EQ(ReadCsv(Tmp("pjoin.csv")), ExpectedPayloadJoin(events, sensors, {"site"}));

  RunResult c = Cli({"--json", "join", "--left", Ex("events.csv"), "--right", "index:sensors",
                     "--on", "sensor_id", "--select", "type,room", "--capacity", "5"});
  ASSERT_EQ(c.code, 0) << c.err;
  Json j = Json::parse(c.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << c.out;
  EXPECT_EQ(j["index"], "sensors");
  EXPECT_EQ(j["written"], 5);
  EXPECT_EQ(j["overflow"], true);
  EXPECT_EQ(j["select"], Json::array({"type", "room"}));
  ASSERT_EQ(j["rows"].size(), 5u);
  const auto typed = ExpectedPayloadJoin(events, sensors, {"type", "room"});
  EXPECT_EQ(j["rows"][4]["event_id"], *typed[5][0]);
  EXPECT_EQ(j["rows"][4]["room"], *typed[5][typed[5].size() - 1]);

  // A resident join by NAME takes --select too: pairs and the selected column.
  RunResult p =
      Cli({"join", "sensors", "--left", Ex("events.csv"), "--on", "sensor_id", "--select", "type"});
  ASSERT_EQ(p.code, 0) << p.err;
  const auto pairs = ReadCsvText(p.out);
  ASSERT_EQ(pairs.size(), all.size());
  EXPECT_EQ(pairs[0], (CsvRow{"left_row", "right_row", "type"}));
  const size_t type = Col(sensors[0], "type");
  for (size_t i = 1; i < pairs.size(); ++i) {
    ASSERT_EQ(pairs[i][2], sensors[std::stoul(*pairs[i][1]) + 1][type]) << i;
  }
}

TEST_F(CliEndToEnd, PayloadOptionErrorsAreOneLine) {
  ASSERT_FALSE(BuildSensors().is_discarded());
  const std::string sensors = Ex("sensors.csv");
  ExpectOneLineError(
      Cli({"index", "build", "x", "--from", sensors, "--key", "sensor_id", "--schema", "type:int"}),
      2,
      "--schema 'type:int': unknown type 'int' (expected i32, u32, i64, u64, f32, "
      "f64, bool, str or bin)");
  ExpectOneLineError(
      Cli({"index", "build", "x", "--from", sensors, "--key", "sensor_id", "--schema", "kind:str"}),
      2, "--schema: " + sensors + " has no column 'kind'");
  ExpectOneLineError(Cli({"index", "build", "x", "--from", sensors, "--key", "sensor_id",
                          "--columns", "type", "--schema", "site:str"}),
                     2, "--schema names 'site', which is not stored as payload (payload: type)");
  ExpectOneLineError(Cli({"index", "build", "x", "--from", sensors, "--key", "sensor_id",
                          "--no-payload", "--columns", "type"}),
                     2, "--no-payload excludes --columns and --schema");
  std::ofstream(Tmp("spaces.csv")) << "id,room no\n1,a\n";
  ExpectOneLineError(
      Cli({"index", "build", "x", "--from", Tmp("spaces.csv").string(), "--key", "id"}), 2,
      "spaces.csv: column 'room no' cannot be a payload column");
  RunResult bare = Cli({"index", "build", "bare", "--from", Tmp("spaces.csv").string(), "--key",
                        "id", "--no-payload", "--replace"});
  ASSERT_EQ(bare.code, 0) << bare.err;
  EXPECT_NE(bare.out.find("payload      none"), std::string::npos) << bare.out;

  ExpectOneLineError(Cli({"lookup", "sensors", "--from", Ex("events.csv"), "--key", "sensor_id",
                          "--select", "type,kind"}),
                     2,
                     "lookup: --select 'kind': index 'sensors' has no payload column 'kind' "
                     "(payload: type, site, room, installed)");
  ExpectOneLineError(Cli({"lookup", "sensors", "--from", Ex("events.csv"), "--key", "sensor_id",
                          "--select", "type,type"}),
                     2, "lookup: --select 'type' is given twice");
  ExpectOneLineError(Cli({"lookup", "bare", "--from", Tmp("spaces.csv").string(), "--key", "id",
                          "--select", "room"}),
                     2, "index 'bare' has no payload column 'room' (it stores no payload");
  ExpectOneLineError(Cli({"join", "--left", Ex("events.csv"), "--right", sensors, "--on",
                          "sensor_id", "--select", "type"}),
                     2, "join: --select needs a resident index (NAME or --right index:NAME)");
  ExpectOneLineError(Cli({"join", "sensors", "--left", Ex("events.csv"), "--right", "index:sensors",
                          "--on", "sensor_id"}),
                     2, "join: give the index as NAME or as --right index:NAME, not both");
  ExpectOneLineError(Cli({"join", "--left", Ex("events.csv"), "--right", "index:no_such_index",
                          "--on", "sensor_id"}),
                     1, "join no_such_index: NOT_FOUND");
}

}  // namespace

// ---------------------------------------------------------------- join kinds and duplicates (issue
// 21)

namespace {

// Duplicate keys on both sides: left 7 twice, right 7 three times and 9 twice;
// 8 and 5 match nothing, the right's 6 no left row.
const char* kLeftDups = "id,n\n7,a\n8,b\n9,c\n7,d\n5,e\n";
const char* kRightDups = "id,label\n7,first\n9,nine\n7,second\n6,six\n7,third\n9,nine2\n";

// The SQL answers on kLeftDups / kRightDups, written by hand: inner and left
// are `SELECT * FROM l [LEFT] JOIN r USING (id) ORDER BY l.row, r.row` (the key once; a
// left row without a match has NULL right columns); semi and anti are the left
// rows of `WHERE [NOT] EXISTS (...)` in left order, semi with the first
// matching right row's columns beside them and anti with empty ones.
const std::map<std::string, std::string> kSqlAnswers = {
    {"inner",
     "id,n,label\n"
     "7,a,first\n7,a,second\n7,a,third\n"
     "9,c,nine\n9,c,nine2\n"
     "7,d,first\n7,d,second\n7,d,third\n"},
    {"left",
     "id,n,label\n"
     "7,a,first\n7,a,second\n7,a,third\n"
     "8,b,\n"
     "9,c,nine\n9,c,nine2\n"
     "7,d,first\n7,d,second\n7,d,third\n"
     "5,e,\n"},
    {"semi", "id,n,label\n7,a,first\n9,c,nine\n7,d,first\n"},
    {"anti", "id,n,label\n8,b,\n5,e,\n"},
};

// Ad-hoc joins build the right file keep_all by default, so every --how gives
// the SQL answer with duplicate keys on both sides; so does every batching
// (--batch-rows 2: a batch of two left rows yields up to six pairs, which the
// client sizes with a count pass first), and --capacity keeps a stable prefix.
TEST_F(CliEndToEnd, JoinHowMatchesSqlWithDuplicateKeysOnBothSides) {
  std::ofstream(Tmp("l21.csv")) << kLeftDups;
  std::ofstream(Tmp("r21.csv")) << kRightDups;
  for (const auto& [how, want] : kSqlAnswers) {
    SCOPED_TRACE(how);
    for (const char* batch : {"65536", "2", "1"}) {
      RunResult r = Cli({"--batch-rows", batch, "join", "--left", Tmp("l21.csv").string(),
                         "--right", Tmp("r21.csv").string(), "--on", "id", "--how", how});
      ASSERT_EQ(r.code, 0) << r.err;
      EXPECT_EQ(r.out, want) << "--batch-rows " << batch;
      const size_t rows = LineCount(want) - 1;
      EXPECT_NE(r.err.find(std::to_string(rows) + " rows written, required " +
                           std::to_string(rows) + ", overflow no"),
                std::string::npos)
          << r.err;
      EXPECT_EQ(r.err.find("repeated key"), std::string::npos) << r.err;  // nothing shadowed
    }
    RunResult j = Cli({"--json", "join", "--left", Tmp("l21.csv").string(), "--right",
                       Tmp("r21.csv").string(), "--on", "id", "--how", how});
    ASSERT_EQ(j.code, 0) << j.err;
    Json doc = Json::parse(j.out, nullptr, false);
    ASSERT_FALSE(doc.is_discarded()) << j.out;
    EXPECT_EQ(doc["how"], how);
    EXPECT_EQ(doc["duplicates"], "keep_all");
    EXPECT_EQ(doc["right_duplicate_rows"], 3);
    EXPECT_EQ(doc["required"], LineCount(want) - 1);
    EXPECT_EQ(doc["statistics"]["found"], 3);
    EXPECT_EQ(doc["statistics"]["missing"], 2);
    for (const Json& row : doc["rows"]) {
      // Unmatched rows carry JSON nulls, not empty strings.
      if (row["n"] == "b" || row["n"] == "e") EXPECT_TRUE(row["label"].is_null()) << row;
    }
  }

  // --capacity 4 of the left join: its first four rows, the count still exact.
  RunResult c = Cli({"--batch-rows", "2", "join", "--left", Tmp("l21.csv").string(), "--right",
                     Tmp("r21.csv").string(), "--on", "id", "--how", "left", "--capacity", "4"});
  ASSERT_EQ(c.code, 0) << c.err;
  EXPECT_EQ(c.out, "id,n,label\n7,a,first\n7,a,second\n7,a,third\n8,b,\n");
  EXPECT_NE(c.err.find("join (left): 4 rows written, required 10, capacity 4, overflow YES"),
            std::string::npos)
      << c.err;

  // --right-duplicates lowest_row: the many-to-one answers (first right row per key).
  RunResult m = Cli({"join", "--left", Tmp("l21.csv").string(), "--right", Tmp("r21.csv").string(),
                     "--on", "id", "--how", "left", "--right-duplicates", "lowest_row"});
  ASSERT_EQ(m.code, 0) << m.err;
  EXPECT_EQ(m.out, "id,n,label\n7,a,first\n8,b,\n9,c,nine\n7,d,first\n5,e,\n");
  EXPECT_NE(m.err.find("has 3 rows with a repeated key"), std::string::npos) << m.err;

  // An empty left file: the header only, for every kind.
  std::ofstream(Tmp("l21_empty.csv")) << "id,n\n";
  RunResult e = Cli({"join", "--left", Tmp("l21_empty.csv").string(), "--right",
                     Tmp("r21.csv").string(), "--on", "id", "--how", "anti"});
  ASSERT_EQ(e.code, 0) << e.err;
  EXPECT_EQ(e.out, "id,n,label\n");
}

// A resident keep_all index (index build --duplicates keep_all): describe shows
// the policy and the largest group, lookup adds the match count, and joins by
// --right index:NAME (its payload per pair) and by NAME (row pairs, or the rows
// of --right FILE) give every pair of every kind.
TEST_F(CliEndToEnd, ResidentKeepAllIndexJoinsLooksUpAndDescribes) {
  std::ofstream(Tmp("l21.csv")) << kLeftDups;
  std::ofstream(Tmp("r21.csv")) << kRightDups;
  RunResult b = Cli({"index", "build", "dups", "--from", Tmp("r21.csv").string(), "--key", "id",
                     "--duplicates", "keep_all", "--replace"});
  ASSERT_EQ(b.code, 0) << b.err;
  EXPECT_NE(b.out.find("policy       keep_all (every row kept), largest group 3 rows\n"),
            std::string::npos)
      << b.out;
  EXPECT_NE(b.out.find("note: 3 duplicate-key rows, all kept (keep_all); the largest key has 3 "
                       "rows"),
            std::string::npos)
      << b.out;
  RunResult d = Cli({"--json", "index", "describe", "dups"});
  ASSERT_EQ(d.code, 0) << d.err;
  Json info = Json::parse(d.out, nullptr, false);
  ASSERT_FALSE(info.is_discarded()) << d.out;
  EXPECT_EQ(info["index"]["duplicates"], "keep_all");
  EXPECT_EQ(info["index"]["statistics"]["max_group_rows"], 3);
  EXPECT_EQ(info["index"]["statistics"]["duplicate_rows"], 3);
  EXPECT_EQ(info["index"]["statistics"]["unique_keys"], 3);
  RunResult ls = Cli({"index", "ls"});
  ASSERT_EQ(ls.code, 0) << ls.err;
  EXPECT_NE(ls.out.find("\ndups,1,6,3,"), std::string::npos) << ls.out;
  EXPECT_NE(ls.out.find(",uint32,keep_all\n"), std::string::npos) << ls.out;

  // Lookup: the first row's value and payload, and how many rows the key has.
  RunResult l = Cli(
      {"lookup", "dups", "--from", Tmp("l21.csv").string(), "--key", "id", "--select", "label"});
  ASSERT_EQ(l.code, 0) << l.err;
  EXPECT_EQ(l.out,
            "id,n,value,found,matches,label\n"
            "7,a,0,true,3,first\n"
            "8,b,,false,0,\n"
            "9,c,1,true,2,nine\n"
            "7,d,0,true,3,first\n"
            "5,e,,false,0,\n");

  // --right index:NAME: the left rows with each pair's own payload.
  const std::map<std::string, std::string> payload = {
      {"inner",
       "id,n,label\n7,a,first\n7,a,second\n7,a,third\n9,c,nine\n9,c,nine2\n"
       "7,d,first\n7,d,second\n7,d,third\n"},
      {"left",
       "id,n,label\n7,a,first\n7,a,second\n7,a,third\n8,b,\n9,c,nine\n9,c,nine2\n"
       "7,d,first\n7,d,second\n7,d,third\n5,e,\n"},
      {"semi", "id,n,label\n7,a,first\n9,c,nine\n7,d,first\n"},
      {"anti", "id,n,label\n8,b,\n5,e,\n"},
  };
  // NAME alone: the row pairs (right row = the right file's row, empty without a match).
  const std::map<std::string, std::string> row_pairs = {
      {"inner", "left_row,right_row\n0,0\n0,2\n0,4\n2,1\n2,5\n3,0\n3,2\n3,4\n"},
      {"left", "left_row,right_row\n0,0\n0,2\n0,4\n1,\n2,1\n2,5\n3,0\n3,2\n3,4\n4,\n"},
      {"semi", "left_row,right_row\n0,0\n2,1\n3,0\n"},
      {"anti", "left_row,right_row\n1,\n4,\n"},
  };
  for (const auto& [how, want] : kSqlAnswers) {
    SCOPED_TRACE(how);
    RunResult p = Cli({"--batch-rows", "2", "join", "--left", Tmp("l21.csv").string(), "--right",
                       "index:dups", "--on", "id", "--how", how});
    ASSERT_EQ(p.code, 0) << p.err;
    EXPECT_EQ(p.out, payload.at(how));
    RunResult n =
        Cli({"join", "dups", "--left", Tmp("l21.csv").string(), "--on", "id", "--how", how});
    ASSERT_EQ(n.code, 0) << n.err;
    EXPECT_EQ(n.out, row_pairs.at(how));
    // NAME with --right FILE: the index's values are the file's rows, as an ad-hoc join.
    RunResult f = Cli({"join", "dups", "--left", Tmp("l21.csv").string(), "--right",
                       Tmp("r21.csv").string(), "--on", "id", "--how", how});
    ASSERT_EQ(f.code, 0) << f.err;
    EXPECT_EQ(f.out, want);
  }
  RunResult j = Cli(
      {"--json", "join", "dups", "--left", Tmp("l21.csv").string(), "--on", "id", "--how", "left"});
  ASSERT_EQ(j.code, 0) << j.err;
  Json doc = Json::parse(j.out, nullptr, false);
  ASSERT_FALSE(doc.is_discarded()) << j.out;
  EXPECT_EQ(doc["duplicates"], "keep_all");
  EXPECT_EQ(doc["required"], 10);
  EXPECT_TRUE(doc["rows"][3]["right_row"].is_null()) << doc["rows"][3];
  EXPECT_EQ(doc["rows"][4]["right_row"], 1);

  // A resident index keeps its own policy: --right-duplicates is refused.
  ExpectOneLineError(Cli({"join", "dups", "--left", Tmp("l21.csv").string(), "--on", "id",
                          "--right-duplicates", "lowest_row"}),
                     2, "--right-duplicates is for ad-hoc joins; index 'dups' has its own policy");
  // The default policy stays lowest_row: no matches column, describe says so.
  RunResult lb = Cli(
      {"index", "build", "dups1", "--from", Tmp("r21.csv").string(), "--key", "id", "--replace"});
  ASSERT_EQ(lb.code, 0) << lb.err;
  EXPECT_NE(lb.out.find("policy       lowest_row (the first row of a key wins)\n"),
            std::string::npos)
      << lb.out;
  RunResult l1 = Cli({"lookup", "dups1", "--from", Tmp("l21.csv").string(), "--key", "id"});
  ASSERT_EQ(l1.code, 0) << l1.err;
  EXPECT_EQ(l1.out,
            "id,n,value,found\n7,a,0,true\n8,b,,false\n9,c,1,true\n7,d,0,true\n5,e,,false\n");
  RunResult a1 =
      Cli({"join", "dups1", "--left", Tmp("l21.csv").string(), "--on", "id", "--how", "inner"});
  ASSERT_EQ(a1.code, 0) << a1.err;
  EXPECT_EQ(a1.out, "left_row,right_row\n0,0\n2,1\n3,0\n");
  ExpectOneLineError(
      Cli({"join", "dups", "--left", Tmp("l21.csv").string(), "--on", "id", "--how", "outer"}), 2,
      "--how");
}

// `agg` picks the value type from the data. Integer values sum exactly
// as int64 where float32 cannot (2^24 + 1), uint64 above INT64_MAX, overflow is
// an empty cell and a warning (never a wrapped number), --value-type overrides,
// and null value cells take no part.
TEST_F(CliEndToEnd, AggregateTypedValues) {
  std::ofstream(Tmp("ints.csv")) << "g,v\na,16777216\na,1\nb,-3\nb,\nc,9007199254740993\n";
  RunResult sum = Cli({"--json", "agg", "--from", Tmp("ints.csv").string(), "--group", "g", "--op",
                       "sum", "--value", "v"});
  ASSERT_EQ(sum.code, 0) << sum.err;
  Json j = Json::parse(sum.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << sum.out;
  EXPECT_EQ(j["value_type"], "int64");
  EXPECT_EQ(j["overflow_groups"], 0);
  ASSERT_EQ(j["rows"].size(), 3u) << sum.out;
  EXPECT_EQ(j["rows"][0]["sum_v"], int64_t{16777217});
  EXPECT_EQ(j["rows"][1]["sum_v"], -3);                         // the null cell takes no part
  EXPECT_EQ(j["rows"][2]["sum_v"], int64_t{9007199254740993});  // 2^53 + 1: not a double
  RunResult csv = Cli(
      {"agg", "--from", Tmp("ints.csv").string(), "--group", "g", "--op", "max", "--value", "v"});
  ASSERT_EQ(csv.code, 0) << csv.err;
  EXPECT_EQ(csv.out, "g,max_v\na,16777216\nb,-3\nc,9007199254740993\n");
  RunResult mean = Cli(
      {"agg", "--from", Tmp("ints.csv").string(), "--group", "g", "--op", "mean", "--value", "v"});
  ASSERT_EQ(mean.code, 0) << mean.err;
  EXPECT_EQ(mean.out, "g,mean_v\na,8388608.5\nb,-3\nc,9007199254740992\n");
  // --value-type float32: the reference path, which rounds 2^24 + 1 away.
  RunResult f32 = Cli({"agg", "--from", Tmp("ints.csv").string(), "--group", "g", "--op", "sum",
                       "--value", "v", "--value-type", "float32"});
  ASSERT_EQ(f32.code, 0) << f32.err;
  EXPECT_EQ(f32.out.substr(0, f32.out.find('\n', 8)), "g,sum_v\na,16777216");
  // uint64 above INT64_MAX, and an overflowing group.
  std::ofstream(Tmp("u64.csv")) << "g,v\n0,18446744073709551615\n0,1\n1,9223372036854775808\n";
  RunResult u = Cli({"--json", "agg", "--from", Tmp("u64.csv").string(), "--group", "g", "--op",
                     "sum", "--value", "v"});
  ASSERT_EQ(u.code, 0) << u.err;
  Json uj = Json::parse(u.out, nullptr, false);
  EXPECT_EQ(uj["value_type"], "uint64");
  EXPECT_EQ(uj["overflow_groups"], 1);
  EXPECT_TRUE(uj["rows"][0]["sum_v"].is_null()) << u.out;
  EXPECT_EQ(uj["rows"][1]["sum_v"].get<uint64_t>(), uint64_t{1} << 63);
  EXPECT_NE(u.err.find("does not fit uint64"), std::string::npos) << u.err;
  // --value-type float64 and a cell that is not of the given type.
  std::ofstream(Tmp("f64.csv")) << "g,v\n0,0.1\n0,0.2\n";
  RunResult d = Cli({"agg", "--from", Tmp("f64.csv").string(), "--group", "g", "--op", "sum",
                     "--value", "v", "--value-type", "float64"});
  ASSERT_EQ(d.code, 0) << d.err;
  EXPECT_EQ(d.out, "g,sum_v\n0,0.30000000000000004\n");
  ExpectOneLineError(Cli({"agg", "--from", Tmp("f64.csv").string(), "--group", "g", "--op", "sum",
                          "--value", "v", "--value-type", "int32"}),
                     2, "f64.csv:2: column 'v' (2): '0.1' is not a valid int32");
  ExpectOneLineError(Cli({"agg", "--from", Tmp("f64.csv").string(), "--group", "g", "--op", "sum",
                          "--value", "v", "--value-type", "int8"}),
                     2, "--value-type: 'int8' is not auto");
}


// Decimal text aggregates as float64 by default, as DuckDB and pandas read it
// (the CLI summed and averaged it in float32, reporting "(float32 values)");
// float32 stays selectable with --value-type float32. Integers stay int64.
TEST_F(CliEndToEnd, AggregateDecimalTextAsFloat64ByDefault) {
  std::ofstream(Tmp("decimals.csv")) << "g,latency_ms\n0,0.1\n0,0.2\n1,16777217.5\n1,\n2,\n";
  RunResult sum = Cli({"agg", "--from", Tmp("decimals.csv").string(), "--group", "g", "--op",
                       "sum", "--value", "latency_ms"});
  ASSERT_EQ(sum.code, 0) << sum.err;
  // 0.1 + 0.2 in float64; 16777217.5 is not a float32; the blank cells take no
  // part and a group without values is empty.
  EXPECT_EQ(sum.out, "g,sum_latency_ms\n0,0.30000000000000004\n1,16777217.5\n2,\n");
  EXPECT_NE(sum.err.find("(float64 values)"), std::string::npos) << sum.err;
  RunResult mean = Cli({"--json", "agg", "--from", Tmp("decimals.csv").string(), "--group", "g",
                        "--op", "mean", "--value", "latency_ms"});
  ASSERT_EQ(mean.code, 0) << mean.err;
  Json j = Json::parse(mean.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << mean.out;
  EXPECT_EQ(j["value_type"], "float64");
  EXPECT_EQ(j["rows"][0]["mean_latency_ms"].get<double>(), 0.30000000000000004 / 2);
  EXPECT_EQ(j["rows"][1]["mean_latency_ms"].get<double>(), 16777217.5);
  EXPECT_TRUE(j["rows"][2]["mean_latency_ms"].is_null()) << mean.out;
  // --value-type float32: the reference path, asked for.
  RunResult f32 = Cli({"agg", "--from", Tmp("decimals.csv").string(), "--group", "g", "--op",
                       "sum", "--value", "latency_ms", "--value-type", "float32"});
  ASSERT_EQ(f32.code, 0) << f32.err;
  EXPECT_NE(f32.err.find("(float32 values)"), std::string::npos) << f32.err;
  EXPECT_NE(f32.out, sum.out);
  EXPECT_NE(f32.out.find("\n1,16777218\n"), std::string::npos) << f32.out;  // rounded
  // A column without any value is float64 too (every group empty).
  std::ofstream(Tmp("no_values.csv")) << "g,v\n0,\n1,\n";
  RunResult none = Cli({"--json", "agg", "--from", Tmp("no_values.csv").string(), "--group", "g",
                        "--op", "max", "--value", "v"});
  ASSERT_EQ(none.code, 0) << none.err;
  Json n = Json::parse(none.out, nullptr, false);
  EXPECT_EQ(n["value_type"], "float64");
  EXPECT_TRUE(n["rows"][0]["max_v"].is_null()) << none.out;
  // A cell that is not a number names its position, with or without the type.
  std::ofstream(Tmp("bad_decimal.csv")) << "g,v\n0,1.5\n0,fast\n";
  ExpectOneLineError(Cli({"agg", "--from", Tmp("bad_decimal.csv").string(), "--group", "g",
                          "--op", "sum", "--value", "v"}),
                     2, "bad_decimal.csv:3: column 'v' (2): 'fast' is not a number");
}

}  // namespace
namespace {

// gpujoin hash over nested JSON Lines: arrays become lists, objects
// structs, the types inferred; the hashes equal the engine's host hasher over
// columns laid out here by hand, nulls where the contract puts them (a null
// list element keeps its row, a missing struct field nulls it).
TEST_F(CliEndToEnd, HashNestedJsonLines) {
  std::ofstream(Tmp("nested.jsonl"))
      << "{\"tags\": [1, 2], \"user\": {\"id\": 7, \"name\": \"ann\"}}\n"
         "{\"tags\": [], \"user\": {\"id\": 8}}\n"
         "{\"tags\": null, \"user\": null}\n"
         "{\"tags\": [null, 3], \"user\": {\"id\": 9, \"name\": \"bo\"}}\n";
  namespace ge = gpujoin::engine;
  auto u32 = [](const std::vector<uint32_t>& v) {
    return std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(v.data()), v.size() * 4);
  };
  const std::vector<uint32_t> values = {1, 2, 0, 3}, ids = {7, 8, 0, 9};
  const std::vector<int32_t> list_offsets = {0, 2, 2, 2, 4}, name_offsets = {0, 3, 3, 3, 5};
  const std::vector<uint8_t> v1011 = {0b1011}, v1001 = {0b1001};
  const std::string names = "annbo";
  ge::HashColumn elems;
  elems.type = ge::ColumnType::kUint32;
  elems.data = u32(values);
  elems.validity = v1011;
  elems.length = 4;
  ge::HashColumn tags;
  tags.type = ge::ColumnType::kList;
  tags.offsets = list_offsets;
  tags.validity = v1011;
  tags.length = 4;
  tags.children = {elems};
  ge::HashColumn id;
  id.type = ge::ColumnType::kUint32;
  id.data = u32(ids);
  id.validity = v1011;
  id.length = 4;
  ge::HashColumn name;
  name.type = ge::ColumnType::kString;
  name.data = std::span(reinterpret_cast<const uint8_t*>(names.data()), names.size());
  name.offsets = name_offsets;
  name.validity = v1001;
  name.length = 4;
  ge::HashColumn user;
  user.type = ge::ColumnType::kStruct;
  user.validity = v1011;
  user.length = 4;
  user.children = {id, name};
  ge::HashNode node;
  node.columns = {tags, user};
  std::vector<uint64_t> want(4);
  std::vector<uint8_t> valid(1);
  node.out64 = want;
  node.out_validity = valid;
  ASSERT_TRUE(ge::detail::ValidateHashNode(node, "test").ok());
  ge::detail::HashRowsHost(node);
  EXPECT_EQ(valid[0], 0b1001);  // row 1: user.name missing; row 2: both null

  Json j0_hash;
  for (const char* batch : {"1", "3", "1000"}) {
    RunResult r = Cli({"--json", "--batch-rows", batch, "hash", "--from",
                       Tmp("nested.jsonl").string(), "--cols", "tags,user"});
    ASSERT_EQ(r.code, 0) << r.err;
    Json j = Json::parse(r.out, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << r.out;
    EXPECT_EQ(j["column_types"]["tags"], "list<uint32>");
    EXPECT_EQ(j["column_types"]["user"], "struct<id: uint32, name: string>");
    EXPECT_EQ(j["null_rows"], 2);
    ASSERT_EQ(j["rows"].size(), 4u);
    j0_hash = j["rows"][0]["hash"];
    for (size_t i = 0; i < 4; ++i) {
      const Json& h = j["rows"][i]["hash"];
      if ((valid[0] >> i) & 1) {
        const std::string got = h.is_string() ? h.get<std::string>() : h.dump();
        EXPECT_EQ(got, std::to_string(want[i])) << "row " << i << " batch " << batch;
      } else {
        EXPECT_TRUE(h.is_null()) << "row " << i << ": " << h.dump();
      }
    }
  }
  // A type given instead: list<int64> hashes 8-byte values (differs from uint32).
  // Commas inside a type expression do not split --cols.
  RunResult typed = Cli({"--json", "hash", "--from", Tmp("nested.jsonl").string(), "--cols",
                         "tags:list<int64>,user:struct<id: int64, name: string>"});
  ASSERT_EQ(typed.code, 0) << typed.err;
  Json t = Json::parse(typed.out, nullptr, false);
  EXPECT_EQ(t["column_types"]["tags"], "list<int64>");
  EXPECT_EQ(t["column_types"]["user"], "struct<id: int64, name: string>");
  EXPECT_EQ(t["null_rows"], 2);
  EXPECT_NE(t["rows"][0]["hash"], j0_hash);
  // Values that do not mix are an input error naming the line and the path.
  std::ofstream(Tmp("mixed.jsonl")) << "{\"x\": [1]}\n{\"x\": [\"a\"]}\n";
  RunResult mixed = Cli({"hash", "--from", Tmp("mixed.jsonl").string(), "--cols", "x"});
  EXPECT_EQ(mixed.code, 2) << mixed.err;
  EXPECT_NE(mixed.err.find("mixed.jsonl:2: column 'x' at []: a string where earlier rows hold a "
                           "number"),
            std::string::npos)
      << mixed.err;
}

}  // namespace
