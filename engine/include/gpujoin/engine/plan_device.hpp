// Aggregate plans on a backend's device: the steps before a plan's aggregate
// (lookups, filters) and the aggregate's group keys and measures of one batch
// run where the backend runs (the GPU for CUDA) over device-resident columns,
// one stream, with one wait for the batch's distinct groups and one for the
// measures (docs/engine.md, "Plans"). PlanRun takes this path when the
// backend offers it (Backend::StartDevicePlan) and the plan's shape is one
// the device runs (DevicePlanShapeOf); every other plan, and every plan on the
// CPU backend, runs its steps on the host (plan.hpp). Both give the same groups
// in the same order and the same measures (float sums up to order).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gpujoin/engine/hash_index.hpp"
#include "gpujoin/engine/plan.hpp"
#include "gpujoin/engine/types.hpp"

namespace gpujoin::engine {

/// The deepest filter expression (nesting levels) and the most literals of
/// one comparison the device's filter takes.
inline constexpr int kDevicePlanMaxExprDepth = 24;
inline constexpr size_t kDevicePlanMaxLiterals = 64;

/// How an aggregate's group-by columns pack into one 64-bit key: the columns'
/// values side by side from bit 0 (a kBool 1 bit, others their width), then
/// one bit per column set where the row's value is null (its value bits 0).
/// At most 63 bits, so that no key is all ones.
struct GroupKeyLayout {
  std::vector<uint8_t> bits;  ///< per group-by column: 1, 32 or 64
  unsigned value_bits = 0;    ///< sum of `bits`
};

/// One measure as the device runs it: `op` over `column` (kNoColumn: rows),
/// masked by the column's validity, as the host path's AggregateNode does.
struct DeviceMeasure {
  AggregateOp op = AggregateOp::kCount;
  uint32_t column = PlanMeasure::kNoColumn;
  ColumnType value_type = ColumnType::kFloat32;  ///< kFloat32 for a count
  bool overflow = false;  ///< whether the output reports overflow flags
};

/// What a device plan batch needs.
struct DevicePlanInput {
  const Plan* plan = nullptr;
  const PlanTable* table = nullptr;
  std::span<const HashIndex* const> indexes;
  GroupKeyLayout layout;
  std::vector<DeviceMeasure> measures;
  /// The aggregate's group limit (PlanLimits::max_groups): the batch's group
  /// table holds at most twice as many slots, and more distinct keys than
  /// that are RESOURCE_EXHAUSTED naming `groups_limit_name`.
  uint64_t max_groups = uint64_t{1} << 24;
  std::string groups_limit_name = "the plan's groups";
};

/// The host outputs of one measure over `groups` groups (AggregateNode's).
struct DeviceMeasureOutput {
  std::span<uint64_t> output;
  std::span<uint32_t> contributing_rows;
  std::span<uint8_t> overflow;  ///< empty unless DeviceMeasure::overflow
};

/// One batch after its steps and its group keys ran on the device.
class DevicePlanBatch {
 public:
  virtual ~DevicePlanBatch() = default;
  /// The distinct group keys (GroupKeyLayout) of the rows reaching the
  /// aggregate, in the order of their first row.
  virtual const std::vector<uint64_t>& group_keys() const = 0;
  /// One per step before the aggregate (rows in and out, lookups' statistics
  /// over the rows reaching them).
  virtual const std::vector<PlanStepStatistics>& statistics() const = 0;
  /// Rows reaching the aggregate.
  virtual uint64_t rows() const = 0;
  /// Runs every measure with group key k coded codes[k] (< groups) into
  /// `outputs` (one per DevicePlanInput::measures entry, each of `groups`).
  virtual absl::Status Aggregate(std::span<const uint32_t> codes, uint32_t groups,
                                 std::span<const DeviceMeasureOutput> outputs) = 0;
};

/// The layout and measures under which `plan` (an aggregate plan) runs on a
/// device for a batch whose input columns have `input_types`, or nullopt when
/// it has a step, column type, expression or measure the device path does
/// not take (strings, labels, keep_all or key-schema indexes, projections
/// and limits before the aggregate, 64-bit integer sums).
std::optional<DevicePlanInput> DevicePlanShapeOf(const Plan& plan,
                                                 std::span<const ColumnType> input_types,
                                                 std::span<const HashIndex* const> indexes);

}  // namespace gpujoin::engine
