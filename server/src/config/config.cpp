#include "gpujoin/server/config.hpp"

#include <algorithm>
#include <cctype>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "gpujoin/engine/backend.hpp"

namespace gpujoin::server {

absl::StatusOr<uint64_t> ParseByteSize(std::string_view text, std::string_view flag) {
  auto bad = [&](std::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(flag), ": \"", std::string(text),
                                                   "\" ", std::string(why),
                                                   " (expected e.g. 1073741824, 512M or 8G)"));
  };
  size_t i = 0;
  uint64_t value = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
    const uint64_t digit = static_cast<uint64_t>(text[i] - '0');
    if (value > (std::numeric_limits<uint64_t>::max() - digit) / 10)
      return bad("overflows 64 bits");
    value = value * 10 + digit;
    ++i;
  }
  if (i == 0) return bad("does not start with a number");
  std::string suffix = absl::AsciiStrToUpper(std::string(text.substr(i)));
  int shift = 0;
  if (suffix.empty() || suffix == "B") {
    shift = 0;
  } else {
    const char unit = suffix[0];
    const std::string rest = suffix.substr(1);
    if (rest != "" && rest != "B" && rest != "IB") return bad("has an unknown unit suffix");
    switch (unit) {
      case 'K':
        shift = 10;
        break;
      case 'M':
        shift = 20;
        break;
      case 'G':
        shift = 30;
        break;
      case 'T':
        shift = 40;
        break;
      default:
        return bad("has an unknown unit suffix");
    }
  }
  if (shift > 0 && value > (std::numeric_limits<uint64_t>::max() >> shift)) {
    return bad("overflows 64 bits");
  }
  return value << shift;
}

uint32_t ResolveExecutorThreads(const ServerConfig& config, engine::BackendKind backend,
                                uint32_t cores) {
  if (config.executor_threads != 0) return config.executor_threads;
  // CUDA: the workers' stream synchronisations spin (default scheduling), and the
  // backend keeps at most 16 idle stream contexts, so no more threads than cores
  // and 16: on the H200 host 32 or 64 threads cut 1K-row lookups at 16 streams
  // from 77.7 K to 5-6 K batches/s (docs/PERFORMANCE.md).
  if (backend == engine::BackendKind::kCuda) return std::clamp(cores, 2u, 16u);
  return std::max(2u, cores);
}

uint32_t ResolveInlineBatchRows(const ServerConfig& config, engine::BackendKind backend) {
  if (backend == engine::BackendKind::kCuda) return 0;
  if (config.inline_batch_rows >= 0) return static_cast<uint32_t>(config.inline_batch_rows);
  return 4096;
}

uint64_t ResolveMaxPendingResponseBytes(const ServerConfig& config, uint64_t physical_bytes) {
  if (config.max_pending_response_bytes != 0) return config.max_pending_response_bytes;
  if (physical_bytes == 0) return kDefaultMaxPendingResponseBytes;
  return std::min(physical_bytes / 8, kDefaultMaxPendingResponseBytes);
}

}  // namespace gpujoin::server
