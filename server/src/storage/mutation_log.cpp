// The write-ahead log's writer: appends, group-committed fsyncs (the caller's
// thread under --wal-sync=always, the log's own thread under batch-ms:N),
// compaction through a renamed temporary file, removal.
#include "storage/mutation_log.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

#include "absl/strings/str_cat.h"
#include "gpujoin/common/status_macros.hpp"
#include "gpujoin/server/logging.hpp"
#include "storage/data_dir.hpp"
#include "storage/snapshot_format.hpp"

namespace gpujoin::server {
namespace {

using detail::Errno;

// Compaction writes the kept records in pieces of about this many bytes.
constexpr size_t kRewriteChunkBytes = size_t{1} << 20;

// The directory a log lives in (fsync'd after a rename) and its file name
// (what messages name).
std::string DirOf(const std::string& path) {
  const std::string parent = std::filesystem::path(path).parent_path().string();
  return parent.empty() ? std::string(".") : parent;
}
std::string FileNameOf(const std::string& path) {
  return std::filesystem::path(path).filename().string();
}

// Writes all of `data` at `offset` of `fd`: a short write is continued, a
// write of 0 bytes or an error (errno) is returned naming `file`.
absl::Status WriteAll(const MutationLogIo& io, int fd, std::string_view data, uint64_t offset,
                      const std::string& file, std::string_view what) {
  while (!data.empty()) {
    const ssize_t w = io.pwrite(fd, data.data(), data.size(), off_t(offset));
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return Errno(what, file);
    if (w == 0) {
      return absl::InternalError(
          absl::StrCat(std::string(what), " \"", file, "\": wrote 0 of ", data.size(), " bytes"));
    }
    data.remove_prefix(size_t(w));
    offset += uint64_t(w);
  }
  return absl::OkStatus();
}

// Creates the log at `path` holding only its file header, atomically: the
// header goes to the temporary file, which is fsync'd and renamed over `path`,
// then the directory is fsync'd. Returns the open file.
absl::StatusOr<int> CreateLog(const std::string& path, const std::string& dir,
                              const std::string& file, const MutationLogIo& io) {
  const std::string temp = MutationLogTempPath(path);
  const int fd = ::open(temp.c_str(), O_CREAT | O_TRUNC | O_RDWR | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) return Errno("create write-ahead log", file);
  absl::Status s = WriteAll(io, fd, EncodeLogFileHeader(), 0, file, "create write-ahead log");
  if (s.ok() && io.fsync(fd) != 0) s = Errno("fsync of new write-ahead log", file);
  if (s.ok() && ::rename(temp.c_str(), path.c_str()) != 0) {
    s = Errno("rename new write-ahead log", file);
  }
  if (!s.ok()) {
    ::close(fd);
    ::unlink(temp.c_str());
    return s;
  }
  if (absl::Status d = io.sync_dir(dir); !d.ok()) {
    ::close(fd);
    return d;
  }
  return fd;
}

}  // namespace

std::string MutationLogTempPath(const std::string& path) {
  const std::filesystem::path p(path);
  return (p.parent_path() / ("." + p.filename().string() + ".tmp")).string();
}

MutationLog::File::~File() { ::close(fd); }

MutationLog::MutationLog(std::string path, WalSyncPolicy policy, MutationLogMetrics* metrics,
                         std::string index_name, MutationLogIo io, std::shared_ptr<File> file,
                         uint64_t bytes, std::map<uint64_t, uint64_t> last_sequence)
    : path_(std::move(path)),
      dir_(DirOf(path_)),
      file_name_(FileNameOf(path_)),
      policy_(policy),
      metrics_(metrics),
      index_name_(std::move(index_name)),
      io_(std::move(io)),
      last_sequence_(std::move(last_sequence)),
      bytes_(bytes),
      file_(std::move(file)) {
  if (policy_.mode == WalSyncPolicy::Mode::kBatch) {
    batch_thread_ = std::thread([this] { BatchLoop(); });
  }
}

absl::StatusOr<std::unique_ptr<MutationLog>> MutationLog::Open(std::string path,
                                                               WalSyncPolicy policy,
                                                               MutationLogMetrics* metrics,
                                                               std::string index_name,
                                                               MutationLogIo io) {
  const std::string file = FileNameOf(path);
  auto fail = [metrics](absl::Status s) {
    if (metrics != nullptr) metrics->Failed(MutationLogFailureReason(s));
    return s;
  };
  // O_NONBLOCK: a FIFO must not block the open; O_NOFOLLOW: no link is followed.
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0 && errno != ENOENT) {
    if (errno == ELOOP) {
      return fail(absl::FailedPreconditionError(absl::StrCat(
          "write-ahead log \"", file, "\" is a symbolic link, not a file the server wrote")));
    }
    return fail(Errno("open write-ahead log", file));
  }
  uint64_t bytes = kLogFileHeaderBytes;
  std::map<uint64_t, uint64_t> last_sequence;
  std::shared_ptr<File> holder;  // closes the descriptor on every return below
  if (fd < 0) {
    auto created = CreateLog(path, DirOf(path), file, io);
    if (!created.ok()) return fail(created.status());
    holder = std::make_shared<File>(*created);
  } else {
    holder = std::make_shared<File>(fd);
    struct stat st {};
    if (::fstat(fd, &st) != 0) return fail(Errno("stat write-ahead log", file));
    if (!S_ISREG(st.st_mode)) {
      return fail(absl::FailedPreconditionError(absl::StrCat("write-ahead log \"", file, "\" is ",
                                                             std::string(FileKindName(st.st_mode)),
                                                             ", not a file the server wrote")));
    }
    // Records are verified, not kept: the caller has replayed them already.
    auto scan =
        detail::ScanMutationLog(fd, uint64_t(st.st_size), file, kMaxLogPayloadBytes, nullptr);
    if (!scan.ok()) return fail(scan.status());
    if (scan->torn_tail_bytes > 0) {
      // Appends continue at the valid end: the torn bytes must go first, or the
      // next record would follow them and turn them into damage mid-file.
      if (io.ftruncate(fd, off_t(scan->valid_bytes)) != 0) {
        return fail(Errno("truncate the torn tail of write-ahead log", file));
      }
      if (io.fsync(fd) != 0) return fail(Errno("fsync of write-ahead log", file));
      if (metrics != nullptr) metrics->TornTail(scan->torn_tail_records);
      LogWarning(absl::StrCat("write-ahead log \"", file, "\": dropped a torn tail of ",
                              scan->torn_tail_bytes,
                              " bytes after the last valid record (an append that never "
                              "finished, so never acknowledged)"));
    }
    bytes = scan->valid_bytes;
    last_sequence = std::move(scan->last_sequence);
  }
  std::unique_ptr<MutationLog> log(
      new MutationLog(std::move(path), policy, metrics, std::move(index_name), std::move(io),
                      std::move(holder), bytes, std::move(last_sequence)));
  log->PublishBytes();
  return log;
}

MutationLog::~MutationLog() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_.notify_all();
  if (batch_thread_.joinable()) batch_thread_.join();
  if (policy_.mode == WalSyncPolicy::Mode::kOff) return;
  std::unique_lock<std::mutex> lock(mu_);
  if (failed_.ok() && appended_ > synced_) FsyncLocked(lock);
}

absl::StatusOr<uint64_t> MutationLog::Append(const LogRecord& record) {
  std::shared_ptr<File> file;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!failed_.ok()) return failed_;
    file = file_;
  }
  if (record.payload.size() > kMaxLogPayloadBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("write-ahead log \"", file_name_, "\": a record of ", record.payload.size(),
                     " payload bytes is over the format's limit of ", kMaxLogPayloadBytes));
  }
  if (!detail::SequenceFollows(last_sequence_, record.base_version, record.sequence)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "write-ahead log \"", file_name_, "\": sequence ", record.sequence, " of base version ",
        record.base_version, " is not above the log's last sequence of that base version (",
        last_sequence_[record.base_version], ")"));
  }
  std::string encoded;
  encoded.reserve(kLogRecordHeaderBytes + record.payload.size());
  EncodeLogRecord(record, encoded);
  const uint64_t start = bytes_.load(std::memory_order_relaxed);
  if (absl::Status s =
          WriteAll(io_, file->fd, encoded, start, file_name_, "append to write-ahead log");
      !s.ok()) {
    // Whatever part of the record reached the file goes, so the next append
    // starts where this one did.
    if (io_.ftruncate(file->fd, off_t(start)) != 0) {
      const absl::Status t = Errno("truncate write-ahead log", file_name_);
      const absl::Status failed = absl::InternalError(
          absl::StrCat(s.message(), "; the partial record could not be removed (", t.message(),
                       "): the log accepts no more mutations"));
      CountFailure("io_error");
      std::lock_guard<std::mutex> lock(mu_);
      FailLocked(failed);
      return failed;
    }
    CountFailure(MutationLogFailureReason(s));
    return s;
  }
  bytes_.store(start + encoded.size(), std::memory_order_relaxed);
  last_sequence_[record.base_version] = record.sequence;
  uint64_t ticket;
  {
    std::lock_guard<std::mutex> lock(mu_);
    appended_ += encoded.size();
    ticket = appended_;
  }
  if (policy_.mode == WalSyncPolicy::Mode::kBatch) work_.notify_one();
  if (metrics_ != nullptr) metrics_->Appended(encoded.size());
  PublishBytes();
  return ticket;
}

absl::StatusOr<bool> MutationLog::Sync(uint64_t ticket) {
  std::unique_lock<std::mutex> lock(mu_);
  if (ticket > appended_) {
    return absl::InvalidArgumentError(
        absl::StrCat("write-ahead log \"", file_name_, "\": ticket ", ticket, " was not issued"));
  }
  if (policy_.mode == WalSyncPolicy::Mode::kOff) {
    if (!failed_.ok()) return failed_;
    return false;
  }
  while (true) {
    if (!failed_.ok()) return failed_;
    if (synced_ >= ticket) return true;
    // always: no fsync running, so this caller runs the next one, which covers
    // it and everyone who appended before it starts. batch-ms: the log's
    // thread runs them.
    if (policy_.mode == WalSyncPolicy::Mode::kAlways && !syncing_) {
      FsyncLocked(lock);
      continue;
    }
    cv_.wait(lock);
  }
}

void MutationLog::FsyncLocked(std::unique_lock<std::mutex>& lock) {
  syncing_ = true;
  // Every ticket up to `target` was written before this point, so the fsync
  // below covers it.
  const uint64_t target = appended_;
  const std::shared_ptr<File> file = file_;
  last_fsync_start_ = Clock::now();
  lock.unlock();
  const auto start = Clock::now();
  const int rc = io_.fsync(file->fd);
  const int err = errno;
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  lock.lock();
  syncing_ = false;
  if (rc == 0) {
    synced_ = std::max(synced_, target);
    if (metrics_ != nullptr) metrics_->Fsynced(seconds);
    cv_.notify_all();
    return;
  }
  const absl::Status failed = absl::InternalError(
      absl::StrCat("fsync of write-ahead log \"", file_name_, "\" failed: ", std::strerror(err),
                   "; the log accepts no more mutations"));
  LogError(std::string(failed.message()));
  CountFailure("fsync");
  FailLocked(failed);
}

void MutationLog::BatchLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    work_.wait(lock, [this] { return stop_ || (failed_.ok() && appended_ > synced_); });
    if (stop_) return;
    // At most one fsync per batch_ms: the records appended meanwhile share it.
    const auto due = last_fsync_start_ + std::chrono::milliseconds(policy_.batch_ms);
    if (work_.wait_until(lock, due, [this] { return stop_; })) return;
    if (failed_.ok()) FsyncLocked(lock);
  }
}

void MutationLog::FailLocked(absl::Status status) {
  if (failed_.ok()) failed_ = std::move(status);
  cv_.notify_all();
  work_.notify_all();
}

void MutationLog::CountFailure(std::string_view reason) {
  if (metrics_ != nullptr) metrics_->Failed(reason);
}

void MutationLog::PublishBytes() {
  if (metrics_ != nullptr) metrics_->SetBytes(index_name_, bytes());
}

absl::Status MutationLog::Rewrite(const std::function<bool(const LogRecord&)>& keep) {
  std::shared_ptr<File> file;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!failed_.ok()) return failed_;
    file = file_;
  }
  auto fail = [this](absl::Status s) {
    CountFailure(MutationLogFailureReason(s));
    return s;
  };
  const std::string temp = MutationLogTempPath(path_);
  const int temp_fd =
      ::open(temp.c_str(), O_CREAT | O_TRUNC | O_RDWR | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (temp_fd < 0) return fail(Errno("create compacted write-ahead log", file_name_));
  auto temp_file = std::make_shared<File>(temp_fd);
  std::string pending = EncodeLogFileHeader();
  uint64_t written = 0;
  std::map<uint64_t, uint64_t> kept_last_sequence;
  auto flush = [&] {
    absl::Status s =
        WriteAll(io_, temp_fd, pending, written, file_name_, "write compacted write-ahead log");
    written += pending.size();
    pending.clear();
    return s;
  };
  // The file holds only what this log wrote and verified at Open, so the
  // format's own bound is the only limit needed.
  auto scan = detail::ScanMutationLog(
      file->fd, bytes(), file_name_, kMaxLogPayloadBytes, [&](LogRecord&& record) {
        if (!keep(record)) return absl::OkStatus();
        EncodeLogRecord(record, pending);
        kept_last_sequence[record.base_version] = record.sequence;
        return pending.size() >= kRewriteChunkBytes ? flush() : absl::OkStatus();
      });
  absl::Status s = scan.status();
  if (s.ok()) s = flush();
  if (s.ok() && io_.fsync(temp_fd) != 0) {
    s = Errno("fsync of compacted write-ahead log", file_name_);
  }
  if (s.ok() && ::rename(temp.c_str(), path_.c_str()) != 0) {
    s = Errno("rename compacted write-ahead log", file_name_);
  }
  if (!s.ok()) {
    ::unlink(temp.c_str());
    return fail(s);
  }
  if (absl::Status d = io_.sync_dir(dir_); !d.ok()) {
    // The rename may or may not survive a crash, so appends to either file
    // could be lost: stop here.
    const absl::Status failed = absl::InternalError(
        absl::StrCat("compacting write-ahead log \"", file_name_, "\": ", d.message(),
                     "; the log accepts no more mutations"));
    CountFailure("io_error");
    std::lock_guard<std::mutex> lock(mu_);
    FailLocked(failed);
    return failed;
  }
  bytes_.store(written, std::memory_order_relaxed);
  last_sequence_ = std::move(kept_last_sequence);
  {
    std::lock_guard<std::mutex> lock(mu_);
    file_ = std::move(temp_file);
    // Every record appended so far is in the new file (fsync'd above) or was
    // dropped on purpose.
    synced_ = std::max(synced_, appended_);
  }
  cv_.notify_all();
  PublishBytes();
  return absl::OkStatus();
}

absl::Status MutationLog::Remove() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    failed_ = absl::FailedPreconditionError(
        absl::StrCat("write-ahead log \"", file_name_, "\" was removed"));
    cv_.notify_all();
    work_.notify_all();
  }
  if (metrics_ != nullptr) metrics_->Remove(index_name_);
  if (::unlink(path_.c_str()) != 0 && errno != ENOENT) {
    return Errno("delete write-ahead log", file_name_);
  }
  ::unlink(MutationLogTempPath(path_).c_str());
  return io_.sync_dir(dir_);
}

}  // namespace gpujoin::server
