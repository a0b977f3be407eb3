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

/// MurmurHash3's 64-bit finaliser (fmix64): a bijection on uint64 with full
/// avalanche, so keys that differ only in their high 32 bits land far apart.
GPUJOIN_HOST_DEVICE uint64_t SlotHash(uint64_t key) {
  key ^= key >> 33;
  key *= 0xff51afd7ed558ccdull;
  key ^= key >> 33;
  key *= 0xc4ceb9fe1a85ec53ull;
  key ^= key >> 33;
  return key;
}

/// Initial slot of `key` in a table of `capacity` slots (a power of two).
GPUJOIN_HOST_DEVICE uint32_t HomeSlot(uint32_t key, uint32_t capacity) {
  return SlotHash(key) & (capacity - 1u);
}

/// Initial slot of a 64-bit `key`: the low bits of its 64-bit hash.
GPUJOIN_HOST_DEVICE uint32_t HomeSlot(uint64_t key, uint32_t capacity) {
  return uint32_t(SlotHash(key)) & (capacity - 1u);
}

/// The slot order of every table (Robin Hood order, docs/engine.md "Slots and
/// probing"): along a run of occupied slots, keys are sorted by home slot (in
/// probing order) and keys of one home by ascending key. At slot `pos`, a key
/// displaced further from its home comes first. Returns true when `resident`
/// (a key stored at `pos`, not kEmptyKey) comes before `key`, whose displacement
/// at `pos` is `displacement` (slots from its home to `pos`): a probe for `key`
/// goes on past `pos`. When it returns false (and `resident` != `key`), `key`
/// belongs at `pos` or before it: an insertion takes the slot and carries the
/// resident on; a lookup stops, `key` is absent. K is uint32_t or uint64_t
/// (keys of one home compare as K).
template <class K>
GPUJOIN_HOST_DEVICE bool ResidentComesFirst(K resident, K key, uint32_t displacement, uint32_t pos,
                                            uint32_t capacity) {
  const uint32_t resident_displacement = (pos - HomeSlot(resident, capacity)) & (capacity - 1u);
  return resident_displacement > displacement ||
         (resident_displacement == displacement && resident < key);
}

}  // namespace gpujoin::engine::detail
