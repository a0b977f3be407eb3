// What the lookup, join and aggregate graph caches share: a captured CUDA Graph
// with its executable, the process-wide capture/replay/failure totals of a cache
// kind, and the environment switch that turns a kind off.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/shape_cache.hpp"
#include "cuda/cuda_error.hpp"

namespace gpujoin::engine::detail {

/// A CUDA Graph captured from a stream and its executable, destroyed together.
class CapturedGraph {
 public:
  CapturedGraph() = default;
  CapturedGraph(const CapturedGraph&) = delete;
  CapturedGraph& operator=(const CapturedGraph&) = delete;
  ~CapturedGraph() {
    if (exec_ != nullptr) (void)cudaGraphExecDestroy(exec_);
    if (graph_ != nullptr) (void)cudaGraphDestroy(graph_);
  }

  /// Captures what `enqueue()` (returning cudaError_t) puts on `stream`, in
  /// thread-local capture mode, and instantiates it. Capture mode is always left,
  /// whatever failed, so the stream stays usable; on failure the thread's
  /// (non-sticky) last error is cleared, so that the uncaptured path that follows
  /// does not see it, and the status names `what`.
  template <typename Enqueue>
  absl::Status Capture(cudaStream_t stream, const char* what, Enqueue&& enqueue) {
    cudaError_t e = cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal);
    if (e == cudaSuccess) {
      e = enqueue();
      const cudaError_t end = cudaStreamEndCapture(stream, &graph_);
      if (e == cudaSuccess) e = end;
    }
    if (e == cudaSuccess) e = cudaGraphInstantiate(&exec_, graph_, 0);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      return CudaStatus(e, what);
    }
    return absl::OkStatus();
  }

  /// Launches the executable on `stream` (the stream it was captured on).
  cudaError_t Launch(cudaStream_t stream) const { return cudaGraphLaunch(exec_, stream); }
  cudaGraph_t graph() const { return graph_; }
  cudaGraphExec_t exec() const { return exec_; }

 private:
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};

/// Process-wide totals of one kind of graph cache, over every stream context
/// (tests and diagnostics read them; they only grow).
struct GraphTotals {
  uint64_t captures = 0;          ///< graphs captured
  uint64_t replays = 0;           ///< requests served by an existing graph
  uint64_t capture_failures = 0;  ///< captures that failed (the request ran uncaptured)
};

class GraphCounters {
 public:
  /// Counts one cache lookup: a failure, a capture or a replay (`hit`); nothing
  /// when the cache answered "run uncaptured" (nullptr).
  template <typename Graph>
  void Count(const absl::StatusOr<Graph*>& got, bool hit) {
    if (!got.ok())
      capture_failures_.fetch_add(1, std::memory_order_relaxed);
    else if (*got != nullptr)
      (hit ? replays_ : captures_).fetch_add(1, std::memory_order_relaxed);
  }
  GraphTotals Totals() const {
    return GraphTotals{captures_.load(), replays_.load(), capture_failures_.load()};
  }

 private:
  std::atomic<uint64_t> captures_{0}, replays_{0}, capture_failures_{0};
};

/// The per-stream-context cache of one kind of captured graph (lookups, join
/// batches, aggregations): small, least recently used out, a shape captured on
/// its second sight and never again after a failed capture (ShapeCache). Not
/// thread-safe: a context serves one Run at a time. `Graph` provides:
///   using Shape = ...;                        // what a graph bakes in (==)
///   struct Limits { kMaxEntries, kMaxSeen, ... };  // inherited: Cache::kMaxRows
///   static bool Capturable(const Shape&);     // size limits
///   static absl::StatusOr<std::unique_ptr<Graph>> Capture(const Shape&, cudaStream_t);
///   static GraphCounters& Counters();         // process-wide totals
template <typename Graph>
class GraphCache : public Graph::Limits {
 public:
  using Shape = typename Graph::Shape;

  /// The captured graph for `shape`: an existing one, or one captured now when
  /// the shape has been seen before on this context; nullptr when the caller
  /// should run the uncaptured path (first sight, not capturable, disabled, or a
  /// shape whose capture failed before). A capture failure is returned as its
  /// status (the shape is then never captured again on this context).
  absl::StatusOr<Graph*> Get(const Shape& shape, cudaStream_t stream) {
    return GetWith(shape, [&] { return Graph::Capture(shape, stream); });
  }

  /// Get for graphs that capture from more than their shape: `capture()`
  /// returns absl::StatusOr<std::unique_ptr<Graph>> of `shape`.
  template <typename Capture>
  absl::StatusOr<Graph*> GetWith(const Shape& shape, Capture&& capture) {
    if (!enabled_ || !Graph::Capturable(shape)) return nullptr;
    const uint64_t hits = cache_.hits();
    absl::StatusOr<Graph*> graph = cache_.Get(shape, std::forward<Capture>(capture));
    Graph::Counters().Count(graph, cache_.hits() != hits);
    return graph;
  }

  /// Graphs captured / requests replayed by this cache.
  uint64_t captures() const { return cache_.captures(); }
  uint64_t hits() const { return cache_.hits(); }

  /// Drops every graph (their device memory is freed on the capture stream).
  void Clear() { cache_.Clear(); }

  /// Whether Get may capture (BackendOptions: cuda_join_graphs,
  /// cuda_aggregate_graphs and cuda_plan_graphs; lookup graphs are always
  /// on). Default on.
  void set_enabled(bool enabled) { enabled_ = enabled; }
  bool enabled() const { return enabled_; }

 private:
  bool enabled_ = true;
  ShapeCache<Shape, Graph> cache_{Graph::Limits::kMaxEntries, Graph::Limits::kMaxSeen};
};

}  // namespace gpujoin::engine::detail
