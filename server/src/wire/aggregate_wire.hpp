// The Aggregate request and response on the wire: a batch decoded and checked
// into what the engine's aggregate node reads (float32 `values` and typed_values
// alike), and a batch's result and a stream's totals encoded into the fields of
// their type (counts, float32 values, or typed results and flag bitmaps).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gpujoin/engine/aggregation.hpp"
#include "gpujoin/engine/column.hpp"
#include "gpujoin/engine/graph.hpp"
#include "gpujoin/v1/gpujoin.pb.h"
#include "wire/column_codec.hpp"

namespace gpujoin::server {

/// The engine operation of a request's `op` (INVALID_ARGUMENT naming `op` when
/// it is not one).
absl::StatusOr<engine::AggregateOp> ToEngineOp(v1::AggregateOp op);

/// The value type a request aggregates: kFloat32 for `values` (and count), else
/// typed_values' type, which must be a typed aggregation type (INVALID_ARGUMENT
/// naming typed_values or typed_values.type otherwise).
absl::StatusOr<engine::ColumnType> AggregateRequestValueType(const v1::AggregateRequest& request,
                                                             engine::AggregateOp op);

/// One Aggregate batch as the engine reads it: keys, the values of the request's
/// value type (float32 `values` or typed_values; none for count) and the mask,
/// with null typed values folded into the mask (they do not contribute). The
/// views point into the request or into copies held here: keep both alive while
/// the engine runs.
struct AggregateInput {
  engine::AggregateOp op = engine::AggregateOp::kCount;
  uint32_t groups = 0;
  engine::ColumnType value_type = engine::ColumnType::kFloat32;  ///< kFloat32 for count
  DecodedColumn<uint32_t> keys;
  engine::AggregateValues values;
  std::optional<engine::ChunkedU32> mask;

  // Storage behind `values` and `mask` where the request's bytes cannot be borrowed.
  DecodedColumn<float> float32_values;
  DecodedColumn<uint32_t> words32;  ///< 4-byte typed values
  DecodedColumn<uint64_t> words64;  ///< 8-byte typed values
  DecodedColumn<uint32_t> wire_mask;
  std::vector<uint32_t> valid_mask;  ///< mask and validity combined
};

/// Decodes and checks one batch (op, groups, keys, values, mask, validity):
/// INVALID_ARGUMENT naming the field and the sizes involved.
absl::Status DecodeAggregateInput(const v1::AggregateRequest& request, AggregateInput* input);

/// The engine's result of one batch, merged into the stream's totals in order:
/// contributing rows (for count, the counts), the output words of the partial op
/// (AggregationAccumulator::partial_op) and (integer sums) the overflow flags.
struct AggregatePartial {
  std::vector<uint32_t> counts;
  std::vector<uint64_t> words;
  std::vector<uint8_t> overflow;
};

/// This batch's result into `response`: rows, contributing rows, and the counts
/// (count), float32 values or typed result (and overflow bitmap) of its op.
absl::Status EncodeAggregateBatch(const AggregateInput& input, const AggregatePartial& partial,
                                  v1::AggregateResponse* response);

/// The stream's totals so far into `response`, in the fields of its value type;
/// total_counts64 for typed streams and when `want_counts64`.
void EncodeAggregateTotals(const engine::AggregationAccumulator& totals, bool want_counts64,
                           v1::AggregateResponse* response);

/// An Arrow bitmap (LSB first) of the nonzero flags; `*set` (when not null) gets
/// the number of nonzero flags.
std::string FlagBitmap(std::span<const uint8_t> flags, uint64_t* set);

/// A typed aggregation result as a wire Column: AggregateResultType's type, the
/// 64-bit engine words narrowed to 4 bytes for 32-bit min/max results, and the
/// empty groups of an integer min/max null (`rows` = contributing rows per group).
/// Defined for Count = uint32_t (a batch's rows) and uint64_t (a stream's).
template <typename Count>
v1::Column TypedResultColumn(engine::AggregateOp op, engine::ColumnType value_type,
                             std::span<const uint64_t> words, std::span<const Count> rows);

}  // namespace gpujoin::server
