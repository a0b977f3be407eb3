#include "cuda/graphs/aggregate_graph_cache.hpp"

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "cuda/aggregate/aggregate_ops.hpp"
#include "cuda/cuda_error.hpp"

namespace gpujoin::engine::detail {
namespace {

GraphCounters g_counters;

constexpr size_t kNoPart = ~size_t{0};

size_t Align256(size_t v) { return (v + 255) & ~size_t{255}; }

bool ValueOp(AggregateOp op) { return op != AggregateOp::kCount; }

bool Typed(const AggregateShape& s) {
  return ValueOp(s.op) && s.value_type != ColumnType::kFloat32;
}

// Byte offsets of the input and output parts (kNoPart when absent) and sizes.
struct Layout {
  size_t values_at = kNoPart, mask_at = kNoPart, in_bytes = 0;
  size_t counts_at = kNoPart, output_at = kNoPart, overflow_at = kNoPart, out_bytes = 0;
};
Layout LayoutOf(const AggregateShape& s) {
  Layout l;
  size_t at = s.rows * 4;  // keys
  if (ValueOp(s.op)) {
    l.values_at = Align256(at);
    at = l.values_at + s.rows * (Typed(s) ? ColumnWidth(s.value_type) : 4);
  }
  if (s.mask) {
    l.mask_at = Align256(at);
    at = l.mask_at + s.rows * 4;
  }
  l.in_bytes = at;
  at = 0;
  if (s.counts) {
    l.counts_at = 0;
    at = size_t(s.groups) * 4;
  }
  if (ValueOp(s.op)) {
    l.output_at = Align256(at);
    at = l.output_at + (Typed(s) ? AggregateTypedOutputWords(s.op, s.value_type, s.groups) * 8
                                 : size_t(s.groups) * 4);
  }
  if (s.overflow) {
    l.overflow_at = Align256(at);
    at = l.overflow_at + s.groups;
  }
  l.out_bytes = at;
  return l;
}

}  // namespace

GraphTotals AggregateGraphCounters() { return g_counters.Totals(); }

size_t AggregateGraph::InputBytes(const AggregateShape& shape) { return LayoutOf(shape).in_bytes; }
size_t AggregateGraph::OutputBytes(const AggregateShape& shape) {
  return LayoutOf(shape).out_bytes;
}

absl::StatusOr<std::unique_ptr<AggregateGraph>> AggregateGraph::Capture(const AggregateShape& shape,
                                                                        cudaStream_t stream) {
  std::unique_ptr<AggregateGraph> g(new AggregateGraph());
  g->shape_ = shape;
  const Layout layout = LayoutOf(shape);
  g->values_at_ = layout.values_at;
  g->mask_at_ = layout.mask_at;
  g->in_bytes_ = layout.in_bytes;
  g->counts_at_ = layout.counts_at;
  g->output_at_ = layout.output_at;
  g->overflow_at_ = layout.overflow_at;
  g->out_bytes_ = layout.out_bytes;
  auto in_d = DeviceBuffer<uint8_t>::Async(g->in_bytes_, stream, "aggregate graph inputs");
  if (!in_d.ok()) return in_d.status();
  g->in_d_ = std::move(*in_d);
  auto out_d = DeviceBuffer<uint8_t>::Async(g->out_bytes_, stream, "aggregate graph outputs");
  if (!out_d.ok()) return out_d.status();
  g->out_d_ = std::move(*out_d);
  auto in = PinnedBuffer::Allocate(g->in_bytes_, "aggregate graph inputs");
  if (!in.ok()) return in.status();
  g->in_ = std::move(*in);
  auto out = PinnedBuffer::Allocate(g->out_bytes_, "aggregate graph outputs");
  if (!out.ok()) return out.status();
  g->out_ = std::move(*out);
  std::memset(g->in_.data(), 0, g->in_bytes_);

  uint8_t* in_dev = g->in_d_.data();
  uint8_t* out_dev = g->out_d_.data();
  auto in_part = [&](size_t at) -> const void* {
    return at == kNoPart ? nullptr : in_dev + at;
  };
  auto out_part = [&](size_t at) -> void* { return at == kNoPart ? nullptr : out_dev + at; };
  AggregateArgs a;
  a.op = shape.op;
  a.keys = reinterpret_cast<const uint32_t*>(in_dev);
  a.value_type = shape.value_type;
  a.values = in_part(layout.values_at);
  a.output = out_part(layout.output_at);
  a.overflow = static_cast<uint8_t*>(out_part(layout.overflow_at));
  a.mask = static_cast<const uint32_t*>(in_part(layout.mask_at));
  a.rows = shape.rows;
  a.groups = shape.groups;
  a.counts = static_cast<uint32_t*>(out_part(layout.counts_at));

  const absl::Status captured = g->graph_.Capture(stream, "capture aggregate graph", [&] {
    cudaError_t e =
        cudaMemcpyAsync(in_dev, g->in_.data(), g->in_bytes_, cudaMemcpyHostToDevice, stream);
    if (e == cudaSuccess) e = Aggregate(a, stream);
    if (e == cudaSuccess)
      e = cudaMemcpyAsync(g->out_.data(), out_dev, g->out_bytes_, cudaMemcpyDeviceToHost, stream);
    return e;
  });
  if (!captured.ok()) return captured;
  return g;
}

bool AggregateGraph::Capturable(const AggregateShape& shape) {
  return shape.rows != 0 && shape.rows <= Limits::kMaxRows && shape.groups != 0 &&
         shape.groups <= Limits::kMaxGroups;
}

GraphCounters& AggregateGraph::Counters() { return g_counters; }

}  // namespace gpujoin::engine::detail
