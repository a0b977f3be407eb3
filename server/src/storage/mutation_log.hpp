// MutationLog: the writer of one mutable index's write-ahead log
// (`<name>.gjwal` under --data-dir; mutation_log_format.hpp has the format and
// the reader). A Mutate batch is appended (write(2), no fsync) and then made
// durable (Sync) according to --wal-sync before it is acknowledged:
//
// - always: Sync fsyncs, with group commit. At most one fsync runs at a time;
//   it covers every record appended before it began. A caller whose record a
//   finished fsync covers returns at once; callers arriving while one runs
//   wait for it, and then one of them starts the next, which covers them all.
// - batch-ms:N: a thread of the log fsyncs, at most once every N ms, whenever
//   something was appended since its last fsync (the first record after a
//   quiet spell at once); Sync waits for the fsync covering its record.
// - off: Sync returns at once and never fsyncs (reporting the record as not
//   durable); the OS writes the file back. Creating and compacting the file
//   still fsync, so the file and its header never vanish.
//
// An fsync that fails makes the log failed for good (after a failed fsync the
// kernel may have dropped the dirty pages, so nothing written can be trusted
// to reach the disk): that Sync and every later Append, Sync and Rewrite return
// INTERNAL naming the file, and the caller stops accepting mutations for the
// index. A failed append is truncated away, leaving the log as it was.
//
// Threads: Append, Rewrite and Remove are called by one thread at a time (the
// caller serializes them); Sync and bytes() may be called from any thread at
// any time, concurrently with them.
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpujoin/server/config.hpp"
#include "storage/data_dir.hpp"
#include "storage/mutation_log_format.hpp"
#include "storage/mutation_log_metrics.hpp"

namespace gpujoin::server {

/// The system calls the log makes on its files, replaceable so that tests can
/// inject short writes and failed truncates and fsyncs. pwrite, ftruncate and
/// fsync follow the system calls' contract (-1 and errno on failure);
/// sync_dir is detail::SyncDir (data_dir.hpp).
struct MutationLogIo {
  std::function<ssize_t(int fd, const void* data, size_t bytes, off_t offset)> pwrite = ::pwrite;
  std::function<int(int fd, off_t length)> ftruncate = ::ftruncate;
  std::function<int(int fd)> fsync = ::fsync;
  std::function<absl::Status(const std::string& dir)> sync_dir = detail::SyncDir;
};

/// The temporary file beside `path` that creating and compacting the log
/// write before renaming it over `path`: `.<file name>.tmp` in the same
/// directory. A leftover one (a crash mid-rename) is never read.
std::string MutationLogTempPath(const std::string& path);

/// The write-ahead log of one index, open for appending.
class MutationLog {
 public:
  /// Opens the log at `path` (a file `<name>.gjwal` under --data-dir; messages
  /// name only the file name). A missing file is created with its header
  /// (written to MutationLogTempPath(path), fsync'd, renamed over `path`, the
  /// directory fsync'd, so a crash never leaves a file without its header). An
  /// existing one is scanned (the caller has read and replayed it with
  /// ReadMutationLog already): a torn tail is truncated away (fsync'd,
  /// counted in gpujoin_wal_torn_tail_records_total) and appends continue after
  /// the last valid record. Errors: ReadMutationLog's for an existing file
  /// (the file is then left as it is), RESOURCE_EXHAUSTED / INTERNAL for I/O.
  /// `metrics` (may be null) outlives the log; `index_name` labels its series.
  /// `io` replaces the writes, truncates and fsyncs (tests).
  static absl::StatusOr<std::unique_ptr<MutationLog>> Open(std::string path, WalSyncPolicy policy,
                                                           MutationLogMetrics* metrics,
                                                           std::string index_name,
                                                           MutationLogIo io = {});

  /// Stops the batch-ms thread and, unless the policy is off, fsyncs what was
  /// appended since the last fsync (a clean shutdown loses nothing). No call
  /// may be running.
  ~MutationLog();

  MutationLog(const MutationLog&) = delete;
  MutationLog& operator=(const MutationLog&) = delete;

  /// Writes `record` at the end of the log (one write(2), no fsync) and returns
  /// its ticket for Sync: tickets increase with every append (they count the
  /// bytes appended through this object, so they stay valid across Rewrite).
  /// A write that fails or comes up short is truncated away, leaving the log as
  /// it was: RESOURCE_EXHAUSTED (ENOSPC/EDQUOT) or INTERNAL naming the file
  /// (the log stays usable unless the truncation failed too, which makes it
  /// failed). INVALID_ARGUMENT (nothing written) for a payload over
  /// kMaxLogPayloadBytes or a sequence not above the log's last one of the same
  /// base version (the reader would refuse the file); INTERNAL when the log
  /// has failed, FAILED_PRECONDITION after Remove.
  absl::StatusOr<uint64_t> Append(const LogRecord& record);

  /// Blocks until the record of `ticket` (from Append) is durable as the
  /// policy says (see the file comment). Returns true when an fsync covers the
  /// record, false under --wal-sync=off (written to the OS, not fsync'd).
  /// INTERNAL naming the file when an fsync failed (this one or an earlier
  /// one: the log is failed), FAILED_PRECONDITION after Remove.
  absl::StatusOr<bool> Sync(uint64_t ticket);

  /// Bytes of the log file (header included).
  uint64_t bytes() const { return bytes_.load(std::memory_order_relaxed); }

  /// Compaction: writes the records `keep` returns true for, in order, to
  /// MutationLogTempPath(path), fsyncs it, renames it over the log, fsyncs the
  /// directory, and continues appending to the new file. Afterwards every
  /// ticket issued so far is durable (its record was kept, fsync'd, or
  /// deliberately dropped). A failure before the rename leaves the old log in
  /// use (RESOURCE_EXHAUSTED / INTERNAL naming the file); a failed directory
  /// fsync after it makes the log failed. Serialized with Append by the
  /// caller; concurrent Sync calls stay correct.
  absl::Status Rewrite(const std::function<bool(const LogRecord&)>& keep);

  /// Deletes the log file (the index was dropped or rebuilt) and its index's
  /// gpujoin_wal_bytes series. Waiting and later Sync, Append and Rewrite calls
  /// return FAILED_PRECONDITION. INTERNAL when the unlink fails.
  absl::Status Remove();

  const std::string& path() const { return path_; }
  const WalSyncPolicy& policy() const { return policy_; }

 private:
  // An open file descriptor, closed when its last holder lets go: an fsync
  // running while Rewrite swaps files keeps the old one open.
  struct File {
    explicit File(int fd) : fd(fd) {}
    ~File();
    File(const File&) = delete;
    File& operator=(const File&) = delete;
    const int fd;
  };
  using Clock = std::chrono::steady_clock;

  MutationLog(std::string path, WalSyncPolicy policy, MutationLogMetrics* metrics,
              std::string index_name, MutationLogIo io, std::shared_ptr<File> file, uint64_t bytes,
              std::map<uint64_t, uint64_t> last_sequence);

  /// Runs one fsync of the current file covering every ticket appended so far,
  /// with mu_ released while it runs. Requires `lock` to hold mu_ and no fsync
  /// to be running.
  void FsyncLocked(std::unique_lock<std::mutex>& lock);
  /// The batch-ms thread: waits for appends, fsyncs at most every batch_ms.
  void BatchLoop();
  /// Marks the log failed with `status` and wakes every waiter. Requires mu_.
  void FailLocked(absl::Status status);
  /// Counts a failure in the metrics (when there are any).
  void CountFailure(std::string_view reason);
  /// Sets the gpujoin_wal_bytes series (when there are metrics).
  void PublishBytes();

  const std::string path_;
  const std::string dir_;
  const std::string file_name_;  // what messages name
  const WalSyncPolicy policy_;
  MutationLogMetrics* const metrics_;
  const std::string index_name_;
  const MutationLogIo io_;

  // Owned by the appending thread (Append, Rewrite, Remove are serialized).
  std::map<uint64_t, uint64_t> last_sequence_;  // per base version, in the file
  std::atomic<uint64_t> bytes_;                 // the file's size; read by bytes()

  std::mutex mu_;
  std::condition_variable cv_;    // an fsync finished, the log failed, or stop_
  std::condition_variable work_;  // the batch thread: something appended, or stop_
  std::shared_ptr<File> file_;    // the file appends go to
  uint64_t appended_ = 0;         // the last ticket issued
  uint64_t synced_ = 0;           // every ticket up to this one is durable
  bool syncing_ = false;          // an fsync is running
  absl::Status failed_;           // not OK: the log is failed or removed
  bool stop_ = false;             // the batch thread must exit
  Clock::time_point last_fsync_start_{};
  std::thread batch_thread_;
};

}  // namespace gpujoin::server
