// A plan's aggregate step: rows coded into dense groups on the host (first
// arrival order), every measure of a batch one AggregateNode of one command
// graph on the backend, partials merged across batches by
// AggregationAccumulator. A batch that ran on the device (plan_device.hpp)
// brings its distinct group keys instead, and runs its measures there.
#pragma once

#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/plan/plan_table.hpp"
#include "gpujoin/engine/backend.hpp"
#include "gpujoin/engine/plan.hpp"
#include "gpujoin/engine/plan_device.hpp"

namespace gpujoin::engine::plan_detail {

/// A group key packed into two words when the group-by columns are fixed
/// width of at most 64 bits together: their values side by side from bit 0
/// (a kBool 1 bit, others their width), and a bit per column set where it is
/// null (its value bits zero). A lowered batch's key (GroupKeyLayout,
/// plan_device.hpp) is one word, value | nulls << value_bits, with a label's
/// code in fewer bits: HostKey turns it into this one.
using PackedKey = std::pair<uint64_t, uint64_t>;

/// The bits a group-by column of `type` takes in a PackedKey: 1 for kBool,
/// else its width's.
unsigned HostKeyBits(ColumnType type);

/// The packed key of row `row` of the group-by `columns`; with `bits`
/// (GroupKeyLayout::bits, the lowered batch's) column i takes bits[i] bits
/// and a value past them is a null.
PackedKey PackKey(std::span<const PlanColumn* const> columns, uint64_t row,
                  std::span<const uint8_t> bits = {});

class GroupAggregator {
 public:
  /// `types`: the column types of the table the step sees. `labels` (the
  /// run's label tables, of `label_types`) names the values of the group-by
  /// columns that step.group_labels marks (a device batch's labelled keys
  /// add values to them).
  GroupAggregator(const PlanAggregateStep& step, std::vector<ColumnType> types,
                  const PlanLimits& limits, std::vector<LabelTable>* labels,
                  std::span<const ColumnType> label_types);
  ~GroupAggregator();

  /// Folds `table` in. On error nothing changes.
  absl::Status Consume(Backend& backend, const PlanTable& table);

  /// Folds in a batch whose steps and group keys ran on the device
  /// (plan_device.hpp; `input` is what started it). On error nothing changes.
  absl::Status ConsumeDevice(DevicePlanBatch& batch, const DevicePlanInput& input);

  /// The group-by columns then one column per measure, one row per group
  /// (OUT_OF_RANGE for an integer sum that left its type). Names are the
  /// caller's (left empty).
  absl::StatusOr<PlanTable> Result() const;

  uint64_t groups() const;
  /// Rows folded in so far (by the batches that succeeded).
  uint64_t rows() const;

 private:
  /// One batch's measure outputs over all groups so far (AggregateNode's).
  struct Partials {
    Partials(size_t measures, uint32_t groups)
        : words(measures), counts(measures, std::vector<uint32_t>(groups)), overflow(measures),
          high_words(measures) {}
    std::vector<std::vector<uint64_t>> words;
    std::vector<std::vector<uint32_t>> counts;
    std::vector<std::vector<uint8_t>> overflow;
    /// 64-bit integer sums (host path): the high halves' sums.
    std::vector<std::vector<uint64_t>> high_words;
  };
  /// A lowered batch's group key (GroupKeyLayout) as the host path packs it,
  /// each label's dictionary code turned into its label id, a code past the
  /// dictionary into a null (the run's label tables learn new values, as on
  /// the host path).
  PackedKey HostKey(const GroupKeyLayout& layout, uint64_t device_key);
  /// Grows to `groups` and merges a batch of `rows` rows.
  absl::Status MergePartials(uint64_t rows, uint32_t groups, const Partials& partials);

  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace gpujoin::engine::plan_detail
