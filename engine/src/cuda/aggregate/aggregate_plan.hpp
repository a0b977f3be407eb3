// Internal (CUDA builds only): the host-side planning of grouped aggregation
// (aggregate_ops.hpp), shared by the kernels and their launchers
// (aggregate_kernels.cu) and the path choice (aggregate_plan.cpp): the group
// limits of the shared-memory paths, the device limits the shared-range path
// sizes itself by, and the shape of a shared-range launch. Plain C++.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "cuda/aggregate/aggregate_ops.hpp"
#include "gpujoin/engine/column.hpp"
#include "gpujoin/engine/types.hpp"

namespace gpujoin::engine::detail::aggregate_plan {

/// Most groups of the lane-private path (AggregatePath::kLanePrivate).
inline constexpr uint32_t kWarpGroups = 16;
/// Most groups of the block-shared path (AggregatePath::kBlockShared).
inline constexpr uint32_t kSharedGroups = 256;
/// Most passes over the rows of the shared-range path.
inline constexpr uint32_t kMaxPasses = 4;

/// Device properties the range paths size themselves by, queried once per device.
struct DeviceLimits {
  int sms = 0;
  int shared_optin = 0;  ///< dynamic shared memory one block may opt in to (bytes)
};

/// The current device's limits (cached per device after the first query);
/// cudaErrorInvalidDevice beyond the 64 devices it caches.
cudaError_t CurrentLimits(DeviceLimits& out);

/// Whether `op` over `t` keeps two words per group (int64/uint64 sum and mean).
bool IsSplitSum(AggregateOp op, ColumnType t);

/// Shared-memory bytes of one group's value accumulators.
uint32_t ValueBytesPerGroup(const AggregateArgs& a);

/// Shape of a range launch: `passes` launches, each block holding `per_rank`
/// groups in `shared_bytes` of dynamic shared memory.
struct RangePlan {
  uint32_t per_rank = 0;
  uint32_t passes = 0;  ///< 0: the range path cannot hold the groups
  size_t shared_bytes = 0;
};

/// The range launch for `a` on a device with `limits`.
RangePlan PlanRange(const AggregateArgs& a, const DeviceLimits& limits);

}  // namespace gpujoin::engine::detail::aggregate_plan
