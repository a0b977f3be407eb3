// Internal (CUDA builds only): looking keys up in a device table. Enqueues on
// `stream`, never synchronises.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/index/key_rows.hpp"
#include "cuda/index/table.hpp"

namespace gpujoin::engine::detail {

/// Looks up `rows` keys of key word K (uint32_t or uint64_t, instantiated in
/// lookup.cu) with at most `bound` probes each. Writes values[i] (kEmptyKey
/// when missing); found[i] (1/0) and probes[i] when non-null. Adds to `stats`
/// (zero it first).
template <KeyWord K>
cudaError_t LookupKeys(DeviceTableT<K> table, const K* keys, uint64_t rows, uint32_t bound,
                       uint32_t* values, uint8_t* found, uint32_t* probes, DeviceQueryStats* stats,
                       cudaStream_t stream);

/// Slot of a missing row in the slot outputs of LookupKeysSlots and the join's
/// pair slots (capacities are at most 2^31, so no slot has this number).
inline constexpr uint32_t kNoSlot = 0xffffffffu;

/// LookupKeys that also writes every row's slot: slots[i] is the slot holding
/// keys[i] when found, else kNoSlot (the payload gathers read it). `slots` is
/// required.
template <KeyWord K>
cudaError_t LookupKeysSlots(DeviceTableT<K> table, const K* keys, uint64_t rows, uint32_t bound,
                            uint32_t* values, uint8_t* found, uint32_t* probes, uint32_t* slots,
                            DeviceQueryStats* stats, cudaStream_t stream);

/// Which rows the masks of LookupKeysMasked mark.
enum class MaskedRows : uint8_t {
  kFound,    ///< the rows found (inner and semi joins)
  kMissing,  ///< the rows missed, the reserved key's included (anti joins)
};

/// LookupKeys that also writes the found (or, `masked` kMissing, the missing)
/// rows as bits: masks[g] bit j is set when row 32 * g + j was found (missed),
/// for g < ceil(rows / 32) (bits past `rows` are 0); what the join's compaction
/// scans. `masks` is required.
template <KeyWord K>
cudaError_t LookupKeysMasked(DeviceTableT<K> table, const K* keys, uint64_t rows, uint32_t bound,
                             uint32_t* values, uint8_t* found, uint32_t* probes, uint32_t* masks,
                             DeviceQueryStats* stats, cudaStream_t stream,
                             MaskedRows masked = MaskedRows::kFound);

/// LookupKeysMasked that also writes every row's slot as LookupKeysSlots does.
template <KeyWord K>
cudaError_t LookupKeysMaskedSlots(DeviceTableT<K> table, const K* keys, uint64_t rows,
                                  uint32_t bound, uint32_t* values, uint8_t* found,
                                  uint32_t* probes, uint32_t* masks, uint32_t* slots,
                                  DeviceQueryStats* stats, cudaStream_t stream,
                                  MaskedRows masked = MaskedRows::kFound);

/// The lookups of a key-schema index (key_rows.hpp), one kernel with the key
/// words' (query.cuh): every row of `query` is looked up; values[i] = the value
/// of the key's lowest build row (kEmptyKey when missing), and the optional
/// found (0/1), probes and slots (kNoSlot when missing) outputs (null: not
/// written). A row without a key (a null key column) is missing after
/// examining no slot. Statistics are added to `stats`.
cudaError_t LookupKeyRows(DeviceTableT<ColumnKey> table, const StoredKeyRows& stored,
                          const DeviceKeyRows& query, uint32_t bound, uint32_t* values,
                          uint8_t* found, uint32_t* probes, uint32_t* slots,
                          DeviceQueryStats* stats, cudaStream_t stream);

/// LookupKeyRows that also writes the found (or missing) rows as bits, as
/// LookupKeysMasked does (`masks` required; `slots` optional).
cudaError_t LookupKeyRowsMasked(DeviceTableT<ColumnKey> table, const StoredKeyRows& stored,
                                const DeviceKeyRows& query, uint32_t bound, uint32_t* values,
                                uint8_t* found, uint32_t* probes, uint32_t* masks, uint32_t* slots,
                                DeviceQueryStats* stats, cudaStream_t stream,
                                MaskedRows masked = MaskedRows::kFound);

}  // namespace gpujoin::engine::detail
