#include "cuda/cuda_hash_index.hpp"

#include <vector>

#include "cuda/cuda_error.hpp"

namespace gpujoin::engine::detail {

absl::StatusOr<std::unique_ptr<CudaHashIndex>> CudaHashIndex::Create(const HashIndexSpec& spec,
                                                                     int device) {
  GPUJOIN_CUDA_RETURN(cudaSetDevice(device), "select device");
  const size_t slots = TableAllocationSlots(spec.capacity);
  auto buffer = DeviceBuffer<uint64_t>::Persistent(slots, "index table");
  if (!buffer.ok() && absl::IsResourceExhausted(buffer.status())) {
    // Memory cached by the stream-ordered pool is not visible to cudaMalloc:
    // give it back and try once more before refusing.
    cudaMemPool_t pool = nullptr;
    if (cudaDeviceGetDefaultMemPool(&pool, device) == cudaSuccess) {
      (void)cudaMemPoolTrimTo(pool, 0);
    }
    buffer = DeviceBuffer<uint64_t>::Persistent(slots, "index table");
  }
  if (!buffer.ok()) return buffer.status();
  GPUJOIN_CUDA_RETURN(cudaMemset(buffer->data(), 0xff, buffer->bytes()), "clear index table");
  return std::unique_ptr<CudaHashIndex>(new CudaHashIndex(spec, device, std::move(*buffer)));
}

absl::StatusOr<TableSnapshot> CudaHashIndex::Snapshot() const {
  GPUJOIN_CUDA_RETURN(cudaSetDevice(device_), "select device");
  std::vector<uint64_t> raw(spec().capacity);
  GPUJOIN_CUDA_RETURN(
      cudaMemcpy(raw.data(), slots_.data(), raw.size() * sizeof(uint64_t), cudaMemcpyDeviceToHost),
      "snapshot index table");
  TableSnapshot snap;
  snap.keys.resize(raw.size());
  snap.values.resize(raw.size());
  for (size_t i = 0; i < raw.size(); ++i) {
    const uint32_t key = uint32_t(raw[i] >> 32);
    snap.keys[i] = key;
    snap.values[i] = key == kEmptyKey ? 0u : uint32_t(raw[i]);
  }
  return snap;
}

}  // namespace gpujoin::engine::detail
