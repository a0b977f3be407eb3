// Internal (CUDA builds only): the device-level API of payload columns (issue
// 20). A build stores each payload column in SLOT ORDER beside the table: slot
// s holds the value of its winner w(s), the lowest valid source row whose key
// is the slot's and whose value is the slot's (docs/engine.md, "Payload"). The
// fixed-width columns of a build share one array of records, one per slot
// (record_layout.hpp), so that a gather of several of them reads one record. A
// lookup or join then gathers the value of each output row from the slot its
// probe found. Every function takes device pointers, enqueues work on `stream`
// and returns without synchronising; the lowerings (lowering/lower_payload.cpp)
// and the kernel benchmark (bench/) call them.
//
// Bitmaps (bool values, validity) are Arrow's: bit i of byte i / 8, LSB
// first. Device bitmaps written here must be 4-byte aligned; they are written
// in 32-bit words where the bitmap's byte size allows and byte by byte in its
// last partial word, so a bitmap of exactly BitmapBytes(bits) bytes suffices,
// and bits past the last one are 0.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <span>

#include "cuda/index/build.hpp"
#include "cuda/index/lookup.hpp"
#include "cuda/index/table.hpp"
#include "gpujoin/engine/column.hpp"

namespace gpujoin::engine::detail {

/// A payload column stored in slot order (what CudaHashIndex keeps), for a
/// table of `slots` = TableAllocationSlots(capacity) slots. Empty slots and
/// null values hold zero bytes (fixed width), a 0 bit (kBool) and an empty
/// string.
struct StoredColumn {
  ColumnType type = ColumnType::kInt32;
  /// Fixed width: the records, slot s's value at data + s * stride + offset;
  /// kBool: a bitmap of `slots` bits; variable width: the retained bytes
  /// (offsets[slots] of them).
  const void* data = nullptr;
  /// Fixed width: bytes from one slot's record to the next (a multiple of the
  /// width; the width itself for a column stored alone).
  uint32_t stride = 0;
  /// Fixed width: the value's byte offset in a record (a multiple of the width).
  uint32_t offset = 0;
  /// Variable width: slots + 1 offsets into `data`.
  const uint64_t* offsets = nullptr;
  /// A bitmap of `slots` bits (1 = a value), or null when the column has no nulls.
  const uint8_t* validity = nullptr;
};

/// A build's payload column on the device in source-row order (as uploaded).
struct SourceColumn {
  ColumnType type = ColumnType::kInt32;
  /// Fixed width: rows * width bytes; kBool: a bitmap of `rows` bits; variable
  /// width: the bytes [offsets[0], offsets[rows]) of the host column.
  const void* data = nullptr;
  /// Variable width: the host column's rows + 1 offsets; row i's bytes start at
  /// data + (offsets[i] - offsets[0]).
  const uint64_t* offsets = nullptr;
  /// A bitmap of `rows` bits (0 = null), or null when no row is null.
  const uint8_t* validity = nullptr;
};

// ---------------------------------------------------------------- build side

/// The winner of an empty slot. Builds have at most 2^32 - 1 rows (graph
/// validation), so no row has this number.
inline constexpr uint32_t kNoWinner = 0xffffffffu;

/// Writes every slot's payload winner into `winners` (TableAllocationSlots
/// words): the lowest valid row r of `source` (not the reserved key, not masked
/// out) whose key the built `table` holds at s and whose value (explicit,
/// generated or batch: FinalValue) equals the slot's value; kNoWinner for an
/// empty slot. Every occupied slot has one (the row that stored it), also after
/// overflow drops. `bound` is the build's probe bound.
template <KeyWord K>
cudaError_t FindPayloadWinners(DeviceTableT<K> table, const BuildSourceT<K>& source, uint32_t bound,
                               uint32_t* winners, cudaStream_t stream);

/// Fixed width, kBool, or only the validity of a variable-width column: writes
/// `data` (fixed width: slot s's value at data + s * stride, `stride` a multiple
/// of the width, so `data` may point at the column's value in the first of the
/// records; kBool: a bitmap; ignored for variable width, may be null) and, when
/// the column is nullable (source.validity set), `validity` (a bitmap of `slots`
/// bits), slot s taking the value of row winners[s] (zero bytes for kNoWinner and
/// null values). Adds the occupied slots whose winner is null to `*null_count`.
cudaError_t PermuteColumn(const SourceColumn& source, const uint32_t* winners, uint64_t slots,
                          void* data, uint32_t stride, uint8_t* validity,
                          unsigned long long* null_count, cudaStream_t stream);

/// Bytes of CUB scratch ScanStoredStrings needs for `slots` slots.
size_t StoredStringScanBytes(uint64_t slots);

/// Variable width, first pass: offsets[s] (slots + 1 entries) = the bytes of
/// the retained strings of slots before s (empty for empty slots and nulls), so
/// offsets[slots] is the retained total. `scratch` holds
/// StoredStringScanBytes(slots) bytes.
cudaError_t ScanStoredStrings(const SourceColumn& source, const uint32_t* winners, uint64_t slots,
                              uint64_t* offsets, void* scratch, size_t scratch_bytes,
                              cudaStream_t stream);

/// Variable width, second pass: copies each slot's retained string to
/// bytes + offsets[s] (offsets from ScanStoredStrings).
cudaError_t CopyStoredStrings(const SourceColumn& source, const uint32_t* winners, uint64_t slots,
                              const uint64_t* offsets, uint8_t* bytes, cudaStream_t stream);

// ---------------------------------------------------------------- gather side

/// The rows of a gather: `slots[i]` (kNoSlot = missing) for positions i <
/// `positions`; when `count` is non-null only the first min(*count, positions)
/// are rows (a join's written pairs; *count is read on the device), the rest
/// are written as missing and counted nowhere.
struct GatherRows {
  const uint32_t* slots = nullptr;
  uint64_t positions = 0;
  const unsigned long long* count = nullptr;
};

/// Fixed width and kBool: data[i] (positions * width bytes, or a bitmap of
/// `positions` bits) = the stored value of row i's slot, zero where it is
/// missing or null; validity (a bitmap of `positions` bits) 1 where it is
/// neither. Adds the rows with validity 0 to `*null_count`. (A fixed-width
/// column is GatherFixedColumns of one.)
cudaError_t GatherColumn(const StoredColumn& column, const GatherRows& rows, void* data,
                         uint8_t* validity, unsigned long long* null_count, cudaStream_t stream);

/// One fixed-width (4- or 8-byte) column of GatherFixedColumns and its outputs,
/// as GatherColumn's: `data` positions * width bytes, `validity` a bitmap of
/// `positions` bits, `*null_count` (required) counting the rows with validity 0.
struct FixedGather {
  StoredColumn column;
  void* data = nullptr;
  uint8_t* validity = nullptr;
  unsigned long long* null_count = nullptr;
};

/// The most columns one launch of GatherFixedColumns reads per record.
inline constexpr size_t kFusedGatherColumns = 8;

/// GatherColumn for every entry of `columns` (fixed width; repeats allowed),
/// fused: columns of the same records (same data and stride) are gathered up to
/// kFusedGatherColumns per launch, each row reading its slot once and its
/// record's values with one load of the smallest aligned window (at most 64
/// bytes) that holds them all. Records must start at multiples of min(stride,
/// 64) bytes (a cudaMalloc'd array of a PayloadRecordLayout's stride does).
cudaError_t GatherFixedColumns(std::span<const FixedGather> columns, const GatherRows& rows,
                               cudaStream_t stream);

/// Bytes of CUB scratch ScanGatheredStrings needs for `positions` positions.
size_t GatheredStringScanBytes(uint64_t positions);

/// Variable width, first pass: offsets[i] (positions + 1 entries) = the bytes of
/// rows before i (missing, null and non-row positions are empty), so
/// offsets[positions] is the gather's total (to be checked against its
/// max_string_bytes before the second pass). `scratch` holds
/// GatheredStringScanBytes(positions) bytes.
cudaError_t ScanGatheredStrings(const StoredColumn& column, const GatherRows& rows,
                                uint64_t* offsets, void* scratch, size_t scratch_bytes,
                                cudaStream_t stream);

/// Variable width, second pass (a total that fits uint32): out_offsets[i] =
/// offsets[i] (positions + 1 entries), each row's bytes copied to bytes +
/// offsets[i], validity and `*null_count` as GatherColumn.
cudaError_t CopyGatheredStrings(const StoredColumn& column, const GatherRows& rows,
                                const uint64_t* offsets, uint32_t* out_offsets, uint8_t* bytes,
                                uint8_t* validity, unsigned long long* null_count,
                                cudaStream_t stream);

}  // namespace gpujoin::engine::detail
