// PlanRun: a plan's steps over a stream of batches (gpujoin/engine/plan.hpp).
#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "common/plan/plan_aggregate.hpp"
#include "common/plan/plan_filter.hpp"
#include "common/plan/plan_lookup.hpp"
#include "common/plan/plan_table.hpp"
#include "gpujoin/common/status_macros.hpp"
#include "gpujoin/engine/backend.hpp"
#include "gpujoin/engine/aggregation.hpp"
#include "gpujoin/engine/plan.hpp"
#include "gpujoin/engine/plan_device.hpp"

namespace gpujoin::engine {

using plan_detail::GroupAggregator;

size_t Plan::AggregatePosition() const {
  for (size_t i = 0; i < steps.size(); ++i) {
    if (std::holds_alternative<PlanAggregateStep>(steps[i])) return i;
  }
  return steps.size();
}

bool IsIntegerType(ColumnType type) {
  return type == ColumnType::kInt32 || type == ColumnType::kInt64 ||
         type == ColumnType::kUint32 || type == ColumnType::kUint64;
}

bool IsNumericType(ColumnType type) {
  return IsIntegerType(type) || type == ColumnType::kFloat32 || type == ColumnType::kFloat64;
}

bool IsGroupableType(ColumnType type) {
  return IsIntegerType(type) || type == ColumnType::kBool || type == ColumnType::kString ||
         type == ColumnType::kBinary;
}

ColumnType PlanMeasureType(AggregateOp op, ColumnType input) {
  if (op == AggregateOp::kCount) return ColumnType::kUint64;
  if (op == AggregateOp::kMean) {
    return input == ColumnType::kFloat32 ? ColumnType::kFloat32 : ColumnType::kFloat64;
  }
  return AggregateResultType(op, input);
}

struct PlanRun::State {
  Backend* backend = nullptr;
  Plan plan;
  PlanLimits limits;
  size_t aggregate_at = 0;
  /// Rows each limit step has let through so far (by step position).
  std::vector<uint64_t> limit_passed;
  std::optional<GroupAggregator> aggregator;
  /// One per Plan::label_types.
  std::vector<plan_detail::LabelTable> labels;
  /// The backend has no device path for plans (it said UNIMPLEMENTED once).
  bool host_only = false;
};

PlanRun::PlanRun(Backend* backend, Plan plan, PlanLimits limits)
    : state_(std::make_unique<State>()) {
  State& s = *state_;
  s.backend = backend;
  s.plan = std::move(plan);
  // String offsets are uint32 and read as Arrow's int32: a table stays below 2^31 bytes.
  limits.max_table_bytes = std::min<uint64_t>(limits.max_table_bytes, 0x7fffffffu);
  s.limits = std::move(limits);
  s.aggregate_at = s.plan.AggregatePosition();
  s.limit_passed.assign(s.plan.steps.size(), 0);
  s.labels.resize(s.plan.label_types.size());
  if (s.aggregate_at < s.plan.steps.size()) {
    s.aggregator.emplace(std::get<PlanAggregateStep>(s.plan.steps[s.aggregate_at]),
                         s.plan.aggregate_input_types, s.limits, &s.labels,
                         s.plan.label_types);
  }
}

PlanRun::~PlanRun() = default;

const Plan& PlanRun::plan() const { return state_->plan; }
bool PlanRun::aggregates() const { return state_->aggregate_at < state_->plan.steps.size(); }

namespace {

// Runs steps [begin, end) on `table`. `limit_passed` is updated only through
// `passed` (the caller commits it when the whole batch succeeded).
absl::StatusOr<PlanTable> RunSteps(Backend& backend, const Plan& plan, size_t begin, size_t end,
                                   PlanTable table, std::span<const HashIndex* const> indexes,
                                   std::span<plan_detail::LabelTable> labels,
                                   const PlanLimits& limits, std::vector<uint64_t>* passed,
                                   std::vector<PlanStepStatistics>* statistics) {
  for (size_t i = begin; i < end; ++i) {
    PlanStepStatistics& st = (*statistics)[i];
    st.ran = true;
    st.rows_in = table.rows;
    const PlanStep& step = plan.steps[i];
    if (std::holds_alternative<PlanLookupStep>(step)) {
      // The lookups from here whose keys the table already has: one group.
      const size_t width = table.columns.size();
      std::vector<const PlanLookupStep*> group;
      std::vector<const HashIndex*> group_indexes;
      std::vector<PlanStepStatistics*> group_stats;
      size_t j = i;
      for (; j < end; ++j) {
        const auto* lookup = std::get_if<PlanLookupStep>(&plan.steps[j]);
        if (lookup == nullptr) break;
        bool independent = true;
        for (uint32_t c : lookup->key_columns) independent &= c < width;
        if (!independent) break;
        const HashIndex* index = indexes[lookup->index_slot];
        if (index == nullptr) return absl::InternalError("a lookup step ran without its index");
        group.push_back(lookup);
        group_indexes.push_back(index);
        group_stats.push_back(&(*statistics)[j]);
        (*statistics)[j].ran = true;
      }
      GPUJOIN_ASSIGN_OR_RETURN(table, plan_detail::RunLookupGroup(backend, group, group_indexes,
                                                                  table, labels, limits,
                                                                  group_stats));
      i = j - 1;
      continue;
    } else if (const auto* filter = std::get_if<PlanFilterStep>(&step)) {
      const std::vector<uint8_t> truth = plan_detail::EvaluateFilter(filter->where, table);
      std::vector<uint8_t> keep(truth.size());
      for (size_t r = 0; r < truth.size(); ++r) keep[r] = truth[r] == plan_detail::kTrue;
      const std::vector<uint32_t> rows = plan_detail::SelectedRows(keep);
      if (rows.size() != table.rows) table = plan_detail::TakeRows(table, rows);
    } else if (const auto* project = std::get_if<PlanProjectStep>(&step)) {
      PlanTable out;
      out.rows = table.rows;
      for (uint32_t c : project->columns) out.columns.push_back(table.columns[c]);
      out.names.resize(out.columns.size());
      table = std::move(out);
    } else if (const auto* limit = std::get_if<PlanLimitStep>(&step)) {
      const uint64_t room = limit->rows - std::min(limit->rows, (*passed)[i]);
      if (table.rows > room) {
        std::vector<uint32_t> rows(room);
        for (uint64_t r = 0; r < room; ++r) rows[r] = static_cast<uint32_t>(r);
        table = plan_detail::TakeRows(table, rows);
      }
      (*passed)[i] += table.rows;
    }
    // Names are the compiler's: the engine keeps positions only.
    table.names.resize(table.columns.size());
    st.rows_out = table.rows;
  }
  return table;
}

}  // namespace

absl::StatusOr<PlanTable> PlanRun::RunBatch(PlanTable input,
                                            std::span<const HashIndex* const> indexes,
                                            std::vector<PlanStepStatistics>* statistics) {
  State& s = *state_;
  statistics->assign(s.plan.steps.size(), PlanStepStatistics{});
  if (input.rows > 0 && s.limits.device_batches && !s.host_only) {
    // On the backend's device when it offers it and the plan's shape allows.
    std::vector<ColumnType> types;
    for (const PlanColumn& c : input.columns) types.push_back(c.type);
    if (std::optional<DevicePlanInput> shape = DevicePlanShapeOf(s.plan, types, indexes)) {
      shape->table = &input;
      shape->max_groups = s.limits.max_groups;
      shape->groups_limit_name = s.limits.groups_limit_name;
      absl::StatusOr<std::unique_ptr<DevicePlanBatch>> batch = s.backend->StartDevicePlan(*shape);
      shape->table = nullptr;  // `input` moves on (its columns' storage stays)
      if (batch.ok()) {
        return RunDeviceBatch(*std::move(batch), *shape, std::move(input), indexes, statistics);
      }
      // No device path here, or not enough device memory (or groups) for this
      // batch there: the host path runs it and gives its own answer.
      s.host_only = absl::IsUnimplemented(batch.status());
      if (!s.host_only && !absl::IsResourceExhausted(batch.status())) return batch.status();
    }
  }
  std::vector<uint64_t> passed = s.limit_passed;
  GPUJOIN_ASSIGN_OR_RETURN(PlanTable table,
                           RunSteps(*s.backend, s.plan, 0, s.aggregate_at, std::move(input),
                                    indexes, s.labels, s.limits, &passed, statistics));
  if (!aggregates()) {
    s.limit_passed = std::move(passed);
    return table;
  }
  PlanStepStatistics& st = (*statistics)[s.aggregate_at];
  st.ran = true;
  st.rows_in = table.rows;
  GPUJOIN_RETURN_IF_ERROR(s.aggregator->Consume(*s.backend, table));
  st.rows_out = s.aggregator->groups();
  s.limit_passed = std::move(passed);
  return PlanTable{};
}

absl::StatusOr<PlanTable> PlanRun::RunDeviceBatch(std::unique_ptr<DevicePlanBatch> batch,
                                                 const DevicePlanInput& shape, PlanTable input,
                                                 std::span<const HashIndex* const> indexes,
                                                 std::vector<PlanStepStatistics>* statistics) {
  State& s = *state_;
  if (shape.aggregate) {
    GPUJOIN_RETURN_IF_ERROR(s.aggregator->ConsumeDevice(*batch, shape));
    std::copy(batch->statistics().begin(), batch->statistics().end(), statistics->begin());
    PlanStepStatistics& st = (*statistics)[s.aggregate_at];
    st.ran = true;
    st.on_device = true;
    st.rows_in = batch->rows();
    st.rows_out = s.aggregator->groups();
    return PlanTable{};
  }
  // A row plan: the rows the device's steps kept (the batch's device memory
  // and stream go back before the host runs the rest).
  GPUJOIN_ASSIGN_OR_RETURN(PlanTable table, batch->Rows(std::move(input)));
  std::copy(batch->statistics().begin(), batch->statistics().end(), statistics->begin());
  batch.reset();
  GPUJOIN_RETURN_IF_ERROR(plan_detail::CheckTableBytes(table.bytes(), s.limits, "the lookup's rows"));
  std::vector<uint64_t> passed = s.limit_passed;
  GPUJOIN_ASSIGN_OR_RETURN(table, RunSteps(*s.backend, s.plan, shape.steps, s.plan.steps.size(),
                                           std::move(table), indexes, s.labels, s.limits, &passed,
                                           statistics));
  s.limit_passed = std::move(passed);
  return table;
}

absl::StatusOr<PlanTable> PlanRun::Groups(std::span<const HashIndex* const> indexes,
                                          std::vector<PlanStepStatistics>* statistics) {
  State& s = *state_;
  statistics->assign(s.plan.steps.size(), PlanStepStatistics{});
  if (!aggregates()) return absl::FailedPreconditionError("the plan has no aggregate step");
  GPUJOIN_ASSIGN_OR_RETURN(PlanTable groups, s.aggregator->Result());
  PlanStepStatistics& st = (*statistics)[s.aggregate_at];
  st.ran = true;
  st.rows_in = s.aggregator->rows();
  st.rows_out = groups.rows;
  // The steps after the aggregate run on the groups every time they are asked
  // for: their limits count afresh.
  std::vector<uint64_t> passed(s.plan.steps.size(), 0);
  return RunSteps(*s.backend, s.plan, s.aggregate_at + 1, s.plan.steps.size(), std::move(groups),
                  indexes, s.labels, s.limits, &passed, statistics);
}

}  // namespace gpujoin::engine
