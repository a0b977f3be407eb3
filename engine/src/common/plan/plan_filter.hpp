// Filter expressions evaluated over a plan table with SQL's three-valued logic.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "gpujoin/engine/plan.hpp"

namespace gpujoin::engine::plan_detail {

/// Truth values per row.
inline constexpr uint8_t kFalse = 0;
inline constexpr uint8_t kTrue = 1;
inline constexpr uint8_t kUnknown = 2;

/// The value of `expr` at every row of `table` (kFalse, kTrue or kUnknown).
/// The expression was checked by the compiler (columns and literal kinds).
std::vector<uint8_t> EvaluateFilter(const PlanExpr& expr, const PlanTable& table);
/// The same over `rows` rows of `columns` (the table's columns by position).
std::vector<uint8_t> EvaluateFilter(const PlanExpr& expr,
                                    std::span<const PlanColumn* const> columns, uint64_t rows);

}  // namespace gpujoin::engine::plan_detail
