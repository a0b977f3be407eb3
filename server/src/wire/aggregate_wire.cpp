#include "wire/aggregate_wire.hpp"

#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "gpujoin/common/status_macros.hpp"
#include "wire/column_codec.hpp"

namespace gpujoin::server {

using engine::AggregateOp;
using engine::ColumnType;

namespace {

absl::Status CheckMaskRows(const AggregateInput& in) {
  if (in.wire_mask.present() && in.wire_mask.size() != in.keys.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("mask: ", in.wire_mask.size(), " rows but keys has ", in.keys.size()));
  }
  return absl::OkStatus();
}

// The float32 `values` of a value op (count has checked they are unset).
absl::Status DecodeFloat32Values(AggregateInput* out) {
  const AggregateInput& in = *out;
  if (!in.float32_values.present()) {
    return absl::InvalidArgumentError(
        absl::StrCat("values: required for AGGREGATE_OP_",
                     absl::AsciiStrToUpper(std::string(engine::AggregateOpName(in.op)))));
  }
  if (in.float32_values.size() != in.keys.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "values: ", in.float32_values.size(), " rows but keys has ", in.keys.size()));
  }
  out->values = engine::Chunked<float>{in.float32_values.span()};
  return absl::OkStatus();
}

// typed_values of in->value_type: shape, data, and nulls folded into the mask.
absl::Status DecodeTypedValues(const v1::Column& column, AggregateInput* in) {
  const size_t rows = in->keys.size();
  const size_t width = engine::ColumnWidth(in->value_type);
  const std::string type(engine::ColumnTypeName(in->value_type));
  if (!column.offsets().empty()) {
    return absl::InvalidArgumentError(absl::StrCat("typed_values.offsets: ",
                                                   column.offsets().size(), " bytes set, but ",
                                                   type, " values are fixed width (send none)"));
  }
  if (column.length() != rows || column.data().size() != column.length() * width) {
    return absl::InvalidArgumentError(absl::StrCat(
        "typed_values: length ", column.length(), " and ", column.data().size(),
        " bytes of data, but keys has ", rows, " rows (", width, " bytes per ", type, " value)"));
  }
  // Null values (validity bit 0) do not contribute, as SQL's aggregates skip
  // nulls: to the engine they are masked-out rows. The combined mask costs 4
  // bytes a row, bounded by the request's own size.
  const std::string& validity = column.validity();
  if (!validity.empty()) {
    if (validity.size() != engine::BitmapBytes(rows)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "typed_values.validity: ", validity.size(), " bytes, but a bitmap of ", rows,
          " rows has ceil(", rows, " / 8) = ", engine::BitmapBytes(rows),
          " (or send none: no nulls)"));
    }
    const bool masked = in->wire_mask.present();
    in->valid_mask.resize(rows);
    for (size_t r = 0; r < rows; ++r) {
      in->valid_mask[r] = BitSet(validity, r) && (!masked || in->wire_mask.span()[r] != 0);
    }
    in->mask = engine::ChunkedU32{std::span<const uint32_t>(in->valid_mask)};
  }
  // The values, aligned: borrowed when the request's bytes are, else copied.
  // Float64 values are read through their uint64 words.
  if (width == 4) {
    GPUJOIN_ASSIGN_OR_RETURN(in->words32,
                             DecodePackedBytes<uint32_t>(column.data(), "typed_values.data"));
  } else {
    GPUJOIN_ASSIGN_OR_RETURN(in->words64,
                             DecodePackedBytes<uint64_t>(column.data(), "typed_values.data"));
  }
  const void* data = width == 4 ? static_cast<const void*>(in->words32.span().data())
                                : static_cast<const void*>(in->words64.span().data());
  auto view = [&](auto tag) -> engine::AggregateValues {
    using V = decltype(tag);
    return engine::Chunked<V>{std::span<const V>(static_cast<const V*>(data), rows)};
  };
  switch (in->value_type) {
    case ColumnType::kInt32:
      in->values = view(int32_t{});
      break;
    case ColumnType::kInt64:
      in->values = view(int64_t{});
      break;
    case ColumnType::kUint32:
      in->values = view(uint32_t{});
      break;
    case ColumnType::kUint64:
      in->values = view(uint64_t{});
      break;
    default:
      in->values = view(double{});
      break;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status DecodeAggregateInput(const v1::AggregateRequest& request, AggregateInput* in) {
  GPUJOIN_ASSIGN_OR_RETURN(in->op, ToEngineOp(request.op()));
  in->groups = static_cast<uint32_t>(request.groups());  // AggregateStream::Admit checked it
  GPUJOIN_ASSIGN_OR_RETURN(
      in->keys, DecodeU32Column(request.has_keys(), request.keys(), "keys", Presence::kRequired));
  GPUJOIN_ASSIGN_OR_RETURN(in->float32_values,
                           DecodeF32Column(request.has_values(), request.values(), "values",
                                           Presence::kOptional));
  GPUJOIN_ASSIGN_OR_RETURN(
      in->wire_mask,
      DecodeU32Column(request.has_mask(), request.mask(), "mask", Presence::kOptional));
  if (in->op == AggregateOp::kCount && in->float32_values.present()) {
    return absl::InvalidArgumentError("values: must not be set for AGGREGATE_OP_COUNT");
  }
  GPUJOIN_ASSIGN_OR_RETURN(in->value_type, AggregateRequestValueType(request, in->op));
  const bool typed = request.has_typed_values();
  if (typed && in->float32_values.present()) {
    return absl::InvalidArgumentError(
        "values: set together with typed_values; send the values in exactly one of them");
  }
  if (typed) GPUJOIN_RETURN_IF_ERROR(CheckMaskRows(*in));
  if (in->wire_mask.present()) in->mask = engine::ChunkedU32{in->wire_mask.span()};
  if (typed) return DecodeTypedValues(request.typed_values(), in);
  if (in->op != AggregateOp::kCount) GPUJOIN_RETURN_IF_ERROR(DecodeFloat32Values(in));
  return CheckMaskRows(*in);
}

absl::Status EncodeAggregateBatch(const AggregateInput& in, const AggregatePartial& partial,
                                  v1::AggregateResponse* response) {
  response->set_rows(in.keys.size());
  *response->mutable_contributing_rows() = PackColumn<uint32_t>(partial.counts);
  if (in.op == AggregateOp::kCount) {
    *response->mutable_counts() = PackColumn<uint32_t>(partial.counts);
    return absl::OkStatus();
  }
  std::vector<uint64_t> words = partial.words;
  if (in.op == AggregateOp::kMean) {
    // This batch's own mean: its sums over its contributing rows.
    engine::AggregationAccumulator batch(in.op, in.groups, in.value_type);
    GPUJOIN_RETURN_IF_ERROR(batch.Merge(partial.counts, partial.words, partial.overflow));
    words = batch.Words();
  }
  if (in.value_type == ColumnType::kFloat32) {
    *response->mutable_values() = PackColumn<float>(engine::Float32sOfWords(words));
    return absl::OkStatus();
  }
  *response->mutable_typed_result() =
      TypedResultColumn<uint32_t>(in.op, in.value_type, words, partial.counts);
  if (engine::AggregateReportsOverflow(in.op, in.value_type)) {
    *response->mutable_overflow() = FlagBitmap(partial.overflow, nullptr);
  }
  return absl::OkStatus();
}

void EncodeAggregateTotals(const engine::AggregationAccumulator& totals, bool want_counts64,
                           v1::AggregateResponse* response) {
  const bool typed = totals.op() != AggregateOp::kCount &&
                     totals.value_type() != ColumnType::kFloat32;
  if (totals.op() == AggregateOp::kCount) {
    *response->mutable_total_counts() = PackColumn<uint32_t>(totals.counts());
  } else if (!typed) {
    *response->mutable_total_values() = PackColumn<float>(engine::Float32sOfWords(totals.Words()));
  } else {
    *response->mutable_total_typed_result() = TypedResultColumn<uint64_t>(
        totals.op(), totals.value_type(), totals.Words(), totals.counts64());
    if (engine::AggregateReportsOverflow(totals.op(), totals.value_type())) {
      uint64_t set = 0;
      *response->mutable_total_overflow() = FlagBitmap(totals.overflow(), &set);
      response->set_total_overflow_groups(set);
    }
  }
  if (typed || want_counts64) {
    *response->mutable_total_counts64() = PackColumn<uint64_t>(totals.counts64());
  }
}

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
  if (!engine::IsAggregateValueType(type)) {
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
