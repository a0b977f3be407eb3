// The files under --data-dir: the names requests may give (SaveFileOf,
// LoadFileOf, DeleteFile), the temporary files of writes, errno messages that
// name a file but never the directory, and the durable directory sync. Shared by
// the store's writer (snapshot_store.cpp), its loads (warm_start.cpp) and its
// listing (data_files.cpp).
#pragma once

#include <sys/stat.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace gpujoin::server::detail {

using Clock = std::chrono::steady_clock;

inline double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The marker of a temporary file: `.<name>.gjsnap.tmp-<version>`.
inline constexpr std::string_view kTempMarker = ".gjsnap.tmp-";

/// errno as a status: RESOURCE_EXHAUSTED for a full disk or quota, else
/// INTERNAL. `file` is what the message names: a file name under the data
/// dir, never its path (messages reach clients).
absl::Status Errno(std::string_view what, const std::string& file);

/// fsync of a directory, so that a rename or unlink in it is durable.
absl::Status SyncDir(const std::string& dir);

/// `.<file>.gjsnap.tmp-<version>-<n>` (WriteFile): never ends in ".gjsnap", so
/// that an index named ".x.gjsnap.tmp-1" keeps its snapshot.
bool IsTemporary(std::string_view file);

/// The index a `<index>.gjsnap` file belongs to, or "" (a copy, or a name that
/// is not an index name).
std::string SnapshotIndexOf(std::string_view file);

/// The rules every file name of a request follows: the index-name alphabet (no
/// "/", not "." or ".."), not hidden, not a temporary file's name.
absl::Status ValidateFileName(const std::string& file);

/// What DeleteFile takes: any name ListFiles may list (files an operator put
/// there too), so a plain name inside the directory and not a temporary file.
absl::Status ValidateListedName(const std::string& file);

/// The modification time of `st` in Unix milliseconds.
int64_t UnixMillis(const struct stat& st);

}  // namespace gpujoin::server::detail
