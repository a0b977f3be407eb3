// Grouped aggregation: the operation, the stream-wide spec, one batch and its answer.
#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <string_view>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpujoin/client/column.hpp"
#include "gpujoin/common/operation_kinds.hpp"

namespace gpujoin::client {

// Grouped aggregation operations, their names and parser (gpujoin/common/operation_kinds.hpp).
using ::gpujoin::AggregateOp;
using ::gpujoin::AggregateOpName;
using ::gpujoin::ParseAggregateOp;

/// Stream-wide aggregation parameters.
struct AggregateSpec {
  AggregateOp op = AggregateOp::kCount;
  uint32_t groups = 0;  ///< output rows: keys must be < groups (others are ignored)
  /// The type of every batch's AggregateBatch::values (ignored for kCount):
  /// kFloat32 (the reference float32 results), or kFloat64, kInt32, kInt64,
  /// kUint32, kUint64 (typed results: integer sums exact in 64 bits, overflow
  /// reported).
  ColumnType value_type = ColumnType::kFloat32;
  /// Also return total_counts64 for count and float32 streams (typed streams
  /// always get it).
  bool want_counts64 = false;
};

/// Aggregation values (borrowed): one span of the spec's value_type; none for count.
using AggregateValues =
    std::variant<std::monostate, std::span<const float>, std::span<const double>,
                 std::span<const int32_t>, std::span<const int64_t>, std::span<const uint32_t>,
                 std::span<const uint64_t>>;

/// One Aggregate batch (borrowed).
struct AggregateBatch {
  std::span<const uint32_t> keys;  ///< dense group keys
  /// Value ops: same length as keys, of spec.value_type; none for count.
  AggregateValues values;
  std::span<const uint32_t> mask;  ///< optional; nonzero includes the row
  bool accumulate_only = false;    ///< answer only with the stream's running totals
  /// Optional nulls of `values`: an Arrow bitmap (LSB first, 1 = valid) of
  /// ceil(rows / 8) bytes; empty = no nulls. A null value does not contribute to
  /// its group (sum, min, max, mean, contributing rows), like a row `mask`
  /// leaves out (SQL's aggregates skip nulls). Another size, or a bitmap on a
  /// count or float32 stream (which has no validity: use `mask`), is
  /// INVALID_ARGUMENT before the batch is sent.
  std::span<const uint8_t> validity;
};

/// The answer to one Aggregate batch.
struct AggregateResult {
  uint64_t batch_id = 0;
  std::vector<uint32_t> counts;             ///< kCount: this batch, per group
  std::vector<float> values;                ///< other ops: this batch, per group
  std::vector<uint32_t> contributing_rows;  ///< this batch, per group
  std::vector<uint32_t> total_counts;       ///< kCount: whole stream so far
  std::vector<float> total_values;          ///< other ops: whole stream so far
  uint64_t rows = 0;
  absl::Status error;
  std::chrono::nanoseconds latency{0};
  /// Typed streams: the type of the result words (sum: kInt64, kUint64 or
  /// kFloat64; min/max: the value type; mean: kFloat64).
  ColumnType result_type = ColumnType::kFloat32;
  /// Typed streams, per group, as 64-bit words (int64/uint64 bits, float64
  /// bits; int32 min/max sign-extended, uint32 zero-extended): this batch and
  /// the whole stream so far. An overflowed integer sum holds the low 64 bits of
  /// its exact sum (its mean is NaN).
  std::vector<uint64_t> typed_values;
  std::vector<uint64_t> total_typed_values;
  /// Per group, 0 for a null group (an empty group of an integer min/max, whose
  /// word is 0) and 1 otherwise; empty when the result has no null group.
  std::vector<uint8_t> total_valid;
  /// Exact contributing rows over the stream (typed streams and want_counts64).
  std::vector<uint64_t> total_counts64;
  /// Integer sum/mean, per group: 1 where the exact sum does not fit 64 bits, in
  /// this batch and over the stream (sticky); empty otherwise.
  std::vector<uint8_t> overflow;
  std::vector<uint8_t> total_overflow;
  uint64_t total_overflow_groups = 0;
};

}  // namespace gpujoin::client
