// The write-ahead log's writer under injected faults (MutationLogIo): a short
// write followed by ENOSPC, EIO and zero-byte writes leave the log as it was
// and usable; a partial record that cannot be truncated away, a failed fsync
// (every waiter, and everything after, fails: INTERNAL naming the file) and a
// failed directory sync after compaction stop the log; a torn tail Open cannot
// truncate stays; a failed compaction keeps the old log.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "gpujoin/testing/files.hpp"
#include "mutation_log_fixture.hpp"
#include "storage/data_dir.hpp"
#include "storage/mutation_log.hpp"

namespace gpujoin::server {
namespace {

using gpujoin::testing::Slurp;
using gpujoin::testing::Spill;
using ::testing::HasSubstr;
using namespace mutation_log_testing;

using MutationLogFaultTest = MutationLogTest;

TEST_F(MutationLogFaultTest, AFailedOrShortAppendLeavesTheLogAsItWas) {
  std::atomic<int> mode{0};  // 0: real writes; 1: half then ENOSPC; 2: EIO; 3: 0 bytes
  MutationLogIo io;
  io.pwrite = [&mode](int fd, const void* data, size_t bytes, off_t offset) -> ssize_t {
    switch (mode.load()) {
      case 1:
        mode = 4;
        return ::pwrite(fd, data, bytes / 2, offset);
      case 4:
        errno = ENOSPC;
        return -1;
      case 2:
        errno = EIO;
        return -1;
      case 3:
        return 0;
      default:
        return ::pwrite(fd, data, bytes, offset);
    }
  };
  auto opened = Open(kAlways, io);
  ASSERT_TRUE(opened.ok());
  MutationLog& log = **opened;
  ASSERT_TRUE(log.Append(Record(1, 1, 300)).ok());
  const std::string before = Slurp(path_);
  const uint64_t bytes_before = log.bytes();

  mode = 1;
  auto r = log.Append(Record(1, 2, 300));
  ASSERT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted) << r.status();
  EXPECT_THAT(r.status().message(), HasSubstr("\"orders.gjwal\""));
  EXPECT_THAT(r.status().message(), HasSubstr(std::strerror(ENOSPC)));
  EXPECT_EQ(Slurp(path_), before);
  EXPECT_EQ(log.bytes(), bytes_before);

  mode = 2;
  r = log.Append(Record(1, 2, 300));
  ASSERT_EQ(r.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(r.status().message(), HasSubstr(std::strerror(EIO)));
  EXPECT_EQ(Slurp(path_), before);

  mode = 3;
  r = log.Append(Record(1, 2, 300));
  ASSERT_EQ(r.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(r.status().message(), HasSubstr("wrote 0 of"));
  EXPECT_EQ(Slurp(path_), before);

  // The log is still usable, and the failed sequence may be appended again.
  mode = 0;
  r = log.Append(Record(1, 2, 300));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(*log.Sync(*r));
  auto contents = Read();
  ASSERT_TRUE(contents.ok());
  EXPECT_EQ(contents->records, (std::vector<LogRecord>{Record(1, 1, 300), Record(1, 2, 300)}));
  EXPECT_EQ(Metric("gpujoin_wal_failures_total", {{"reason", "disk_full"}}), 1);
  EXPECT_EQ(Metric("gpujoin_wal_failures_total", {{"reason", "io_error"}}), 2);
  EXPECT_EQ(Metric("gpujoin_wal_appended_records_total"), 2);
}

TEST_F(MutationLogFaultTest, AnAppendThatCannotBeTruncatedAwayFailsTheLog) {
  std::atomic<bool> fail{false};
  std::atomic<int> failing_writes{0};
  MutationLogIo io;
  io.pwrite = [&](int fd, const void* data, size_t bytes, off_t offset) -> ssize_t {
    if (!fail.load()) return ::pwrite(fd, data, bytes, offset);
    // A short write of 10 bytes, then EIO.
    if (failing_writes.fetch_add(1) == 0) return ::pwrite(fd, data, 10, offset);
    errno = EIO;
    return -1;
  };
  io.ftruncate = [&fail](int fd, off_t length) {
    if (!fail.load()) return ::ftruncate(fd, length);
    errno = EROFS;
    return -1;
  };
  auto opened = Open(kAlways, io);
  ASSERT_TRUE(opened.ok());
  MutationLog& log = **opened;
  auto first = log.Append(Record(1, 1, 30));
  ASSERT_TRUE(first.ok());
  fail = true;
  auto r = log.Append(Record(1, 2, 30));
  ASSERT_EQ(r.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(r.status().message(), HasSubstr(std::strerror(EIO)));
  EXPECT_THAT(r.status().message(), HasSubstr("the partial record could not be removed"));
  EXPECT_THAT(r.status().message(), HasSubstr(std::strerror(EROFS)));
  fail = false;
  // The partial record stays at the end, so nothing may follow it.
  EXPECT_EQ(log.Append(Record(1, 2, 30)).status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(log.Sync(*first).status().code(), absl::StatusCode::kInternal);
  opened->reset();
  // What is left reads as the valid record and a torn tail.
  auto contents = Read();
  ASSERT_TRUE(contents.ok()) << contents.status();
  EXPECT_EQ(contents->records, std::vector<LogRecord>{Record(1, 1, 30)});
  EXPECT_EQ(contents->torn_tail_bytes, 10u);
  EXPECT_EQ(Metric("gpujoin_wal_failures_total", {{"reason", "io_error"}}), 1);
}

TEST_F(MutationLogFaultTest, OpenLeavesATornTailItCannotTruncate) {
  std::string bytes = LogBytes({Record(1, 1, 30), Record(1, 2, 30)});
  bytes.resize(bytes.size() - 5);
  Spill(path_, bytes);
  MutationLogIo io;
  io.ftruncate = [](int, off_t) {
    errno = EIO;
    return -1;
  };
  auto log = Open(kAlways, io);
  ASSERT_EQ(log.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(log.status().message(), HasSubstr("truncate the torn tail of write-ahead log"));
  EXPECT_EQ(Slurp(path_), bytes);
  EXPECT_EQ(Metric("gpujoin_wal_torn_tail_records_total"), 0);
  EXPECT_TRUE(Open(kAlways).ok());  // without the fault it opens
  EXPECT_EQ(Metric("gpujoin_wal_torn_tail_records_total"), 1);
}

TEST_F(MutationLogFaultTest, AFailedDirectorySyncIsAnErrorAndAfterARewriteFailsTheLog) {
  std::atomic<bool> fail{true};
  MutationLogIo io;
  io.sync_dir = [&fail](const std::string& dir) {
    return fail.load() ? absl::InternalError("fsync \"--data-dir\": Input/output error")
                       : detail::SyncDir(dir);
  };
  // Creating: the error is returned; the file is there with its header.
  auto created = Open(kAlways, io);
  ASSERT_EQ(created.status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(Slurp(path_), EncodeLogFileHeader());
  fail = false;
  auto opened = Open(kAlways, io);
  ASSERT_TRUE(opened.ok()) << opened.status();
  MutationLog& log = **opened;
  for (uint64_t s = 1; s <= 4; ++s) ASSERT_TRUE(log.Append(Record(1, s, 30)).ok());
  // Compacting: renamed, but whether a crash keeps the rename is unknown, so
  // the log stops taking records.
  fail = true;
  const absl::Status s = log.Rewrite([](const LogRecord& r) { return r.sequence > 2; });
  ASSERT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(s.message(), HasSubstr("compacting write-ahead log \"orders.gjwal\""));
  EXPECT_THAT(s.message(), HasSubstr("accepts no more mutations"));
  EXPECT_EQ(log.Append(Record(1, 5, 30)).status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(Slurp(path_), LogBytes({Record(1, 3, 30), Record(1, 4, 30)}));
  EXPECT_EQ(Metric("gpujoin_wal_failures_total", {{"reason", "io_error"}}), 2);
}

TEST_F(MutationLogFaultTest, AFailedFsyncFailsTheLogForGood) {
  for (const char* policy : {"always", "batch-ms:1"}) {
    SCOPED_TRACE(policy);
    std::filesystem::remove(path_);
    std::atomic<bool> fail{false};
    MutationLogIo io;
    io.fsync = [&fail](int fd) {
      if (fail.load()) {
        errno = EIO;
        return -1;
      }
      return ::fsync(fd);
    };
    auto opened = Open(*ParseWalSync(policy), io);
    ASSERT_TRUE(opened.ok());
    MutationLog& log = **opened;
    auto first = log.Append(Record(1, 1, 10));
    ASSERT_TRUE(first.ok());
    ASSERT_TRUE(*log.Sync(*first));
    fail = true;
    auto second = log.Append(Record(1, 2, 10));
    ASSERT_TRUE(second.ok());
    // Every waiter sees the failure, and so does everything after it.
    std::vector<std::thread> waiters;
    std::atomic<int> internal{0};
    for (int i = 0; i < 4; ++i) {
      waiters.emplace_back([&] {
        if (log.Sync(*second).status().code() == absl::StatusCode::kInternal) internal++;
      });
    }
    for (std::thread& t : waiters) t.join();
    EXPECT_EQ(internal.load(), 4);
    auto s = log.Sync(*second);
    ASSERT_EQ(s.status().code(), absl::StatusCode::kInternal);
    EXPECT_THAT(s.status().message(), HasSubstr("fsync of write-ahead log \"orders.gjwal\""));
    EXPECT_THAT(s.status().message(), HasSubstr(std::strerror(EIO)));
    fail = false;  // even once the disk recovers
    EXPECT_EQ(log.Sync(*first).status().code(), absl::StatusCode::kInternal);
    EXPECT_EQ(log.Append(Record(1, 3, 10)).status().code(), absl::StatusCode::kInternal);
    EXPECT_EQ(log.Rewrite([](const LogRecord&) { return true; }).code(),
              absl::StatusCode::kInternal);
  }
  EXPECT_EQ(Metric("gpujoin_wal_failures_total", {{"reason", "fsync"}}), 2);
}

TEST_F(MutationLogFaultTest, AFailedRewriteKeepsTheOldLog) {
  std::atomic<bool> fail{false};
  MutationLogIo io;
  io.fsync = [&fail](int fd) {
    if (fail.load()) {
      errno = ENOSPC;
      return -1;
    }
    return ::fsync(fd);
  };
  auto opened = Open(kOff, io);  // under off, only the rewrite fsyncs
  ASSERT_TRUE(opened.ok());
  MutationLog& log = **opened;
  for (uint64_t s = 1; s <= 3; ++s) ASSERT_TRUE(log.Append(Record(1, s, 10)).ok());
  const std::string before = Slurp(path_);
  fail = true;
  const absl::Status s = log.Rewrite([](const LogRecord& r) { return r.sequence == 3; });
  ASSERT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_THAT(s.message(), HasSubstr("\"orders.gjwal\""));
  EXPECT_EQ(Slurp(path_), before);
  EXPECT_FALSE(std::filesystem::exists(MutationLogTempPath(path_)));
  fail = false;
  ASSERT_TRUE(log.Append(Record(1, 4, 10)).ok());
  auto contents = Read();
  ASSERT_TRUE(contents.ok());
  EXPECT_EQ(contents->records.size(), 4u);
}

}  // namespace
}  // namespace gpujoin::server
