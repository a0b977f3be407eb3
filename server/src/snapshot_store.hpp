// Durable indexes (--data-dir, issue 23; docs/operations.md "Snapshots"): the
// snapshot files of the live indexes, written in the background after every
// build, deleted on drop, loaded back at start; and the explicit SaveIndex /
// LoadIndex of a file under the data dir.
//
// Writes run on one thread of their own from the installed version (a
// shared_ptr keeps it alive; queries never wait): export the index image, write
// `.<name>.gjsnap.tmp-<version>` beside the snapshot, fsync it, rename it over
// `<name>.gjsnap`, fsync the directory. The previous snapshot stays until the
// rename. A rebuild during a write supersedes it: the older write stops at its
// next check and its temporary file is removed; only the newest version is
// written. A drop cancels pending and running writes and deletes the snapshot.
// A failure (the --max-snapshot-bytes limit, an I/O error) leaves the index
// serving and the old snapshot in place, is logged and counted.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "gpujoin/engine/backend.hpp"
#include "gpujoin/server/index_registry.hpp"
#include "gpujoin/server/memory_budget.hpp"
#include "gpujoin/server/metrics.hpp"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace gpujoin::server {

/// How the store works (gpujoind flags).
struct SnapshotStoreOptions {
  /// --data-dir: where `<name>.gjsnap` files live (created when missing).
  std::string data_dir;
  /// --max-snapshot-bytes: the most bytes the data dir's files may take,
  /// counted before each write (the files there, the old snapshot of the same
  /// index included, plus the new one); 0 = no limit.
  uint64_t max_bytes = 0;
  /// --snapshot-test-write-delay-ms (tests only): sleep this long after every
  /// MiB written, so that a test can kill the server during a write.
  uint32_t test_write_delay_ms = 0;
  /// --snapshot-test-load-delay-ms (tests only): sleep this long before each
  /// start-up load, so that a test sees the server while it loads.
  uint32_t test_load_delay_ms = 0;
  /// Snapshots loaded at once at start.
  unsigned load_threads = 4;
};

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

/// What SaveIndex wrote.
struct SavedSnapshot {
  std::string file;
  uint64_t bytes = 0;
  uint64_t version = 0;
  double seconds = 0;
};

/// What the start-up load did.
struct WarmStartReport {
  uint64_t loaded = 0;
  uint64_t skipped = 0;
  uint64_t bytes = 0;
  double seconds = 0;
};

class SnapshotStore {
 public:
  /// Creates the data dir when missing (FAILED_PRECONDITION naming --data-dir
  /// when it cannot be created or written) and starts the writer thread.
  /// `backend`, `budget` and `registry` outlive the store.
  static absl::StatusOr<std::unique_ptr<SnapshotStore>> Open(SnapshotStoreOptions options,
                                                             engine::Backend* backend,
                                                             MemoryBudget* budget,
                                                             prometheus::Registry& registry);
  /// Finishes the write in progress and those pending, then stops.
  ~SnapshotStore();

  const std::string& data_dir() const { return options_.data_dir; }

  /// Queues a background write of `version` (just installed); a pending or
  /// running write of an older version of the name is superseded. Never blocks
  /// on I/O.
  void Schedule(std::shared_ptr<const IndexVersion> version);
  /// The name was dropped: cancels its writes and deletes its snapshot.
  void Forget(const std::string& name);

  /// Writes `version` to `file` (a plain file name under the data dir, checked
  /// by the caller) now, on the calling thread. RESOURCE_EXHAUSTED for the size
  /// limit or a full disk, INTERNAL for other I/O errors; for the index's own
  /// `<name>.gjsnap`, ABORTED when the name is rebuilt or dropped meanwhile
  /// (nothing renamed: a dropped index's file is not brought back).
  absl::StatusOr<SavedSnapshot> Save(const IndexVersion& version, const std::string& file);

  /// Reads `file` (a plain file name under the data dir) into a new version
  /// named `name` (not installed), its memory reserved in the budget before
  /// anything is allocated (RESOURCE_EXHAUSTED naming the budget). Errors of
  /// SnapshotReader (DATA_LOSS, OUT_OF_RANGE, FAILED_PRECONDITION, NOT_FOUND).
  /// The file is read and verified on `read_threads` threads (0: every core,
  /// as for one index loaded alone).
  absl::StatusOr<std::shared_ptr<IndexVersion>> Load(const std::string& file,
                                                     const std::string& name,
                                                     unsigned read_threads = 0);

  /// Start-up: removes partial writes left by an earlier process, then loads
  /// every `<name>.gjsnap` (load_threads at a time, the cores shared among
  /// them for reading) and installs it in
  /// `registry` (calling `installed` for each); a snapshot that fails to verify,
  /// does not fit the budget or is not a valid name is skipped, logged and
  /// counted, never half-loaded.
  WarmStartReport LoadAll(IndexRegistry& registry,
                          const std::function<void(const IndexVersion&)>& installed);

  /// Blocks until no write is pending or running (tests, shutdown).
  void WaitIdle();

  SnapshotMetrics& metrics() { return metrics_; }

 private:
  struct Job {
    std::shared_ptr<const IndexVersion> version;
    uint64_t generation = 0;
  };

  SnapshotStore(SnapshotStoreOptions options, engine::Backend* backend, MemoryBudget* budget,
                prometheus::Registry& registry);
  void WriterLoop();
  /// Writes one job (on the writer thread).
  void RunJob(const std::string& name, const Job& job);
  /// Writes `version` to `final_name` under the data dir through a temporary
  /// file. `still_current` is called with mu_ held, during the write and right
  /// before the rename (false: superseded, CANCELLED).
  absl::StatusOr<uint64_t> WriteFile(const IndexVersion& version, const std::string& final_name,
                                     const std::function<bool()>& still_current);
  /// Records a written snapshot of `name` in the metrics, unless the name was
  /// dropped since `generation`: a drop removes the name's series, and a write
  /// that finished just before it must not bring them back.
  void RecordWrite(const std::string& name, uint64_t generation, uint64_t bytes, double seconds);
  /// Bytes of the files in the data dir.
  uint64_t DirBytes() const;
  std::string PathOf(const std::string& file) const;

  SnapshotStoreOptions options_;
  engine::Backend* backend_;
  MemoryBudget* budget_;
  SnapshotMetrics metrics_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, Job> pending_;          // the newest version per name
  std::map<std::string, uint64_t> generation_;  // bumped by Schedule and Forget
  std::map<std::string, uint64_t> dropped_at_;  // the generation of the name's last Forget
  std::string writing_;                         // the name being written, or ""
  bool stop_ = false;
  std::atomic<uint64_t> temp_sequence_{0};
  std::thread writer_;
};

}  // namespace gpujoin::server
