// What an attacker or an unlucky operator does to --data-dir, through real
// gpujoind processes (CPU backend unless $GPUJOIN_TEST_BACKEND says otherwise):
// a LoadIndex of the index's own file while a newer version's write is running
// (a restart must serve what was live, not the write that lost the race); a
// FIFO and symbolic links named like snapshots (refused at once, never opened
// blocking or followed; start-up skips and counts them; shutdown is prompt);
// SaveIndex into another index's snapshot file or a reserved name (refused,
// naming both indexes); copies listed, deleted and bounded by --max-copy-bytes;
// error messages that name files, never the directory; and
// IndexSpec.wait_durable with IndexInfo.durable_version.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "gpujoin/testing/prometheus_text.hpp"
#include "snapshot_fixture.hpp"
#include "storage/snapshot_format.hpp"
#include "storage/snapshot_reader.hpp"

namespace gpujoin::server {
namespace {

namespace fs = std::filesystem;
using gpujoin::testing::MetricValue;
using snapshot_testing::Kind;
using ::testing::HasSubstr;
using ::testing::Not;

class SnapshotFaultTest : public snapshot_testing::SnapshotIntegrationTest {
 protected:
  grpc::Status Save(const std::string& name, const std::string& file,
                    v1::SaveIndexResponse* out = nullptr) {
    grpc::ClientContext ctx;
    v1::SaveIndexRequest r;
    r.set_name(name);
    r.set_file(file);
    v1::SaveIndexResponse resp;
    const grpc::Status s = stub_->SaveIndex(&ctx, r, &resp);
    if (out != nullptr) *out = resp;
    return s;
  }
  grpc::Status Load(const std::string& name, const std::string& file, bool replace,
                    std::chrono::milliseconds deadline = std::chrono::seconds(30)) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + deadline);
    v1::LoadIndexRequest r;
    r.set_name(name);
    r.set_file(file);
    r.set_replace(replace);
    v1::LoadIndexResponse resp;
    return stub_->LoadIndex(&ctx, r, &resp);
  }
  v1::ListFilesResponse List() {
    grpc::ClientContext ctx;
    v1::ListFilesResponse resp;
    const grpc::Status s = stub_->ListFiles(&ctx, v1::ListFilesRequest(), &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return resp;
  }
  grpc::Status Delete(const std::string& file, v1::DeleteFileResponse* out = nullptr) {
    grpc::ClientContext ctx;
    v1::DeleteFileRequest r;
    r.set_file(file);
    v1::DeleteFileResponse resp;
    const grpc::Status s = stub_->DeleteFile(&ctx, r, &resp);
    if (out != nullptr) *out = resp;
    return s;
  }
  // A status whose message must not reveal where the data dir is.
  void ExpectNoPath(const grpc::Status& s) {
    EXPECT_THAT(s.error_message(), Not(HasSubstr(dir_.string()))) << s.error_message();
  }
};

// Reproduces a restart serving another version than the live one: build g,
// rebuild it while the first snapshot exists, and LoadIndex g from its own file
// while the second version's (slowed) write runs. The load made version 1's
// data live again; the second version's write then landed, and a restart
// served the second version.
TEST_F(SnapshotFaultTest, ALoadDuringAWriteIsWhatARestartServes) {
  // Slow writes (about 2 MiB at 400 ms per MiB): the second version's write is
  // still running when the load comes.
  Start({"--snapshot-test-write-delay-ms=400", "--drain-grace=0"});
  Kind first{.name = "g", .rows = 120000, .key_range = 1 << 30, .first_value = 0, .seed = 3};
  Kind second = first;
  second.first_value = 100000000;
  v1::IndexInfo first_info;
  BuildOk(first, &first_info);
  ASSERT_TRUE(WaitForLog(Written("g", 1), std::chrono::seconds(60))) << server_->log();
  const std::string first_answers = Answers(first, first_info);
  BuildOk(second);
  const grpc::Status loaded = Load("g", "", /*replace=*/true);
  ASSERT_TRUE(loaded.ok()) << loaded.error_message();
  auto live = Describe("g");
  ASSERT_TRUE(live.ok()) << live.status();
  EXPECT_EQ(live->version(), 3u);
  const std::string live_answers = Answers(first, *live);
  EXPECT_EQ(live_answers, first_answers) << "the load did not read the first version's file";
  // The load's own snapshot needs no write (the file is the one read); the
  // second version's write is superseded.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (Describe("g")->durable_version() != 3 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(Describe("g")->durable_version(), 3u) << server_->log();
  EXPECT_EQ(server_->StopWith(SIGTERM), 0) << server_->log();
  Start();
  auto restarted = Describe("g");
  ASSERT_TRUE(restarted.ok()) << restarted.status();
  EXPECT_EQ(Answers(first, *restarted), live_answers) << server_->log();
  EXPECT_EQ(restarted->durable_version(), restarted->version());
}

// Every other order of builds, loads and drops of one name: after each step
// the version a restart would serve is the live one.
TEST_F(SnapshotFaultTest, EveryInstallIsFollowedByItsSnapshot) {
  Start({"--drain-grace=0"});
  Kind a{.name = "n", .rows = 300, .first_value = 10, .seed = 11};
  Kind b = a;
  b.first_value = 20000;
  v1::IndexInfo info;
  BuildOk(a, &info);
  ASSERT_TRUE(Save("n", "n-a.bin").ok());
  BuildOk(b);
  ASSERT_TRUE(Load("n", "n-a.bin", /*replace=*/true).ok());  // a again, from a copy
  BuildOk(b);
  BuildOk(a);
  const std::string answers = Answers(a, info);
  EXPECT_EQ(server_->StopWith(SIGTERM), 0) << server_->log();
  Start();
  auto restarted = Describe("n");
  ASSERT_TRUE(restarted.ok()) << restarted.status();
  EXPECT_EQ(Answers(a, *restarted), answers);
}

// Reproduces a FIFO named x.gjsnap blocking both executor threads in open()
// (and with them every build, save, load and lookup) and the shutdown; and
// symbolic links followed out of the data dir.
TEST_F(SnapshotFaultTest, FifosAndLinksAreRefusedAtOnce) {
  // A real snapshot outside the data dir, reached through a link inside it.
  Start();
  BuildOk({.name = "src", .rows = 200, .seed = 21});
  ASSERT_TRUE(Save("src", "src-copy.bin").ok());
  Kill();
  const fs::path outside = dir_.string() + "-outside.gjsnap";
  fs::rename(dir_ / "src-copy.bin", outside);
  fs::remove(dir_ / "src.gjsnap");
  ASSERT_EQ(::mkfifo((dir_ / "x.gjsnap").c_str(), 0644), 0);
  fs::create_symlink(outside, dir_ / "outside.gjsnap");
  fs::create_symlink("/etc/passwd", dir_ / "passwd.gjsnap");
  fs::create_symlink("/etc/passwd", dir_ / "passwd.bin");

  Start({"--executor-threads=2", "--drain-timeout=5", "--drain-grace=0"});
  EXPECT_THAT(server_->log(), HasSubstr("snapshot \"x.gjsnap\" skipped (not_regular_file)"));
  EXPECT_EQ(MetricValue(Metrics(),
                        "gpujoin_snapshot_load_failures_total{reason=\"not_regular_file\"}"),
            3);
  EXPECT_TRUE(absl::IsNotFound(Describe("outside").status()));
  for (int i = 0; i < 2; ++i) {
    const grpc::Status s = Load("x", "", false, std::chrono::seconds(2));
    EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << s.error_message();
    EXPECT_THAT(s.error_message(), HasSubstr("\"x.gjsnap\" is not a regular file (a FIFO)"));
    ExpectNoPath(s);
  }
  for (const std::string name : {"outside", "passwd"}) {
    const grpc::Status s = Load(name, "", false, std::chrono::seconds(2));
    EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << s.error_message();
    EXPECT_THAT(s.error_message(), HasSubstr("is a symbolic link"));
  }
  const grpc::Status link = Load("p", "passwd.bin", false, std::chrono::seconds(2));
  EXPECT_EQ(link.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << link.error_message();
  // The executors are free: a build and its lookups go through.
  Kind k{.name = "after", .rows = 4096, .key_range = 1 << 20, .seed = 22};
  v1::IndexInfo info;
  BuildOk(k, &info);
  EXPECT_FALSE(Answers(k, info).empty());
  // ListFiles shows regular files only.
  const v1::ListFilesResponse files = List();
  for (const auto& f : files.files()) {
    EXPECT_NE(f.file(), "x.gjsnap");
    EXPECT_NE(f.file(), "passwd.bin");
  }
  const auto stop = std::chrono::steady_clock::now();
  EXPECT_EQ(server_->StopWith(SIGTERM, std::chrono::seconds(15)), 0) << server_->log();
  EXPECT_LT(std::chrono::steady_clock::now() - stop, std::chrono::seconds(10));
  fs::remove(outside);
}

// Reproduces SaveIndex{name: "a", file: "b.gjsnap"} replacing live index b's
// snapshot (a restart then served a's data as b), and names start-up treats
// specially (a hidden temporary name is deleted at the next start).
TEST_F(SnapshotFaultTest, SavesIntoAnotherIndexOrAReservedNameAreRefused) {
  Start();
  Kind a{.name = "a", .rows = 300, .seed = 31};
  Kind b{.name = "b", .rows = 300, .first_value = 5000, .seed = 32};
  v1::IndexInfo a_info, b_info;
  BuildOk(a, &a_info);
  BuildOk(b, &b_info);
  const std::string b_answers = Answers(b, b_info);
  for (const std::string file : {"b.gjsnap", "c.gjsnap"}) {
    const grpc::Status s = Save("a", file);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << file;
    EXPECT_THAT(s.error_message(), HasSubstr("index \"a\""));
    EXPECT_THAT(s.error_message(), HasSubstr("file: \"" + file + "\" is the snapshot file of"));
  }
  for (const std::string file : {".x.gjsnap.tmp-1-1", "..gjsnap", ".hidden", "a.gjsnap.tmp-2"}) {
    const grpc::Status s = Save("a", file);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << file;
    EXPECT_THAT(s.error_message(), HasSubstr("file: ")) << s.error_message();
    const grpc::Status l = Load("z", file, false);
    EXPECT_EQ(l.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << file;
  }
  v1::SaveIndexResponse saved;
  ASSERT_TRUE(Save("a", "a.gjsnap", &saved).ok());
  EXPECT_EQ(saved.file(), "a.gjsnap");
  // Loading another index's snapshot into a new name is a copy, and allowed.
  ASSERT_TRUE(Load("b2", "b.gjsnap", false).ok());
  Kill();
  Start();
  auto restarted = Describe("b");
  ASSERT_TRUE(restarted.ok()) << restarted.status();
  EXPECT_EQ(Answers(b, *restarted), b_answers);
  EXPECT_TRUE(fs::exists(dir_ / "a.gjsnap"));
}

TEST_F(SnapshotFaultTest, CopiesAreListedDeletedAndBounded) {
  Start({"--max-copy-bytes=200K"});
  BuildOk({.name = "a", .rows = 2000, .key_range = 1 << 20, .seed = 41});
  WaitForLog(Written("a", 1));
  v1::SaveIndexResponse copy;
  ASSERT_TRUE(Save("a", "a-1.bin", &copy).ok());
  v1::ListFilesResponse files = List();
  ASSERT_EQ(files.files_size(), 2) << files.DebugString();
  EXPECT_EQ(files.files(0).file(), "a-1.bin");
  EXPECT_EQ(files.files(0).index(), "");
  EXPECT_EQ(files.files(0).bytes(), copy.bytes());
  EXPECT_EQ(files.files(1).file(), "a.gjsnap");
  EXPECT_EQ(files.files(1).index(), "a");
  EXPECT_TRUE(files.files(1).live());
  EXPECT_EQ(files.copy_bytes(), copy.bytes());
  EXPECT_EQ(files.max_copy_bytes(), 200u << 10);
  // A second copy passes --max-copy-bytes (each is about 40 KB here: five fit,
  // the sixth does not); replacing an existing copy counts it once.
  grpc::Status s;
  int made = 1;
  for (; made < 10; ++made) {
    s = Save("a", "a-" + std::to_string(made + 1) + ".bin");
    if (!s.ok()) break;
  }
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("--max-copy-bytes=204800"));
  ExpectNoPath(s);
  EXPECT_TRUE(Save("a", "a-1.bin").ok());
  EXPECT_EQ(MetricValue(Metrics(), "gpujoin_snapshot_failures_total{reason=\"copy_limit\"}"),
            1);
  // Deleting: a copy, not a live index's snapshot, nothing twice.
  const grpc::Status own = Delete("a.gjsnap");
  EXPECT_EQ(own.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << own.error_message();
  EXPECT_THAT(own.error_message(), HasSubstr("live index \"a\""));
  v1::DeleteFileResponse deleted;
  ASSERT_TRUE(Delete("a-1.bin", &deleted).ok());
  EXPECT_EQ(deleted.bytes(), copy.bytes());
  EXPECT_FALSE(fs::exists(dir_ / "a-1.bin"));
  const grpc::Status again = Delete("a-1.bin");
  EXPECT_EQ(again.error_code(), grpc::StatusCode::NOT_FOUND);
  ExpectNoPath(again);
  EXPECT_EQ(Delete("../x").error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Delete(".a.gjsnap.tmp-1-0").error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  // The snapshot of an index that is not live (dropped ones are deleted with
  // the drop; this one was left by hand) can be deleted.
  fs::copy_file(dir_ / "a.gjsnap", dir_ / "old.gjsnap");
  v1::ListFilesResponse with_old = List();
  EXPECT_FALSE(with_old.files(with_old.files_size() - 1).live());
  EXPECT_TRUE(Delete("old.gjsnap").ok());
  // The files' errors name files, never the directory.
  const grpc::Status missing = Load("m", "missing.gjsnap", false);
  EXPECT_EQ(missing.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(missing.error_message(), HasSubstr("\"missing.gjsnap\""));
  ExpectNoPath(missing);
}

TEST_F(SnapshotFaultTest, WaitDurableAnswersOnceTheSnapshotIsWritten) {
  Start({"--snapshot-test-write-delay-ms=20"});
  Kind k{.name = "w", .rows = 60000, .key_range = 1 << 30, .payload = true, .seed = 51};
  std::vector<v1::BuildIndexRequest> messages = snapshot_testing::Messages(k);
  messages[0].mutable_spec()->set_wait_durable(true);
  v1::BuildIndexResponse r;
  const grpc::Status s = testing::Build(*stub_, messages, &r);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(r.index().version(), 1u);
  EXPECT_EQ(r.index().durable_version(), 1u);
  // Durable when answered: the file is there, whole, with this version.
  auto reader = SnapshotReader::Open((dir_ / "w.gjsnap").string());
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ(reader->meta().version, 1u);
  // Without waiting, the answer may come before the write: durable_version
  // catches up.
  v1::IndexInfo info;
  BuildOk(k, &info);
  EXPECT_EQ(info.version(), 2u);
  EXPECT_LE(info.durable_version(), 2u);
  ASSERT_TRUE(WaitForLog(Written("w", 2), std::chrono::seconds(60))) << server_->log();
  EXPECT_EQ(Describe("w")->durable_version(), 2u);
  v1::ListIndexesResponse list;
  grpc::ClientContext ctx;
  ASSERT_TRUE(stub_->ListIndexes(&ctx, v1::ListIndexesRequest(), &list).ok());
  EXPECT_EQ(list.indexes(0).durable_version(), 2u);
}

TEST_F(SnapshotFaultTest, WaitDurableFailsWhenTheWriteCannotBeMade) {
  // Room for nothing: the write fails; the build is installed and serving, and
  // the call says that it is not durable.
  Start({"--max-snapshot-bytes=1K"});
  Kind k{.name = "f", .rows = 500, .seed = 61};
  std::vector<v1::BuildIndexRequest> messages = snapshot_testing::Messages(k);
  messages[0].mutable_spec()->set_wait_durable(true);
  v1::BuildIndexResponse r;
  const grpc::Status s = testing::Build(*stub_, messages, &r);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("installed and serving"));
  EXPECT_THAT(s.error_message(), HasSubstr("--max-snapshot-bytes"));
  auto info = Describe("f");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->durable_version(), 0u);
}

// Reproduces a wait_durable build that got no answer (and a server whose drain
// then never ended): the write failed before the build registered its wait,
// and the failure was not remembered. Every answer must come, and be the
// write's error.
TEST_F(SnapshotFaultTest, AWriteThatFailsBeforeTheWaitStillAnswersIt) {
  Start({"--max-snapshot-bytes=1K", "--drain-grace=0", "--drain-timeout=5"});
  Kind k{.name = "r", .rows = 300, .seed = 71};
  for (int i = 0; i < 25; ++i) {
    std::vector<v1::BuildIndexRequest> messages = snapshot_testing::Messages(k);
    messages[0].mutable_spec()->set_wait_durable(true);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::BuildIndexResponse r;
    auto writer = stub_->BuildIndex(&ctx, &r);
    for (const auto& m : messages) ASSERT_TRUE(writer->Write(m));
    writer->WritesDone();
    const grpc::Status s = writer->Finish();
    ASSERT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
        << "build " << i << ": " << s.error_message();
    EXPECT_THAT(s.error_message(), HasSubstr("installed and serving"));
  }
  EXPECT_EQ(server_->StopWith(SIGTERM, std::chrono::seconds(15)), 0) << server_->log();
}

// ListFiles lists every regular file (an operator's notes too), and DeleteFile
// takes any name it lists.
TEST_F(SnapshotFaultTest, EveryListedFileCanBeDeleted) {
  for (const std::string name : {"my notes.txt", ".hidden"}) {
    std::ofstream(dir_ / name) << "not a snapshot";
  }
  Start();
  const v1::ListFilesResponse files = List();
  ASSERT_EQ(files.files_size(), 2) << files.DebugString();
  EXPECT_EQ(files.copy_bytes(), 28u);
  for (const auto& f : files.files()) {
    const grpc::Status s = Delete(f.file());
    EXPECT_TRUE(s.ok()) << f.file() << ": " << s.error_message();
  }
  EXPECT_EQ(List().files_size(), 0);
}

TEST_F(SnapshotFaultTest, WithoutDataDirWaitDurableAndFilesAreFailedPrecondition) {
  Start({}, /*data_dir=*/false);
  std::vector<v1::BuildIndexRequest> messages = snapshot_testing::Messages({.name = "n"});
  messages[0].mutable_spec()->set_wait_durable(true);
  v1::BuildIndexResponse r;
  const grpc::Status s = testing::Build(*stub_, messages, &r);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("spec.wait_durable"));
  EXPECT_TRUE(absl::IsNotFound(Describe("n").status()));
  grpc::ClientContext ctx;
  v1::ListFilesResponse files;
  EXPECT_EQ(stub_->ListFiles(&ctx, v1::ListFilesRequest(), &files).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(Delete("x.bin").error_code(), grpc::StatusCode::FAILED_PRECONDITION);
}

}  // namespace
}  // namespace gpujoin::server
