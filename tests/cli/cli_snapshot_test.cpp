// `gpujoin index save|load` against a real gpujoind with --data-dir (issue 23):
// a saved copy loads as another index that answers lookups like the original
// (the CSV output of `gpujoin lookup` compared), the JSON forms, a corrupt file
// refused with DATA_LOSS and exit code 1, and a server without --data-dir
// refusing both with FAILED_PRECONDITION naming the flag.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "gpujoin/testing/server_process.hpp"
#include "gpujoin/testing/subprocess.hpp"

namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;
using gpujoin::testing::RunOptions;
using gpujoin::testing::RunProcess;
using gpujoin::testing::RunResult;
using gpujoin::testing::ServerOptions;
using gpujoin::testing::ServerProcess;

const std::string kCli = GPUJOIN_CLI_BIN;
const std::string kExamples = GPUJOIN_EXAMPLES_DIR;

class CliSnapshotTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("gpujoin_cli_snapshots_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    server_.reset();
    fs::remove_all(dir_);
  }
  void Start(bool data_dir) {
    ServerOptions o;
    if (data_dir) o.extra_args.push_back("--data-dir=" + (dir_ / "data").string());
    server_ = std::make_unique<ServerProcess>(o);
    ASSERT_TRUE(server_->ready()) << server_->log();
  }
  RunResult Cli(std::vector<std::string> args) {
    std::vector<std::string> argv = {kCli, "--server", server_->grpc_address(), "--timeout", "60"};
    argv.insert(argv.end(), args.begin(), args.end());
    RunOptions options;
    options.unset_env = {"GPUJOIN_SERVER", "GPUJOIN_TOKEN"};
    return RunProcess(argv, options);
  }
  std::string LookupCsv(const std::string& index) {
    const fs::path out = dir_ / (index + ".csv");
    RunResult r = Cli({"lookup", index, "--from", kExamples + "/sensors.csv", "--key", "sensor_id",
                       "--out", out.string()});
    EXPECT_EQ(r.code, 0) << r.err;
    std::ifstream in(out);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  fs::path dir_;
  std::unique_ptr<ServerProcess> server_;
};

TEST_F(CliSnapshotTest, SaveAndLoadACopy) {
  Start(true);
  RunResult b = Cli(
      {"index", "build", "sensors", "--from", kExamples + "/sensors.csv", "--key", "sensor_id"});
  ASSERT_EQ(b.code, 0) << b.err;
  RunResult s = Cli({"index", "save", "sensors", "--file", "sensors-copy.snap"});
  ASSERT_EQ(s.code, 0) << s.err;
  EXPECT_EQ(s.out.rfind("saved index sensors (version 1) to sensors-copy.snap (", 0), 0u)
      << s.out;
  EXPECT_TRUE(fs::exists(dir_ / "data" / "sensors-copy.snap"));
  RunResult l = Cli({"--json", "index", "load", "copy", "--file", "sensors-copy.snap"});
  ASSERT_EQ(l.code, 0) << l.err;
  Json j = Json::parse(l.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << l.out;
  EXPECT_EQ(j["loaded"], "copy");
  EXPECT_EQ(j["file"], "sensors-copy.snap");
  EXPECT_EQ(LookupCsv("copy"), LookupCsv("sensors"));
  RunResult again = Cli({"index", "load", "copy", "--file", "sensors-copy.snap"});
  EXPECT_EQ(again.code, 1);
  EXPECT_NE(again.err.find("ALREADY_EXISTS"), std::string::npos) << again.err;
  RunResult replaced = Cli({"index", "load", "copy", "--file", "sensors-copy.snap", "--replace"});
  EXPECT_EQ(replaced.code, 0) << replaced.err;
  EXPECT_EQ(replaced.out, "loaded index copy (version 2) from sensors-copy.snap\n");
  RunResult js = Cli({"--json", "index", "save", "copy"});
  ASSERT_EQ(js.code, 0) << js.err;
  Json sj = Json::parse(js.out, nullptr, false);
  EXPECT_EQ(sj["file"], "copy.gjsnap");
  EXPECT_EQ(sj["version"], 2);
  EXPECT_EQ(sj["bytes"], fs::file_size(dir_ / "data" / "copy.gjsnap"));

  // A corrupt file: refused, nothing installed.
  {
    std::fstream f(dir_ / "data" / "sensors-copy.snap",
                   std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(200);
    f.put('\x7f');
  }
  RunResult bad = Cli({"index", "load", "broken", "--file", "sensors-copy.snap"});
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.err.find("DATA_LOSS"), std::string::npos) << bad.err;
  RunResult d = Cli({"index", "describe", "broken"});
  EXPECT_NE(d.code, 0);
}

// `gpujoin index drop` deletes the index's snapshot: once the build's write is
// there (--wait-durable), the drop removes <name>.gjsnap before it returns, an
// index dropped right after its build (its background write racing the drop)
// leaves no file either, and a restart on the same data dir serves only the
// index that was kept.
TEST_F(CliSnapshotTest, DropDeletesTheSnapshotAndARestartServesNothing) {
  Start(true);
  const fs::path data = dir_ / "data";
  for (const std::string name : {"sensors", "kept"}) {
    RunResult b = Cli({"index", "build", name, "--from", kExamples + "/sensors.csv", "--key",
                       "sensor_id", "--wait-durable", "-q"});
    ASSERT_EQ(b.code, 0) << b.err;
  }
  ASSERT_TRUE(fs::exists(data / "sensors.gjsnap")) << server_->log();
  ASSERT_TRUE(fs::exists(data / "kept.gjsnap")) << server_->log();
  RunResult drop = Cli({"index", "drop", "sensors"});
  ASSERT_EQ(drop.code, 0) << drop.err;
  EXPECT_FALSE(fs::exists(data / "sensors.gjsnap"));
  RunResult quick = Cli(
      {"index", "build", "quick", "--from", kExamples + "/sensors.csv", "--key", "sensor_id", "-q"});
  ASSERT_EQ(quick.code, 0) << quick.err;
  ASSERT_EQ(Cli({"index", "drop", "quick"}).code, 0);
  EXPECT_FALSE(fs::exists(data / "quick.gjsnap"));

  EXPECT_EQ(server_->StopWith(SIGTERM), 0) << server_->log();
  Start(true);
  // (A start removes the temporary files of writes an earlier process left.)
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(data)) files.push_back(e.path().filename().string());
  EXPECT_EQ(files, std::vector<std::string>{"kept.gjsnap"});
  RunResult ls = Cli({"--json", "index", "ls"});
  ASSERT_EQ(ls.code, 0) << ls.err;
  Json j = Json::parse(ls.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << ls.out;
  std::vector<std::string> names;
  for (const Json& i : j["indexes"]) names.push_back(i["name"]);
  EXPECT_EQ(names, std::vector<std::string>{"kept"}) << ls.out;
  RunResult gone = Cli({"index", "describe", "sensors"});
  EXPECT_EQ(gone.code, 1);
  EXPECT_NE(gone.err.find("NOT_FOUND"), std::string::npos) << gone.err;
}

TEST_F(CliSnapshotTest, WithoutDataDirBothAreRefused) {
  Start(false);
  RunResult b = Cli(
      {"index", "build", "sensors", "--from", kExamples + "/sensors.csv", "--key", "sensor_id"});
  ASSERT_EQ(b.code, 0) << b.err;
  for (const std::string verb : {"save", "load"}) {
    RunResult r = Cli({"index", verb, "sensors"});
    EXPECT_EQ(r.code, 1) << verb;
    EXPECT_NE(r.err.find("FAILED_PRECONDITION"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("--data-dir"), std::string::npos) << r.err;
  }
}

}  // namespace
