// The text of a plan's filter (FilterStep.where, docs/api.md "Query"),
// parsed and checked against the columns its step sees into an engine
// expression.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "gpujoin/engine/plan.hpp"

namespace gpujoin::server {

/// Parses `text` over the columns `names` (of `types`). INVALID_ARGUMENT
/// naming `field`, the position (1-based character) and what was expected,
/// an unknown column, or a literal whose kind the column's type cannot be
/// compared with.
absl::StatusOr<engine::PlanExpr> ParseFilter(std::string_view text,
                                             std::span<const std::string> names,
                                             std::span<const engine::ColumnType> types,
                                             std::string_view field);

/// Most nodes (comparisons and operators) one filter may have.
inline constexpr size_t kMaxFilterNodes = 4096;

}  // namespace gpujoin::server
