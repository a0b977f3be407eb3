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

// The device call writes counts (count) and float32 results as 32-bit values,
// every other result as words: the node's output holds words for all of them.
void WidenInto(std::span<uint64_t> out, const uint32_t* counts) {
  for (size_t g = 0; g < out.size(); ++g) out[g] = counts[g];
}
void WidenInto(std::span<uint64_t> out, const float* values) {
  for (size_t g = 0; g < out.size(); ++g) out[g] = WordOfFloat32(values[g]);
}

}  // namespace

absl::Status AggregateDevice(StreamContext& ctx, const std::string& where, AggregateOp op,
                             const uint32_t* keys, const void* values, ColumnType type,
                             const uint32_t* mask, uint64_t rows, uint32_t groups,
                             const AggregateDeviceOutputs& out) {
  const bool count_op = op == AggregateOp::kCount;
  const bool float32 = !count_op && type == ColumnType::kFloat32;
  const bool need_counts =
      count_op || AggregateNeedsCounts(op, type) || !out.contributing_rows.empty();
  DeviceBuffer<uint32_t> counts;
  if (need_counts) {
    GPUJOIN_ASSIGN_OR_RETURN(counts, Alloc<uint32_t>(groups, ctx, "aggregate counts"));
  }
  // float32 results are floats on the device; other value ops accumulate in
  // AggregateTypedOutputWords words, the first `groups` of which are the result.
  const size_t output_bytes =
      count_op ? 0 : float32 ? groups * sizeof(float)
                             : AggregateTypedOutputWords(op, type, groups) * sizeof(uint64_t);
  GPUJOIN_ASSIGN_OR_RETURN(auto output, Alloc<uint8_t>(output_bytes, ctx, "aggregate output"));
  DeviceBuffer<uint8_t> overflow;
  if (!out.overflow.empty()) {
    GPUJOIN_ASSIGN_OR_RETURN(overflow, Alloc<uint8_t>(groups, ctx, "aggregate overflow"));
  }
  AggregateArgs a;
  a.op = op;
  a.keys = keys;
  a.mask = mask;
  a.rows = rows;
  a.groups = groups;
  a.counts = counts.data();
  a.value_type = type;
  a.values = values;
  a.output = output.data();
  a.overflow = out.overflow.empty() ? nullptr : overflow.data();
  GPUJOIN_CUDA_RETURN(Aggregate(a, ctx.stream()), where);
  // One wait for every output where they fit in staging together.
  std::vector<uint32_t> narrow(count_op || float32 ? groups : 0);  // counts, or float32 bits
  std::vector<HostPiece> pieces;
  if (count_op || float32) {
    pieces.push_back({narrow.data(),
                      count_op ? static_cast<const void*>(counts.data())
                               : static_cast<const void*>(output.data()),
                      groups * sizeof(uint32_t)});
  } else {
    pieces.push_back({out.output.data(), output.data(), out.output.size_bytes()});
  }
  pieces.push_back({out.overflow.data(), overflow.data(), out.overflow.size_bytes()});
  // For count every in-range, unmasked row contributes: the same numbers.
  pieces.push_back({out.contributing_rows.data(), counts.data(), out.contributing_rows.size_bytes()});
  GPUJOIN_RETURN_IF_ERROR(ctx.DownloadAll(pieces, "aggregate output"));
  if (count_op) {
    WidenInto(out.output, narrow.data());
  } else if (float32) {
    WidenInto(out.output, reinterpret_cast<const float*>(narrow.data()));
  }
  return absl::OkStatus();
}

namespace {

// Calls fn(column) with the node's value column (Chunked<V>), or with nullptr
// (as a const Chunked<float>*) for count, which reads no values.
template <typename Fn>
absl::Status WithValues(const AggregateNode& n, Fn&& fn) {
  return std::visit(
      [&](const auto& column) -> absl::Status {
        using C = std::decay_t<decltype(column)>;
        if constexpr (std::is_same_v<C, std::monostate>) {
          return fn(static_cast<const Chunked<float>*>(nullptr));
        } else {
          return fn(&column);
        }
      },
      n.values);
}

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
  gather(n.keys, graph.keys());
  if (graph.values() != nullptr) {
    GPUJOIN_RETURN_IF_ERROR(WithValues(n, [&](const auto* column) {
      if (column != nullptr) gather(*column, graph.values());
      return absl::OkStatus();
    }));
  }
  if (graph.mask() != nullptr) gather(*n.mask, graph.mask());
  GPUJOIN_CUDA_RETURN(graph.Launch(ctx.stream()),
                      absl::StrCat("node ", i, " (aggregate ", std::string(AggregateOpName(n.op)),
                                   "): replay aggregate graph"));
  GPUJOIN_RETURN_IF_ERROR(ctx.Synchronize("aggregate"));
  const auto* counts = reinterpret_cast<const uint32_t*>(graph.counts());
  if (n.op == AggregateOp::kCount) {
    WidenInto(n.output, counts);
  } else if (graph.shape().value_type == ColumnType::kFloat32) {
    WidenInto(n.output, reinterpret_cast<const float*>(graph.output()));
  } else {
    std::memcpy(n.output.data(), graph.output(), n.output.size_bytes());
  }
  if (graph.overflow() != nullptr) {
    std::memcpy(n.overflow.data(), graph.overflow(), n.overflow.size());
  }
  // For count every in-range, unmasked row contributes: the same numbers.
  if (!n.contributing_rows.empty()) {
    std::memcpy(n.contributing_rows.data(), counts, n.contributing_rows.size_bytes());
  }
  return absl::OkStatus();
}

// An aggregation uncaptured: uploads, then AggregateDevice. `column` is the
// values (null for count) of `type`.
template <typename V>
absl::Status RunUncaptured(StreamContext& ctx, size_t i, const AggregateNode& n,
                           const Chunked<V>* column, ColumnType type, uint32_t groups) {
  const uint64_t rows = TotalRows(n.keys);
  const bool count_op = n.op == AggregateOp::kCount;
  const std::string where =
      absl::StrCat("node ", i, " (aggregate ", std::string(AggregateOpName(n.op)),
                   count_op ? std::string() : absl::StrCat(" over ", std::string(ColumnTypeName(type))), ")");
  GPUJOIN_ASSIGN_OR_RETURN(auto keys, Alloc<uint32_t>(rows, ctx, "aggregate keys"));
  GPUJOIN_RETURN_IF_ERROR(ctx.Upload(keys.data(), RangesOf(n.keys), "aggregate keys"));
  DeviceBuffer<V> values;
  if (column != nullptr) {
    GPUJOIN_ASSIGN_OR_RETURN(values, Alloc<V>(rows, ctx, "aggregate values"));
    GPUJOIN_RETURN_IF_ERROR(ctx.Upload(values.data(), RangesOf(*column), "aggregate values"));
  }
  DeviceBuffer<uint32_t> mask;
  if (n.mask.has_value()) {
    GPUJOIN_ASSIGN_OR_RETURN(mask, Alloc<uint32_t>(rows, ctx, "aggregate mask"));
    GPUJOIN_RETURN_IF_ERROR(ctx.Upload(mask.data(), RangesOf(*n.mask), "aggregate mask"));
  }
  return AggregateDevice(ctx, where, n.op, keys.data(), values.data(), type,
                         n.mask.has_value() ? mask.data() : nullptr, rows, groups,
                         {n.output, n.contributing_rows, n.overflow});
}

}  // namespace

absl::Status RunNode(const LoweringEnv& env, StreamContext& ctx, size_t i, const AggregateNode& n) {
  const uint64_t rows = TotalRows(n.keys);
  const bool count_op = n.op == AggregateOp::kCount;
  if (n.output.size() > 0xffffffffu) {
    return absl::InvalidArgumentError(
        absl::StrCat("node ", i, " (aggregate): output has ", n.output.size(),
                     " groups; the cuda backend supports at most 2^32 - 1"));
  }
  const uint32_t groups = uint32_t(n.output.size());
  const ColumnType value_type = AggregateValueType(n.values).value_or(ColumnType::kFloat32);
  const bool need_counts = count_op || AggregateNeedsCounts(n.op, value_type) ||
                           !n.contributing_rows.empty();
  // Small nodes of a shape seen before on this context replay a captured graph.
  const bool flags = !count_op && value_type != ColumnType::kFloat32 && !n.overflow.empty();
  const AggregateShape shape{n.op,       rows, groups, n.mask.has_value(), need_counts,
                             value_type, flags};
  auto graph = ctx.aggregate_graphs().Get(shape, ctx.stream());
  if (graph.ok() && *graph != nullptr) return ReplayAggregateGraph(ctx, **graph, i, n);
  // Otherwise (first sight, too large, or a failed capture: that shape is not
  // captured again on this context) the node runs uncaptured; a device that is
  // gone for good fails there and is noted by Run.
  return WithValues(n, [&](const auto* column) {
    return RunUncaptured(ctx, i, n, column, value_type, groups);
  });
}

absl::Status RunNode(const LoweringEnv& env, StreamContext& ctx, size_t, const HashNode& n) {
  return HashRowsDevice(n, ctx.stream());
}

}  // namespace gpujoin::engine::detail
