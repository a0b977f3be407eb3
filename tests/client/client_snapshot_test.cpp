// The C++ client's snapshot calls against a real gpujoind with --data-dir:
// SaveIndex and LoadIndex of a copy, ListFiles (copies and snapshots, their
// sizes, live flags, totals and limits), DeleteFile (a copy; a live index's
// snapshot refused; a missing file), the file-name rules, --max-copy-bytes,
// IndexSpec::wait_durable with IndexInfo::durable_version (written before the
// answer; a failed write fails the call and leaves the index serving), and a
// server without --data-dir refusing them all with FAILED_PRECONDITION.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "gpujoin/client/client.hpp"
#include "gpujoin/testing/server_process.hpp"

namespace {

namespace fs = std::filesystem;
namespace gc = gpujoin::client;
using gpujoin::testing::ServerOptions;
using gpujoin::testing::ServerProcess;
using ::testing::HasSubstr;
using ::testing::Not;

class ClientSnapshotTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("gpujoin_client_snapshots_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    client_.reset();
    server_.reset();
    fs::remove_all(dir_);
  }
  // Starts gpujoind (with --data-dir=dir_ when `data_dir`) and connects with
  // `deadline` for every call.
  void Start(bool data_dir, std::vector<std::string> extra = {},
             std::chrono::milliseconds deadline = std::chrono::seconds(60)) {
    ServerOptions o;
    o.extra_args = std::move(extra);
    if (data_dir) o.extra_args.push_back("--data-dir=" + dir_.string());
    server_ = std::make_unique<ServerProcess>(o);
    ASSERT_TRUE(server_->ready()) << server_->log();
    gc::ConnectOptions c;
    c.address = server_->grpc_address();
    c.deadline = deadline;
    auto connected = gc::Client::Connect(c);
    ASSERT_TRUE(connected.ok()) << connected.status();
    client_ = *std::move(connected);
  }
  absl::StatusOr<gc::IndexInfo> Build(const std::string& name, const std::vector<uint32_t>& keys,
                                      bool wait_durable) {
    gc::IndexSpec spec;
    spec.name = name;
    spec.expected_rows = keys.size();
    spec.wait_durable = wait_durable;
    return client_->BuildIndexFromColumns(spec, keys, {}, 1000);
  }
  // The values `index` answers for `keys` (kNoMatch where missing).
  std::vector<uint32_t> Values(const std::string& index, const std::vector<uint32_t>& keys) {
    auto r = client_->LookupAll(index, keys);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->values : std::vector<uint32_t>{};
  }
  // A status whose message must not reveal where the data dir is.
  void ExpectNoPath(const absl::Status& s) {
    EXPECT_THAT(std::string(s.message()), Not(HasSubstr(dir_.string()))) << s;
  }

  fs::path dir_;
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<gc::Client> client_;
};

std::vector<uint32_t> Keys(uint32_t n, uint32_t first) {
  std::vector<uint32_t> keys(n);
  std::iota(keys.begin(), keys.end(), first);
  return keys;
}

TEST_F(ClientSnapshotTest, WaitDurableAnswersWithTheSnapshotWritten) {
  Start(true);
  auto info = Build("w", Keys(5000, 100), /*wait_durable=*/true);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->version, 1u);
  EXPECT_EQ(info->durable_version, 1u);
  // The file is in place when the call answers, not some time later.
  ASSERT_TRUE(fs::is_regular_file(dir_ / "w.gjsnap"));
  EXPECT_GT(fs::file_size(dir_ / "w.gjsnap"), 5000u * 8);
  auto described = client_->DescribeIndex("w");
  ASSERT_TRUE(described.ok()) << described.status();
  EXPECT_EQ(described->durable_version, 1u);
  // A rebuild that waits answers with its own version durable.
  gc::IndexSpec spec;
  spec.name = "w";
  spec.replace = true;
  spec.wait_durable = true;
  const std::vector<uint32_t> keys = Keys(10, 7);
  auto rebuilt = client_->BuildIndexFromColumns(spec, keys);
  ASSERT_TRUE(rebuilt.ok()) << rebuilt.status();
  EXPECT_EQ(rebuilt->version, 2u);
  EXPECT_EQ(rebuilt->durable_version, 2u);
  auto listed = client_->ListIndexes();
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].durable_version, 2u);
}

TEST_F(ClientSnapshotTest, CopiesAreSavedListedLoadedAndDeleted) {
  Start(true, {"--max-copy-bytes=64M"});
  const std::vector<uint32_t> keys = Keys(3000, 1000);
  ASSERT_TRUE(Build("a", keys, /*wait_durable=*/true).ok());
  const std::vector<uint32_t> probe = {999, 1000, 1001, 3999, 4000};
  const std::vector<uint32_t> answers = Values("a", probe);
  EXPECT_EQ(answers, (std::vector<uint32_t>{gc::kNoMatch, 0, 1, 2999, gc::kNoMatch}));

  auto saved = client_->SaveIndex("a", "a-copy.bin");
  ASSERT_TRUE(saved.ok()) << saved.status();
  EXPECT_EQ(saved->file, "a-copy.bin");
  EXPECT_EQ(saved->version, 1u);
  EXPECT_EQ(saved->bytes, fs::file_size(dir_ / "a-copy.bin"));

  const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  auto files = client_->ListFiles();
  ASSERT_TRUE(files.ok()) << files.status();
  ASSERT_EQ(files->files.size(), 2u);
  const gc::DataFile& copy = files->files[0];  // by name: "a-copy.bin" < "a.gjsnap"
  EXPECT_EQ(copy.file, "a-copy.bin");
  EXPECT_EQ(copy.bytes, saved->bytes);
  EXPECT_EQ(copy.index, "");
  EXPECT_FALSE(copy.live);
  EXPECT_NEAR(double(copy.modified_unix_millis), double(now_ms), 600e3);
  const gc::DataFile& own = files->files[1];
  EXPECT_EQ(own.file, "a.gjsnap");
  EXPECT_EQ(own.index, "a");
  EXPECT_TRUE(own.live);
  EXPECT_EQ(own.bytes, fs::file_size(dir_ / "a.gjsnap"));
  EXPECT_EQ(files->copy_bytes, copy.bytes);
  EXPECT_EQ(files->snapshot_bytes, own.bytes);
  EXPECT_EQ(files->max_copy_bytes, 64u << 20);
  EXPECT_EQ(files->max_snapshot_bytes, 0u);

  // The copy loads as another index that answers the same.
  auto loaded = client_->LoadIndex("b", "a-copy.bin");
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->name, "b");
  EXPECT_EQ(loaded->rows, keys.size());
  EXPECT_EQ(Values("b", probe), answers);
  EXPECT_EQ(client_->LoadIndex("b", "a-copy.bin").status().code(),
            absl::StatusCode::kAlreadyExists);
  auto replaced = client_->LoadIndex("b", "a-copy.bin", /*replace=*/true);
  ASSERT_TRUE(replaced.ok()) << replaced.status();
  EXPECT_EQ(replaced->version, 2u);

  // A live index's snapshot is not deleted; a copy is, once.
  const absl::Status live = client_->DeleteFile("a.gjsnap").status();
  EXPECT_EQ(live.code(), absl::StatusCode::kFailedPrecondition) << live;
  EXPECT_THAT(std::string(live.message()), HasSubstr("live index \"a\""));
  EXPECT_TRUE(fs::exists(dir_ / "a.gjsnap"));
  auto deleted = client_->DeleteFile("a-copy.bin");
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_EQ(*deleted, saved->bytes);
  EXPECT_FALSE(fs::exists(dir_ / "a-copy.bin"));
  const absl::Status again = client_->DeleteFile("a-copy.bin").status();
  EXPECT_EQ(again.code(), absl::StatusCode::kNotFound) << again;
  EXPECT_THAT(std::string(again.message()), HasSubstr("\"a-copy.bin\""));
  ExpectNoPath(again);
  auto after = client_->ListFiles();
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->copy_bytes, 0u);
  for (const gc::DataFile& f : after->files) EXPECT_NE(f.file, "a-copy.bin");

  // The snapshot of an index that is not live (here: left by hand) can go.
  fs::copy_file(dir_ / "a.gjsnap", dir_ / "old.gjsnap");
  auto with_old = client_->ListFiles();
  ASSERT_TRUE(with_old.ok()) << with_old.status();
  ASSERT_FALSE(with_old->files.empty());
  EXPECT_EQ(with_old->files.back().file, "old.gjsnap");
  EXPECT_EQ(with_old->files.back().index, "old");
  EXPECT_FALSE(with_old->files.back().live);
  auto old = client_->DeleteFile("old.gjsnap");
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_EQ(*old, fs::file_size(dir_ / "a.gjsnap"));
}

TEST_F(ClientSnapshotTest, FileNamesThatAreNotCopiesAreRefused) {
  Start(true);
  ASSERT_TRUE(Build("a", Keys(100, 1), /*wait_durable=*/true).ok());
  ASSERT_TRUE(Build("b", Keys(100, 500), /*wait_durable=*/true).ok());
  const uintmax_t b_bytes = fs::file_size(dir_ / "b.gjsnap");
  // Another index's snapshot file: a restart would serve a's rows as b.
  const absl::Status other = client_->SaveIndex("a", "b.gjsnap").status();
  EXPECT_EQ(other.code(), absl::StatusCode::kInvalidArgument) << other;
  EXPECT_THAT(std::string(other.message()),
              HasSubstr("\"b.gjsnap\" is the snapshot file of index \"b\""));
  EXPECT_THAT(std::string(other.message()), HasSubstr("index \"a\""));
  EXPECT_EQ(fs::file_size(dir_ / "b.gjsnap"), b_bytes);
  // The server's temporary names, hidden names and paths.
  for (const std::string file : {".hidden", "a.gjsnap.tmp-1-0", "../a.bin", "sub/a.bin"}) {
    const absl::Status s = client_->SaveIndex("a", file).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << file << ": " << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr("file")) << s;
    // DeleteFile takes any plain name (ListFiles lists an operator's files too):
    // these are simply not there; paths and a write's temporary file are refused.
    const bool path = file.find('/') != std::string::npos;
    EXPECT_EQ(client_->DeleteFile(file).status().code(),
              path ? absl::StatusCode::kInvalidArgument : absl::StatusCode::kNotFound)
        << file;
  }
  EXPECT_EQ(client_->DeleteFile(".a.gjsnap.gjsnap.tmp-1-0").status().code(),
            absl::StatusCode::kInvalidArgument);
  // Its own snapshot, by name or by default, is allowed.
  auto own = client_->SaveIndex("a", "a.gjsnap");
  ASSERT_TRUE(own.ok()) << own.status();
  EXPECT_EQ(own->file, "a.gjsnap");
  auto by_default = client_->SaveIndex("a");
  ASSERT_TRUE(by_default.ok()) << by_default.status();
  EXPECT_EQ(by_default->file, "a.gjsnap");
}

TEST_F(ClientSnapshotTest, CopiesAreBoundedByMaxCopyBytes) {
  Start(true, {"--max-copy-bytes=100K"});
  ASSERT_TRUE(Build("a", Keys(3000, 1), /*wait_durable=*/true).ok());
  auto first = client_->SaveIndex("a", "a-1.bin");
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_LT(first->bytes, 100u << 10);
  ASSERT_GT(2 * first->bytes, 100u << 10) << "the test needs copies of more than half the limit";
  const absl::Status second = client_->SaveIndex("a", "a-2.bin").status();
  EXPECT_EQ(second.code(), absl::StatusCode::kResourceExhausted) << second;
  EXPECT_THAT(std::string(second.message()), HasSubstr("--max-copy-bytes=102400"));
  ExpectNoPath(second);
  EXPECT_FALSE(fs::exists(dir_ / "a-2.bin"));
  // Replacing the one copy counts it once.
  EXPECT_TRUE(client_->SaveIndex("a", "a-1.bin").ok());
  // The index's own snapshot is not a copy.
  EXPECT_TRUE(client_->SaveIndex("a").ok());
  ASSERT_TRUE(client_->DeleteFile("a-1.bin").ok());
  EXPECT_TRUE(client_->SaveIndex("a", "a-2.bin").ok());
}

// The write of a wait_durable build fails (a 1 KiB --max-snapshot-bytes): the
// call fails with the write's error, whether the write failed before or after
// the build waited for it, and the index serves.
TEST_F(ClientSnapshotTest, AFailedWriteFailsWaitDurableAndTheIndexServes) {
  Start(true, {"--max-snapshot-bytes=1K"}, std::chrono::seconds(10));
  const absl::Status s = Build("f", Keys(500, 1), /*wait_durable=*/true).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("installed and serving"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("--max-snapshot-bytes"));
  auto info = client_->DescribeIndex("f");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->version, 1u);
  EXPECT_EQ(info->durable_version, 0u);
  EXPECT_EQ(Values("f", {1, 500, 501}), (std::vector<uint32_t>{0, 499, gc::kNoMatch}));
  EXPECT_FALSE(fs::exists(dir_ / "f.gjsnap"));
}

TEST_F(ClientSnapshotTest, WithoutDataDirEveryFileCallIsFailedPrecondition) {
  Start(false);
  const absl::Status wait = Build("n", Keys(10, 1), /*wait_durable=*/true).status();
  EXPECT_EQ(wait.code(), absl::StatusCode::kFailedPrecondition) << wait;
  EXPECT_THAT(std::string(wait.message()), HasSubstr("wait_durable"));
  EXPECT_EQ(client_->DescribeIndex("n").status().code(), absl::StatusCode::kNotFound);
  auto plain = Build("n", Keys(10, 1), /*wait_durable=*/false);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->durable_version, 0u);
  const absl::Status list = client_->ListFiles().status();
  EXPECT_EQ(list.code(), absl::StatusCode::kFailedPrecondition) << list;
  EXPECT_THAT(std::string(list.message()), HasSubstr("--data-dir"));
  EXPECT_EQ(client_->DeleteFile("x.bin").status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(client_->SaveIndex("n").status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
