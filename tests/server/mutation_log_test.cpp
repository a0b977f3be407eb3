// The write-ahead log's writer (server/src/storage/mutation_log.hpp): round
// trips under every --wal-sync policy; group commit (many threads syncing
// while one appends share fsyncs, at most one runs at a time, and none returns
// before an fsync that began after its record was written); the batch-ms
// thread; compaction (kept records exactly, appending and syncing across it,
// racing syncs); removal; the metrics. mutation_log_fault_test.cpp injects
// failures.
#include "storage/mutation_log.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gpujoin/testing/eventually.hpp"
#include "gpujoin/testing/files.hpp"
#include "mutation_log_fixture.hpp"

namespace gpujoin::server {
namespace {

using gpujoin::testing::Slurp;
using ::testing::HasSubstr;
using namespace mutation_log_testing;

TEST_F(MutationLogTest, ANewLogIsItsHeaderAlone) {
  EXPECT_EQ(Read().status().code(), absl::StatusCode::kNotFound);
  auto log = Open();
  ASSERT_TRUE(log.ok()) << log.status();
  EXPECT_EQ((*log)->bytes(), kLogFileHeaderBytes);
  EXPECT_EQ(Slurp(path_), EncodeLogFileHeader());
  EXPECT_FALSE(std::filesystem::exists(MutationLogTempPath(path_)));
  EXPECT_EQ(MutationLogTempPath(path_), (dir_ / ".orders.gjwal.tmp").string());
  auto contents = Read();
  ASSERT_TRUE(contents.ok()) << contents.status();
  EXPECT_TRUE(contents->records.empty());
  EXPECT_EQ(contents->valid_bytes, kLogFileHeaderBytes);
  EXPECT_EQ(Metric("gpujoin_wal_bytes", {{"index", "orders"}}), double(kLogFileHeaderBytes));
}

TEST_F(MutationLogTest, RecordsRoundTripAcrossReopens) {
  const std::vector<LogRecord> records = SampleRecords();
  const std::vector<LogRecord> first(records.begin(), records.begin() + 4);
  const std::vector<LogRecord> second(records.begin() + 4, records.end());
  Write(first, kAlways);
  Write(second, kAlways);  // appends after the records already there
  auto contents = Read(uint64_t{2} << 20);
  ASSERT_TRUE(contents.ok()) << contents.status();
  EXPECT_EQ(contents->records, records);
  EXPECT_EQ(contents->valid_bytes, LogBytes(records).size());
  EXPECT_EQ(contents->torn_tail_bytes, 0u);
  EXPECT_EQ(contents->torn_tail_records, 0u);
  EXPECT_EQ(Slurp(path_), LogBytes(records));
  EXPECT_EQ(Metric("gpujoin_wal_appended_records_total"), double(records.size()));
  EXPECT_EQ(Metric("gpujoin_wal_appended_bytes_total"),
            double(LogBytes(records).size() - kLogFileHeaderBytes));
  EXPECT_EQ(Metric("gpujoin_wal_bytes", {{"index", "orders"}}), double(LogBytes(records).size()));
}

TEST_F(MutationLogTest, BaseVersionsInterleaveWithSequencesIncreasingInEach) {
  const std::vector<LogRecord> records = {Record(1, 5, 3), Record(2, 1, 3), Record(1, 6, 3),
                                          Record(2, 2, 3)};
  Write(records);
  auto contents = Read();
  ASSERT_TRUE(contents.ok()) << contents.status();
  EXPECT_EQ(contents->records, records);
}

TEST_F(MutationLogTest, AppendRefusesASequenceThatDoesNotIncrease) {
  auto log = Open();
  ASSERT_TRUE(log.ok());
  ASSERT_TRUE((*log)->Append(Record(3, 10, 4)).ok());
  const std::string before = Slurp(path_);
  for (uint64_t sequence : {uint64_t{10}, uint64_t{9}}) {
    auto r = (*log)->Append(Record(3, sequence, 4));
    ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << sequence;
    EXPECT_THAT(r.status().message(), HasSubstr("is not above the log's last sequence"));
  }
  EXPECT_EQ(Slurp(path_), before);
  EXPECT_TRUE((*log)->Append(Record(4, 1, 4)).ok());  // another base version starts anew
  EXPECT_TRUE((*log)->Append(Record(3, 11, 4)).ok());
}

// ------------------------------------------------------------------ policies

class MutationLogPolicyTest : public MutationLogTest,
                              public ::testing::WithParamInterface<const char*> {};

TEST_P(MutationLogPolicyTest, SyncMakesRecordsDurableAsThePolicySays) {
  const WalSyncPolicy policy = *ParseWalSync(GetParam());
  std::atomic<int> fsyncs{0};
  MutationLogIo io;
  io.fsync = [&fsyncs](int fd) {
    fsyncs.fetch_add(1);
    return ::fsync(fd);
  };
  const std::vector<LogRecord> records = SampleRecords();
  {
    auto log = Open(policy, io);
    ASSERT_TRUE(log.ok()) << log.status();
    EXPECT_EQ((*log)->policy(), policy);
    const int after_open = fsyncs.load();  // creating the file fsyncs it under every policy
    EXPECT_EQ(after_open, 1);
    for (const LogRecord& r : records) {
      auto ticket = (*log)->Append(r);
      ASSERT_TRUE(ticket.ok()) << ticket.status();
      auto durable = (*log)->Sync(*ticket);
      ASSERT_TRUE(durable.ok()) << durable.status();
      EXPECT_EQ(*durable, policy.mode != Mode::kOff);
    }
    if (policy.mode == Mode::kOff) {
      EXPECT_EQ(fsyncs.load(), after_open);
      EXPECT_EQ(Metric("gpujoin_wal_fsyncs_total"), 0);
    } else {
      EXPECT_GE(fsyncs.load() - after_open, 1);
      EXPECT_LE(fsyncs.load() - after_open, int(records.size()));
      EXPECT_EQ(Metric("gpujoin_wal_fsyncs_total"), double(fsyncs.load() - after_open));
      EXPECT_EQ(Metric("gpujoin_wal_fsync_seconds"), double(fsyncs.load() - after_open));
    }
    // A record never synced is fsync'd when the log closes (not under off;
    // batch-ms may have fsync'd it already).
    ASSERT_TRUE((*log)->Append(Record(8, 1, 10)).ok());
    const int before_close = fsyncs.load();
    log->reset();
    const int at_close = fsyncs.load() - before_close;
    if (policy.mode == Mode::kBatch) {
      EXPECT_LE(at_close, 1);
    } else {
      EXPECT_EQ(at_close, policy.mode == Mode::kOff ? 0 : 1);
    }
  }
  auto contents = Read(uint64_t{2} << 20);
  ASSERT_TRUE(contents.ok()) << contents.status();
  EXPECT_EQ(contents->records.size(), records.size() + 1);
}

INSTANTIATE_TEST_SUITE_P(
    Policies, MutationLogPolicyTest, ::testing::Values("always", "batch-ms:5", "off"),
    [](const ::testing::TestParamInfo<const char*>& info) {
      return std::string(info.index == 0 ? "Always" : info.index == 1 ? "BatchMs5" : "Off");
    });

// An fsync hook that measures what each fsync covers: the file's size when it
// began, published when it ends, with a delay so that callers pile up.
struct FsyncProbe {
  std::atomic<int> calls{0};
  std::atomic<int> running{0};
  std::atomic<int> most_running{0};
  std::atomic<uint64_t> durable_bytes{0};  // the largest size a finished fsync covered
  std::chrono::microseconds delay{1000};

  MutationLogIo Io() {
    MutationLogIo io;
    io.fsync = [this](int fd) {
      struct stat st {};
      ::fstat(fd, &st);
      const int now = running.fetch_add(1) + 1;
      int most = most_running.load();
      while (now > most && !most_running.compare_exchange_weak(most, now)) {
      }
      calls.fetch_add(1);
      std::this_thread::sleep_for(delay);
      const int rc = ::fsync(fd);
      uint64_t covered = durable_bytes.load();
      while (uint64_t(st.st_size) > covered &&
             !durable_bytes.compare_exchange_weak(covered, uint64_t(st.st_size))) {
      }
      running.fetch_sub(1);
      return rc;
    };
    return io;
  }
};

TEST_F(MutationLogTest, ConcurrentSyncsShareFsyncsAndNoneReturnsEarly) {
  FsyncProbe probe;
  auto opened = Open(kAlways, probe.Io());
  ASSERT_TRUE(opened.ok()) << opened.status();
  MutationLog& log = **opened;
  const int after_open = probe.calls.load();
  constexpr int kRecords = 600, kSyncers = 8;
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::pair<uint64_t, uint64_t>> queue;  // (ticket, file bytes after the record)
  bool done = false;
  std::atomic<int> synced{0}, early{0}, failed{0};
  std::vector<std::thread> syncers;
  for (int t = 0; t < kSyncers; ++t) {
    syncers.emplace_back([&] {
      while (true) {
        std::pair<uint64_t, uint64_t> job;
        {
          std::unique_lock<std::mutex> lock(mu);
          cv.wait(lock, [&] { return done || !queue.empty(); });
          if (queue.empty()) return;
          job = queue.front();
          queue.pop_front();
        }
        auto durable = log.Sync(job.first);
        if (!durable.ok() || !*durable) failed.fetch_add(1);
        // The record is durable only if a finished fsync began after it was
        // written (the file then held it).
        if (probe.durable_bytes.load() < job.second) early.fetch_add(1);
        synced.fetch_add(1);
      }
    });
  }
  for (int i = 1; i <= kRecords; ++i) {
    auto ticket = log.Append(Record(1, uint64_t(i), size_t(i % 97)));
    ASSERT_TRUE(ticket.ok()) << ticket.status();
    {
      std::lock_guard<std::mutex> lock(mu);
      queue.emplace_back(*ticket, log.bytes());
    }
    cv.notify_one();
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    done = true;
  }
  cv.notify_all();
  for (std::thread& t : syncers) t.join();
  EXPECT_EQ(synced.load(), kRecords);
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(early.load(), 0);
  EXPECT_EQ(probe.most_running.load(), 1);  // at most one fsync at a time
  const int fsyncs = probe.calls.load() - after_open;
  EXPECT_GE(fsyncs, 1);
  EXPECT_LT(fsyncs, kRecords) << "no group commit";
  EXPECT_EQ(Metric("gpujoin_wal_fsyncs_total"), double(fsyncs));
}

TEST_F(MutationLogTest, ASyncCoveredByAFinishedFsyncReturnsAtOnce) {
  FsyncProbe probe;
  auto log = Open(kAlways, probe.Io());
  ASSERT_TRUE(log.ok());
  std::vector<uint64_t> tickets;
  for (uint64_t s = 1; s <= 3; ++s) tickets.push_back(*(*log)->Append(Record(1, s, 20)));
  const int before = probe.calls.load();
  EXPECT_TRUE(*(*log)->Sync(tickets[2]));
  EXPECT_EQ(probe.calls.load(), before + 1);
  EXPECT_TRUE(*(*log)->Sync(tickets[0]));  // covered by that fsync
  EXPECT_TRUE(*(*log)->Sync(tickets[1]));
  EXPECT_TRUE(*(*log)->Sync(0));
  EXPECT_EQ(probe.calls.load(), before + 1);
  EXPECT_EQ((*log)->Sync(tickets[2] + 1).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(MutationLogTest, BatchPolicyFsyncsOnItsOwnThreadAndSharesFsyncs) {
  FsyncProbe probe;
  auto opened = Open(WalSyncPolicy{Mode::kBatch, 50}, probe.Io());
  ASSERT_TRUE(opened.ok());
  MutationLog& log = **opened;
  const int after_open = probe.calls.load();
  // Nobody calls Sync: the log's thread fsyncs what was appended anyway.
  ASSERT_TRUE(log.Append(Record(1, 1, 10)).ok());
  EXPECT_TRUE(gpujoin::testing::Eventually([&] { return probe.calls.load() > after_open; }));
  // Records appended together wait for the next fsync, at most 50 ms after
  // the previous one began, and share it.
  constexpr int kRecords = 40;
  std::vector<uint64_t> tickets;
  for (int i = 2; i <= kRecords + 1; ++i) tickets.push_back(*log.Append(Record(1, i, 100)));
  const uint64_t end = log.bytes();
  std::vector<std::thread> syncers;
  std::atomic<int> durable{0};
  for (uint64_t ticket : tickets) {
    syncers.emplace_back([&, ticket] {
      auto r = log.Sync(ticket);
      if (r.ok() && *r) durable.fetch_add(1);
    });
  }
  for (std::thread& t : syncers) t.join();
  EXPECT_EQ(durable.load(), kRecords);
  EXPECT_GE(probe.durable_bytes.load(), end);
  EXPECT_LT(probe.calls.load() - after_open, 1 + kRecords);
  EXPECT_EQ(probe.most_running.load(), 1);
}

TEST_F(MutationLogTest, ClosingFsyncsWhatTheBatchThreadHasNotYet) {
  FsyncProbe probe;
  auto log = Open(WalSyncPolicy{Mode::kBatch, 10000}, probe.Io());
  ASSERT_TRUE(log.ok());
  auto first = (*log)->Append(Record(1, 1, 10));
  ASSERT_TRUE(first.ok());
  EXPECT_TRUE(*(*log)->Sync(*first));                  // the first after a quiet spell: at once
  ASSERT_TRUE((*log)->Append(Record(1, 2, 10)).ok());  // the next fsync is 10 s away
  const int before_close = probe.calls.load();
  const uint64_t end = (*log)->bytes();
  const auto start = std::chrono::steady_clock::now();
  log->reset();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_EQ(probe.calls.load(), before_close + 1);
  EXPECT_EQ(probe.durable_bytes.load(), end);
}

// ------------------------------------------------------------------ compaction

TEST_F(MutationLogTest, RewriteKeepsExactlyTheKeptRecordsAndAppendingContinues) {
  auto opened = Open(kAlways);
  ASSERT_TRUE(opened.ok());
  MutationLog& log = **opened;
  std::vector<uint64_t> tickets;
  for (uint64_t s = 1; s <= 10; ++s) tickets.push_back(*log.Append(Record(3, s, 100 * s)));
  ASSERT_TRUE(log.Sync(tickets[3]).ok());  // some synced before, some not
  std::vector<uint64_t> seen;
  ASSERT_TRUE(log.Rewrite([&](const LogRecord& r) {
                   seen.push_back(r.sequence);
                   return r.sequence > 6;
                 })
                  .ok());
  EXPECT_EQ(seen, (std::vector<uint64_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}));
  std::vector<LogRecord> expected;
  for (uint64_t s = 7; s <= 10; ++s) expected.push_back(Record(3, s, 100 * s));
  EXPECT_EQ(Slurp(path_), LogBytes(expected));
  EXPECT_EQ(log.bytes(), LogBytes(expected).size());
  EXPECT_EQ(Metric("gpujoin_wal_bytes", {{"index", "orders"}}), double(log.bytes()));
  EXPECT_FALSE(std::filesystem::exists(MutationLogTempPath(path_)));
  // Every ticket issued before the rewrite is durable now; new ones work.
  for (uint64_t ticket : tickets) EXPECT_TRUE(*log.Sync(ticket));
  auto ticket = log.Append(Record(3, 11, 7));
  ASSERT_TRUE(ticket.ok());
  EXPECT_GT(*ticket, tickets.back());
  EXPECT_TRUE(*log.Sync(*ticket));
  expected.push_back(Record(3, 11, 7));
  auto contents = Read();
  ASSERT_TRUE(contents.ok());
  EXPECT_EQ(contents->records, expected);
  // Keeping nothing leaves the header; sequences of that base may start over.
  ASSERT_TRUE(log.Rewrite([](const LogRecord&) { return false; }).ok());
  EXPECT_EQ(Slurp(path_), EncodeLogFileHeader());
  ASSERT_TRUE(log.Append(Record(3, 1, 5)).ok());
  opened->reset();
  contents = Read();
  ASSERT_TRUE(contents.ok());
  EXPECT_EQ(contents->records, std::vector<LogRecord>{Record(3, 1, 5)});
}

TEST_F(MutationLogTest, SyncsRacingRewritesAllReturnDurable) {
  FsyncProbe probe;
  probe.delay = std::chrono::microseconds(200);
  auto opened = Open(kAlways, probe.Io());
  ASSERT_TRUE(opened.ok());
  MutationLog& log = **opened;
  std::mutex mu;
  std::condition_variable cv;
  std::deque<uint64_t> queue;
  bool done = false;
  std::atomic<int> durable{0};
  std::vector<std::thread> syncers;
  for (int t = 0; t < 4; ++t) {
    syncers.emplace_back([&] {
      while (true) {
        uint64_t ticket;
        {
          std::unique_lock<std::mutex> lock(mu);
          cv.wait(lock, [&] { return done || !queue.empty(); });
          if (queue.empty()) return;
          ticket = queue.front();
          queue.pop_front();
        }
        auto r = log.Sync(ticket);
        if (r.ok() && *r) durable.fetch_add(1);
      }
    });
  }
  constexpr uint64_t kRecords = 300;
  for (uint64_t s = 1; s <= kRecords; ++s) {
    auto ticket = log.Append(Record(1, s, 64));
    ASSERT_TRUE(ticket.ok()) << ticket.status();
    {
      std::lock_guard<std::mutex> lock(mu);
      queue.push_back(*ticket);
    }
    cv.notify_one();
    if (s % 50 == 0) {
      // Keep the last 20 records, as a snapshot at sequence s - 20 would.
      ASSERT_TRUE(log.Rewrite([s](const LogRecord& r) { return r.sequence > s - 20; }).ok());
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    done = true;
  }
  cv.notify_all();
  for (std::thread& t : syncers) t.join();
  EXPECT_EQ(durable.load(), int(kRecords));
  auto contents = Read();
  ASSERT_TRUE(contents.ok());
  std::vector<LogRecord> expected;
  for (uint64_t s = kRecords - 19; s <= kRecords; ++s) expected.push_back(Record(1, s, 64));
  EXPECT_EQ(contents->records, expected);
}

TEST_F(MutationLogTest, RemoveDeletesTheFileAndStopsTheLog) {
  auto opened = Open(kAlways);
  ASSERT_TRUE(opened.ok());
  MutationLog& log = **opened;
  auto ticket = log.Append(Record(1, 1, 10));
  ASSERT_TRUE(ticket.ok());
  EXPECT_FALSE(std::isnan(Metric("gpujoin_wal_bytes", {{"index", "orders"}})));
  ASSERT_TRUE(log.Remove().ok());
  EXPECT_FALSE(std::filesystem::exists(path_));
  EXPECT_TRUE(std::isnan(Metric("gpujoin_wal_bytes", {{"index", "orders"}})));
  EXPECT_EQ(log.Sync(*ticket).status().code(), absl::StatusCode::kFailedPrecondition);
  auto r = log.Append(Record(1, 2, 10));
  ASSERT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(r.status().message(), HasSubstr("\"orders.gjwal\" was removed"));
}

TEST_F(MutationLogTest, MetricsExistFromTheStart) {
  for (std::string_view reason : kMutationLogFailureReasons) {
    EXPECT_EQ(Metric("gpujoin_wal_failures_total", {{"reason", std::string(reason)}}), 0) << reason;
  }
  for (const char* name :
       {"gpujoin_wal_appended_records_total", "gpujoin_wal_appended_bytes_total",
        "gpujoin_wal_fsyncs_total", "gpujoin_wal_fsync_seconds",
        "gpujoin_wal_replayed_records_total", "gpujoin_wal_torn_tail_records_total"}) {
    EXPECT_EQ(Metric(name), 0) << name;
  }
  metrics_.Replayed(12);
  EXPECT_EQ(Metric("gpujoin_wal_replayed_records_total"), 12);
  EXPECT_EQ(MutationLogFailureReason(absl::ResourceExhaustedError("")), "disk_full");
  EXPECT_EQ(MutationLogFailureReason(absl::DataLossError("")), "corrupt");
  EXPECT_EQ(MutationLogFailureReason(absl::FailedPreconditionError("")), "version");
  EXPECT_EQ(MutationLogFailureReason(absl::InternalError("")), "io_error");
}

}  // namespace
}  // namespace gpujoin::server
