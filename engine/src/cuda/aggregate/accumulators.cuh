// Internal (CUDA builds only): the accumulators of the aggregation kernels
// (aggregate_kernels.cu): the accumulation kinds, the order-preserving
// encodings of min/max, how each kind folds a value of each type into its
// accumulator words (Accum) and the block-shared path's exact integer sums from
// 32-bit shared atomics (SharedIntSum).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "cuda/aggregate/aggregate_plan.hpp"
#include "gpujoin/engine/types.hpp"

namespace gpujoin::engine::detail::aggregate_device {

using aggregate_plan::kSharedGroups;

// Accumulation kinds: mean accumulates exactly like sum (plus counts); max
// like min, on complemented encodings.
enum class Acc { kCount, kSum, kMin };

__device__ __forceinline__ uint32_t EncodeOrdered(float f) {
  const uint32_t b = __float_as_uint(f);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

__device__ __forceinline__ float DecodeOrdered(uint32_t e) {
  return __uint_as_float((e & 0x80000000u) ? (e & 0x7fffffffu) : ~e);
}

inline constexpr unsigned long long kSign64 = 0x8000000000000000ull;

__device__ __forceinline__ unsigned long long EncodeOrdered64(double f) {
  const unsigned long long b = static_cast<unsigned long long>(__double_as_longlong(f));
  return (b & kSign64) ? ~b : (b | kSign64);
}

__device__ __forceinline__ double DecodeOrdered64(unsigned long long e) {
  return __longlong_as_double(static_cast<long long>((e & kSign64) ? (e & ~kSign64) : ~e));
}

template <typename V>
__device__ __forceinline__ bool Finite(V v) {
  if constexpr (std::is_floating_point_v<V>) {
    return isfinite(v);
  } else {
    return true;
  }
}

// How kAcc accumulates values of type V: the accumulator word, the words per
// group (two for int64/uint64 sums, stored structure-of-arrays: word w of group
// g at acc[w * stride + g]), the encoding of a value and the (atomic) fold.
template <Acc kAcc, typename V>
struct Accum {
  static constexpr bool kFloat32 = std::is_same_v<V, float>;
  using Word = std::conditional_t<kFloat32, uint32_t, unsigned long long>;
  static constexpr bool kSplit = kAcc == Acc::kSum && std::is_integral_v<V> && sizeof(V) == 8;
  static constexpr int kWords = kSplit ? 2 : 1;
  static constexpr Word kEmpty = ~Word{0};  // accumulated min/max of an empty group

  __host__ __device__ static constexpr Word Identity() {
    return kAcc == Acc::kMin ? kEmpty : Word{0};
  }

  // The value's words: for sums its bits (integers as 64-bit two's complement,
  // split into 32-bit halves when kSplit), for min/max its flipped ordered encoding.
  __device__ __forceinline__ static void Encode(V v, Word flip, Word (&enc)[kWords]) {
    if constexpr (kAcc == Acc::kSum) {
      if constexpr (kFloat32) {
        enc[0] = __float_as_uint(v);
      } else if constexpr (std::is_same_v<V, double>) {
        enc[0] = static_cast<Word>(__double_as_longlong(v));
      } else if constexpr (kSplit) {
        enc[0] = static_cast<Word>(v) & 0xffffffffull;
        // int64: the arithmetic shift keeps the high half signed (sign-extended).
        enc[1] = static_cast<Word>(
            static_cast<std::conditional_t<std::is_signed_v<V>, long long, unsigned long long>>(
                v) >>
            32);
      } else if constexpr (std::is_signed_v<V>) {
        enc[0] = static_cast<Word>(static_cast<long long>(v));
      } else {
        enc[0] = static_cast<Word>(v);
      }
    } else {
      if constexpr (kFloat32) {
        enc[0] = EncodeOrdered(v) ^ flip;
      } else if constexpr (std::is_same_v<V, double>) {
        enc[0] = EncodeOrdered64(v) ^ flip;
      } else if constexpr (std::is_signed_v<V>) {
        enc[0] = (static_cast<Word>(static_cast<long long>(v)) ^ kSign64) ^ flip;
      } else {
        enc[0] = static_cast<Word>(v) ^ flip;
      }
    }
  }

  // Non-atomic fold of two accumulator words (lane-private path, float32 only).
  __device__ __forceinline__ static Word Combine(Word a, Word b) {
    if constexpr (kAcc == Acc::kSum)
      return __float_as_uint(__uint_as_float(a) + __uint_as_float(b));
    return a < b ? a : b;
  }

  // Folds `enc` into group g of `acc` (shared or global memory).
  __device__ __forceinline__ static void Atomic(Word* acc, uint32_t stride, uint32_t g,
                                                const Word (&enc)[kWords]) {
    if constexpr (kAcc == Acc::kSum) {
      if constexpr (kFloat32) {
        atomicAdd(reinterpret_cast<float*>(acc) + g, __uint_as_float(enc[0]));
      } else if constexpr (std::is_same_v<V, double>) {
        atomicAdd(reinterpret_cast<double*>(acc) + g, __longlong_as_double(enc[0]));
      } else {
#pragma unroll
        for (int w = 0; w < kWords; ++w) {
          // The high half of a value in [0, 2^32) is 0: no atomic for it.
          if (w == 0 || enc[w] != 0) atomicAdd(acc + w * stride + g, enc[w]);
        }
      }
    }
    if constexpr (kAcc == Acc::kMin) atomicMin(acc + g, enc[0]);
  }

  // Folds a block's partial (`a`, words at a[w * a_stride]) of group g into the
  // global accumulators unless it is the identity (a partial float sum is never
  // -0: it starts at +0 and x + -x is +0).
  __device__ __forceinline__ static void Flush(Word* acc_out, uint32_t stride, uint32_t g,
                                               const Word* a, uint32_t a_stride) {
    if constexpr (kAcc == Acc::kSum) {
      if constexpr (kFloat32) {
        if (__uint_as_float(a[0]) != 0.f)
          atomicAdd(reinterpret_cast<float*>(acc_out) + g, __uint_as_float(a[0]));
      } else if constexpr (std::is_same_v<V, double>) {
        const double d = __longlong_as_double(static_cast<long long>(a[0]));
        if (d != 0.0) atomicAdd(reinterpret_cast<double*>(acc_out) + g, d);
      } else {
#pragma unroll
        for (int w = 0; w < kWords; ++w) {
          const Word x = a[w * a_stride];
          if (x != 0) atomicAdd(acc_out + w * stride + g, x);
        }
      }
    } else if constexpr (kAcc == Acc::kMin) {
      if (a[0] != Identity()) atomicMin(acc_out + g, a[0]);
    }
  }
};

// Exact integer sums of the block-shared path from 32-bit shared atomics: sm_90
// adds 32-bit words in shared memory natively, while a 64-bit add (like a float
// add) compiles to a compare-and-swap loop. Part p of a value (bits 32p .. 32p +
// 31; one part for int32/uint32, two for int64/uint64, the top one signed for the
// signed types) is added to a 32-bit word per group, and the add that wraps the
// word -- seen in the old value the atomic returns -- counts a carry (+1, or -1
// for a signed part that leaves int32 downwards) in a second word. Atomic adds to
// one word are serialised, so every wrap is counted exactly once, and the part's
// exact sum over the block is word + carry * 2^32: the Accum word that the
// 64-bit path would have accumulated (a part's sum, exact in 64 bits). Carry
// words cannot wrap: a block adds fewer than 2^32 rows (the grid has a block per
// SM at least, and 2^32 rows per SM do not fit in device memory).
template <typename V>
struct SharedIntSum {
  static constexpr int kParts = sizeof(V) / 4;
  // Shared words: part p's sums at [2p * kSharedGroups], its carries at [(2p + 1) * ...].
  static constexpr uint32_t kSharedWords = 2 * kParts * kSharedGroups;

  template <bool kSigned>
  __device__ __forceinline__ static void AddPart(uint32_t* s, uint32_t g, uint32_t x) {
    if (x == 0) return;
    const uint32_t old = atomicAdd(s + g, x);
    if constexpr (kSigned) {
      const long long sum = static_cast<long long>(static_cast<int>(old)) + static_cast<int>(x);
      if (sum > 2147483647ll) atomicAdd(s + kSharedGroups + g, 1u);
      if (sum < -2147483648ll) atomicAdd(s + kSharedGroups + g, 0xffffffffu);
    } else {
      if (old + x < old) atomicAdd(s + kSharedGroups + g, 1u);
    }
  }

  __device__ __forceinline__ static void Add(uint32_t* s, uint32_t g, V v) {
    const unsigned long long bits = static_cast<unsigned long long>(v);
    if constexpr (kParts == 1) {
      AddPart<std::is_signed_v<V>>(s, g, static_cast<uint32_t>(bits));
    } else {
      AddPart<false>(s, g, static_cast<uint32_t>(bits));
      AddPart<std::is_signed_v<V>>(s + 2 * kSharedGroups, g, static_cast<uint32_t>(bits >> 32));
    }
  }

  // Part p's exact block sum of group g, as the 64-bit Accum word.
  __device__ __forceinline__ static unsigned long long Total(const uint32_t* s, int p, uint32_t g) {
    const uint32_t word = s[2 * p * kSharedGroups + g];
    const uint32_t carry = s[(2 * p + 1) * kSharedGroups + g];
    if (std::is_signed_v<V> && p == kParts - 1) {
      const long long sum = static_cast<long long>(static_cast<int>(word)) +
                            static_cast<long long>(static_cast<int>(carry)) * 4294967296ll;
      return static_cast<unsigned long long>(sum);
    }
    return static_cast<unsigned long long>(word) + (static_cast<unsigned long long>(carry) << 32);
  }
};

}  // namespace gpujoin::engine::detail::aggregate_device
