// Internal (CUDA builds only): the device table of a CUDA hash index and the
// statistics its kernels accumulate. Plain C++: launchers and the backend include
// it without nvcc.
//
// Table layout: one uint64 per slot, key in the high 32 bits and the value (or,
// during a build, the winning source row) in the low 32 bits. An empty slot is
// all ones (its key is kEmptyKey). A 32-byte sector holds four slots, so one
// sector read tests four keys; an insert needs one 64-bit atomic per slot it
// changes.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gpujoin/engine/types.hpp"

namespace gpujoin::engine::detail {

inline constexpr uint64_t kEmptySlot = ~uint64_t{0};

/// A table in device memory. `slots` holds TableAllocationSlots(capacity)
/// entries (the pad keeps 4-slot sector reads in bounds for tiny tables).
struct DeviceTable {
  uint64_t* slots = nullptr;
  uint32_t capacity = 0;
};

/// Number of uint64 entries to allocate for a table of `capacity` slots.
inline size_t TableAllocationSlots(uint32_t capacity) { return capacity < 4 ? 4 : capacity; }

/// Device bytes of a table of `capacity` slots (what CudaHashIndex allocates).
inline uint64_t TableAllocationBytes(uint32_t capacity) {
  return uint64_t(TableAllocationSlots(capacity)) * sizeof(uint64_t);
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
