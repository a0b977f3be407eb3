// Payload storage and gathers of the CUDA lowerings (lower_payload.hpp).
#include "cuda/lowering/lower_payload.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "cuda/cuda_error.hpp"
#include "cuda/lowering/lowering.hpp"
#include "cuda/payload/record_layout.hpp"
#include "gpujoin/common/status_macros.hpp"

namespace gpujoin::engine::detail {
namespace {

// Uploads `bytes` bytes of host memory at `data` into a new stream-ordered
// device buffer.
absl::StatusOr<DeviceBuffer<uint8_t>> UploadBytes(StreamContext& ctx, const void* data,
                                                  uint64_t bytes, const char* what) {
  GPUJOIN_ASSIGN_OR_RETURN(auto buffer, Alloc<uint8_t>(bytes, ctx, what));
  if (bytes > 0) {
    const HostRange r{data, bytes};
    GPUJOIN_RETURN_IF_ERROR(ctx.Upload(buffer.data(), std::span(&r, 1), what));
  }
  return buffer;
}

// A build's payload column on the device, in source-row order.
struct UploadedColumn {
  DeviceBuffer<uint8_t> data;
  DeviceBuffer<uint64_t> offsets;
  DeviceBuffer<uint8_t> validity;
  SourceColumn view;
  bool nullable = false;  // the column has a validity bitmap (also when it has no rows)
};

absl::StatusOr<UploadedColumn> UploadColumn(StreamContext& ctx, const ColumnView& column,
                                            uint64_t rows) {
  UploadedColumn up;
  up.view.type = column.type;
  if (IsVariableWidth(column.type)) {
    // Only the bytes the rows cover; the kernels rebase offsets by offsets[0].
    const uint64_t first = column.offsets[0];
    GPUJOIN_ASSIGN_OR_RETURN(up.data, UploadBytes(ctx, column.data.data() + first,
                                                  column.offsets[rows] - first, "payload bytes"));
    GPUJOIN_ASSIGN_OR_RETURN(up.offsets, Alloc<uint64_t>(rows + 1, ctx, "payload offsets"));
    const HostRange r{column.offsets.data(), (rows + 1) * sizeof(uint64_t)};
    GPUJOIN_RETURN_IF_ERROR(ctx.Upload(up.offsets.data(), std::span(&r, 1), "payload offsets"));
  } else {
    const uint64_t bytes =
        column.type == ColumnType::kBool ? BitmapBytes(rows) : rows * ColumnWidth(column.type);
    GPUJOIN_ASSIGN_OR_RETURN(up.data,
                             UploadBytes(ctx, column.data.data(), bytes, "payload values"));
  }
  if (!column.validity.empty()) {
    GPUJOIN_ASSIGN_OR_RETURN(up.validity, UploadBytes(ctx, column.validity.data(),
                                                      BitmapBytes(rows), "payload validity"));
  }
  up.view.data = up.data.data();
  up.view.offsets = up.offsets.data();
  up.view.validity = up.validity.data();  // null without rows: nothing to read then
  up.nullable = !column.validity.empty();
  return up;
}

// Writes the slot-order column of `up` for `slots` slots from `winners`: a
// fixed-width column into its place in every record (`records`, `stride` bytes
// apart, at `offset`), the others into buffers of their own.
absl::StatusOr<CudaPayloadColumn> StoreColumn(StreamContext& ctx, const CudaHashIndex& index,
                                              const UploadedColumn& up, const uint32_t* winners,
                                              uint64_t slots, uint8_t* records, uint32_t stride,
                                              uint32_t offset, unsigned long long* null_count) {
  const SourceColumn& source = up.view;
  CudaPayloadColumn out;
  out.type = source.type;
  const int device = index.device();
  if (up.nullable) {
    GPUJOIN_ASSIGN_OR_RETURN(out.validity, CudaHashIndex::AllocatePayload<uint8_t>(
                                               BitmapBytes(slots), device, "payload validity"));
  }
  uint8_t* validity = up.nullable ? out.validity.data() : nullptr;
  if (ColumnWidth(source.type) != 0) {
    out.record_offset = offset;
    out.record_bytes = slots * ColumnWidth(source.type);
    GPUJOIN_CUDA_RETURN(PermuteColumn(source, winners, slots, records + offset, stride, validity,
                                      null_count, ctx.stream()),
                        "store payload column");
    return out;
  }
  if (source.type == ColumnType::kBool) {
    GPUJOIN_ASSIGN_OR_RETURN(
        out.data, CudaHashIndex::AllocatePayload<uint8_t>(BitmapBytes(slots), device, "payload"));
    GPUJOIN_CUDA_RETURN(PermuteColumn(source, winners, slots, out.data.data(), 0, validity,
                                      null_count, ctx.stream()),
                        "store payload column");
    return out;
  }
  GPUJOIN_ASSIGN_OR_RETURN(
      out.offsets, CudaHashIndex::AllocatePayload<uint64_t>(slots + 1, device, "payload offsets"));
  {
    const size_t scratch_bytes = StoredStringScanBytes(slots);
    GPUJOIN_ASSIGN_OR_RETURN(auto scratch,
                             Alloc<uint8_t>(scratch_bytes, ctx, "payload string scan"));
    GPUJOIN_CUDA_RETURN(ScanStoredStrings(source, winners, slots, out.offsets.data(),
                                          scratch.data(), scratch_bytes, ctx.stream()),
                        "scan payload strings");
  }
  // The retained bytes size the column's buffer: one wait.
  uint64_t total = 0;
  GPUJOIN_RETURN_IF_ERROR(
      ctx.Download(&total, out.offsets.data() + slots, sizeof(total), "payload string bytes"));
  GPUJOIN_ASSIGN_OR_RETURN(
      out.data, CudaHashIndex::AllocatePayload<uint8_t>(total, device, "payload string bytes"));
  if (total > 0) {
    GPUJOIN_CUDA_RETURN(CopyStoredStrings(source, winners, slots, out.offsets.data(),
                                          out.data.data(), ctx.stream()),
                        "copy payload strings");
  }
  if (validity != nullptr) {
    GPUJOIN_CUDA_RETURN(
        PermuteColumn(source, winners, slots, nullptr, 0, validity, null_count, ctx.stream()),
        "store payload validity");
  }
  return out;
}

}  // namespace

// The columns of `payload` for `slots` positions, position s holding source
// row winners[s] (kNoWinner: an empty slot), installed in `index`.
absl::StatusOr<std::vector<PayloadColumnInfo>> StorePayloadAt(
    StreamContext& ctx, CudaHashIndex& index, const uint32_t* winners, uint64_t slots,
    uint64_t rows, const std::vector<ColumnView>& payload) {
  std::vector<PayloadColumnInfo> infos;
  if (payload.empty()) return infos;
  GPUJOIN_ASSIGN_OR_RETURN(auto null_counts,
                           Alloc<unsigned long long>(payload.size(), ctx, "payload null counts"));
  GPUJOIN_CUDA_RETURN(cudaMemsetAsync(null_counts.data(), 0, null_counts.bytes(), ctx.stream()),
                      "clear payload null counts");
  std::vector<ColumnType> types;
  for (const ColumnView& column : payload) types.push_back(column.type);
  const PayloadRecordLayout layout = RecordLayoutOf(types);
  CudaPayload stored;
  stored.stride = layout.stride;
  if (layout.stride > 0) {
    GPUJOIN_ASSIGN_OR_RETURN(
        stored.records, CudaHashIndex::AllocatePayload<uint8_t>(layout.RecordBytes(slots),
                                                                index.device(), "payload records"));
    // The padding too, so that every byte a gather's window loads is defined.
    GPUJOIN_CUDA_RETURN(
        cudaMemsetAsync(stored.records.data(), 0, stored.records.bytes(), ctx.stream()),
        "clear payload records");
  }
  stored.columns.reserve(payload.size());
  for (size_t c = 0; c < payload.size(); ++c) {
    // Each column's upload is freed (stream-ordered) before the next one's.
    GPUJOIN_ASSIGN_OR_RETURN(UploadedColumn up, UploadColumn(ctx, payload[c], rows));
    GPUJOIN_ASSIGN_OR_RETURN(CudaPayloadColumn column,
                             StoreColumn(ctx, index, up, winners, slots, stored.records.data(),
                                         layout.stride, layout.offsets[c], null_counts.data() + c));
    if (c == layout.padded_column) column.record_bytes += layout.PaddingBytes(slots);
    stored.columns.push_back(std::move(column));
  }
  std::vector<unsigned long long> nulls(payload.size());
  GPUJOIN_RETURN_IF_ERROR(
      ctx.Download(nulls.data(), null_counts.data(), null_counts.bytes(), "payload null counts"));
  for (size_t c = 0; c < stored.columns.size(); ++c) {
    infos.push_back(PayloadColumnInfo{stored.columns[c].type, nulls[c], stored.columns[c].bytes()});
  }
  index.SetPayload(std::move(stored));
  return infos;
}

template <KeyWord K>
absl::StatusOr<std::vector<PayloadColumnInfo>> StorePayload(
    StreamContext& ctx, CudaHashIndex& index, const BuildSourceT<K>& source, uint32_t bound,
    uint64_t rows, const std::vector<ColumnView>& payload) {
  if (payload.empty()) return std::vector<PayloadColumnInfo>{};
  const uint64_t slots = TableAllocationSlots(index.spec().capacity);
  GPUJOIN_ASSIGN_OR_RETURN(auto winners, Alloc<uint32_t>(slots, ctx, "payload winners"));
  GPUJOIN_CUDA_RETURN(
      FindPayloadWinners(index.table<K>(), source, bound, winners.data(), ctx.stream()),
      "find payload winners");
  return StorePayloadAt(ctx, index, winners.data(), slots, rows, payload);
}

template absl::StatusOr<std::vector<PayloadColumnInfo>> StorePayload(
    StreamContext&, CudaHashIndex&, const BuildSourceT<uint32_t>&, uint32_t, uint64_t,
    const std::vector<ColumnView>&);
template absl::StatusOr<std::vector<PayloadColumnInfo>> StorePayload(
    StreamContext&, CudaHashIndex&, const BuildSourceT<uint64_t>&, uint32_t, uint64_t,
    const std::vector<ColumnView>&);

void WriteEmptyGathers(std::span<const GatherOutput> gather) {
  for (const GatherOutput& out : gather) {
    if (!out.offsets.empty()) out.offsets[0] = 0;
    if (out.string_bytes != nullptr) out.string_bytes->clear();
    if (out.null_count != nullptr) *out.null_count = 0;
  }
}

absl::StatusOr<DeviceGathers> DeviceGathers::Start(StreamContext& ctx, const CudaHashIndex& index,
                                                   std::span<const GatherOutput> gather,
                                                   const GatherRows& rows, std::string where) {
  DeviceGathers g;
  g.where_ = std::move(where);
  g.rows_ = rows;
  const uint64_t positions = rows.positions;
  GPUJOIN_ASSIGN_OR_RETURN(g.null_counts_,
                           Alloc<unsigned long long>(gather.size(), ctx, "gather null counts"));
  GPUJOIN_CUDA_RETURN(
      cudaMemsetAsync(g.null_counts_.data(), 0, g.null_counts_.bytes(), ctx.stream()),
      "clear gather null counts");
  g.columns_.resize(gather.size());
  // The fixed-width gathers run together after the loop: one read of each
  // row's record for all of them.
  std::vector<FixedGather> fixed;
  for (size_t k = 0; k < gather.size(); ++k) {
    One& one = g.columns_[k];
    one.out = &gather[k];
    const std::optional<StoredColumn> stored = index.payload_column(gather[k].column);
    if (!stored.has_value()) {
      return absl::InvalidArgumentError(
          absl::StrCat(g.where_, ": gather[", k, "] asks for payload column ", gather[k].column,
                       " but the index holds ", index.payload().size()));
    }
    one.column = *stored;
    GPUJOIN_ASSIGN_OR_RETURN(one.validity,
                             Alloc<uint8_t>(BitmapBytes(positions), ctx, "gather validity"));
    unsigned long long* null_count = g.null_counts_.data() + k;
    if (ColumnWidth(one.column.type) != 0) {
      GPUJOIN_ASSIGN_OR_RETURN(
          one.data, Alloc<uint8_t>(positions * ColumnWidth(one.column.type), ctx, "gather values"));
      fixed.push_back(FixedGather{one.column, one.data.data(), one.validity.data(), null_count});
      continue;
    }
    if (one.column.type == ColumnType::kBool) {
      GPUJOIN_ASSIGN_OR_RETURN(one.data,
                               Alloc<uint8_t>(BitmapBytes(positions), ctx, "gather values"));
      GPUJOIN_CUDA_RETURN(GatherColumn(one.column, rows, one.data.data(), one.validity.data(),
                                       null_count, ctx.stream()),
                          absl::StrCat(g.where_, ": gather"));
      continue;
    }
    GPUJOIN_ASSIGN_OR_RETURN(one.offsets,
                             Alloc<uint64_t>(positions + 1, ctx, "gather string offsets"));
    const size_t scratch_bytes = GatheredStringScanBytes(positions);
    GPUJOIN_ASSIGN_OR_RETURN(auto scratch,
                             Alloc<uint8_t>(scratch_bytes, ctx, "gather string scan"));
    GPUJOIN_CUDA_RETURN(ScanGatheredStrings(one.column, rows, one.offsets.data(), scratch.data(),
                                            scratch_bytes, ctx.stream()),
                        absl::StrCat(g.where_, ": scan gathered strings"));
  }
  GPUJOIN_CUDA_RETURN(GatherFixedColumns(fixed, rows, ctx.stream()),
                      absl::StrCat(g.where_, ": gather"));
  return g;
}

std::vector<DeviceRange> DeviceGathers::TotalRanges() const {
  std::vector<DeviceRange> ranges;
  for (const One& one : columns_) {
    if (IsVariableWidth(one.column.type)) {
      ranges.push_back({one.offsets.data() + rows_.positions, sizeof(uint64_t)});
    }
  }
  return ranges;
}

absl::Status DeviceGathers::Finish(StreamContext& ctx, std::span<const uint64_t> totals) {
  // Every limit first, so that a refused gather writes nothing.
  size_t t = 0;
  for (size_t k = 0; k < columns_.size(); ++k) {
    One& one = columns_[k];
    if (!IsVariableWidth(one.column.type)) continue;
    one.total = totals[t++];
    if (one.total > one.out->max_string_bytes) {
      return absl::ResourceExhaustedError(
          absl::StrCat(where_, ": gather[", k, "] (column ", one.out->column, ", ",
                       std::string(ColumnTypeName(one.column.type)), ") selects ", one.total,
                       " value bytes, more than max_string_bytes ", one.out->max_string_bytes));
    }
  }
  for (size_t k = 0; k < columns_.size(); ++k) {
    One& one = columns_[k];
    if (!IsVariableWidth(one.column.type)) continue;
    GPUJOIN_ASSIGN_OR_RETURN(one.data, Alloc<uint8_t>(one.total, ctx, "gather string bytes"));
    GPUJOIN_ASSIGN_OR_RETURN(one.offsets32,
                             Alloc<uint32_t>(rows_.positions + 1, ctx, "gather string offsets"));
    GPUJOIN_CUDA_RETURN(
        CopyGatheredStrings(one.column, rows_, one.offsets.data(), one.offsets32.data(),
                            one.data.data(), one.validity.data(), null_counts_.data() + k,
                            ctx.stream()),
        absl::StrCat(where_, ": copy gathered strings"));
  }
  return absl::OkStatus();
}

absl::Status DeviceGathers::Download(StreamContext& ctx, uint64_t written) {
  std::vector<HostPiece> pieces;
  AppendDownloads(written, &pieces);
  GPUJOIN_RETURN_IF_ERROR(ctx.DownloadAll(pieces, "gather"));
  Publish();
  return absl::OkStatus();
}

void DeviceGathers::AppendDownloads(uint64_t written, std::vector<HostPiece>* pieces) {
  host_null_counts_.assign(columns_.size(), 0);
  pieces->push_back({host_null_counts_.data(), null_counts_.data(), null_counts_.bytes()});
  for (One& one : columns_) {
    const GatherOutput& out = *one.out;
    pieces->push_back({out.validity.data(), one.validity.data(), BitmapBytes(written)});
    if (IsVariableWidth(one.column.type)) {
      pieces->push_back(
          {out.offsets.data(), one.offsets32.data(), (written + 1) * sizeof(uint32_t)});
      out.string_bytes->resize(one.total);
      pieces->push_back({out.string_bytes->data(), one.data.data(), one.total});
    } else {
      const uint64_t bytes = one.column.type == ColumnType::kBool
                                 ? BitmapBytes(written)
                                 : written * ColumnWidth(one.column.type);
      pieces->push_back({out.data.data(), one.data.data(), bytes});
    }
  }
}

void DeviceGathers::Publish() {
  for (size_t k = 0; k < columns_.size(); ++k) {
    if (columns_[k].out->null_count != nullptr) {
      *columns_[k].out->null_count = host_null_counts_[k];
    }
  }
}

}  // namespace gpujoin::engine::detail
