#include "cuda/graphs/lookup_graph_cache.hpp"

#include <vector>

#include "cuda/cuda_error.hpp"

namespace gpujoin::engine::detail {

void LookupGraph::FindCopyNodes() {
  const uint64_t n = shape_.rows;
  keys_end_ = {nullptr, in_.data(), in_.data(), keys_d_.data(), n * KeyBytes(shape_.key_type),
               true};
  values_end_ = {nullptr, out_.data(), out_.data(), values_d_.data(), n * 4, false};
  probes_end_ = {nullptr, out_.data() + 4 * n, out_.data() + 4 * n, probes_d_.data(), n * 4, false};
  uint8_t* found_own = out_.data() + 8 * n + sizeof(DeviceQueryStats);
  found_end_ = {nullptr, found_own, found_own, found_d_.data(), n, false};
  size_t count = 0;
  if (cudaGraphGetNodes(graph_.graph(), nullptr, &count) != cudaSuccess) return;
  std::vector<cudaGraphNode_t> nodes(count);
  if (cudaGraphGetNodes(graph_.graph(), nodes.data(), &count) != cudaSuccess) return;
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type;
    if (cudaGraphNodeGetType(node, &type) != cudaSuccess || type != cudaGraphNodeTypeMemcpy) {
      continue;
    }
    cudaMemcpy3DParms p{};
    if (cudaGraphMemcpyNodeGetParams(node, &p) != cudaSuccess) continue;
    if (p.srcPtr.ptr == keys_end_.own) keys_end_.node = node;
    if (p.dstPtr.ptr == values_end_.own) values_end_.node = node;
    if (shape_.probes && p.dstPtr.ptr == probes_end_.own) probes_end_.node = node;
    if (shape_.found && p.dstPtr.ptr == found_end_.own) found_end_.node = node;
  }
  external_ok_ = keys_end_.node != nullptr && values_end_.node != nullptr &&
                 (!shape_.probes || probes_end_.node != nullptr) &&
                 (!shape_.found || found_end_.node != nullptr);
}

cudaError_t LookupGraph::Bind(HostEnd& end, void* want) {
  void* target = want != nullptr ? want : end.own;
  if (target == end.current) return cudaSuccess;
  const cudaError_t e =
      end.to_device
          ? cudaGraphExecMemcpyNodeSetParams1D(graph_.exec(), end.node, end.device, target,
                                               end.bytes, cudaMemcpyHostToDevice)
          : cudaGraphExecMemcpyNodeSetParams1D(graph_.exec(), end.node, target, end.device,
                                               end.bytes, cudaMemcpyDeviceToHost);
  if (e == cudaSuccess) end.current = target;
  return e;
}

cudaError_t LookupGraph::Replay(cudaStream_t stream, const Endpoints& endpoints) {
  const bool external = endpoints.keys != nullptr || endpoints.values != nullptr ||
                        endpoints.found != nullptr || endpoints.probes != nullptr;
  if (external && !external_ok_) return cudaErrorNotSupported;
  if (external_ok_) {
    HostEnd* ends[4] = {&keys_end_, &values_end_, &found_end_, &probes_end_};
    void* wants[4] = {const_cast<void*>(endpoints.keys), endpoints.values, endpoints.found,
                      endpoints.probes};
    for (int k = 0; k < 4; ++k) {
      if (ends[k]->node == nullptr) continue;  // output not part of this shape
      if (Bind(*ends[k], wants[k]) == cudaSuccess) continue;
      // Refused (a non-sticky error): clear it, go back to the own buffers for good.
      (void)cudaGetLastError();
      external_ok_ = false;
      for (HostEnd* end : ends) {
        if (end->node == nullptr) continue;
        const cudaError_t restored = Bind(*end, nullptr);
        if (restored != cudaSuccess) return restored;
      }
      return cudaErrorNotSupported;
    }
  }
  return graph_.Launch(stream);
}

absl::StatusOr<std::unique_ptr<LookupGraph>> LookupGraph::Capture(const LookupShape& shape,
                                                                  cudaStream_t stream) {
  std::unique_ptr<LookupGraph> g(new LookupGraph());
  g->shape_ = shape;
  g->stream_ = stream;
  const uint64_t n = shape.rows;
  const size_t key_bytes = n * KeyBytes(shape.key_type);
  auto keys = DeviceBuffer<uint8_t>::Async(key_bytes, stream, "graph keys");
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
  auto in = PinnedBuffer::Allocate(key_bytes, "graph keys");
  if (!in.ok()) return in.status();
  g->in_ = std::move(*in);
  auto out = PinnedBuffer::Allocate(8 * n + sizeof(DeviceQueryStats) + n, "graph outputs");
  if (!out.ok()) return out.status();
  g->out_ = std::move(*out);

  // The lookup kernel of the shape's key word.
  auto lookup = [&]<KeyWord K>(K*) {
    const DeviceTableT<K> table{static_cast<SlotWord<K>*>(const_cast<void*>(shape.slots)),
                                shape.capacity};
    return LookupKeys(table, reinterpret_cast<const K*>(g->keys_d_.data()), n, shape.bound,
                      g->values_d_.data(), g->found_d_.data(), g->probes_d_.data(),
                      g->stats_d_.data(), stream);
  };
  const absl::Status captured = g->graph_.Capture(stream, "capture lookup graph", [&] {
    cudaError_t e = cudaMemcpyAsync(g->keys_d_.data(), g->in_.data(), key_bytes,
                                    cudaMemcpyHostToDevice, stream);
    if (e == cudaSuccess)
      e = cudaMemsetAsync(g->stats_d_.data(), 0, sizeof(DeviceQueryStats), stream);
    if (e == cudaSuccess)
      e = shape.key_type == KeyType::kUint64 ? lookup(static_cast<uint64_t*>(nullptr))
                                          : lookup(static_cast<uint32_t*>(nullptr));
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
    return e;
  });
  if (!captured.ok()) return captured;
  g->FindCopyNodes();
  return g;
}

GraphCounters& LookupGraph::Counters() {
  static GraphCounters counters;
  return counters;
}

GraphTotals LookupGraphCounters() { return LookupGraph::Counters().Totals(); }

}  // namespace gpujoin::engine::detail
