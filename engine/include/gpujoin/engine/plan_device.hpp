// Plans lowered onto a backend: a plan's leading lookups and filters, and an
// aggregate's group keys and measures, run where the backend runs (the GPU
// for CUDA, the host's threads for the CPU backend) as one batch: the input
// columns go up once, each step narrows a live-row mask (no row is copied
// between steps), and one wait brings back what the host needs (docs/engine.md,
// "Plans on the device"). PlanRun takes this path (Backend::StartDevicePlan)
// when the plan's shape is one the lowering takes (DevicePlanShapeOf): an
// aggregate plan whose every step before the aggregate is lowered, or a row
// plan that starts with such steps (the rest, projections and limits for
// instance, then runs on the host over the rows that came back). Every other
// plan runs its steps one by one on the host path (plan.hpp), as every plan
// does with PlanLimits::device_batches off. Both paths give the same rows and
// groups in the same order and the same measures (float sums up to order).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gpujoin/engine/dictionary.hpp"
#include "gpujoin/engine/hash_index.hpp"
#include "gpujoin/engine/plan.hpp"
#include "gpujoin/engine/types.hpp"

namespace gpujoin::engine {

/// The deepest filter expression (nesting levels) and the most literals of
/// one comparison the device's filter takes.
inline constexpr int kDevicePlanMaxExprDepth = 24;
inline constexpr size_t kDevicePlanMaxLiterals = 64;

/// How an aggregate's group-by columns pack into one 64-bit key: the columns'
/// values side by side from bit 0 (a kBool 1 bit, a label's code as many as
/// hold its dictionary's size, others their width), then one bit per column
/// set where the row's value is null (its value bits 0; so is a label code
/// past its bits). At most 63 bits, so that no key is all ones.
/// A labelled group-by column (PlanAggregateStep::group_labels) holds the
/// dictionary codes its lookup gathered: `dictionaries` names the dictionary
/// (StringDictionary of the index's PayloadDictionary) whose values they code,
/// and the aggregate turns each distinct code into its label.
struct GroupKeyLayout {
  std::vector<uint8_t> bits;  ///< per group-by column: 1, 32 or 64
  unsigned value_bits = 0;    ///< sum of `bits`
  /// Per group-by column: its codes' dictionary (labelled), else null.
  std::vector<const StringDictionary*> dictionaries;
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
  /// Steps [0, steps) run on the device: for an aggregate plan every step
  /// before the aggregate (which then codes its groups there too).
  size_t steps = 0;
  bool aggregate = false;
  /// Per input column: whether a device step reads it (only those go up).
  std::vector<bool> uploaded;
  std::span<const HashIndex* const> indexes;
  /// Per device step: the payload column each of a lookup's select entries
  /// gathers (a labelled entry's dictionary codes column); empty for filters.
  std::vector<std::vector<uint32_t>> gathered;
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
  /// Aggregate plans: runs every measure with group key k coded codes[k]
  /// (< groups) into `outputs` (one per DevicePlanInput::measures entry, each
  /// of `groups`).
  virtual absl::Status Aggregate(std::span<const uint32_t> codes, uint32_t groups,
                                 std::span<const DeviceMeasureOutput> outputs) = 0;
  /// Row plans: the table after the device's steps (`input`, the batch the
  /// batch started from, then each lookup's selected columns and found
  /// column), its rows those the steps kept, in order.
  virtual absl::StatusOr<PlanTable> Rows(PlanTable input) = 0;
};

/// RESOURCE_EXHAUSTED: an aggregate past `max_groups` groups, named `name`
/// (PlanLimits::groups_limit_name); the host path and the device's say the same.
absl::Status GroupLimitError(uint64_t max_groups, const std::string& name);

/// How `plan` runs on a device for a batch whose input columns have
/// `input_types`, or nullopt when it does not: an aggregate plan with a step,
/// column type, expression or measure the device path does not take before
/// its aggregate (string columns, labels other than a group-by over an
/// index's live dictionary, keep_all or key-schema indexes, projections and
/// limits, 64-bit integer sums, group keys wider than 63 bits), or a row plan
/// whose first step is not a device step.
std::optional<DevicePlanInput> DevicePlanShapeOf(const Plan& plan,
                                                 std::span<const ColumnType> input_types,
                                                 std::span<const HashIndex* const> indexes);

}  // namespace gpujoin::engine
