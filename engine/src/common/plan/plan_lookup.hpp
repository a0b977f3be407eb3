// A plan's lookup steps: the table's key columns probed against an index as a
// JoinNodeT of the backend (with the selected payload gathered by the same
// node), the table's rows then taken by the join's left rows. Consecutive
// lookup steps whose keys the table had before the first of them form a
// group: their joins run in one command graph over the same rows, and the
// rows of the steps applied one after the other are formed on the host.
#pragma once

#include <span>

#include "absl/status/statusor.h"
#include "common/plan/plan_table.hpp"
#include "gpujoin/engine/backend.hpp"
#include "gpujoin/engine/plan.hpp"

namespace gpujoin::engine::plan_detail {

/// `table` after `steps` in order: rows by each join kind, each step's
/// selected payload columns and found flag appended (names are the caller's).
/// `indexes[i]` is steps[i]'s index; `statistics[i]` gets its rows and probes
/// as if the steps had run one after the other (each row reaching a step
/// counted once, an expanded row as often as it was expanded). Labelled
/// select entries number their values in `labels` (the run's label tables).
absl::StatusOr<PlanTable> RunLookupGroup(Backend& backend,
                                         std::span<const PlanLookupStep* const> steps,
                                         std::span<const HashIndex* const> indexes,
                                         const PlanTable& table, std::span<LabelTable> labels,
                                         const PlanLimits& limits,
                                         std::span<PlanStepStatistics* const> statistics);

}  // namespace gpujoin::engine::plan_detail
