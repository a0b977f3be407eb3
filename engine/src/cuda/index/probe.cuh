// The lookup probe of the CUDA hash index: linear probing from a key's home
// slot in Robin Hood order (docs/engine.md, "Slots and probing"), one loop for
// key words and key schemas.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "cuda/index/insert.cuh"

namespace gpujoin::engine::detail {

struct ProbeResult {
  uint32_t value;
  uint32_t probes;
  bool found;
  /// The key's slot when found (what payload gathers read); unused otherwise.
  uint32_t slot;
};

// What a probe makes of one slot: the key is there, the key is absent, or
// the next slot decides.
enum class SlotVerdict { kFound, kAbsent, kNext };

// Slot `s` at `pos` for `key`, `displacement` slots from its home. Key words:
// the key itself, else an empty slot or a resident that comes after the key
// in Robin Hood order (ResidentComesFirst) means absent. Key schemas: an empty
// slot means absent; a resident of the key's fingerprint is the key when
// `match(its row)` says so (the key columns compared), else the next of the
// fingerprint's keys, which lie together, decides.
template <IndexKey K, class Match>
__device__ __forceinline__ SlotVerdict Examine(SlotWord<K> s, typename Slots<K>::ProbeKeyT key,
                                               uint32_t displacement, uint32_t pos,
                                               uint32_t capacity, const Match& match) {
  using S = Slots<K>;
  if constexpr (std::is_same_v<K, ColumnKey>) {
    if (S::IsEmpty(s)) return SlotVerdict::kAbsent;
    if (S::ProbeKey(s) == key) return match(S::Low(s)) ? SlotVerdict::kFound : SlotVerdict::kNext;
  } else {
    if (S::Key(s) == key) return SlotVerdict::kFound;
    if (S::IsEmpty(s)) return SlotVerdict::kAbsent;
  }
  return ResidentComesFirst(S::ProbeKey(s), key, displacement, pos, capacity)
             ? SlotVerdict::kNext
             : SlotVerdict::kAbsent;
}

// Linear probing from the key's home slot, reading one 32-byte sector (four
// uint32-key slots, two uint64-key or key-schema slots) per step, each slot
// judged by Examine. Probe counts are those of the slot-at-a-time definition:
// the number of slots examined up to and including the deciding one, at most
// `bound`. (Deciding a sector with match/empty bit masks and __ffs instead of
// the slot loop measured no faster on an H200: 16.4-16.7 vs 16.8 Gkeys/s for
// half misses at load 0.8.) A found key's value is its slot's low word (a key
// schema's: the build row).
template <IndexKey K, class Match>
__device__ __forceinline__ ProbeResult ProbeWhere(const SlotWord<K>* __restrict__ slots,
                                                  uint32_t capacity,
                                                  typename Slots<K>::ProbeKeyT key, uint32_t bound,
                                                  const Match& match) {
  using S = Slots<K>;
  constexpr uint32_t kPer = S::kPerSector;
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
        if constexpr (KeyWord<K>) {
          // Key words: the key itself decides (the loop as it was measured).
          if (S::Key(s[j]) == key) return {S::Low(s[j]), p, true, base + j};
          if (S::IsEmpty(s[j]) ||
              !ResidentComesFirst(S::Key(s[j]), key, p - 1u, base + j, capacity))
            return {kEmptyKey, p, false, 0u};
        } else {
          const SlotVerdict v = Examine<K>(s[j], key, p - 1u, base + j, capacity, match);
          if (v == SlotVerdict::kFound) return {S::Low(s[j]), p, true, base + j};
          if (v == SlotVerdict::kAbsent) return {kEmptyKey, p, false, 0u};
        }
      }
      pos = (base + kPer) & mask;
    }
  }
  while (p < bound) {
    const SlotWord<K> s = S::LoadRO(slots + pos);
    ++p;
    const SlotVerdict v = Examine<K>(s, key, p - 1u, pos, capacity, match);
    if (v == SlotVerdict::kFound) return {S::Low(s), p, true, pos};
    if (v == SlotVerdict::kAbsent) return {kEmptyKey, p, false, 0u};
    pos = (pos + 1u) & mask;
  }
  return {kEmptyKey, bound, false, 0u};
}

// A key word's probe: a stored key is its own match. The reserved key examines
// no slot.
struct AnyRow {
  __device__ bool operator()(uint32_t) const { return true; }
};
template <KeyWord K>
__device__ __forceinline__ ProbeResult Probe(const SlotWord<K>* __restrict__ slots,
                                             uint32_t capacity, K key, uint32_t bound) {
  if (key == kEmptyKeyOf<K>) return {kEmptyKey, 0u, false, 0u};
  return ProbeWhere<K>(slots, capacity, key, bound, AnyRow{});
}

}  // namespace gpujoin::engine::detail
