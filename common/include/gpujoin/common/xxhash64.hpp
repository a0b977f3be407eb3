// XXH64's building blocks (xxHash specification,
// https://github.com/Cyan4973/xxHash/blob/dev/doc/xxhash_spec.md), as inline
// host+device functions: the primes, the lane round, the merge of the four
// lanes, the tail steps and the final avalanche. The engine's row hash
// (engine/src/hashing/xxhash_bytes.hpp: XXH64 of a value's bytes, on the host and
// the device) and the snapshot file's section checksums
// (server/src/storage/snapshot_format.hpp: XXH64 of data given in pieces) are both
// written with these, so there is one XXH64.
#pragma once

#include <cstdint>

#if !defined(GPUJOIN_HOST_DEVICE)
#if defined(__CUDACC__)
#define GPUJOIN_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define GPUJOIN_HOST_DEVICE inline
#endif
#endif

namespace gpujoin::xxh64 {

inline constexpr uint64_t kPrime1 = 0x9E3779B185EBCA87ull;
inline constexpr uint64_t kPrime2 = 0xC2B2AE3D27D4EB4Full;
inline constexpr uint64_t kPrime3 = 0x165667B19E3779F9ull;
inline constexpr uint64_t kPrime4 = 0x85EBCA77C2B2AE63ull;
inline constexpr uint64_t kPrime5 = 0x27D4EB2F165667C5ull;

GPUJOIN_HOST_DEVICE uint64_t Rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

/// One lane's step over an 8-byte input word.
GPUJOIN_HOST_DEVICE uint64_t Round(uint64_t acc, uint64_t input) {
  acc += input * kPrime2;
  acc = Rotl64(acc, 31);
  return acc * kPrime1;
}

GPUJOIN_HOST_DEVICE uint64_t MergeRound(uint64_t acc, uint64_t v) {
  acc ^= Round(0, v);
  return acc * kPrime1 + kPrime4;
}

/// The four lanes' starting values for `seed`.
GPUJOIN_HOST_DEVICE void InitLanes(uint64_t seed, uint64_t (&v)[4]) {
  v[0] = seed + kPrime1 + kPrime2;
  v[1] = seed + kPrime2;
  v[2] = seed;
  v[3] = seed - kPrime1;
}

/// The accumulator after 32 bytes or more: the four lanes converged.
GPUJOIN_HOST_DEVICE uint64_t Converge(const uint64_t (&v)[4]) {
  uint64_t h = Rotl64(v[0], 1) + Rotl64(v[1], 7) + Rotl64(v[2], 12) + Rotl64(v[3], 18);
  h = MergeRound(h, v[0]);
  h = MergeRound(h, v[1]);
  h = MergeRound(h, v[2]);
  return MergeRound(h, v[3]);
}

/// The accumulator of an input shorter than 32 bytes.
GPUJOIN_HOST_DEVICE uint64_t ShortStart(uint64_t seed) { return seed + kPrime5; }

/// One 8-byte word of the tail.
GPUJOIN_HOST_DEVICE uint64_t Tail8(uint64_t h, uint64_t word) {
  h ^= Round(0, word);
  return Rotl64(h, 27) * kPrime1 + kPrime4;
}

/// The 4-byte word of the tail.
GPUJOIN_HOST_DEVICE uint64_t Tail4(uint64_t h, uint32_t word) {
  h ^= uint64_t{word} * kPrime1;
  return Rotl64(h, 23) * kPrime2 + kPrime3;
}

/// One byte of the tail.
GPUJOIN_HOST_DEVICE uint64_t TailByte(uint64_t h, uint32_t byte) {
  h ^= uint64_t{byte} * kPrime5;
  return Rotl64(h, 11) * kPrime1;
}

/// The final mix: a bijection on uint64 with full avalanche.
GPUJOIN_HOST_DEVICE uint64_t Avalanche(uint64_t h) {
  h ^= h >> 33;
  h *= kPrime2;
  h ^= h >> 29;
  h *= kPrime3;
  h ^= h >> 32;
  return h;
}

}  // namespace gpujoin::xxh64
