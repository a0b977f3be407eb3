#include "storage/mutation_log_metrics.hpp"

#include <vector>

namespace gpujoin::server {
namespace {

// 50 us (an fsync absorbed by a battery-backed cache) to 1 s (a saturated disk).
const std::vector<double>& FsyncBuckets() {
  static const std::vector<double> b = {0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                                        0.01,    0.025,  0.05,    0.1,    0.25,  0.5,    1};
  return b;
}

}  // namespace

MutationLogMetrics::MutationLogMetrics(prometheus::Registry& r) {
  bytes_ = &prometheus::BuildGauge()
                .Name("gpujoin_wal_bytes")
                .Help("Bytes of the index's write-ahead log file under --data-dir.")
                .Register(r);
  appended_records_ = &prometheus::BuildCounter()
                           .Name("gpujoin_wal_appended_records_total")
                           .Help("Records (Mutate batches) appended to write-ahead logs.")
                           .Register(r)
                           .Add({});
  appended_bytes_ = &prometheus::BuildCounter()
                         .Name("gpujoin_wal_appended_bytes_total")
                         .Help("Bytes appended to write-ahead logs, record headers included.")
                         .Register(r)
                         .Add({});
  fsyncs_ = &prometheus::BuildCounter()
                 .Name("gpujoin_wal_fsyncs_total")
                 .Help("fsyncs that made appended write-ahead log records durable.")
                 .Register(r)
                 .Add({});
  fsync_seconds_ = &prometheus::BuildHistogram()
                        .Name("gpujoin_wal_fsync_seconds")
                        .Help("Wall time of one write-ahead log fsync.")
                        .Register(r)
                        .Add({}, FsyncBuckets());
  replayed_ = &prometheus::BuildCounter()
                   .Name("gpujoin_wal_replayed_records_total")
                   .Help("Write-ahead log records applied to their indexes at start.")
                   .Register(r)
                   .Add({});
  torn_tail_ = &prometheus::BuildCounter()
                    .Name("gpujoin_wal_torn_tail_records_total")
                    .Help("Unfinished records at the end of a write-ahead log, dropped on open.")
                    .Register(r)
                    .Add({});
  failures_ = &prometheus::BuildCounter()
                   .Name("gpujoin_wal_failures_total")
                   .Help(
                       "Write-ahead log failures, by reason (disk_full, io_error, fsync, "
                       "corrupt, version).")
                   .Register(r);
  for (std::string_view reason : kMutationLogFailureReasons) {
    failures_->Add({{"reason", std::string(reason)}});
  }
}

void MutationLogMetrics::SetBytes(const std::string& index, uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = per_index_.find(index);
  if (it == per_index_.end())
    it = per_index_.emplace(index, &bytes_->Add({{"index", index}})).first;
  it->second->Set(double(bytes));
}

void MutationLogMetrics::Remove(const std::string& index) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = per_index_.find(index);
  if (it == per_index_.end()) return;
  bytes_->Remove(it->second);
  per_index_.erase(it);
}

void MutationLogMetrics::Appended(uint64_t bytes) {
  appended_records_->Increment();
  appended_bytes_->Increment(double(bytes));
}

void MutationLogMetrics::Fsynced(double seconds) {
  fsyncs_->Increment();
  fsync_seconds_->Observe(seconds);
}

void MutationLogMetrics::Replayed(uint64_t records) { replayed_->Increment(double(records)); }

void MutationLogMetrics::TornTail(uint64_t records) { torn_tail_->Increment(double(records)); }

void MutationLogMetrics::Failed(std::string_view reason) {
  failures_->Add({{"reason", std::string(reason)}}).Increment();
}

std::string_view MutationLogFailureReason(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kResourceExhausted:
      return "disk_full";
    case absl::StatusCode::kDataLoss:
      return "corrupt";
    case absl::StatusCode::kFailedPrecondition:
      return "version";
    default:
      return "io_error";
  }
}

}  // namespace gpujoin::server
