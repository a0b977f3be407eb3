// Internal (CUDA builds only): CUDA Graph capture and replay of repeated lookup
// shapes. A lookup of the same row count, probe bound and optional outputs
// against the same table is a fixed sequence (upload keys, clear statistics,
// probe kernel, download results); the second time a shape is seen on a stream
// context it is captured once into a graph whose buffers are owned by the cache
// entry, and later requests of that shape only fill the pinned input, replay the
// graph and read the pinned output. One launch replaces five API calls, which is
// what matters for the many small lookups a service sees. When the caller's keys
// and outputs already lie in page-locked backend host buffers, the graph's copy
// nodes are pointed at them instead (cudaGraphExecMemcpyNodeSetParams1D), so
// neither side needs a host copy.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "common/shape_cache.hpp"
#include "cuda/device_buffer.hpp"
#include "cuda/device_ops.hpp"
#include "cuda/graphs/captured_graph.hpp"

namespace gpujoin::engine::detail {

/// What identifies a replayable lookup.
struct LookupShape {
  const void* slots = nullptr;  ///< the table (DeviceTableT<K>::slots)
  uint32_t capacity = 0;
  KeyType key_type = KeyType::kUint32;  ///< the key word of the table and the keys
  uint64_t rows = 0;
  uint32_t bound = 0;
  bool found = false;
  bool probes = false;
  friend bool operator==(const LookupShape&, const LookupShape&) = default;
};

/// A captured lookup: pinned input keys, pinned outputs, and the graph.
class LookupGraph {
 public:
  using Shape = LookupShape;
  struct Limits {
    /// Lookups larger than this are not captured (their pinned copies would be
    /// large and launch overhead does not matter at that size).
    static constexpr uint64_t kMaxRows = uint64_t{1} << 22;
    static constexpr size_t kMaxEntries = 4;
    /// Shapes remembered as seen once (oldest forgotten first).
    static constexpr size_t kMaxSeen = 16;
  };
  /// Whether a lookup of this shape is captured at all (non-empty, small).
  static bool Capturable(const LookupShape& shape) {
    return shape.rows != 0 && shape.rows <= Limits::kMaxRows;
  }
  /// Process-wide totals over every context's lookup graph cache.
  static GraphCounters& Counters();

  LookupGraph(const LookupGraph&) = delete;
  LookupGraph& operator=(const LookupGraph&) = delete;

  /// Captures the lookup sequence for `shape` on `stream` (not replayed yet).
  static absl::StatusOr<std::unique_ptr<LookupGraph>> Capture(const LookupShape& shape,
                                                              cudaStream_t stream);

  const LookupShape& shape() const { return shape_; }
  /// Pinned input: shape.rows keys of shape.key_type.
  void* keys() const { return in_.data(); }
  /// Pinned outputs, valid after Replay + stream synchronisation.
  const uint32_t* values() const { return out_.as<uint32_t>(); }
  const uint32_t* probes() const { return out_.as<uint32_t>() + shape_.rows; }
  const DeviceQueryStats* stats() const {
    return reinterpret_cast<const DeviceQueryStats*>(out_.data() + 8 * shape_.rows);
  }
  const uint8_t* found() const { return out_.data() + 8 * shape_.rows + sizeof(DeviceQueryStats); }

  /// Host endpoints of one replay: nullptr means the graph's own pinned buffer
  /// (keys() / values() / found() / probes()); otherwise page-locked memory of the
  /// caller (a backend host buffer) of the shape's size, copied from/to directly.
  struct Endpoints {
    const void* keys = nullptr;  ///< shape.rows keys of shape.key_type
    uint32_t* values = nullptr;
    uint8_t* found = nullptr;
    uint32_t* probes = nullptr;
  };

  /// Whether Replay can take caller endpoints (the memcpy nodes were found at
  /// capture and no parameter update has failed).
  bool external_endpoints() const { return external_ok_; }

  /// Points the graph's copy nodes at `endpoints` (only the ones that change) and
  /// launches it on `stream`. When an update is refused the graph goes back to
  /// its own buffers for good (external_endpoints() false) and the call returns
  /// cudaErrorNotSupported without launching; the caller then copies through
  /// keys()/values()/... and replays with no caller endpoints.
  cudaError_t Replay(cudaStream_t stream, const Endpoints& endpoints);

 private:
  LookupGraph() = default;

  // One host endpoint of a copy node: its node, its own pinned address and where
  // it points now.
  struct HostEnd {
    cudaGraphNode_t node = nullptr;
    void* own = nullptr;
    void* current = nullptr;
    void* device = nullptr;
    size_t bytes = 0;
    bool to_device = false;
  };
  // Points `end` at `want` (nullptr: its own buffer).
  cudaError_t Bind(HostEnd& end, void* want);
  // Finds the memcpy nodes of the captured graph by their host addresses.
  void FindCopyNodes();

  LookupShape shape_;
  cudaStream_t stream_ = nullptr;
  DeviceBuffer<uint8_t> keys_d_;  // rows keys of shape.key_type
  DeviceBuffer<uint32_t> values_d_, probes_d_;
  DeviceBuffer<uint8_t> found_d_;
  DeviceBuffer<DeviceQueryStats> stats_d_;
  PinnedBuffer in_, out_;
  CapturedGraph graph_;  // its graph's nodes name the copies to update
  HostEnd keys_end_, values_end_, found_end_, probes_end_;
  bool external_ok_ = false;
};

/// Per-stream-context cache of captured lookups (captured_graph.hpp).
using LookupGraphCache = GraphCache<LookupGraph>;

/// Process-wide totals over every context's lookup graph cache.
GraphTotals LookupGraphCounters();

}  // namespace gpujoin::engine::detail
