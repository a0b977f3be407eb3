// A backend-neutral host copy of a built index (Backend::ExportIndex /
// ImportIndex): what a snapshot on disk holds, and what moves an index between
// the CPU and CUDA backends. Plain C++, like the rest of the engine's public API.
//
// The layout is canonical, the same whichever backend exported it
// (docs/engine.md, "Index images"):
//  - the table as two arrays of `capacity` entries, slot order: keys (the key
//    word of spec.key_type; kEmptyKeyOf<K> for an empty slot) and values (uint32;
//    0 for an empty slot). Both backends keep the same Robin Hood slot order, so
//    without overflow an image depends only on the build's input;
//  - kKeepAll only: per slot its group (start, size) into the value list, and the
//    value list itself (the kept rows' values, group after group);
//  - payload columns in the build's order, one value per position: per slot for
//    kLowestRow (capacity positions), per kept row in value-list order for
//    kKeepAll. Arrow layouts: fixed width positions * width bytes, kBool a
//    bitmap, variable width positions + 1 uint64 offsets and the bytes; an
//    optional validity bitmap. Null and empty positions hold zero bytes, a 0 bit
//    and an empty string; bitmap bits past the last position are 0.
//  - a key schema's (KeyType::kColumns) table holds per slot its fingerprint
//    (uint64; 0 for an empty slot) and its build row (kNoRow for an empty slot),
//    a kKeepAll value list holds build rows; beside them the build's key columns
//    (every build row, in PayloadImage's layout) and the value of every build row.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gpujoin/engine/column.hpp"
#include "gpujoin/engine/hash_index.hpp"
#include "gpujoin/engine/types.hpp"

namespace gpujoin::engine {

/// Bytes allocated without initialisation (the exporter or the snapshot reader
/// writes every byte). Move-only. Allocation failure throws std::bad_alloc.
class ImageBuffer {
 public:
  ImageBuffer() = default;
  explicit ImageBuffer(size_t bytes)
      : data_(bytes == 0 ? nullptr : new std::byte[bytes]), size_(bytes) {}

  std::byte* data() { return data_.get(); }
  const std::byte* data() const { return data_.get(); }
  size_t size() const { return size_; }
  /// The bytes as an array of T (size() must be a multiple of sizeof(T)).
  template <class T>
  std::span<T> as() {
    return {reinterpret_cast<T*>(data_.get()), size_ / sizeof(T)};
  }
  template <class T>
  std::span<const T> as() const {
    return {reinterpret_cast<const T*>(data_.get()), size_ / sizeof(T)};
  }
  bool operator==(const ImageBuffer& other) const {
    return size_ == other.size_ && (size_ == 0 || std::memcmp(data(), other.data(), size_) == 0);
  }

 private:
  std::unique_ptr<std::byte[]> data_;
  size_t size_ = 0;
};

/// One payload column of an image.
struct PayloadImage {
  ColumnType type = ColumnType::kInt32;
  /// The column has a validity bitmap.
  bool nullable = false;
  /// Stored positions that are null (PayloadColumnInfo::null_count).
  uint64_t null_count = 0;
  /// Fixed width: positions * width bytes; kBool: BitmapBytes(positions);
  /// variable width: the stored bytes (offsets[positions] of them).
  ImageBuffer data;
  /// Variable width: positions + 1 uint64 offsets, offsets[0] = 0; else empty.
  ImageBuffer offsets;
  /// nullable: BitmapBytes(positions); else empty.
  ImageBuffer validity;
};

/// The sizes of an image, known before its arrays are read (a snapshot's header):
/// enough to size the memory an import takes (ImportedIndexBytes).
struct IndexImageShape {
  HashIndexSpec spec;
  /// kKeepAll: entries of the value list (kept rows); 0 for kLowestRow.
  uint64_t kept_rows = 0;
  /// The payload columns, string_bytes = the stored bytes of a variable-width one.
  std::vector<PayloadShape> payload;
  /// kColumns: the build rows whose keys are stored, and the key columns
  /// (string_bytes = a string column's stored bytes). Else 0 and empty.
  uint64_t key_rows = 0;
  std::vector<PayloadShape> key_columns;

  /// Positions of every payload column: kept_rows for kKeepAll, else capacity.
  uint64_t positions() const {
    return spec.duplicates == DuplicatePolicy::kKeepAll ? kept_rows : spec.capacity;
  }
};

/// A built index on the host (see the file comment for the layout).
struct IndexImage {
  HashIndexSpec spec;
  BuildStatistics statistics;
  /// HashIndex::built_rows() and built().
  uint64_t built_rows = 0;
  bool built = false;
  /// capacity * KeyBytes(spec.key_type) bytes (kColumns: fingerprints).
  ImageBuffer keys;
  /// capacity uint32 values.
  ImageBuffer values;
  /// kKeepAll: capacity (start, size) uint32 pairs; else empty.
  ImageBuffer group_ranges;
  /// kKeepAll: kept-rows uint32 values; else empty.
  ImageBuffer group_values;
  std::vector<PayloadImage> payload;
  /// kColumns: one column per key column, key_rows positions (every build row);
  /// else empty.
  std::vector<PayloadImage> key_columns;
  /// kColumns: key_rows uint32 values, the value of each build row; else empty.
  ImageBuffer row_values;

  /// The sizes of this image.
  IndexImageShape shape() const;
  /// Bytes of its arrays.
  uint64_t bytes() const;
  /// OK when every array has the size its spec and shape call for, the groups
  /// lie inside the value list, string offsets are non-decreasing and end at
  /// their bytes; else INVALID_ARGUMENT naming the array and both sizes. Import
  /// checks it before allocating anything.
  absl::Status Validate() const;
};

/// Bytes of a key schema's stored keys in an image of `shape`: its key columns
/// (key_rows positions each, in PayloadImage's layout) and its row values (4
/// bytes a key row); 0 for a key word. An imported index holds them in this
/// layout: ImportedIndexBytes counts them.
uint64_t KeyStorageBytes(const IndexImageShape& shape);

/// Allocates the arrays of an image of `shape` (uninitialised; std::bad_alloc),
/// for a reader that fills them.
IndexImage AllocateImage(const IndexImageShape& shape);

/// The first difference between two images ("" when equal), for test messages:
/// "keys differ at slot 17", "payload 1 (string) offsets differ at position 3", ...
/// `ignore_total_probes`: skip statistics.total_probes (it may differ between
/// backends when keys repeat: docs/engine.md).
std::string ImageDifference(const IndexImage& a, const IndexImage& b,
                            bool ignore_total_probes = false);

}  // namespace gpujoin::engine
