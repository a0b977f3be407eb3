// Progress of an upload or a ...All helper, reported to a callback.
#pragma once

#include <cstdint>
#include <functional>

namespace gpujoin::client {

/// Progress of an upload, reported after every chunk sent.
struct Progress {
  uint64_t rows_sent = 0;   ///< key rows sent so far
  uint64_t bytes_sent = 0;  ///< bytes of keys, values, validity and payload columns sent so far
  uint64_t total_rows = 0;  ///< expected total, 0 when unknown
};

/// Called after every chunk written; may be empty.
using ProgressCallback = std::function<void(const Progress&)>;

}  // namespace gpujoin::client
