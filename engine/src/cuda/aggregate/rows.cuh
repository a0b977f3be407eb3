// Internal (CUDA builds only): how the aggregation kernels (aggregate_kernels.cu)
// walk the rows: aligned four-value loads and the two row walkers that call a
// kernel's `process(key, value, included)` for every row.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>

namespace gpujoin::engine::detail::aggregate_device {

// Loads values r .. r + 3 (16-byte aligned: one 16-byte load per 16 bytes).
template <typename V>
__device__ __forceinline__ void Load4(const V* __restrict__ p, V (&v)[4]) {
  if constexpr (sizeof(V) == 4) {
    const uint4 x = __ldcs(reinterpret_cast<const uint4*>(p));
    const uint32_t w[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) memcpy(&v[j], &w[j], 4);
  } else {
    const ulonglong2 a = __ldcs(reinterpret_cast<const ulonglong2*>(p));
    const ulonglong2 b = __ldcs(reinterpret_cast<const ulonglong2*>(p) + 1);
    const unsigned long long w[4] = {a.x, a.y, b.x, b.y};
#pragma unroll
    for (int j = 0; j < 4; ++j) memcpy(&v[j], &w[j], 8);
  }
}

// Calls process(key, value, included) for every row, four rows per lane per step
// (16-byte loads when the columns are aligned), warp-strided over the grid.
// kMask: the mask column is read (else every row is included).
template <bool kMask, bool kValues, typename V, typename Process>
__device__ __forceinline__ void ForEachRowByFour(const uint32_t* __restrict__ keys,
                                                 const V* __restrict__ values,
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
    V v[4] = {V{0}, V{0}, V{0}, V{0}};
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
      if constexpr (kValues) Load4<V>(values + r0, v);
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
// rows, two coalesced 512-byte loads per 4-byte column (four per 8-byte value
// column), so every lane has 32 bytes of each key and mask column in flight; the
// tail (and every row when a column is not 16-byte aligned) goes one row per
// thread. kMask: the mask column is read.
template <bool kMask, bool kValues, typename V, typename Process>
__device__ __forceinline__ void ForEachRowBy256(const uint32_t* __restrict__ keys,
                                                const V* __restrict__ values,
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
    const uint64_t q = s * 64u + lane;  // 4-row unit of the first load
    uint4 k[2], m[2];
    V v[2][4];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      k[h] = __ldcs(reinterpret_cast<const uint4*>(keys) + q + 32u * h);
      if constexpr (kMask) m[h] = __ldcs(reinterpret_cast<const uint4*>(mask) + q + 32u * h);
      if constexpr (kValues) Load4<V>(values + 4u * (q + 32u * h), v[h]);
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      if constexpr (!kMask) m[h] = make_uint4(1u, 1u, 1u, 1u);
      if constexpr (!kValues) {
#pragma unroll
        for (int j = 0; j < 4; ++j) v[h][j] = V{0};
      }
      process(k[h].x, v[h][0], m[h].x != 0);
      process(k[h].y, v[h][1], m[h].y != 0);
      process(k[h].z, v[h][2], m[h].z != 0);
      process(k[h].w, v[h][3], m[h].w != 0);
    }
  }
  for (uint64_t r = steps * 256u + thread; r < rows; r += threads) {
    process(keys[r], kValues ? values[r] : V{0}, !kMask || mask[r] != 0);
  }
}
}  // namespace gpujoin::engine::detail::aggregate_device
