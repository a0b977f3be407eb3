// The input generator kernels of gpujoin-bench (declared in inputs.hpp): one
// grid-stride loop each, 256 threads a block, at most 16 x 65535 blocks.
#include <algorithm>
#include <type_traits>

#include "inputs.hpp"

namespace gpujoin::bench {
namespace {

namespace gj = gpujoin::engine;

constexpr unsigned kThreads = 256;

unsigned BlocksFor(uint64_t n) {
  return unsigned(std::min<uint64_t>((n + kThreads - 1) / kThreads, 65535u * 16));
}

__device__ uint64_t FirstRow() { return blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; }
__device__ uint64_t RowStride() { return uint64_t(gridDim.x) * blockDim.x; }

__global__ void __launch_bounds__(kThreads) MakeKeys(uint32_t* keys, uint64_t n, uint32_t offset) {
  for (uint64_t i = FirstRow(); i < n; i += RowStride()) keys[i] = BuildKeyOf(uint32_t(i) + offset);
}

__global__ void __launch_bounds__(kThreads)
    MakeQueries(uint32_t* q, uint64_t n, uint64_t build_n, bool half_miss) {
  for (uint64_t i = FirstRow(); i < n; i += RowStride()) {
    q[i] = (half_miss && (i & 1)) ? BuildKeyOf(uint32_t(build_n + i))
                                  : BuildKeyOf(uint32_t(HitRowOf(i, build_n)));
  }
}

__global__ void __launch_bounds__(kThreads) MakeHotKeys(uint32_t* keys, uint64_t n) {
  for (uint64_t i = FirstRow(); i < n; i += RowStride())
    keys[i] = (i & 3) == 3 ? BuildKeyOf(uint32_t(n + ((i >> 2) & 15))) : BuildKeyOf(uint32_t(i));
}

__global__ void __launch_bounds__(kThreads) MakeKeys64(uint64_t* keys, uint64_t n) {
  for (uint64_t i = FirstRow(); i < n; i += RowStride()) keys[i] = Key64Of(i);
}

__global__ void __launch_bounds__(kThreads)
    MakeQueries64(uint64_t* q, uint64_t n, uint64_t build_n, bool half_miss) {
  for (uint64_t i = FirstRow(); i < n; i += RowStride())
    q[i] = (half_miss && (i & 1)) ? Key64Of(build_n + i) : Key64Of(HitRowOf(i, build_n));
}

__global__ void __launch_bounds__(kThreads)
    MakeHashInputs(int64_t* ints, uint64_t* chars, int32_t* offsets, uint64_t n) {
  for (uint64_t i = FirstRow(); i <= n; i += RowStride()) {
    offsets[i] = int32_t(16 * i);
    if (i == n) continue;
    ints[i] = int64_t(Key64Of(i));
    chars[2 * i] = Key64Of(2 * i);
    chars[2 * i + 1] = Key64Of(2 * i + 1);
  }
}

__global__ void __launch_bounds__(kThreads)
    MakeMultiKeys(uint32_t* out, uint64_t n, uint64_t keys) {
  for (uint64_t i = FirstRow(); i < n; i += RowStride()) out[i] = BuildKeyOf(uint32_t(i % keys));
}

__global__ void __launch_bounds__(kThreads) Iota(uint32_t* v, uint64_t n, uint32_t base) {
  for (uint64_t i = FirstRow(); i < n; i += RowStride()) v[i] = base + uint32_t(i) * 3u;
}

__global__ void __launch_bounds__(kThreads) MakePayload(uint64_t* i64, float* f32, uint64_t n) {
  for (uint64_t i = FirstRow(); i < n; i += RowStride()) {
    i64[i] = Mix64(i);
    f32[i] = PayloadF32(i);
  }
}

template <typename V>
__global__ void __launch_bounds__(kThreads)
    MakeGroups(uint32_t* keys, uint32_t* mask, V* values, uint64_t n, uint32_t groups) {
  for (uint64_t i = FirstRow(); i < n; i += RowStride()) {
    const uint32_t h = GroupHashOf(i);
    keys[i] = h % groups;
    mask[i] = (h >> 20) & 1u;
    if constexpr (std::is_same_v<V, float>) {
      values[i] = GroupValueOf(h);
    } else {
      values[i] = Int64ValueOf(i);
    }
  }
}

// Row j of a key-schema input: source row i = j, or (queries) HitRowOf(j,
// build_n); a string key is `len` bytes (a multiple of 8) of Mix64(i * 4 + w),
// distinct for distinct i; a pair is (i, KeyOf(i)).
__global__ void __launch_bounds__(kThreads)
    MakeStringKeys(uint8_t* chars, int64_t* offsets, uint64_t n, uint32_t len, uint64_t build_n,
                   bool queries) {
  for (uint64_t j = FirstRow(); j <= n; j += RowStride()) {
    offsets[j] = int64_t(j * len);
    if (j == n) continue;
    const uint64_t i = queries ? HitRowOf(j, build_n) : j;
    uint64_t* out = reinterpret_cast<uint64_t*>(chars + j * len);
    for (uint32_t w = 0; w < len / 8; ++w) out[w] = Mix64(i * 4 + w);
  }
}

__global__ void __launch_bounds__(kThreads)
    MakePairKeys(uint32_t* a, uint32_t* b, uint64_t n, uint64_t build_n, bool queries) {
  for (uint64_t j = FirstRow(); j < n; j += RowStride()) {
    const uint64_t i = queries ? HitRowOf(j, build_n) : j;
    a[j] = uint32_t(i);
    b[j] = KeyOf(uint32_t(i));
  }
}

}  // namespace

cudaError_t LaunchMakeStringKeys(uint8_t* chars, int64_t* offsets, uint64_t n, uint32_t len,
                                 uint64_t build_n, bool queries, cudaStream_t s) {
  MakeStringKeys<<<BlocksFor(n + 1), kThreads, 0, s>>>(chars, offsets, n, len, build_n, queries);
  return cudaGetLastError();
}

cudaError_t LaunchMakePairKeys(uint32_t* a, uint32_t* b, uint64_t n, uint64_t build_n, bool queries,
                               cudaStream_t s) {
  MakePairKeys<<<BlocksFor(n), kThreads, 0, s>>>(a, b, n, build_n, queries);
  return cudaGetLastError();
}

cudaError_t LaunchMakeKeys(uint32_t* keys, uint64_t n, uint32_t offset, cudaStream_t s) {
  MakeKeys<<<BlocksFor(n), kThreads, 0, s>>>(keys, n, offset);
  return cudaGetLastError();
}

cudaError_t LaunchMakeQueries(uint32_t* q, uint64_t n, uint64_t build_n, bool half_miss,
                              cudaStream_t s) {
  MakeQueries<<<BlocksFor(n), kThreads, 0, s>>>(q, n, build_n, half_miss);
  return cudaGetLastError();
}

cudaError_t LaunchMakeHotKeys(uint32_t* keys, uint64_t n, cudaStream_t s) {
  MakeHotKeys<<<BlocksFor(n), kThreads, 0, s>>>(keys, n);
  return cudaGetLastError();
}

cudaError_t LaunchMakeKeys64(uint64_t* keys, uint64_t n, cudaStream_t s) {
  MakeKeys64<<<BlocksFor(n), kThreads, 0, s>>>(keys, n);
  return cudaGetLastError();
}

cudaError_t LaunchMakeQueries64(uint64_t* q, uint64_t n, uint64_t build_n, bool half_miss,
                                cudaStream_t s) {
  MakeQueries64<<<BlocksFor(n), kThreads, 0, s>>>(q, n, build_n, half_miss);
  return cudaGetLastError();
}

cudaError_t LaunchMakeMultiKeys(uint32_t* out, uint64_t n, uint64_t keys, cudaStream_t s) {
  MakeMultiKeys<<<BlocksFor(n), kThreads, 0, s>>>(out, n, keys);
  return cudaGetLastError();
}

cudaError_t LaunchIota(uint32_t* v, uint64_t n, uint32_t base, cudaStream_t s) {
  Iota<<<BlocksFor(n), kThreads, 0, s>>>(v, n, base);
  return cudaGetLastError();
}

cudaError_t LaunchMakePayload(uint64_t* i64, float* f32, uint64_t n, cudaStream_t s) {
  MakePayload<<<BlocksFor(n), kThreads, 0, s>>>(i64, f32, n);
  return cudaGetLastError();
}

cudaError_t LaunchMakeHashInputs(int64_t* ints, uint64_t* chars, int32_t* offsets, uint64_t n,
                                 cudaStream_t s) {
  MakeHashInputs<<<BlocksFor(n + 1), kThreads, 0, s>>>(ints, chars, offsets, n);
  return cudaGetLastError();
}

cudaError_t LaunchMakeGroups(uint32_t* keys, uint32_t* mask, float* values, uint64_t n,
                             uint32_t groups, cudaStream_t s) {
  MakeGroups<float><<<BlocksFor(n), kThreads, 0, s>>>(keys, mask, values, n, groups);
  return cudaGetLastError();
}

cudaError_t LaunchMakeGroupsI64(uint32_t* keys, uint32_t* mask, int64_t* values, uint64_t n,
                                uint32_t groups, cudaStream_t s) {
  MakeGroups<int64_t><<<BlocksFor(n), kThreads, 0, s>>>(keys, mask, values, n, groups);
  return cudaGetLastError();
}

}  // namespace gpujoin::bench
