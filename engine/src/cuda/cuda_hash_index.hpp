// Internal (CUDA builds only): the CUDA backend's hash index, a table of
// key:value slot words in device memory (see cuda/index/table.hpp for the
// layout of each key type).
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "cuda/device_buffer.hpp"
#include "cuda/device_ops.hpp"
#include "gpujoin/engine/hash_index.hpp"

namespace gpujoin::engine::detail {

class CudaHashIndex final : public HashIndex {
 public:
  /// Allocates the table on `device` (cudaMalloc; spec must be valid), slots of
  /// spec.key_type, and marks every slot empty. RESOURCE_EXHAUSTED when it does
  /// not fit.
  static absl::StatusOr<std::unique_ptr<CudaHashIndex>> Create(const HashIndexSpec& spec,
                                                               int device);

  BackendKind backend() const override { return BackendKind::kCuda; }
  uint64_t memory_bytes() const override { return slots_.bytes(); }
  /// Synchronous device-to-host copies; empty slots report value 0 like the CPU
  /// table. FAILED_PRECONDITION for the other key type's call.
  absl::StatusOr<TableSnapshot> Snapshot() const override { return SnapshotOf<uint32_t>(); }
  absl::StatusOr<TableSnapshot64> Snapshot64() const override { return SnapshotOf<uint64_t>(); }

  /// The device table as key word K, which must be key_type()'s (graph
  /// validation checks every node's key word against its index).
  template <KeyWord K = uint32_t>
  DeviceTableT<K> table() const {
    return DeviceTableT<K>{reinterpret_cast<SlotWord<K>*>(slots_.data()), spec().capacity};
  }
  int device() const { return device_; }

 private:
  CudaHashIndex(const HashIndexSpec& spec, int device, DeviceBuffer<uint64_t> slots)
      : HashIndex(spec), device_(device), slots_(std::move(slots)) {}

  template <KeyWord K>
  absl::StatusOr<TableSnapshotOf<K>> SnapshotOf() const;

  int device_;
  DeviceBuffer<uint64_t> slots_;  // TableAllocationBytes(capacity, key type) bytes
};

}  // namespace gpujoin::engine::detail
