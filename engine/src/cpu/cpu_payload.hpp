// Payload columns on the CPU backend: how an index stores them (in slot order,
// docs/engine.md "Payload") and the one gather that both storing (source row ->
// slot) and querying (slot -> output row) use. The gather is generic over the
// value layout: fixed width of 4 or 8 bytes, bitmaps (bool) and offsets + bytes
// (binary, string), each with an optional validity bitmap.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "cpu/thread_pool.hpp"
#include "gpujoin/engine/column.hpp"

namespace gpujoin::engine::cpu {

/// A row-map entry that selects no source row: the output position is null (an
/// empty slot when storing, a missing key when gathering).
inline constexpr uint32_t kNoRow = 0xffffffffu;

/// A host array of a trivial type allocated without initialisation (its users
/// write every element before reading it). Allocation failure throws std::bad_alloc.
template <class T>
class HostArray {
 public:
  HostArray() = default;
  explicit HostArray(size_t n) : data_(n == 0 ? nullptr : new T[n]), size_(n) {}

  T* data() { return data_.get(); }
  const T* data() const { return data_.get(); }
  size_t size() const { return size_; }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }
  std::span<T> span() { return {data_.get(), size_}; }
  std::span<const T> span() const { return {data_.get(), size_}; }

 private:
  std::unique_ptr<T[]> data_;
  size_t size_ = 0;
};

/// One payload column as an index stores it: position s holds the value of the
/// winner row of slot s (null for an empty slot).
struct StoredColumn {
  ColumnType type = ColumnType::kInt32;
  /// Positions: the table's slots.
  uint64_t slots = 0;
  /// Fixed width: slots * width bytes; kBool: BitmapBytes(slots); variable width:
  /// the retained value bytes.
  HostArray<std::byte> data;
  /// Variable width: slots + 1 offsets into data; else empty.
  HostArray<uint64_t> offsets;
  /// BitmapBytes(slots) when the build's column had a validity bitmap, else empty.
  HostArray<uint8_t> validity;
  /// Occupied slots whose value is null.
  uint64_t null_count = 0;

  /// The stored column as a column of `slots` rows.
  ColumnView View() const;
  /// Bytes the column holds: PayloadStorageBytes(slots, its shape with the
  /// retained bytes).
  uint64_t bytes() const;
  PayloadColumnInfo Info() const { return {type, null_count, bytes()}; }
};

/// A stored column for `source` in a table of `slots` slots with everything whose
/// size `slots` fixes allocated (not the variable-width bytes, which StoreColumn
/// sizes). Throws std::bad_alloc.
StoredColumn AllocateStored(const ColumnView& source, uint64_t slots);

/// Fills `stored` (from AllocateStored) with the rows of `source` that
/// `winners` selects: slot s gets row winners[s], or null for kNoRow. Allocates
/// the variable-width bytes (std::bad_alloc).
void StoreColumn(const ColumnView& source, std::span<const uint32_t> winners, StoredColumn& stored,
                 ThreadPool& pool);

/// Writes `outputs` (validated by CommandGraph::Validate against `payload`) for
/// output positions 0 .. slots.size() - 1, where position i matched slot
/// slots[i] (kNoRow: missing). Every string output's byte total is checked
/// against its max_string_bytes before any output is written: RESOURCE_EXHAUSTED
/// naming `where`, the output and both numbers.
absl::Status GatherColumns(const std::vector<StoredColumn>& payload,
                           std::span<const GatherOutput> outputs, std::span<const uint32_t> slots,
                           ThreadPool& pool, std::string_view where);

}  // namespace gpujoin::engine::cpu
