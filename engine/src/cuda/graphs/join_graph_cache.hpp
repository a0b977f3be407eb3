// Internal (CUDA builds only): CUDA Graph capture and replay of repeated small
// join batches (the compaction path: inner joins on single-row groups, semi and
// anti joins). A join batch of the same row count, pair capacity, probe bound,
// left-row kind (explicit or generated), optional outputs and masked rows
// (found or missing) against the same table is a fixed sequence (upload
// keys/left rows, clear statistics, lookup, tile counts, scan, scatter,
// download statistics/count/pairs/probes/found); the
// second time such a shape is seen on a stream context it is captured once into
// a graph whose device and pinned buffers are owned by the cache entry, and later
// batches of that shape fill the pinned input, launch the graph (one call instead
// of about ten) and read the pinned output after one wait. The generated left row
// base travels in the input copy (JoinKeysGraphable), so it is not part of the
// shape. Only batches whose whole result fits one staging buffer are captured
// (the large-batch path downloads only the written pairs and stays uncaptured).
// BackendOptions::cuda_join_graphs = false (gpujoind --cuda-join-graphs=false)
// turns capture off.
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

/// What a captured join batch bakes in; equal shapes replay the same graph.
struct JoinShape {
  const void* slots = nullptr;  ///< the table (a rebuilt index elsewhere differs)
  uint32_t table_capacity = 0;
  KeyType key_type = KeyType::kUint32;  ///< the key word of the table and the left keys
  uint64_t rows = 0;                 ///< left rows, > 0
  uint64_t pair_capacity = 0;        ///< device pair capacity: min(output capacity, rows)
  uint32_t bound = 0;                ///< probe bound
  bool left_rows = false;            ///< explicit left row IDs (else generated)
  bool found = false;
  bool probes = false;
  /// The rows that yield pairs (kMissing: an anti join; semi joins are kFound).
  MaskedRows masked = MaskedRows::kFound;
  friend bool operator==(const JoinShape&, const JoinShape&) = default;
};

/// A captured join batch: pinned input, pinned output and the graph.
///
/// Input (pinned, copied to the device in one piece): rows keys (of
/// shape.key_type), then rows left row IDs when shape.left_rows, then the uint32
/// generated left row base.
/// Output (pinned, copied back in one piece): DeviceQueryStats at 0, the
/// uint64 match count at kCountOffset, left rows at kPairsOffset followed by
/// right rows (pair_capacity each), then probes and found (when in the shape).
class JoinGraph {
 public:
  using Shape = JoinShape;
  struct Limits {
    /// Batches with more left rows than this are not captured (launch overhead
    /// no longer matters, and each entry holds its inputs and outputs pinned: at
    /// most about 5 MiB at this size).
    static constexpr uint64_t kMaxRows = uint64_t{1} << 18;
    /// Larger outputs are not captured (the pinned copy per entry stays small).
    static constexpr size_t kMaxOutputBytes = size_t{8} << 20;
    static constexpr size_t kMaxEntries = 4;
    /// Shapes remembered as seen once (oldest forgotten first).
    static constexpr size_t kMaxSeen = 16;
  };
  /// Whether a batch of this shape is captured at all (non-empty, small).
  static bool Capturable(const JoinShape& shape);
  /// Process-wide totals over every context's join graph cache.
  static GraphCounters& Counters();

  static constexpr size_t kCountOffset = 64;
  static constexpr size_t kPairsOffset = 256;

  JoinGraph(const JoinGraph&) = delete;
  JoinGraph& operator=(const JoinGraph&) = delete;

  /// Captures the join sequence for `shape` on `stream` (not launched yet).
  /// On failure the stream is out of capture mode and a non-sticky error has
  /// been cleared from the thread's last-error slot.
  static absl::StatusOr<std::unique_ptr<JoinGraph>> Capture(const JoinShape& shape,
                                                            cudaStream_t stream);

  const JoinShape& shape() const { return shape_; }
  /// Pinned input keys (shape.rows of shape.key_type).
  void* keys() const { return in_.data(); }
  /// Pinned input left row IDs (shape.rows; only when shape.left_rows).
  uint32_t* left_rows() const {
    return reinterpret_cast<uint32_t*>(in_.data() + shape_.rows * KeyBytes(shape_.key_type));
  }
  /// Pinned input: the generated left row base (used when !shape.left_rows).
  uint32_t* first_left_row() const { return left_rows() + (shape_.left_rows ? shape_.rows : 0); }
  /// Pinned outputs, valid after Launch and a wait on the stream.
  const DeviceQueryStats* stats() const {
    return reinterpret_cast<const DeviceQueryStats*>(out_.data());
  }
  unsigned long long count() const {
    return *reinterpret_cast<const unsigned long long*>(out_.data() + kCountOffset);
  }
  const uint32_t* out_left() const {
    return reinterpret_cast<const uint32_t*>(out_.data() + kPairsOffset);
  }
  const uint32_t* out_right() const { return out_left() + shape_.pair_capacity; }
  const uint32_t* probes() const {
    return reinterpret_cast<const uint32_t*>(out_.data() + probes_at_);
  }
  const uint8_t* found() const { return out_.data() + found_at_; }

  /// Launches the graph on `stream` (the stream it was captured on).
  cudaError_t Launch(cudaStream_t stream) { return graph_.Launch(stream); }

  /// Output bytes the shape needs (statistics, count, pairs, probes, found).
  static size_t OutputBytes(const JoinShape& shape);

 private:
  JoinGraph() = default;

  JoinShape shape_;
  size_t probes_at_ = 0, found_at_ = 0, out_bytes_ = 0, in_bytes_ = 0;
  DeviceBuffer<uint8_t> in_d_, out_d_, scratch_d_;
  PinnedBuffer in_, out_;
  CapturedGraph graph_;
};

/// Process-wide totals over every context's join graph cache.
using JoinGraphTotals = GraphTotals;
/// A snapshot of the totals.
GraphTotals JoinGraphCounters();

/// Per-stream-context cache of captured join batches (captured_graph.hpp).
using JoinGraphCache = GraphCache<JoinGraph>;

}  // namespace gpujoin::engine::detail
