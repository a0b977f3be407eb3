#include "cuda/cuda_hash_index.hpp"

#include <cstring>
#include <vector>

#include "cuda/cuda_error.hpp"

namespace gpujoin::engine::detail {

namespace {

// cudaMalloc of `count` elements, once more after trimming the pool on failure.
template <typename T>
absl::StatusOr<DeviceBuffer<T>> PersistentWithTrim(size_t count, int device, const char* what) {
  auto buffer = DeviceBuffer<T>::Persistent(count, what);
  if (!buffer.ok() && absl::IsResourceExhausted(buffer.status())) {
    // Memory cached by the stream-ordered pool is not visible to cudaMalloc:
    // give it back and try once more before refusing.
    cudaMemPool_t pool = nullptr;
    if (cudaDeviceGetDefaultMemPool(&pool, device) == cudaSuccess) {
      (void)cudaMemPoolTrimTo(pool, 0);
    }
    buffer = DeviceBuffer<T>::Persistent(count, what);
  }
  return buffer;
}

}  // namespace

absl::StatusOr<std::unique_ptr<CudaHashIndex>> CudaHashIndex::Create(const HashIndexSpec& spec,
                                                                     int device,
                                                                     uint32_t fingerprint_bits) {
  GPUJOIN_CUDA_RETURN(cudaSetDevice(device), "select device");
  const size_t words = TableAllocationBytes(spec.capacity, spec.key_type) / sizeof(uint64_t);
  auto buffer = PersistentWithTrim<uint64_t>(words, device, "index table");
  if (!buffer.ok()) return buffer.status();
  GPUJOIN_CUDA_RETURN(cudaMemset(buffer->data(), 0xff, buffer->bytes()), "clear index table");
  return std::unique_ptr<CudaHashIndex>(
      new CudaHashIndex(spec, device, fingerprint_bits, std::move(*buffer)));
}

template <typename T>
absl::StatusOr<DeviceBuffer<T>> CudaHashIndex::AllocatePayload(size_t count, int device,
                                                               const char* what) {
  return PersistentWithTrim<T>(count, device, what);
}
template absl::StatusOr<DeviceBuffer<uint8_t>> CudaHashIndex::AllocatePayload(size_t, int,
                                                                              const char*);
template absl::StatusOr<DeviceBuffer<uint64_t>> CudaHashIndex::AllocatePayload(size_t, int,
                                                                               const char*);
template absl::StatusOr<DeviceBuffer<uint32_t>> CudaHashIndex::AllocatePayload(size_t, int,
                                                                               const char*);
template absl::StatusOr<DeviceBuffer<GroupRange>> CudaHashIndex::AllocatePayload(size_t, int,
                                                                                 const char*);
template absl::StatusOr<DeviceBuffer<int64_t>> CudaHashIndex::AllocatePayload(size_t, int,
                                                                              const char*);
template absl::StatusOr<DeviceBuffer<HashView>> CudaHashIndex::AllocatePayload(size_t, int,
                                                                               const char*);

void CudaHashIndex::DropPayload() {
  // cudaFree waits for the work that may still read the columns.
  payload_ = CudaPayload{};
  payload_bytes_.store(0, std::memory_order_relaxed);
  if (!payload().empty()) RecordBuild(build_statistics(), built_rows(), {});
}

void CudaHashIndex::SetPayload(CudaPayload payload) {
  payload_ = std::move(payload);
  uint64_t bytes = 0;
  for (const CudaPayloadColumn& c : payload_.columns) bytes += c.bytes();
  payload_bytes_.store(bytes, std::memory_order_relaxed);
}

void CudaHashIndex::DropGroups() {
  groups_ = CudaGroups{};
  group_bytes_.store(0, std::memory_order_relaxed);
}

void CudaHashIndex::SetGroups(CudaGroups groups) {
  groups_ = std::move(groups);
  group_bytes_.store(groups_.bytes(), std::memory_order_relaxed);
}

void CudaHashIndex::DropKeys() {
  keys_ = CudaKeys{};
  key_bytes_.store(0, std::memory_order_relaxed);
}

void CudaHashIndex::SetKeys(CudaKeys keys) {
  keys_ = std::move(keys);
  key_bytes_.store(keys_.bytes(), std::memory_order_relaxed);
}

std::optional<StoredColumn> CudaHashIndex::payload_column(size_t c) const {
  if (c >= payload_.columns.size()) return std::nullopt;
  const CudaPayloadColumn& column = payload_.columns[c];
  StoredColumn view;
  view.type = column.type;
  if (column.record_offset != kNotInRecord) {
    view.data = payload_.records.data();
    view.stride = payload_.stride;
    view.offset = column.record_offset;
  } else {
    view.data = column.data.data();
    view.offsets = column.offsets.data();
  }
  view.validity = column.validity.size() == 0 ? nullptr : column.validity.data();
  return view;
}

template <KeyWord K>
absl::StatusOr<TableSnapshotOf<K>> CudaHashIndex::SnapshotOf() const {
  if (key_type() != KeyTypeOf<K>()) return SnapshotKeyTypeMismatch(key_type(), KeyTypeOf<K>());
  GPUJOIN_CUDA_RETURN(cudaSetDevice(device_), "select device");
  std::vector<SlotWord<K>> raw(spec().capacity);
  GPUJOIN_CUDA_RETURN(cudaMemcpy(raw.data(), slots_.data(), raw.size() * sizeof(SlotWord<K>),
                                 cudaMemcpyDeviceToHost),
                      "snapshot index table");
  TableSnapshotOf<K> snap;
  snap.keys.resize(raw.size());
  snap.values.resize(raw.size());
  for (size_t i = 0; i < raw.size(); ++i) {
    K key;
    uint32_t value;
    if constexpr (std::is_same_v<K, uint32_t>) {
      key = uint32_t(raw[i] >> 32);
      value = uint32_t(raw[i]);
    } else {
      key = raw[i].key;
      value = uint32_t(raw[i].tag);
    }
    snap.keys[i] = key;
    snap.values[i] = key == kEmptyKeyOf<K> ? 0u : value;
  }
  return snap;
}

template absl::StatusOr<TableSnapshotOf<uint32_t>> CudaHashIndex::SnapshotOf<uint32_t>() const;
template absl::StatusOr<TableSnapshotOf<uint64_t>> CudaHashIndex::SnapshotOf<uint64_t>() const;

}  // namespace gpujoin::engine::detail
