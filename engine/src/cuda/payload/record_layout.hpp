// Internal (CUDA builds only; plain C++): where the CUDA backend keeps a build's
// fixed-width payload columns. All of them (4- and 8-byte types) share one
// array of records in slot order, so that a gather of several columns of a
// slot reads one record, one random DRAM access instead of one per column
// (docs/engine.md, "Payload"). kBool columns, validity bitmaps and strings are
// stored apart (payload_ops.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "gpujoin/engine/column.hpp"

namespace gpujoin::engine::detail {

/// The record offset of a column that is not in the record (kBool, strings).
inline constexpr uint32_t kNotInRecord = 0xffffffffu;

/// The record of a build's payload columns.
struct PayloadRecordLayout {
  /// Bytes from one slot's record to the next: the fixed-width values' sum
  /// rounded up to a power of two when it is at most 64 bytes (so a record,
  /// starting at a multiple of its stride, never crosses a 64-byte DRAM
  /// access), else to a multiple of 64. 0 when the build has no fixed-width
  /// column.
  uint32_t stride = 0;
  /// Bytes of the values in a record (the sum of the fixed-width widths).
  uint32_t value_bytes = 0;
  /// Per column of the build, in its order: the byte offset of the column's
  /// value in the record (8-byte values first, each group in the build's
  /// order, so every value is aligned to its width), or kNotInRecord.
  std::vector<uint32_t> offsets;
  /// The last fixed-width column in the build's order, charged with the
  /// records' padding in its PayloadColumnInfo::bytes; offsets.size() when
  /// there is none.
  size_t padded_column = 0;

  /// Bytes of the records for `slots` slots (what is allocated).
  uint64_t RecordBytes(uint64_t slots) const { return slots * stride; }
  /// Bytes of padding in the records for `slots` slots.
  uint64_t PaddingBytes(uint64_t slots) const { return slots * (stride - value_bytes); }
};

/// The record of payload columns of `types` (any types; only fixed-width ones
/// are in the record).
PayloadRecordLayout RecordLayoutOf(std::span<const ColumnType> types);

/// Bytes the CUDA backend stores for `shapes` (a build's payload columns, in its
/// order) for `slots` slots: every column's PayloadStorageBytes plus the
/// records' padding (Backend::PayloadBytes; the PayloadColumnInfo::bytes of a
/// build sum to it, with the retained string bytes).
uint64_t CudaPayloadStorageBytes(uint64_t slots, std::span<const PayloadShape> shapes);

}  // namespace gpujoin::engine::detail
