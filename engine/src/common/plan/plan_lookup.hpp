// A plan's lookup step: the table's key columns probed against an index as
// one JoinNodeT of the backend (with the selected payload gathered by the
// same node), the table's rows then taken by the join's left rows.
#pragma once

#include "absl/status/statusor.h"
#include "gpujoin/engine/backend.hpp"
#include "gpujoin/engine/plan.hpp"

namespace gpujoin::engine::plan_detail {

/// `table` with the step's rows (by join kind) and its selected payload
/// columns and found flag appended (their names are the caller's).
absl::StatusOr<PlanTable> RunLookupStep(Backend& backend, const PlanLookupStep& step,
                                        const HashIndex& index, const PlanTable& table,
                                        const PlanLimits& limits, PlanStepStatistics* statistics);

}  // namespace gpujoin::engine::plan_detail
