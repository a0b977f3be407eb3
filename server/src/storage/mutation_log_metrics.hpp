// The write-ahead log metrics (docs/metrics.md, "Write-ahead logs"): per-index
// log bytes, records and bytes appended, fsyncs and their durations, records
// replayed at start, torn tails dropped, and failures by reason.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace gpujoin::server {

/// The write-ahead log metrics (docs/metrics.md, "Write-ahead logs"). Every
/// method may be called from any thread.
class MutationLogMetrics {
 public:
  /// Registers the families in `registry` (which outlives this), with every
  /// failure reason at 0.
  explicit MutationLogMetrics(prometheus::Registry& registry);

  /// gpujoin_wal_bytes{index} = `bytes` (the series is created when missing).
  void SetBytes(const std::string& index, uint64_t bytes);
  /// Removes `index`'s series (its log was deleted).
  void Remove(const std::string& index);
  /// One record of `bytes` (header included) appended.
  void Appended(uint64_t bytes);
  /// One fsync that made appended records durable, taking `seconds`.
  void Fsynced(double seconds);
  /// `records` read back from a log and applied to its index at start.
  void Replayed(uint64_t records);
  /// `records` of a torn tail dropped (truncated) when a log was opened.
  void TornTail(uint64_t records);
  /// gpujoin_wal_failures_total{reason} += 1; `reason` is one of
  /// kMutationLogFailureReasons.
  void Failed(std::string_view reason);

 private:
  std::mutex mu_;
  prometheus::Family<prometheus::Gauge>* bytes_;
  prometheus::Counter* appended_records_;
  prometheus::Counter* appended_bytes_;
  prometheus::Counter* fsyncs_;
  prometheus::Histogram* fsync_seconds_;
  prometheus::Counter* replayed_;
  prometheus::Counter* torn_tail_;
  prometheus::Family<prometheus::Counter>* failures_;
  std::map<std::string, prometheus::Gauge*> per_index_;  // guarded by mu_
};

/// The `reason` label values of gpujoin_wal_failures_total: `disk_full`
/// (ENOSPC/EDQUOT writing a record or a compacted log), `io_error` (another
/// write, truncate, open or rename error), `fsync` (an fsync failed: the log
/// stops), `corrupt` (a log that cannot be read: bad header, damage in the
/// middle, sequences out of order, a record over the limit), `version` (a log
/// of a newer format).
inline constexpr std::string_view kMutationLogFailureReasons[] = {"disk_full", "io_error", "fsync",
                                                                  "corrupt", "version"};

/// The reason label of an error of ReadMutationLog or the log's writer:
/// RESOURCE_EXHAUSTED = disk_full, DATA_LOSS = corrupt, FAILED_PRECONDITION =
/// version, anything else io_error (fsync failures are labelled where they
/// happen).
std::string_view MutationLogFailureReason(const absl::Status& status);

}  // namespace gpujoin::server
