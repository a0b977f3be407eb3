// Device functions of the CUDA hash index shared by the build paths: slot
// words, the Robin Hood insert of one word, and the value a retained row gets.
// See docs/engine.md ("Slots and probing") for the contract.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/index/table.hpp"
#include "gpujoin/engine/detail/slot_hash.hpp"

namespace gpujoin::engine::detail {

__device__ __forceinline__ uint32_t SlotKey(uint64_t slot) { return uint32_t(slot >> 32); }
__device__ __forceinline__ uint32_t SlotLow(uint64_t slot) { return uint32_t(slot); }

// Inserts one packed word key:tag in Robin Hood order (detail::ResidentComesFirst,
// docs/engine.md "Slots and probing"). A row's tag is the final value
// (generated values that grow with the row, so the lowest row has the lowest
// tag) or the global source row (finalised later). Both make "keep the lowest
// row" a 64-bit minimum among words of the same key, so the outcome does not
// depend on thread order.
//
// The word walks from its key's home. At each slot: an empty slot is claimed
// (CAS); a word of the same key keeps the smaller of the two (CAS); a resident
// that comes first is passed; otherwise the word takes the slot (CAS) and the
// thread carries the resident on from the next slot. A failed CAS re-examines the
// slot with the value it returned. A slot never empties once claimed and its
// resident only ever changes to one that comes first there (or to the same key
// with a lower tag), so every stored key keeps "all slots from my home to me hold
// keys that come first", and the final layout is the sorted one whatever the
// thread order. Two copies of one key may briefly coexist (one being carried);
// the later one to arrive meets the other and the minimum is kept.
//
// Statistics (`sums`: unique, duplicate, overflow, invalid, probes; `max_probes`):
// each word adds the slots it examines (so a key adds its final displacement + 1
// over its moves), the row's key counts once as unique / duplicate / overflow, a
// carried key that merges into its other copy moves one count from unique to
// duplicate, and one carried past the bound moves one from unique to overflow
// (unsigned wrap-around: the block and grid sums are exact). `max_probes` takes
// displacement + 1 wherever a word is stored or merged, and the bound on overflow.
//
// The insertion is written as a sequence of steps, one slot each (InsertStep).
struct InsertState {
  uint64_t word;      // the word being placed: the row's, then carried ones
  uint32_t word_key;  // SlotKey(word)
  uint32_t pos;       // the slot to examine next
  uint32_t d;         // displacement of `word` at `pos`
  bool own;           // `word` is still the row's own
};

__device__ __forceinline__ InsertState StartInsert(DeviceTable table, uint32_t key,
                                                   uint64_t desired) {
  return InsertState{desired, key, HomeSlot(key, table.capacity), 0u, true};
}

enum class StepResult { kContinue, kSettled };

// Examines slot st.pos for st.word (see above).
__device__ __forceinline__ StepResult InsertStep(DeviceTable table, InsertState& st, uint32_t bound,
                                                 unsigned long long (&sums)[5],
                                                 unsigned long long& max_probes) {
  constexpr unsigned long long kMinusOne = ~0ull;
  if (st.d >= bound) {
    sums[2] += 1;
    if (!st.own) sums[0] += kMinusOne;
    if (bound > max_probes) max_probes = bound;
    return StepResult::kSettled;
  }
  unsigned long long* slot = reinterpret_cast<unsigned long long*>(table.slots + st.pos);
  // A plain (L2) read first; a stale value is safe (residents only move
  // towards "comes first", and a CAS against a stale value fails and
  // re-examines). (A CAS as the first read measured slower on an H200: 6.3 vs
  // 6.0 ms for 2^26 rows at load 0.5, 19.3 vs 17.1 ms at 0.8.)
  unsigned long long cur = __ldcg(slot);
  ++sums[4];
  while (true) {
    if (cur == kEmptySlot) {
      const unsigned long long prev = atomicCAS(slot, kEmptySlot, st.word);
      if (prev == kEmptySlot) {
        if (st.own) sums[0] += 1;
        if (st.d + 1u > max_probes) max_probes = st.d + 1u;
        return StepResult::kSettled;
      }
      cur = prev;
      continue;
    }
    const uint32_t resident = SlotKey(cur);
    if (resident == st.word_key) {
      if (cur > st.word) {
        const unsigned long long prev = atomicCAS(slot, cur, st.word);
        if (prev != cur) {
          cur = prev;
          continue;
        }
      }
      sums[1] += 1;
      if (!st.own) sums[0] += kMinusOne;
      if (st.d + 1u > max_probes) max_probes = st.d + 1u;
      return StepResult::kSettled;
    }
    if (ResidentComesFirst(resident, st.word_key, st.d, st.pos, table.capacity)) break;
    const unsigned long long prev = atomicCAS(slot, cur, st.word);
    if (prev != cur) {
      cur = prev;
      continue;
    }
    // `word` is stored here; carry the resident on from the next slot.
    if (st.own) sums[0] += 1;
    st.own = false;
    if (st.d + 1u > max_probes) max_probes = st.d + 1u;
    st.word = cur;
    st.word_key = resident;
    st.d = (st.pos - HomeSlot(resident, table.capacity)) & (table.capacity - 1u);
    break;
  }
  st.pos = (st.pos + 1u) & (table.capacity - 1u);
  ++st.d;
  return StepResult::kContinue;
}

// The whole insertion of one word.
__device__ __forceinline__ void InsertWord(DeviceTable table, uint32_t key, uint64_t desired,
                                           uint32_t bound, unsigned long long (&sums)[5],
                                           unsigned long long& max_probes) {
  InsertState st = StartInsert(table, key, desired);
  while (InsertStep(table, st, bound, sums, max_probes) == StepResult::kContinue) {
  }
}

// What a retained row's value is made from (FinalValue): the build source's
// explicit values, batch chunk bases or first generated value.
struct FinalizeArgs {
  const uint32_t* values;
  uint32_t first_value;
  const uint64_t* chunk_starts;
  const uint32_t* chunk_bases;
  uint32_t chunk_count;
};

// The value of global source row `row`: values[row], its batch chunk's base +
// position, or first_value + row (uint32 wrap-around).
__device__ __forceinline__ uint32_t FinalValue(uint32_t row, const uint32_t* __restrict__ values,
                                               uint32_t first_value,
                                               const uint64_t* __restrict__ chunk_starts,
                                               const uint32_t* __restrict__ chunk_bases,
                                               uint32_t chunk_count) {
  if (values != nullptr) return values[row];
  if (chunk_starts != nullptr) {
    // Last chunk whose start is <= row (chunk_starts[0] == 0).
    uint32_t lo = 0, hi = chunk_count;
    while (hi - lo > 1) {
      const uint32_t mid = (lo + hi) / 2;
      if (chunk_starts[mid] <= row)
        lo = mid;
      else
        hi = mid;
    }
    return chunk_bases[lo] + uint32_t(row - chunk_starts[lo]);
  }
  return first_value + row;
}

}  // namespace gpujoin::engine::detail
