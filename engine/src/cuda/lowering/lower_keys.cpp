#include "cuda/lowering/lower_keys.hpp"

#include <new>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/key_columns.hpp"
#include "cpu/cpu_key_columns.hpp"
#include "cuda/cuda_error.hpp"
#include "cuda/hash/hash_device.hpp"
#include "gpujoin/common/status_macros.hpp"

namespace gpujoin::engine::detail {
namespace {

template <typename T>
absl::StatusOr<DeviceBuffer<T>> Allocate(StreamContext& ctx, size_t n, KeyMemory memory, int device,
                                         const char* what) {
  if (memory == KeyMemory::kIndex) return CudaHashIndex::AllocatePayload<T>(n, device, what);
  return DeviceBuffer<T>::Async(n, ctx.stream(), what);
}

template <typename T>
absl::Status Copy(StreamContext& ctx, T* dst, std::span<const T> src, const char* what) {
  if (src.empty()) return absl::OkStatus();
  const HostRange r{src.data(), src.size_bytes()};
  return ctx.Upload(dst, std::span(&r, 1), what);
}

}  // namespace

absl::StatusOr<UploadedKeys> UploadKeyColumns(StreamContext& ctx,
                                              std::span<const KeyColumns* const> chunks,
                                              const std::vector<ColumnType>& types,
                                              KeyMemory memory, int device) {
  uint64_t rows = 0;
  bool nulls = false;
  std::vector<uint64_t> value_bytes(types.size(), 0);
  for (const KeyColumns* chunk : chunks) {
    rows += chunk->rows();
    for (size_t c = 0; c < types.size(); ++c) {
      value_bytes[c] += KeyValueBytes(chunk->columns[c]);
      nulls = nulls || !chunk->columns[c].validity.empty();
    }
  }
  // One host copy in build-row order (the CPU backend's layout).
  std::optional<cpu::StoredKeys> host;
  try {
    host.emplace(types, rows, nulls, value_bytes);
    for (const KeyColumns* chunk : chunks) host->Append(*chunk);
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError("host staging of the key columns failed to allocate");
  }
  UploadedKeys out;
  out.keys.rows = rows;
  for (size_t c = 0; c < types.size(); ++c) {
    const HashColumn& col = host->view().columns[c];
    const size_t data_bytes = StoredKeyDataBytes(col.data.size());
    GPUJOIN_ASSIGN_OR_RETURN(
        auto data, Allocate<uint8_t>(ctx, data_bytes, memory, device, "key column values"));
    GPUJOIN_CUDA_RETURN(cudaMemsetAsync(data.data(), 0, data_bytes, ctx.stream()),
                        "clear key column values");
    GPUJOIN_RETURN_IF_ERROR(Copy(ctx, data.data(), col.data, "key column values"));
    HashView v = StoredKeyView(types[c], data.data(), nullptr, nullptr);
    out.keys.data.push_back(std::move(data));
    DeviceBuffer<int64_t> offsets;
    if (!col.large_offsets.empty()) {
      GPUJOIN_ASSIGN_OR_RETURN(offsets, Allocate<int64_t>(ctx, col.large_offsets.size(), memory,
                                                          device, "key column offsets"));
      GPUJOIN_RETURN_IF_ERROR(Copy(ctx, offsets.data(), col.large_offsets, "key column offsets"));
      v.large_offsets = offsets.data();
    }
    out.keys.offsets.push_back(std::move(offsets));
    DeviceBuffer<uint8_t> validity;
    if (!col.validity.empty()) {
      GPUJOIN_ASSIGN_OR_RETURN(validity, Allocate<uint8_t>(ctx, col.validity.size(), memory, device,
                                                           "key column validity"));
      GPUJOIN_RETURN_IF_ERROR(Copy(ctx, validity.data(), col.validity, "key column validity"));
      v.validity = validity.data();
    }
    out.keys.validity.push_back(std::move(validity));
    out.host_views.push_back(v);
  }
  GPUJOIN_ASSIGN_OR_RETURN(
      out.keys.views, Allocate<HashView>(ctx, types.size(), memory, device, "key column views"));
  GPUJOIN_RETURN_IF_ERROR(Copy(ctx, out.keys.views.data(),
                               std::span<const HashView>(out.host_views), "key column views"));
  return out;
}

absl::StatusOr<KeyFingerprintBuffers> FingerprintKeys(StreamContext& ctx,
                                                      const UploadedKeys& uploaded,
                                                      const uint32_t* row_validity, uint32_t bits) {
  const uint64_t rows = uploaded.keys.rows;
  KeyFingerprintBuffers out;
  GPUJOIN_ASSIGN_OR_RETURN(out.fingerprints,
                           DeviceBuffer<uint64_t>::Async(rows, ctx.stream(), "key fingerprints"));
  GPUJOIN_ASSIGN_OR_RETURN(out.valid,
                           DeviceBuffer<uint8_t>::Async(rows, ctx.stream(), "key row validity"));
  GPUJOIN_ASSIGN_OR_RETURN(
      auto hash_validity,
      DeviceBuffer<uint8_t>::Async((rows + 7) / 8, ctx.stream(), "key hash validity"));
  if (rows > 0) {
    GPUJOIN_CUDA_RETURN(
        LaunchHashRows<uint64_t>(uploaded.host_views, uploaded.keys.views.data(), rows,
                                 out.fingerprints.data(), hash_validity.data(), ctx.stream()),
        "hash key columns");
    GPUJOIN_CUDA_RETURN(
        FinishFingerprints(out.fingerprints.data(), hash_validity.data(), row_validity, rows, bits,
                           out.valid.data(), ctx.stream()),
        "key fingerprints");
  }
  out.rows = DeviceKeyRows{uploaded.keys.views.data(), uint32_t(uploaded.host_views.size()),
                           out.fingerprints.data(), out.valid.data(), rows};
  return out;
}

}  // namespace gpujoin::engine::detail
