// A plan's aggregate step: rows coded into dense groups on the host (first
// arrival order), every measure of a batch one AggregateNode of one command
// graph on the backend, partials merged across batches by
// AggregationAccumulator.
#pragma once

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "gpujoin/engine/backend.hpp"
#include "gpujoin/engine/plan.hpp"

namespace gpujoin::engine::plan_detail {

class GroupAggregator {
 public:
  /// `types`: the column types of the table the step sees.
  GroupAggregator(const PlanAggregateStep& step, std::vector<ColumnType> types,
                  const PlanLimits& limits);
  ~GroupAggregator();

  /// Folds `table` in. On error nothing changes.
  absl::Status Consume(Backend& backend, const PlanTable& table);

  /// The group-by columns then one column per measure, one row per group
  /// (OUT_OF_RANGE for an integer sum that left its type). Names are the
  /// caller's (left empty).
  absl::StatusOr<PlanTable> Result() const;

  uint64_t groups() const;
  /// Rows folded in so far (by the batches that succeeded).
  uint64_t rows() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace gpujoin::engine::plan_detail
