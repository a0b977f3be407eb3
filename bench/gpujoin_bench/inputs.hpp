// The inputs of gpujoin-bench: key and value generators evaluated on the device
// (to fill the inputs) and on the host (to check the outputs). The launchers
// enqueue one grid-stride kernel on `s` and return cudaGetLastError(); the
// kernels live in inputs.cu.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/index/table.hpp"

#if defined(__CUDACC__)
#define BENCH_HOST_DEVICE __host__ __device__ inline
#else
#define BENCH_HOST_DEVICE inline
#endif

namespace gpujoin::bench {

/// A bijection on uint32 unrelated to the slot hash: distinct inputs give
/// distinct keys, so keys [0, n) are distinct and keys [n, 2n) are all misses.
BENCH_HOST_DEVICE uint32_t KeyOf(uint32_t i) {
  uint32_t x = i * 0x9e3779b1u + 0x7f4a7c15u;
  x ^= x >> 15;
  x *= 0x2c1b3c6du;
  x ^= x >> 12;
  x *= 0x297a2d39u;
  x ^= x >> 15;
  return x;
}

/// KeyOf(i), except that the reserved key becomes KeyOf(0xffffffff) (outside
/// every range used here, so still distinct).
BENCH_HOST_DEVICE uint32_t BuildKeyOf(uint32_t i) {
  const uint32_t k = KeyOf(i);
  return k == gpujoin::engine::kEmptyKey ? KeyOf(0xffffffffu) : k;
}

/// A 64-bit bijection unrelated to the slot hash (odd multiplies and xor-shifts).
BENCH_HOST_DEVICE uint64_t Mix64(uint64_t i) {
  uint64_t x = i * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull;
  x ^= x >> 31;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 29;
  return x;
}

/// 64-bit keys: keys [0, n) are distinct and keys [n, 2n) all misses; the one i
/// that maps to the reserved key takes Mix64(~0) instead. Every key lies far
/// above 2^32.
BENCH_HOST_DEVICE uint64_t Key64Of(uint64_t i) {
  const uint64_t x = Mix64(i);
  return x == gpujoin::engine::kEmptyKey64 ? Mix64(~0ull) : x;
}

/// The float32 payload column of row i (the int64 column holds Mix64(i)).
BENCH_HOST_DEVICE float PayloadF32(uint64_t i) { return float(i) * 0.5f; }

/// The build row that query row i hits (queries hit scattered rows).
BENCH_HOST_DEVICE uint64_t HitRowOf(uint64_t i, uint64_t build_n) {
  return (i * 2654435761ull) % build_n;
}

/// The group hash of aggregation row i: its key is h % groups, its mask bit
/// (h >> 20) & 1.
BENCH_HOST_DEVICE uint32_t GroupHashOf(uint64_t i) { return KeyOf(uint32_t(i) ^ 0x5bd1e995u); }

/// The float32 value of aggregation row i with group hash h.
BENCH_HOST_DEVICE float GroupValueOf(uint32_t h) { return float(int(h & 0xffff) - 32768) * 0.25f; }

/// The int64 value of row i of the grouped sum: a signed 40-bit value, so a
/// 2^26-row group sum stays far inside int64 (no overflow).
BENCH_HOST_DEVICE int64_t Int64ValueOf(uint64_t i) {
  uint64_t x = (i + 1) * 0x9e3779b97f4a7c15ull;
  x ^= x >> 31;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 29;
  return int64_t(x) >> 24;
}

/// keys[i] = BuildKeyOf(i + offset) for i < n.
cudaError_t LaunchMakeKeys(uint32_t* keys, uint64_t n, uint32_t offset, cudaStream_t s);
/// Key-schema inputs: `n` string keys of `len` bytes (a multiple of 8; chars
/// n * len bytes, n + 1 int64 offsets), or `n` (uint32, uint32) pairs, of build
/// rows 0..n-1, or (queries) of build rows HitRowOf(j, build_n).
cudaError_t LaunchMakeStringKeys(uint8_t* chars, int64_t* offsets, uint64_t n, uint32_t len,
                                 uint64_t build_n, bool queries, cudaStream_t s);
cudaError_t LaunchMakePairKeys(uint32_t* a, uint32_t* b, uint64_t n, uint64_t build_n, bool queries,
                               cudaStream_t s);
/// Queries: even rows hit (BuildKeyOf(HitRowOf(i))); odd rows miss when
/// `half_miss` (BuildKeyOf(build_n + i)), else hit too.
cudaError_t LaunchMakeQueries(uint32_t* q, uint64_t n, uint64_t build_n, bool half_miss,
                              cudaStream_t s);
/// Hot duplicates: every fourth row holds one of 16 hot keys (KeyOf(n + h),
/// outside the other rows' keys), the others BuildKeyOf(row).
cudaError_t LaunchMakeHotKeys(uint32_t* keys, uint64_t n, cudaStream_t s);
/// keys[i] = Key64Of(i).
cudaError_t LaunchMakeKeys64(uint64_t* keys, uint64_t n, cudaStream_t s);
/// 64-bit queries as LaunchMakeQueries, with Key64Of.
cudaError_t LaunchMakeQueries64(uint64_t* q, uint64_t n, uint64_t build_n, bool half_miss,
                                cudaStream_t s);
/// Multi-value keys: row i holds BuildKeyOf(i % keys), so each key has n / keys
/// rows, spread `keys` rows apart.
cudaError_t LaunchMakeMultiKeys(uint32_t* out, uint64_t n, uint64_t keys, cudaStream_t s);
/// v[i] = base + 3 i.
cudaError_t LaunchIota(uint32_t* v, uint64_t n, uint32_t base, cudaStream_t s);
/// The payload columns: i64[i] = Mix64(i), f32[i] = PayloadF32(i).
cudaError_t LaunchMakePayload(uint64_t* i64, float* f32, uint64_t n, cudaStream_t s);
/// Hash inputs: int64 row i = Key64Of(i); string row i = 16 bytes (Key64Of(2i),
/// Key64Of(2i + 1)) at offset 16 i; n + 1 offsets.
cudaError_t LaunchMakeHashInputs(int64_t* ints, uint64_t* chars, int32_t* offsets, uint64_t n,
                                 cudaStream_t s);
/// Aggregation rows of `groups` groups: key, mask bit and float32 value from
/// GroupHashOf(i).
cudaError_t LaunchMakeGroups(uint32_t* keys, uint32_t* mask, float* values, uint64_t n,
                             uint32_t groups, cudaStream_t s);
/// As LaunchMakeGroups with values Int64ValueOf(i).
cudaError_t LaunchMakeGroupsI64(uint32_t* keys, uint32_t* mask, int64_t* values, uint64_t n,
                                uint32_t groups, cudaStream_t s);

}  // namespace gpujoin::bench
