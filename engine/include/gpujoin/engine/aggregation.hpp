// Host helpers for grouped aggregation results: merging partial results from
// several runs (e.g. the batches of one gRPC stream) into one.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "gpujoin/engine/column.hpp"
#include "gpujoin/engine/graph.hpp"
#include "gpujoin/engine/types.hpp"

namespace gpujoin::engine {

/// The value type of `values` (std::nullopt when unset): kInt32, kInt64, kUint32,
/// kUint64 or kFloat64.
std::optional<ColumnType> AggregateValueType(const AggregateValues& values);

/// The type of the 64-bit result words of `op` over `value_type` values (a typed
/// aggregation, AggregateNode::typed_output): sum -> kInt64 for signed integers,
/// kUint64 for unsigned ones, kFloat64 for floats; min/max -> the value type; mean
/// -> kFloat64; count -> kUint32. kFloat32 values give the float32 path's kFloat32.
ColumnType AggregateResultType(AggregateOp op, ColumnType value_type);

/// Whether `op` over `value_type` values reports per-group 64-bit overflow:
/// integer sum and mean.
bool AggregateReportsOverflow(AggregateOp op, ColumnType value_type);

/// Whether `type` is a value type of typed aggregation (int32, int64, uint32,
/// uint64, float64; float32 is the untyped `values` path).
bool IsTypedAggregateValue(ColumnType type);

/// Running aggregation over several runs. For kMean the engine is run with kSum
/// plus `contributing_rows` and the mean is formed at the end, so merged means are
/// exactly sum / count.
///
/// Typed accumulators (value_type other than kFloat32; count and the float32 path
/// use kFloat32) merge 64-bit result words: integer sums add exactly and a group
/// whose running total leaves the 64-bit type, or that overflowed in any
/// partial, stays flagged in overflow() (its word holds the low 64 bits of the
/// exact total; its mean is NaN); min/max keep the value type; the mean is the
/// exact total sum / counts64() as float64.
class AggregationAccumulator {
 public:
  AggregationAccumulator(AggregateOp op, uint32_t groups,
                         ColumnType value_type = ColumnType::kFloat32);

  AggregateOp op() const { return op_; }
  uint32_t groups() const { return groups_; }
  /// kFloat32 for count and the float32 path; else the typed value type.
  ColumnType value_type() const { return value_type_; }
  /// The op to run for each partial (kSum for kMean, else op()).
  AggregateOp partial_op() const { return op_ == AggregateOp::kMean ? AggregateOp::kSum : op_; }

  /// Folds in one float32 partial: `counts` (kCount output, or contributing rows
  /// for other ops) and `values` (float output of partial_op(); empty for kCount).
  /// INVALID_ARGUMENT when sizes do not match groups() or the accumulator is typed.
  absl::Status Merge(std::span<const uint32_t> counts, std::span<const float> values);

  /// Folds in one typed partial: contributing rows, the typed_output words of
  /// partial_op() and (integer sums) the overflow flags of that run (empty
  /// otherwise). INVALID_ARGUMENT when sizes do not match or the accumulator is
  /// not typed.
  absl::Status Merge(std::span<const uint32_t> counts, std::span<const uint64_t> words,
                     std::span<const uint8_t> overflow);

  /// Final result: counts for kCount (wrapping mod 2^32); floats otherwise.
  const std::vector<uint32_t>& counts() const { return counts_; }
  /// Exact contributing rows per group over every partial.
  const std::vector<uint64_t>& counts64() const { return counts64_; }
  std::vector<float> Values() const;
  /// Typed result words (AggregateResultType(op(), value_type())), the mean formed.
  std::vector<uint64_t> Words() const;
  /// Per-group overflow flags (1 = overflow) of integer sum/mean; else all 0.
  const std::vector<uint8_t>& overflow() const { return overflow_; }

 private:
  AggregateOp op_;
  uint32_t groups_;
  ColumnType value_type_;
  std::vector<uint32_t> counts_;
  std::vector<uint64_t> counts64_;
  std::vector<float> values_;    // running sum / min / max (float32)
  std::vector<uint64_t> words_;  // running sum / min / max (typed)
  std::vector<uint8_t> overflow_;
};

/// Total order used by min/max: -0 below +0 (ordinary order otherwise). NaN never
/// reaches it (non-finite inputs are ignored).
bool FloatLess(float a, float b);
bool FloatLess(double a, double b);

}  // namespace gpujoin::engine
