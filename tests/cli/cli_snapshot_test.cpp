// `gpujoin index save|load|files|rm-file` and `index build --wait-durable`
// against a real gpujoind with --data-dir: a saved copy loads as another index
// that answers lookups like the original (the CSV output of `gpujoin lookup`
// compared), the JSON forms, a corrupt file refused with DATA_LOSS and exit
// code 1, a copy named like another index's snapshot refused, the files table
// and its JSON, deleting a copy but not a live index's snapshot, the durable
// version in describe, `index drop` deleting the snapshot (a restart serves
// only what was kept), and a server without --data-dir refusing them all with
// FAILED_PRECONDITION naming the flag.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "gpujoin/testing/files.hpp"
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
using gpujoin::testing::Slurp;

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
  RunResult Cli(std::vector<std::string> args, int timeout_seconds = 60) {
    std::vector<std::string> argv = {kCli, "--server", server_->grpc_address(), "--timeout",
                                     std::to_string(timeout_seconds)};
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
    return Slurp(out);
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

// `index build --wait-durable` answers with the snapshot written, and describe
// says which version the file holds (text and JSON).
TEST_F(CliSnapshotTest, WaitDurableBuildAndTheDurableVersion) {
  Start(true);
  RunResult b = Cli({"index", "build", "sensors", "--from", kExamples + "/sensors.csv", "--key",
                     "sensor_id", "--wait-durable", "-q"});
  ASSERT_EQ(b.code, 0) << b.err;
  // No waiting here: the file is in place when the command returns.
  EXPECT_TRUE(fs::is_regular_file(dir_ / "data" / "sensors.gjsnap"));
  RunResult d = Cli({"index", "describe", "sensors"});
  ASSERT_EQ(d.code, 0) << d.err;
  EXPECT_NE(d.out.find("\ndurable      version 1 (in its snapshot)\n"), std::string::npos)
      << d.out;
  RunResult j = Cli({"--json", "index", "describe", "sensors"});
  ASSERT_EQ(j.code, 0) << j.err;
  Json dj = Json::parse(j.out, nullptr, false);
  ASSERT_FALSE(dj.is_discarded()) << j.out;
  EXPECT_EQ(dj["index"]["version"], 1) << j.out;
  EXPECT_EQ(dj["index"]["durable_version"], 1) << j.out;
  RunResult rb = Cli({"--json", "index", "build", "sensors", "--from", kExamples + "/sensors.csv",
                      "--key", "sensor_id", "--replace", "--wait-durable"});
  ASSERT_EQ(rb.code, 0) << rb.err;
  Json bj = Json::parse(rb.out, nullptr, false);
  ASSERT_FALSE(bj.is_discarded()) << rb.out;
  EXPECT_EQ(bj["index"]["version"], 2) << rb.out;
  EXPECT_EQ(bj["index"]["durable_version"], 2) << rb.out;
}

// A build whose snapshot cannot be written: --wait-durable fails with exit
// code 1 and the server's reason; the index is installed and serving, and
// describe prints no durable line (nothing is in a snapshot).
// (The write may fail before or after the build waits for it: the answer is
// the same.)
TEST_F(CliSnapshotTest, WaitDurableFailsWhenTheWriteFails) {
  ServerOptions o;
  o.extra_args = {"--data-dir=" + (dir_ / "data").string(), "--max-snapshot-bytes=1K"};
  server_ = std::make_unique<ServerProcess>(o);
  ASSERT_TRUE(server_->ready()) << server_->log();
  RunResult b = Cli({"index", "build", "sensors", "--from", kExamples + "/sensors.csv", "--key",
                     "sensor_id", "--wait-durable", "-q"},
                    /*timeout_seconds=*/10);
  EXPECT_EQ(b.code, 1) << b.err;
  EXPECT_NE(b.err.find("RESOURCE_EXHAUSTED"), std::string::npos) << b.err;
  EXPECT_NE(b.err.find("installed and serving"), std::string::npos) << b.err;
  RunResult d = Cli({"index", "describe", "sensors"});
  ASSERT_EQ(d.code, 0) << d.err;
  EXPECT_EQ(d.out.find("durable"), std::string::npos) << d.out;
  EXPECT_FALSE(LookupCsv("sensors").empty());
}

// `index files` lists the snapshot and the copies (a table, a stderr summary,
// JSON); `index rm-file` deletes a copy, refuses a live index's snapshot with
// exit code 1 and the way out, and a copy named like another index's snapshot
// is refused before anything is written.
TEST_F(CliSnapshotTest, FilesAndRmFile) {
  ServerOptions o;
  o.extra_args = {"--data-dir=" + (dir_ / "data").string(), "--max-copy-bytes=10M"};
  server_ = std::make_unique<ServerProcess>(o);
  ASSERT_TRUE(server_->ready()) << server_->log();
  const fs::path data = dir_ / "data";
  for (const std::string name : {"sensors", "other"}) {
    RunResult b = Cli({"index", "build", name, "--from", kExamples + "/sensors.csv", "--key",
                       "sensor_id", "--wait-durable", "-q"});
    ASSERT_EQ(b.code, 0) << b.err;
  }
  ASSERT_EQ(Cli({"index", "save", "sensors", "--file", "sensors.bak"}).code, 0);
  const uintmax_t copy_bytes = fs::file_size(data / "sensors.bak");
  const uintmax_t snap_bytes = fs::file_size(data / "sensors.gjsnap");
  const uintmax_t other_bytes = fs::file_size(data / "other.gjsnap");

  RunResult t = Cli({"index", "files"});
  ASSERT_EQ(t.code, 0) << t.err;
  EXPECT_EQ(t.out, "file,bytes,kind,index\n"
                   "other.gjsnap," + std::to_string(other_bytes) + ",snapshot,other\n"
                   "sensors.bak," + std::to_string(copy_bytes) + ",copy,\"\"\n"
                   "sensors.gjsnap," + std::to_string(snap_bytes) + ",snapshot,sensors\n");
  EXPECT_NE(t.err.find(" of 10.0 MiB (--max-copy-bytes); data dir limit no limit"),
            std::string::npos)
      << t.err;
  RunResult q = Cli({"-q", "index", "files"});
  EXPECT_EQ(q.err, "");

  RunResult js = Cli({"--json", "index", "files"});
  ASSERT_EQ(js.code, 0) << js.err;
  Json j = Json::parse(js.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << js.out;
  ASSERT_EQ(j["files"].size(), 3u) << js.out;
  EXPECT_EQ(j["files"][1]["file"], "sensors.bak");
  EXPECT_EQ(j["files"][1]["bytes"], copy_bytes);
  EXPECT_EQ(j["files"][1]["index"], "");
  EXPECT_EQ(j["files"][1]["live"], false);
  EXPECT_GT(j["files"][1]["modified_unix_millis"].get<int64_t>(), 1700000000000);
  EXPECT_EQ(j["files"][2]["file"], "sensors.gjsnap");
  EXPECT_EQ(j["files"][2]["index"], "sensors");
  EXPECT_EQ(j["files"][2]["live"], true);
  EXPECT_EQ(j["snapshot_bytes"], snap_bytes + other_bytes);
  EXPECT_EQ(j["copy_bytes"], copy_bytes);
  EXPECT_EQ(j["max_copy_bytes"], 10u << 20);
  EXPECT_EQ(j["max_snapshot_bytes"], 0);

  // A live index's snapshot: refused, with the way out; the file stays.
  RunResult live = Cli({"index", "rm-file", "sensors.gjsnap"});
  EXPECT_EQ(live.code, 1);
  EXPECT_EQ(live.out, "");
  EXPECT_NE(live.err.find("gpujoin: index rm-file sensors.gjsnap: FAILED_PRECONDITION: "),
            std::string::npos)
      << live.err;
  EXPECT_NE(live.err.find("live index \"sensors\"; drop the index to delete it"),
            std::string::npos)
      << live.err;
  EXPECT_EQ(live.err.find(data.string()), std::string::npos) << live.err;
  EXPECT_TRUE(fs::exists(data / "sensors.gjsnap"));

  // A copy: deleted, with its size; a second time NOT_FOUND.
  RunResult rm = Cli({"index", "rm-file", "sensors.bak"});
  ASSERT_EQ(rm.code, 0) << rm.err;
  EXPECT_EQ(rm.out.rfind("deleted sensors.bak (", 0), 0u) << rm.out;
  EXPECT_FALSE(fs::exists(data / "sensors.bak"));
  RunResult gone = Cli({"index", "rm-file", "sensors.bak"});
  EXPECT_EQ(gone.code, 1);
  EXPECT_NE(gone.err.find("NOT_FOUND"), std::string::npos) << gone.err;
  ASSERT_EQ(Cli({"index", "save", "sensors", "--file", "sensors.bak"}).code, 0);
  RunResult rj = Cli({"--json", "index", "rm-file", "sensors.bak"});
  ASSERT_EQ(rj.code, 0) << rj.err;
  Json rmj = Json::parse(rj.out, nullptr, false);
  EXPECT_EQ(rmj, (Json{{"deleted", "sensors.bak"}, {"bytes", copy_bytes}})) << rj.out;

  // Saving a copy over another index's snapshot: refused, naming both, and
  // that index's file is untouched.
  RunResult into = Cli({"index", "save", "sensors", "--file", "other.gjsnap"});
  EXPECT_EQ(into.code, 1);
  EXPECT_NE(into.err.find("INVALID_ARGUMENT"), std::string::npos) << into.err;
  EXPECT_NE(into.err.find("\"other.gjsnap\" is the snapshot file of index \"other\""),
            std::string::npos)
      << into.err;
  EXPECT_NE(into.err.find("index \"sensors\""), std::string::npos) << into.err;
  EXPECT_EQ(fs::file_size(data / "other.gjsnap"), other_bytes);
  EXPECT_EQ(Cli({"index", "save", "sensors", "--file", ".hidden"}).code, 1);

  // Once the index is dropped its snapshot is gone too; rm-file of a snapshot
  // no live index owns works (here one left by hand).
  ASSERT_EQ(Cli({"index", "drop", "other"}).code, 0);
  EXPECT_FALSE(fs::exists(data / "other.gjsnap"));
  fs::copy_file(data / "sensors.gjsnap", data / "stale.gjsnap");
  RunResult listed = Cli({"index", "files"});
  EXPECT_NE(listed.out.find("\nstale.gjsnap," + std::to_string(snap_bytes) +
                            ",snapshot (not live),stale\n"),
            std::string::npos)
      << listed.out;
  EXPECT_EQ(Cli({"index", "rm-file", "stale.gjsnap"}).code, 0);
  EXPECT_FALSE(fs::exists(data / "stale.gjsnap"));
}

TEST_F(CliSnapshotTest, WithoutDataDirEveryFileCommandIsRefused) {
  Start(false);
  RunResult b = Cli(
      {"index", "build", "sensors", "--from", kExamples + "/sensors.csv", "--key", "sensor_id"});
  ASSERT_EQ(b.code, 0) << b.err;
  for (const std::vector<std::string> args :
       {std::vector<std::string>{"index", "save", "sensors"}, {"index", "load", "sensors"},
        {"index", "files"}, {"index", "rm-file", "sensors.bak"}}) {
    RunResult r = Cli(args);
    EXPECT_EQ(r.code, 1) << args[1];
    EXPECT_NE(r.err.find("FAILED_PRECONDITION"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("--data-dir"), std::string::npos) << r.err;
  }
  RunResult w = Cli({"index", "build", "durable", "--from", kExamples + "/sensors.csv", "--key",
                     "sensor_id", "--wait-durable"});
  EXPECT_EQ(w.code, 1);
  EXPECT_NE(w.err.find("FAILED_PRECONDITION"), std::string::npos) << w.err;
  EXPECT_NE(w.err.find("wait_durable"), std::string::npos) << w.err;
  EXPECT_NE(Cli({"index", "describe", "durable"}).code, 0);
}

}  // namespace
