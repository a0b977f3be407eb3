// Validation of index names (handles).
#pragma once

#include <string_view>

#include "absl/status/status.h"

namespace gpujoin::server {

/// Longest index name accepted.
inline constexpr size_t kMaxIndexNameLength = 128;

/// OK when `name` matches [A-Za-z0-9_.-]{1,128}; otherwise INVALID_ARGUMENT naming
/// `field`, the length or the first offending character and its position.
absl::Status ValidateIndexName(std::string_view name, std::string_view field);

}  // namespace gpujoin::server
