// Grouped aggregation on the device. Accumulation paths by group count:
//  - <= 16 groups: lane-private shared-memory accumulators (group-major, one
//    32-bank row per warp, so a lane only ever touches its own bank: no atomics and
//    no conflicts), combined across lanes and warps once per block. The
//    __match_any_sync warp-combining variant (kPath 0: peers found per step, one
//    shared atomic per distinct group) is kept selectable for the benchmark: on an
//    H200 it read only 24% of the copy bandwidth for a 16-group count because the
//    match instruction itself is the bottleneck; the lane-private path has no
//    per-row warp collective at all;
//  - <= 256 groups: block-private shared-memory accumulators, flushed with one
//    global atomic per group per block;
//  - more: global atomics directly.
// Min/max use an order-preserving uint32 encoding of float (so -0 < +0 and
// atomicMin/atomicMax on integers apply); empty groups keep the encoding's
// sentinel and are decoded to NaN. Mean is a sum plus a count, divided at the end.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "cuda/device_ops.hpp"
#include "cuda/kernel_utils.cuh"

namespace gpujoin::engine::detail {
namespace {

constexpr uint32_t kWarpGroups = 16;
constexpr uint32_t kBlockWarps = kBlockThreads / 32;
constexpr uint32_t kSharedGroups = 256;
constexpr uint32_t kMinEmpty = 0xffffffffu;  // encoded min of an empty group
constexpr uint32_t kMaxEmpty = 0u;           // encoded max of an empty group

// Accumulation kinds: mean accumulates exactly like sum (plus counts).
enum class Acc { kCount, kSum, kMin, kMax };

__device__ __forceinline__ uint32_t EncodeOrdered(float f) {
  const uint32_t b = __float_as_uint(f);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

__device__ __forceinline__ float DecodeOrdered(uint32_t e) {
  return __uint_as_float((e & 0x80000000u) ? (e & 0x7fffffffu) : ~e);
}

template <Acc kAcc>
__device__ __forceinline__ uint32_t Combine(uint32_t a, uint32_t b) {
  if constexpr (kAcc == Acc::kSum) return __float_as_uint(__uint_as_float(a) + __uint_as_float(b));
  if constexpr (kAcc == Acc::kMin) return a < b ? a : b;
  return a > b ? a : b;
}

// Reduces `x` over the lanes of `peers` (all lanes of the warp call it, each with
// its own peer mask); the result is valid in the lowest lane of each peer group.
// A tree over peer ranks: at step s, rank r (r % 2s == 0) takes rank r + s.
template <Acc kAcc>
__device__ __forceinline__ uint32_t PeerReduce(uint32_t peers, uint32_t x) {
  const uint32_t lane = threadIdx.x & 31u;
  const uint32_t rank = __popc(peers & ((1u << lane) - 1u));
  const uint32_t size = __popc(peers);
  // Uniform trip count: the largest peer group decides it.
  const uint32_t steps = 32u - __clz(__reduce_max_sync(0xffffffffu, size - 1u));
  for (uint32_t k = 0; k < steps; ++k) {
    const uint32_t s = 1u << k;
    const uint32_t src = __fns(peers, lane, int(s + 1));
    const uint32_t y = __shfl_sync(0xffffffffu, x, src < 32u ? src : lane);
    if ((rank & (2u * s - 1u)) == 0 && src < 32u) x = Combine<kAcc>(x, y);
  }
  return x;
}

template <Acc kAcc>
__device__ __forceinline__ void SharedAccumulate(uint32_t* acc, uint32_t g, uint32_t v) {
  if constexpr (kAcc == Acc::kSum) atomicAdd(reinterpret_cast<float*>(acc) + g, __uint_as_float(v));
  if constexpr (kAcc == Acc::kMin) atomicMin(acc + g, v);
  if constexpr (kAcc == Acc::kMax) atomicMax(acc + g, v);
}

template <Acc kAcc, int kPath, bool kMask>
__global__ void __launch_bounds__(kBlockThreads)
    AccumulateKernel(const uint32_t* __restrict__ keys, const float* __restrict__ values,
                     const uint32_t* __restrict__ mask, uint64_t rows, uint32_t groups,
                     uint32_t* __restrict__ counts, uint32_t* __restrict__ acc_out) {
  constexpr bool kValues = kAcc != Acc::kCount;
  __shared__ uint32_t s_count[kPath < 2 ? kSharedGroups : 1];
  __shared__ uint32_t s_acc[kPath < 2 && kValues ? kSharedGroups : 1];
  // Lane-private path: entry (group * kBlockWarps + warp) * 32 + lane.
  constexpr uint32_t kLaneSlots = kWarpGroups * kBlockWarps * 32;
  __shared__ uint32_t s_lcount[kPath == 3 ? kLaneSlots : 1];
  __shared__ uint32_t s_lacc[kPath == 3 && kValues ? kLaneSlots : 1];
  const bool want_counts = counts != nullptr;
  const uint32_t warp_in_block = threadIdx.x / 32u;
  if constexpr (kPath == 3) {
    for (uint32_t i = threadIdx.x; i < kLaneSlots; i += blockDim.x) {
      s_lcount[i] = 0;
      if constexpr (kValues)
        s_lacc[i] = kAcc == Acc::kMin ? kMinEmpty : (kAcc == Acc::kMax ? kMaxEmpty : 0u);
    }
    __syncthreads();
  }
  if constexpr (kPath < 2) {
    for (uint32_t g = threadIdx.x; g < groups; g += blockDim.x) {
      s_count[g] = 0;
      if constexpr (kValues)
        s_acc[g] = kAcc == Acc::kMin ? kMinEmpty : (kAcc == Acc::kMax ? kMaxEmpty : 0u);
    }
    __syncthreads();
  }
  const uint32_t lane = threadIdx.x & 31u;

  auto process = [&](uint32_t key, float value, bool include) {
    include = include && key < groups && (!kValues || isfinite(value));
    const uint32_t enc = kAcc == Acc::kSum ? __float_as_uint(value) : EncodeOrdered(value);
    if constexpr (kPath == 0) {
      // Warp combining: every lane takes part (uniform control flow).
      const uint32_t peers = __match_any_sync(0xffffffffu, include ? key : 0xffffffffu);
      uint32_t reduced = 0;
      if constexpr (kValues) reduced = PeerReduce<kAcc>(peers, enc);
      const bool leader = lane == uint32_t(__ffs(peers) - 1);
      if (include && leader) {
        if (want_counts) atomicAdd(&s_count[key], uint32_t(__popc(peers)));
        if constexpr (kValues) SharedAccumulate<kAcc>(s_acc, key, reduced);
      }
    } else if constexpr (kPath == 3) {
      if (include) {
        const uint32_t slot = (key * kBlockWarps + warp_in_block) * 32u + lane;
        if (want_counts) s_lcount[slot] += 1u;
        if constexpr (kValues) s_lacc[slot] = Combine<kAcc>(s_lacc[slot], enc);
      }
    } else if constexpr (kPath == 1) {
      if (include) {
        if (want_counts) atomicAdd(&s_count[key], 1u);
        if constexpr (kValues) SharedAccumulate<kAcc>(s_acc, key, enc);
      }
    } else {
      if (include) {
        if (want_counts) atomicAdd(&counts[key], 1u);
        if constexpr (kAcc == Acc::kSum) atomicAdd(reinterpret_cast<float*>(acc_out) + key, value);
        if constexpr (kAcc == Acc::kMin) atomicMin(acc_out + key, enc);
        if constexpr (kAcc == Acc::kMax) atomicMax(acc_out + key, enc);
      }
    }
  };

  // Four rows per lane per step (16-byte loads when aligned); the loop is
  // warp-uniform so the warp path can use full-mask intrinsics.
  const uint64_t units = (rows + 3) / 4;
  const bool aligned = (reinterpret_cast<uintptr_t>(keys) & 15u) == 0 &&
                       (!kMask || (reinterpret_cast<uintptr_t>(mask) & 15u) == 0) &&
                       (!kValues || (reinterpret_cast<uintptr_t>(values) & 15u) == 0);
  const uint64_t warp = (uint64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32u;
  const uint64_t warps = uint64_t(gridDim.x) * blockDim.x / 32u;
  for (uint64_t u0 = warp * 32u; u0 < units; u0 += warps * 32u) {
    const uint64_t u = u0 + lane;
    const uint64_t r0 = u * 4u;
    uint32_t k[4] = {0, 0, 0, 0};
    uint32_t m[4] = {1, 1, 1, 1};
    float v[4] = {0.f, 0.f, 0.f, 0.f};
    bool in[4] = {false, false, false, false};
    if (aligned && r0 + 3 < rows) {
      const uint4 kk = __ldcs(reinterpret_cast<const uint4*>(keys + r0));
      k[0] = kk.x;
      k[1] = kk.y;
      k[2] = kk.z;
      k[3] = kk.w;
      if constexpr (kMask) {
        const uint4 mm = __ldcs(reinterpret_cast<const uint4*>(mask + r0));
        m[0] = mm.x;
        m[1] = mm.y;
        m[2] = mm.z;
        m[3] = mm.w;
      }
      if constexpr (kValues) {
        const float4 vv = __ldcs(reinterpret_cast<const float4*>(values + r0));
        v[0] = vv.x;
        v[1] = vv.y;
        v[2] = vv.z;
        v[3] = vv.w;
      }
#pragma unroll
      for (int j = 0; j < 4; ++j) in[j] = true;
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        if (r0 + j < rows) {
          in[j] = true;
          k[j] = keys[r0 + j];
          if constexpr (kMask) m[j] = mask[r0 + j];
          if constexpr (kValues) v[j] = values[r0 + j];
        }
      }
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) process(k[j], v[j], in[j] && m[j] != 0);
  }

  if constexpr (kPath == 3) {
    // Warp w folds groups w, w + kBlockWarps, ...: each lane combines its column
    // over the block's warps, then the warp reduces the 32 columns.
    __syncthreads();
    for (uint32_t g = warp_in_block; g < groups; g += kBlockWarps) {
      uint32_t c = 0;
      uint32_t a = kAcc == Acc::kMin ? kMinEmpty : (kAcc == Acc::kMax ? kMaxEmpty : 0u);
#pragma unroll
      for (uint32_t w = 0; w < kBlockWarps; ++w) {
        const uint32_t slot = (g * kBlockWarps + w) * 32u + lane;
        c += s_lcount[slot];
        if constexpr (kValues) a = Combine<kAcc>(a, s_lacc[slot]);
      }
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) {
        c += __shfl_down_sync(0xffffffffu, c, o);
        if constexpr (kValues) a = Combine<kAcc>(a, __shfl_down_sync(0xffffffffu, a, o));
      }
      if (lane == 0) {
        if (want_counts && c != 0) atomicAdd(&counts[g], c);
        if constexpr (kAcc == Acc::kSum) {
          if (__uint_as_float(a) != 0.f)
            atomicAdd(reinterpret_cast<float*>(acc_out) + g, __uint_as_float(a));
        }
        if constexpr (kAcc == Acc::kMin)
          if (a != kMinEmpty) atomicMin(acc_out + g, a);
        if constexpr (kAcc == Acc::kMax)
          if (a != kMaxEmpty) atomicMax(acc_out + g, a);
      }
    }
  }

  if constexpr (kPath < 2) {
    __syncthreads();
    for (uint32_t g = threadIdx.x; g < groups; g += blockDim.x) {
      if (want_counts && s_count[g] != 0) atomicAdd(&counts[g], s_count[g]);
      if constexpr (kAcc == Acc::kSum) {
        const float s = __uint_as_float(s_acc[g]);
        if (s != 0.f) atomicAdd(reinterpret_cast<float*>(acc_out) + g, s);
      }
      if constexpr (kAcc == Acc::kMin)
        if (s_acc[g] != kMinEmpty) atomicMin(acc_out + g, s_acc[g]);
      if constexpr (kAcc == Acc::kMax)
        if (s_acc[g] != kMaxEmpty) atomicMax(acc_out + g, s_acc[g]);
    }
  }
}

// Decodes min/max (empty -> NaN) or divides mean sums by counts (empty -> NaN).
__global__ void __launch_bounds__(kBlockThreads)
    FinalizeAggregateKernel(AggregateOp op, uint32_t groups, const uint32_t* __restrict__ counts,
                            float* __restrict__ output) {
  const uint32_t stride = gridDim.x * blockDim.x;
  for (uint32_t g = blockIdx.x * blockDim.x + threadIdx.x; g < groups; g += stride) {
    const uint32_t bits = __float_as_uint(output[g]);
    float r = output[g];
    // The canonical quiet NaN, bit-identical to the CPU backend's.
    const float nan = __uint_as_float(0x7fc00000u);
    if (op == AggregateOp::kMin) r = bits == kMinEmpty ? nan : DecodeOrdered(bits);
    if (op == AggregateOp::kMax) r = bits == kMaxEmpty ? nan : DecodeOrdered(bits);
    if (op == AggregateOp::kMean) r = counts[g] == 0 ? nan : r / float(counts[g]);
    output[g] = r;
  }
}

template <Acc kAcc, int kPath, bool kMask>
cudaError_t LaunchAccumulate(const AggregateArgs& a, uint32_t* counts, uint32_t* acc,
                             cudaStream_t stream) {
  static std::atomic<int> resident{0};
  const unsigned grid =
      GridFor((a.rows + 3) / 4, CachedResident(AccumulateKernel<kAcc, kPath, kMask>, resident));
  AccumulateKernel<kAcc, kPath, kMask>
      <<<grid, kBlockThreads, 0, stream>>>(a.keys, a.values, a.mask, a.rows, a.groups, counts, acc);
  return cudaGetLastError();
}

template <Acc kAcc, int kPath>
cudaError_t DispatchMask(const AggregateArgs& a, uint32_t* counts, uint32_t* acc,
                         cudaStream_t stream) {
  return a.mask != nullptr ? LaunchAccumulate<kAcc, kPath, true>(a, counts, acc, stream)
                           : LaunchAccumulate<kAcc, kPath, false>(a, counts, acc, stream);
}

template <Acc kAcc>
cudaError_t DispatchPath(const AggregateArgs& a, uint32_t* counts, uint32_t* acc,
                         cudaStream_t stream) {
  int path = AggregatePath(a.groups);
  // A forced path must still be able to hold the groups.
  if (a.force_path == 0 && a.groups <= kWarpGroups) path = 0;
  if (a.force_path == 1 && a.groups <= kSharedGroups) path = 1;
  if (a.force_path == 2) path = 2;
  switch (path) {
    case 0:
      return DispatchMask<kAcc, 0>(a, counts, acc, stream);
    case 1:
      return DispatchMask<kAcc, 1>(a, counts, acc, stream);
    case 3:
      return DispatchMask<kAcc, 3>(a, counts, acc, stream);
    default:
      return DispatchMask<kAcc, 2>(a, counts, acc, stream);
  }
}

}  // namespace

int AggregatePath(uint32_t groups) {
  if (groups <= kWarpGroups) return 3;
  if (groups <= kSharedGroups) return 1;
  return 2;
}

cudaError_t Aggregate(const AggregateArgs& a, cudaStream_t stream) {
  if (a.groups == 0) return cudaSuccess;
  const bool value_op = a.op != AggregateOp::kCount;
  if (a.counts != nullptr) {
    cudaError_t e = cudaMemsetAsync(a.counts, 0, size_t(a.groups) * sizeof(uint32_t), stream);
    if (e != cudaSuccess) return e;
  }
  uint32_t* acc = reinterpret_cast<uint32_t*>(a.output);
  if (value_op) {
    // +0.0f and the encoded max sentinel are all-zero bits; the min sentinel is all ones.
    const int fill = a.op == AggregateOp::kMin ? 0xff : 0;
    cudaError_t e = cudaMemsetAsync(acc, fill, size_t(a.groups) * sizeof(float), stream);
    if (e != cudaSuccess) return e;
  }
  cudaError_t e = cudaSuccess;
  if (a.rows > 0) {
    switch (a.op) {
      case AggregateOp::kCount:
        e = DispatchPath<Acc::kCount>(a, a.counts, nullptr, stream);
        break;
      case AggregateOp::kSum:
      case AggregateOp::kMean:
        e = DispatchPath<Acc::kSum>(a, a.counts, acc, stream);
        break;
      case AggregateOp::kMin:
        e = DispatchPath<Acc::kMin>(a, a.counts, acc, stream);
        break;
      case AggregateOp::kMax:
        e = DispatchPath<Acc::kMax>(a, a.counts, acc, stream);
        break;
    }
    if (e != cudaSuccess) return e;
  }
  if (a.op == AggregateOp::kMin || a.op == AggregateOp::kMax || a.op == AggregateOp::kMean) {
    const unsigned needed = unsigned((a.groups + kBlockThreads - 1) / kBlockThreads);
    const unsigned grid = needed < 4096u ? needed : 4096u;
    FinalizeAggregateKernel<<<grid, kBlockThreads, 0, stream>>>(a.op, a.groups, a.counts,
                                                                 a.output);
    e = cudaGetLastError();
  }
  return e;
}

}  // namespace gpujoin::engine::detail
