#include "storage/snapshot_metrics.hpp"

#include <vector>

namespace gpujoin::server {
namespace {

const std::vector<double>& DurationBuckets() {
  static const std::vector<double> b = {0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1,
                                        2.5,   5,    10,   30,  60,   120, 300};
  return b;
}

}  // namespace

SnapshotMetrics::SnapshotMetrics(prometheus::Registry& r) {
  bytes_ = &prometheus::BuildGauge()
                .Name("gpujoin_snapshot_bytes")
                .Help("Bytes of the index's snapshot file under --data-dir.")
                .Register(r);
  last_success_ = &prometheus::BuildGauge()
                       .Name("gpujoin_snapshot_last_success_timestamp_seconds")
                       .Help("Unix time of the index's last completed snapshot write.")
                       .Register(r);
  duration_ = &prometheus::BuildHistogram()
                   .Name("gpujoin_snapshot_duration_seconds")
                   .Help("Wall time of one snapshot write (export, write, fsync, rename).")
                   .Register(r)
                   .Add({}, DurationBuckets());
  failures_ = &prometheus::BuildCounter()
                   .Name("gpujoin_snapshot_failures_total")
                   .Help(
                       "Snapshot writes that failed, by reason (size_limit, copy_limit, "
                       "disk_full, io_error, export).")
                   .Register(r);
  for (const char* reason : {"size_limit", "copy_limit", "disk_full", "io_error", "export"}) {
    failures_->Add({{"reason", reason}});
  }
  superseded_ = &prometheus::BuildCounter()
                     .Name("gpujoin_snapshot_superseded_total")
                     .Help("Snapshot writes abandoned for a newer version or a drop.")
                     .Register(r)
                     .Add({});
  load_duration_ = &prometheus::BuildHistogram()
                        .Name("gpujoin_snapshot_load_duration_seconds")
                        .Help("Wall time of loading one snapshot (read, verify, import).")
                        .Register(r)
                        .Add({}, DurationBuckets());
  load_failures_ = &prometheus::BuildCounter()
                        .Name("gpujoin_snapshot_load_failures_total")
                        .Help(
                            "Snapshots not loaded, by reason (version, truncated, corrupt, "
                            "budget, invalid, unsupported, not_regular_file, io_error).")
                        .Register(r);
  for (const char* reason : {"version", "truncated", "corrupt", "budget", "invalid", "unsupported",
                             "not_regular_file", "io_error"}) {
    load_failures_->Add({{"reason", reason}});
  }
  loaded_ = &prometheus::BuildCounter()
                 .Name("gpujoin_snapshot_loads_total")
                 .Help("Snapshots loaded (at start and by LoadIndex).")
                 .Register(r)
                 .Add({});
  loads_pending_ = &prometheus::BuildGauge()
                        .Name("gpujoin_snapshot_loads_pending")
                        .Help("Snapshots the start-up load has yet to finish.")
                        .Register(r)
                        .Add({});
}

std::pair<prometheus::Gauge*, prometheus::Gauge*>& SnapshotMetrics::SeriesLocked(
    const std::string& index) {
  auto it = per_index_.find(index);
  if (it == per_index_.end()) {
    it = per_index_
             .emplace(index, std::make_pair(&bytes_->Add({{"index", index}}),
                                            &last_success_->Add({{"index", index}})))
             .first;
  }
  return it->second;
}

void SnapshotMetrics::WriteSucceeded(const std::string& index, uint64_t bytes, double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& series = SeriesLocked(index);
  series.first->Set(double(bytes));
  series.second->Set(
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count());
  duration_->Observe(seconds);
}

void SnapshotMetrics::SnapshotLoaded(const std::string& index, uint64_t bytes, double written) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& series = SeriesLocked(index);
  series.first->Set(double(bytes));
  series.second->Set(written);
}

void SnapshotMetrics::WriteFailed(std::string_view reason) {
  failures_->Add({{"reason", std::string(reason)}}).Increment();
}

void SnapshotMetrics::WriteSuperseded() { superseded_->Increment(); }

void SnapshotMetrics::Remove(const std::string& index) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = per_index_.find(index);
  if (it == per_index_.end()) return;
  bytes_->Remove(it->second.first);
  last_success_->Remove(it->second.second);
  per_index_.erase(it);
}

void SnapshotMetrics::LoadSucceeded(double seconds) {
  load_duration_->Observe(seconds);
  loaded_->Increment();
}

void SnapshotMetrics::LoadFailed(std::string_view reason) {
  load_failures_->Add({{"reason", std::string(reason)}}).Increment();
}

void SnapshotMetrics::SetLoadsPending(uint64_t pending) { loads_pending_->Set(double(pending)); }

}  // namespace gpujoin::server
