// Loading snapshots: one file as an index (LoadIndex) and every snapshot under
// --data-dir at start-up (LoadAll, on several threads), each reserved in the
// memory budget before its image is read.
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gpujoin/common/status_macros.hpp"
#include "gpujoin/server/logging.hpp"
#include "storage/data_dir.hpp"
#include "storage/snapshot_store.hpp"
#include "wire/names.hpp"

namespace gpujoin::server {

using detail::Clock;
using detail::IsTemporary;
using detail::SecondsSince;

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
                  backend_->PayloadBytes(shape.spec, shape.payload, shape.kept_rows) +
                  engine::KeyStorageBytes(shape);
  }
  uint64_t dictionary_bytes = 0;
  for (const engine::PayloadDictionary& d : reader.meta().dictionaries) {
    dictionary_bytes += d.values.bytes();
  }
  GPUJOIN_ASSIGN_OR_RETURN(
      MemoryBudget::Reservation reservation,
      budget_->Reserve(index_bytes + image_bytes + dictionary_bytes,
                       absl::StrCat("index \"", name, "\" (snapshot \"", file, "\")")));
  std::unique_ptr<engine::HashIndex> index;
  {
    GPUJOIN_ASSIGN_OR_RETURN(engine::IndexImage image, reader.ReadImage(read_threads));
    auto imported = backend_->ImportIndex(image);
    if (!imported.ok()) {
      // UNIMPLEMENTED: this backend cannot hold the index; the file is fine,
      // and stays for a backend that can.
      return absl::Status(imported.status().code(),
                          absl::StrCat("snapshot \"", file, "\": the ",
                                       std::string(engine::BackendKindName(backend_->Info().kind)),
                                       " backend cannot import it: ", imported.status().message()));
    }
    index = std::move(*imported);
  }  // the image is freed here
  auto version = std::make_shared<IndexVersion>();
  const SnapshotMeta& meta = reader.meta();
  version->name = name;
  version->index = std::move(index);
  // The saved version: a warm start serves it again (Install's least
  // version), so that the shards of a router agree after one restarts; a
  // LoadIndex gives the loaded index a new version.
  version->version = meta.version;
  version->first_value = meta.first_value;
  version->explicit_values = meta.explicit_values;
  version->router_values = meta.router_values;
  version->batch_mode = meta.batch_mode;
  version->replicated = meta.replicated;
  version->build_seconds = meta.build_seconds;
  version->built_unix_millis = meta.built_unix_millis;
  version->payload_names = meta.payload_names;
  version->key_column_names = meta.key_column_names;
  version->max_load_factor = meta.max_load_factor;
  version->mutation.sequence = meta.mutation_sequence;
  version->base_id = meta.base_id != 0 ? meta.base_id : NewBaseId();  // before format 3: none
  version->mutation.next_row_id = meta.next_row_id;
  version->mutation.rehashes = meta.rehashes;
  if (!meta.dictionaries.empty()) {
    version->index->AttachDictionaries(
        std::make_shared<std::vector<engine::PayloadDictionary>>(meta.dictionaries));
  }
  version->reservation = std::move(reservation);
  version->reservation.ShrinkTo(version->index->held_bytes());
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
        bytes = version->index->held_bytes();
        std::shared_ptr<const IndexVersion> v = version;
        auto previous = registry.Install(version, /*replace=*/false, version->version);
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