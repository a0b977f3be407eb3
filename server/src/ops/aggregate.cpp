// Aggregate: one batch decoded and checked (keys, float32 `values` or typed
// values, mask), one aggregate node run, this batch's result encoded; the stream's
// running totals merged in order by AggregateStream.
#include "ops/aggregate.hpp"

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "gpujoin/common/status_macros.hpp"
#include "gpujoin/engine/graph.hpp"
#include "ops/operations.hpp"
#include "ops/request_checks.hpp"
#include "wire/aggregate_wire.hpp"
#include "wire/column_codec.hpp"

namespace gpujoin::server {
namespace {

using detail::CheckFitsU32;
using engine::AggregateOp;

// Per-group output bytes of an aggregate response (batch + totals + contributing rows).
constexpr uint64_t kAggregateBytesPerGroup = 4 * 3;
// ... of a typed response: 8-byte batch and total results, contributing rows,
// uint64 total counts, and under 1 byte of validity and overflow bitmaps.
constexpr uint64_t kTypedAggregateBytesPerGroup = 8 + 8 + 4 + 8 + 4;
// ... of a float32 or count response with want_counts64.
constexpr uint64_t kCounts64AggregateBytesPerGroup = kAggregateBytesPerGroup + 8;

}  // namespace

absl::Status AggregateStream::Admit(const v1::AggregateRequest& request, uint64_t max_message_bytes,
                                    uint64_t max_groups) {
  GPUJOIN_ASSIGN_OR_RETURN(AggregateOp op, ToEngineOp(request.op()));
  if (request.groups() == 0) return absl::InvalidArgumentError("groups: must be at least 1");
  GPUJOIN_RETURN_IF_ERROR(CheckFitsU32(request.groups(), "groups"));
  // Output, accumulators and work grow with the group count, whatever the rows:
  // a few bytes of request must not buy gigabytes.
  if (request.groups() > max_groups) {
    return absl::ResourceExhaustedError(
        absl::StrCat("groups: ", request.groups(),
                     " groups is over the limit --max-aggregate-groups=", max_groups));
  }
  GPUJOIN_ASSIGN_OR_RETURN(const engine::ColumnType value_type,
                           AggregateRequestValueType(request, op));
  const bool typed = value_type != engine::ColumnType::kFloat32;
  const uint64_t per_group = typed ? kTypedAggregateBytesPerGroup
                             : request.want_counts64() ? kCounts64AggregateBytesPerGroup
                                                       : kAggregateBytesPerGroup;
  const uint64_t limit = max_message_bytes / per_group;
  if (request.groups() > limit) {
    return absl::InvalidArgumentError(
        absl::StrCat("groups: ", request.groups(), " groups need more than --max-message-bytes=",
                     max_message_bytes, " per response (at most ", limit, " groups)"));
  }
  if (accumulator_.has_value()) {
    if (accumulator_->op() != op || accumulator_->groups() != request.groups()) {
      return absl::InvalidArgumentError(
          absl::StrCat("op/groups: this stream aggregates ",
                       std::string(engine::AggregateOpName(accumulator_->op())), " over ",
                       accumulator_->groups(), " groups; a batch asked for ",
                       std::string(engine::AggregateOpName(op)), " over ", request.groups(),
                       " (both must stay the same within a stream)"));
    }
    if (op != AggregateOp::kCount && accumulator_->value_type() != value_type) {
      const bool was_typed = accumulator_->value_type() != engine::ColumnType::kFloat32;
      return absl::InvalidArgumentError(absl::StrCat(
          typed ? "typed_values.type" : "values", ": this stream aggregates ",
          std::string(engine::ColumnTypeName(accumulator_->value_type())), " values (",
          was_typed ? "typed_values" : "values", "); a batch sent ",
          std::string(engine::ColumnTypeName(value_type)),
          " (the value type must stay the same within a stream)"));
    }
  } else {
    accumulator_.emplace(op, static_cast<uint32_t>(request.groups()), value_type);
  }
  return absl::OkStatus();
}

void AggregateStream::Complete(const v1::AggregateRequest& request, v1::AggregateResponse* response,
                               AggregatePartial& partial) {
  // Admit() ran before this batch was processed, so the accumulator exists and the
  // partial has its shape.
  const bool typed = accumulator_->value_type() != engine::ColumnType::kFloat32;
  absl::Status merged = typed ? accumulator_->Merge(partial.counts, partial.words, partial.overflow)
                              : accumulator_->Merge(partial.counts, partial.values);
  if (!merged.ok()) {
    response->Clear();
    response->mutable_error()->set_code(static_cast<int>(merged.code()));
    response->mutable_error()->set_message(std::string(merged.message()));
    return;
  }
  if (accumulator_->op() == AggregateOp::kCount) {
    *response->mutable_total_counts() = PackColumn<uint32_t>(accumulator_->counts());
  } else if (typed) {
    const std::vector<uint64_t> totals = accumulator_->Words();
    *response->mutable_total_typed_result() = TypedResultColumn<uint64_t>(
        accumulator_->op(), accumulator_->value_type(), totals, accumulator_->counts64());
    if (engine::AggregateReportsOverflow(accumulator_->op(), accumulator_->value_type())) {
      uint64_t set = 0;
      *response->mutable_total_overflow() = FlagBitmap(accumulator_->overflow(), &set);
      response->set_total_overflow_groups(set);
    }
  } else {
    const std::vector<float> totals = accumulator_->Values();
    *response->mutable_total_values() = PackColumn<float>(totals);
  }
  if (typed || request.want_counts64()) {
    *response->mutable_total_counts64() = PackColumn<uint64_t>(accumulator_->counts64());
  }
  if (request.accumulate_only()) {
    response->clear_counts();
    response->clear_values();
    response->clear_contributing_rows();
    response->clear_typed_result();
    response->clear_overflow();
  }
}

absl::Status Operations::Aggregate(const v1::AggregateRequest& request,
                                   v1::AggregateResponse* response, AggregatePartial* partial) {
  GPUJOIN_ASSIGN_OR_RETURN(AggregateOp op, ToEngineOp(request.op()));
  const uint32_t groups = static_cast<uint32_t>(request.groups());  // Admit checked it
  GPUJOIN_ASSIGN_OR_RETURN(
      auto keys, DecodeU32Column(request.has_keys(), request.keys(), "keys", Presence::kRequired));
  GPUJOIN_ASSIGN_OR_RETURN(auto values, DecodeF32Column(request.has_values(), request.values(),
                                                        "values", Presence::kOptional));
  GPUJOIN_ASSIGN_OR_RETURN(
      auto mask, DecodeU32Column(request.has_mask(), request.mask(), "mask", Presence::kOptional));
  if (op == AggregateOp::kCount && values.present()) {
    return absl::InvalidArgumentError("values: must not be set for AGGREGATE_OP_COUNT");
  }
  GPUJOIN_ASSIGN_OR_RETURN(const engine::ColumnType value_type,
                           AggregateRequestValueType(request, op));
  if (value_type != engine::ColumnType::kFloat32) {
    if (values.present()) {
      return absl::InvalidArgumentError(
          "values: set together with typed_values; send the values in exactly one of them");
    }
    if (mask.present() && mask.size() != keys.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("mask: ", mask.size(), " rows but keys has ", keys.size()));
    }
    return AggregateTyped(request, op, value_type, keys.span(),
                          mask.present() ? std::optional(mask.span()) : std::nullopt, response,
                          partial);
  }
  if (op != AggregateOp::kCount) {
    if (!values.present()) {
      return absl::InvalidArgumentError(
          absl::StrCat("values: required for AGGREGATE_OP_",
                       absl::AsciiStrToUpper(std::string(engine::AggregateOpName(op)))));
    }
    if (values.size() != keys.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("values: ", values.size(), " rows but keys has ", keys.size()));
    }
  }
  if (mask.present() && mask.size() != keys.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("mask: ", mask.size(), " rows but keys has ", keys.size()));
  }

  const engine::AggregationAccumulator shape(op, groups);
  const AggregateOp partial_op = shape.partial_op();
  partial->counts.assign(groups, 0);
  if (partial_op != AggregateOp::kCount) partial->values.assign(groups, 0.0f);

  engine::CommandGraph graph;
  engine::AggregateNode node;
  node.op = partial_op;
  node.keys = {keys.span()};
  if (values.present()) node.values = {values.span()};
  if (mask.present()) node.mask = engine::ChunkedU32{mask.span()};
  if (partial_op == AggregateOp::kCount) {
    node.count_output = partial->counts;
  } else {
    node.value_output = partial->values;
    node.contributing_rows = partial->counts;
  }
  graph.Add(std::move(node));
  GPUJOIN_RETURN_IF_ERROR(RunGraph(graph));

  response->set_rows(keys.size());
  *response->mutable_contributing_rows() = PackColumn<uint32_t>(partial->counts);
  if (op == AggregateOp::kCount) {
    *response->mutable_counts() = PackColumn<uint32_t>(partial->counts);
  } else if (op == AggregateOp::kMean) {
    // This batch's own mean: its sums over its contributing rows.
    engine::AggregationAccumulator batch(op, groups);
    GPUJOIN_RETURN_IF_ERROR(batch.Merge(partial->counts, partial->values));
    *response->mutable_values() = PackColumn<float>(batch.Values());
  } else {
    *response->mutable_values() = PackColumn<float>(partial->values);
  }
  return absl::OkStatus();
}

absl::Status Operations::AggregateTyped(const v1::AggregateRequest& request, AggregateOp op,
                                        engine::ColumnType value_type,
                                        std::span<const uint32_t> keys,
                                        std::optional<std::span<const uint32_t>> mask,
                                        v1::AggregateResponse* response,
                                        AggregatePartial* partial) {
  const uint32_t groups = static_cast<uint32_t>(request.groups());  // Admit checked it
  const v1::Column& column = request.typed_values();
  const size_t width = engine::ColumnWidth(value_type);
  if (!column.offsets().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "typed_values.offsets: ", column.offsets().size(), " bytes set, but ",
        std::string(engine::ColumnTypeName(value_type)), " values are fixed width (send none)"));
  }
  if (column.length() != keys.size() || column.data().size() != column.length() * width) {
    return absl::InvalidArgumentError(absl::StrCat(
        "typed_values: length ", column.length(), " and ", column.data().size(),
        " bytes of data, but keys has ", keys.size(), " rows (", width, " bytes per ",
        std::string(engine::ColumnTypeName(value_type)), " value)"));
  }
  // Null values (validity bit 0) do not contribute, as SQL's aggregates skip
  // nulls: to the engine they are masked-out rows. The combined mask costs 4
  // bytes a row, bounded by the request's own size.
  const std::string& validity = column.validity();
  std::vector<uint32_t> valid_mask;
  if (!validity.empty()) {
    if (validity.size() != engine::BitmapBytes(keys.size())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "typed_values.validity: ", validity.size(), " bytes, but a bitmap of ", keys.size(),
          " rows has ceil(", keys.size(), " / 8) = ", engine::BitmapBytes(keys.size()),
          " (or send none: no nulls)"));
    }
    valid_mask.resize(keys.size());
    for (size_t r = 0; r < keys.size(); ++r) {
      valid_mask[r] = BitSet(validity, r) && (!mask.has_value() || (*mask)[r] != 0) ? 1 : 0;
    }
    mask = std::span<const uint32_t>(valid_mask);
  }
  const engine::AggregationAccumulator shape(op, groups, value_type);
  const AggregateOp partial_op = shape.partial_op();
  const bool flags = engine::AggregateReportsOverflow(op, value_type);
  partial->counts.assign(groups, 0);
  partial->words.assign(groups, 0);
  partial->overflow.assign(flags ? groups : 0, 0);

  engine::CommandGraph graph;
  engine::AggregateNode node;
  node.op = partial_op;
  node.keys = {keys};
  if (mask.has_value()) node.mask = engine::ChunkedU32{*mask};
  node.typed_output = partial->words;
  node.overflow = partial->overflow;
  node.contributing_rows = partial->counts;
  // The values, aligned: borrowed when the request's bytes are, else copied (they
  // outlive the run). Float64 values are read through their uint64 words.
  DecodedColumn<uint32_t> words32;
  DecodedColumn<uint64_t> words64;
  if (width == 4) {
    GPUJOIN_ASSIGN_OR_RETURN(words32,
                             DecodePackedBytes<uint32_t>(column.data(), "typed_values.data"));
  } else {
    GPUJOIN_ASSIGN_OR_RETURN(words64,
                             DecodePackedBytes<uint64_t>(column.data(), "typed_values.data"));
  }
  auto view = [&](auto tag) {
    using V = decltype(tag);
    const void* data = width == 4 ? static_cast<const void*>(words32.span().data())
                                  : static_cast<const void*>(words64.span().data());
    return engine::Chunked<V>{std::span<const V>(static_cast<const V*>(data), keys.size())};
  };
  engine::AggregateValues typed;
  switch (value_type) {
    case engine::ColumnType::kInt32:
      typed = view(int32_t{});
      break;
    case engine::ColumnType::kInt64:
      typed = view(int64_t{});
      break;
    case engine::ColumnType::kUint32:
      typed = view(uint32_t{});
      break;
    case engine::ColumnType::kUint64:
      typed = view(uint64_t{});
      break;
    default:
      typed = view(double{});
      break;
  }
  node.typed_values = std::move(typed);
  graph.Add(std::move(node));
  GPUJOIN_RETURN_IF_ERROR(RunGraph(graph));

  response->set_rows(keys.size());
  *response->mutable_contributing_rows() = PackColumn<uint32_t>(partial->counts);
  if (op == AggregateOp::kMean) {
    // This batch's own mean: its exact sums over its contributing rows.
    engine::AggregationAccumulator batch(op, groups, value_type);
    GPUJOIN_RETURN_IF_ERROR(batch.Merge(partial->counts, partial->words, partial->overflow));
    const std::vector<uint64_t> means = batch.Words();
    *response->mutable_typed_result() =
        TypedResultColumn<uint32_t>(op, value_type, means, partial->counts);
  } else {
    *response->mutable_typed_result() =
        TypedResultColumn<uint32_t>(op, value_type, partial->words, partial->counts);
  }
  if (flags) *response->mutable_overflow() = FlagBitmap(partial->overflow, nullptr);
  return absl::OkStatus();
}

}  // namespace gpujoin::server
