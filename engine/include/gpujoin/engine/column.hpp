// Typed columns of the engine: the payload columns a build stores beside an
// index, and the gathered columns lookups and joins write. Plain C++ (no CUDA,
// gRPC or protobuf headers), like the rest of the engine's public API.
//
// Layouts follow Arrow's: fixed-width values little-endian, booleans and
// validity as bitmaps (bit i of byte i / 8, LSB first, 1 = true / valid),
// strings as offsets into one byte buffer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "gpujoin/common/bitmap.hpp"
#include "gpujoin/common/column_type.hpp"

namespace gpujoin::engine {

// The column vocabulary (gpujoin/common/column_type.hpp, bitmap.hpp).
using ::gpujoin::BitAt;
using ::gpujoin::BitmapBytes;
using ::gpujoin::ColumnType;
using ::gpujoin::ColumnTypeName;
using ::gpujoin::ColumnWidth;
using ::gpujoin::IsVariableWidth;
using ::gpujoin::ParseColumnType;

/// A host column, borrowed for the duration of the Run that reads it: the
/// payload input of a build. Every payload column of a build has the build's
/// total key rows (BuildIndexNodeT: all key chunks; batch builds: all chunks,
/// masked-out rows included).
struct ColumnView {
  ColumnType type = ColumnType::kInt32;
  uint64_t rows = 0;
  /// Fixed width: rows * ColumnWidth(type) bytes. kBool: a bitmap of `rows` bits
  /// (at least BitmapBytes(rows) bytes). variable width: the value bytes; row i is
  /// data[offsets[i], offsets[i + 1]).
  std::span<const std::byte> data;
  /// Variable width only: rows + 1 non-decreasing offsets, offsets[rows] <= data.size().
  std::span<const uint64_t> offsets;
  /// Empty: no nulls. Else a bitmap of `rows` bits (at least BitmapBytes(rows)
  /// bytes), 0 = null. A null row's value is ignored.
  std::span<const uint8_t> validity;
};

/// What a backend needs to know of a payload column ahead of a build (memory
/// estimates: Backend::PayloadBytes, BuildShape::payload).
struct PayloadShape {
  ColumnType type = ColumnType::kInt32;
  /// The column has a validity bitmap.
  bool nullable = false;
  /// Variable width: value bytes of all rows (an upper bound on what is retained).
  uint64_t string_bytes = 0;

  friend bool operator==(const PayloadShape&, const PayloadShape&) = default;
};

/// The shape of a column (its type, validity and string bytes).
PayloadShape PayloadShapeOf(const ColumnView& column);

/// Bytes a payload column of `shape` occupies when stored for a table of `slots`
/// slots, on either backend (payload is kept in slot order, docs/engine.md
/// "Payload"): fixed width slots * width; kBool BitmapBytes(slots); variable width (slots + 1) * 8 bytes of
/// offsets plus the retained bytes (at most shape.string_bytes, which this
/// counts); plus BitmapBytes(slots) of validity when nullable.
uint64_t PayloadStorageBytes(uint64_t slots, const PayloadShape& shape);

/// A payload column as stored by an index after a build.
struct PayloadColumnInfo {
  ColumnType type = ColumnType::kInt32;
  /// Retained values that are null (one value per retained key).
  uint64_t null_count = 0;
  /// Backend memory the column occupies (values, validity, string offsets and bytes).
  uint64_t bytes = 0;

  friend bool operator==(const PayloadColumnInfo&, const PayloadColumnInfo&) = default;
};

/// Where a lookup or a join writes one gathered payload column. Row r of the
/// output is the payload value of the key matched by output row r (lookup: query
/// row r; join: pair r of the batch), taken from the duplicate winner of the
/// build; it is null where the key is missing or the stored value is null.
/// Outputs have `rows` positions: the lookup's query rows, or the join batch's
/// pair capacity (out_left_rows.size()), of which the first min(count, capacity)
/// are written and the rest left as they were.
struct GatherOutput {
  /// Position of the column in the index's payload (HashIndex::payload()).
  uint32_t column = 0;
  /// Fixed width: rows * width bytes (0 where null). kBool: a bitmap of BitmapBytes(rows)
  /// bytes (0 where null). Variable width: unused (empty).
  std::span<std::byte> data;
  /// Required: BitmapBytes(rows) bytes, 1 = value present. Bits past the
  /// written rows in the last byte are 0.
  std::span<uint8_t> validity;
  /// Variable width only: rows + 1 offsets into *string_bytes, offsets[0] = 0 (Arrow's
  /// int32 string offsets; a null or missing row is empty).
  std::span<uint32_t> offsets;
  /// Variable width only: resized to the written rows' total bytes and filled.
  std::string* string_bytes = nullptr;
  /// Variable width only: a gather whose bytes would exceed this fails with
  /// RESOURCE_EXHAUSTED naming both numbers, before anything is written. At most
  /// 2^31 - 1 (int32 offsets).
  uint64_t max_string_bytes = 0x7fffffff;
  /// Optional host output: written rows with validity 0.
  uint64_t* null_count = nullptr;
};

}  // namespace gpujoin::engine
