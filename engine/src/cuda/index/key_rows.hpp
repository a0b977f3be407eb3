// Internal (CUDA builds only): the table of a key-schema index (ColumnKey,
// docs/engine.md "Key schemas") on the device. A slot holds the 64-bit
// fingerprint of a key's columns (the Hash operation's row hash, computed on
// the device by LaunchHashRows) and the key's lowest build row; the build's key
// columns stay resident in build-row order, and a probe compares them on an
// equal fingerprint (hashing/key_compare.hpp, the CPU backend's comparison).
//
// A build runs in three passes, so that concurrent threads give the CPU
// backend's table and statistics:
//  1. grouping: every valid row finds its key in a transient linear-probing
//     table of (fingerprint, row) words (exact comparison on equal
//     fingerprints), which keeps the lowest row of each key (its
//     representative);
//  2. insertion: each representative is inserted once, in Robin Hood order of
//     (fingerprint, row) (insert.cuh), so the layout is the CPU's: keys of one
//     fingerprint ordered by row;
//  3. the other rows: each probes the finished table for its key, counting a
//     duplicate (at its key's final place) or, when its key overflowed, an
//     overflow row of `bound` probes.
// Plain C++: launchers only.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/index/table.hpp"
#include "hashing/hash_view.hpp"

namespace gpujoin::engine::detail {

/// Some rows of a key schema on the device: the views of their key columns (a
/// device array of `columns` ColumnViews over device buffers), their
/// fingerprints and whether each row has a key (no null key column, and not
/// masked out).
struct DeviceKeyRows {
  const HashView* views = nullptr;
  uint32_t columns = 0;
  const uint64_t* fingerprints = nullptr;
  const uint8_t* valid = nullptr;
  uint64_t rows = 0;
};

/// The view of a stored key column of `type` (strings and binary with int64
/// offsets: the large types, which hash and compare like the others).
inline HashView StoredKeyView(ColumnType type, const uint8_t* data, const int64_t* offsets,
                              const uint8_t* validity) {
  HashView v;
  v.type = type == ColumnType::kString   ? ColumnType::kLargeString
           : type == ColumnType::kBinary ? ColumnType::kLargeBinary
                                         : type;
  v.data = data;
  v.large_offsets = offsets;
  v.validity = validity;
  return v;
}

/// Bytes a stored key column's values take on the device: room to the next
/// aligned 8-byte word past the last value (the row hash reads whole words).
inline uint64_t StoredKeyDataBytes(uint64_t value_bytes) { return (value_bytes + 15) / 8 * 8; }

/// Turns the row hashes `hashes` of `rows` rows (LaunchHashRows' output, with
/// its validity bitmap `hash_validity`) into fingerprints in place: kept to
/// their low `bits` bits (64: all; fewer only in tests, to force collisions),
/// and valid[r] = 1 when the row's hash is valid (no key column is null) and
/// `row_validity` (optional: one uint32 per row, nonzero = valid) keeps it, else 0.
cudaError_t FinishFingerprints(uint64_t* hashes, const uint8_t* hash_validity,
                               const uint32_t* row_validity, uint64_t rows, uint32_t bits,
                               uint8_t* valid, cudaStream_t stream);

/// Most rows of a key-schema build on the device (the grouping pass keeps a
/// 32-bit position per row in a table of at least twice the rows).
inline constexpr uint64_t kMaxKeyBuildRows = (uint64_t{1} << 31) - 1;

/// Transient device bytes BuildKeyTable needs for `rows` build rows.
uint64_t KeyBuildScratchBytes(uint64_t rows);

/// Clears `table` and inserts the keys of build rows `keys` (global rows
/// 0..rows-1, at most kMaxKeyBuildRows), keeping each key's lowest row, each key
/// examining at most `bound` slots. `scratch` holds KeyBuildScratchBytes(rows)
/// bytes. Statistics are written to `stats` (zeroed first): a valid row counts
/// as a unique key, a duplicate or an overflow row, an invalid row as invalid.
cudaError_t BuildKeyTable(DeviceTableT<ColumnKey> table, const DeviceKeyRows& keys, uint32_t bound,
                          void* scratch, uint64_t scratch_bytes, DeviceBuildStats* stats,
                          cudaStream_t stream);

/// row_values[r] = the value of build row r for r < rows: values[r] (explicit
/// values), its batch chunk's base + position (chunk_starts ascending from 0,
/// chunk_count of them), or first_value + r (uint32 wrap-around).
cudaError_t WriteRowValues(uint64_t rows, const uint32_t* values, uint32_t first_value,
                           const uint64_t* chunk_starts, const uint32_t* chunk_bases,
                           uint32_t chunk_count, uint32_t* row_values, cudaStream_t stream);

/// What a probe of a key-schema table reads besides the table: the stored
/// build rows' key columns (device views) and each build row's value. The
/// lookups are lookup.hpp's LookupKeyRows*.
struct StoredKeyRows {
  const HashView* views = nullptr;
  uint32_t columns = 0;
  const uint32_t* row_values = nullptr;
};

/// winners[s] = the build row stored in slot s, kNoWinner for an empty slot,
/// for the TableAllocationSlots(capacity) slots: where a lowest-row build's
/// payload is gathered from (lower_payload.hpp's StorePayloadAt).
cudaError_t KeyTableWinners(DeviceTableT<ColumnKey> table, uint32_t* winners, cudaStream_t stream);

}  // namespace gpujoin::engine::detail
