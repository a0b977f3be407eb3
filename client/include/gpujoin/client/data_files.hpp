// The server's --data-dir as the gpujoin C++ client sees it: what SaveIndex
// wrote and what ListFiles lists.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gpujoin::client {

/// What SaveIndex wrote (a snapshot file under the server's --data-dir).
struct SaveResult {
  std::string file;
  uint64_t bytes = 0;
  uint64_t version = 0;
  double seconds = 0;
};

/// One file under the server's --data-dir (ListFiles).
struct DataFile {
  std::string file;
  uint64_t bytes = 0;
  int64_t modified_unix_millis = 0;
  /// The index a "<index>.gjsnap" file is the snapshot of ("" for a copy).
  std::string index;
  bool live = false;  ///< that index is live now
};

/// The server's --data-dir files and their limits (ListFiles).
struct DataFiles {
  std::vector<DataFile> files;  ///< by name
  uint64_t snapshot_bytes = 0;
  uint64_t copy_bytes = 0;
  uint64_t max_copy_bytes = 0;      ///< 0 = no limit
  uint64_t max_snapshot_bytes = 0;  ///< 0 = no limit
};

}  // namespace gpujoin::client
