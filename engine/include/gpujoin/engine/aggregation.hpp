// Host helpers for grouped aggregation results: merging partial results from
// several runs (e.g. the batches of one gRPC stream) into one.
#pragma once

#include <bit>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "gpujoin/engine/column.hpp"
#include "gpujoin/engine/graph.hpp"
#include "gpujoin/engine/types.hpp"

namespace gpujoin::engine {

/// The value type of `values` (std::nullopt when unset): kFloat32, kFloat64,
/// kInt32, kInt64, kUint32 or kUint64.
std::optional<ColumnType> AggregateValueType(const AggregateValues& values);

/// The type of the 64-bit result words of `op` over `value_type` values
/// (AggregateNode::output): count -> kUint32; sum -> kInt64 for signed integers,
/// kUint64 for unsigned ones, the float type for floats; min/max -> the value
/// type; mean -> kFloat32 for float32, else kFloat64.
ColumnType AggregateResultType(AggregateOp op, ColumnType value_type);

/// Whether `op` over `value_type` values reports per-group 64-bit overflow:
/// integer sum and mean.
bool AggregateReportsOverflow(AggregateOp op, ColumnType value_type);

/// Whether `type` can be aggregated: float32, float64, int32, int64, uint32, uint64.
bool IsAggregateValueType(ColumnType type);

/// A float32 result word (its low 32 bits) and back.
inline float Float32OfWord(uint64_t word) {
  return std::bit_cast<float>(static_cast<uint32_t>(word));
}
inline uint64_t WordOfFloat32(float value) { return std::bit_cast<uint32_t>(value); }
/// Float32 result words as floats.
std::vector<float> Float32sOfWords(std::span<const uint64_t> words);

/// Running aggregation over several runs (the batches of one stream). For kMean
/// the engine is run with kSum plus `contributing_rows` and the mean is formed at
/// the end, so merged means are exactly sum / count.
///
/// Partials are merged as result words: float sums add in their own width (the
/// float32 reference accumulates in float32) and min/max keep -0 below +0;
/// integer sums add exactly and a group whose running total leaves the 64-bit
/// type, or that overflowed in any partial, stays flagged in overflow() (its word
/// holds the low 64 bits of the exact total; its mean is NaN); integer min/max
/// keep the value type; a float32 mean divides by the wrapped uint32 count, as
/// the reference does, any other mean is the total sum / counts64() as float64.
class AggregationAccumulator {
 public:
  /// `value_type` is ignored for kCount.
  AggregationAccumulator(AggregateOp op, uint32_t groups,
                         ColumnType value_type = ColumnType::kFloat32);

  AggregateOp op() const { return op_; }
  uint32_t groups() const { return groups_; }
  /// The values' type (kFloat32 for count, which has none).
  ColumnType value_type() const { return value_type_; }
  /// The op to run for each partial (kSum for kMean, else op()).
  AggregateOp partial_op() const { return op_ == AggregateOp::kMean ? AggregateOp::kSum : op_; }

  /// Folds in one partial: contributing rows per group, the output words of
  /// partial_op() (empty for kCount, whose counts are the contributing rows) and
  /// (integer sums) the overflow flags of that run (empty otherwise).
  /// INVALID_ARGUMENT when a size does not match.
  absl::Status Merge(std::span<const uint32_t> counts, std::span<const uint64_t> words,
                     std::span<const uint8_t> overflow);

  /// Adds empty groups up to `groups` (no change when it has as many): a
  /// stream whose groups appear as it goes (plans).
  void Grow(uint32_t groups);

  /// Contributing rows per group, wrapping mod 2^32: the result of kCount.
  const std::vector<uint32_t>& counts() const { return counts_; }
  /// Exact contributing rows per group over every partial.
  const std::vector<uint64_t>& counts64() const { return counts64_; }
  /// Result words (AggregateResultType(op(), value_type())), the mean formed;
  /// kCount: the wrapped counts.
  std::vector<uint64_t> Words() const;
  /// Per-group overflow flags (1 = overflow) of integer sum/mean; else all 0.
  const std::vector<uint8_t>& overflow() const { return overflow_; }

 private:
  /// The word of a group no partial contributed to.
  uint64_t EmptyWord() const;

  AggregateOp op_;
  uint32_t groups_;
  ColumnType value_type_;
  std::vector<uint32_t> counts_;
  std::vector<uint64_t> counts64_;
  std::vector<uint64_t> words_;  // running sum / min / max
  std::vector<uint8_t> overflow_;
};

/// Total order used by min/max: -0 below +0 (ordinary order otherwise). NaN never
/// reaches it (non-finite inputs are ignored).
bool FloatLess(float a, float b);
bool FloatLess(double a, double b);

}  // namespace gpujoin::engine
