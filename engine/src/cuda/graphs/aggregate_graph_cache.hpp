// Internal (CUDA builds only): CUDA Graph capture and replay of repeated small
// aggregate nodes. An aggregation of the same op, value type (float32 or a typed
// one), row count, group count, masked or not, with or without per-group counts
// and overflow flags is a fixed sequence (upload keys,
// values and mask; clear the accumulators; accumulate; finalise; download counts
// and values): the same Aggregate call (aggregate_ops.hpp) with the same kernel
// variant, grid and sizes every time. The second time such a shape is seen on a
// stream context it is captured once into a graph whose device and pinned
// buffers are owned by the cache entry; later nodes of that shape copy their
// inputs into the pinned input, launch the graph (one call instead of one per
// copy, memset and kernel) and read the pinned output after one wait. The
// captured kernels are the uncaptured path's, in the same order, on inputs with
// the same (256-byte) alignment, so a replay computes what the uncaptured path
// would. BackendOptions::cuda_aggregate_graphs = false (gpujoind
// --cuda-aggregate-graphs=false) turns capture off.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "common/shape_cache.hpp"
#include "cuda/device_buffer.hpp"
#include "cuda/graphs/captured_graph.hpp"
#include "gpujoin/engine/column.hpp"
#include "gpujoin/engine/types.hpp"

namespace gpujoin::engine::detail {

/// What a captured aggregation bakes in; equal shapes replay the same graph.
struct AggregateShape {
  AggregateOp op = AggregateOp::kCount;
  uint64_t rows = 0;    ///< input rows, > 0
  uint32_t groups = 0;  ///< output groups, > 0
  bool mask = false;    ///< a mask column is read
  /// Per-group counts are computed and downloaded (always for kCount and kMean,
  /// and for integer min/max: AggregateNeedsCounts; otherwise only when
  /// contributing rows are wanted).
  bool counts = false;
  /// kFloat32: `values` in, groups floats out. kInt32, kInt64, kUint32, kUint64,
  /// kFloat64: typed values in, AggregateTypedOutputWords words out. Ignored
  /// (kFloat32) for kCount.
  ColumnType value_type = ColumnType::kFloat32;
  /// Per-group overflow flags are computed and downloaded (integer sum/mean).
  bool overflow = false;
  friend bool operator==(const AggregateShape&, const AggregateShape&) = default;
};

/// A captured aggregation: pinned input, pinned output and the graph.
///
/// Input (pinned, copied to the device in one piece): rows keys, then (value
/// ops) rows values of the value type, then (when shape.mask) rows mask words,
/// each part starting 256-byte aligned. Output (pinned, copied back in one
/// piece): groups uint32 counts (when shape.counts), then (value ops) groups
/// floats or the typed output words, then (when shape.overflow) groups flag
/// bytes, each part 256-byte aligned.
class AggregateGraph {
 public:
  using Shape = AggregateShape;
  struct Limits {
    /// Nodes with more rows than this are not captured (launch overhead no longer
    /// matters; each entry holds its inputs pinned and on the device: at most
    /// 16 bytes a row, 4 MiB of each at this size, with 8-byte typed values).
    static constexpr uint64_t kMaxRows = uint64_t{1} << 18;
    /// Nodes with more groups than this are not captured (each entry holds its
    /// outputs pinned and on the device: at most 21 bytes a group, 5.25 MiB of
    /// each at this size, for an int64 sum's counts, two words and flag).
    static constexpr uint32_t kMaxGroups = uint32_t{1} << 18;
    static constexpr size_t kMaxEntries = 4;
    /// Shapes remembered as seen once (oldest forgotten first).
    static constexpr size_t kMaxSeen = 16;
  };
  /// Whether a node of this shape is captured at all (non-empty, small).
  static bool Capturable(const AggregateShape& shape);
  /// Process-wide totals over every context's aggregate graph cache.
  static GraphCounters& Counters();

  AggregateGraph(const AggregateGraph&) = delete;
  AggregateGraph& operator=(const AggregateGraph&) = delete;

  /// Captures the aggregation for `shape` on `stream` (not launched yet). On
  /// failure the stream is out of capture mode and a non-sticky error has been
  /// cleared from the thread's last-error slot.
  static absl::StatusOr<std::unique_ptr<AggregateGraph>> Capture(const AggregateShape& shape,
                                                                 cudaStream_t stream);

  const AggregateShape& shape() const { return shape_; }
  /// Pinned input keys (shape.rows).
  uint32_t* keys() const { return reinterpret_cast<uint32_t*>(in_.data()); }
  /// Pinned input values (shape.rows of the value type; value ops only, else null).
  uint8_t* values() const { return values_at_ == kNone ? nullptr : in_.data() + values_at_; }
  /// Pinned input mask (shape.rows; only when shape.mask, else null).
  uint32_t* mask() const {
    return mask_at_ == kNone ? nullptr : reinterpret_cast<uint32_t*>(in_.data() + mask_at_);
  }
  /// Pinned output counts (shape.groups; only when shape.counts, else null),
  /// valid after Launch and a wait on the stream.
  const uint32_t* counts() const {
    return counts_at_ == kNone ? nullptr
                               : reinterpret_cast<const uint32_t*>(out_.data() + counts_at_);
  }
  /// Pinned output values (value ops only, else null): shape.groups floats, or
  /// for a typed shape the typed output words, the first shape.groups of which
  /// are the results. Valid after Launch and a wait on the stream.
  const uint8_t* output() const {
    return output_at_ == kNone ? nullptr : out_.data() + output_at_;
  }
  /// Pinned overflow flags (shape.groups; only when shape.overflow, else null),
  /// valid after Launch and a wait on the stream.
  const uint8_t* overflow() const {
    return overflow_at_ == kNone ? nullptr : out_.data() + overflow_at_;
  }

  /// Launches the graph on `stream` (the stream it was captured on).
  cudaError_t Launch(cudaStream_t stream) { return graph_.Launch(stream); }

  /// Pinned input bytes / output bytes the shape needs.
  static size_t InputBytes(const AggregateShape& shape);
  static size_t OutputBytes(const AggregateShape& shape);

 private:
  static constexpr size_t kNone = ~size_t{0};
  AggregateGraph() = default;

  AggregateShape shape_;
  size_t values_at_ = kNone, mask_at_ = kNone, in_bytes_ = 0;
  size_t counts_at_ = kNone, output_at_ = kNone, overflow_at_ = kNone, out_bytes_ = 0;
  DeviceBuffer<uint8_t> in_d_, out_d_;
  PinnedBuffer in_, out_;
  CapturedGraph graph_;
};

/// Process-wide totals over every context's aggregate graph cache.
using AggregateGraphTotals = GraphTotals;
/// A snapshot of the totals.
GraphTotals AggregateGraphCounters();

/// Per-stream-context cache of captured aggregations (captured_graph.hpp).
using AggregateGraphCache = GraphCache<AggregateGraph>;

}  // namespace gpujoin::engine::detail
