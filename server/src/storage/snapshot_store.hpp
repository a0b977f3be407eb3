// Durable indexes (--data-dir; docs/operations.md "Snapshots"): the snapshot
// files of the live indexes, written in the background after every build or
// load, deleted on drop, loaded back at start; the explicit SaveIndex /
// LoadIndex of a file under the data dir; listing and deleting its files.
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
//
// What a restart serves is what was last installed: every install of a name
// (build or load) is followed by Schedule of that version, versions only grow
// (IndexRegistry numbers them), and a Schedule or Forget older than one already
// seen for the name is ignored, so writes land in install order whatever order
// the installing threads reach the store in. A load from the index's own file
// schedules too; its write is skipped when the file is still the one that was
// read (same inode, size and mtime: a write renames a new file over the name).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "storage/snapshot_format.hpp"
#include "storage/snapshot_metrics.hpp"
#include "storage/snapshot_reader.hpp"
#include "gpujoin/engine/backend.hpp"
#include "gpujoin/server/config.hpp"
#include "state/index_registry.hpp"
#include "state/memory_budget.hpp"
#include "observe/metrics.hpp"
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
  /// --max-copy-bytes: the most bytes the copies SaveIndex wrote (files that
  /// are not `<index>.gjsnap`) may take together, the new one included; 0 = no
  /// limit.
  uint64_t max_copy_bytes = kDefaultMaxCopyBytes;
  /// --snapshot-test-write-delay-ms (tests only): sleep this long after every
  /// MiB written, so that a test can kill the server during a write.
  uint32_t test_write_delay_ms = 0;
  /// --snapshot-test-load-delay-ms (tests only): sleep this long before each
  /// start-up load, so that a test sees the server while it loads.
  uint32_t test_load_delay_ms = 0;
  /// Snapshots loaded at once at start.
  unsigned load_threads = 4;
};

/// What SaveIndex wrote.
struct SavedSnapshot {
  std::string file;
  uint64_t bytes = 0;
  uint64_t version = 0;
  double seconds = 0;
};

/// One file under the data dir (ListFiles).
struct DataFileInfo {
  std::string file;
  uint64_t bytes = 0;
  int64_t modified_unix_millis = 0;
  /// The index a `<index>.gjsnap` file is the snapshot of; empty for a copy.
  std::string index;
};

/// The data dir's files (ListFiles): snapshots and copies, by name.
struct DataFiles {
  std::vector<DataFileInfo> files;
  uint64_t snapshot_bytes = 0;
  uint64_t copy_bytes = 0;
};

/// The file a SaveIndex of index `name` writes: empty = `<name>.gjsnap`; else a
/// plain name ([A-Za-z0-9_.-], not starting with ".", without ".gjsnap.tmp-")
/// that is either `<name>.gjsnap` or a copy not ending in ".gjsnap" (another
/// index's snapshot file would make a restart serve this index's data under
/// that name). INVALID_ARGUMENT naming `file` and both indexes otherwise.
absl::StatusOr<std::string> SaveFileOf(const std::string& file, const std::string& name);
/// The file a LoadIndex into `name` reads: empty = `<name>.gjsnap`; else a
/// plain name as for SaveFileOf (any snapshot or copy).
absl::StatusOr<std::string> LoadFileOf(const std::string& file, const std::string& name);

/// What the start-up load did.
struct WarmStartReport {
  uint64_t loaded = 0;
  /// Snapshots not loaded (damaged, not regular files, invalid names, budget).
  uint64_t skipped = 0;
  /// Other entries left alone (copies, other files).
  uint64_t ignored = 0;
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
  /// running write of an older version of the name is superseded, and a version
  /// older than one already scheduled or dropped is ignored. With `read_from`
  /// (a LoadIndex of the name's own file), the write is skipped while the file
  /// is still the one read. Never blocks on I/O.
  void Schedule(std::shared_ptr<const IndexVersion> version,
                std::optional<FileIdentity> read_from = std::nullopt);
  /// Queues a background write of the live `version` again: Mutate batches
  /// changed it since its last write (the write-ahead log's compaction,
  /// MutationLogs). Ignored when a newer version was scheduled or dropped.
  void Rewrite(std::shared_ptr<const IndexVersion> version);
  /// Called on the writer thread after each background write of a name's own
  /// snapshot succeeded, with the version written and the mutation sequence
  /// it holds. Set once, before the first Schedule.
  void SetOnWritten(
      std::function<void(const IndexVersion& version, uint64_t mutation_sequence)> on_written) {
    on_written_ = std::move(on_written);
  }
  /// The name's `dropped_version` was dropped: cancels its writes, deletes its
  /// snapshot and fails those waiting for it to be durable (ABORTED).
  void Forget(const std::string& name, uint64_t dropped_version);

  /// Calls `done` (on the writer thread, or at once) when the name's snapshot
  /// holds `version` or a later one (OK), when that write fails (its error; the
  /// index keeps serving), when the name is dropped (ABORTED) or the store
  /// stops (UNAVAILABLE).
  void WhenDurable(const std::string& name, uint64_t version,
                   std::function<void(absl::Status)> done);
  /// The version the name's snapshot file holds (0: none written or loaded).
  uint64_t DurableVersion(const std::string& name);

  /// The snapshots and copies in the data dir (regular files only; temporary
  /// files left out).
  DataFiles ListFiles();
  /// Deletes `file` (any name ListFiles gives: a plain name, no "/", not "." or
  /// "..", not a temporary file) and returns its size. NOT_FOUND when absent;
  /// FAILED_PRECONDITION for the snapshot of a live index (`is_live`, asked
  /// under the store's lock, or a write of it pending).
  absl::StatusOr<uint64_t> DeleteFile(const std::string& file,
                                      const std::function<bool(const std::string&)>& is_live);

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
  /// `read` (optional) receives the identity of the file as it was read.
  absl::StatusOr<std::shared_ptr<IndexVersion>> Load(const std::string& file,
                                                     const std::string& name,
                                                     unsigned read_threads = 0,
                                                     FileIdentity* read = nullptr);

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
    std::optional<FileIdentity> read_from;  // skip the write while the file is this one
    bool again = false;                     // Rewrite: write even if the version is durable
  };
  struct Waiter {
    uint64_t version = 0;
    std::function<void(absl::Status)> done;
  };
  using Callbacks = std::vector<std::pair<std::function<void(absl::Status)>, absl::Status>>;

  SnapshotStore(SnapshotStoreOptions options, engine::Backend* backend, MemoryBudget* budget,
                prometheus::Registry& registry);
  void WriterLoop();
  /// Writes one job (on the writer thread).
  void RunJob(const std::string& name, const Job& job);
  /// The name's file now holds `version`: records it and takes the waiters it
  /// satisfies into `out` (called outside mu_). Requires mu_.
  void MarkDurableLocked(const std::string& name, uint64_t version, Callbacks* out);
  /// Takes the waiters of `name` up to `version` (all: UINT64_MAX) into `out`
  /// with `status`. Requires mu_.
  void TakeWaitersLocked(const std::string& name, uint64_t version, const absl::Status& status,
                         Callbacks* out);
  static void Call(Callbacks& callbacks);
  /// Writes `version` to `final_name` under the data dir through a temporary
  /// file. `still_current` is called with mu_ held, during the write and right
  /// before the rename (false: superseded, CANCELLED).
  /// A `copy` counts against --max-copy-bytes. `renamed` is called with mu_
  /// held right after the rename.
  absl::StatusOr<uint64_t> WriteFile(const IndexVersion& version, const std::string& final_name,
                                     const std::function<bool()>& still_current, bool copy,
                                     const std::function<void()>& renamed,
                                     uint64_t* mutation_sequence = nullptr);
  /// Records a written snapshot of `name` in the metrics, unless the name was
  /// dropped since `generation`: a drop removes the name's series, and a write
  /// that finished just before it must not bring them back.
  void RecordWrite(const std::string& name, uint64_t generation, uint64_t bytes, double seconds);
  /// Bytes of the regular files in the data dir; `copies_only`: of the copies,
  /// without `except`.
  uint64_t DirBytes(bool copies_only = false, const std::string& except = "") const;
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
  std::map<std::string, uint64_t> latest_;      // newest version scheduled or dropped
  std::map<std::string, uint64_t> durable_;     // the version in <name>.gjsnap
  std::map<std::string, std::vector<Waiter>> waiters_;
  // The name's newest failed write (version and error) until a write of that
  // version or a later one succeeds, and the version its last drop removed: a
  // WhenDurable that comes after either is answered from them (the install
  // schedules the write before its caller can wait for it).
  std::map<std::string, std::pair<uint64_t, absl::Status>> failed_;
  std::map<std::string, uint64_t> forgotten_;
  bool stop_ = false;
  std::function<void(const IndexVersion&, uint64_t)> on_written_;
  std::atomic<uint64_t> temp_sequence_{0};
  std::thread writer_;
};

}  // namespace gpujoin::server
