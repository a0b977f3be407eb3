// Aggregation and hashing nodes on the CUDA backend (lowering.hpp).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <span>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cuda/aggregate/aggregate_ops.hpp"
#include "cuda/cuda_error.hpp"
#include "cuda/hash/hash_device.hpp"
#include "cuda/lowering/lowering.hpp"
#include "gpujoin/common/status_macros.hpp"
#include "gpujoin/engine/aggregation.hpp"

namespace gpujoin::engine::detail {
namespace {

// A captured aggregation: inputs gathered into the graph's pinned buffer, one
// launch, one wait, results out of its pinned output.
absl::Status ReplayAggregateGraph(StreamContext& ctx, AggregateGraph& graph, size_t i,
                                  const AggregateNode& n) {
  auto gather = [](const auto& chunks, void* dst) {
    auto* out = static_cast<uint8_t*>(dst);
    for (const auto& c : chunks) {
      if (c.empty()) continue;  // an empty chunk may have no data pointer
      std::memcpy(out, c.data(), c.size_bytes());
      out += c.size_bytes();
    }
  };
  const bool typed = graph.shape().value_type != ColumnType::kFloat32;
  gather(n.keys, graph.keys());
  if (graph.values() != nullptr) {
    if (typed) {
      std::visit(
          [&](const auto& column) {
            if constexpr (!std::is_same_v<std::decay_t<decltype(column)>, std::monostate>) {
              gather(column, graph.values());
            }
          },
          n.typed_values);
    } else {
      gather(n.values, graph.values());
    }
  }
  if (graph.mask() != nullptr) gather(*n.mask, graph.mask());
  GPUJOIN_CUDA_RETURN(graph.Launch(ctx.stream()),
                      absl::StrCat("node ", i, " (aggregate ", std::string(AggregateOpName(n.op)),
                                   "): replay aggregate graph"));
  GPUJOIN_RETURN_IF_ERROR(ctx.Synchronize("aggregate"));
  if (n.op == AggregateOp::kCount) {
    std::memcpy(n.count_output.data(), graph.counts(), n.count_output.size_bytes());
  } else if (typed) {
    std::memcpy(n.typed_output.data(), graph.output(), n.typed_output.size_bytes());
  } else {
    std::memcpy(n.value_output.data(), graph.output(), n.value_output.size_bytes());
  }
  if (graph.overflow() != nullptr) {
    std::memcpy(n.overflow.data(), graph.overflow(), n.overflow.size());
  }
  // For count every in-range, unmasked row contributes: the same numbers.
  if (!n.contributing_rows.empty()) {
    std::memcpy(n.contributing_rows.data(), graph.counts(), n.contributing_rows.size_bytes());
  }
  return absl::OkStatus();
}

// A typed aggregation (AggregateNode::typed_values of V), uncaptured: uploads,
// one Aggregate call, downloads.
template <typename V>
absl::Status RunTyped(StreamContext& ctx, size_t i, const AggregateNode& n,
                      const Chunked<V>& column, ColumnType type, uint32_t groups) {
  const uint64_t rows = TotalRows(n.keys);
  const std::string where =
      absl::StrCat("node ", i, " (aggregate ", std::string(AggregateOpName(n.op)), " over ",
                   std::string(ColumnTypeName(type)), ")");
  GPUJOIN_ASSIGN_OR_RETURN(auto keys, Alloc<uint32_t>(rows, ctx, "aggregate keys"));
  GPUJOIN_RETURN_IF_ERROR(ctx.Upload(keys.data(), RangesOf(n.keys), "aggregate keys"));
  GPUJOIN_ASSIGN_OR_RETURN(auto values, Alloc<V>(rows, ctx, "aggregate values"));
  GPUJOIN_RETURN_IF_ERROR(ctx.Upload(values.data(), RangesOf(column), "aggregate values"));
  DeviceBuffer<uint32_t> mask;
  if (n.mask.has_value()) {
    GPUJOIN_ASSIGN_OR_RETURN(mask, Alloc<uint32_t>(rows, ctx, "aggregate mask"));
    GPUJOIN_RETURN_IF_ERROR(ctx.Upload(mask.data(), RangesOf(*n.mask), "aggregate mask"));
  }
  const bool need_counts = AggregateNeedsCounts(n.op, type) || !n.contributing_rows.empty();
  DeviceBuffer<uint32_t> counts;
  if (need_counts) {
    GPUJOIN_ASSIGN_OR_RETURN(counts, Alloc<uint32_t>(groups, ctx, "aggregate counts"));
  }
  GPUJOIN_ASSIGN_OR_RETURN(
      auto output,
      Alloc<uint64_t>(AggregateTypedOutputWords(n.op, type, groups), ctx, "aggregate output"));
  DeviceBuffer<uint8_t> overflow;
  if (!n.overflow.empty()) {
    GPUJOIN_ASSIGN_OR_RETURN(overflow, Alloc<uint8_t>(groups, ctx, "aggregate overflow"));
  }
  AggregateArgs a;
  a.op = n.op;
  a.keys = keys.data();
  a.mask = n.mask.has_value() ? mask.data() : nullptr;
  a.rows = rows;
  a.groups = groups;
  a.counts = counts.data();
  a.value_type = type;
  a.typed_values = values.data();
  a.typed_output = output.data();
  a.overflow = n.overflow.empty() ? nullptr : overflow.data();
  GPUJOIN_CUDA_RETURN(Aggregate(a, ctx.stream()), where);
  GPUJOIN_RETURN_IF_ERROR(ctx.Download(n.typed_output.data(), output.data(),
                                       n.typed_output.size_bytes(), "aggregate output"));
  GPUJOIN_RETURN_IF_ERROR(
      ctx.Download(n.overflow.data(), overflow.data(), n.overflow.size_bytes(), "overflow"));
  GPUJOIN_RETURN_IF_ERROR(ctx.Download(n.contributing_rows.data(), counts.data(),
                                       n.contributing_rows.size_bytes(), "contributing rows"));
  return absl::OkStatus();
}

}  // namespace

absl::Status RunNode(const LoweringEnv& env, StreamContext& ctx, size_t i, const AggregateNode& n) {
  const uint64_t rows = TotalRows(n.keys);
  const bool count_op = n.op == AggregateOp::kCount;
  const bool typed = !count_op && n.typed_values.index() != 0;
  const size_t group_rows =
      count_op ? n.count_output.size() : (typed ? n.typed_output.size() : n.value_output.size());
  if (group_rows > 0xffffffffu) {
    return absl::InvalidArgumentError(
        absl::StrCat("node ", i, " (aggregate): output has ", group_rows,
                     " groups; the cuda backend supports at most 2^32 - 1"));
  }
  const uint32_t groups = uint32_t(group_rows);
  const ColumnType value_type =
      typed ? *AggregateValueType(n.typed_values) : ColumnType::kFloat32;
  const bool need_counts = count_op || AggregateNeedsCounts(n.op, value_type) ||
                           !n.contributing_rows.empty();
  // Small nodes of a shape seen before on this context replay a captured graph.
  const AggregateShape shape{n.op,        rows,       groups, n.mask.has_value(), need_counts,
                             value_type, typed && !n.overflow.empty()};
  auto graph = ctx.aggregate_graphs().Get(shape, ctx.stream());
  if (graph.ok() && *graph != nullptr) return ReplayAggregateGraph(ctx, **graph, i, n);
  // Otherwise (first sight, too large, or a failed capture: that shape is not
  // captured again on this context) the node runs uncaptured; a device that is
  // gone for good fails there and is noted by Run.
  if (typed) {
    return std::visit(
        [&](const auto& column) -> absl::Status {
          using C = std::decay_t<decltype(column)>;
          if constexpr (std::is_same_v<C, std::monostate>) {
            return absl::InternalError("unreachable: typed aggregation without values");
          } else {
            using V = typename C::value_type::value_type;
            return RunTyped<V>(ctx, i, n, column, value_type, groups);
          }
        },
        n.typed_values);
  }
  GPUJOIN_ASSIGN_OR_RETURN(auto keys, Alloc<uint32_t>(rows, ctx, "aggregate keys"));
  GPUJOIN_RETURN_IF_ERROR(ctx.Upload(keys.data(), RangesOf(n.keys), "aggregate keys"));
  DeviceBuffer<float> values;
  DeviceBuffer<uint32_t> mask;
  if (!count_op) {
    GPUJOIN_ASSIGN_OR_RETURN(values, Alloc<float>(rows, ctx, "aggregate values"));
    GPUJOIN_RETURN_IF_ERROR(ctx.Upload(values.data(), RangesOf(n.values), "aggregate values"));
  }
  if (n.mask.has_value()) {
    GPUJOIN_ASSIGN_OR_RETURN(mask, Alloc<uint32_t>(rows, ctx, "aggregate mask"));
    GPUJOIN_RETURN_IF_ERROR(ctx.Upload(mask.data(), RangesOf(*n.mask), "aggregate mask"));
  }
  DeviceBuffer<uint32_t> counts;
  DeviceBuffer<float> output;
  if (need_counts) {
    GPUJOIN_ASSIGN_OR_RETURN(counts, Alloc<uint32_t>(groups, ctx, "aggregate counts"));
  }
  if (!count_op) {
    GPUJOIN_ASSIGN_OR_RETURN(output, Alloc<float>(groups, ctx, "aggregate output"));
  }
  AggregateArgs a;
  a.op = n.op;
  a.keys = keys.data();
  a.values = values.data();
  a.mask = n.mask.has_value() ? mask.data() : nullptr;
  a.rows = rows;
  a.groups = groups;
  a.counts = counts.data();
  a.output = output.data();
  GPUJOIN_CUDA_RETURN(
      Aggregate(a, ctx.stream()),
      absl::StrCat("node ", i, " (aggregate ", std::string(AggregateOpName(n.op)), ")"));
  if (count_op) {
    GPUJOIN_RETURN_IF_ERROR(
        ctx.Download(n.count_output.data(), counts.data(), n.count_output.size_bytes(), "counts"));
    // For count every in-range, unmasked row contributes: the same numbers.
    GPUJOIN_RETURN_IF_ERROR(ctx.Download(n.contributing_rows.data(), counts.data(),
                                         n.contributing_rows.size_bytes(), "contributing rows"));
  } else {
    GPUJOIN_RETURN_IF_ERROR(ctx.Download(n.value_output.data(), output.data(),
                                         n.value_output.size_bytes(), "aggregate output"));
    GPUJOIN_RETURN_IF_ERROR(ctx.Download(n.contributing_rows.data(), counts.data(),
                                         n.contributing_rows.size_bytes(), "contributing rows"));
  }
  return absl::OkStatus();
}

absl::Status RunNode(const LoweringEnv& env, StreamContext& ctx, size_t, const HashNode& n) {
  return HashRowsDevice(n, ctx.stream());
}

}  // namespace gpujoin::engine::detail
