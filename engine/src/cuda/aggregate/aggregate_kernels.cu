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
//
// Typed values (int32, int64, uint32, uint64, float64) run the same kernels with
// the value type V as a template parameter (Accum<kAcc, V>): 64-bit accumulator
// words, float64 sums by atomicAdd(double), min/max by atomicMin on 64-bit
// order-preserving encodings (float64: the float32 trick widened, so -0 < +0;
// signed integers: the sign bit flipped). int32/uint32 sums are exact in one
// int64/uint64 word (2^32 - 1 rows of 32-bit values cannot overflow it);
// int64/uint64 sums keep two words per group, the sums of the values' low and
// high 32-bit halves, each exact in 64 bits, combined into the 128-bit exact sum
// by the finalize kernel, which flags a sum that does not fit 64 bits. Every
// order of additions gives the same words, so integer results are deterministic.
// The block-shared path builds those words from 32-bit shared atomics and carry
// counts (SharedIntSum), as 64-bit shared adds are compare-and-swap loops.
// The lane-private path takes float32 only (its 64-bit slots would not fit the
// static shared memory); typed values of up to 256 groups take block-shared.
//
// Files: aggregate_plan.{hpp,cpp} (host planning: the paths' group limits, the
// shape of a range launch, the path chosen for a call), accumulators.cuh (Accum,
// SharedIntSum, the ordered encodings), rows.cuh (the row walkers); this file
// holds the kernels and their launchers.
#include <cuda_runtime.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "cuda/aggregate/accumulators.cuh"
#include "cuda/aggregate/aggregate_ops.hpp"
#include "cuda/aggregate/aggregate_plan.hpp"
#include "cuda/aggregate/rows.cuh"
#include "cuda/kernel_utils.cuh"

namespace gpujoin::engine::detail {
namespace {

using aggregate_device::Acc;
using aggregate_device::Accum;
using aggregate_device::DecodeOrdered;
using aggregate_device::DecodeOrdered64;
using aggregate_device::Finite;
using aggregate_device::ForEachRowBy256;
using aggregate_device::ForEachRowByFour;
using aggregate_device::kSign64;
using aggregate_device::SharedIntSum;
using aggregate_plan::CurrentLimits;
using aggregate_plan::DeviceLimits;
using aggregate_plan::kSharedGroups;
using aggregate_plan::kWarpGroups;
using aggregate_plan::PlanRange;
using aggregate_plan::RangePlan;

constexpr uint32_t kBlockWarps = kBlockThreads / 32;
constexpr uint32_t kMinEmpty = 0xffffffffu;  // accumulated min/max of an empty group

// Range path: one block per SM at the largest ranges, so a full-size block keeps
// enough loads in flight.
constexpr int kRangeThreads = 1024;
// A packed 16-bit count is moved to global memory when it reaches this.
constexpr uint32_t kHalfFlush = 0x8000u;

// The lane-private, block-shared and global paths. `acc_out` holds
// Accum::kWords words per group, structure-of-arrays with stride `groups`.
template <Acc kAcc, AggregatePath kPath, typename V>
__global__ void __launch_bounds__(kBlockThreads)
    AccumulateKernel(const uint32_t* __restrict__ keys, const V* __restrict__ values,
                     const uint32_t* __restrict__ mask, uint64_t rows, uint32_t groups,
                     typename Accum<kAcc, V>::Word flip, uint32_t* __restrict__ counts,
                     typename Accum<kAcc, V>::Word* __restrict__ acc_out) {
  using A = Accum<kAcc, V>;
  using Word = typename A::Word;
  constexpr int kWords = A::kWords;
  constexpr bool kValues = kAcc != Acc::kCount;
  const bool masked = mask != nullptr;
  constexpr bool kShared = kPath == AggregatePath::kBlockShared;
  constexpr bool kLane = kPath == AggregatePath::kLanePrivate;
  static_assert(!kLane || A::kFloat32, "the lane-private path takes float32 values only");
  // Integer sums (and means) on the block-shared path: 32-bit words with carries.
  constexpr bool kIntSum = kShared && kAcc == Acc::kSum && std::is_integral_v<V>;
  using IntSum = SharedIntSum<V>;
  static_assert(!kIntSum || IntSum::kParts == kWords);
  __shared__ uint32_t s_count[kShared ? kSharedGroups : 1];
  __shared__ Word s_acc[kShared && kValues && !kIntSum ? kSharedGroups * kWords : 1];
  __shared__ uint32_t s_int[kIntSum ? IntSum::kSharedWords : 1];
  // Lane-private path: entry (group * kBlockWarps + warp) * 32 + lane.
  constexpr uint32_t kLaneSlots = kWarpGroups * kBlockWarps * 32;
  __shared__ uint32_t s_lcount[kLane ? kLaneSlots : 1];
  __shared__ Word s_lacc[kLane && kValues ? kLaneSlots : 1];
  const bool want_counts = counts != nullptr;
  const uint32_t warp_in_block = threadIdx.x / 32u;
  if constexpr (kLane) {
    for (uint32_t i = threadIdx.x; i < kLaneSlots; i += blockDim.x) {
      s_lcount[i] = 0;
      if constexpr (kValues) s_lacc[i] = A::Identity();
    }
    __syncthreads();
  }
  if constexpr (kShared) {
    for (uint32_t g = threadIdx.x; g < groups; g += blockDim.x) {
      s_count[g] = 0;
      if constexpr (kIntSum) {
#pragma unroll
        for (int w = 0; w < 2 * kWords; ++w) s_int[w * kSharedGroups + g] = 0u;
      } else if constexpr (kValues) {
#pragma unroll
        for (int w = 0; w < kWords; ++w) s_acc[w * kSharedGroups + g] = A::Identity();
      }
    }
    __syncthreads();
  }
  const uint32_t lane = threadIdx.x & 31u;

  auto process = [&](uint32_t key, V value, bool include) {
    include = include && key < groups && (!kValues || Finite(value));
    if (!include) return;
    if constexpr (kIntSum) {
      if (want_counts) atomicAdd(&s_count[key], 1u);
      IntSum::Add(s_int, key, value);
      return;
    }
    Word enc[kWords];
    if constexpr (kValues) A::Encode(value, flip, enc);
    if constexpr (kLane) {
      const uint32_t slot = (key * kBlockWarps + warp_in_block) * 32u + lane;
      if (want_counts) s_lcount[slot] += 1u;
      if constexpr (kValues) s_lacc[slot] = A::Combine(s_lacc[slot], enc[0]);
    } else if constexpr (kShared) {
      if (want_counts) atomicAdd(&s_count[key], 1u);
      if constexpr (kValues) A::Atomic(s_acc, kSharedGroups, key, enc);
    } else {
      if (want_counts) atomicAdd(&counts[key], 1u);
      if constexpr (kValues) A::Atomic(acc_out, groups, key, enc);
    }
  };

  // The row loop, specialised for the mask (one kernel, two bodies).
  if (masked)
    ForEachRowByFour<true, kValues, V>(keys, values, mask, rows, process);
  else
    ForEachRowByFour<false, kValues, V>(keys, values, mask, rows, process);

  if constexpr (kLane) {
    // Warp w folds groups w, w + kBlockWarps, ...: each lane combines its column
    // over the block's warps, then the warp reduces the 32 columns.
    __syncthreads();
    for (uint32_t g = warp_in_block; g < groups; g += kBlockWarps) {
      uint32_t c = 0;
      Word a = A::Identity();
#pragma unroll
      for (uint32_t w = 0; w < kBlockWarps; ++w) {
        const uint32_t slot = (g * kBlockWarps + w) * 32u + lane;
        c += s_lcount[slot];
        if constexpr (kValues) a = A::Combine(a, s_lacc[slot]);
      }
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) {
        c += __shfl_down_sync(0xffffffffu, c, o);
        if constexpr (kValues) a = A::Combine(a, __shfl_down_sync(0xffffffffu, a, o));
      }
      if (lane == 0) {
        if (want_counts && c != 0) atomicAdd(&counts[g], c);
        if constexpr (kValues) A::Flush(acc_out, groups, g, &a, 0);
      }
    }
  }

  if constexpr (kShared) {
    __syncthreads();
    for (uint32_t g = threadIdx.x; g < groups; g += blockDim.x) {
      if (want_counts && s_count[g] != 0) atomicAdd(&counts[g], s_count[g]);
      if constexpr (kIntSum) {
        Word part[kWords];
#pragma unroll
        for (int p = 0; p < kWords; ++p) part[p] = IntSum::Total(s_int, p, g);
        A::Flush(acc_out, groups, g, part, 1);
      } else if constexpr (kValues) {
        A::Flush(acc_out, groups, g, s_acc + g, kSharedGroups);
      }
    }
  }
}

// One contributing row of group `key` into the block's range copy: `words` holds
// the packed counts (used when want_counts), `acc` the value accumulators
// (stride `per_rank`), both in shared memory; `local` is the group's index there.
template <Acc kAcc, typename V>
__device__ __forceinline__ void RangeAdd(
    bool want_counts, uint32_t* words, typename Accum<kAcc, V>::Word* acc, uint32_t per_rank,
    uint32_t local, uint32_t key,
    const typename Accum<kAcc, V>::Word (&enc)[Accum<kAcc, V>::kWords], uint32_t* counts) {
  if (want_counts) {
    const uint32_t shift = (local & 1u) * 16u;
    const uint32_t old = atomicAdd(words + (local >> 1), 1u << shift);
    if (((old >> shift) & 0xffffu) == kHalfFlush - 1u) {
      // This add took the half to 0x8000: move 0x8000 to the global count.
      atomicAdd(counts + key, kHalfFlush);
      atomicSub(words + (local >> 1), kHalfFlush << shift);
    }
  }
  if constexpr (kAcc != Acc::kCount) Accum<kAcc, V>::Atomic(acc, per_rank, local, enc);
}

// The range path. The block privatises groups [lo, lo + per_rank), group lo + i at
// index i. Dynamic shared memory: per_rank / 2 packed count words when counts are
// wanted, then per_rank * kWords accumulator words for value ops (per_rank is a
// multiple of 4, so 8-byte words stay aligned). Rows of other groups are skipped
// (another pass takes them).
template <Acc kAcc, typename V>
__global__ void __launch_bounds__(kRangeThreads)
    RangeKernel(const uint32_t* __restrict__ keys, const V* __restrict__ values,
                const uint32_t* __restrict__ mask, uint64_t rows, uint32_t groups, uint32_t lo,
                uint32_t per_rank, typename Accum<kAcc, V>::Word flip,
                uint32_t* __restrict__ counts,
                typename Accum<kAcc, V>::Word* __restrict__ acc_out) {
  using A = Accum<kAcc, V>;
  using Word = typename A::Word;
  constexpr int kWords = A::kWords;
  constexpr bool kValues = kAcc != Acc::kCount;
  const bool masked = mask != nullptr;
  extern __shared__ __align__(8) uint32_t s_mem[];
  const bool want_counts = counts != nullptr;
  const uint32_t count_words = want_counts ? (per_rank + 1) / 2 : 0;
  Word* const s_acc = reinterpret_cast<Word*>(s_mem + count_words);
  for (uint32_t i = threadIdx.x; i < count_words; i += blockDim.x) s_mem[i] = 0u;
  if constexpr (kValues) {
    for (uint32_t i = threadIdx.x; i < per_rank * kWords; i += blockDim.x) s_acc[i] = A::Identity();
  }
  __syncthreads();

  auto process = [&](uint32_t key, V value, bool include) {
    include = include && key < groups && (!kValues || Finite(value));
    const uint32_t local = key - lo;  // wraps for key < lo: skipped like local >= per_rank
    if (!include || local >= per_rank) return;
    Word enc[kWords];
    if constexpr (kValues) A::Encode(value, flip, enc);
    RangeAdd<kAcc, V>(want_counts, s_mem, s_acc, per_rank, local, key, enc, counts);
  };

  if (masked)
    ForEachRowBy256<true, kValues, V>(keys, values, mask, rows, process);
  else
    ForEachRowBy256<false, kValues, V>(keys, values, mask, rows, process);

  __syncthreads();
  for (uint32_t i = threadIdx.x; i < per_rank; i += blockDim.x) {
    const uint32_t g = lo + i;
    if (g >= groups) break;
    if (want_counts) {
      const uint32_t c = (s_mem[i >> 1] >> ((i & 1u) * 16u)) & 0xffffu;
      if (c != 0) atomicAdd(&counts[g], c);
    }
    if constexpr (kValues) A::Flush(acc_out, groups, g, s_acc + i, per_rank);
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

// The typed result words, in place over the accumulators: word g from group g's
// kWords accumulator words (acc[g], acc[groups + g]), so no thread reads a word
// another one writes. Min/max decode (empty: NaN for float64, 0 for integers);
// integer sums combine their halves into the exact 128-bit sum, flag it when it
// does not fit 64 bits and keep its low 64 bits; means divide the exact sum by
// the count in float64 (empty or overflowed: NaN).
template <Acc kAcc, typename V>
__global__ void __launch_bounds__(kBlockThreads)
    FinalizeTypedKernel(AggregateOp op, uint32_t groups, const uint32_t* __restrict__ counts,
                        unsigned long long* __restrict__ acc, uint8_t* __restrict__ overflow) {
  using A = Accum<kAcc, V>;
  const uint32_t stride = gridDim.x * blockDim.x;
  const double nan = __longlong_as_double(0x7ff8000000000000ll);  // the CPU's quiet NaN
  for (uint32_t g = blockIdx.x * blockDim.x + threadIdx.x; g < groups; g += stride) {
    const unsigned long long w = acc[g];
    unsigned long long out = w;
    if constexpr (kAcc == Acc::kMin) {
      const unsigned long long e = op == AggregateOp::kMax ? ~w : w;
      if constexpr (std::is_same_v<V, double>) {
        out = w == A::kEmpty
                  ? static_cast<unsigned long long>(__double_as_longlong(nan))
                  : static_cast<unsigned long long>(__double_as_longlong(DecodeOrdered64(e)));
      } else if constexpr (std::is_signed_v<V>) {
        out = counts[g] == 0 ? 0ull : e ^ kSign64;
      } else {
        out = counts[g] == 0 ? 0ull : e;
      }
    } else if constexpr (std::is_same_v<V, double>) {
      if (op == AggregateOp::kMean) {
        const double d = counts[g] == 0
                             ? nan
                             : __longlong_as_double(static_cast<long long>(w)) / double(counts[g]);
        out = static_cast<unsigned long long>(__double_as_longlong(d));
      }
    } else {
      bool over = false;
      if constexpr (A::kSplit) {
        const unsigned long long hi = acc[groups + g];
        if constexpr (std::is_signed_v<V>) {
          const __int128 sum = __int128(static_cast<long long>(hi)) * 4294967296ll + __int128(w);
          over = sum < -(__int128(1) << 63) || sum >= (__int128(1) << 63);
          out = static_cast<unsigned long long>(sum);
        } else {
          const unsigned __int128 sum = (static_cast<unsigned __int128>(hi) << 32) + w;
          over = (sum >> 64) != 0;
          out = static_cast<unsigned long long>(sum);
        }
      }
      overflow[g] = over ? 1 : 0;
      if (op == AggregateOp::kMean) {
        const double sum = std::is_signed_v<V> ? double(static_cast<long long>(out)) : double(out);
        const double d = counts[g] == 0 || over ? nan : sum / double(counts[g]);
        out = static_cast<unsigned long long>(__double_as_longlong(d));
      }
    }
    acc[g] = out;
  }
}

template <Acc kAcc, typename V>
cudaError_t LaunchRange(const AggregateArgs& a, const V* values, const RangePlan& p,
                        typename Accum<kAcc, V>::Word flip, uint32_t* counts,
                        typename Accum<kAcc, V>::Word* acc, cudaStream_t stream) {
  auto* kernel = RangeKernel<kAcc, V>;
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
    kernel<<<blocks, kRangeThreads, p.shared_bytes, stream>>>(
        a.keys, values, a.mask, a.rows, a.groups, pass * p.per_rank, p.per_rank, flip, counts, acc);
    e = cudaGetLastError();
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

template <Acc kAcc, AggregatePath kPath, typename V>
cudaError_t LaunchAccumulate(const AggregateArgs& a, const V* values,
                             typename Accum<kAcc, V>::Word flip, uint32_t* counts,
                             typename Accum<kAcc, V>::Word* acc, cudaStream_t stream) {
  static std::atomic<int> resident{0};
  const unsigned grid =
      GridFor((a.rows + 3) / 4, CachedResident(AccumulateKernel<kAcc, kPath, V>, resident));
  AccumulateKernel<kAcc, kPath, V><<<grid, kBlockThreads, 0, stream>>>(
      a.keys, values, a.mask, a.rows, a.groups, flip, counts, acc);
  return cudaGetLastError();
}

template <Acc kAcc, typename V>
cudaError_t DispatchPath(const AggregateArgs& a, AggregatePath path, const V* values,
                         typename Accum<kAcc, V>::Word flip, uint32_t* counts,
                         typename Accum<kAcc, V>::Word* acc, cudaStream_t stream) {
  switch (path) {
    case AggregatePath::kLanePrivate:
      if constexpr (std::is_same_v<V, float>) {
        return LaunchAccumulate<kAcc, AggregatePath::kLanePrivate, V>(a, values, flip, counts, acc,
                                                                      stream);
      }
      return cudaErrorInvalidValue;  // AggregatePathFits refuses it
    case AggregatePath::kBlockShared:
      return LaunchAccumulate<kAcc, AggregatePath::kBlockShared, V>(a, values, flip, counts, acc,
                                                                    stream);
    case AggregatePath::kSharedRange: {
      DeviceLimits limits;
      const cudaError_t e = CurrentLimits(limits);
      if (e != cudaSuccess) return e;
      const RangePlan p = PlanRange(a, limits);
      if (p.passes == 0) return cudaErrorInvalidValue;
      return LaunchRange<kAcc, V>(a, values, p, flip, counts, acc, stream);
    }
    case AggregatePath::kGlobal:
      break;
  }
  return LaunchAccumulate<kAcc, AggregatePath::kGlobal, V>(a, values, flip, counts, acc, stream);
}

// Clears the typed accumulators, accumulates and finalises a typed value op.
template <typename V>
cudaError_t AggregateTyped(const AggregateArgs& a, AggregatePath path, cudaStream_t stream) {
  const V* values = static_cast<const V*>(a.values);
  // uint64_t is unsigned long on Linux; the device atomics take unsigned long long.
  auto* acc = static_cast<unsigned long long*>(a.output);
  const bool minmax = a.op == AggregateOp::kMin || a.op == AggregateOp::kMax;
  const size_t words = AggregateTypedOutputWords(a.op, a.value_type, a.groups);
  // Sums start at all-zero bits (+0.0 for float64); the min/max sentinel is all ones.
  cudaError_t e = cudaMemsetAsync(a.output, minmax ? 0xff : 0, words * 8, stream);
  if (e != cudaSuccess) return e;
  const unsigned needed = unsigned((a.groups + kBlockThreads - 1) / kBlockThreads);
  const unsigned grid = needed < 4096u ? needed : 4096u;
  if (minmax) {
    const unsigned long long flip = a.op == AggregateOp::kMax ? ~0ull : 0ull;
    if (a.rows > 0) {
      e = DispatchPath<Acc::kMin, V>(a, path, values, flip, a.counts, acc, stream);
      if (e != cudaSuccess) return e;
    }
    FinalizeTypedKernel<Acc::kMin, V>
        <<<grid, kBlockThreads, 0, stream>>>(a.op, a.groups, a.counts, acc, a.overflow);
  } else {
    if (a.rows > 0) {
      e = DispatchPath<Acc::kSum, V>(a, path, values, 0ull, a.counts, acc, stream);
      if (e != cudaSuccess) return e;
    }
    FinalizeTypedKernel<Acc::kSum, V>
        <<<grid, kBlockThreads, 0, stream>>>(a.op, a.groups, a.counts, acc, a.overflow);
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t Aggregate(const AggregateArgs& a, cudaStream_t stream) {
  if (a.groups == 0) return cudaSuccess;
  const AggregatePath path = ChosenAggregatePath(a);
  if (a.force_path.has_value() && !AggregatePathFits(a, path)) return cudaErrorInvalidValue;
  const bool value_op = a.op != AggregateOp::kCount;
  const bool typed = value_op && a.value_type != ColumnType::kFloat32;
  if (typed) {
    const bool integer_sum = (a.op == AggregateOp::kSum || a.op == AggregateOp::kMean) &&
                             a.value_type != ColumnType::kFloat64;
    if (a.output == nullptr || (a.rows > 0 && a.values == nullptr) ||
        (integer_sum && a.overflow == nullptr) ||
        (AggregateNeedsCounts(a.op, a.value_type) && a.counts == nullptr)) {
      return cudaErrorInvalidValue;
    }
  }
  if (a.counts != nullptr) {
    cudaError_t e = cudaMemsetAsync(a.counts, 0, size_t(a.groups) * sizeof(uint32_t), stream);
    if (e != cudaSuccess) return e;
  }
  if (typed) {
    switch (a.value_type) {
      case ColumnType::kInt32:
        return AggregateTyped<int32_t>(a, path, stream);
      case ColumnType::kInt64:
        return AggregateTyped<int64_t>(a, path, stream);
      case ColumnType::kUint32:
        return AggregateTyped<uint32_t>(a, path, stream);
      case ColumnType::kUint64:
        return AggregateTyped<uint64_t>(a, path, stream);
      case ColumnType::kFloat64:
        return AggregateTyped<double>(a, path, stream);
      default:
        return cudaErrorInvalidValue;
    }
  }
  const float* values = static_cast<const float*>(a.values);
  float* output = static_cast<float*>(a.output);
  uint32_t* acc = static_cast<uint32_t*>(a.output);
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
        e = DispatchPath<Acc::kCount, float>(a, path, values, 0u, a.counts, nullptr, stream);
        break;
      case AggregateOp::kSum:
      case AggregateOp::kMean:
        e = DispatchPath<Acc::kSum, float>(a, path, values, 0u, a.counts, acc, stream);
        break;
      case AggregateOp::kMin:
        e = DispatchPath<Acc::kMin, float>(a, path, values, 0u, a.counts, acc, stream);
        break;
      case AggregateOp::kMax:
        e = DispatchPath<Acc::kMin, float>(a, path, values, ~0u, a.counts, acc, stream);
        break;
    }
    if (e != cudaSuccess) return e;
  }
  if (a.op == AggregateOp::kMin || a.op == AggregateOp::kMax || a.op == AggregateOp::kMean) {
    const unsigned needed = unsigned((a.groups + kBlockThreads - 1) / kBlockThreads);
    const unsigned grid = needed < 4096u ? needed : 4096u;
    FinalizeAggregateKernel<<<grid, kBlockThreads, 0, stream>>>(a.op, a.groups, a.counts, output);
    e = cudaGetLastError();
  }
  return e;
}

}  // namespace gpujoin::engine::detail
