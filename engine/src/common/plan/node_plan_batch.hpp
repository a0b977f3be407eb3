// The lowered plan batch (gpujoin/engine/plan_device.hpp) for a backend whose
// device is the host (the CPU backend): the same steps over one live-row
// mask, no row copied between them. Each lookup probes every row of the batch
// as one LookupNode of the backend (values, found, probes, the selected
// payload gathered per row), its kind then narrows the mask; each filter
// evaluates its expression (plan_filter.hpp) and narrows the mask; the
// aggregate packs each live row's group key (GroupKeyLayout) into a table of
// distinct keys in first-row order, and runs every measure as an
// AggregateNode of one command graph masked by the live rows. A row plan's
// rows are taken once, at the end.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "gpujoin/engine/backend.hpp"
#include "gpujoin/engine/plan_device.hpp"

namespace gpujoin::engine::plan_detail {

/// Runs `input`'s steps and group keys on `backend` (its nodes). The batch
/// reads the input table's columns until it ends (PlanRun moves the table,
/// never copies it, so their storage stays where it is).
absl::StatusOr<std::unique_ptr<DevicePlanBatch>> StartNodePlanBatch(Backend& backend,
                                                                     const DevicePlanInput& input);

}  // namespace gpujoin::engine::plan_detail
