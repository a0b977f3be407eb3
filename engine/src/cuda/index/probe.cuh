// The lookup probe of the CUDA hash index: linear probing from a key's home
// slot in Robin Hood order (docs/engine.md, "Slots and probing").
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/index/insert.cuh"

namespace gpujoin::engine::detail {

struct ProbeResult {
  uint32_t value;
  uint32_t probes;
  bool found;
};

// Reads the 32-byte sector at `p` (four slots) with two 16-byte read-only loads.
// (Asking L2 to prefetch 64 or 128 bytes around the first load, PTX
// `.L2::64B/128B`, measured no faster on an H200: 35.2 plain, 35.2 64 B, 30.2
// 128 B Gkeys/s at load 0.5; 29.2, 29.2, 27.0 at 0.8.)
__device__ __forceinline__ void LoadSector(const uint64_t* p, uint64_t (&s)[4]) {
  const ulonglong2* v = reinterpret_cast<const ulonglong2*>(p);
  const ulonglong2 a = __ldg(v);
  const ulonglong2 b = __ldg(v + 1);
  s[0] = a.x;
  s[1] = a.y;
  s[2] = b.x;
  s[3] = b.y;
}

// Linear probing from the key's home slot, reading one 32-byte sector (four
// slots) per step. A miss stops at an empty slot or at the first resident
// that comes after the key in the table's Robin Hood order (ResidentComesFirst).
// Probe counts are those of the slot-at-a-time definition: the number of slots
// examined up to and including the deciding one, at most `bound`. (Deciding a sector with
// match/empty bit masks and __ffs instead of the slot loop measured no faster on an H200: 16.4-16.7
// vs 16.8 Gkeys/s for half misses at load 0.8.)
__device__ __forceinline__ ProbeResult Probe(const uint64_t* __restrict__ slots, uint32_t capacity,
                                             uint32_t key, uint32_t bound) {
  if (key == kEmptyKey) return {kEmptyKey, 0u, false};
  const uint32_t mask = capacity - 1u;
  uint32_t pos = HomeSlot(key, capacity);
  uint32_t p = 0;
  if (capacity >= 4) {
    // One loop, one sector per step, for the first and every later step (two
    // sectors per later step, a peeled first sector and four keys per thread all
    // measured slower on an H200).
    while (true) {
      const uint32_t base = pos & ~3u;
      uint64_t s[4];
      LoadSector(slots + base, s);
      const uint32_t first = pos & 3u;
#pragma unroll
      for (uint32_t j = 0; j < 4; ++j) {
        if (j < first) continue;
        if (p >= bound) return {kEmptyKey, bound, false};
        ++p;
        if (SlotKey(s[j]) == key) return {SlotLow(s[j]), p, true};
        if (s[j] == kEmptySlot ||
            !ResidentComesFirst(SlotKey(s[j]), key, p - 1u, base + j, capacity))
          return {kEmptyKey, p, false};
      }
      pos = (base + 4u) & mask;
    }
  }
  while (p < bound) {
    const uint64_t s = __ldg(reinterpret_cast<const unsigned long long*>(slots + pos));
    ++p;
    if (SlotKey(s) == key) return {SlotLow(s), p, true};
    if (s == kEmptySlot || !ResidentComesFirst(SlotKey(s), key, p - 1u, pos, capacity))
      return {kEmptyKey, p, false};
    pos = (pos + 1u) & mask;
  }
  return {kEmptyKey, bound, false};
}

}  // namespace gpujoin::engine::detail
