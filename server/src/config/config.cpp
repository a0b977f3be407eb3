#include "gpujoin/server/config.hpp"

#include <unistd.h>

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

std::string WalSyncPolicy::ToString() const {
  switch (mode) {
    case Mode::kAlways:
      return "always";
    case Mode::kBatch:
      return absl::StrCat("batch-ms:", batch_ms);
    case Mode::kOff:
      return "off";
  }
  return "always";
}

absl::StatusOr<WalSyncPolicy> ParseWalSync(std::string_view text) {
  auto bad = [&](std::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--wal-sync: \"", std::string(text), "\" ", std::string(why),
        " (expected always, batch-ms:N with N in [1, ", kMaxWalBatchMs, "] milliseconds, or off)"));
  };
  if (text == "always") return WalSyncPolicy{WalSyncPolicy::Mode::kAlways, 0};
  if (text == "off") return WalSyncPolicy{WalSyncPolicy::Mode::kOff, 0};
  constexpr std::string_view kBatchPrefix = "batch-ms:";
  if (!text.starts_with(kBatchPrefix)) return bad("is not a sync mode");
  const std::string_view digits = text.substr(kBatchPrefix.size());
  const bool whole_number =
      !digits.empty() &&
      std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!whole_number) {
    return bad("does not end in a whole number of milliseconds");
  }
  uint32_t ms = 0;  // saturates just above the range, so that long numbers cannot wrap
  for (char c : digits) ms = std::min(ms * 10 + uint32_t(c - '0'), kMaxWalBatchMs + 1);
  if (ms < 1 || ms > kMaxWalBatchMs) return bad("is outside the range");
  return WalSyncPolicy{WalSyncPolicy::Mode::kBatch, ms};
}

absl::StatusOr<std::vector<int>> ParseDevices(std::string_view text, bool* all) {
  *all = false;
  if (text == "all") {
    *all = true;
    return std::vector<int>();
  }
  auto bad = [&](std::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--devices: \"", std::string(text), "\" ", std::string(why),
        " (expected all, or distinct device numbers in [0, ", kMaxDevices, ") such as 0,1)"));
  };
  std::vector<int> devices;
  size_t start = 0;
  for (;;) {
    const size_t comma = text.find(',', start);
    const std::string_view item =
        text.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    if (item.empty() || item.size() > 2 ||
        !std::all_of(item.begin(), item.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return bad(absl::StrCat("has \"", std::string(item), "\", which is not a device number"));
    }
    int device = 0;
    for (char c : item) device = device * 10 + (c - '0');
    if (device >= static_cast<int>(kMaxDevices)) return bad("names a device past the last");
    if (std::find(devices.begin(), devices.end(), device) != devices.end()) {
      return bad(absl::StrCat("names device ", device, " twice"));
    }
    devices.push_back(device);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return devices;
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

uint64_t PhysicalMemoryBytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? uint64_t(pages) * uint64_t(page) : uint64_t{1} << 32;
}

ServerConfig ResolveHostLimits(const ServerConfig& config, uint64_t physical_bytes,
                               uint32_t shares) {
  ServerConfig r = config;
  const uint64_t n = std::max<uint32_t>(shares, 1);
  if (r.max_staged_bytes == 0) r.max_staged_bytes = std::max<uint64_t>(physical_bytes / 4 / n, 1);
  if (r.max_build_staged_bytes == 0 || r.max_build_staged_bytes > r.max_staged_bytes) {
    r.max_build_staged_bytes = r.max_staged_bytes;
  }
  if (r.max_result_bytes == 0) {
    r.max_result_bytes =
        std::max<uint64_t>(std::min(physical_bytes / 8, kDefaultMaxResultBytes) / n, 1);
  }
  if (r.max_pending_response_bytes == 0) {
    r.max_pending_response_bytes =
        std::max<uint64_t>(ResolveMaxPendingResponseBytes(config, physical_bytes) / n, 1);
  }
  return r;
}

}  // namespace gpujoin::server
