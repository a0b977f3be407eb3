// Validation of index names (handles) and payload column names.
#pragma once

#include <string_view>

#include "absl/status/status.h"

namespace gpujoin::server {

/// Longest index name accepted.
inline constexpr size_t kMaxIndexNameLength = 128;

/// OK when `name` matches [A-Za-z0-9_.-]{1,128} and is neither "." nor "..";
/// otherwise INVALID_ARGUMENT naming `field` and the length, the reserved name, or
/// the first offending byte and its position (so any non-ASCII byte, valid UTF-8
/// or not, is refused).
absl::Status ValidateIndexName(std::string_view name, std::string_view field);

/// Longest payload column name accepted.
inline constexpr size_t kMaxColumnNameLength = 128;

/// OK when `name` matches [A-Za-z0-9_.-]{1,128} (a payload column name);
/// otherwise INVALID_ARGUMENT naming `field` and the length or the first
/// offending byte and its position.
absl::Status ValidateColumnName(std::string_view name, std::string_view field);

}  // namespace gpujoin::server
