#include "cuda/graphs/join_graph_cache.hpp"

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "cuda/cuda_error.hpp"
#include "cuda/join/join_ops.hpp"

namespace gpujoin::engine::detail {
namespace {

GraphCounters g_counters;

size_t Align256(size_t v) { return (v + 255) & ~size_t{255}; }

// Byte offsets of probes and found in the output, and its total size.
struct OutputLayout {
  size_t probes_at, found_at, bytes;
};
OutputLayout LayoutOf(const JoinShape& s) {
  OutputLayout l;
  l.probes_at = Align256(JoinGraph::kPairsOffset + s.pair_capacity * 8);
  l.found_at = Align256(l.probes_at + (s.probes ? s.rows * 4 : 0));
  l.bytes = l.found_at + (s.found ? s.rows : 0);
  return l;
}

}  // namespace

GraphTotals JoinGraphCounters() { return g_counters.Totals(); }

size_t JoinGraph::OutputBytes(const JoinShape& shape) { return LayoutOf(shape).bytes; }

absl::StatusOr<std::unique_ptr<JoinGraph>> JoinGraph::Capture(const JoinShape& shape,
                                                              cudaStream_t stream) {
  std::unique_ptr<JoinGraph> g(new JoinGraph());
  g->shape_ = shape;
  const uint64_t n = shape.rows;
  const OutputLayout layout = LayoutOf(shape);
  g->probes_at_ = layout.probes_at;
  g->found_at_ = layout.found_at;
  g->out_bytes_ = layout.bytes;
  const size_t key_bytes = n * KeyBytes(shape.key_type);
  g->in_bytes_ = key_bytes + (shape.left_rows ? n * 4 : 0) + sizeof(uint32_t);
  auto in_d = DeviceBuffer<uint8_t>::Async(g->in_bytes_, stream, "join graph inputs");
  if (!in_d.ok()) return in_d.status();
  g->in_d_ = std::move(*in_d);
  auto out_d = DeviceBuffer<uint8_t>::Async(g->out_bytes_, stream, "join graph outputs");
  if (!out_d.ok()) return out_d.status();
  g->out_d_ = std::move(*out_d);
  auto scratch = DeviceBuffer<uint8_t>::Async(JoinScratchBytes(n), stream, "join graph scratch");
  if (!scratch.ok()) return scratch.status();
  g->scratch_d_ = std::move(*scratch);
  auto in = PinnedBuffer::Allocate(g->in_bytes_, "join graph inputs");
  if (!in.ok()) return in.status();
  g->in_ = std::move(*in);
  auto out = PinnedBuffer::Allocate(g->out_bytes_, "join graph outputs");
  if (!out.ok()) return out.status();
  g->out_ = std::move(*out);
  std::memset(g->in_.data(), 0, g->in_bytes_);

  uint8_t* in_dev = g->in_d_.data();
  uint8_t* out_dev = g->out_d_.data();
  const auto* rows_dev = reinterpret_cast<const uint32_t*>(in_dev + key_bytes);
  const uint32_t* left_rows = shape.left_rows ? rows_dev : nullptr;
  const uint32_t* first_left_row = rows_dev + (shape.left_rows ? n : 0);
  auto* out_left = reinterpret_cast<uint32_t*>(out_dev + kPairsOffset);
  uint32_t* out_right = out_left + shape.pair_capacity;
  auto* count = reinterpret_cast<unsigned long long*>(out_dev + kCountOffset);
  uint8_t* found = shape.found ? out_dev + layout.found_at : nullptr;
  auto* probes = shape.probes ? reinterpret_cast<uint32_t*>(out_dev + layout.probes_at) : nullptr;
  auto* stats = reinterpret_cast<DeviceQueryStats*>(out_dev);
  // The join of the shape's key word.
  auto join = [&]<KeyWord K>(K*) {
    const DeviceTableT<K> table{static_cast<SlotWord<K>*>(const_cast<void*>(shape.slots)),
                                shape.table_capacity};
    return JoinKeysGraphable(table, reinterpret_cast<const K*>(in_dev), n, shape.bound, left_rows,
                             first_left_row, out_left, out_right, shape.pair_capacity, count, found,
                             probes, stats, g->scratch_d_.data(), stream, shape.masked);
  };

  const absl::Status captured = g->graph_.Capture(stream, "capture join graph", [&] {
    cudaError_t e =
        cudaMemcpyAsync(in_dev, g->in_.data(), g->in_bytes_, cudaMemcpyHostToDevice, stream);
    // Statistics, count and padding: the header the output copy starts with.
    if (e == cudaSuccess) e = cudaMemsetAsync(out_dev, 0, kPairsOffset, stream);
    if (e == cudaSuccess)
      e = shape.key_type == KeyType::kUint64 ? join(static_cast<uint64_t*>(nullptr))
                                          : join(static_cast<uint32_t*>(nullptr));
    if (e == cudaSuccess)
      e = cudaMemcpyAsync(g->out_.data(), out_dev, g->out_bytes_, cudaMemcpyDeviceToHost, stream);
    return e;
  });
  if (!captured.ok()) return captured;
  return g;
}

bool JoinGraph::Capturable(const JoinShape& shape) {
  return shape.rows != 0 && shape.rows <= Limits::kMaxRows && shape.pair_capacity <= shape.rows &&
         OutputBytes(shape) <= Limits::kMaxOutputBytes;
}

GraphCounters& JoinGraph::Counters() { return g_counters; }

}  // namespace gpujoin::engine::detail
