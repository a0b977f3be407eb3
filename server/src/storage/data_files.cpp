// The data directory's files: the names requests may give, the listing
// (ListFiles) and deletion (DeleteFile) of snapshots and copies.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "gpujoin/common/status_macros.hpp"
#include "storage/data_dir.hpp"
#include "storage/mutation_log_format.hpp"
#include "storage/snapshot_store.hpp"
#include "wire/names.hpp"

namespace gpujoin::server {
namespace detail {

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
// that an index named ".x.gjsnap.tmp-1" keeps its snapshot; and
// `.<index>.gjwal.tmp` (MutationLogTempPath: a log being created or compacted).
bool IsTemporary(std::string_view file) {
  if (!file.starts_with(".")) return false;
  if (file.ends_with(absl::StrCat(std::string(kMutationLogSuffix), ".tmp"))) return true;
  return file.find(kTempMarker) != std::string_view::npos && !file.ends_with(kSnapshotSuffix);
}

// The index a `<index>.gjsnap` or `<index>.gjwal` file belongs to, or "" (a
// copy, or a name that is not an index name).
std::string SnapshotIndexOf(std::string_view file) {
  for (std::string_view suffix : {kSnapshotSuffix, kMutationLogSuffix}) {
    if (!file.ends_with(suffix)) continue;
    const std::string index(file.substr(0, file.size() - suffix.size()));
    return ValidateIndexName(index, "file").ok() ? index : "";
  }
  return "";
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

}  // namespace detail

using detail::Errno;
using detail::IsTemporary;
using detail::SnapshotIndexOf;
using detail::SyncDir;
using detail::UnixMillis;
using detail::ValidateFileName;
using detail::ValidateListedName;

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
  if (file.ends_with(kMutationLogSuffix)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "file: \"", file, "\" is the name of a write-ahead log (\"",
        std::string(kMutationLogSuffix), "\"), which a restart replays; save to \"", own,
        "\" (empty file) or to a copy with another name"));
  }
  return file;
}

absl::StatusOr<std::string> LoadFileOf(const std::string& file, const std::string& name) {
  if (file.empty()) return name + std::string(kSnapshotSuffix);
  GPUJOIN_RETURN_IF_ERROR(ValidateFileName(file));
  return file;
}

uint64_t SnapshotStore::DirBytes(bool copies_only, const std::string& except) const {
  uint64_t total = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(options_.data_dir, ec)) {
    const std::string file = entry.path().filename().string();
    if (copies_only && (file == except || IsTemporary(file) || !SnapshotIndexOf(file).empty())) {
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
    return absl::FailedPreconditionError(absl::StrCat(
        "file: \"", file, "\" is the ",
        file.ends_with(kMutationLogSuffix) ? "write-ahead log" : "snapshot", " of live index \"",
        index, "\"; drop the index to delete it"));
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
  if (!index.empty() && file.ends_with(kSnapshotSuffix)) durable_.erase(index);
  LogInfo(absl::StrCat("deleted \"", file, "\" (", st.st_size, " bytes) from the data dir"));
  return uint64_t(st.st_size);
}

}  // namespace gpujoin::server
