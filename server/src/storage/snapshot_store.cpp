#include "storage/snapshot_store.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "gpujoin/common/status_macros.hpp"
#include "gpujoin/server/logging.hpp"
#include "wire/names.hpp"
#include "storage/snapshot_format.hpp"

namespace gpujoin::server {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The marker of a temporary file: `.<name>.gjsnap.tmp-<version>`.
constexpr std::string_view kTempMarker = ".gjsnap.tmp-";

// `file` is what the message names: a file name under the data dir, never its
// path (messages reach clients).
absl::Status Errno(std::string_view what, const std::string& file) {
  const int err = errno;
  const std::string message =
      absl::StrCat(std::string(what), " \"", file, "\": ", std::strerror(err));
  return err == ENOSPC || err == EDQUOT ? absl::ResourceExhaustedError(message)
                                        : absl::InternalError(message);
}

// fsync of a directory, so that a rename or unlink in it is durable.
absl::Status SyncDir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Errno("open", "--data-dir");
  const int r = ::fsync(fd);
  const absl::Status s = r == 0 ? absl::OkStatus() : Errno("fsync", "--data-dir");
  ::close(fd);
  return s;
}

// `.<file>.gjsnap.tmp-<version>-<n>` (WriteFile): never ends in ".gjsnap", so
// that an index named ".x.gjsnap.tmp-1" keeps its snapshot.
bool IsTemporary(std::string_view file) {
  return file.starts_with(".") && file.find(kTempMarker) != std::string_view::npos &&
         !file.ends_with(kSnapshotSuffix);
}

// The index a `<index>.gjsnap` file belongs to, or "" (a copy, or a name that
// is not an index name).
std::string SnapshotIndexOf(std::string_view file) {
  if (!file.ends_with(kSnapshotSuffix)) return "";
  const std::string index(file.substr(0, file.size() - kSnapshotSuffix.size()));
  return ValidateIndexName(index, "file").ok() ? index : "";
}

// The rules every file name of a request follows: the index-name alphabet (no
// "/", not "." or ".."), not hidden, not a temporary file's name.
absl::Status ValidateFileName(const std::string& file) {
  GPUJOIN_RETURN_IF_ERROR(ValidateIndexName(file, "file"));
  if (file.starts_with(".")) {
    return absl::InvalidArgumentError(
        absl::StrCat("file: \"", file,
                     "\" starts with \".\"; such names are the server's temporary files"));
  }
  if (file.find(kTempMarker) != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("file: \"", file, "\" contains \"",
                                                   std::string(kTempMarker),
                                                   "\", the marker of the server's temporary files"));
  }
  return absl::OkStatus();
}

// What DeleteFile takes: any name ListFiles may list (files an operator put
// there too), so a plain name inside the directory and not a temporary file.
absl::Status ValidateListedName(const std::string& file) {
  if (file.empty() || file.size() > 255 || file == "." || file == ".." ||
      file.find('/') != std::string::npos || file.find('\0') != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("file: \"", absl::CEscape(file.substr(0, 255)),
                     "\" is not a file name under the data dir (1 to 255 bytes, no \"/\", not "
                     "\".\" or \"..\")"));
  }
  if (IsTemporary(file)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "file: \"", file, "\" is a temporary file of a snapshot write; the server removes it"));
  }
  return absl::OkStatus();
}

int64_t UnixMillis(const struct stat& st) {
  return int64_t(st.st_mtim.tv_sec) * 1000 + st.st_mtim.tv_nsec / 1000000;
}

const std::vector<double>& DurationBuckets() {
  static const std::vector<double> b = {0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1,
                                        2.5,   5,    10,   30,  60,   120, 300};
  return b;
}

}  // namespace

absl::StatusOr<std::string> SaveFileOf(const std::string& file, const std::string& name) {
  const std::string own = name + std::string(kSnapshotSuffix);
  if (file.empty() || file == own) return own;
  GPUJOIN_RETURN_IF_ERROR(ValidateFileName(file));
  if (file.ends_with(kSnapshotSuffix)) {
    const std::string other = file.substr(0, file.size() - kSnapshotSuffix.size());
    return absl::InvalidArgumentError(absl::StrCat(
        "file: \"", file, "\" is the snapshot file of index \"", other,
        "\", which a restart loads as that index; saving index \"", name,
        "\" there would replace it. Save to \"", own,
        "\" (empty file) or to a copy whose name does not end in \"",
        std::string(kSnapshotSuffix), "\""));
  }
  return file;
}

absl::StatusOr<std::string> LoadFileOf(const std::string& file, const std::string& name) {
  if (file.empty()) return name + std::string(kSnapshotSuffix);
  GPUJOIN_RETURN_IF_ERROR(ValidateFileName(file));
  return file;
}

// ---------------------------------------------------------------- metrics

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
                            "budget, invalid, not_regular_file, io_error).")
                        .Register(r);
  for (const char* reason :
       {"version", "truncated", "corrupt", "budget", "invalid", "not_regular_file", "io_error"}) {
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

// ---------------------------------------------------------------- store

SnapshotStore::SnapshotStore(SnapshotStoreOptions options, engine::Backend* backend,
                             MemoryBudget* budget, prometheus::Registry& registry)
    : options_(std::move(options)), backend_(backend), budget_(budget), metrics_(registry) {}

absl::StatusOr<std::unique_ptr<SnapshotStore>> SnapshotStore::Open(SnapshotStoreOptions options,
                                                                   engine::Backend* backend,
                                                                   MemoryBudget* budget,
                                                                   prometheus::Registry& registry) {
  std::error_code ec;
  std::filesystem::create_directories(options.data_dir, ec);
  if (ec || !std::filesystem::is_directory(options.data_dir)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--data-dir: \"", options.data_dir, "\" is not a directory that can be created",
        ec ? absl::StrCat(" (", ec.message(), ")") : std::string()));
  }
  if (::access(options.data_dir.c_str(), W_OK | X_OK) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("--data-dir: \"", options.data_dir, "\" is not writable"));
  }
  auto store = std::unique_ptr<SnapshotStore>(
      new SnapshotStore(std::move(options), backend, budget, registry));
  store->writer_ = std::thread([s = store.get()] { s->WriterLoop(); });
  return store;
}

SnapshotStore::~SnapshotStore() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (writer_.joinable()) writer_.join();
  Callbacks callbacks;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [name, waiters] : waiters_) {
      for (auto& w : waiters) {
        callbacks.emplace_back(std::move(w.done),
                               absl::UnavailableError(absl::StrCat(
                                   "the server stopped before the snapshot of index \"", name,
                                   "\" version ", w.version, " was written")));
      }
    }
    waiters_.clear();
  }
  Call(callbacks);
}

std::string SnapshotStore::PathOf(const std::string& file) const {
  return (std::filesystem::path(options_.data_dir) / file).string();
}

void SnapshotStore::Schedule(std::shared_ptr<const IndexVersion> version,
                             std::optional<FileIdentity> read_from) {
  std::shared_ptr<const IndexVersion> stale;  // freed outside the lock
  {
    std::lock_guard<std::mutex> lock(mu_);
    const std::string name = version->name;
    uint64_t& latest = latest_[name];
    if (version->version <= latest) {
      // Installed before a version (or a drop) the store has already seen: the
      // thread that installed it was overtaken; writing it would put an older
      // version under the name than the one serving.
      stale = std::move(version);
    } else {
      latest = version->version;
      const uint64_t generation = ++generation_[name];
      Job& job = pending_[name];
      stale = std::move(job.version);
      job = Job{std::move(version), generation, read_from};
    }
  }
  cv_.notify_all();
}

void SnapshotStore::Forget(const std::string& name, uint64_t dropped_version) {
  Callbacks callbacks;
  {
    std::lock_guard<std::mutex> lock(mu_);
    uint64_t& latest = latest_[name];
    latest = std::max(latest, dropped_version);
    dropped_at_[name] = ++generation_[name];
    pending_.erase(name);
    durable_.erase(name);
    failed_.erase(name);
    uint64_t& forgotten = forgotten_[name];
    forgotten = std::max(forgotten, dropped_version);
    const std::string file = name + std::string(kSnapshotSuffix);
    // Under mu_: a write of the name renames under mu_ too, after checking its
    // generation, so none can put the file back once it is gone.
    if (::unlink(PathOf(file).c_str()) == 0) {
      (void)SyncDir(options_.data_dir);
      LogInfo(absl::StrCat("deleted snapshot \"", file, "\" of dropped index \"", name, "\""));
    }
    metrics_.Remove(name);
    TakeWaitersLocked(name, UINT64_MAX,
                      absl::AbortedError(absl::StrCat("index \"", name,
                                                      "\" was dropped before its snapshot was "
                                                      "written")),
                      &callbacks);
  }
  Call(callbacks);
}

void SnapshotStore::WhenDurable(const std::string& name, uint64_t version,
                                std::function<void(absl::Status)> done) {
  absl::Status answer;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto durable = durable_.find(name);
    auto failed = failed_.find(name);
    auto forgotten = forgotten_.find(name);
    if (durable != durable_.end() && durable->second >= version) {
      answer = absl::OkStatus();
    } else if (failed != failed_.end() && failed->second.first >= version) {
      answer = failed->second.second;
    } else if (forgotten != forgotten_.end() && forgotten->second >= version) {
      answer = absl::AbortedError(
          absl::StrCat("index \"", name, "\" was dropped before its snapshot was written"));
    } else {
      waiters_[name].push_back(Waiter{version, std::move(done)});
      return;
    }
  }
  done(std::move(answer));
}

uint64_t SnapshotStore::DurableVersion(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = durable_.find(name);
  return it == durable_.end() ? 0 : it->second;
}

void SnapshotStore::MarkDurableLocked(const std::string& name, uint64_t version,
                                      Callbacks* out) {
  uint64_t& durable = durable_[name];
  durable = std::max(durable, version);
  auto failed = failed_.find(name);
  if (failed != failed_.end() && failed->second.first <= version) failed_.erase(failed);
  TakeWaitersLocked(name, version, absl::OkStatus(), out);
}

void SnapshotStore::TakeWaitersLocked(const std::string& name, uint64_t version,
                                      const absl::Status& status, Callbacks* out) {
  auto it = waiters_.find(name);
  if (it == waiters_.end()) return;
  std::vector<Waiter>& waiters = it->second;
  auto keep = std::partition(waiters.begin(), waiters.end(),
                             [version](const Waiter& w) { return w.version > version; });
  for (auto w = keep; w != waiters.end(); ++w) out->emplace_back(std::move(w->done), status);
  waiters.erase(keep, waiters.end());
  if (waiters.empty()) waiters_.erase(it);
}

void SnapshotStore::Call(Callbacks& callbacks) {
  for (auto& [done, status] : callbacks) done(status);
  callbacks.clear();
}

void SnapshotStore::WaitIdle() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return pending_.empty() && writing_.empty(); });
}

void SnapshotStore::WriterLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || !pending_.empty(); });
    if (pending_.empty()) return;  // stop_, nothing left to write
    auto it = pending_.begin();
    const std::string name = it->first;
    Job job = std::move(it->second);
    pending_.erase(it);
    writing_ = name;
    lock.unlock();
    RunJob(name, job);
    job.version.reset();  // may free an old table: outside the lock
    lock.lock();
    writing_.clear();
    cv_.notify_all();
  }
}

void SnapshotStore::RunJob(const std::string& name, const Job& job) {
  const auto start = Clock::now();
  const std::string file = name + std::string(kSnapshotSuffix);
  const uint64_t version = job.version->version;
  Callbacks callbacks;
  {
    std::lock_guard<std::mutex> lock(mu_);
    struct stat st {};
    // Loaded from this very file: while it is still the file that was read (no
    // write renamed another over it since), it already holds the version.
    const bool unchanged = job.read_from && generation_[name] == job.generation &&
                           ::lstat(PathOf(file).c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
                           IdentityOf(st) == *job.read_from;
    if (unchanged) MarkDurableLocked(name, version, &callbacks);
    // A SaveIndex of the own file may have written this version already.
    if (unchanged || (durable_.count(name) != 0 && durable_[name] >= version)) {
      Call(callbacks);  // no callback takes mu_, but keep them outside it anyway
      return;
    }
  }
  absl::StatusOr<uint64_t> bytes = WriteFile(
      *job.version, file, [this, &name, &job] { return generation_[name] == job.generation; },
      /*copy=*/false, [&] { MarkDurableLocked(name, version, &callbacks); });
  if (bytes.ok()) {
    const double seconds = SecondsSince(start);
    RecordWrite(name, job.generation, *bytes, seconds);
    LogInfo(absl::StrCat("snapshot of index \"", name, "\" version ", version, " written: ", *bytes,
                         " bytes in ", seconds, " s"));
  } else if (absl::IsCancelled(bytes.status())) {
    metrics_.WriteSuperseded();
    LogInfo(absl::StrCat("snapshot of index \"", name, "\" version ", version,
                         " superseded (a newer version or a drop)"));
  } else {
    std::lock_guard<std::mutex> lock(mu_);
    // Those waiting for this version or an older one learn that it is not
    // durable (and so do those who ask later: failed_); a newer version's
    // write (if one is pending) answers its own.
    const absl::Status failure(
        bytes.status().code(),
        absl::StrCat("index \"", name, "\" version ", version,
                     " is installed and serving, but its snapshot could not be written (a "
                     "restart would serve version ",
                     durable_.count(name) ? durable_[name] : 0, "): ", bytes.status().message()));
    if (generation_[name] == job.generation) failed_[name] = {version, failure};
    TakeWaitersLocked(name, version, failure, &callbacks);
  }
  Call(callbacks);
}

absl::StatusOr<uint64_t> SnapshotStore::WriteFile(const IndexVersion& version,
                                                  const std::string& final_name,
                                                  const std::function<bool()>& still_current,
                                                  bool copy,
                                                  const std::function<void()>& renamed) {
  auto fail = [&](std::string_view reason, const absl::Status& s) -> absl::Status {
    metrics_.WriteFailed(reason);
    LogWarning(absl::StrCat("snapshot of index \"", version.name, "\" version ", version.version,
                            " to \"", final_name, "\" failed (", std::string(reason),
                            "); the index keeps serving and the previous file (if any) stays: ",
                            s.message()));
    return s;
  };
  auto image = backend_->ExportIndex(*version.index);
  if (!image.ok()) return fail("export", image.status());
  SnapshotMeta meta;
  meta.name = version.name;
  meta.source_backend = version.index->backend();
  meta.version = version.version;
  meta.first_value = version.first_value;
  meta.explicit_values = version.explicit_values;
  meta.batch_mode = version.batch_mode;
  meta.build_seconds = version.build_seconds;
  meta.built_unix_millis = version.built_unix_millis;
  meta.payload_names = version.payload_names;
  const uint64_t bytes = SnapshotFileBytes(meta, *image);
  if (options_.max_bytes != 0) {
    const uint64_t used = DirBytes();
    if (used + bytes > options_.max_bytes) {
      return fail("size_limit", absl::ResourceExhaustedError(
                                    absl::StrCat("snapshot of index \"", version.name, "\" needs ",
                                                 bytes, " bytes; the data dir holds ", used,
                                                 " of --max-snapshot-bytes=", options_.max_bytes)));
    }
  }
  if (copy && options_.max_copy_bytes != 0) {
    const uint64_t used = DirBytes(/*copies_only=*/true, final_name);
    if (used + bytes > options_.max_copy_bytes) {
      return fail("copy_limit",
                  absl::ResourceExhaustedError(absl::StrCat(
                      "copy \"", final_name, "\" of index \"", version.name, "\" needs ", bytes,
                      " bytes; the other copies in the data dir hold ", used,
                      " of --max-copy-bytes=", options_.max_copy_bytes,
                      " (list them with ListFiles, delete with DeleteFile)")));
    }
  }
  // Hidden, never `*.gjsnap`, unique per write (a SaveIndex may race a
  // background write of the same version).
  const std::string temp_name = absl::StrCat(".", final_name, std::string(kTempMarker),
                                             version.version, "-", temp_sequence_.fetch_add(1));
  const std::string temp = PathOf(temp_name);
  const int fd =
      ::open(temp.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) {
    const absl::Status s = Errno("create", temp_name);
    return fail(absl::IsResourceExhausted(s) ? "disk_full" : "io_error", s);
  }
  SnapshotWriteOptions options;
  options.cancelled = [&] {
    std::lock_guard<std::mutex> lock(mu_);
    return !still_current();
  };
  if (options_.test_write_delay_ms > 0) {
    options.after_chunk = [ms = options_.test_write_delay_ms] {
      std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    };
  }
  absl::Status s = WriteSnapshot(fd, meta, *image, options);
  if (s.ok() && ::fsync(fd) != 0) s = Errno("fsync", temp_name);
  if (::close(fd) != 0 && s.ok()) s = Errno("close", temp_name);
  if (s.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    // The final check and the rename under mu_: a drop or a newer build
    // (which bump the generation under mu_) cannot slip in between.
    if (!still_current()) {
      s = absl::CancelledError("superseded");
    } else if (::rename(temp.c_str(), PathOf(final_name).c_str()) != 0) {
      s = Errno("rename", temp_name);
    } else {
      // Durable once the directory is synced below; marked now, under the lock
      // that orders it with drops (waiters are answered after the sync).
      renamed();
    }
  }
  if (!s.ok()) {
    ::unlink(temp.c_str());
    if (absl::IsCancelled(s)) return s;
    return fail(absl::IsResourceExhausted(s) ? "disk_full" : "io_error", s);
  }
  if (absl::Status d = SyncDir(options_.data_dir); !d.ok()) return fail("io_error", d);
  return bytes;
}

void SnapshotStore::RecordWrite(const std::string& name, uint64_t generation, uint64_t bytes,
                                double seconds) {
  // Under mu_, as Forget's generation bump and metrics removal are. A rebuild
  // since `generation` does not matter (the file was written and counts; the
  // newer version's write records itself later); a drop since does.
  std::lock_guard<std::mutex> lock(mu_);
  auto dropped = dropped_at_.find(name);
  if (dropped != dropped_at_.end() && dropped->second > generation) return;
  metrics_.WriteSucceeded(name, bytes, seconds);
}

uint64_t SnapshotStore::DirBytes(bool copies_only, const std::string& except) const {
  uint64_t total = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(options_.data_dir, ec)) {
    const std::string file = entry.path().filename().string();
    if (copies_only && (file == except || IsTemporary(file) || file.ends_with(kSnapshotSuffix))) {
      continue;
    }
    struct stat st {};
    if (::lstat(entry.path().c_str(), &st) == 0 && S_ISREG(st.st_mode)) total += st.st_size;
  }
  return total;
}

DataFiles SnapshotStore::ListFiles() {
  DataFiles out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(options_.data_dir, ec)) {
    const std::string file = entry.path().filename().string();
    struct stat st {};
    if (IsTemporary(file) || ::lstat(entry.path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
      continue;
    }
    DataFileInfo info{file, uint64_t(st.st_size), UnixMillis(st), SnapshotIndexOf(file)};
    (info.index.empty() ? out.copy_bytes : out.snapshot_bytes) += info.bytes;
    out.files.push_back(std::move(info));
  }
  std::sort(out.files.begin(), out.files.end(),
            [](const DataFileInfo& a, const DataFileInfo& b) { return a.file < b.file; });
  return out;
}

absl::StatusOr<uint64_t> SnapshotStore::DeleteFile(
    const std::string& file, const std::function<bool(const std::string&)>& is_live) {
  GPUJOIN_RETURN_IF_ERROR(ValidateListedName(file));
  std::lock_guard<std::mutex> lock(mu_);
  const std::string index = SnapshotIndexOf(file);
  if (!index.empty() && (is_live(index) || pending_.count(index) != 0 || writing_ == index)) {
    return absl::FailedPreconditionError(
        absl::StrCat("file: \"", file, "\" is the snapshot of live index \"", index,
                     "\"; drop the index to delete it"));
  }
  const std::string path = PathOf(file);
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) {
      return absl::NotFoundError(absl::StrCat("file: \"", file, "\" is not in the data dir"));
    }
    return Errno("stat", file);
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat("file: \"", file, "\" is ", std::string(FileKindName(st.st_mode)),
                     ", not a file the server wrote; remove it by hand"));
  }
  if (::unlink(path.c_str()) != 0) return Errno("delete", file);
  (void)SyncDir(options_.data_dir);
  if (!index.empty()) durable_.erase(index);
  LogInfo(absl::StrCat("deleted \"", file, "\" (", st.st_size, " bytes) from the data dir"));
  return uint64_t(st.st_size);
}

absl::StatusOr<SavedSnapshot> SnapshotStore::Save(const IndexVersion& version,
                                                  const std::string& file) {
  const auto start = Clock::now();
  const bool own = file == version.name + std::string(kSnapshotSuffix);
  // The index's own file must not outlive a drop (nor go back to an older
  // version after a rebuild) that happens during the save: like a background
  // write, it is renamed only if the name's generation is unchanged. Any other
  // file is independent of the name's life.
  uint64_t generation = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    generation = generation_[version.name];
  }
  Callbacks callbacks;
  auto bytes = WriteFile(
      version, file,
      [this, own, &version, generation] { return !own || generation_[version.name] == generation; },
      /*copy=*/!own,
      [&] {
        if (own) MarkDurableLocked(version.name, version.version, &callbacks);
      });
  Call(callbacks);
  if (absl::IsCancelled(bytes.status())) {
    return absl::AbortedError(absl::StrCat("SaveIndex: index \"", version.name,
                                           "\" was rebuilt or dropped during the save; retry"));
  }
  if (!bytes.ok()) return bytes.status();
  SavedSnapshot saved{file, *bytes, version.version, SecondsSince(start)};
  if (own) RecordWrite(version.name, generation, *bytes, saved.seconds);
  return saved;
}

absl::StatusOr<std::shared_ptr<IndexVersion>> SnapshotStore::Load(const std::string& file,
                                                                  const std::string& name,
                                                                  unsigned read_threads,
                                                                  FileIdentity* read) {
  const auto start = Clock::now();
  GPUJOIN_ASSIGN_OR_RETURN(SnapshotReader reader, SnapshotReader::Open(PathOf(file), file));
  if (read != nullptr) *read = reader.identity();
  // Reserved before anything is allocated: the imported index, and on the CPU
  // backend (whose budget is host memory) the image read on the way too.
  const uint64_t index_bytes = engine::ImportedIndexBytes(*backend_, reader.shape());
  uint64_t image_bytes = 0;
  if (backend_->Info().kind == engine::BackendKind::kCpu) {
    const engine::IndexImageShape& shape = reader.shape();
    image_bytes = uint64_t{shape.spec.capacity} * (engine::KeyBytes(shape.spec.key_type) + 4) +
                  (shape.spec.duplicates == engine::DuplicatePolicy::kKeepAll
                       ? uint64_t{shape.spec.capacity} * 8 + shape.kept_rows * 4
                       : 0) +
                  backend_->PayloadBytes(shape.spec, shape.payload, shape.kept_rows);
  }
  GPUJOIN_ASSIGN_OR_RETURN(
      MemoryBudget::Reservation reservation,
      budget_->Reserve(index_bytes + image_bytes,
                       absl::StrCat("index \"", name, "\" (snapshot \"", file, "\")")));
  std::unique_ptr<engine::HashIndex> index;
  {
    GPUJOIN_ASSIGN_OR_RETURN(engine::IndexImage image, reader.ReadImage(read_threads));
    GPUJOIN_ASSIGN_OR_RETURN(index, backend_->ImportIndex(image));
  }  // the image is freed here
  auto version = std::make_shared<IndexVersion>();
  const SnapshotMeta& meta = reader.meta();
  version->name = name;
  version->index = std::move(index);
  version->first_value = meta.first_value;
  version->explicit_values = meta.explicit_values;
  version->batch_mode = meta.batch_mode;
  version->build_seconds = meta.build_seconds;
  version->built_unix_millis = meta.built_unix_millis;
  version->payload_names = meta.payload_names;
  version->reservation = std::move(reservation);
  version->reservation.ShrinkTo(version->index->memory_bytes());
  metrics_.LoadSucceeded(SecondsSince(start));
  return version;
}

WarmStartReport SnapshotStore::LoadAll(IndexRegistry& registry,
                                       const std::function<void(const IndexVersion&)>& installed) {
  const auto start = Clock::now();
  std::vector<std::string> files;
  std::vector<std::string> ignored;
  WarmStartReport report;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(options_.data_dir, ec)) {
    const std::string file = entry.path().filename().string();
    struct stat st {};
    const bool regular = ::lstat(entry.path().c_str(), &st) == 0 && S_ISREG(st.st_mode);
    if (IsTemporary(file) && regular) {
      // A write that an earlier process did not finish (killed, crashed):
      // never loaded; the snapshot it would have replaced is still there.
      ::unlink(entry.path().c_str());
      LogWarning(absl::StrCat("removed \"", file,
                              "\": a snapshot write an earlier gpujoind did not finish"));
      continue;
    }
    if (!file.ends_with(kSnapshotSuffix)) {
      ignored.push_back(file);
      continue;
    }
    if (!regular) {
      // Never opened: a FIFO would block the load, a link may lead anywhere.
      ++report.skipped;
      metrics_.LoadFailed("not_regular_file");
      LogWarning(absl::StrCat("snapshot \"", file, "\" skipped (not_regular_file): it is ",
                              std::string(FileKindName(st.st_mode)),
                              "; snapshots must be regular files"));
      continue;
    }
    files.push_back(file);
  }
  std::sort(files.begin(), files.end());
  if (!ignored.empty()) {
    std::sort(ignored.begin(), ignored.end());
    report.ignored = ignored.size();
    std::string shown;
    for (size_t i = 0; i < ignored.size() && i < 10; ++i) {
      absl::StrAppend(&shown, i == 0 ? "" : ", ", "\"", ignored[i], "\"");
    }
    LogInfo(absl::StrCat("--data-dir: ", ignored.size(),
                         " entries are not snapshots and are not loaded (copies and other files): ",
                         shown, ignored.size() > 10 ? ", ..." : ""));
  }
  if (files.empty()) {
    LogInfo(absl::StrCat("--data-dir \"", options_.data_dir, "\": no snapshots to load"));
    return report;
  }
  LogInfo(absl::StrCat("loading ", files.size(), " snapshots from --data-dir \"", options_.data_dir,
                       "\"; health is NOT_SERVING until they are loaded"));
  metrics_.SetLoadsPending(files.size());
  const unsigned threads =
      std::max(1u, std::min<unsigned>(options_.load_threads, unsigned(files.size())));
  // Each load reads its file on its share of the cores (ReadImage's blocks).
  const unsigned read_threads = std::max(1u, std::thread::hardware_concurrency() / threads);
  std::atomic<size_t> next{0}, done{0};
  std::mutex report_mu;
  auto work = [&] {
    for (size_t i; (i = next.fetch_add(1)) < files.size();) {
      const std::string& file = files[i];
      const std::string name = file.substr(0, file.size() - kSnapshotSuffix.size());
      const auto t0 = Clock::now();
      if (options_.test_load_delay_ms > 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(options_.test_load_delay_ms));
      }
      absl::Status s = ValidateIndexName(name, "snapshot file name");
      std::shared_ptr<IndexVersion> version;
      if (s.ok()) {
        auto loaded = Load(file, name, read_threads);
        s = loaded.status();
        if (loaded.ok()) version = std::move(*loaded);
      }
      uint64_t bytes = 0;
      if (s.ok()) {
        bytes = version->index->memory_bytes();
        std::shared_ptr<const IndexVersion> v = version;
        auto previous = registry.Install(version, /*replace=*/false);
        s = previous.status();
        if (s.ok()) {
          {
            std::lock_guard<std::mutex> lock(mu_);
            latest_[name] = std::max(latest_[name], v->version);
            durable_[name] = v->version;
          }
          installed(*v);
          struct stat st {};
          if (::stat(PathOf(file).c_str(), &st) == 0) {
            metrics_.SnapshotLoaded(name, uint64_t(st.st_size),
                                    double(st.st_mtim.tv_sec) + st.st_mtim.tv_nsec * 1e-9);
          }
        }
      }
      const size_t finished = done.fetch_add(1) + 1;
      metrics_.SetLoadsPending(files.size() - finished);
      std::lock_guard<std::mutex> lock(report_mu);
      if (s.ok()) {
        ++report.loaded;
        report.bytes += bytes;
        LogInfo(absl::StrCat("loaded snapshot \"", file, "\" as index \"", name, "\" (", bytes,
                             " bytes in ", SecondsSince(t0), " s) [", finished, "/", files.size(),
                             "]"));
      } else {
        ++report.skipped;
        const std::string_view reason = SnapshotLoadFailureReason(s);
        metrics_.LoadFailed(reason);
        LogWarning(absl::StrCat("snapshot \"", file, "\" skipped (", std::string(reason),
                                "): ", s.message(), " [", finished, "/", files.size(), "]"));
      }
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  report.seconds = SecondsSince(start);
  LogInfo(absl::StrCat("snapshots loaded: ", report.loaded, " indexes, ", report.bytes,
                       " bytes in ", report.seconds, " s; ", report.skipped, " skipped"));
  return report;
}

}  // namespace gpujoin::server
