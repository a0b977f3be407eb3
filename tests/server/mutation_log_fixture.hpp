// The write-ahead log tests' fixture (mutation_log_test.cpp,
// mutation_log_format_test.cpp, mutation_log_fault_test.cpp): a log under a
// per-test directory, records with payloads that depend on their sequence, a
// log's bytes built directly, and the metrics' values.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "prometheus/registry.h"
#include "storage/mutation_log.hpp"
#include "storage/mutation_log_format.hpp"
#include "storage/mutation_log_metrics.hpp"

namespace gpujoin::server::mutation_log_testing {

using Mode = WalSyncPolicy::Mode;

inline constexpr uint64_t kLimit = uint64_t{1} << 20;  // max_record_bytes of the reads here
inline const WalSyncPolicy kAlways{Mode::kAlways, 0};
inline const WalSyncPolicy kOff{Mode::kOff, 0};

// A record whose payload (of `bytes` bytes) depends on its sequence.
inline LogRecord Record(uint64_t base_version, uint64_t sequence, size_t bytes) {
  LogRecord r{base_version, sequence, std::string(bytes, '\0')};
  uint64_t x = sequence * 0x9E3779B97F4A7C15ull + bytes;
  for (char& c : r.payload) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    c = char(x);
  }
  return r;
}

inline uint64_t RecordBytes(const LogRecord& r) { return kLogRecordHeaderBytes + r.payload.size(); }

// The file bytes of `records` as a log.
inline std::string LogBytes(const std::vector<LogRecord>& records) {
  std::string out = EncodeLogFileHeader();
  for (const LogRecord& r : records) EncodeLogRecord(r, out);
  return out;
}

// The value of the series `name`{labels} in `registry` (a histogram's sample
// count), NaN when absent.
inline double MetricValue(prometheus::Registry& registry, const std::string& name,
                          const std::map<std::string, std::string>& labels = {}) {
  for (const prometheus::MetricFamily& family : registry.Collect()) {
    if (family.name != name) continue;
    for (const prometheus::ClientMetric& m : family.metric) {
      std::map<std::string, std::string> have;
      for (const auto& label : m.label) have[label.name] = label.value;
      if (have != labels) continue;
      switch (family.type) {
        case prometheus::MetricType::Counter:
          return m.counter.value;
        case prometheus::MetricType::Gauge:
          return m.gauge.value;
        case prometheus::MetricType::Histogram:
          return double(m.histogram.sample_count);
        default:
          return NAN;
      }
    }
  }
  return NAN;
}

class MutationLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static std::atomic<int> n{0};
    dir_ = std::filesystem::temp_directory_path() /
           absl::StrCat("gpujoin_mutation_log_", ::getpid(), "_", n.fetch_add(1));
    std::filesystem::create_directories(dir_);
    path_ = (dir_ / "orders.gjwal").string();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  absl::StatusOr<std::unique_ptr<MutationLog>> Open(WalSyncPolicy policy = kAlways,
                                                    MutationLogIo io = {}) {
    return MutationLog::Open(path_, policy, &metrics_, "orders", std::move(io));
  }

  // Appends and syncs `records` through a fresh log.
  void Write(const std::vector<LogRecord>& records, WalSyncPolicy policy = kOff) {
    auto log = Open(policy);
    ASSERT_TRUE(log.ok()) << log.status();
    for (const LogRecord& r : records) {
      auto ticket = (*log)->Append(r);
      ASSERT_TRUE(ticket.ok()) << ticket.status();
      ASSERT_TRUE((*log)->Sync(*ticket).ok());
    }
  }

  absl::StatusOr<LogContents> Read(uint64_t limit = kLimit) {
    return ReadMutationLog(path_, limit);
  }

  double Metric(const std::string& name, const std::map<std::string, std::string>& labels = {}) {
    return MetricValue(registry_, name, labels);
  }

  std::filesystem::path dir_;
  std::string path_;
  prometheus::Registry registry_;
  MutationLogMetrics metrics_{registry_};
};

// Records of the sizes that matter: empty, one byte, around the header size,
// larger than the reader's 1 MiB chunk.
inline std::vector<LogRecord> SampleRecords() {
  std::vector<LogRecord> out;
  uint64_t sequence = 0;
  for (size_t bytes : {size_t{0}, size_t{1}, size_t{39}, size_t{40}, size_t{1000},
                       (size_t{1} << 20) + 77, size_t{5}}) {
    out.push_back(Record(7, ++sequence, bytes));
  }
  return out;
}

}  // namespace gpujoin::server::mutation_log_testing
