#include "cuda/lookup_graph_cache.hpp"

#include <algorithm>

#include "cuda/cuda_error.hpp"

namespace gpujoin::engine::detail {

LookupGraph::~LookupGraph() {
  if (exec_ != nullptr) (void)cudaGraphExecDestroy(exec_);
}

absl::StatusOr<std::unique_ptr<LookupGraph>> LookupGraph::Capture(const LookupShape& shape,
                                                                  cudaStream_t stream) {
  std::unique_ptr<LookupGraph> g(new LookupGraph());
  g->shape_ = shape;
  g->stream_ = stream;
  const uint64_t n = shape.rows;
  auto keys = DeviceBuffer<uint32_t>::Async(n, stream, "graph keys");
  if (!keys.ok()) return keys.status();
  g->keys_d_ = std::move(*keys);
  auto values = DeviceBuffer<uint32_t>::Async(n, stream, "graph values");
  if (!values.ok()) return values.status();
  g->values_d_ = std::move(*values);
  if (shape.probes) {
    auto probes = DeviceBuffer<uint32_t>::Async(n, stream, "graph probes");
    if (!probes.ok()) return probes.status();
    g->probes_d_ = std::move(*probes);
  }
  if (shape.found) {
    auto found = DeviceBuffer<uint8_t>::Async(n, stream, "graph found");
    if (!found.ok()) return found.status();
    g->found_d_ = std::move(*found);
  }
  auto stats = DeviceBuffer<DeviceQueryStats>::Async(1, stream, "graph statistics");
  if (!stats.ok()) return stats.status();
  g->stats_d_ = std::move(*stats);
  auto in = PinnedBuffer::Allocate(n * sizeof(uint32_t), "graph keys");
  if (!in.ok()) return in.status();
  g->in_ = std::move(*in);
  auto out = PinnedBuffer::Allocate(8 * n + sizeof(DeviceQueryStats) + n, "graph outputs");
  if (!out.ok()) return out.status();
  g->out_ = std::move(*out);

  const DeviceTable table{const_cast<uint64_t*>(shape.slots), shape.capacity};
  GPUJOIN_CUDA_RETURN(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal),
                      "begin lookup graph capture");
  cudaError_t e = cudaMemcpyAsync(g->keys_d_.data(), g->in_.data(), n * sizeof(uint32_t),
                                  cudaMemcpyHostToDevice, stream);
  if (e == cudaSuccess)
    e = cudaMemsetAsync(g->stats_d_.data(), 0, sizeof(DeviceQueryStats), stream);
  if (e == cudaSuccess)
    e = LookupKeys(table, g->keys_d_.data(), n, shape.bound, g->values_d_.data(),
                   g->found_d_.data(), g->probes_d_.data(), g->stats_d_.data(), stream);
  if (e == cudaSuccess)
    e = cudaMemcpyAsync(g->out_.data(), g->values_d_.data(), n * sizeof(uint32_t),
                        cudaMemcpyDeviceToHost, stream);
  if (e == cudaSuccess && shape.probes)
    e = cudaMemcpyAsync(g->out_.data() + 4 * n, g->probes_d_.data(), n * sizeof(uint32_t),
                        cudaMemcpyDeviceToHost, stream);
  if (e == cudaSuccess)
    e = cudaMemcpyAsync(g->out_.data() + 8 * n, g->stats_d_.data(), sizeof(DeviceQueryStats),
                        cudaMemcpyDeviceToHost, stream);
  if (e == cudaSuccess && shape.found)
    e = cudaMemcpyAsync(g->out_.data() + 8 * n + sizeof(DeviceQueryStats), g->found_d_.data(), n,
                        cudaMemcpyDeviceToHost, stream);
  cudaGraph_t graph = nullptr;
  const cudaError_t end = cudaStreamEndCapture(stream, &graph);
  if (e == cudaSuccess) e = end;
  if (e == cudaSuccess) e = cudaGraphInstantiate(&g->exec_, graph, 0);
  if (graph != nullptr) (void)cudaGraphDestroy(graph);
  GPUJOIN_CUDA_RETURN(e, "capture lookup graph");
  return g;
}

absl::StatusOr<LookupGraph*> LookupGraphCache::Get(const LookupShape& shape, cudaStream_t stream) {
  if (shape.rows == 0 || shape.rows > kMaxRows) return nullptr;
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if ((*it)->shape() == shape) {
      entries_.splice(entries_.begin(), entries_, it);
      ++hits_;
      return entries_.front().get();
    }
  }
  auto seen = std::find(seen_.begin(), seen_.end(), shape);
  if (seen == seen_.end()) {
    if (seen_.size() >= 16) seen_.erase(seen_.begin());
    seen_.push_back(shape);
    return nullptr;
  }
  seen_.erase(seen);
  auto graph = LookupGraph::Capture(shape, stream);
  if (!graph.ok()) return graph.status();
  ++captures_;
  if (entries_.size() >= kMaxEntries) entries_.pop_back();
  entries_.push_front(std::move(*graph));
  return entries_.front().get();
}

}  // namespace gpujoin::engine::detail
