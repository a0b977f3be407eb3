#include "wire/aggregate_wire.hpp"

#include <vector>

#include "absl/strings/str_cat.h"
#include "gpujoin/common/status_macros.hpp"
#include "wire/column_codec.hpp"

namespace gpujoin::server {

using engine::AggregateOp;

absl::StatusOr<AggregateOp> ToEngineOp(v1::AggregateOp op) {
  switch (op) {
    case v1::AGGREGATE_OP_COUNT:
      return AggregateOp::kCount;
    case v1::AGGREGATE_OP_SUM:
      return AggregateOp::kSum;
    case v1::AGGREGATE_OP_MIN:
      return AggregateOp::kMin;
    case v1::AGGREGATE_OP_MAX:
      return AggregateOp::kMax;
    case v1::AGGREGATE_OP_MEAN:
      return AggregateOp::kMean;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("op: ", static_cast<int>(op),
                       " is not an operation; set AGGREGATE_OP_COUNT, _SUM, _MIN, _MAX or _MEAN"));
  }
}

absl::StatusOr<engine::ColumnType> AggregateRequestValueType(const v1::AggregateRequest& request,
                                                             AggregateOp op) {
  if (!request.has_typed_values()) return engine::ColumnType::kFloat32;
  if (op == AggregateOp::kCount) {
    return absl::InvalidArgumentError("typed_values: must not be set for AGGREGATE_OP_COUNT");
  }
  GPUJOIN_ASSIGN_OR_RETURN(engine::ColumnType type,
                           FromWireColumnType(request.typed_values().type(), "typed_values.type"));
  if (type == engine::ColumnType::kFloat32) {
    return absl::InvalidArgumentError(
        "typed_values.type: COLUMN_TYPE_FLOAT32 values travel in `values` (the reference "
        "float32 path)");
  }
  if (!engine::IsTypedAggregateValue(type)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "typed_values.type: ", WireColumnTypeName(request.typed_values().type()),
        " cannot be aggregated; use INT32, INT64, UINT32, UINT64 or FLOAT64 (or `values` for "
        "float32)"));
  }
  return type;
}

std::string FlagBitmap(std::span<const uint8_t> flags, uint64_t* set) {
  std::string out(engine::BitmapBytes(flags.size()), '\0');
  uint64_t n = 0;
  for (size_t i = 0; i < flags.size(); ++i) {
    if (flags[i] == 0) continue;
    out[i / 8] = static_cast<char>(static_cast<uint8_t>(out[i / 8]) | (1u << (i % 8)));
    ++n;
  }
  if (set != nullptr) *set = n;
  return out;
}

template <typename Count>
v1::Column TypedResultColumn(AggregateOp op, engine::ColumnType value_type,
                             std::span<const uint64_t> words, std::span<const Count> rows) {
  const engine::ColumnType type = engine::AggregateResultType(op, value_type);
  v1::Column c;
  c.set_type(ToWireColumnType(type));
  c.set_length(words.size());
  if (engine::ColumnWidth(type) == 4) {
    std::vector<uint32_t> narrow(words.begin(), words.end());  // the low 32 bits
    c.set_data(PackColumn<uint32_t>(narrow));
  } else {
    c.set_data(PackColumn<uint64_t>(words));
  }
  const bool minmax = op == AggregateOp::kMin || op == AggregateOp::kMax;
  if (minmax && value_type != engine::ColumnType::kFloat64) {
    std::vector<uint8_t> valid(rows.size());
    uint64_t nulls = 0;
    for (size_t g = 0; g < rows.size(); ++g) {
      valid[g] = rows[g] != 0;
      nulls += rows[g] == 0;
    }
    if (nulls > 0) {
      c.set_validity(FlagBitmap(valid, nullptr));
      c.set_null_count(nulls);
    }
  }
  return c;
}

template v1::Column TypedResultColumn<uint32_t>(AggregateOp, engine::ColumnType,
                                                std::span<const uint64_t>,
                                                std::span<const uint32_t>);
template v1::Column TypedResultColumn<uint64_t>(AggregateOp, engine::ColumnType,
                                                std::span<const uint64_t>,
                                                std::span<const uint64_t>);

}  // namespace gpujoin::server
