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
  /// The key's slot when found (what payload gathers read); unused otherwise.
  uint32_t slot;
};

// Linear probing from the key's home slot, reading one 32-byte sector (four
// uint32-key slots, two uint64-key slots) per step. A miss stops at an empty
// slot or at the first resident that comes after the key in the table's Robin
// Hood order (ResidentComesFirst). Probe counts are those of the
// slot-at-a-time definition: the number of slots examined up to and including
// the deciding one, at most `bound`. (Deciding a sector with match/empty bit
// masks and __ffs instead of the slot loop measured no faster on an H200:
// 16.4-16.7 vs 16.8 Gkeys/s for half misses at load 0.8.)
template <KeyWord K>
__device__ __forceinline__ ProbeResult Probe(const SlotWord<K>* __restrict__ slots,
                                             uint32_t capacity, K key, uint32_t bound) {
  using S = Slots<K>;
  constexpr uint32_t kPer = S::kPerSector;
  if (key == kEmptyKeyOf<K>) return {kEmptyKey, 0u, false, 0u};
  const uint32_t mask = capacity - 1u;
  uint32_t pos = HomeSlot(key, capacity);
  uint32_t p = 0;
  if (capacity >= kPer) {
    // One loop, one sector per step, for the first and every later step (two
    // sectors per later step, a peeled first sector and four keys per thread all
    // measured slower on an H200).
    while (true) {
      const uint32_t base = pos & ~(kPer - 1u);
      SlotWord<K> s[kPer];
      S::LoadSector(slots + base, s);
      const uint32_t first = pos & (kPer - 1u);
#pragma unroll
      for (uint32_t j = 0; j < kPer; ++j) {
        if (j < first) continue;
        if (p >= bound) return {kEmptyKey, bound, false, 0u};
        ++p;
        if (S::Key(s[j]) == key) return {S::Low(s[j]), p, true, base + j};
        if (S::IsEmpty(s[j]) || !ResidentComesFirst(S::Key(s[j]), key, p - 1u, base + j, capacity))
          return {kEmptyKey, p, false, 0u};
      }
      pos = (base + kPer) & mask;
    }
  }
  while (p < bound) {
    const SlotWord<K> s = S::LoadRO(slots + pos);
    ++p;
    if (S::Key(s) == key) return {S::Low(s), p, true, pos};
    if (S::IsEmpty(s) || !ResidentComesFirst(S::Key(s), key, p - 1u, pos, capacity))
      return {kEmptyKey, p, false, 0u};
    pos = (pos + 1u) & mask;
  }
  return {kEmptyKey, bound, false, 0u};
}

}  // namespace gpujoin::engine::detail
