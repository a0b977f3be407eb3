// Device functions of the CUDA hash index shared by the build paths and the
// probe: the slot words of each key kind (Slots<K>), the Robin Hood insert of
// one word, and the value a retained row gets.
// See docs/engine.md ("Slots and probing") for the contract.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/index/table.hpp"
#include "gpujoin/engine/detail/slot_hash.hpp"

namespace gpujoin::engine::detail {

__device__ __forceinline__ uint32_t SlotKey(uint64_t slot) { return uint32_t(slot >> 32); }
__device__ __forceinline__ uint32_t SlotLow(uint64_t slot) { return uint32_t(slot); }

// The operations on the slot words of key kind K (table.hpp) that the kernels
// are written with, so that one kernel serves every key kind. KeyT is what
// orders a slot's resident in the table (Key); ProbeKeyT what a probe compares
// with a slot's (ProbeKey): both the key for key words; for a key schema the
// (fingerprint, row) pair and the fingerprint.
template <IndexKey K>
struct Slots;

template <>
struct Slots<uint32_t> {
  using Word = uint64_t;
  using KeyT = uint32_t;
  using ProbeKeyT = uint32_t;
  static constexpr uint32_t kPerSector = 4;  // slots per 32-byte sector
  __device__ static uint32_t Key(Word w) { return SlotKey(w); }
  __device__ static uint32_t ProbeKey(Word w) { return SlotKey(w); }
  __device__ static uint32_t Low(Word w) { return SlotLow(w); }
  __device__ static Word Make(uint32_t key, uint32_t low) { return (uint64_t(key) << 32) | low; }
  __device__ static Word Empty() { return kEmptySlot; }
  __device__ static bool IsEmpty(Word w) { return w == kEmptySlot; }
  __device__ static bool Same(Word a, Word b) { return a == b; }
  // Of two words of one key: whether `a`'s tag is the larger.
  __device__ static bool TagAbove(Word a, Word b) { return a > b; }
  __device__ static Word WithLow(Word w, uint32_t low) { return (w & 0xffffffff00000000ull) | low; }
  // A plain read through L2 (a stale value is safe: see InsertStep).
  __device__ static Word LoadL2(const Word* p) {
    return __ldcg(reinterpret_cast<const unsigned long long*>(p));
  }
  // A read-only (texture path) read.
  __device__ static Word LoadRO(const Word* p) {
    return __ldg(reinterpret_cast<const unsigned long long*>(p));
  }
  __device__ static Word Cas(Word* p, Word expected, Word desired) {
    return atomicCAS(reinterpret_cast<unsigned long long*>(p), expected, desired);
  }
  // Reads the 32-byte sector at `p` (four slots) with two 16-byte read-only loads.
  // (Asking L2 to prefetch 64 or 128 bytes around the first load, PTX
  // `.L2::64B/128B`, measured no faster on an H200: 35.2 plain, 35.2 64 B, 30.2
  // 128 B Gkeys/s at load 0.5; 29.2, 29.2, 27.0 at 0.8.)
  __device__ static void LoadSector(const Word* p, Word (&s)[kPerSector]) {
    const ulonglong2* v = reinterpret_cast<const ulonglong2*>(p);
    const ulonglong2 a = __ldg(v);
    const ulonglong2 b = __ldg(v + 1);
    s[0] = a.x;
    s[1] = a.y;
    s[2] = b.x;
    s[3] = b.y;
  }
  // Four consecutive slots (16-byte aligned), plain loads and stores.
  __device__ static void Load4(const Word* p, Word (&s)[4]) {
    const ulonglong2* v = reinterpret_cast<const ulonglong2*>(p);
    const ulonglong2 a = v[0], b = v[1];
    s[0] = a.x;
    s[1] = a.y;
    s[2] = b.x;
    s[3] = b.y;
  }
  __device__ static void Store4(Word* p, const Word (&s)[4]) {
    ulonglong2* v = reinterpret_cast<ulonglong2*>(p);
    v[0] = make_ulonglong2(s[0], s[1]);
    v[1] = make_ulonglong2(s[2], s[3]);
  }
};

template <>
struct Slots<uint64_t> {
  using Word = Slot64;
  // One 32-byte sector per probe step. (64 bytes, four slots per step, measured
  // slower on an H200: 19.8 vs 28.0 Gkeys/s all hits at load 0.5, 15.6 vs 19.4
  // half misses at load 0.8, 2^26 and 0.8 x 2^27 keys.)
  static constexpr uint32_t kPerSector = 2;
  using KeyT = uint64_t;
  using ProbeKeyT = uint64_t;
  __device__ static uint64_t Key(Word w) { return w.key; }
  __device__ static uint64_t ProbeKey(Word w) { return w.key; }
  __device__ static uint32_t Low(Word w) { return uint32_t(w.tag); }
  __device__ static Word Make(uint64_t key, uint32_t low) { return Word{key, low}; }
  __device__ static Word Empty() { return Word{kEmptySlot, kEmptySlot}; }
  __device__ static bool IsEmpty(Word w) { return w.key == kEmptySlot; }
  __device__ static bool Same(Word a, Word b) { return a.key == b.key && a.tag == b.tag; }
  __device__ static bool TagAbove(Word a, Word b) { return a.tag > b.tag; }
  __device__ static Word WithLow(Word w, uint32_t low) { return Word{w.key, low}; }
  __device__ static Word FromVector(ulonglong2 v) { return Word{v.x, v.y}; }
  __device__ static Word LoadL2(const Word* p) {
    return FromVector(__ldcg(reinterpret_cast<const ulonglong2*>(p)));
  }
  __device__ static Word LoadRO(const Word* p) {
    return FromVector(__ldg(reinterpret_cast<const ulonglong2*>(p)));
  }
  __device__ static Word Cas(Word* p, Word expected, Word desired) {
    return atomicCAS(p, expected, desired);  // the 16-byte CAS of sm_90
  }
  __device__ static void LoadSector(const Word* p, Word (&s)[kPerSector]) {
    const ulonglong2* v = reinterpret_cast<const ulonglong2*>(p);
    s[0] = FromVector(__ldg(v));
    s[1] = FromVector(__ldg(v + 1));
  }
  __device__ static void Load4(const Word* p, Word (&s)[4]) {
    const ulonglong2* v = reinterpret_cast<const ulonglong2*>(p);
#pragma unroll
    for (int j = 0; j < 4; ++j) s[j] = FromVector(v[j]);
  }
  __device__ static void Store4(Word* p, const Word (&s)[4]) {
    ulonglong2* v = reinterpret_cast<ulonglong2*>(p);
#pragma unroll
    for (int j = 0; j < 4; ++j) v[j] = make_ulonglong2(s[j].key, s[j].tag);
  }
};

// A key-schema slot's place in the table order: its fingerprint, then (keys
// of one fingerprint, which lie together) its build row. A table holds each
// key once, under its lowest build row (cuda/index/key_rows.hpp), so the pair
// names the key.
struct FpRow {
  uint64_t fp;
  uint32_t row;
  __host__ __device__ bool operator==(const FpRow& o) const { return fp == o.fp && row == o.row; }
  __host__ __device__ bool operator<(const FpRow& o) const {
    return fp < o.fp || (fp == o.fp && row < o.row);
  }
};
/// Home slot of a key-schema slot: its fingerprint's (what ResidentComesFirst
/// finds by argument-dependent lookup).
GPUJOIN_HOST_DEVICE uint32_t HomeSlot(FpRow key, uint32_t capacity) {
  return HomeSlot(key.fp, capacity);
}

// Key schemas: the uint64 layout with the fingerprint as the key and the build
// row as the tag; empty is told by the row (all ones), so any fingerprint,
// all ones included, is stored.
template <>
struct Slots<ColumnKey> : Slots<uint64_t> {
  using KeyT = FpRow;
  using ProbeKeyT = uint64_t;
  __device__ static FpRow Key(Word w) { return FpRow{w.key, uint32_t(w.tag)}; }
  __device__ static bool IsEmpty(Word w) { return w.tag == kEmptySlot; }
  // A build's plain read of a slot that other threads may be writing: one
  // 16-byte atomic load. A key-schema slot's emptiness is told by its row half
  // and its order by both halves, so a read torn between two writes (half of
  // a claim, halves of two residents) could misplace a key; a uint64 slot's
  // key half decides alone, which an 8-byte half read always gets whole.
  __device__ static Word LoadL2(const Word* p) {
    unsigned long long key, tag;
    asm volatile(
        "{\n\t.reg .b128 w;\n\tld.relaxed.gpu.global.b128 w, [%2];\n\t"
        "mov.b128 {%0, %1}, w;\n\t}"
        : "=l"(key), "=l"(tag)
        : "l"(p)
        : "memory");
    return Word{key, tag};
  }
  // A key is stored once: two words of one key are the same word.
  __device__ static bool TagAbove(Word, Word) { return false; }
};

// Inserts one slot word key:tag in Robin Hood order (detail::ResidentComesFirst,
// docs/engine.md "Slots and probing"). A row's tag is the final value
// (generated values that grow with the row, so the lowest row has the lowest
// tag) or the global source row (finalised later). Both make "keep the lowest
// row" a minimum of the tag among words of the same key (for uint32 keys the
// 64-bit minimum of the word, for uint64 keys of its second half), so the
// outcome does not depend on thread order.
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
template <IndexKey K>
struct InsertState {
  SlotWord<K> word;                  // the word being placed: the row's, then carried ones
  typename Slots<K>::KeyT word_key;  // Slots<K>::Key(word)
  uint32_t pos;                      // the slot to examine next
  uint32_t d;                        // displacement of `word` at `pos`
  bool own;                          // `word` is still the row's own
};

template <IndexKey K>
__device__ __forceinline__ InsertState<K> StartInsert(DeviceTableT<K> table,
                                                      typename Slots<K>::KeyT key,
                                                      SlotWord<K> desired) {
  return InsertState<K>{desired, key, HomeSlot(key, table.capacity), 0u, true};
}

enum class StepResult { kContinue, kSettled };

// Examines slot st.pos for st.word (see above).
template <IndexKey K>
__device__ __forceinline__ StepResult InsertStep(DeviceTableT<K> table, InsertState<K>& st,
                                                 uint32_t bound, unsigned long long (&sums)[5],
                                                 unsigned long long& max_probes) {
  using S = Slots<K>;
  using Word = SlotWord<K>;
  constexpr unsigned long long kMinusOne = ~0ull;
  if (st.d >= bound) {
    sums[2] += 1;
    if (!st.own) sums[0] += kMinusOne;
    if (bound > max_probes) max_probes = bound;
    return StepResult::kSettled;
  }
  Word* slot = table.slots + st.pos;
  // A plain (L2) read first; a stale value is safe (residents only move
  // towards "comes first", and a CAS against a stale value fails and
  // re-examines). (A CAS as the first read measured slower on an H200: 6.3 vs
  // 6.0 ms for 2^26 rows at load 0.5, 19.3 vs 17.1 ms at 0.8.)
  Word cur = S::LoadL2(slot);
  ++sums[4];
  while (true) {
    if (S::IsEmpty(cur)) {
      const Word prev = S::Cas(slot, S::Empty(), st.word);
      if (S::Same(prev, S::Empty())) {
        if (st.own) sums[0] += 1;
        if (st.d + 1u > max_probes) max_probes = st.d + 1u;
        return StepResult::kSettled;
      }
      cur = prev;
      continue;
    }
    const auto resident = S::Key(cur);
    if (resident == st.word_key) {
      if (S::TagAbove(cur, st.word)) {
        const Word prev = S::Cas(slot, cur, st.word);
        if (!S::Same(prev, cur)) {
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
    const Word prev = S::Cas(slot, cur, st.word);
    if (!S::Same(prev, cur)) {
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
template <IndexKey K>
__device__ __forceinline__ void InsertWord(DeviceTableT<K> table, typename Slots<K>::KeyT key,
                                           SlotWord<K> desired, uint32_t bound,
                                           unsigned long long (&sums)[5],
                                           unsigned long long& max_probes) {
  InsertState<K> st = StartInsert(table, key, desired);
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
