// What the query kernels (lookups, joins' lookups and counts) probe for query
// row i, one policy per key kind, so that one kernel serves every key kind:
// WordQuery reads a key word and probes for it; KeyRowQuery probes a key
// schema's row by its fingerprint, compares the key columns on an equal one
// (hashing/key_compare.hpp) and maps the found build row to its value. A
// query's operator() gives the ProbeResult of row i: value (kEmptyKey when
// missing), probes, found, slot.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/index/key_rows.hpp"
#include "cuda/index/probe.cuh"
#include "hashing/key_compare.hpp"

namespace gpujoin::engine::detail {

// A key read once (streaming: evict first).
__device__ __forceinline__ uint32_t LoadStreaming(const uint32_t* p) { return __ldcs(p); }
__device__ __forceinline__ uint64_t LoadStreaming(const uint64_t* p) {
  return __ldcs(reinterpret_cast<const unsigned long long*>(p));
}

template <KeyWord K>
struct WordQuery {
  DeviceTableT<K> table;
  const K* __restrict__ keys;
  uint32_t bound;

  __device__ __forceinline__ ProbeResult operator()(uint64_t i) const {
    return Probe<K>(table.slots, table.capacity, LoadStreaming(keys + i), bound);
  }
};

// A row with a null key column (or masked out) is missing after examining no
// slot.
struct KeyRowQuery {
  DeviceTableT<ColumnKey> table;
  StoredKeyRows stored;
  DeviceKeyRows query;
  uint32_t bound;

  __device__ __forceinline__ ProbeResult operator()(uint64_t i) const {
    if (query.valid[i] == 0) return {kEmptyKey, 0u, false, 0u};
    ProbeResult r = ProbeWhere<ColumnKey>(
        table.slots, table.capacity, query.fingerprints[i], bound, [&](uint32_t row) {
          return KeyViewsEqual(stored.views, row, query.views, i, query.columns);
        });
    if (r.found) r.value = stored.row_values[r.value];
    return r;
  }
};

}  // namespace gpujoin::engine::detail
