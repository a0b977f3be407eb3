// Aggregate through gpujoin-router. Grouped aggregation needs no index, so a
// batch's rows are split in contiguous ranges, one per shard (an integer sum
// or mean goes whole to one shard, the shards taking turns, so that its
// overflow flags are the batch's as on one server); each shard
// answers its range's partial result (a mean as its sum and contributing
// rows), the partials are merged with the engine's own accumulator, and the
// batch's result and the stream's totals are encoded as one gpujoind would.
// Integer sums stay exact across shards; float sums add in their own width
// in another order than one server's (docs/api.md, "Aggregate").
#include <cstring>

#include "absl/strings/str_cat.h"
#include "gpujoin/common/status_macros.hpp"
#include "gpujoin/engine/aggregation.hpp"
#include "ops/aggregate.hpp"
#include "router/routes.hpp"
#include "router/wire_rows.hpp"
#include "wire/aggregate_wire.hpp"

namespace gpujoin::server::router {
namespace {

using engine::AggregateOp;
using engine::ColumnType;
using Answers = std::vector<std::vector<v1::AggregateResponse>>;

template <class T>
std::string PackedRange(std::span<const T> values, uint64_t begin, uint64_t end) {
  return std::string(reinterpret_cast<const char*>(values.data() + begin),
                     (end - begin) * sizeof(T));
}

template <class Column, class T>
Column PackedColumn(std::span<const T> values, uint64_t begin, uint64_t end) {
  Column c;
  if (begin == end) {
    c.mutable_values();  // no rows: an empty list (an empty `packed` is "not sent")
  } else {
    c.set_packed(PackedRange(values, begin, end));
  }
  return c;
}

// Shard s's part of `request`: rows [begin, end), its partial op.
absl::StatusOr<v1::AggregateRequest> RangePart(const v1::AggregateRequest& request,
                                               const AggregateInput& in, uint64_t begin,
                                               uint64_t end) {
  v1::AggregateRequest part;
  part.set_batch_id(request.batch_id());
  part.set_op(in.op == AggregateOp::kMean ? v1::AGGREGATE_OP_SUM : request.op());
  part.set_groups(request.groups());
  *part.mutable_keys() = PackedColumn<v1::U32Column>(in.keys.span(), begin, end);
  if (request.has_values()) {
    *part.mutable_values() = PackedColumn<v1::F32Column>(in.float32_values.span(), begin, end);
  }
  if (request.has_typed_values()) {
    std::vector<uint32_t> rows(end - begin);
    for (uint64_t r = begin; r < end; ++r) rows[r - begin] = static_cast<uint32_t>(r);
    GPUJOIN_ASSIGN_OR_RETURN(*part.mutable_typed_values(),
                             TakeColumnRows(request.typed_values(), rows, "typed_values"));
  }
  if (request.has_mask()) {
    *part.mutable_mask() = PackedColumn<v1::U32Column>(in.wire_mask.span(), begin, end);
  }
  return part;
}

template <class T>
bool Unpack(const std::string& bytes, uint32_t groups, std::vector<T>* out) {
  if (bytes.size() != uint64_t{groups} * sizeof(T)) return false;
  out->resize(groups);
  if (groups > 0) std::memcpy(out->data(), bytes.data(), bytes.size());
  return true;
}

// A shard's answer as the engine's partial of `partial_op` (the inverse of
// EncodeAggregateBatch); INTERNAL naming the shard when it does not fit.
absl::StatusOr<AggregatePartial> PartialOf(const v1::AggregateResponse& r, AggregateOp partial_op,
                                           ColumnType value_type, uint32_t groups,
                                           const std::string& shard) {
  AggregatePartial p;
  auto short_answer = [&](const char* field) {
    return absl::InternalError(
        absl::StrCat(shard, ": its ", field, " do not hold ", groups, " groups"));
  };
  if (!Unpack(r.contributing_rows(), groups, &p.counts)) return short_answer("contributing rows");
  if (partial_op == AggregateOp::kCount) return p;
  p.words.resize(groups);
  if (value_type == ColumnType::kFloat32) {
    std::vector<float> values;
    if (!Unpack(r.values(), groups, &values)) return short_answer("values");
    for (uint32_t g = 0; g < groups; ++g) p.words[g] = engine::WordOfFloat32(values[g]);
    return p;
  }
  const v1::Column& c = r.typed_result();
  const ColumnType type = engine::AggregateResultType(partial_op, value_type);
  const uint64_t width = engine::ColumnWidth(type);
  if (c.length() != groups || c.data().size() != groups * width) {
    return short_answer("typed results");
  }
  for (uint32_t g = 0; g < groups; ++g) {
    const char* at = c.data().data() + g * width;
    if (type == ColumnType::kInt32) {
      int32_t v;
      std::memcpy(&v, at, 4);
      p.words[g] = static_cast<uint64_t>(static_cast<int64_t>(v));
    } else if (width == 4) {
      uint32_t v;
      std::memcpy(&v, at, 4);
      p.words[g] = v;
    } else {
      std::memcpy(&p.words[g], at, 8);
    }
  }
  if (engine::AggregateReportsOverflow(partial_op, value_type)) {
    p.overflow.assign(groups, 0);
    const std::string& bits = r.overflow();
    for (uint32_t g = 0; g < groups && g / 8 < bits.size(); ++g) {
      p.overflow[g] = (static_cast<uint8_t>(bits[g / 8]) >> (g % 8)) & 1u;
    }
  }
  return p;
}

// The batch's partial: the shards' partials merged.
absl::StatusOr<AggregatePartial> MergedPartial(const ShardCalls& calls, const AggregateInput& in,
                                               const Answers& answers) {
  const AggregateOp partial_op = in.op == AggregateOp::kMean ? AggregateOp::kSum : in.op;
  engine::AggregationAccumulator merged(partial_op, in.groups, in.value_type);
  for (uint32_t s = 0; s < answers.size(); ++s) {
    if (answers[s].empty()) continue;  // not sent a part
    GPUJOIN_ASSIGN_OR_RETURN(AggregatePartial p,
                             PartialOf(answers[s].front(), partial_op, in.value_type, in.groups,
                                       calls.shard(s).Name()));
    GPUJOIN_RETURN_IF_ERROR(merged.Merge(p.counts, p.words, p.overflow));
  }
  AggregatePartial out;
  out.counts = merged.counts();
  if (partial_op != AggregateOp::kCount) out.words = merged.Words();
  if (engine::AggregateReportsOverflow(partial_op, in.value_type)) out.overflow = merged.overflow();
  return out;
}

}  // namespace

grpc::Status RouteAggregate(
    const ShardCalls& calls, grpc::ServerContext* ctx,
    grpc::ServerReaderWriter<v1::AggregateResponse, v1::AggregateRequest>* stream) {
  grpc::Status denied = calls.Authorize(ctx);
  if (!denied.ok()) return denied;
  const uint32_t n = calls.count();
  if (n == 1) {
    return calls.Passthrough(ctx, stream, 0, "Aggregate", &v1::GpuJoin::Stub::Aggregate);
  }
  ShardStreams<v1::AggregateRequest, v1::AggregateResponse> shards(
      calls, ctx, &v1::GpuJoin::Stub::Aggregate, "Aggregate");
  AggregateStream totals;
  uint64_t batches = 0;
  v1::AggregateRequest request;
  while (stream->Read(&request)) {
    v1::AggregateResponse out;
    out.set_batch_id(request.batch_id());
    AggregateInput in;
    absl::Status bad = totals.Admit(request, calls.config().max_message_bytes,
                                    calls.config().max_aggregate_groups);
    if (bad.ok()) bad = DecodeAggregateInput(request, &in);
    std::vector<v1::AggregateRequest> parts;
    std::vector<bool> send(n, true);
    const uint64_t rows = in.keys.size();
    // An integer sum's overflow flag is the batch's (its exact sum): such a
    // batch goes whole to one shard, the shards taking turns.
    const bool whole = bad.ok() && engine::AggregateReportsOverflow(
                                       in.op == AggregateOp::kMean ? AggregateOp::kSum : in.op,
                                       in.value_type);
    const uint32_t turn = static_cast<uint32_t>(batches++ % n);
    for (uint32_t s = 0; s < n && bad.ok(); ++s) {
      send[s] = !whole || s == turn;
      if (!send[s]) {
        parts.emplace_back();  // not sent (Exchange skips it): no copy of the batch
        continue;
      }
      const uint64_t begin = whole ? 0 : rows * s / n, end = whole ? rows : rows * (s + 1) / n;
      absl::StatusOr<v1::AggregateRequest> part = RangePart(request, in, begin, end);
      if (part.ok()) parts.push_back(*std::move(part));
      else bad = part.status();
    }
    if (bad.ok()) {
      Answers answers;
      grpc::Status st = shards.Exchange(parts, &answers, &send);
      if (!st.ok()) return st;
      if (auto refused = RefusedBatch(calls, answers)) {
        *out.mutable_error() = *refused;
      } else {
        absl::StatusOr<AggregatePartial> partial = MergedPartial(calls, in, answers);
        if (partial.ok()) bad = EncodeAggregateBatch(in, *partial, &out);
        if (!partial.ok()) return shards.Close(ToGrpc(partial.status()));
        if (bad.ok()) totals.Complete(request, &out, *partial);
      }
    }
    if (!bad.ok()) {
      out.Clear();
      out.set_batch_id(request.batch_id());
      out.mutable_error()->set_code(static_cast<int>(bad.code()));
      out.mutable_error()->set_message(std::string(bad.message()));
    }
    if (!stream->Write(out)) return shards.Close(grpc::Status::CANCELLED);
  }
  return shards.Close(grpc::Status::OK);
}

}  // namespace gpujoin::server::router
