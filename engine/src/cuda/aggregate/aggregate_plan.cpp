// Host-side planning of grouped aggregation (aggregate_plan.hpp): which path
// holds how many groups, the shape of a shared-range launch and the path chosen
// for a call. Plain C++: the kernels and their launchers are in
// aggregate_kernels.cu.
#include "cuda/aggregate/aggregate_plan.hpp"

#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <string_view>

#include "cuda/aggregate/aggregate_ops.hpp"

namespace gpujoin::engine::detail {
namespace aggregate_plan {
namespace {

constexpr int kMaxDevices = 64;

}  // namespace

cudaError_t CurrentLimits(DeviceLimits& out) {
  static std::atomic<int> sms[kMaxDevices], optin[kMaxDevices];
  int device = 0;
  cudaError_t e = cudaGetDevice(&device);
  if (e != cudaSuccess) return e;
  if (device < 0 || device >= kMaxDevices) return cudaErrorInvalidDevice;
  out.sms = sms[device].load(std::memory_order_relaxed);
  out.shared_optin = optin[device].load(std::memory_order_relaxed);
  if (out.sms > 0) return cudaSuccess;
  e = cudaDeviceGetAttribute(&out.shared_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
  if (e == cudaSuccess)
    e = cudaDeviceGetAttribute(&out.sms, cudaDevAttrMultiProcessorCount, device);
  if (e != cudaSuccess) return e;
  optin[device].store(out.shared_optin, std::memory_order_relaxed);
  sms[device].store(out.sms, std::memory_order_relaxed);
  return cudaSuccess;
}

bool IsSplitSum(AggregateOp op, ColumnType t) {
  return (op == AggregateOp::kSum || op == AggregateOp::kMean) &&
         (t == ColumnType::kInt64 || t == ColumnType::kUint64);
}

uint32_t ValueBytesPerGroup(const AggregateArgs& a) {
  if (a.op == AggregateOp::kCount) return 0;
  if (a.value_type == ColumnType::kFloat32) return 4;
  return IsSplitSum(a.op, a.value_type) ? 16 : 8;
}

RangePlan PlanRange(const AggregateArgs& a, const DeviceLimits& limits) {
  RangePlan p;
  const bool counts = a.counts != nullptr;
  const uint32_t value_bytes = ValueBytesPerGroup(a);
  const uint32_t bytes_per_group = (counts ? 2u : 0u) + value_bytes;
  if (bytes_per_group == 0 || a.groups == 0) return p;
  // Even, so that the packed count words of a range never straddle the values; a
  // multiple of 4 for 8-byte accumulators, which then start 8-byte aligned.
  const uint32_t align = value_bytes >= 8 ? ~3u : ~1u;
  const uint32_t max_per_pass = (uint32_t(limits.shared_optin) / bytes_per_group) & align;
  if (max_per_pass == 0) return p;
  const uint64_t passes = (uint64_t(a.groups) + max_per_pass - 1) / max_per_pass;
  if (passes > kMaxPasses) return p;
  p.passes = uint32_t(passes);
  p.per_rank = (uint32_t((a.groups + passes - 1) / passes) + ~align) & align;
  p.shared_bytes = (counts ? size_t(p.per_rank) / 2 * 4 : 0) + size_t(p.per_rank) * value_bytes;
  return p;
}

}  // namespace aggregate_plan

using aggregate_plan::CurrentLimits;
using aggregate_plan::DeviceLimits;
using aggregate_plan::IsSplitSum;
using aggregate_plan::kSharedGroups;
using aggregate_plan::kWarpGroups;
using aggregate_plan::PlanRange;

size_t AggregateTypedOutputWords(AggregateOp op, ColumnType value_type, uint32_t groups) {
  return size_t(groups) * (IsSplitSum(op, value_type) ? 2 : 1);
}

bool AggregateNeedsCounts(AggregateOp op, ColumnType value_type) {
  if (op == AggregateOp::kCount || op == AggregateOp::kMean) return true;
  const bool integer = value_type != ColumnType::kFloat32 && value_type != ColumnType::kFloat64;
  return integer && (op == AggregateOp::kMin || op == AggregateOp::kMax);
}

std::string_view AggregatePathName(AggregatePath path) {
  switch (path) {
    case AggregatePath::kLanePrivate:
      return "lane-private";
    case AggregatePath::kBlockShared:
      return "block-shared";
    case AggregatePath::kSharedRange:
      return "shared-range";
    case AggregatePath::kGlobal:
      return "global";
  }
  return "unknown";
}

bool AggregatePathFits(const AggregateArgs& a, AggregatePath path) {
  switch (path) {
    case AggregatePath::kLanePrivate:
      return a.groups <= kWarpGroups &&
             (a.op == AggregateOp::kCount || a.value_type == ColumnType::kFloat32);
    case AggregatePath::kBlockShared:
      return a.groups <= kSharedGroups;
    case AggregatePath::kSharedRange: {
      DeviceLimits limits;
      if (CurrentLimits(limits) != cudaSuccess) return false;
      return PlanRange(a, limits).passes != 0;
    }
    case AggregatePath::kGlobal:
      return true;
  }
  return false;
}

AggregatePath ChosenAggregatePath(const AggregateArgs& a) {
  if (a.force_path.has_value()) return *a.force_path;
  if (a.groups <= kWarpGroups && AggregatePathFits(a, AggregatePath::kLanePrivate)) {
    return AggregatePath::kLanePrivate;
  }
  if (a.groups <= kSharedGroups) return AggregatePath::kBlockShared;
  // With fewer than two rows per group, clearing and flushing a privatised copy
  // costs more than the rows' own global atomics.
  if (a.rows < 2 * uint64_t(a.groups)) return AggregatePath::kGlobal;
  DeviceLimits limits;
  if (CurrentLimits(limits) != cudaSuccess) return AggregatePath::kGlobal;
  // H200, 2^28 rows: 65,536 groups count 840 Gkeys/s in 1 pass, mean 196 in 2 (global
  // atomics: 91 and 43); 200,000 groups count 408 in 2 passes (global 91). 3-4: unmeasured.
  const uint32_t passes = PlanRange(a, limits).passes;
  return passes != 0 && passes <= 2 ? AggregatePath::kSharedRange : AggregatePath::kGlobal;
}

}  // namespace gpujoin::engine::detail
