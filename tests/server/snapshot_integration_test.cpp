// Durable indexes through real gpujoind processes with --data-dir,
// CPU backend ($GPUJOIN_TEST_BACKEND): a restart with ten indexes of every kind
// answers every lookup and join identically; kill -9 during a (slowed) snapshot
// write leaves the previous snapshot, which loads; a flipped byte, a truncated
// file and a newer format version are skipped with a log line and a metric while
// the rest serve; the --max-snapshot-bytes limit fails a write but not the build
// and keeps the old snapshot; a drop deletes the snapshot; SaveIndex/LoadIndex
// round trip, their errors, and FAILED_PRECONDITION without --data-dir.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "build_messages.hpp"
#include "snapshot_bytes.hpp"
#include "snapshot_fixture.hpp"
#include "absl/strings/str_cat.h"
#include "gpujoin/engine/column.hpp"
#include "wire/column_codec.hpp"
#include "gpujoin/testing/files.hpp"
#include "gpujoin/testing/health_check.hpp"
#include "gpujoin/testing/loopback.hpp"
#include "gpujoin/testing/prometheus_text.hpp"
#include "gpujoin/testing/server_process.hpp"
#include "gpujoin/v1/gpujoin.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "storage/snapshot_format.hpp"
#include "storage/snapshot_reader.hpp"

namespace gpujoin::server {
namespace {

namespace fs = std::filesystem;
using gpujoin::testing::HealthStatus;
using gpujoin::testing::HttpGet;
using gpujoin::testing::MetricValue;
using gpujoin::testing::ServerOptions;
using gpujoin::testing::ServerProcess;
using gpujoin::testing::Slurp;
using gpujoin::testing::Spill;
using ::testing::HasSubstr;

using snapshot_testing::Kind;
using snapshot_testing::KeyOf;
using snapshot_testing::Messages;
using snapshot_testing::ResealHeader;
using snapshot_testing::SnapshotIntegrationTest;

std::vector<Kind> TenKinds() {
  std::vector<Kind> kinds;
  kinds.push_back({.name = "u32", .seed = 1});
  kinds.push_back({.name = "u64", .key_type = v1::KEY_TYPE_UINT64, .seed = 2});
  kinds.push_back({.name = "u32.payload", .payload = true, .seed = 3});
  kinds.push_back(
      {.name = "u64-payload", .key_type = v1::KEY_TYPE_UINT64, .payload = true, .seed = 4});
  kinds.push_back({.name = "multi32",
                   .duplicates = v1::DUPLICATE_POLICY_KEEP_ALL,
                   .key_range = 120,
                   .seed = 5});
  kinds.push_back({.name = "multi64_payload",
                   .key_type = v1::KEY_TYPE_UINT64,
                   .duplicates = v1::DUPLICATE_POLICY_KEEP_ALL,
                   .key_range = 150,
                   .payload = true,
                   .seed = 6});
  kinds.push_back({.name = "overflowed",
                   .rows = 400,
                   .key_range = 1000,
                   .capacity = 128,
                   .max_probe_count = 3,
                   .payload = true,
                   .seed = 7});
  kinds.push_back({.name = "explicit", .explicit_values = true, .seed = 8});
  kinds.push_back({.name = "first_value", .first_value = 1000000, .seed = 9});
  kinds.push_back({.name = "empty", .rows = 0, .key_range = 10, .capacity = 16, .seed = 10});
  return kinds;
}

TEST_F(SnapshotIntegrationTest, RestartWithTenIndexesAnswersIdentically) {
  Start();
  const std::vector<Kind> kinds = TenKinds();
  std::vector<v1::IndexInfo> infos(kinds.size());
  std::vector<std::string> before;
  for (size_t i = 0; i < kinds.size(); ++i) {
    BuildOk(kinds[i], &infos[i]);
  }
  for (size_t i = 0; i < kinds.size(); ++i) {
    ASSERT_TRUE(WaitForLog(Written(kinds[i].name, 1))) << server_->log();
    before.push_back(Answers(kinds[i], infos[i]));
    ASSERT_TRUE(fs::exists(dir_ / (kinds[i].name + ".gjsnap")));
  }
  EXPECT_GT(infos[6].statistics().overflow_rows(), 0u) << "the overflowed build must overflow";
  EXPECT_GT(infos[5].statistics().max_group_rows(), 1u);
  const std::string metrics = Metrics();
  EXPECT_GT(MetricValue(metrics, "gpujoin_snapshot_bytes{index=\"u32.payload\"}"), 0);
  EXPECT_GT(MetricValue(metrics, "gpujoin_snapshot_last_success_timestamp_seconds{index=\"u32\"}"),
            1.7e9);
  EXPECT_EQ(MetricValue(metrics, "gpujoin_snapshot_duration_seconds_count"), 10);
  Kill();

  Start();
  EXPECT_THAT(server_->log(), HasSubstr("snapshots loaded: 10 indexes"));
  const std::string after_metrics = Metrics();
  EXPECT_EQ(MetricValue(after_metrics, "gpujoin_snapshot_loads_total"), 10);
  EXPECT_EQ(MetricValue(after_metrics, "gpujoin_snapshot_loads_pending"), 0);
  EXPECT_EQ(MetricValue(after_metrics, "gpujoin_snapshot_load_duration_seconds_count"), 10);
  EXPECT_EQ(MetricValue(after_metrics, "gpujoin_indexes"), 10);
  // The loaded snapshots' series: their sizes and the time they were written.
  EXPECT_EQ(MetricValue(after_metrics, "gpujoin_snapshot_bytes{index=\"u32.payload\"}"),
            double(fs::file_size(dir_ / "u32.payload.gjsnap")));
  // The file's modification time: its last write, just before the rename.
  EXPECT_NEAR(
      MetricValue(after_metrics, "gpujoin_snapshot_last_success_timestamp_seconds{index=\"u32\"}"),
      MetricValue(metrics, "gpujoin_snapshot_last_success_timestamp_seconds{index=\"u32\"}"), 5);
  for (size_t i = 0; i < kinds.size(); ++i) {
    SCOPED_TRACE(kinds[i].name);
    auto info = Describe(kinds[i].name);
    ASSERT_TRUE(info.ok()) << info.status();
    EXPECT_EQ(Durable(*info), Durable(infos[i])) << info->DebugString() << "\nvs\n"
                                                 << infos[i].DebugString();
    EXPECT_EQ(Answers(kinds[i], *info), before[i]);
  }
}

TEST_F(SnapshotIntegrationTest, KillDuringWriteLoadsThePreviousSnapshot) {
  Kind big{.name = "big", .rows = 60000, .key_range = 1 << 30, .payload = true, .seed = 21};
  Start();
  v1::IndexInfo v1_info;
  BuildOk(big, &v1_info);
  ASSERT_TRUE(WaitForLog(Written("big", 1))) << server_->log();
  const std::string v1_answers = Answers(big, v1_info);
  const uint64_t v1_bytes = fs::file_size(dir_ / "big.gjsnap");
  Kill();

  // Slow writes: 100 ms per MiB, the rebuild's write takes a second or more.
  Start({"--snapshot-test-write-delay-ms=100"});
  Kind rebuilt = big;
  rebuilt.seed = 22;  // other keys, other payload
  BuildOk(rebuilt);
  // Wait for the temporary file of the second write, then kill mid-write.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  bool writing = false;
  while (!writing && std::chrono::steady_clock::now() < deadline) {
    for (const auto& e : fs::directory_iterator(dir_)) {
      if (e.path().filename().string().find(".gjsnap.tmp-") != std::string::npos &&
          fs::file_size(e.path()) > 0) {
        writing = true;
      }
    }
    if (!writing) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(writing) << server_->log();
  EXPECT_EQ(server_->log().find(Written("big", 2)), std::string::npos)
      << "the slowed write finished before the kill";
  Kill();
  EXPECT_EQ(fs::file_size(dir_ / "big.gjsnap"), v1_bytes);

  Start();
  EXPECT_THAT(server_->log(), HasSubstr("a snapshot write an earlier gpujoind did not finish"));
  EXPECT_THAT(server_->log(), HasSubstr("snapshots loaded: 1 indexes"));
  for (const auto& e : fs::directory_iterator(dir_)) {
    EXPECT_EQ(e.path().filename().string(), "big.gjsnap");
  }
  auto info = Describe("big");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(Answers(big, *info), v1_answers);
}

TEST_F(SnapshotIntegrationTest, DamagedSnapshotsAreSkippedAndTheRestServe) {
  Start();
  const std::vector<std::string> names = {"flipped", "truncated", "newer", "intact"};
  std::vector<Kind> kinds;
  for (size_t i = 0; i < names.size(); ++i) {
    kinds.push_back({.name = names[i], .payload = true, .seed = 30 + i});
    BuildOk(kinds.back());
  }
  for (const auto& n : names) ASSERT_TRUE(WaitForLog(Written(n, 1))) << server_->log();
  auto intact_info = Describe("intact");
  ASSERT_TRUE(intact_info.ok());
  const std::string intact_answers = Answers(kinds[3], *intact_info);
  Kill();

  {
    std::string b = Slurp(dir_ / "flipped.gjsnap");
    b[b.size() / 2] = char(b[b.size() / 2] ^ 0x01);
    Spill(dir_ / "flipped.gjsnap", b);
  }
  {
    std::string b = Slurp(dir_ / "truncated.gjsnap");
    Spill(dir_ / "truncated.gjsnap", b.substr(0, b.size() - 100));
  }
  {
    std::string b = Slurp(dir_ / "newer.gjsnap");
    const uint32_t v = kSnapshotFormatVersion + 1;
    std::memcpy(b.data() + 8, &v, 4);
    ResealHeader(b);
    Spill(dir_ / "newer.gjsnap", b);
  }
  Start();
  const std::string log = server_->log();
  EXPECT_THAT(log, HasSubstr("snapshot \"flipped.gjsnap\" skipped (corrupt)"));
  EXPECT_THAT(log, HasSubstr("snapshot \"truncated.gjsnap\" skipped (truncated)"));
  EXPECT_THAT(log, HasSubstr("snapshot \"newer.gjsnap\" skipped (version)"));
  EXPECT_THAT(log, HasSubstr(absl::StrCat("format version ", kSnapshotFormatVersion + 1,
                                          " is not supported: this gpujoind reads format "
                                          "versions 1 to ",
                                          kSnapshotFormatVersion)));
  EXPECT_THAT(log, HasSubstr("snapshots loaded: 1 indexes"));
  const std::string metrics = Metrics();
  EXPECT_EQ(MetricValue(metrics, "gpujoin_snapshot_load_failures_total{reason=\"corrupt\"}"), 1);
  EXPECT_EQ(MetricValue(metrics, "gpujoin_snapshot_load_failures_total{reason=\"truncated\"}"), 1);
  EXPECT_EQ(MetricValue(metrics, "gpujoin_snapshot_load_failures_total{reason=\"version\"}"), 1);
  EXPECT_EQ(MetricValue(metrics, "gpujoin_serving"), 1);
  for (const std::string& n : {"flipped", "truncated", "newer"}) {
    EXPECT_TRUE(absl::IsNotFound(Describe(n).status())) << n;
  }
  auto info = Describe("intact");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(Answers(kinds[3], *info), intact_answers);
}

TEST_F(SnapshotIntegrationTest, SizeLimitFailsTheWriteNotTheBuildAndKeepsTheOldSnapshot) {
  Kind small{.name = "x", .rows = 100, .payload = true, .seed = 41};
  Kind large{.name = "x", .rows = 20000, .key_range = 1 << 30, .payload = true, .seed = 42};
  // Room for the small snapshot (a few tens of KB) and not for the large one beside it.
  Start({"--max-snapshot-bytes=256K"});
  v1::IndexInfo small_info;
  BuildOk(small, &small_info);
  ASSERT_TRUE(WaitForLog(Written("x", 1))) << server_->log();
  const std::string small_answers = Answers(small, small_info);
  const std::string small_file = Slurp(dir_ / "x.gjsnap");
  v1::IndexInfo large_info;
  BuildOk(large, &large_info);  // the build itself succeeds and serves
  ASSERT_TRUE(WaitForLog("failed (size_limit)")) << server_->log();
  EXPECT_THAT(server_->log(), HasSubstr("of --max-snapshot-bytes=262144"));
  EXPECT_EQ(MetricValue(Metrics(), "gpujoin_snapshot_failures_total{reason=\"size_limit\"}"), 1);
  EXPECT_EQ(Slurp(dir_ / "x.gjsnap"), small_file);
  auto live = Describe("x");
  ASSERT_TRUE(live.ok());
  EXPECT_EQ(live->version(), 2u);
  EXPECT_EQ(live->rows(), 20000u);
  Kill();
  Start();
  auto info = Describe("x");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->rows(), 100u);
  EXPECT_EQ(Answers(small, *info), small_answers);
}

TEST_F(SnapshotIntegrationTest, DropDeletesTheSnapshot) {
  Start();
  BuildOk({.name = "gone", .seed = 51});
  BuildOk({.name = "kept", .seed = 52});
  ASSERT_TRUE(WaitForLog(Written("gone", 1)));
  ASSERT_TRUE(WaitForLog(Written("kept", 1)));
  ASSERT_TRUE(fs::exists(dir_ / "gone.gjsnap"));
  grpc::ClientContext ctx;
  v1::DropIndexRequest r;
  r.set_name("gone");
  v1::DropIndexResponse resp;
  ASSERT_TRUE(stub_->DropIndex(&ctx, r, &resp).ok());
  EXPECT_FALSE(fs::exists(dir_ / "gone.gjsnap"));
  EXPECT_TRUE(std::isnan(MetricValue(Metrics(), "gpujoin_snapshot_bytes{index=\"gone\"}")));
  Kill();
  Start();
  EXPECT_TRUE(absl::IsNotFound(Describe("gone").status()));
  EXPECT_TRUE(Describe("kept").ok());
}

TEST_F(SnapshotIntegrationTest, SaveAndLoadRoundTrip) {
  Start();
  Kind k{.name = "src",
         .key_type = v1::KEY_TYPE_UINT64,
         .duplicates = v1::DUPLICATE_POLICY_KEEP_ALL,
         .key_range = 100,
         .payload = true,
         .seed = 61};
  v1::IndexInfo info;
  BuildOk(k, &info);
  const std::string answers = Answers(k, info);
  {
    grpc::ClientContext ctx;
    v1::SaveIndexRequest r;
    r.set_name("src");
    r.set_file("src-copy.bin");
    v1::SaveIndexResponse resp;
    const grpc::Status s = stub_->SaveIndex(&ctx, r, &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(resp.file(), "src-copy.bin");
    EXPECT_EQ(resp.version(), 1u);
    EXPECT_EQ(resp.bytes(), fs::file_size(dir_ / "src-copy.bin"));
  }
  {
    grpc::ClientContext ctx;
    v1::LoadIndexRequest r;
    r.set_name("dst");
    r.set_file("src-copy.bin");
    v1::LoadIndexResponse resp;
    const grpc::Status s = stub_->LoadIndex(&ctx, r, &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(resp.index().name(), "dst");
    EXPECT_EQ(resp.index().statistics().SerializeAsString(), info.statistics().SerializeAsString());
  }
  Kind dst = k;
  dst.name = "dst";
  EXPECT_EQ(Answers(dst, info), answers);
  // Loaded from another file: dst gets its own snapshot, so that it survives a restart.
  ASSERT_TRUE(WaitForLog(Written("dst", 1))) << server_->log();
  auto error = [&](const std::string& name, const std::string& file, bool save) {
    grpc::ClientContext ctx;
    if (save) {
      v1::SaveIndexRequest r;
      r.set_name(name);
      r.set_file(file);
      v1::SaveIndexResponse resp;
      return stub_->SaveIndex(&ctx, r, &resp);
    }
    v1::LoadIndexRequest r;
    r.set_name(name);
    r.set_file(file);
    v1::LoadIndexResponse resp;
    return stub_->LoadIndex(&ctx, r, &resp);
  };
  EXPECT_EQ(error("dst", "src-copy.bin", false).error_code(), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_EQ(error("src", "../escape", true).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(error("src", "a/b", false).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(error("other", "missing.gjsnap", false).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(error("nope", "", true).error_code(), grpc::StatusCode::NOT_FOUND);
  Kill();
  Start();
  auto loaded = Describe("dst");
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(Answers(dst, *loaded), answers);
  EXPECT_TRUE(absl::IsNotFound(Describe("src-copy.bin").status()));  // not a .gjsnap
}

// A snapshot written by one backend loads on the other and answers the same:
// CPU -> $GPUJOIN_TEST_BACKEND -> CPU (both CPU where no GPU is tested).
TEST_F(SnapshotIntegrationTest, SnapshotsMoveAcrossBackends) {
  const std::vector<Kind> kinds = {
      {.name = "plain", .payload = true, .seed = 81},
      {.name = "wide_multi",
       .key_type = v1::KEY_TYPE_UINT64,
       .duplicates = v1::DUPLICATE_POLICY_KEEP_ALL,
       .key_range = 90,
       .payload = true,
       .seed = 82},
      {.name = "tiny", .rows = 3, .key_range = 2, .capacity = 2, .payload = true, .seed = 83}};
  Start({"--backend=cpu"});
  std::vector<v1::IndexInfo> infos(kinds.size());
  std::vector<std::string> answers;
  for (size_t i = 0; i < kinds.size(); ++i) BuildOk(kinds[i], &infos[i]);
  for (size_t i = 0; i < kinds.size(); ++i) {
    ASSERT_TRUE(WaitForLog(Written(kinds[i].name, 1))) << server_->log();
    answers.push_back(Answers(kinds[i], infos[i]));
  }
  Kill();
  for (const std::string backend : {gpujoin::testing::TestBackend(), std::string("cpu")}) {
    SCOPED_TRACE("restart on " + backend);
    Start({"--backend=" + backend});
    EXPECT_THAT(server_->log(), HasSubstr("snapshots loaded: 3 indexes"));
    for (size_t i = 0; i < kinds.size(); ++i) {
      auto info = Describe(kinds[i].name);
      ASSERT_TRUE(info.ok()) << info.status();
      EXPECT_EQ(info->backend(), backend);
      EXPECT_EQ(info->statistics().SerializeAsString(), infos[i].statistics().SerializeAsString());
      EXPECT_EQ(Answers(kinds[i], *info), answers[i]) << kinds[i].name;
      // Written again by this backend (SaveIndex of its own file), for the next round.
      grpc::ClientContext ctx;
      v1::SaveIndexRequest r;
      r.set_name(kinds[i].name);
      v1::SaveIndexResponse resp;
      ASSERT_TRUE(stub_->SaveIndex(&ctx, r, &resp).ok());
      EXPECT_EQ(resp.file(), kinds[i].name + ".gjsnap");
    }
    Kill();
  }
}

TEST_F(SnapshotIntegrationTest, ARebuildDuringAWriteSupersedesIt) {
  // Slow writes (100 ms per MiB): the first version's write is still running
  // when the second version is installed.
  Start({"--snapshot-test-write-delay-ms=100"});
  Kind first{.name = "r", .rows = 60000, .key_range = 1 << 30, .payload = true, .seed = 91};
  Kind second = first;
  second.seed = 92;
  BuildOk(first);
  v1::IndexInfo second_info;
  BuildOk(second, &second_info);
  ASSERT_TRUE(WaitForLog(Written("r", 2), std::chrono::seconds(40))) << server_->log();
  EXPECT_THAT(server_->log(), HasSubstr("snapshot of index \"r\" version 1 superseded"));
  EXPECT_EQ(server_->log().find(Written("r", 1)), std::string::npos);
  EXPECT_EQ(MetricValue(Metrics(), "gpujoin_snapshot_superseded_total"), 1);
  auto reader = SnapshotReader::Open((dir_ / "r.gjsnap").string());
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ(reader->meta().version, 2u);
  const std::string answers = Answers(second, second_info);
  for (const auto& e : fs::directory_iterator(dir_)) {
    EXPECT_EQ(e.path().filename().string(), "r.gjsnap");  // no temporary file left
  }
  Kill();
  Start();
  auto info = Describe("r");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(Answers(second, *info), answers);
}

// A drop during a (slowed) SaveIndex of the index's own file: the save is
// ABORTED and neither it nor the background write brings the file back.
TEST_F(SnapshotIntegrationTest, ADropDuringASaveLeavesNoFile) {
  Start({"--snapshot-test-write-delay-ms=100"});
  BuildOk({.name = "d", .rows = 60000, .key_range = 1 << 30, .payload = true, .seed = 97});
  grpc::Status save_status;
  std::thread saver([&] {
    grpc::ClientContext ctx;
    v1::SaveIndexRequest r;
    r.set_name("d");
    v1::SaveIndexResponse resp;
    save_status = stub_->SaveIndex(&ctx, r, &resp);
  });
  // Both writes (the build's and the save's) have their temporary files.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  size_t temps = 0;
  while (temps < 2 && std::chrono::steady_clock::now() < deadline) {
    temps = 0;
    for (const auto& e : fs::directory_iterator(dir_)) {
      temps += e.path().filename().string().find(".gjsnap.tmp-") != std::string::npos;
    }
    if (temps < 2) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(temps, 2u) << server_->log();
  {
    grpc::ClientContext ctx;
    v1::DropIndexRequest r;
    r.set_name("d");
    v1::DropIndexResponse resp;
    ASSERT_TRUE(stub_->DropIndex(&ctx, r, &resp).ok());
  }
  saver.join();
  EXPECT_EQ(save_status.error_code(), grpc::StatusCode::ABORTED) << save_status.error_message();
  ASSERT_TRUE(WaitForLog("snapshot of index \"d\" version 1 superseded")) << server_->log();
  EXPECT_FALSE(fs::exists(dir_ / "d.gjsnap"));
  for (const auto& e : fs::directory_iterator(dir_)) ADD_FAILURE() << e.path() << " left";
}

TEST_F(SnapshotIntegrationTest, LoadsAreBoundedByTheBudget) {
  Start();
  BuildOk({.name = "small", .rows = 50, .seed = 95});
  BuildOk({.name = "large", .rows = 20000, .key_range = 1 << 30, .payload = true, .seed = 96});
  ASSERT_TRUE(WaitForLog(Written("small", 1)));
  ASSERT_TRUE(WaitForLog(Written("large", 1)));
  Kill();
  // Room for the small index, not for the large one.
  Start({"--device-memory-limit=256K"});
  EXPECT_THAT(server_->log(), HasSubstr("snapshot \"large.gjsnap\" skipped (budget)"));
  EXPECT_THAT(server_->log(), HasSubstr("--device-memory-limit"));
  EXPECT_EQ(MetricValue(Metrics(), "gpujoin_snapshot_load_failures_total{reason=\"budget\"}"), 1);
  EXPECT_TRUE(Describe("small").ok());
  EXPECT_TRUE(absl::IsNotFound(Describe("large").status()));
  grpc::ClientContext ctx;
  v1::LoadIndexRequest r;
  r.set_name("large");
  v1::LoadIndexResponse resp;
  const grpc::Status s = stub_->LoadIndex(&ctx, r, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(s.error_message(), HasSubstr("--device-memory-limit"));
  EXPECT_TRUE(absl::IsNotFound(Describe("large").status()));
}

// Readiness: while the start-up load runs (slowed to 3 s per snapshot) the
// server listens with health NOT_SERVING, GpuJoin calls get UNAVAILABLE and
// GetServerInfo says not serving; then it serves the loaded index.
TEST_F(SnapshotIntegrationTest, NotServingUntilTheSnapshotsAreLoaded) {
  Start();
  BuildOk({.name = "ready", .seed = 99});
  ASSERT_TRUE(WaitForLog(Written("ready", 1)));
  Kill();
  server_.reset();
  const std::string address = "127.0.0.1:" + std::to_string(gpujoin::testing::FreePort());
  std::unique_ptr<ServerProcess> loading;
  std::thread starter([&] {
    ServerOptions o;
    o.metrics = true;
    o.extra_args = {"--data-dir=" + dir_.string(), "--listen=" + address,
                    "--snapshot-test-load-delay-ms=3000"};
    loading = std::make_unique<ServerProcess>(o);
  });
  // The listener is up before the load: wait for health to answer.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  // Each try waits at most 2 s, so that one the starting server leaves
  // unanswered does not use up the loop's 20.
  int health = HealthStatus(address, "", std::chrono::seconds(2));
  while (health < 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    health = HealthStatus(address, "", std::chrono::seconds(2));
  }
  EXPECT_EQ(health, 2) << "NOT_SERVING expected while loading";
  auto stub =
      v1::GpuJoin::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  {
    grpc::ClientContext ctx;
    v1::DescribeIndexRequest r;
    r.set_name("ready");
    v1::DescribeIndexResponse resp;
    const grpc::Status s = stub->DescribeIndex(&ctx, r, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
    EXPECT_THAT(s.error_message(), HasSubstr("loading its snapshots"));
  }
  {
    grpc::ClientContext ctx;
    v1::GetServerInfoResponse info;
    ASSERT_TRUE(stub->GetServerInfo(&ctx, v1::GetServerInfoRequest(), &info).ok());
    EXPECT_FALSE(info.serving());
  }
  starter.join();
  ASSERT_TRUE(loading->ready()) << loading->log();
  EXPECT_EQ(HealthStatus(address, "", std::chrono::seconds(2)), 1);
  grpc::ClientContext ctx;
  v1::DescribeIndexRequest r;
  r.set_name("ready");
  v1::DescribeIndexResponse resp;
  EXPECT_TRUE(stub->DescribeIndex(&ctx, r, &resp).ok());
  server_ = std::move(loading);
}

TEST_F(SnapshotIntegrationTest, WithoutDataDirSaveAndLoadAreFailedPrecondition) {
  Start({}, /*data_dir=*/false);
  EXPECT_THAT(server_->log(), HasSubstr("snapshots: off"));
  BuildOk({.name = "a", .seed = 71});
  grpc::ClientContext c1, c2;
  v1::SaveIndexRequest s;
  s.set_name("a");
  v1::SaveIndexResponse sr;
  const grpc::Status save = stub_->SaveIndex(&c1, s, &sr);
  EXPECT_EQ(save.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(save.error_message(), HasSubstr("--data-dir"));
  v1::LoadIndexRequest l;
  l.set_name("a");
  v1::LoadIndexResponse lr;
  EXPECT_EQ(stub_->LoadIndex(&c2, l, &lr).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
}

}  // namespace
}  // namespace gpujoin::server
