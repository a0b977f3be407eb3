// The CPU backend's hash index: one host array of (key, value) slots and the
// reference implementation of build and probe. The CUDA backend must reproduce
// these semantics exactly (see docs/engine.md):
//  - a key's home slot is detail::HomeSlot(key, capacity); probing is linear,
//    slot (home + i) & (capacity - 1) for i = 0 .. bound - 1;
//  - probes = slots examined; a build row stops at its own key (duplicate) or at
//    an empty slot it claims (unique); otherwise it overflows with probes = bound;
//  - a query row stops at its key (found) or an empty slot (missing), else it is
//    missing with probes = bound; kEmptyKey rows examine no slot.
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

class CpuHashIndex final : public HashIndex {
 public:
  /// Allocates an empty table of spec.capacity slots (spec must be valid).
  explicit CpuHashIndex(const HashIndexSpec& spec)
      : HashIndex(spec), slots_(spec.capacity, Slot{kEmptyKey, 0}) {}

  BackendKind backend() const override { return BackendKind::kCpu; }
  uint64_t memory_bytes() const override { return slots_.capacity() * sizeof(Slot); }
  absl::StatusOr<TableSnapshot> Snapshot() const override;

  /// Empties every slot.
  void Clear() { std::fill(slots_.begin(), slots_.end(), Slot{kEmptyKey, 0}); }

  /// Home slot of `key`.
  uint32_t Home(uint32_t key) const { return detail::HomeSlot(key, spec().capacity); }

  /// Hints the cache that `key`'s home slot will be read soon.
  void Prefetch(uint32_t key) const { __builtin_prefetch(&slots_[Home(key)]); }

  /// Inserts `key` (not kEmptyKey) with `value`, examining at most `bound` slots.
  /// Rows must be inserted in global source order so that the first (lowest) row
  /// of a key claims its slot and keeps its value. `probes` receives the slots examined.
  InsertOutcome Insert(uint32_t key, uint32_t value, uint32_t bound, uint32_t& probes) {
    const uint32_t mask = spec().capacity - 1u;
    const uint32_t home = Home(key);
    for (uint32_t i = 0; i < bound; ++i) {
      Slot& s = slots_[(home + i) & mask];
      if (s.key == key) {
        probes = i + 1;
        return InsertOutcome::kDuplicate;
      }
      if (s.key == kEmptyKey) {
        s.key = key;
        s.value = value;
        probes = i + 1;
        return InsertOutcome::kUnique;
      }
    }
    probes = bound;
    return InsertOutcome::kOverflow;
  }

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
      if (s.key == kEmptyKey) {
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

}  // namespace gpujoin::engine::cpu
