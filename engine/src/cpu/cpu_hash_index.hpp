// The CPU backend's hash index: one host array of (key, value) slots and the
// reference implementation of build and probe. The CUDA backend must reproduce
// these semantics exactly (see docs/engine.md, "Slots and probing"):
//  - a key's home slot is detail::HomeSlot(key, capacity); probing is linear,
//    slot (home + i) & (capacity - 1) for i = 0 .. bound - 1;
//  - slots are kept in Robin Hood order (detail::ResidentComesFirst): an
//    insertion takes the first slot whose resident comes after its key and
//    carries that resident on, so every run is sorted by home, then key, and the
//    layout depends only on the set of keys (unless the build overflowed);
//  - probes = slots examined; a query row stops at its key (found), an empty
//    slot or a resident that comes after it (missing), else it is missing with
//    probes = bound; kEmptyKey rows examine no slot.
// Keys and values share one slot so that a probe costs one cache miss, not two.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "gpujoin/engine/detail/slot_hash.hpp"
#include "gpujoin/engine/hash_index.hpp"
#include "gpujoin/engine/types.hpp"

namespace gpujoin::engine::cpu {

/// Outcome of inserting one build row.
enum class InsertOutcome { kUnique, kDuplicate, kOverflow };

/// What one insertion did (see CpuHashIndex::Insert).
struct InsertResult {
  InsertOutcome outcome = InsertOutcome::kOverflow;
  /// Slots examined, by the row's key and by the keys it displaced.
  uint32_t probes = 0;
  /// Largest (displacement + 1) at which a key was stored or found; `bound`
  /// when a key overflowed.
  uint32_t max_probes = 0;
  /// A key stored earlier was displaced past the bound and dropped: it counts
  /// as an overflow row instead of a unique key from now on.
  bool dropped = false;
};

class CpuHashIndex final : public HashIndex {
 public:
  /// Allocates an empty table of spec.capacity slots (spec must be valid).
  explicit CpuHashIndex(const HashIndexSpec& spec)
      : HashIndex(spec), slots_(spec.capacity, Slot{kEmptyKey, 0}) {}

  /// Bytes of the table an index of `spec` allocates: capacity slots of 8 bytes
  /// (key and value), nothing else (Backend::IndexBytes).
  static uint64_t TableBytes(const HashIndexSpec& spec) {
    return uint64_t{spec.capacity} * sizeof(Slot);
  }

  BackendKind backend() const override { return BackendKind::kCpu; }
  uint64_t memory_bytes() const override { return slots_.capacity() * sizeof(Slot); }
  absl::StatusOr<TableSnapshot> Snapshot() const override;

  /// Empties every slot.
  void Clear() { std::fill(slots_.begin(), slots_.end(), Slot{kEmptyKey, 0}); }

  /// Home slot of `key`.
  uint32_t Home(uint32_t key) const { return detail::HomeSlot(key, spec().capacity); }

  /// Hints the cache that `key`'s home slot will be read soon.
  void Prefetch(uint32_t key) const { __builtin_prefetch(&slots_[Home(key)]); }

  /// Inserts `key` (not kEmptyKey) with `value` in Robin Hood order, each key
  /// examining at most `bound` slots from its home. Rows must be inserted in
  /// global source order so that the first (lowest) row of a key keeps its value.
  InsertResult Insert(uint32_t key, uint32_t value, uint32_t bound);

  /// Looks `key` up examining at most `bound` slots. Returns true and sets `value`
  /// when found; `probes` receives the slots examined (0 for kEmptyKey).
  bool Find(uint32_t key, uint32_t bound, uint32_t& value, uint32_t& probes) const {
    if (key == kEmptyKey) {
      probes = 0;
      return false;
    }
    const uint32_t mask = spec().capacity - 1u;
    const uint32_t home = Home(key);
    for (uint32_t i = 0; i < bound; ++i) {
      const Slot& s = slots_[(home + i) & mask];
      if (s.key == key) {
        value = s.value;
        probes = i + 1;
        return true;
      }
      if (s.key == kEmptyKey ||
          !detail::ResidentComesFirst(s.key, key, i, (home + i) & mask, spec().capacity)) {
        probes = i + 1;
        return false;
      }
    }
    probes = bound;
    return false;
  }

 private:
  struct Slot {
    uint32_t key;
    uint32_t value;
  };
  std::vector<Slot> slots_;
};

inline InsertResult CpuHashIndex::Insert(uint32_t key, uint32_t value, uint32_t bound) {
  const uint32_t capacity = spec().capacity;
  const uint32_t mask = capacity - 1u;
  InsertResult r;
  Slot carried{key, value};  // the key being placed: the row's, then a displaced one
  bool own = true;           // whether `carried` is still the row's own key
  uint32_t pos = Home(key);
  for (uint32_t d = 0;; ++d, pos = (pos + 1u) & mask) {  // d: displacement of `carried`
    if (d >= bound) {
      r.max_probes = std::max(r.max_probes, bound);
      if (own) {
        r.outcome = InsertOutcome::kOverflow;
      } else {
        r.dropped = true;
      }
      return r;
    }
    Slot& s = slots_[pos];
    ++r.probes;
    if (s.key == carried.key) {  // rows arrive in order: only the row's own key repeats
      r.outcome = InsertOutcome::kDuplicate;
      r.max_probes = std::max(r.max_probes, d + 1);
      return r;
    }
    if (s.key == kEmptyKey) {
      s = carried;
      r.max_probes = std::max(r.max_probes, d + 1);
      if (own) r.outcome = InsertOutcome::kUnique;
      return r;
    }
    if (detail::ResidentComesFirst(s.key, carried.key, d, pos, capacity)) continue;
    // `carried` belongs here: store it and carry the resident on from the next slot.
    r.max_probes = std::max(r.max_probes, d + 1);
    if (own) r.outcome = InsertOutcome::kUnique;
    own = false;
    std::swap(s, carried);
    d = (pos - Home(carried.key)) & mask;
  }
}

}  // namespace gpujoin::engine::cpu
