// Internal (CUDA builds only): the CUDA backend's hash index, a table of packed
// key:value slots in device memory (see device_ops.hpp for the layout).
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "cuda/device_buffer.hpp"
#include "cuda/device_ops.hpp"
#include "gpujoin/engine/hash_index.hpp"

namespace gpujoin::engine::detail {

class CudaHashIndex final : public HashIndex {
 public:
  /// Allocates the table on `device` (cudaMalloc; spec must be valid) and marks
  /// every slot empty. RESOURCE_EXHAUSTED when it does not fit.
  static absl::StatusOr<std::unique_ptr<CudaHashIndex>> Create(const HashIndexSpec& spec,
                                                               int device);

  BackendKind backend() const override { return BackendKind::kCuda; }
  uint64_t memory_bytes() const override { return slots_.bytes(); }
  /// Synchronous device-to-host copy; empty slots report value 0 like the CPU table.
  absl::StatusOr<TableSnapshot> Snapshot() const override;
  absl::StatusOr<TableSnapshot64> Snapshot64() const override {
    return SnapshotKeyTypeMismatch(key_type(), KeyType::kU64);
  }

  DeviceTable table() const { return DeviceTable{slots_.data(), spec().capacity}; }
  int device() const { return device_; }

 private:
  CudaHashIndex(const HashIndexSpec& spec, int device, DeviceBuffer<uint64_t> slots)
      : HashIndex(spec), device_(device), slots_(std::move(slots)) {}

  int device_;
  DeviceBuffer<uint64_t> slots_;
};

}  // namespace gpujoin::engine::detail
