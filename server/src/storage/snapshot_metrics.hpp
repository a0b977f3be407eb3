// The snapshot metrics (docs/metrics.md, "Snapshots"): writes, loads and their
// failures by reason, durations, and per-index snapshot bytes and ages.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace gpujoin::server {

/// The snapshot metrics (docs/metrics.md, "Snapshots").
class SnapshotMetrics {
 public:
  explicit SnapshotMetrics(prometheus::Registry& registry);
  /// A finished write of `bytes` for `index` that took `seconds`.
  void WriteSucceeded(const std::string& index, uint64_t bytes, double seconds);
  /// `index` was loaded from its snapshot of `bytes` written at Unix time
  /// `written`: its per-index series as if this process had written it.
  void SnapshotLoaded(const std::string& index, uint64_t bytes, double written);
  /// gpujoin_snapshot_failures_total{reason} += 1.
  void WriteFailed(std::string_view reason);
  /// gpujoin_snapshot_superseded_total += 1.
  void WriteSuperseded();
  /// Removes `index`'s series (its snapshot is gone).
  void Remove(const std::string& index);
  /// One snapshot loaded in `seconds`.
  void LoadSucceeded(double seconds);
  /// gpujoin_snapshot_load_failures_total{reason} += 1.
  void LoadFailed(std::string_view reason);
  /// gpujoin_snapshot_loads_pending.
  void SetLoadsPending(uint64_t pending);

 private:
  std::mutex mu_;
  prometheus::Family<prometheus::Gauge>* bytes_;
  prometheus::Family<prometheus::Gauge>* last_success_;
  prometheus::Histogram* duration_;
  prometheus::Family<prometheus::Counter>* failures_;
  prometheus::Counter* superseded_;
  prometheus::Histogram* load_duration_;
  prometheus::Family<prometheus::Counter>* load_failures_;
  prometheus::Counter* loaded_;
  prometheus::Gauge* loads_pending_;
  /// The per-index gauges (bytes, last success) of `index`. Requires mu_.
  std::pair<prometheus::Gauge*, prometheus::Gauge*>& SeriesLocked(const std::string& index);
  std::map<std::string, std::pair<prometheus::Gauge*, prometheus::Gauge*>> per_index_;
};

}  // namespace gpujoin::server
