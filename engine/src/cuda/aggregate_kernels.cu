// Grouped aggregation on the device. Accumulation paths (AggregatePath), chosen
// by ChosenAggregatePath:
//  - kLanePrivate (<= 16 groups): lane-private shared-memory accumulators
//    (group-major, one 32-bank row per warp, so a lane only ever touches its own
//    bank: no atomics and no conflicts), combined across lanes and warps once per
//    block;
//  - kBlockShared (<= 256 groups): block-private shared-memory accumulators,
//    flushed with one global atomic per group per block;
//  - kSharedRange (more groups, up to what 4 passes hold): a block-private copy
//    of a range of groups in dynamic shared memory (up to 227 KiB per block on an
//    H200). Counts are 16-bit halves of 32-bit words, so 65,536 counts take 128
//    KiB: the thread whose atomicAdd takes a half from 0x7fff to 0x8000 adds
//    0x8000 to the global count and subtracts it from the word. Counts stay exact
//    modulo 2^32: for a half to wrap, 2^15 further increments of that one half
//    would have to land between that thread's add and its subtract (two dependent
//    instructions), while same-address shared atomics complete about one per
//    clock. More groups than one block holds take one pass over the rows per
//    range of groups;
//  - kGlobal: global atomics directly.
// Float adds to shared memory compile to a compare-and-swap loop on sm_90
// (ATOMS.CAST.SPIN), which is what bounds sum and mean on the shared paths.
// Min/max use an order-preserving uint32 encoding of float (so -0 < +0 and
// atomicMin on integers applies); max is the minimum of the complemented
// encodings (one kernel for both: `flip` is 0 for min, all ones for max), and
// empty groups keep the sentinel all ones, decoded to NaN. Mean is a sum plus a
// count, divided at the end. The mask is a run-time option of every kernel.
#include <cuda_runtime.h>

#include <atomic>
#include <cmath>
#include <cstdint>

#include "cuda/aggregate_ops.hpp"
#include "cuda/kernel_utils.cuh"

namespace gpujoin::engine::detail {
namespace {

constexpr uint32_t kWarpGroups = 16;
constexpr uint32_t kBlockWarps = kBlockThreads / 32;
constexpr uint32_t kSharedGroups = 256;
constexpr uint32_t kMinEmpty = 0xffffffffu;  // accumulated min/max of an empty group

// Range path: one block per SM at the largest ranges, so a full-size block keeps
// enough loads in flight; at most this many passes over the rows.
constexpr int kRangeThreads = 1024;
constexpr uint32_t kMaxPasses = 4;
// A packed 16-bit count is moved to global memory when it reaches this.
constexpr uint32_t kHalfFlush = 0x8000u;
constexpr int kMaxDevices = 64;

// Accumulation kinds: mean accumulates exactly like sum (plus counts); max
// like min, on complemented encodings.
enum class Acc { kCount, kSum, kMin };

template <Acc kAcc>
__host__ __device__ constexpr uint32_t Identity() {
  return kAcc == Acc::kMin ? kMinEmpty : 0u;
}

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
  return a < b ? a : b;
}

// Folds `enc` (the value's bits for sum, its flipped ordered encoding for
// min/max) into acc[g], in shared or global memory.
template <Acc kAcc>
__device__ __forceinline__ void AtomicAccumulate(uint32_t* acc, uint32_t g, uint32_t enc) {
  if constexpr (kAcc == Acc::kSum)
    atomicAdd(reinterpret_cast<float*>(acc) + g, __uint_as_float(enc));
  if constexpr (kAcc == Acc::kMin) atomicMin(acc + g, enc);
}

// Folds a block's partial `a` of group g into the global output unless it is the
// identity (a partial sum is never -0: it starts at +0 and x + -x is +0).
template <Acc kAcc>
__device__ __forceinline__ void FlushValue(uint32_t* acc_out, uint32_t g, uint32_t a) {
  if constexpr (kAcc == Acc::kSum) {
    if (__uint_as_float(a) != 0.f) AtomicAccumulate<kAcc>(acc_out, g, a);
  } else if constexpr (kAcc != Acc::kCount) {
    if (a != Identity<kAcc>()) AtomicAccumulate<kAcc>(acc_out, g, a);
  }
}

// Calls process(key, value, included) for every row, four rows per lane per step
// (16-byte loads when the columns are aligned), warp-strided over the grid.
// kMask: the mask column is read (else every row is included).
template <bool kMask, bool kValues, typename Process>
__device__ __forceinline__ void ForEachRowByFour(const uint32_t* __restrict__ keys,
                                                 const float* __restrict__ values,
                                                 const uint32_t* __restrict__ mask, uint64_t rows,
                                                 Process& process) {
  const uint64_t units = (rows + 3) / 4;
  const bool aligned = (reinterpret_cast<uintptr_t>(keys) & 15u) == 0 &&
                       (!kMask || (reinterpret_cast<uintptr_t>(mask) & 15u) == 0) &&
                       (!kValues || (reinterpret_cast<uintptr_t>(values) & 15u) == 0);
  const uint32_t lane = threadIdx.x & 31u;
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
}

// Calls process(key, value, included) for every row: each warp step covers 256
// rows, two coalesced 512-byte loads per column, so every lane has 32 bytes of
// each column in flight; the tail (and every row when a column is not 16-byte
// aligned) goes one row per thread. kMask: the mask column is read.
template <bool kMask, bool kValues, typename Process>
__device__ __forceinline__ void ForEachRowBy256(const uint32_t* __restrict__ keys,
                                                const float* __restrict__ values,
                                                const uint32_t* __restrict__ mask, uint64_t rows,
                                                Process& process) {
  const bool aligned = (reinterpret_cast<uintptr_t>(keys) & 15u) == 0 &&
                       (!kMask || (reinterpret_cast<uintptr_t>(mask) & 15u) == 0) &&
                       (!kValues || (reinterpret_cast<uintptr_t>(values) & 15u) == 0);
  const uint32_t lane = threadIdx.x & 31u;
  const uint64_t thread = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const uint64_t threads = uint64_t(gridDim.x) * blockDim.x;
  const uint64_t steps = aligned ? rows / 256u : 0u;
  for (uint64_t s = thread / 32u; s < steps; s += threads / 32u) {
    const uint64_t q = s * 64u + lane;  // 16-byte unit of the first load
    uint4 k[2], m[2];
    float4 v[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      k[h] = __ldcs(reinterpret_cast<const uint4*>(keys) + q + 32u * h);
      if constexpr (kMask) m[h] = __ldcs(reinterpret_cast<const uint4*>(mask) + q + 32u * h);
      if constexpr (kValues) v[h] = __ldcs(reinterpret_cast<const float4*>(values) + q + 32u * h);
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      if constexpr (!kMask) m[h] = make_uint4(1u, 1u, 1u, 1u);
      if constexpr (!kValues) v[h] = make_float4(0.f, 0.f, 0.f, 0.f);
      process(k[h].x, v[h].x, m[h].x != 0);
      process(k[h].y, v[h].y, m[h].y != 0);
      process(k[h].z, v[h].z, m[h].z != 0);
      process(k[h].w, v[h].w, m[h].w != 0);
    }
  }
  for (uint64_t r = steps * 256u + thread; r < rows; r += threads) {
    process(keys[r], kValues ? values[r] : 0.f, !kMask || mask[r] != 0);
  }
}

template <Acc kAcc, AggregatePath kPath>
__global__ void __launch_bounds__(kBlockThreads)
    AccumulateKernel(const uint32_t* __restrict__ keys, const float* __restrict__ values,
                     const uint32_t* __restrict__ mask, uint64_t rows, uint32_t groups,
                     uint32_t flip, uint32_t* __restrict__ counts, uint32_t* __restrict__ acc_out) {
  constexpr bool kValues = kAcc != Acc::kCount;
  const bool masked = mask != nullptr;
  constexpr bool kShared = kPath == AggregatePath::kBlockShared;
  constexpr bool kLane = kPath == AggregatePath::kLanePrivate;
  __shared__ uint32_t s_count[kShared ? kSharedGroups : 1];
  __shared__ uint32_t s_acc[kShared && kValues ? kSharedGroups : 1];
  // Lane-private path: entry (group * kBlockWarps + warp) * 32 + lane.
  constexpr uint32_t kLaneSlots = kWarpGroups * kBlockWarps * 32;
  __shared__ uint32_t s_lcount[kLane ? kLaneSlots : 1];
  __shared__ uint32_t s_lacc[kLane && kValues ? kLaneSlots : 1];
  const bool want_counts = counts != nullptr;
  const uint32_t warp_in_block = threadIdx.x / 32u;
  if constexpr (kLane) {
    for (uint32_t i = threadIdx.x; i < kLaneSlots; i += blockDim.x) {
      s_lcount[i] = 0;
      if constexpr (kValues) s_lacc[i] = Identity<kAcc>();
    }
    __syncthreads();
  }
  if constexpr (kShared) {
    for (uint32_t g = threadIdx.x; g < groups; g += blockDim.x) {
      s_count[g] = 0;
      if constexpr (kValues) s_acc[g] = Identity<kAcc>();
    }
    __syncthreads();
  }
  const uint32_t lane = threadIdx.x & 31u;

  auto process = [&](uint32_t key, float value, bool include) {
    include = include && key < groups && (!kValues || isfinite(value));
    if (!include) return;
    const uint32_t enc = kAcc == Acc::kSum ? __float_as_uint(value) : EncodeOrdered(value) ^ flip;
    if constexpr (kLane) {
      const uint32_t slot = (key * kBlockWarps + warp_in_block) * 32u + lane;
      if (want_counts) s_lcount[slot] += 1u;
      if constexpr (kValues) s_lacc[slot] = Combine<kAcc>(s_lacc[slot], enc);
    } else if constexpr (kShared) {
      if (want_counts) atomicAdd(&s_count[key], 1u);
      if constexpr (kValues) AtomicAccumulate<kAcc>(s_acc, key, enc);
    } else {
      if (want_counts) atomicAdd(&counts[key], 1u);
      if constexpr (kValues) AtomicAccumulate<kAcc>(acc_out, key, enc);
    }
  };

  // The row loop, specialised for the mask (one kernel, two bodies).
  if (masked)
    ForEachRowByFour<true, kValues>(keys, values, mask, rows, process);
  else
    ForEachRowByFour<false, kValues>(keys, values, mask, rows, process);

  if constexpr (kLane) {
    // Warp w folds groups w, w + kBlockWarps, ...: each lane combines its column
    // over the block's warps, then the warp reduces the 32 columns.
    __syncthreads();
    for (uint32_t g = warp_in_block; g < groups; g += kBlockWarps) {
      uint32_t c = 0;
      uint32_t a = Identity<kAcc>();
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
        FlushValue<kAcc>(acc_out, g, a);
      }
    }
  }

  if constexpr (kShared) {
    __syncthreads();
    for (uint32_t g = threadIdx.x; g < groups; g += blockDim.x) {
      if (want_counts && s_count[g] != 0) atomicAdd(&counts[g], s_count[g]);
      if constexpr (kValues) FlushValue<kAcc>(acc_out, g, s_acc[g]);
    }
  }
}

// One contributing row of group `key` into the block's range copy: `words` holds
// the packed counts (used when want_counts), `acc` the value accumulators, both in
// shared memory; `local` is the group's index there.
template <Acc kAcc>
__device__ __forceinline__ void RangeAdd(bool want_counts, uint32_t* words, uint32_t* acc,
                                         uint32_t local, uint32_t key, uint32_t enc,
                                         uint32_t* counts) {
  if (want_counts) {
    const uint32_t shift = (local & 1u) * 16u;
    const uint32_t old = atomicAdd(words + (local >> 1), 1u << shift);
    if (((old >> shift) & 0xffffu) == kHalfFlush - 1u) {
      // This add took the half to 0x8000: move 0x8000 to the global count.
      atomicAdd(counts + key, kHalfFlush);
      atomicSub(words + (local >> 1), kHalfFlush << shift);
    }
  }
  if constexpr (kAcc != Acc::kCount) AtomicAccumulate<kAcc>(acc, local, enc);
}

// The range path. The block privatises groups [lo, lo + per_rank), group lo + i at
// index i. Dynamic shared memory: (per_rank + 1) / 2 packed count words when
// counts are wanted, then per_rank accumulators for value ops. Rows of other
// groups are skipped (another pass takes them).
template <Acc kAcc>
__global__ void __launch_bounds__(kRangeThreads)
    RangeKernel(const uint32_t* __restrict__ keys, const float* __restrict__ values,
                const uint32_t* __restrict__ mask, uint64_t rows, uint32_t groups, uint32_t lo,
                uint32_t per_rank, uint32_t flip, uint32_t* __restrict__ counts,
                uint32_t* __restrict__ acc_out) {
  constexpr bool kValues = kAcc != Acc::kCount;
  const bool masked = mask != nullptr;
  extern __shared__ uint32_t s_mem[];
  const bool want_counts = counts != nullptr;
  const uint32_t count_words = want_counts ? (per_rank + 1) / 2 : 0;
  uint32_t* const s_acc = s_mem + count_words;
  const uint32_t words = count_words + (kValues ? per_rank : 0u);
  for (uint32_t i = threadIdx.x; i < words; i += blockDim.x)
    s_mem[i] = i < count_words ? 0u : Identity<kAcc>();
  __syncthreads();

  auto process = [&](uint32_t key, float value, bool include) {
    include = include && key < groups && (!kValues || isfinite(value));
    const uint32_t local = key - lo;  // wraps for key < lo: skipped like local >= per_rank
    if (!include || local >= per_rank) return;
    const uint32_t enc = kAcc == Acc::kSum ? __float_as_uint(value) : EncodeOrdered(value) ^ flip;
    RangeAdd<kAcc>(want_counts, s_mem, s_acc, local, key, enc, counts);
  };

  if (masked)
    ForEachRowBy256<true, kValues>(keys, values, mask, rows, process);
  else
    ForEachRowBy256<false, kValues>(keys, values, mask, rows, process);

  __syncthreads();
  for (uint32_t i = threadIdx.x; i < per_rank; i += blockDim.x) {
    const uint32_t g = lo + i;
    if (g >= groups) break;
    if (want_counts) {
      const uint32_t c = (s_mem[i >> 1] >> ((i & 1u) * 16u)) & 0xffffu;
      if (c != 0) atomicAdd(&counts[g], c);
    }
    if constexpr (kValues) FlushValue<kAcc>(acc_out, g, s_acc[i]);
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
    if (op == AggregateOp::kMax) r = bits == kMinEmpty ? nan : DecodeOrdered(~bits);
    if (op == AggregateOp::kMean) r = counts[g] == 0 ? nan : r / float(counts[g]);
    output[g] = r;
  }
}

// Device properties the range paths size themselves by, queried once per device.
struct DeviceLimits {
  int sms = 0;
  int shared_optin = 0;  // dynamic shared memory one block may opt in to (bytes)
};

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

// Shape of a range launch: `passes` launches, each block holding `per_rank`
// groups in `shared_bytes` of dynamic shared memory.
struct RangePlan {
  uint32_t per_rank = 0;
  uint32_t passes = 0;  // 0: the range path cannot hold the groups
  size_t shared_bytes = 0;
};

RangePlan PlanRange(const AggregateArgs& a, const DeviceLimits& limits) {
  RangePlan p;
  const bool values = a.op != AggregateOp::kCount;
  const bool counts = a.counts != nullptr;
  const uint32_t bytes_per_group = (counts ? 2u : 0u) + (values ? 4u : 0u);
  if (bytes_per_group == 0 || a.groups == 0) return p;
  // Even, so that the packed count words of a range never straddle the values.
  const uint32_t max_per_pass = (uint32_t(limits.shared_optin) / bytes_per_group) & ~1u;
  if (max_per_pass == 0) return p;
  const uint64_t passes = (uint64_t(a.groups) + max_per_pass - 1) / max_per_pass;
  if (passes > kMaxPasses) return p;
  p.passes = uint32_t(passes);
  p.per_rank = (uint32_t((a.groups + passes - 1) / passes) + 1u) & ~1u;
  p.shared_bytes =
      (counts ? size_t(p.per_rank) / 2 * 4 : 0) + (values ? size_t(p.per_rank) * 4 : 0);
  return p;
}

template <Acc kAcc>
cudaError_t LaunchRange(const AggregateArgs& a, const RangePlan& p, uint32_t flip, uint32_t* counts,
                        uint32_t* acc, cudaStream_t stream) {
  auto* kernel = RangeKernel<kAcc>;
  static std::atomic<uint64_t> opted_in{0};  // devices (bits) with the attribute set
  int device = 0;
  cudaError_t e = cudaGetDevice(&device);
  if (e != cudaSuccess) return e;
  DeviceLimits limits;
  e = CurrentLimits(limits);
  if (e != cudaSuccess) return e;
  const uint64_t bit = uint64_t{1} << device;
  if ((opted_in.load(std::memory_order_relaxed) & bit) == 0) {
    e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             limits.shared_optin);
    if (e != cudaSuccess) return e;
    opted_in.fetch_or(bit, std::memory_order_relaxed);
  }
  int per_sm = 0;
  e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kRangeThreads, p.shared_bytes);
  if (e != cudaSuccess) return e;
  if (per_sm < 1) return cudaErrorInvalidConfiguration;
  // Each block clears and flushes its copy once: give it at least two rows per
  // privatised group so that this stays a small part of the work.
  const uint64_t resident = uint64_t(per_sm) * uint64_t(limits.sms);
  const uint64_t wanted = a.rows / (2 * uint64_t(p.per_rank));
  const unsigned blocks = unsigned(wanted < 1 ? 1 : (wanted < resident ? wanted : resident));
  for (uint32_t pass = 0; pass < p.passes; ++pass) {
    kernel<<<blocks, kRangeThreads, p.shared_bytes, stream>>>(a.keys, a.values, a.mask, a.rows,
                                                              a.groups, pass * p.per_rank,
                                                              p.per_rank, flip, counts, acc);
    e = cudaGetLastError();
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

template <Acc kAcc, AggregatePath kPath>
cudaError_t LaunchAccumulate(const AggregateArgs& a, uint32_t flip, uint32_t* counts, uint32_t* acc,
                             cudaStream_t stream) {
  static std::atomic<int> resident{0};
  const unsigned grid =
      GridFor((a.rows + 3) / 4, CachedResident(AccumulateKernel<kAcc, kPath>, resident));
  AccumulateKernel<kAcc, kPath><<<grid, kBlockThreads, 0, stream>>>(
      a.keys, a.values, a.mask, a.rows, a.groups, flip, counts, acc);
  return cudaGetLastError();
}

template <Acc kAcc>
cudaError_t DispatchPath(const AggregateArgs& a, AggregatePath path, uint32_t flip,
                         uint32_t* counts, uint32_t* acc, cudaStream_t stream) {
  switch (path) {
    case AggregatePath::kLanePrivate:
      return LaunchAccumulate<kAcc, AggregatePath::kLanePrivate>(a, flip, counts, acc, stream);
    case AggregatePath::kBlockShared:
      return LaunchAccumulate<kAcc, AggregatePath::kBlockShared>(a, flip, counts, acc, stream);
    case AggregatePath::kSharedRange: {
      DeviceLimits limits;
      const cudaError_t e = CurrentLimits(limits);
      if (e != cudaSuccess) return e;
      const RangePlan p = PlanRange(a, limits);
      if (p.passes == 0) return cudaErrorInvalidValue;
      return LaunchRange<kAcc>(a, p, flip, counts, acc, stream);
    }
    case AggregatePath::kGlobal:
      break;
  }
  return LaunchAccumulate<kAcc, AggregatePath::kGlobal>(a, flip, counts, acc, stream);
}

}  // namespace

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
      return a.groups <= kWarpGroups;
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
  if (a.groups <= kWarpGroups) return AggregatePath::kLanePrivate;
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

cudaError_t Aggregate(const AggregateArgs& a, cudaStream_t stream) {
  if (a.groups == 0) return cudaSuccess;
  const AggregatePath path = ChosenAggregatePath(a);
  if (a.force_path.has_value() && !AggregatePathFits(a, path)) return cudaErrorInvalidValue;
  const bool value_op = a.op != AggregateOp::kCount;
  if (a.counts != nullptr) {
    cudaError_t e = cudaMemsetAsync(a.counts, 0, size_t(a.groups) * sizeof(uint32_t), stream);
    if (e != cudaSuccess) return e;
  }
  uint32_t* acc = reinterpret_cast<uint32_t*>(a.output);
  if (value_op) {
    // +0.0f is all-zero bits; the min/max sentinel is all ones.
    const int fill = a.op == AggregateOp::kMin || a.op == AggregateOp::kMax ? 0xff : 0;
    cudaError_t e = cudaMemsetAsync(acc, fill, size_t(a.groups) * sizeof(float), stream);
    if (e != cudaSuccess) return e;
  }
  cudaError_t e = cudaSuccess;
  if (a.rows > 0) {
    switch (a.op) {
      case AggregateOp::kCount:
        e = DispatchPath<Acc::kCount>(a, path, 0u, a.counts, nullptr, stream);
        break;
      case AggregateOp::kSum:
      case AggregateOp::kMean:
        e = DispatchPath<Acc::kSum>(a, path, 0u, a.counts, acc, stream);
        break;
      case AggregateOp::kMin:
        e = DispatchPath<Acc::kMin>(a, path, 0u, a.counts, acc, stream);
        break;
      case AggregateOp::kMax:
        e = DispatchPath<Acc::kMin>(a, path, ~0u, a.counts, acc, stream);
        break;
    }
    if (e != cudaSuccess) return e;
  }
  if (a.op == AggregateOp::kMin || a.op == AggregateOp::kMax || a.op == AggregateOp::kMean) {
    const unsigned needed = unsigned((a.groups + kBlockThreads - 1) / kBlockThreads);
    const unsigned grid = needed < 4096u ? needed : 4096u;
    FinalizeAggregateKernel<<<grid, kBlockThreads, 0, stream>>>(a.op, a.groups, a.counts, a.output);
    e = cudaGetLastError();
  }
  return e;
}

}  // namespace gpujoin::engine::detail
