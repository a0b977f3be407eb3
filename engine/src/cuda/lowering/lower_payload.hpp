// Internal (CUDA builds only): the payload parts of the build, lookup and join
// lowerings (lower_build.cpp, lower_lookup.cpp, lower_join.cpp): storing a build's
// payload columns beside its table, and gathering stored columns for the rows
// of a lookup or join, all on the node's stream through the device-level API
// of cuda/payload/payload_ops.hpp. Semantics: docs/engine.md, "Payload".
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cuda/cuda_hash_index.hpp"
#include "cuda/device_buffer.hpp"
#include "cuda/payload/payload_ops.hpp"
#include "cuda/stream_context.hpp"
#include "gpujoin/engine/column.hpp"

namespace gpujoin::engine::detail {

/// Stores `payload` (validated: every column has `rows` rows) beside the table
/// of `index` just built from `source` (its device inputs still alive; `bound` is
/// the build's probe bound), installs the columns in the index and returns their
/// infos for RecordBuild. Uploads each column, finds every slot's winner row,
/// then writes the slot-order columns (strings: a scan, one wait for the
/// retained total, a copy); synchronises. RESOURCE_EXHAUSTED when device memory
/// is short (the index then has no payload).
template <KeyWord K>
absl::StatusOr<std::vector<PayloadColumnInfo>> StorePayload(StreamContext& ctx,
                                                            CudaHashIndex& index,
                                                            const BuildSourceT<K>& source,
                                                            uint32_t bound, uint64_t rows,
                                                            const std::vector<ColumnView>& payload);

/// Stores `payload` (validated: every column has `rows` rows) per position of a
/// kKeepAll index's value list: position p takes the payload of source row
/// rows_of[p] (`positions` of them, every one a source row; the group pass's
/// grouped rows), installs the columns in the index and returns their infos;
/// as StorePayload otherwise (columns of `positions` values instead of slots).
absl::StatusOr<std::vector<PayloadColumnInfo>> StorePayloadAt(
    StreamContext& ctx, CudaHashIndex& index, const uint32_t* rows_of, uint64_t positions,
    uint64_t rows, const std::vector<ColumnView>& payload);

/// The outputs of gathers over no rows (an empty lookup, a join batch with
/// capacity but no pairs): offsets[0] = 0 and no string bytes for strings, a
/// null count of 0.
void WriteEmptyGathers(std::span<const GatherOutput> gather);

/// The device side of one lookup's or join batch's gathers, for `rows` (slots
/// on the device). Start enqueues the first pass; the caller downloads the
/// string totals (TotalRanges) with its own small results in one wait; Finish
/// checks them and enqueues the string copies; Download writes the host outputs.
class DeviceGathers {
 public:
  /// Allocates the device outputs of `gather` (validated against `index`'s
  /// payload) over rows.positions positions and enqueues the fixed-width gathers
  /// and the string scans. INVALID_ARGUMENT naming `where` when the index holds
  /// no such column (a build that failed after validation), RESOURCE_EXHAUSTED
  /// when device memory is short.
  static absl::StatusOr<DeviceGathers> Start(StreamContext& ctx, const CudaHashIndex& index,
                                             std::span<const GatherOutput> gather,
                                             const GatherRows& rows, std::string where);

  /// One 8-byte device range per string gather: its byte total.
  std::vector<DeviceRange> TotalRanges() const;

  /// With the totals of TotalRanges (same order): RESOURCE_EXHAUSTED naming
  /// where, the gather and both numbers when one exceeds its max_string_bytes
  /// (before any output is written); else enqueues the string copies.
  absl::Status Finish(StreamContext& ctx, std::span<const uint64_t> totals);

  /// Writes the first `written` positions of every output (data, validity,
  /// offsets, string bytes, null counts) from the device; synchronises once
  /// where they fit in staging together.
  absl::Status Download(StreamContext& ctx, uint64_t written);

  /// The same in two halves, so that a caller downloads its own outputs in the
  /// same wait: the downloads of every output (sizing the string outputs),
  /// then, once they are done, the null counts published.
  void AppendDownloads(uint64_t written, std::vector<HostPiece>* pieces);
  void Publish();

 private:
  struct One {
    const GatherOutput* out = nullptr;
    StoredColumn column;
    DeviceBuffer<uint8_t> data;        // fixed width, kBool: the values; variable: the bytes
    DeviceBuffer<uint8_t> validity;    // BitmapBytes(positions)
    DeviceBuffer<uint64_t> offsets;    // variable: positions + 1 (the scan)
    DeviceBuffer<uint32_t> offsets32;  // variable: positions + 1 (the output's)
    uint64_t total = 0;                // variable: the bytes, once known
  };

  std::string where_;
  GatherRows rows_;
  std::vector<One> columns_;
  DeviceBuffer<unsigned long long> null_counts_;  // one per gather
  std::vector<unsigned long long> host_null_counts_;  // downloaded by AppendDownloads' pieces
};

}  // namespace gpujoin::engine::detail
