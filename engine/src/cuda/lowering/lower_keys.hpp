// Internal (CUDA builds only): key columns of key-schema nodes on the device.
// A node's key columns (one KeyColumns, or a batch build's chunks of them) are
// laid out once on the host in build-row order (the CPU backend's StoredKeys:
// one copy, strings and binary with int64 offsets), copied to the device, and
// hashed there into fingerprints (LaunchHashRows: the Hash operation's row
// hash, so both backends find the same fingerprints).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "cuda/cuda_hash_index.hpp"
#include "cuda/device_buffer.hpp"
#include "cuda/index/key_rows.hpp"
#include "cuda/stream_context.hpp"
#include "gpujoin/engine/key_columns.hpp"

namespace gpujoin::engine::detail {

/// Where UploadKeyColumns allocates: an index's long-lived memory (cudaMalloc
/// on `device`, for a build's stored keys) or the request's stream-ordered
/// memory (a query's keys).
enum class KeyMemory { kIndex, kRequest };

/// The rows of `chunks` (each of the schema `types`), in order, as device
/// columns (CudaKeys without row values) and their views' host copy.
struct UploadedKeys {
  CudaKeys keys;
  std::vector<HashView> host_views;
};
absl::StatusOr<UploadedKeys> UploadKeyColumns(StreamContext& ctx,
                                              std::span<const KeyColumns* const> chunks,
                                              const std::vector<ColumnType>& types,
                                              KeyMemory memory, int device);

/// The fingerprints and row validity of uploaded key rows (stream-ordered).
struct KeyFingerprintBuffers {
  DeviceBuffer<uint64_t> fingerprints;
  DeviceBuffer<uint8_t> valid;
  DeviceKeyRows rows;  // reads `keys` and the two buffers above
};
/// Hashes the rows of `uploaded` on the device, kept to `bits` bits (64 but in
/// tests), a row valid when no key column is null and `row_validity` (device,
/// optional: one uint32 per row, nonzero = valid) keeps it. Enqueued only.
absl::StatusOr<KeyFingerprintBuffers> FingerprintKeys(StreamContext& ctx,
                                                      const UploadedKeys& uploaded,
                                                      const uint32_t* row_validity, uint32_t bits);

}  // namespace gpujoin::engine::detail
