// The slot hash shared by every backend. Using one function everywhere makes the
// set of occupied slots (and therefore miss probe counts) identical across the CPU
// and CUDA backends for the same keys, which the differential tests rely on.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define GPUJOIN_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define GPUJOIN_HOST_DEVICE inline
#endif

namespace gpujoin::engine::detail {

/// MurmurHash3's 32-bit finaliser: a bijection on uint32 with full avalanche.
GPUJOIN_HOST_DEVICE uint32_t SlotHash(uint32_t key) {
  key ^= key >> 16;
  key *= 0x85ebca6bu;
  key ^= key >> 13;
  key *= 0xc2b2ae35u;
  key ^= key >> 16;
  return key;
}

/// Initial slot of `key` in a table of `capacity` slots (a power of two).
GPUJOIN_HOST_DEVICE uint32_t HomeSlot(uint32_t key, uint32_t capacity) {
  return SlotHash(key) & (capacity - 1u);
}

}  // namespace gpujoin::engine::detail
