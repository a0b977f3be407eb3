// The CPU backend's hash index: two host vectors (table keys and values) and the
// reference implementation of build and probe. The CUDA backend must reproduce
// these semantics exactly (see docs/engine.md):
//  - a key's home slot is detail::HomeSlot(key, capacity); probing is linear,
//    slot (home + i) & (capacity - 1) for i = 0 .. bound - 1;
//  - probes = slots examined; a build row stops at its own key (duplicate) or at
//    an empty slot it claims (unique); otherwise it overflows with probes = bound;
//  - a query row stops at its key (found) or an empty slot (missing), else it is
//    missing with probes = bound; kEmptyKey rows examine no slot.
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
      : HashIndex(spec), keys_(spec.capacity, kEmptyKey), values_(spec.capacity, 0) {}

  BackendKind backend() const override { return BackendKind::kCpu; }
  uint64_t memory_bytes() const override {
    return (keys_.capacity() + values_.capacity()) * sizeof(uint32_t);
  }
  absl::StatusOr<TableSnapshot> Snapshot() const override {
    return TableSnapshot{keys_, values_};
  }

  /// Empties every slot.
  void Clear() {
    std::fill(keys_.begin(), keys_.end(), kEmptyKey);
    std::fill(values_.begin(), values_.end(), 0u);
  }

  /// Inserts `key` (not kEmptyKey) with `value`, examining at most `bound` slots.
  /// Rows must be inserted in global source order so that the first (lowest) row
  /// of a key claims its slot and keeps its value. `probes` receives the slots examined.
  InsertOutcome Insert(uint32_t key, uint32_t value, uint32_t bound, uint32_t& probes) {
    const uint32_t mask = spec().capacity - 1u;
    const uint32_t home = detail::HomeSlot(key, spec().capacity);
    for (uint32_t i = 0; i < bound; ++i) {
      const uint32_t slot = (home + i) & mask;
      const uint32_t k = keys_[slot];
      if (k == key) {
        probes = i + 1;
        return InsertOutcome::kDuplicate;
      }
      if (k == kEmptyKey) {
        keys_[slot] = key;
        values_[slot] = value;
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
    const uint32_t home = detail::HomeSlot(key, spec().capacity);
    for (uint32_t i = 0; i < bound; ++i) {
      const uint32_t slot = (home + i) & mask;
      const uint32_t k = keys_[slot];
      if (k == key) {
        value = values_[slot];
        probes = i + 1;
        return true;
      }
      if (k == kEmptyKey) {
        probes = i + 1;
        return false;
      }
    }
    probes = bound;
    return false;
  }

 private:
  std::vector<uint32_t> keys_;
  std::vector<uint32_t> values_;
};

}  // namespace gpujoin::engine::cpu
