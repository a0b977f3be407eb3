// The lookup contract (docs/engine.md, "Lookup") as a reference model over a
// table's keys by slot, shared by the engine tests (ContractLookup) and the
// fuzz targets' reference index (fuzz/fuzz_support.cpp).
#pragma once

#include <cstdint>
#include <optional>

#include "gpujoin/engine/detail/slot_hash.hpp"
#include "gpujoin/engine/types.hpp"

namespace gpujoin::testing {

/// What a lookup of one key examines: the slots (`probes`) and, when it finds
/// the key, its slot.
struct ContractProbe {
  uint32_t probes = 0;
  std::optional<uint32_t> slot;
};

/// Probes a table of `capacity` slots (a power of two; `key_at(slot)` is the key
/// stored there, kEmptyKeyOf<K> when empty) for `key`, examining at most `bound`
/// slots: stops at its key (found), at an empty slot or a resident that comes
/// after it in Robin Hood order (missing; that slot counts), else missing after
/// `bound` slots; the reserved key examines none.
template <engine::KeyWord K, class KeyAt>
ContractProbe ProbeContract(uint32_t capacity, const KeyAt& key_at, K key, uint32_t bound) {
  ContractProbe out;
  if (key == engine::kEmptyKeyOf<K>) return out;
  const uint32_t home = engine::detail::HomeSlot(key, capacity);
  for (uint32_t i = 0; i < bound; ++i) {
    const uint32_t slot = (home + i) & (capacity - 1u);
    const K resident = key_at(slot);
    out.probes = i + 1;
    if (resident == key) {
      out.slot = slot;
      return out;
    }
    if (resident == engine::kEmptyKeyOf<K> ||
        !engine::detail::ResidentComesFirst(resident, key, i, slot, capacity)) {
      return out;
    }
  }
  out.probes = bound;
  return out;
}

}  // namespace gpujoin::testing
