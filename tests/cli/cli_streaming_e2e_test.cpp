// End-to-end tests of the CLI's streaming inputs and the small fixes of issue
// 24, against a real gpujoind (CPU backend, free port): outputs do not depend
// on --batch-rows (many batches in flight give the one-batch answer), gzip and
// zstd inputs answer like the plain file, binary formats are refused by name,
// an input error part-way through a file is the parser's error and leaves no
// partial --out file, and --version, .u32 inputs without --key, the
// ALREADY_EXISTS hint, and JSON Lines numbers staying numbers.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "gpujoin/testing/compress.hpp"
#include "gpujoin/testing/files.hpp"
#include "gpujoin/testing/server_process.hpp"
#include "gpujoin/testing/subprocess.hpp"

namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;
using gpujoin::testing::Gzip;
using gpujoin::testing::RunOptions;
using gpujoin::testing::RunProcess;
using gpujoin::testing::RunResult;
using gpujoin::testing::ServerProcess;
using gpujoin::testing::Slurp;
using gpujoin::testing::Zstd;

const std::string kCli = GPUJOIN_CLI_BIN;
const std::string kExamples = GPUJOIN_EXAMPLES_DIR;

size_t LineCountOf(const std::string& s) { return std::count(s.begin(), s.end(), '\n'); }

class CliStreaming : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("gpujoin_cli_stream_" + std::to_string(getpid()));
    fs::create_directories(dir_);
    server_ = new ServerProcess(gpujoin::testing::ServerOptions{});
    address_ = server_->grpc_address();
    RunResult b = Cli({"index", "build", "sensors", "--from", kExamples + "/sensors.csv", "--key",
                       "sensor_id", "--replace"});
    ASSERT_EQ(b.code, 0) << b.err;
  }
  static void TearDownTestSuite() {
    delete server_;
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  void SetUp() override { ASSERT_FALSE(address_.empty()) << server_->log(); }

  static RunResult Cli(std::vector<std::string> args, const std::string& stdin_file = "/dev/null") {
    std::vector<std::string> argv = {kCli, "--server", address_, "--timeout", "60"};
    argv.insert(argv.end(), args.begin(), args.end());
    RunOptions o;
    o.stdin_path = stdin_file;
    o.unset_env = {"GPUJOIN_SERVER", "GPUJOIN_TOKEN"};
    return RunProcess(argv, o);
  }
  static std::string Tmp(const std::string& name) { return (dir_ / name).string(); }
  static std::string Write(const std::string& name, const std::string& bytes) {
    std::ofstream(dir_ / name, std::ios::binary) << bytes;
    return Tmp(name);
  }

  static inline fs::path dir_;
  static inline ServerProcess* server_ = nullptr;
  static inline std::string address_;
};

TEST_F(CliStreaming, OutputsDoNotDependOnTheBatchSize) {
  const std::string events = kExamples + "/events.csv";
  const std::string sensors = kExamples + "/sensors.csv";
  const std::vector<std::vector<std::string>> commands = {
      {"lookup", "sensors", "--from", events, "--key", "sensor_id"},
      {"join", "--left", events, "--right", sensors, "--on", "sensor_id"},
      {"join", "--left", events, "--right", sensors, "--on", "sensor_id", "--how", "left"},
      {"join", "sensors", "--left", events, "--on", "sensor_id"},
      {"join", "--left", events, "--right", "index:sensors", "--on", "sensor_id"},
      {"hash", "--from", events, "--cols", "sensor_id,reading,ok"},
      // Exact sums (int64): the same whatever the batching.
      {"agg", "--from", events, "--group", "sensor_id", "--op", "sum", "--value", "ts"},
      {"agg", "--from", events, "--group", "ok", "--op", "count"},
  };
  for (const auto& cmd : commands) {
    std::vector<std::string> one = {"--batch-rows", "1000000"};
    one.insert(one.end(), cmd.begin(), cmd.end());
    const RunResult whole = Cli(one);
    ASSERT_EQ(whole.code, 0) << whole.err;
    ASSERT_GT(LineCountOf(whole.out), 2u) << whole.out;
    for (const char* rows : {"1", "7", "333"}) {
      std::vector<std::string> many = {"--batch-rows", rows, "--in-flight", "3"};
      many.insert(many.end(), cmd.begin(), cmd.end());
      const RunResult r = Cli(many);
      ASSERT_EQ(r.code, 0) << r.err;
      EXPECT_EQ(r.out, whole.out) << cmd[0] << " " << cmd[1] << " --batch-rows " << rows;
    }
  }
}

TEST_F(CliStreaming, CompressedInputsAnswerLikeThePlainFile) {
  const std::string events = Slurp(kExamples + "/events.csv");
  const std::string sensors = Slurp(kExamples + "/sensors.csv");
  const RunResult plain = Cli({"lookup", "sensors", "--from", kExamples + "/events.csv", "--key",
                               "sensor_id"});
  ASSERT_EQ(plain.code, 0) << plain.err;
  for (const auto& [name, bytes] : std::vector<std::pair<std::string, std::string>>{
           {"events.csv.gz", Gzip(events)},
           {"events.csv.zst", Zstd(events)},
           {"events_gz_without_extension", Gzip(events)}}) {
    const RunResult r =
        Cli({"--batch-rows", "100", "lookup", "sensors", "--from", Write(name, bytes), "--key",
             "sensor_id"});
    ASSERT_EQ(r.code, 0) << name << ": " << r.err;
    EXPECT_EQ(r.out, plain.out) << name;
  }
  // Piped in, compressed.
  const RunResult piped = Cli({"lookup", "sensors", "--from", "-", "--key", "sensor_id"},
                              Write("stdin.csv.zst", Zstd(events)));
  ASSERT_EQ(piped.code, 0) << piped.err;
  EXPECT_EQ(piped.out, plain.out);
  // An ad-hoc join from compressed files, and an index build.
  const RunResult join_plain = Cli({"join", "--left", kExamples + "/events.csv", "--right",
                                    kExamples + "/sensors.csv", "--on", "sensor_id"});
  const RunResult join_gz =
      Cli({"join", "--left", Write("l.csv.gz", Gzip(events)), "--right",
           Write("r.csv.zst", Zstd(sensors)), "--on", "sensor_id"});
  ASSERT_EQ(join_gz.code, 0) << join_gz.err;
  EXPECT_EQ(join_gz.out, join_plain.out);
  const RunResult build = Cli({"--json", "index", "build", "sensors_gz", "--from",
                               Write("s.csv.gz", Gzip(sensors)), "--key", "sensor_id",
                               "--replace"});
  ASSERT_EQ(build.code, 0) << build.err;
  EXPECT_EQ(Json::parse(build.out)["index"]["rows"], 500);
}

TEST_F(CliStreaming, BinaryFormatsAreRefusedByName) {
  const std::string parquet = Write("events.parquet", std::string("PAR1\x15\x04", 6));
  const RunResult r = Cli({"lookup", "sensors", "--from", parquet, "--key", "sensor_id"});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "gpujoin: " + parquet +
                       ": unsupported format: parquet (convert to CSV or JSONL)\n");
  const RunResult magic = Cli({"join", "--left", kExamples + "/events.csv", "--right",
                               Write("dim", std::string("ARROW1\0\0", 8)), "--on", "sensor_id"});
  EXPECT_EQ(magic.code, 2);
  EXPECT_NE(magic.err.find("unsupported format: arrow"), std::string::npos) << magic.err;
}

// An input error part-way through a file (after batches went out) is the
// parser's one-line error, and the partly written --out file is removed.
TEST_F(CliStreaming, AnInputErrorLateInTheFileEndsTheCommand) {
  std::string text = Slurp(kExamples + "/events.csv");
  text += "999999,not-a-key,1,2,3,1\n";
  const std::string lines = std::to_string(std::count(text.begin(), text.end(), '\n'));
  const std::string path = Write("late_error.csv", text);
  const RunResult r = Cli({"--batch-rows", "100", "lookup", "sensors", "--from", path, "--key",
                           "sensor_id", "--out", Tmp("late.csv")});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("late_error.csv:" + lines + ": column 'sensor_id' (2): 'not-a-key' is not "
                       "an integer key"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(Tmp("late.csv")));
  std::string quoted = Slurp(kExamples + "/events.csv") + "1,\"open\n";
  const RunResult q = Cli({"--batch-rows", "50", "join", "--left", Write("open.csv", quoted),
                           "--right", kExamples + "/sensors.csv", "--on", "sensor_id"});
  EXPECT_EQ(q.code, 2);
  EXPECT_NE(q.err.find("open.csv:" + lines + ": field 2: unterminated quoted field"),
            std::string::npos)
      << q.err;
}

TEST_F(CliStreaming, VersionKeylessBinaryInputsAndTheReplaceHint) {
  const RunResult v = Cli({"--version"});
  EXPECT_EQ(v.code, 0);
  EXPECT_EQ(v.out.rfind("gpujoin ", 0), 0u) << v.out;
  // .u32 and .u64 files have one column, "key": --key is not needed.
  const RunResult l = Cli({"--json", "lookup", "sensors", "--from", kExamples + "/probe_ids.u32"});
  ASSERT_EQ(l.code, 0) << l.err;
  EXPECT_EQ(Json::parse(l.out)["rows"].size(), fs::file_size(kExamples + "/probe_ids.u32") / 4);
  std::string words;
  for (uint64_t k : {5000000000ull, 7ull, 5000000000ull}) {
    words.append(reinterpret_cast<const char*>(&k), 8);
  }
  const RunResult b =
      Cli({"--json", "index", "build", "wide", "--from", Write("w.u64", words), "--replace"});
  ASSERT_EQ(b.code, 0) << b.err;
  EXPECT_EQ(Json::parse(b.out)["index"]["key_type"], "uint64");
  EXPECT_EQ(Json::parse(b.out)["index"]["statistics"]["duplicate_rows"], 1);
  const RunResult csv = Cli({"lookup", "sensors", "--from", kExamples + "/events.csv"});
  EXPECT_EQ(csv.code, 2);
  EXPECT_NE(csv.err.find("--key COL is required"), std::string::npos) << csv.err;
  // A live name without --replace: the message says which option rebuilds it.
  const RunResult again = Cli({"index", "build", "wide", "--from", Tmp("w.u64")});
  EXPECT_EQ(again.code, 1);
  EXPECT_EQ(again.err,
            "gpujoin: index build wide: ALREADY_EXISTS: index 'wide' already exists; give "
            "--replace to rebuild it\n");
}

// Regression: JSON Lines numbers became strings in JSON output ("id":"5").
TEST_F(CliStreaming, JsonLinesNumbersStayNumbers) {
  const std::string in = Write("probe.jsonl",
                               "{\"sensor_id\": 303365349, \"w\": 1.5, \"ok\": true, \"s\": \"7\", "
                               "\"tags\": [1, 2]}\n"
                               "{\"sensor_id\": 3, \"w\": null, \"ok\": false, \"s\": \"x\"}\n");
  const RunResult r = Cli({"lookup", "sensors", "--from", in, "--key", "sensor_id", "--out",
                           Tmp("probe_out.jsonl")});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(Slurp(Tmp("probe_out.jsonl")),
            "{\"sensor_id\":303365349,\"w\":1.5,\"ok\":true,\"s\":\"7\",\"tags\":[1,2],"
            "\"value\":0,\"found\":true}\n"
            "{\"sensor_id\":3,\"w\":null,\"ok\":false,\"s\":\"x\",\"tags\":null,\"value\":null,"
            "\"found\":false}\n");
  // CSV output writes the same cells as text.
  const RunResult c = Cli({"lookup", "sensors", "--from", in, "--key", "sensor_id"});
  ASSERT_EQ(c.code, 0) << c.err;
  EXPECT_EQ(c.out,
            "sensor_id,w,ok,s,tags,value,found\n303365349,1.5,true,7,\"[1,2]\",0,true\n"
            "3,,false,x,,,false\n");
}

}  // namespace

namespace {

// Regression: a second gpujoind on a taken port said "address in
// use or invalid"; it names the port now, for the gRPC and the metrics port.
TEST_F(CliStreaming, APortConflictNamesThePort) {
  const std::string port = address_.substr(address_.rfind(':') + 1);
  RunOptions o;
  o.timeout = std::chrono::seconds(20);
  const RunResult grpc = RunProcess({gpujoin::testing::GpujoindBinary(), "--backend", "cpu",
                                     "--listen", "127.0.0.1:" + port, "--metrics-listen", "none"},
                                    o);
  EXPECT_NE(grpc.code, 0);
  EXPECT_NE(grpc.err.find("--listen: cannot listen on 127.0.0.1:" + port + ": port " + port +
                          " is already in use"),
            std::string::npos)
      << grpc.err;
  const RunResult metrics = RunProcess({gpujoin::testing::GpujoindBinary(), "--backend", "cpu",
                                        "--listen", "127.0.0.1:0", "--metrics-listen",
                                        "127.0.0.1:" + port},
                                       o);
  EXPECT_NE(metrics.code, 0);
  EXPECT_NE(metrics.err.find("--metrics-listen: cannot listen on 127.0.0.1:" + port + ": port " +
                             port + " is already in use"),
            std::string::npos)
      << metrics.err;
}

}  // namespace

namespace {

// index build sends one chunk per batch: the index is the one-batch index, and
// a key too wide for the type the first batch gave is an error saying so.
TEST_F(CliStreaming, IndexBuildInBatches) {
  const std::string sensors = kExamples + "/sensors.csv";
  const RunResult one = Cli({"--json", "index", "build", "s1", "--from", sensors, "--key",
                             "sensor_id", "--replace"});
  const RunResult many = Cli({"--json", "--batch-rows", "7", "index", "build", "s7", "--from",
                              sensors, "--key", "sensor_id", "--replace"});
  ASSERT_EQ(one.code, 0) << one.err;
  ASSERT_EQ(many.code, 0) << many.err;
  const Json a = Json::parse(one.out)["index"], b = Json::parse(many.out)["index"];
  EXPECT_EQ(a["rows"], b["rows"]);
  EXPECT_EQ(a["statistics"]["unique_keys"], b["statistics"]["unique_keys"]);
  EXPECT_EQ(a["payload"].size(), b["payload"].size());
  // The same lookups answer from both.
  const RunResult l1 = Cli({"lookup", "s1", "--from", kExamples + "/events.csv", "--key",
                            "sensor_id", "--select", "type,room"});
  const RunResult l7 = Cli({"lookup", "s7", "--from", kExamples + "/events.csv", "--key",
                            "sensor_id", "--select", "type,room"});
  ASSERT_EQ(l1.code, 0) << l1.err;
  EXPECT_EQ(l1.out, l7.out);
  const std::string wide = Write("wide_late.csv", "id,v\n1,a\n2,b\n3,c\n5000000000,d\n");
  const RunResult r =
      Cli({"--batch-rows", "2", "index", "build", "wl", "--from", wide, "--key", "id"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("wide_late.csv:5: column 'id' (1): '5000000000' is not a uint32 key (it is "
                       "above 4294967295) (the key type was inferred from the first 2 rows; give "
                       "--key-type)"),
            std::string::npos)
      << r.err;
}

}  // namespace
