// Internal (CUDA builds only): the per-request execution context of the CUDA
// backend. Each concurrent Run holds one context: its own stream, double-buffered
// pinned staging for host<->device copies, a small pinned area for statistics,
// device statistics scratch and caches of captured CUDA Graphs (lookups, joins,
// aggregations, plan batches).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cuda/device_buffer.hpp"
#include "cuda/graphs/aggregate_graph_cache.hpp"
#include "cuda/graphs/join_graph_cache.hpp"
#include "cuda/graphs/lookup_graph_cache.hpp"
#include "cuda/plan/plan_program.hpp"
#include "gpujoin/engine/backend.hpp"

namespace gpujoin::engine::detail {

/// A host byte range to gather from or scatter to.
struct HostRange {
  const void* data;
  size_t bytes;
};

/// A device byte range to download.
struct DeviceRange {
  const void* data;
  size_t bytes;
};

/// A download: `bytes` from device `src` to host `dst`.
struct HostPiece {
  void* dst;
  const void* src;
  size_t bytes;
};

/// How host threads wait for the GPU (BackendOptions::cuda_spin_wait and
/// cuda_wait_poll_us; docs/PERFORMANCE.md, "Service"): pure spinning (events without cudaEventBlockingSync;
/// fastest while waiting threads <= cores, collapses beyond), or polling
/// cudaEventQuery for up to poll_us microseconds before sleeping in
/// cudaEventSynchronize on a blocking-sync event (0 = sleep at once, the
/// default: a 30 us poll matched blocking for 1K lookups at 16 streams and
/// spinning for joins, but not spinning for lookups).
struct CudaWaitMode {
  /// Events are created with cudaEventBlockingSync (false only for pure spinning).
  bool blocking_events = true;
  /// Microseconds to poll cudaEventQuery before blocking (0 = block at once).
  uint32_t poll_us = 0;
};

/// The wait mode the options ask for (poll time capped at one second).
CudaWaitMode WaitModeOf(const BackendOptions& options);

/// Waits until `event` has completed, the way `mode` says.
cudaError_t WaitForEvent(cudaEvent_t event, const CudaWaitMode& mode);

class StreamContext {
 public:
  /// Bytes of each of the two pinned staging buffers.
  static constexpr size_t kStagingBytes = size_t{8} << 20;

  /// Creates the stream (non-blocking) and the buffers on the current device;
  /// waits the way `options` say and captures graphs where they allow it.
  static absl::StatusOr<std::unique_ptr<StreamContext>> Create(const BackendOptions& options);
  ~StreamContext();
  StreamContext(const StreamContext&) = delete;
  StreamContext& operator=(const StreamContext&) = delete;

  cudaStream_t stream() const { return stream_; }
  /// 256 bytes of device scratch for statistics (DeviceBuildStats / DeviceQueryStats
  /// and a join count), valid for the context's life.
  uint8_t* device_stats() const { return device_stats_.data(); }
  /// 256 bytes of pinned host memory, for downloading statistics.
  uint8_t* host_stats() const { return host_stats_.data(); }
  LookupGraphCache& graphs() { return graphs_; }
  /// Captured small join batches of this context (join_graph_cache.hpp).
  JoinGraphCache& join_graphs() { return join_graphs_; }
  /// Captured small aggregate nodes of this context (aggregate_graph_cache.hpp).
  AggregateGraphCache& aggregate_graphs() { return aggregate_graphs_; }
  /// Captured small plan batches of this context (plan_program.hpp).
  PlanGraphCache& plan_graphs() { return plan_graphs_; }

  /// Copies the host ranges, in order, into contiguous device memory at `dst`
  /// through the pinned staging buffers (host copy of one piece overlaps the
  /// device copy of the previous one). Returns once the last piece is queued.
  absl::Status Upload(void* dst, std::span<const HostRange> ranges, const char* what);

  /// Copies `bytes` from device `src` to host `dst` through pinned staging;
  /// returns when `dst` is written (synchronises with the stream).
  absl::Status Download(void* dst, const void* src, size_t bytes, const char* what);

  /// Bytes DownloadGathered needs in staging for pieces of these sizes (each piece
  /// starts 16-byte aligned).
  static size_t GatheredBytes(std::span<const DeviceRange> pieces);

  /// Queues device-to-host copies of every piece into one pinned staging buffer,
  /// back to back, then waits for the stream once. `out[k]` receives the host
  /// address of piece k, valid until the next Upload, Download or
  /// DownloadGathered. GatheredBytes(pieces) must be at most kStagingBytes
  /// (INVALID_ARGUMENT otherwise); `out` must hold pieces.size() entries.
  absl::Status DownloadGathered(std::span<const DeviceRange> pieces, std::span<const uint8_t*> out,
                                const char* what);

  /// Every piece's download, with one wait when they fit in staging together
  /// (a small batch's outputs) and piece by piece (Download) otherwise.
  absl::Status DownloadAll(std::span<const HostPiece> pieces, const char* what);

  /// Waits for everything queued on the stream (one event, waited on with
  /// WaitForEvent in this context's mode).
  absl::Status Synchronize(const char* what);

 private:
  StreamContext() = default;

  CudaWaitMode wait_;
  cudaStream_t stream_ = nullptr;
  PinnedBuffer staging_[2];
  cudaEvent_t staged_[2] = {nullptr, nullptr};
  cudaEvent_t done_ = nullptr;  // recorded and waited on by Synchronize
  PinnedBuffer host_stats_;
  DeviceBuffer<uint8_t> device_stats_;
  LookupGraphCache graphs_;
  JoinGraphCache join_graphs_;
  AggregateGraphCache aggregate_graphs_;
  PlanGraphCache plan_graphs_;
};

/// Gathers the ranges of a chunked column.
template <typename T>
std::vector<HostRange> RangesOf(const std::vector<std::span<const T>>& chunks) {
  std::vector<HostRange> r;
  r.reserve(chunks.size());
  for (const auto& c : chunks) {
    if (!c.empty()) r.push_back({c.data(), c.size_bytes()});
  }
  return r;
}

}  // namespace gpujoin::engine::detail
