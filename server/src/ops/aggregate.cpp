// Aggregate: one batch decoded and checked (wire/aggregate_wire: keys, float32
// `values` or typed values, mask), one aggregate node run, this batch's result
// encoded; the stream's running totals merged in order by AggregateStream.
#include "ops/aggregate.hpp"

#include <string>

#include "absl/strings/str_cat.h"
#include "gpujoin/common/status_macros.hpp"
#include "gpujoin/engine/graph.hpp"
#include "ops/operations.hpp"
#include "wire/request_checks.hpp"
#include "wire/aggregate_wire.hpp"

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
  const absl::Status merged = accumulator_->Merge(partial.counts, partial.words, partial.overflow);
  if (!merged.ok()) {
    response->Clear();
    response->mutable_error()->set_code(static_cast<int>(merged.code()));
    response->mutable_error()->set_message(std::string(merged.message()));
    return;
  }
  EncodeAggregateTotals(*accumulator_, request.want_counts64(), response);
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
  AggregateInput in;
  GPUJOIN_RETURN_IF_ERROR(DecodeAggregateInput(request, &in));
  const engine::AggregationAccumulator totals_shape(in.op, in.groups, in.value_type);
  const bool count = in.op == AggregateOp::kCount;
  partial->counts.assign(in.groups, 0);
  partial->words.assign(in.groups, 0);
  partial->overflow.assign(engine::AggregateReportsOverflow(in.op, in.value_type) ? in.groups : 0,
                           0);

  engine::CommandGraph graph;
  engine::AggregateNode node;
  node.op = totals_shape.partial_op();
  node.keys = {in.keys.span()};
  node.values = in.values;
  node.mask = in.mask;
  node.output = partial->words;
  node.overflow = partial->overflow;
  node.contributing_rows = partial->counts;
  graph.Add(std::move(node));
  GPUJOIN_RETURN_IF_ERROR(RunGraph(graph));
  if (count) partial->words.clear();  // the counts are the result
  return EncodeAggregateBatch(in, *partial, response);
}

}  // namespace gpujoin::server
