// Internal (CUDA builds only): the CUDA backend's hash index, a table of
// key:value slot words in device memory (see cuda/index/table.hpp for the
// layout of each key type), the payload columns of its last build, stored
// in slot order beside it (cuda/payload/payload_ops.hpp), and for a kKeepAll
// index the groups of its last build (cuda/index/groups.hpp), whose payload is
// stored per kept row in value-list order instead.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "cuda/device_buffer.hpp"
#include "cuda/device_ops.hpp"
#include "cuda/index/groups.hpp"
#include "cuda/index/key_rows.hpp"
#include "cuda/payload/payload_ops.hpp"
#include "cuda/payload/record_layout.hpp"
#include "gpujoin/engine/hash_index.hpp"

namespace gpujoin::engine::detail {

/// One payload column of a CUDA index in device memory (cudaMalloc), in slot
/// order for TableAllocationSlots(capacity) slots. A fixed-width column's values
/// live in the index's records (record_layout.hpp), of which it is charged its
/// slots * width bytes (the layout's padded column also the records' padding);
/// its other buffers take PayloadStorageBytes(slots, its shape with the retained
/// string bytes).
struct CudaPayloadColumn {
  ColumnType type = ColumnType::kInt32;
  /// kBool: BitmapBytes(slots); variable width: the retained bytes; fixed width:
  /// empty (the values are in the records).
  DeviceBuffer<uint8_t> data;
  /// Variable width: slots + 1 offsets into data; else empty.
  DeviceBuffer<uint64_t> offsets;
  /// BitmapBytes(slots) when the build's column had a validity bitmap, else empty.
  DeviceBuffer<uint8_t> validity;
  /// Fixed width: the value's byte offset in a record; else kNotInRecord.
  uint32_t record_offset = kNotInRecord;
  /// Fixed width: the bytes of the records this column is charged.
  uint64_t record_bytes = 0;

  uint64_t bytes() const {
    return data.bytes() + offsets.bytes() + validity.bytes() + record_bytes;
  }
};

/// The groups of a kKeepAll build (cudaMalloc): one range per slot of the
/// capacity and the value list of the kept rows (GroupStorageBytes of them).
struct CudaGroups {
  DeviceBuffer<GroupRange> ranges;
  DeviceBuffer<uint32_t> values;

  uint64_t bytes() const { return ranges.bytes() + values.bytes(); }
};

/// The payload of a build: its columns in the build's order and the records of
/// its fixed-width ones (slots * stride bytes; empty without fixed-width columns;
/// for a kKeepAll index, kept rows instead of slots).
struct CudaPayload {
  std::vector<CudaPayloadColumn> columns;
  DeviceBuffer<uint8_t> records;
  uint32_t stride = 0;
};

/// The key columns of a key-schema index's last build (cudaMalloc, read by
/// cuda/index/key_rows.hpp's probes): every build row in build-row order
/// (invalid rows included), strings and binary with int64 offsets, validity
/// where the build had nulls; a device copy of their views; and the value of
/// every build row.
struct CudaKeys {
  std::vector<DeviceBuffer<uint8_t>> data;
  std::vector<DeviceBuffer<int64_t>> offsets;
  std::vector<DeviceBuffer<uint8_t>> validity;
  DeviceBuffer<HashView> views;
  DeviceBuffer<uint32_t> row_values;
  uint64_t rows = 0;

  uint64_t bytes() const {
    uint64_t b = views.bytes() + row_values.bytes();
    for (const auto& d : data) b += d.bytes();
    for (const auto& o : offsets) b += o.bytes();
    for (const auto& v : validity) b += v.bytes();
    return b;
  }
};

class CudaHashIndex final : public HashIndex {
 public:
  /// Allocates the table on `device` (cudaMalloc; spec must be valid), slots of
  /// spec.key_type, and marks every slot empty. RESOURCE_EXHAUSTED when it does
  /// not fit. `fingerprint_bits`: a key schema's fingerprint width
  /// (BackendOptions::key_fingerprint_bits; 64 but in tests).
  static absl::StatusOr<std::unique_ptr<CudaHashIndex>> Create(const HashIndexSpec& spec,
                                                               int device,
                                                               uint32_t fingerprint_bits = 64);

  BackendKind backend() const override { return BackendKind::kCuda; }
  uint64_t memory_bytes() const override {
    return slots_.bytes() + payload_bytes_.load(std::memory_order_relaxed) +
           group_bytes_.load(std::memory_order_relaxed) +
           key_bytes_.load(std::memory_order_relaxed);
  }
  /// Synchronous device-to-host copies; empty slots report value 0 like the CPU
  /// table. FAILED_PRECONDITION for the other key type's call.
  absl::StatusOr<TableSnapshot> Snapshot() const override { return SnapshotOf<uint32_t>(); }
  absl::StatusOr<TableSnapshot64> Snapshot64() const override { return SnapshotOf<uint64_t>(); }

  /// The device table as key kind K, which must be key_type()'s (graph
  /// validation checks every node's key kind against its index).
  template <IndexKey K = uint32_t>
  DeviceTableT<K> table() const {
    return DeviceTableT<K>{reinterpret_cast<SlotWord<K>*>(slots_.data()), spec().capacity};
  }
  int device() const { return device_; }
  /// Key schemas: the bits of a fingerprint kept (64 but in tests).
  uint32_t fingerprint_bits() const { return fingerprint_bits_; }

  /// Device memory of `count` elements of T for the payload of this index
  /// (cudaMalloc, synchronous; builds only). When the device is short it gives
  /// the stream-ordered pool's cached memory back and tries once more;
  /// RESOURCE_EXHAUSTED naming `what` if that fails too.
  template <typename T>
  static absl::StatusOr<DeviceBuffer<T>> AllocatePayload(size_t count, int device,
                                                         const char* what);

  /// Frees the payload of the last build and forgets its columns (payload()
  /// becomes empty; the build statistics stay): a build calls it first, so a
  /// failed build leaves no payload behind.
  void DropPayload();
  /// Installs the payload of a finished build (infos go to RecordBuild).
  void SetPayload(CudaPayload payload);
  /// Stored column `c` of the last build as the gather kernels read it, or
  /// nullopt when there is none.
  std::optional<StoredColumn> payload_column(size_t c) const;

  /// Whether the index keeps every row (DuplicatePolicy::kKeepAll).
  bool keeps_all() const { return spec().duplicates == DuplicatePolicy::kKeepAll; }
  /// The groups of the last kKeepAll build (null pointers for a kLowestRow
  /// index, and for a kKeepAll index whose table is empty because no build
  /// finished: no probe finds a slot then).
  DeviceGroups groups() const { return {groups_.ranges.data(), groups_.values.data()}; }
  /// Frees the groups (a kKeepAll build calls it before it changes the table,
  /// and leaves the table empty if it cannot finish).
  void DropGroups();
  /// Installs the groups of a finished kKeepAll build.
  void SetGroups(CudaGroups groups);

  /// Frees the key columns of the last build (a key-schema build calls it
  /// first, so a failed build leaves none).
  void DropKeys();
  /// Installs the key columns of a finished key-schema build.
  void SetKeys(CudaKeys keys);
  /// What probes of a key-schema index read besides the table (null views
  /// before the first build: its table is empty, so no probe reads them).
  StoredKeyRows stored_keys() const {
    return StoredKeyRows{keys_.views.data(), uint32_t(spec().key_columns.size()),
                         keys_.row_values.data()};
  }
  const CudaKeys& keys() const { return keys_; }

  /// The stored payload and groups of the last build, for index export
  /// (cuda_index_image.cpp).
  const CudaPayload& stored_payload() const { return payload_; }
  const CudaGroups& stored_groups() const { return groups_; }

 private:
  CudaHashIndex(const HashIndexSpec& spec, int device, uint32_t fingerprint_bits,
                DeviceBuffer<uint64_t> slots)
      : HashIndex(spec),
        device_(device),
        fingerprint_bits_(fingerprint_bits),
        slots_(std::move(slots)) {}

  template <KeyWord K>
  absl::StatusOr<TableSnapshotOf<K>> SnapshotOf() const;

  int device_;
  uint32_t fingerprint_bits_;
  DeviceBuffer<uint64_t> slots_;  // TableAllocationBytes(capacity, key type) bytes
  CudaPayload payload_;
  CudaGroups groups_;
  CudaKeys keys_;
  // Sum of payload_'s column bytes, readable while another thread reads memory_bytes().
  std::atomic<uint64_t> payload_bytes_{0};
  // groups_.bytes(), likewise.
  std::atomic<uint64_t> group_bytes_{0};
  // keys_.bytes(), likewise.
  std::atomic<uint64_t> key_bytes_{0};
};

}  // namespace gpujoin::engine::detail
