#include "snapshot_store.hpp"

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

#include "absl/strings/str_cat.h"
#include "gpujoin/common/status_macros.hpp"
#include "gpujoin/server/logging.hpp"
#include "gpujoin/server/names.hpp"
#include "snapshot_format.hpp"

namespace gpujoin::server {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The marker of a temporary file: `.<name>.gjsnap.tmp-<version>`.
constexpr std::string_view kTempMarker = ".gjsnap.tmp-";

absl::Status Errno(std::string_view what, const std::string& path) {
  const int err = errno;
  const std::string message =
      absl::StrCat(std::string(what), " \"", path, "\": ", std::strerror(err));
  return err == ENOSPC || err == EDQUOT ? absl::ResourceExhaustedError(message)
                                        : absl::InternalError(message);
}

// fsync of a directory, so that a rename or unlink in it is durable.
absl::Status SyncDir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Errno("open data dir", dir);
  const int r = ::fsync(fd);
  const absl::Status s = r == 0 ? absl::OkStatus() : Errno("fsync data dir", dir);
  ::close(fd);
  return s;
}

const std::vector<double>& DurationBuckets() {
  static const std::vector<double> b = {0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1,
                                        2.5,   5,    10,   30,  60,   120, 300};
  return b;
}

}  // namespace

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
                       "Snapshot writes that failed, by reason (size_limit, disk_full, "
                       "io_error, export).")
                   .Register(r);
  for (const char* reason : {"size_limit", "disk_full", "io_error", "export"}) {
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
                            "budget, invalid, io_error).")
                        .Register(r);
  for (const char* reason : {"version", "truncated", "corrupt", "budget", "invalid", "io_error"}) {
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
}

std::string SnapshotStore::PathOf(const std::string& file) const {
  return (std::filesystem::path(options_.data_dir) / file).string();
}

void SnapshotStore::Schedule(std::shared_ptr<const IndexVersion> version) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    const std::string name = version->name;
    const uint64_t generation = ++generation_[name];
    pending_[name] = Job{std::move(version), generation};
  }
  cv_.notify_all();
}

void SnapshotStore::Forget(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  dropped_at_[name] = ++generation_[name];
  pending_.erase(name);
  const std::string path = PathOf(name + std::string(kSnapshotSuffix));
  // Under mu_: a write of the name renames under mu_ too, after checking its
  // generation, so none can put the file back once it is gone.
  if (::unlink(path.c_str()) == 0) {
    (void)SyncDir(options_.data_dir);
    LogInfo(absl::StrCat("deleted snapshot \"", path, "\" of dropped index \"", name, "\""));
  }
  metrics_.Remove(name);
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
  absl::StatusOr<uint64_t> bytes = WriteFile(
      *job.version, file, [this, &name, &job] { return generation_[name] == job.generation; });
  if (bytes.ok()) {
    const double seconds = SecondsSince(start);
    RecordWrite(name, job.generation, *bytes, seconds);
    LogInfo(absl::StrCat("snapshot of index \"", name, "\" version ", job.version->version,
                         " written: ", *bytes, " bytes in ", seconds, " s"));
  } else if (absl::IsCancelled(bytes.status())) {
    metrics_.WriteSuperseded();
    LogInfo(absl::StrCat("snapshot of index \"", name, "\" version ", job.version->version,
                         " superseded (a newer version or a drop)"));
  }
}

absl::StatusOr<uint64_t> SnapshotStore::WriteFile(const IndexVersion& version,
                                                  const std::string& final_name,
                                                  const std::function<bool()>& still_current) {
  auto fail = [&](std::string_view reason, const absl::Status& s) -> absl::Status {
    metrics_.WriteFailed(reason);
    LogWarning(absl::StrCat("snapshot of index \"", version.name, "\" version ", version.version,
                            " failed (", std::string(reason), "); the index keeps serving",
                            " and the previous snapshot (if any) stays: ", s.message()));
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
  // Hidden, never `*.gjsnap`, unique per write (a SaveIndex may race a
  // background write of the same version).
  const std::string temp = PathOf(absl::StrCat(".", final_name, std::string(kTempMarker),
                                               version.version, "-", temp_sequence_.fetch_add(1)));
  const int fd = ::open(temp.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644);
  if (fd < 0) {
    const absl::Status s = Errno("create", temp);
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
  if (s.ok() && ::fsync(fd) != 0) s = Errno("fsync", temp);
  if (::close(fd) != 0 && s.ok()) s = Errno("close", temp);
  if (s.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    // The final check and the rename under mu_: a drop or a newer build
    // (which bump the generation under mu_) cannot slip in between.
    if (!still_current()) {
      s = absl::CancelledError("superseded");
    } else if (::rename(temp.c_str(), PathOf(final_name).c_str()) != 0) {
      s = Errno("rename", temp);
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

uint64_t SnapshotStore::DirBytes() const {
  uint64_t total = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(options_.data_dir, ec)) {
    std::error_code e2;
    if (entry.is_regular_file(e2)) total += entry.file_size(e2);
  }
  return total;
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
  auto bytes = WriteFile(version, file, [this, own, &version, generation] {
    return !own || generation_[version.name] == generation;
  });
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
                                                                  unsigned read_threads) {
  const auto start = Clock::now();
  const std::string path = PathOf(file);
  GPUJOIN_ASSIGN_OR_RETURN(SnapshotReader reader, SnapshotReader::Open(path));
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
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(options_.data_dir, ec)) {
    const std::string file = entry.path().filename().string();
    if (file.find(kTempMarker) != std::string::npos && !file.ends_with(kSnapshotSuffix)) {
      // A write that an earlier process did not finish (killed, crashed):
      // never loaded; the snapshot it would have replaced is still there.
      std::error_code e2;
      std::filesystem::remove(entry.path(), e2);
      LogWarning(absl::StrCat("removed \"", entry.path().string(),
                              "\": a snapshot write an earlier gpujoind did not finish"));
      continue;
    }
    if (file.ends_with(kSnapshotSuffix) && entry.is_regular_file()) files.push_back(file);
  }
  std::sort(files.begin(), files.end());
  WarmStartReport report;
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
