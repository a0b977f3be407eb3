// Host helpers for grouped aggregation results: merging partial results from
// several runs (e.g. the batches of one gRPC stream) into one.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "gpujoin/engine/types.hpp"

namespace gpujoin::engine {

/// Running aggregation over several runs. For kMean the engine is run with kSum
/// plus `contributing_rows` and the mean is formed at the end, so merged means are
/// exactly sum / count.
class AggregationAccumulator {
 public:
  AggregationAccumulator(AggregateOp op, uint32_t groups);

  AggregateOp op() const { return op_; }
  uint32_t groups() const { return groups_; }
  /// The op to run for each partial (kSum for kMean, else op()).
  AggregateOp partial_op() const { return op_ == AggregateOp::kMean ? AggregateOp::kSum : op_; }

  /// Folds in one partial: `counts` (kCount output, or contributing rows for other
  /// ops) and `values` (float output of partial_op(); empty for kCount).
  /// INVALID_ARGUMENT when sizes do not match groups().
  absl::Status Merge(std::span<const uint32_t> counts, std::span<const float> values);

  /// Final result: counts for kCount (wrapping mod 2^32); floats otherwise.
  const std::vector<uint32_t>& counts() const { return counts_; }
  std::vector<float> Values() const;

 private:
  AggregateOp op_;
  uint32_t groups_;
  std::vector<uint32_t> counts_;
  std::vector<float> values_;  // running sum / min / max
};

/// Total order used by min/max: -0 below +0 (ordinary order otherwise). NaN never
/// reaches it (non-finite inputs are ignored).
bool FloatLess(float a, float b);

}  // namespace gpujoin::engine
