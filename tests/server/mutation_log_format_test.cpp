// The write-ahead log's format and reader (server/src/storage/
// mutation_log_format.hpp, docs/operations.md "Write-ahead log format"): torn
// tails made by cutting the file at every byte of the last record, a flipped
// byte anywhere in the last record and a zero-filled tail (dropped, counted,
// and the log appends cleanly after Open); a flipped byte anywhere in a middle
// record (DATA_LOSS naming the offset and the sequence, the file untouched);
// bad and newer file headers; declared lengths past the end or over the
// caller's limit; out-of-order sequences; files that are not regular.
#include "storage/mutation_log_format.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gpujoin/testing/files.hpp"
#include "mutation_log_fixture.hpp"
#include "storage/snapshot_format.hpp"

namespace gpujoin::server {
namespace {

using gpujoin::testing::Slurp;
using gpujoin::testing::Spill;
using ::testing::HasSubstr;
using namespace mutation_log_testing;

using MutationLogFormatTest = MutationLogTest;

TEST_F(MutationLogFormatTest, ReadRefusesSequencesThatDoNotIncrease) {
  Spill(path_, LogBytes({Record(3, 1, 8), Record(3, 2, 8), Record(3, 2, 8), Record(3, 9, 8)}));
  auto r = Read();
  ASSERT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
  const uint64_t offset = kLogFileHeaderBytes + 2 * (kLogRecordHeaderBytes + 8);
  EXPECT_THAT(r.status().message(), HasSubstr("\"orders.gjwal\""));
  EXPECT_THAT(r.status().message(),
              HasSubstr(absl::StrCat("record at offset ", offset,
                                     " has sequence 2 of base version 3, not above")));
  EXPECT_EQ(Open().status().code(), absl::StatusCode::kDataLoss);
}

// ------------------------------------------------------------------ torn tails

TEST_F(MutationLogFormatTest, ACutInsideTheLastRecordIsATornTailThatOpenTruncates) {
  const std::vector<LogRecord> records = {Record(2, 1, 10), Record(2, 2, 200), Record(2, 3, 33)};
  const std::string full = LogBytes(records);
  const uint64_t last_at = full.size() - RecordBytes(records.back());
  const std::vector<LogRecord> kept(records.begin(), records.end() - 1);
  double torn_counted = 0;
  for (uint64_t cut = last_at + 1; cut < full.size(); ++cut) {
    SCOPED_TRACE(absl::StrCat("cut at ", cut));
    Spill(path_, full.substr(0, cut));
    auto contents = Read();
    ASSERT_TRUE(contents.ok()) << contents.status();
    EXPECT_EQ(contents->records, kept);
    EXPECT_EQ(contents->valid_bytes, last_at);
    EXPECT_EQ(contents->torn_tail_bytes, cut - last_at);
    EXPECT_EQ(contents->torn_tail_records, 1u);
    EXPECT_EQ(Slurp(path_).size(), cut);  // reading changes nothing
    // Open drops the tail; the next append lands right after the valid part.
    {
      auto log = Open(cut % 16 == 0 ? kAlways : kOff);
      ASSERT_TRUE(log.ok()) << log.status();
      EXPECT_EQ((*log)->bytes(), last_at);
      EXPECT_EQ(Metric("gpujoin_wal_torn_tail_records_total"), ++torn_counted);
      auto ticket = (*log)->Append(Record(2, 3, 5));
      ASSERT_TRUE(ticket.ok()) << ticket.status();
      ASSERT_TRUE((*log)->Sync(*ticket).ok());
    }
    std::vector<LogRecord> expected = kept;
    expected.push_back(Record(2, 3, 5));
    auto after = Read();
    ASSERT_TRUE(after.ok()) << after.status();
    EXPECT_EQ(after->records, expected);
    EXPECT_EQ(after->torn_tail_bytes, 0u);
    EXPECT_EQ(Slurp(path_), LogBytes(expected));
  }
  // A cut at a record boundary is a shorter, valid log.
  Spill(path_, full.substr(0, last_at));
  auto contents = Read();
  ASSERT_TRUE(contents.ok());
  EXPECT_EQ(contents->records, kept);
  EXPECT_EQ(contents->torn_tail_records, 0u);
}

TEST_F(MutationLogFormatTest, AFlippedByteInTheLastRecordIsATornTail) {
  const std::vector<LogRecord> records = {Record(2, 1, 10), Record(2, 2, 200), Record(2, 3, 33)};
  const std::string full = LogBytes(records);
  const uint64_t last_at = full.size() - RecordBytes(records.back());
  for (uint64_t at = last_at; at < full.size(); ++at) {
    SCOPED_TRACE(absl::StrCat("byte ", at));
    std::string bytes = full;
    bytes[at] ^= 0x01;
    Spill(path_, bytes);
    auto contents = Read();
    ASSERT_TRUE(contents.ok()) << contents.status();
    EXPECT_EQ(contents->records, std::vector<LogRecord>(records.begin(), records.end() - 1));
    EXPECT_EQ(contents->valid_bytes, last_at);
    EXPECT_EQ(contents->torn_tail_bytes, full.size() - last_at);
    EXPECT_EQ(contents->torn_tail_records, 1u);
  }
}

// A file system may extend a file before its data reaches the disk: zeros
// after the last record are an unfinished append too.
TEST_F(MutationLogFormatTest, AZeroFilledTailIsATornTail) {
  const std::vector<LogRecord> records = {Record(2, 1, 10), Record(2, 2, 20)};
  for (size_t zeros : {size_t{1}, size_t{39}, size_t{40}, size_t{4096}}) {
    Spill(path_, LogBytes(records) + std::string(zeros, '\0'));
    auto contents = Read();
    ASSERT_TRUE(contents.ok()) << zeros << ": " << contents.status();
    EXPECT_EQ(contents->records, records);
    EXPECT_EQ(contents->torn_tail_bytes, zeros);
    EXPECT_EQ(contents->torn_tail_records, 1u);
  }
}

// ------------------------------------------------------------------ corruption

TEST_F(MutationLogFormatTest, AFlippedByteInAMiddleRecordIsDataLossNamingItsOffset) {
  const std::vector<LogRecord> records = {Record(7, 1, 10), Record(7, 2, 50), Record(7, 3, 10)};
  const std::string full = LogBytes(records);
  const uint64_t middle_at = kLogFileHeaderBytes + RecordBytes(records[0]);
  for (uint64_t at = middle_at; at < middle_at + RecordBytes(records[1]); ++at) {
    SCOPED_TRACE(absl::StrCat("byte ", at));
    std::string bytes = full;
    bytes[at] ^= 0x01;
    Spill(path_, bytes);
    auto r = Read();
    ASSERT_EQ(r.status().code(), absl::StatusCode::kDataLoss) << r.status();
    const std::string message(r.status().message());
    EXPECT_THAT(message, HasSubstr("write-ahead log \"orders.gjwal\""));
    EXPECT_THAT(message, HasSubstr(absl::StrCat("the record at offset ", middle_at, " (")));
    // The header's first 32 bytes are checked by the header checksum: with them
    // damaged the sequence field cannot be trusted, so the message names the
    // record before it.
    EXPECT_THAT(message,
                HasSubstr(at < middle_at + 32 ? "(the record after sequence 1 of base version 7)"
                                              : "(sequence 2 of base version 7)"));
    EXPECT_THAT(message, HasSubstr(absl::StrCat("intact record follows at offset ",
                                                middle_at + RecordBytes(records[1]))));
    // Open refuses it too and leaves the file for an operator.
    EXPECT_EQ(Open().status().code(), absl::StatusCode::kDataLoss);
    EXPECT_EQ(Slurp(path_), bytes);
  }
  EXPECT_EQ(Metric("gpujoin_wal_failures_total", {{"reason", "corrupt"}}),
            double(RecordBytes(records[1])));
}

TEST_F(MutationLogFormatTest, ADamagedFirstRecordIsNamedAsTheFirst) {
  std::string bytes = LogBytes({Record(7, 1, 10), Record(7, 2, 10)});
  bytes[kLogFileHeaderBytes] ^= 0x01;
  Spill(path_, bytes);
  auto r = Read();
  ASSERT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(r.status().message(), HasSubstr("(the first record) is damaged"));
}

TEST_F(MutationLogFormatTest, BadFileHeadersAreDataLossAndNewerVersionsRefused) {
  const std::string good = LogBytes({Record(1, 1, 4)});
  auto edited = [&](size_t at, uint8_t value) {
    std::string b = good;
    b[at] = char(value);
    return b;
  };
  const std::pair<std::string, std::string> bad[] = {
      {"", "0 bytes, less than its 16-byte header"},
      {good.substr(0, 5), "5 bytes, less than its 16-byte header"},
      {good.substr(0, 15), "15 bytes"},
      {edited(0, 'X'), "bad file header (not a gpujoin write-ahead log)"},
      {edited(7, 1), "bad file header (not a gpujoin write-ahead log)"},
      {edited(8, 0), "bad file header (format version 0"},
      {edited(12, 1), "reserved 1"},
      {"GJSNAP\r\n" + good.substr(8), "not a gpujoin write-ahead log"},
  };
  for (const auto& [bytes, expected] : bad) {
    SCOPED_TRACE(expected);
    Spill(path_, bytes);
    auto r = Read();
    ASSERT_EQ(r.status().code(), absl::StatusCode::kDataLoss) << r.status();
    EXPECT_THAT(r.status().message(), HasSubstr("write-ahead log \"orders.gjwal\""));
    EXPECT_THAT(r.status().message(), HasSubstr(expected));
    EXPECT_EQ(Open().status().code(), absl::StatusCode::kDataLoss);
    EXPECT_EQ(Slurp(path_), bytes);
  }
  Spill(path_, edited(8, 2));
  auto r = Read();
  ASSERT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(r.status().message(),
              HasSubstr("format version 2 is not supported: this gpujoind reads format "
                        "version 1"));
  EXPECT_EQ(Open().status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Metric("gpujoin_wal_failures_total", {{"reason", "version"}}), 1);
}

// Sets the payload length of the record at `at` in `bytes` and, with `reseal`,
// recomputes its header checksum so that the header is intact.
void SetLength(std::string& bytes, size_t at, uint32_t length, bool reseal) {
  std::memcpy(&bytes[at + 4], &length, 4);
  if (reseal) {
    const uint64_t h = XxHash64(&bytes[at], 24);
    std::memcpy(&bytes[at + 24], &h, 8);
  }
}

TEST_F(MutationLogFormatTest, DeclaredLengthsAreBoundedBeforeAnythingIsAllocated) {
  const std::vector<LogRecord> records = {Record(1, 1, 10), Record(1, 2, 5000), Record(1, 3, 10)};
  const std::string full = LogBytes(records);
  const size_t second = kLogFileHeaderBytes + RecordBytes(records[0]);
  // An intact record over the caller's limit: DATA_LOSS naming the limit.
  Spill(path_, full);
  auto r = Read(1000);
  ASSERT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(r.status().message(),
              HasSubstr(absl::StrCat("record at offset ", second,
                                     " (sequence 2 of base version 1) declares a payload of 5000 "
                                     "bytes, more than the limit of 1000 bytes")));
  EXPECT_TRUE(Read(5000).ok());
  // A damaged length of 4 GiB in the middle: the header checksum catches it.
  std::string bytes = full;
  SetLength(bytes, second, 0xffffffffu, /*reseal=*/false);
  Spill(path_, bytes);
  r = Read();
  ASSERT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(r.status().message(), HasSubstr("bad record header"));
  // An intact last header claiming 4 GiB the file does not hold: a torn append.
  bytes = LogBytes({records[0], records[1]});
  SetLength(bytes, second, 0xffffffffu, /*reseal=*/true);
  Spill(path_, bytes);
  auto contents = Read();
  ASSERT_TRUE(contents.ok()) << contents.status();
  EXPECT_EQ(contents->records, std::vector<LogRecord>{records[0]});
  EXPECT_EQ(contents->torn_tail_records, 1u);
}

TEST_F(MutationLogFormatTest, OnlyRegularFilesAreRead) {
  ASSERT_EQ(::mkfifo(path_.c_str(), 0600), 0);
  auto r = Read();
  ASSERT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(r.status().message(), HasSubstr("is a FIFO"));
  EXPECT_EQ(Open().status().code(), absl::StatusCode::kFailedPrecondition);
  std::filesystem::remove(path_);
  Spill(dir_ / "elsewhere", LogBytes({}));
  std::filesystem::create_symlink(dir_ / "elsewhere", path_);
  r = Read();
  ASSERT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(r.status().message(), HasSubstr("symbolic link"));
  EXPECT_EQ(Open().status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace gpujoin::server
