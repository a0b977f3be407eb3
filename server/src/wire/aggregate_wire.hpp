// The Aggregate request and response on the wire: the operation and the value
// type a request names, and the typed results and flag bitmaps a response carries.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "absl/status/statusor.h"
#include "gpujoin/engine/aggregation.hpp"
#include "gpujoin/engine/column.hpp"
#include "gpujoin/v1/gpujoin.pb.h"

namespace gpujoin::server {

/// The engine operation of a request's `op` (INVALID_ARGUMENT naming `op` when
/// it is not one).
absl::StatusOr<engine::AggregateOp> ToEngineOp(v1::AggregateOp op);

/// The value type a request aggregates: kFloat32 for `values` (and count), else
/// typed_values' type, which must be a typed aggregation type (INVALID_ARGUMENT
/// naming typed_values or typed_values.type otherwise).
absl::StatusOr<engine::ColumnType> AggregateRequestValueType(const v1::AggregateRequest& request,
                                                             engine::AggregateOp op);

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
