// Internal (CUDA builds only): the device table of a CUDA hash index and the
// statistics its kernels accumulate. Plain C++: launchers and the backend include
// it without nvcc.
//
// Table layout, one word per slot (SlotWord<K>), the key and the value (or,
// during a build, the winning source row) side by side:
//  - uint32 keys: one uint64, key in the high 32 bits, value in the low 32 bits.
//    A 32-byte sector holds four slots, so one sector read tests four keys; an
//    insert needs one 64-bit atomic per slot it changes.
//  - uint64 keys: 16 bytes, the key, then the value in the low 32 bits of a
//    second uint64 (its high 32 bits 0), so a sector holds two slots and an
//    insert takes one 16-byte atomicCAS (sm_90) per slot it changes; "keep the
//    lowest row" is then the minimum of the second word among words of one key.
//    (Split key and value arrays would read a second sector for every hit and
//    need a second atomic per claim; they have not been measured against this.)
//  - key schemas (ColumnKey): the uint64 layout, the 64-bit fingerprint of the
//    key columns as the key and the build row in the low 32 bits of the tag
//    (the key columns stay resident beside the table: cuda/index/key_rows.hpp).
// An empty slot is all ones (its key is kEmptyKeyOf<K>; a key schema's: its row
// is all ones, so every fingerprint is an ordinary key).
#pragma once

#include <cstddef>
#include <cstdint>

#include "gpujoin/engine/key_columns.hpp"
#include "gpujoin/engine/types.hpp"

namespace gpujoin::engine::detail {

inline constexpr uint64_t kEmptySlot = ~uint64_t{0};

/// The slot of a uint64-key table: key, then tag (the value or source row in
/// its low 32 bits). All ones when empty.
struct alignas(16) Slot64 {
  uint64_t key;
  uint64_t tag;
};

/// The slot word of key kind K.
template <IndexKey K>
struct SlotWordOf {
  using type = uint64_t;
};
template <>
struct SlotWordOf<uint64_t> {
  using type = Slot64;
};
template <>
struct SlotWordOf<ColumnKey> {
  using type = Slot64;
};
template <IndexKey K>
using SlotWord = typename SlotWordOf<K>::type;

/// Bytes of one slot of `type`.
inline constexpr uint64_t SlotBytes(KeyType type) { return type == KeyType::kUint32 ? 8 : 16; }

/// A table in device memory. `slots` holds TableAllocationSlots(capacity)
/// entries (the pad keeps sector reads in bounds for tiny tables).
template <IndexKey K>
struct DeviceTableT {
  SlotWord<K>* slots = nullptr;
  uint32_t capacity = 0;
};
using DeviceTable = DeviceTableT<uint32_t>;
using DeviceTable64 = DeviceTableT<uint64_t>;

/// Number of slots to allocate for a table of `capacity` slots.
inline size_t TableAllocationSlots(uint32_t capacity) { return capacity < 4 ? 4 : capacity; }

/// Device bytes of a table of `capacity` slots of `type` (what CudaHashIndex
/// allocates).
inline uint64_t TableAllocationBytes(uint32_t capacity, KeyType type = KeyType::kUint32) {
  return uint64_t(TableAllocationSlots(capacity)) * SlotBytes(type);
}

/// Build statistics accumulated on the device (same order as BuildStatistics).
struct DeviceBuildStats {
  unsigned long long unique_keys;
  unsigned long long duplicate_rows;
  unsigned long long overflow_rows;
  unsigned long long invalid_rows;
  unsigned long long total_probes;
  unsigned long long max_probes;
};

/// Query statistics accumulated on the device; missing = rows - found.
struct DeviceQueryStats {
  unsigned long long found;
  unsigned long long total_probes;
  unsigned long long max_probes;
  unsigned long long reserved;  // keeps the struct 32 bytes
};

}  // namespace gpujoin::engine::detail
