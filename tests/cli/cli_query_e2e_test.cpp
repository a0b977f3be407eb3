// End-to-end tests of `gpujoin query` against a real gpujoind (CPU backend,
// free port, bearer token) on the example data in examples/: one lookup with
// --select (JSON, CSV to stdout and --out), two lookups (a left one, then an
// inner one on a string key with --prefix), filters whose nulls follow SQL,
// --group-by with several measures, --limit (which stops reading the input),
// --project, a composite key given as KEY=COL pairs, input batches cut to fit
// a server's small message limit, the README quick start's command as written
// there, and the errors a user meets (an unknown index, bad --agg and --lookup
// text, a --where the server refuses). Expected rows are computed here from
// the raw files with the support library's own CSV reader, not the CLI's.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "gpujoin/testing/csv.hpp"
#include "gpujoin/testing/files.hpp"
#include "gpujoin/testing/server_process.hpp"
#include "gpujoin/testing/subprocess.hpp"

namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;
using gpujoin::testing::CsvRow;
using gpujoin::testing::ReadCsv;
using gpujoin::testing::ReadCsvText;
using gpujoin::testing::RunOptions;
using gpujoin::testing::RunProcess;
using gpujoin::testing::RunResult;
using gpujoin::testing::ServerProcess;

const std::string kCli = GPUJOIN_CLI_BIN;
const std::string kExamples = GPUJOIN_EXAMPLES_DIR;
const std::string kSourceDir = GPUJOIN_SOURCE_DIR;
const std::string kToken = "q-token";

// ---------------------------------------------------------------- the model

struct Sensor {
  std::string type, site, room;
};

struct Event {
  int64_t event_id = 0;
  uint64_t sensor_id = 0;
  std::optional<double> latency_ms;
  double reading = 0;
  int64_t ok = 0;
};

size_t Col(const CsvRow& header, const std::string& name) {
  for (size_t i = 0; i < header.size(); ++i) {
    if (header[i] == name) return i;
  }
  ADD_FAILURE() << "no column " << name;
  return 0;
}

std::map<uint64_t, Sensor> Sensors() {
  const auto rows = ReadCsv(kExamples + "/sensors.csv");
  const size_t id = Col(rows[0], "sensor_id"), type = Col(rows[0], "type"),
               site = Col(rows[0], "site"), room = Col(rows[0], "room");
  std::map<uint64_t, Sensor> out;
  for (size_t r = 1; r < rows.size(); ++r) {
    out[std::stoull(*rows[r][id])] = Sensor{*rows[r][type], *rows[r][site], *rows[r][room]};
  }
  return out;
}

std::vector<Event> Events() {
  const auto rows = ReadCsv(kExamples + "/events.csv");
  const size_t id = Col(rows[0], "event_id"), sensor = Col(rows[0], "sensor_id"),
               lat = Col(rows[0], "latency_ms"), reading = Col(rows[0], "reading"),
               ok = Col(rows[0], "ok");
  std::vector<Event> out;
  for (size_t r = 1; r < rows.size(); ++r) {
    Event e;
    e.event_id = std::stoll(*rows[r][id]);
    e.sensor_id = std::stoull(*rows[r][sensor]);
    if (rows[r][lat]) e.latency_ms = std::stod(*rows[r][lat]);
    e.reading = std::stod(*rows[r][reading]);
    e.ok = std::stoll(*rows[r][ok]);
    out.push_back(e);
  }
  return out;
}

// The event IDs of a result's rows, in order.
std::vector<int64_t> EventIds(const Json& rows) {
  std::vector<int64_t> ids;
  for (const Json& r : rows) ids.push_back(r["event_id"].get<int64_t>());
  return ids;
}

// ---------------------------------------------------------------- fixture

class CliQuery : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("gpujoin_cli_query_" + std::to_string(getpid()));
    fs::create_directories(dir_);
    server_ = new ServerProcess({.token = kToken});
    address_ = server_->grpc_address();
    if (address_.empty()) return;
    // The dimensions: sensors by ID (payload type, site, room, installed),
    // sites by name (a string key: city), rooms by (site, room) keeping every sensor.
    ok_ = Cli({"index", "build", "sensors", "--from", Ex("sensors.csv"), "--key", "sensor_id"})
              .code == 0;
    std::ofstream(dir_ / "sites.csv") << "site,city\nplant-a,Lyon\nplant-b,Turin\noffice,Basel\n";
    ok_ = ok_ &&
          Cli({"index", "build", "sites", "--from", (dir_ / "sites.csv").string(), "--key", "site"})
                  .code == 0;
    ok_ = ok_ && Cli({"index", "build", "rooms", "--from", Ex("sensors.csv"), "--key", "site,room",
                      "--duplicates", "keep_all", "--columns", "type"})
                         .code == 0;
  }

  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  void SetUp() override {
    ASSERT_FALSE(address_.empty()) << "gpujoind did not start; its log:\n" << server_->log();
    ASSERT_TRUE(ok_) << "the indexes were not built; the server's log:\n" << server_->log();
  }

  static RunResult Cli(std::vector<std::string> args) {
    std::vector<std::string> argv = {kCli,   "--server",  address_, "--token",
                                     kToken, "--timeout", "60"};
    argv.insert(argv.end(), args.begin(), args.end());
    RunOptions o;
    o.unset_env = {"GPUJOIN_SERVER", "GPUJOIN_TOKEN"};
    return RunProcess(argv, o);
  }

  // `gpujoin --json query --from events.csv ARGS...`: the JSON document (rows
  // inline, the summary beside them); a failure is a test failure.
  static Json Query(std::vector<std::string> args, const std::string& from = "events.csv") {
    std::vector<std::string> argv = {"--json", "query", "--from", Ex(from)};
    argv.insert(argv.end(), args.begin(), args.end());
    RunResult r = Cli(argv);
    EXPECT_EQ(r.code, 0) << r.err;
    Json j = Json::parse(r.out, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << r.out;
    return j.is_discarded() ? Json::object() : j;
  }

  // Runs the CLI and expects exit `code` with `fragment` in its one error line.
  static void ExpectError(std::vector<std::string> args, int code, const std::string& fragment) {
    std::vector<std::string> argv = {"query", "--from", Ex("events.csv")};
    argv.insert(argv.end(), args.begin(), args.end());
    RunResult r = Cli(argv);
    EXPECT_EQ(r.code, code) << r.err;
    EXPECT_EQ(r.out, "");
    EXPECT_NE(r.err.find(fragment), std::string::npos) << "want '" << fragment << "' in " << r.err;
  }

  static std::string Ex(const std::string& name) { return kExamples + "/" + name; }

  static inline fs::path dir_;
  static inline ServerProcess* server_ = nullptr;
  static inline std::string address_;
  static inline bool ok_ = false;
};

// ---------------------------------------------------------------- row plans

TEST_F(CliQuery, OneLookupWithSelectKeepsMatchingRowsInInputOrder) {
  const auto sensors = Sensors();
  const auto events = Events();
  Json j = Query({"--lookup", "sensors:sensor_id", "--select", "type,site"});
  std::vector<int64_t> want;
  for (const Event& e : events) {
    if (sensors.count(e.sensor_id)) want.push_back(e.event_id);
  }
  ASSERT_LT(want.size(), events.size()) << "the example has events of unknown sensors";
  ASSERT_EQ(j["rows"].size(), want.size());
  EXPECT_EQ(EventIds(j["rows"]), want);
  for (const Json& r : j["rows"]) {
    const Sensor& s = sensors.at(r["sensor_id"].get<uint64_t>());
    EXPECT_EQ(r["type"], s.type);
    EXPECT_EQ(r["site"], s.site);
    EXPECT_EQ(r["sensors.found"], true);
    EXPECT_FALSE(r.contains("room")) << "--select type,site adds no room";
  }
  // The input's columns, then what the lookup added.
  const std::vector<std::string> input = {"event_id",   "sensor_id", "ts",
                                          "latency_ms", "reading",   "ok"};
  const auto columns = j["columns"].get<std::vector<std::string>>();
  ASSERT_GE(columns.size(), input.size());
  EXPECT_EQ(std::vector<std::string>(columns.begin(), columns.begin() + input.size()), input);
  EXPECT_EQ(std::set<std::string>(columns.begin() + input.size(), columns.end()),
            (std::set<std::string>{"type", "site", "sensors.found"}));
  // The summary: every input row went through the lookup step.
  EXPECT_EQ(j["input_rows"], events.size());
  EXPECT_EQ(j["result_rows"], want.size());
  ASSERT_EQ(j["steps"].size(), 1u) << j["steps"].dump();
  EXPECT_EQ(j["steps"][0]["kind"], "lookup");
  EXPECT_EQ(j["steps"][0]["index"], "sensors");
  EXPECT_EQ(j["steps"][0]["rows_in"], events.size());
  EXPECT_EQ(j["steps"][0]["rows_out"], want.size());
  EXPECT_EQ(j["steps"][0]["statistics"]["found"], want.size());

  // Without --json: CSV on stdout, the same rows.
  RunResult csv = Cli({"-q", "query", "--from", Ex("events.csv"), "--lookup", "sensors:sensor_id",
                       "--select", "type,site"});
  ASSERT_EQ(csv.code, 0) << csv.err;
  EXPECT_EQ(csv.err, "");
  const auto rows = ReadCsvText(csv.out);
  ASSERT_EQ(rows.size(), want.size() + 1);
  EXPECT_EQ(*rows[0][Col(rows[0], "type")], "type");
  EXPECT_EQ(std::stoll(*rows[1][Col(rows[0], "event_id")]), want[0]);

  // With --out: the file holds the rows, stdout nothing.
  const fs::path out = dir_ / "one_lookup.csv";
  RunResult file = Cli({"-q", "query", "--from", Ex("events.csv"), "--lookup", "sensors:sensor_id",
                        "--select", "type,site", "--out", out.string()});
  ASSERT_EQ(file.code, 0) << file.err;
  EXPECT_EQ(file.out, "");
  EXPECT_EQ(gpujoin::testing::Slurp(out), csv.out);
}

TEST_F(CliQuery, TwoLookupsLeftThenInnerOnAStringKeyWithPrefix) {
  const auto sensors = Sensors();
  const std::map<std::string, std::string> cities = {
      {"plant-a", "Lyon"}, {"plant-b", "Turin"}, {"office", "Basel"}};
  // Every event survives the left lookup (unknown sensors with a null site);
  // the inner lookup of the site then keeps those whose site has a city.
  std::vector<int64_t> want;
  for (const Event& e : Events()) {
    auto s = sensors.find(e.sensor_id);
    if (s != sensors.end() && cities.count(s->second.site)) want.push_back(e.event_id);
  }
  Json j = Query({"--lookup", "sensors:sensor_id", "--select", "type,site", "--how", "left",
                  "--lookup", "sites:site", "--prefix", "site_", "--select", "city"});
  ASSERT_EQ(j["rows"].size(), want.size());
  EXPECT_EQ(EventIds(j["rows"]), want);
  for (const Json& r : j["rows"]) {
    const Sensor& s = sensors.at(r["sensor_id"].get<uint64_t>());
    EXPECT_EQ(r["site"], s.site);
    EXPECT_EQ(r["site_city"], cities.at(s.site));
    EXPECT_EQ(r["sites.found"], true);
  }
  ASSERT_EQ(j["steps"].size(), 2u) << j["steps"].dump();
  EXPECT_EQ(j["steps"][0]["rows_out"], j["steps"][0]["rows_in"]) << "a left lookup keeps every row";
  EXPECT_EQ(j["steps"][1]["index"], "sites");
  EXPECT_EQ(j["steps"][1]["rows_out"], want.size());
}

TEST_F(CliQuery, WhereFollowsSqlNulls) {
  const auto sensors = Sensors();
  const auto events = Events();
  std::vector<int64_t> null_latency, at_most_5, known, unknown_or_co2;
  for (const Event& e : events) {
    if (!e.latency_ms) null_latency.push_back(e.event_id);
    if (e.latency_ms && !(*e.latency_ms > 5)) at_most_5.push_back(e.event_id);
    if (e.latency_ms) known.push_back(e.event_id);
    auto s = sensors.find(e.sensor_id);
    if (s == sensors.end() || s->second.type == "co2") unknown_or_co2.push_back(e.event_id);
  }
  ASSERT_FALSE(null_latency.empty()) << "the example has events without a latency";
  EXPECT_EQ(EventIds(Query({"--where", "latency_ms is null"})["rows"]), null_latency);
  // not (null > 5) is null: a row without a latency is dropped both ways.
  EXPECT_EQ(EventIds(Query({"--where", "not latency_ms > 5"})["rows"]), at_most_5);
  EXPECT_EQ(EventIds(Query({"--where", "latency_ms > 5 or latency_ms <= 5"})["rows"]), known);
  // After a left lookup an unknown sensor's type is null.
  EXPECT_EQ(EventIds(Query({"--lookup", "sensors:sensor_id", "--select", "type", "--how", "left",
                            "--where", "type is null or type = 'co2'"})["rows"]),
            unknown_or_co2);
  // Two --where are two filter steps (and).
  std::vector<int64_t> both;
  for (const Event& e : events) {
    if (e.latency_ms && *e.latency_ms > 5 && e.ok == 1) both.push_back(e.event_id);
  }
  Json two = Query({"--where", "latency_ms > 5", "--where", "ok = 1"});
  EXPECT_EQ(EventIds(two["rows"]), both);
  ASSERT_EQ(two["steps"].size(), 2u);
  EXPECT_EQ(two["steps"][1]["kind"], "filter");
}

TEST_F(CliQuery, LimitStopsReadingAndProjectRenames) {
  const auto sensors = Sensors();
  std::vector<int64_t> want;
  std::string first_type;  // of the first event with a known sensor
  for (const Event& e : Events()) {
    if (!sensors.count(e.sensor_id) || want.size() == 7) continue;
    if (want.empty()) first_type = sensors.at(e.sensor_id).type;
    want.push_back(e.event_id);
  }
  // Small batches: the first answer spends the limit, and the rest of the
  // file is not sent.
  RunResult r = Cli({"--batch-rows", "100", "query", "--from", Ex("events.csv"), "--lookup",
                     "sensors:sensor_id", "--select", "type", "--limit", "7"});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto rows = ReadCsvText(r.out);
  ASSERT_EQ(rows.size(), want.size() + 1) << r.out;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(std::stoll(*rows[i + 1][Col(rows[0], "event_id")]), want[i]);
  }
  EXPECT_NE(r.err.find("the limit was reached"), std::string::npos) << r.err;

  Json p = Query({"--lookup", "sensors:sensor_id", "--select", "type", "--project",
                  "event_id,type=sensor_type", "--limit", "3"});
  EXPECT_EQ(p["columns"], Json({"event_id", "sensor_type"}));
  ASSERT_EQ(p["rows"].size(), 3u);
  EXPECT_EQ(EventIds(p["rows"]), std::vector<int64_t>(want.begin(), want.begin() + 3));
  EXPECT_EQ(p["rows"][0]["sensor_type"], first_type);
}

// ---------------------------------------------------------------- aggregate plans

struct Group {
  uint64_t count = 0, with_latency = 0;
  double sum_reading = 0, sum_latency = 0;
  double min = INFINITY, max = -INFINITY;
};

TEST_F(CliQuery, GroupByWithSeveralMeasures) {
  const auto sensors = Sensors();
  std::vector<std::string> order;  // types by their first event
  std::map<std::string, Group> want;
  for (const Event& e : Events()) {
    auto s = sensors.find(e.sensor_id);
    if (s == sensors.end()) continue;
    const std::string& type = s->second.type;
    if (!want.count(type)) order.push_back(type);
    Group& g = want[type];
    ++g.count;
    g.sum_reading += e.reading;
    if (!e.latency_ms) continue;
    ++g.with_latency;
    g.sum_latency += *e.latency_ms;
    g.min = std::min(g.min, *e.latency_ms);
    g.max = std::max(g.max, *e.latency_ms);
  }
  // Several batches (a global option after the command): groups span them.
  Json j = Query({"--batch-rows", "500", "--lookup", "sensors:sensor_id", "--select", "type",
                  "--group-by", "type", "--agg",
                  "count(), count(latency_ms) as with_latency, sum(reading), "
                  "MIN(latency_ms) as min_lat, max(latency_ms) as max_lat, "
                  "avg(latency_ms) as mean_lat"});
  uint64_t known = 0;
  for (const auto& [type, g] : want) known += g.count;
  ASSERT_EQ(j["steps"].size(), 2u) << j["steps"].dump();
  EXPECT_EQ(j["steps"][1]["kind"], "aggregate");
  EXPECT_EQ(j["steps"][1]["rows_in"], known) << "the rows the batches brought";
  EXPECT_EQ(j["steps"][1]["rows_out"], order.size()) << "the groups";
  EXPECT_EQ(j["columns"], Json({"type", "count", "with_latency", "sum_reading", "min_lat",
                                "max_lat", "mean_lat"}));
  ASSERT_EQ(j["rows"].size(), order.size());
  for (size_t i = 0; i < order.size(); ++i) {
    const Json& r = j["rows"][i];
    const Group& g = want.at(order[i]);
    EXPECT_EQ(r["type"], order[i]) << "groups come in the order of their first row";
    EXPECT_EQ(r["count"], g.count) << order[i];
    EXPECT_EQ(r["with_latency"], g.with_latency) << order[i];
    EXPECT_NEAR(r["sum_reading"].get<double>(), g.sum_reading, 1e-9 * std::abs(g.sum_reading));
    EXPECT_EQ(r["min_lat"].get<double>(), g.min) << order[i];
    EXPECT_EQ(r["max_lat"].get<double>(), g.max) << order[i];
    const double mean = g.sum_latency / static_cast<double>(g.with_latency);
    EXPECT_NEAR(r["mean_lat"].get<double>(), mean, 1e-12 * mean) << order[i];
  }

  // --group-by alone counts; a limit after the aggregate keeps the first groups.
  Json counts = Query(
      {"--lookup", "sensors:sensor_id", "--select", "type", "--group-by", "type", "--limit", "2"});
  EXPECT_EQ(counts["columns"], Json({"type", "count"}));
  ASSERT_EQ(counts["rows"].size(), 2u);
  EXPECT_EQ(counts["rows"][1]["type"], order[1]);
  EXPECT_EQ(counts["rows"][1]["count"], want.at(order[1]).count);

  // --agg alone: one group of every row, integer sums exact.
  const auto events = Events();
  int64_t ok_sum = 0;
  for (const Event& e : events) ok_sum += e.ok;
  Json all = Query({"--agg", "count(*) as n,sum(ok)"});
  ASSERT_EQ(all["rows"].size(), 1u);
  EXPECT_EQ(all["rows"][0]["n"], events.size());
  EXPECT_EQ(all["rows"][0]["sum_ok"], ok_sum);
}

TEST_F(CliQuery, CompositeKeyAsKeyEqualsColumnPairs) {
  // Every sensor's (site, room) is in the rooms index: a semi lookup keeps
  // each sensor once; count them per site.
  std::vector<std::string> order;
  std::map<std::string, uint64_t> per_site;
  const auto rows = ReadCsv(Ex("sensors.csv"));
  const size_t site = Col(rows[0], "site");
  for (size_t r = 1; r < rows.size(); ++r) {
    if (!per_site.count(*rows[r][site])) order.push_back(*rows[r][site]);
    ++per_site[*rows[r][site]];
  }
  // KEY=COL pairs in another order than the index's key (site, room).
  Json j = Query({"--lookup", "rooms:room=room,site=site", "--select", "", "--how", "semi",
                  "--group-by", "site"},
                 "sensors.csv");
  ASSERT_EQ(j["rows"].size(), order.size());
  for (size_t i = 0; i < order.size(); ++i) {
    EXPECT_EQ(j["rows"][i]["site"], order[i]);
    EXPECT_EQ(j["rows"][i]["count"], per_site[order[i]]);
  }
  // A bare INDEX reads the columns named as its key columns.
  Json bare = Query({"--lookup", "rooms", "--select", "", "--how", "semi", "--group-by", "site"},
                    "sensors.csv");
  EXPECT_EQ(bare["rows"], j["rows"]);
}

// The README's "mean latency by sensor type", run exactly as written there.
TEST_F(CliQuery, ReadmeQuickStartMeanLatencyBySensorType) {
  const std::string readme = gpujoin::testing::Slurp(kSourceDir + "/README.md");
  std::string line;
  for (size_t at = 0; at < readme.size();) {
    const size_t end = readme.find('\n', at);
    const std::string l = readme.substr(at, end - at);
    if (l.rfind("$G query ", 0) == 0 &&
        l.find("mean latency by sensor type") != std::string::npos) {
      line = l;
    }
    if (end == std::string::npos) break;
    at = end + 1;
  }
  ASSERT_FALSE(line.empty()) << "README.md has no `$G query ...  # mean latency by sensor type`";
  RunOptions o;
  o.set_env = {"GPUJOIN_SERVER=" + address_, "GPUJOIN_TOKEN=" + kToken};
  RunResult r =
      RunProcess({"/bin/bash", "-c", "cd '" + kSourceDir + "' && G='" + kCli + "' && " + line}, o);
  ASSERT_EQ(r.code, 0) << line << "\n" << r.err;
  const auto rows = ReadCsvText(r.out);
  ASSERT_GT(rows.size(), 1u) << r.out;
  std::map<std::string, Group> want;
  const auto sensors = Sensors();
  for (const Event& e : Events()) {
    auto s = sensors.find(e.sensor_id);
    if (s == sensors.end() || !e.latency_ms) continue;
    Group& g = want[s->second.type];
    ++g.with_latency;
    g.sum_latency += *e.latency_ms;
  }
  ASSERT_EQ(rows.size(), want.size() + 1) << r.out;
  const size_t type = Col(rows[0], "type");
  size_t mean = rows[0].size();
  for (size_t c = 0; c < rows[0].size(); ++c) {
    if (rows[0][c] && rows[0][c]->find("mean") != std::string::npos) mean = c;
  }
  ASSERT_LT(mean, rows[0].size()) << "no mean column in " << r.out;
  for (size_t i = 1; i < rows.size(); ++i) {
    const Group& g = want.at(*rows[i][type]);
    const double expected = g.sum_latency / static_cast<double>(g.with_latency);
    EXPECT_NEAR(std::stod(*rows[i][mean]), expected, 1e-12 * expected) << *rows[i][type];
  }
}

// A server with a small message limit: the CLI cuts a batch whose rows do not
// fit one request into several, and the server's answers, larger than a
// message, come in parts that the client reassembles.
TEST(CliQuerySmallMessages, BatchesAreCutToFitAndAnswersReassembled) {
  ServerProcess server({.extra_args = {"--max-message-bytes=65536"}});
  ASSERT_TRUE(server.ready()) << server.log();
  const fs::path dir =
      fs::temp_directory_path() / ("gpujoin_cli_query_small_" + std::to_string(getpid()));
  fs::create_directories(dir);
  auto cli = [&](std::vector<std::string> args) {
    std::vector<std::string> argv = {kCli, "--server", server.grpc_address(), "--timeout", "60"};
    argv.insert(argv.end(), args.begin(), args.end());
    RunOptions o;
    o.unset_env = {"GPUJOIN_SERVER", "GPUJOIN_TOKEN"};
    return RunProcess(argv, o);
  };
  auto blob = [](int k) { return std::string(200, static_cast<char>('a' + k % 26)); };
  {
    std::ofstream dim(dir / "wide.csv");
    dim << "k,blob\n";
    for (int k = 0; k < 50; ++k) dim << k << "," << blob(k) << "\n";
    std::ofstream facts(dir / "facts.csv");
    facts << "id,k,note\n";
    for (int i = 0; i < 3000; ++i)
      facts << i << "," << i % 50 << "," << std::string(60, 'n') << "\n";
  }
  RunResult built =
      cli({"-q", "index", "build", "wide", "--from", (dir / "wide.csv").string(), "--key", "k"});
  ASSERT_EQ(built.code, 0) << built.err;
  // One input batch of about 240 KB: several requests; answers of about 800 KB.
  RunResult r = cli({"--json", "query", "--from", (dir / "facts.csv").string(), "--lookup",
                     "wide:k", "--select", "blob"});
  ASSERT_EQ(r.code, 0) << r.err;
  Json j = Json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.out.substr(0, 2000);
  ASSERT_EQ(j["rows"].size(), 3000u);
  for (int i = 0; i < 3000; ++i) {
    ASSERT_EQ(j["rows"][i]["id"], i);
    ASSERT_EQ(j["rows"][i]["blob"], blob(i % 50)) << i;
  }
  EXPECT_EQ(j["input_rows"], 3000);

  // A row no request can hold is an input error naming its line.
  std::ofstream(dir / "huge.csv") << "id,k\n1,1\n2," << std::string(70000, 'x') << "\n";
  RunResult huge = cli({"query", "--from", (dir / "huge.csv").string(), "--limit", "5"});
  EXPECT_EQ(huge.code, 2) << huge.err;
  EXPECT_NE(huge.err.find("huge.csv:3: the row needs more than a Query request holds"),
            std::string::npos)
      << huge.err;
  std::error_code ec;
  fs::remove_all(dir, ec);
}

// ---------------------------------------------------------------- errors

TEST_F(CliQuery, ErrorsNameTheFlag) {
  // The server does not know the index: exit 1, the --lookup named.
  ExpectError({"--lookup", "nosuch:sensor_id"}, 1, "query --lookup 'nosuch:sensor_id': NOT_FOUND");
  // --agg is parsed here: exit 2 before anything is sent.
  ExpectError(
      {"--lookup", "sensors:sensor_id", "--group-by", "type", "--agg", "median(latency_ms)"}, 2,
      "--agg 'median(latency_ms)': measure 'median(latency_ms)': unknown function");
  ExpectError({"--agg", "count(),sum()"}, 2, "sum() needs a column");
  ExpectError({"--agg", "mean(latency_ms) as"}, 2, "--agg");
  // --where is the server's: its refusal is an RPC error (exit 1) with its
  // code and text, named by the flag that made the step.
  ExpectError({"--where", "latency_ms >"}, 1, "query --where 'latency_ms >': INVALID_ARGUMENT: ");
  ExpectError({"--lookup", "sensors:sensor_id", "--select", "type", "--where", "type = 5"}, 1,
              "query --where 'type = 5': INVALID_ARGUMENT: ");
  // A second column of one name: the server names the step, the CLI its --lookup.
  ExpectError({"--lookup", "sensors:sensor_id", "--select", "type", "--lookup", "sensors:sensor_id",
               "--select", "type", "--prefix", ""},
              1, "query --lookup 'sensors:sensor_id': INVALID_ARGUMENT: ");
  // The flags that apply to a --lookup.
  ExpectError({"--select", "type", "--lookup", "sensors:sensor_id"}, 2,
              "--select 'type' comes before any --lookup");
  ExpectError({"--lookup", "sensors:sensor_id", "--how", "outer"}, 2, "--how 'outer'");
  ExpectError({"--lookup", "sensors:sensor_id", "--select", "a", "--select", "b"}, 2,
              "--select is given twice for --lookup 'sensors:sensor_id'");
  ExpectError({"--lookup", ":sensor_id"}, 2, "--lookup ':sensor_id': write INDEX:COL");
  ExpectError({"--lookup", "sensors:sensor_id", "--select", "colour"}, 2,
              "index 'sensors' has no payload column 'colour'");
  ExpectError({"--lookup", "sensors:sensor_id,ts"}, 2, "index 'sensors' has one uint32 key");
  ExpectError({"--lookup", "rooms:site"}, 2, "give 2 columns in that order");
  ExpectError({"--lookup", "sensors:reading"}, 2, "an integer key is needed");
  ExpectError({"--schema", "nope:i64", "--limit", "1"}, 2, "--schema: ");
  ExpectError({}, 2, "the plan has no steps");
}

}  // namespace
