// Internal (CUDA builds only): the device work of a plan batch up to its first
// wait (device_plan.hpp) as one program. Making a program lays out every
// buffer its steps use (the input columns in one device arena, each lookup's
// key words, outputs and gathers, the live-row mask, the group table) and
// turns the steps into one fixed sequence of clears and kernels; running it
// uploads the batch's columns, queues the sequence and downloads the results
// (step counters and group flags, the first groups or a row plan's rows) with
// one wait. The second time a stream context sees a program's shape it keeps
// the program and captures the sequence, with the input copy from and the
// result copies to the program's own page-locked buffers, into a CUDA Graph:
// later batches of that shape copy their columns into the page-locked input,
// launch once and read the page-locked results. The captured kernels are the
// uncaptured path's with the same arguments, so a replay computes what the
// uncaptured path would. BackendOptions::cuda_plan_graphs = false (gpujoind
// --cuda-plan-graphs=false) turns capture off.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cuda/device_buffer.hpp"
#include "cuda/graphs/captured_graph.hpp"
#include "cuda/plan/plan_kernels.hpp"
#include "gpujoin/engine/plan_device.hpp"

namespace gpujoin::engine::detail {

class StreamContext;

/// What a plan program bakes in; equal shapes make identical programs. `words`
/// encodes every input column (type, whether it goes up, its bytes and its
/// validity's) and every device step's parameters: a lookup's key column,
/// kind, the table it probes (address, capacity, key word, probe bound) and
/// each selected column's storage; a filter's postfix program and literals;
/// the aggregate's group-by columns, key layout and group limit. Plans of
/// different streams with the same steps over the same indexes share it.
struct PlanProgramShape {
  uint64_t rows = 0;
  uint64_t input_bytes = 0;  ///< the uploaded columns' bytes, each 256-aligned
  std::vector<uint64_t> words;
  friend bool operator==(const PlanProgramShape&, const PlanProgramShape&) = default;
};

class PlanProgram {
 public:
  using Shape = PlanProgramShape;
  struct Limits {
    /// Batches of more rows are not captured (launches no longer matter at
    /// that size; each entry holds its buffers on the device and its input and
    /// results page-locked).
    static constexpr uint64_t kMaxRows = uint64_t{1} << 16;
    /// Nor batches whose uploaded columns take more bytes than this.
    static constexpr uint64_t kMaxInputBytes = uint64_t{4} << 20;
    static constexpr size_t kMaxEntries = 4;
    /// Shapes remembered as seen once (oldest forgotten first).
    static constexpr size_t kMaxSeen = 16;
  };
  /// Whether a program of this shape is captured at all (non-empty, small).
  static bool Capturable(const Shape& shape);
  /// Process-wide totals over every context's plan graph cache.
  static GraphCounters& Counters();

  /// The shape of `input`'s device steps (INVALID_ARGUMENT naming the step when
  /// an index is not a readable CUDA index).
  static absl::StatusOr<Shape> ShapeOf(const DevicePlanInput& input);

  /// Lays `input`'s steps out on `ctx`'s stream (its filter programs go up now).
  static absl::StatusOr<std::unique_ptr<PlanProgram>> Make(const DevicePlanInput& input,
                                                           const Shape& shape,
                                                           StreamContext& ctx);
  /// Make, then capture the sequence into a graph (not launched yet).
  static absl::StatusOr<std::unique_ptr<PlanProgram>> Capture(const DevicePlanInput& input,
                                                              const Shape& shape,
                                                              StreamContext& ctx);

  PlanProgram(const PlanProgram&) = delete;
  PlanProgram& operator=(const PlanProgram&) = delete;
  ~PlanProgram();

  const Shape& shape() const { return shape_; }
  bool captured() const { return graph_ != nullptr; }

  /// The results one run downloads, in order: the step counters (one
  /// PlanStepCounters per device step, at least one); for an aggregate plan
  /// the group flags (two uint32: the table filled up, the groups collected), then the first prefetched() groups' keys
  /// (8 bytes each) and first rows (4 bytes each); for a row plan the live
  /// bytes (one per row), then each made column's values (a found column one
  /// byte per row) and validity (gathered columns).
  size_t results() const { return results_.size(); }
  size_t result_bytes(size_t k) const { return results_[k].bytes; }

  /// Runs the program over `table` (the batch its shape came from): result k
  /// lands at `results[k]` (result_bytes(k) bytes) when this returns.
  absl::Status Run(const PlanTable& table, std::span<void* const> results, StreamContext& ctx);

  // The device state a run leaves, for what follows its wait.
  /// Every column: the input's (host-only ones without data), then each
  /// lookup's selected columns and found flag.
  const std::vector<PlanColumnRef>& columns() const { return columns_; }
  size_t input_columns() const { return input_columns_; }
  /// Per device step: whether it is a lookup (else a filter).
  const std::vector<bool>& lookups() const { return lookups_; }
  uint64_t rows() const { return shape_.rows; }
  const uint8_t* live() const { return live_; }
  /// Aggregate plans: the group table's slots, each row's slot, each collected
  /// group's slot, key and first row (all `capacity()` long).
  uint64_t capacity() const { return capacity_; }
  uint64_t prefetched() const { return prefetched_; }
  const uint32_t* slot_of_row() const { return slot_of_row_; }
  const uint32_t* entry_slots() const { return entry_slots_; }
  const unsigned long long* group_keys() const { return group_keys_; }
  const uint32_t* group_firsts() const { return group_firsts_; }

 private:
  PlanProgram() = default;

  struct Piece {
    uint8_t* device = nullptr;  // where it lies on the device
    size_t bytes = 0;
    size_t at = 0;  // its offset in the page-locked buffer
  };
  // One queued call and the step it belongs to (named in errors).
  struct Call {
    std::string where;
    std::function<cudaError_t(cudaStream_t)> run;
  };

  absl::Status Lay(const DevicePlanInput& input, StreamContext& ctx);
  absl::Status LayLookup(const DevicePlanInput& input, size_t step);
  absl::Status LayFilter(const DevicePlanInput& input, size_t step, StreamContext& ctx);
  absl::Status LayGroups(const DevicePlanInput& input);
  absl::StatusOr<uint8_t*> Buffer(size_t bytes, const char* what);
  // Queues every call; `failed` names the one that failed.
  cudaError_t Enqueue(cudaStream_t stream, std::string* failed) const;

  Shape shape_;
  cudaStream_t stream_ = nullptr;
  std::vector<DeviceBuffer<uint8_t>> buffers_;
  std::vector<Piece> inputs_;    // per uploaded data or validity, in the arena
  std::vector<size_t> input_of_; // inputs_[k]'s column * 2 + (1 for validity)
  uint8_t* arena_ = nullptr;
  size_t arena_bytes_ = 0;
  std::vector<Piece> results_;
  size_t result_bytes_ = 0;
  std::vector<Call> calls_;
  std::vector<PlanColumnRef> columns_;
  size_t input_columns_ = 0;
  std::vector<bool> lookups_;
  PlanStepCounters* counters_ = nullptr;
  uint8_t* live_ = nullptr;
  uint64_t capacity_ = 0;
  uint64_t prefetched_ = 0;
  uint32_t* slot_of_row_ = nullptr;
  uint32_t* entry_slots_ = nullptr;
  unsigned long long* group_keys_ = nullptr;
  uint32_t* group_firsts_ = nullptr;
  PinnedBuffer in_, out_;
  std::unique_ptr<CapturedGraph> graph_;
};

/// Per-stream-context cache of captured plan programs (captured_graph.hpp).
using PlanGraphCache = GraphCache<PlanProgram>;

/// Process-wide totals over every context's plan graph cache.
GraphTotals PlanGraphCounters();

}  // namespace gpujoin::engine::detail
