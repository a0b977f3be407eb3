// Command-line values of gpujoin-loadtest that need more than CLI11's parsing:
// row counts with K/M/G suffixes, comma lists and perf_analyzer-style ranges.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace gpujoin::loadtest {

/// Parses a positive count with an optional binary suffix: "1000", "64K" (65536),
/// "1M" (1048576), "2G". `option` names the flag in the error message.
absl::StatusOr<uint64_t> ParseCount(std::string_view text, std::string_view option);

/// Parses a comma-separated list of counts ("1K,64K,1M"); at least one element.
absl::StatusOr<std::vector<uint64_t>> ParseCountList(std::string_view text,
                                                     std::string_view option);

/// Parses "start:end:step" (end inclusive, step >= 1; "a:b" means step 1, "a" one value)
/// as in perf_analyzer's --concurrency-range. All values positive, start <= end.
absl::StatusOr<std::vector<uint64_t>> ParseRange(std::string_view text, std::string_view option);

}  // namespace gpujoin::loadtest
