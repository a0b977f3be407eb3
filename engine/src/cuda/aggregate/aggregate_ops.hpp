// Internal (CUDA builds only): the device-level API of grouped aggregation. The
// call takes device pointers, enqueues work on the given stream and returns
// without synchronising. The backend lowers aggregate nodes onto it; the kernel
// benchmark (bench/) and the device-level tests call it directly.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <optional>
#include <string_view>

#include "gpujoin/engine/column.hpp"
#include "gpujoin/engine/types.hpp"

namespace gpujoin::engine::detail {

/// How Aggregate accumulates rows into groups. Every path gives the same counts,
/// minima and maxima; float sums differ only by accumulation order.
enum class AggregatePath {
  /// At most 16 groups: lane-private shared-memory accumulators (one bank per
  /// lane, no atomics), combined once per block.
  kLanePrivate,
  /// At most 256 groups: one block-private copy of the groups in static shared
  /// memory (shared atomics), flushed with one global atomic per group per block.
  kBlockShared,
  /// One block-private copy of a range of groups in dynamic shared memory (counts
  /// as 16-bit halves of 32-bit words with an exact flush to global memory at
  /// 2^15); more groups than one block holds take several passes over the rows
  /// (at most 4), one per group range.
  kSharedRange,
  /// Global atomics on the outputs directly.
  kGlobal,
};

/// "lane-private", "block-shared", "shared-range" or "global".
std::string_view AggregatePathName(AggregatePath path);

/// Device inputs/outputs of one grouped aggregation.
struct AggregateArgs {
  AggregateOp op = AggregateOp::kCount;
  const uint32_t* keys = nullptr;
  /// Value ops: `rows` values of value_type (required); null for kCount.
  const void* values = nullptr;
  const uint32_t* mask = nullptr;  ///< optional
  uint64_t rows = 0;
  uint32_t groups = 0;  ///< at least 1
  /// kCount: the output. Other ops: contributing rows per group (required for
  /// kMean and for integer min/max (AggregateNeedsCounts); may be null otherwise
  /// when not requested).
  uint32_t* counts = nullptr;
  /// The values' type: kFloat32, kFloat64, kInt32, kInt64, kUint32 or kUint64
  /// (kFloat32 for kCount).
  ColumnType value_type = ColumnType::kFloat32;
  /// Value ops: the output (required). kFloat32: `groups` floats. Other types:
  /// AggregateTypedOutputWords 64-bit words (accumulators while the call runs),
  /// the first `groups` of which hold the result words (AggregateNode::output).
  void* output = nullptr;
  uint8_t* overflow = nullptr;  ///< integer sum/mean: groups flags (required), else null
  /// Tests and benchmarks only: take this path instead of the one chosen by group
  /// count. Aggregate returns cudaErrorInvalidValue when it cannot hold the groups
  /// (AggregatePathFits).
  std::optional<AggregatePath> force_path;
};

/// Words the output of a value op over other values than float32 needs: 2 per group for
/// int64/uint64 sum and mean (the sums of the values' low and high 32-bit halves,
/// both exact in 64 bits for 2^32 - 1 rows, combined into the 128-bit exact sum
/// at the end), else 1 per group.
size_t AggregateTypedOutputWords(AggregateOp op, ColumnType value_type, uint32_t groups);

/// Whether args.counts is required: kCount, kMean, and min/max of integers (whose
/// empty groups no sentinel can mark).
bool AggregateNeedsCounts(AggregateOp op, ColumnType value_type);

/// Initialises the outputs, accumulates all rows and finalises (min/max decoding,
/// mean division, NaN for empty groups), all on `stream`. Returns the first CUDA
/// error of a call or launch; cudaErrorInvalidValue for a forced path that cannot
/// hold the groups.
cudaError_t Aggregate(const AggregateArgs& args, cudaStream_t stream);

/// Whether `path` can hold args.groups groups for args.op (and counts or not) on
/// the current device: lane-private <= 16 (float32 values and counts only),
/// block-shared <= 256, shared-range at most 4 passes of what one block's shared
/// memory holds (2 bytes per group for counts, 4 for float32 values, 8 per
/// accumulator word of typed ones); global always. False when the device cannot be queried.
bool AggregatePathFits(const AggregateArgs& args, AggregatePath path);

/// The path Aggregate takes for `args` on the current device: force_path when
/// set, else the path chosen by group count, rows and bytes per group (the
/// shared-range path for up to 2 passes, global atomics beyond).
AggregatePath ChosenAggregatePath(const AggregateArgs& args);

}  // namespace gpujoin::engine::detail
