// A Query plan's wire form (v1::Plan) checked whole and resolved against the
// input batch's columns and the live indexes into an engine::Plan, with the
// names of the columns each step makes (docs/api.md "Query").
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "gpujoin/engine/plan.hpp"
#include "gpujoin/v1/gpujoin.pb.h"
#include "state/index_registry.hpp"

namespace gpujoin::server {

/// Most steps one plan may have.
inline constexpr size_t kMaxPlanSteps = 64;

/// What a lookup step needs of its index, checked again on every batch (a
/// rebuild may change the schema of a name).
struct PlanIndexUse {
  std::string name;
  engine::KeyType key_type = engine::KeyType::kUint32;
  std::vector<engine::ColumnType> key_types;
  /// The selected payload columns: positions, names and types.
  std::vector<uint32_t> select;
  std::vector<std::string> select_names;
  std::vector<engine::ColumnType> select_types;
  /// Position of the step in the plan.
  uint32_t step = 0;
};

struct CompiledPlan {
  engine::Plan plan;
  /// One per index slot (engine::PlanLookupStep::index_slot).
  std::vector<PlanIndexUse> indexes;
  /// The input batch's columns, as every batch must send them.
  std::vector<std::string> input_names;
  std::vector<engine::ColumnType> input_types;
  /// The result's column names and types (after the last step).
  std::vector<std::string> output_names;
  std::vector<engine::ColumnType> output_types;
  /// "lookup", "filter", ... per step.
  std::vector<std::string> step_kinds;
};

/// Finds the live version of an index by name (NOT_FOUND naming `field`).
using FindIndexFn = std::function<absl::StatusOr<std::shared_ptr<const IndexVersion>>(
    const std::string& name, std::string_view field)>;

/// Checks `plan` over input columns `names` / `types`. INVALID_ARGUMENT naming
/// `plan.steps[i].<step>.<field>` (and the value), NOT_FOUND for an unknown
/// index.
absl::StatusOr<CompiledPlan> CompilePlan(const v1::Plan& plan, std::vector<std::string> names,
                                         std::vector<engine::ColumnType> types,
                                         const FindIndexFn& find_index);

/// Whether `version` still serves `use` (same key and selected columns);
/// FAILED_PRECONDITION naming what changed otherwise.
absl::Status CheckIndexUse(const PlanIndexUse& use, const IndexVersion& version);

}  // namespace gpujoin::server
