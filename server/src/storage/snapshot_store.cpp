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
#include "storage/data_dir.hpp"
#include "storage/snapshot_format.hpp"

namespace gpujoin::server {

using detail::Clock;
using detail::Errno;
using detail::kTempMarker;
using detail::SecondsSince;
using detail::SyncDir;

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

void SnapshotStore::Rewrite(std::shared_ptr<const IndexVersion> version) {
  std::shared_ptr<const IndexVersion> stale;  // freed outside the lock
  {
    std::lock_guard<std::mutex> lock(mu_);
    const std::string name = version->name;
    if (version->version != latest_[name]) {
      stale = std::move(version);  // rebuilt or dropped since: its own write follows
    } else {
      const uint64_t generation = ++generation_[name];
      Job& job = pending_[name];
      stale = std::move(job.version);
      job = Job{std::move(version), generation, std::nullopt, /*again=*/true};
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
    if (unchanged || (!job.again && durable_.count(name) != 0 && durable_[name] >= version)) {
      Call(callbacks);  // no callback takes mu_, but keep them outside it anyway
      return;
    }
  }
  uint64_t sequence = 0;
  absl::StatusOr<uint64_t> bytes = WriteFile(
      *job.version, file, [this, &name, &job] { return generation_[name] == job.generation; },
      /*copy=*/false, [&] { MarkDurableLocked(name, version, &callbacks); }, &sequence);
  if (bytes.ok() && on_written_) on_written_(*job.version, sequence);
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
                                                  const std::function<void()>& renamed,
                                                  uint64_t* mutation_sequence) {
  auto fail = [&](std::string_view reason, const absl::Status& s) -> absl::Status {
    metrics_.WriteFailed(reason);
    LogWarning(absl::StrCat("snapshot of index \"", version.name, "\" version ", version.version,
                            " to \"", final_name, "\" failed (", std::string(reason),
                            "); the index keeps serving and the previous file (if any) stays: ",
                            s.message()));
    return s;
  };
  SnapshotMeta meta;
  absl::StatusOr<engine::IndexImage> image;
  {
    // The image and the mutation state of one moment: no Mutate batch between.
    const IndexReadLock read(version);
    image = backend_->ExportIndex(*version.index);
    meta.source_backend = version.index->backend();
    meta.mutation_sequence = version.mutation.sequence;
    meta.next_row_id = version.mutation.next_row_id;
    meta.rehashes = version.mutation.rehashes;
    if (const auto* dictionaries = version.index->dictionaries()) meta.dictionaries = *dictionaries;
  }
  if (mutation_sequence != nullptr) *mutation_sequence = meta.mutation_sequence;
  meta.base_id = version.base_id;
  if (!image.ok()) return fail("export", image.status());
  meta.max_load_factor = version.max_load_factor;
  meta.name = version.name;
  meta.version = version.version;
  meta.first_value = version.first_value;
  meta.explicit_values = version.explicit_values;
  meta.router_values = version.router_values;
  meta.batch_mode = version.batch_mode;
  meta.replicated = version.replicated;
  meta.build_seconds = version.build_seconds;
  meta.built_unix_millis = version.built_unix_millis;
  meta.payload_names = version.payload_names;
  meta.key_column_names = version.key_column_names;
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

}  // namespace gpujoin::server
