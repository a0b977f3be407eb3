// Typed columns of the gpujoin C++ client: the payload columns a build stores
// beside an index, the gathered columns of lookup and join results, and the
// columns hashed by Hash. Arrow's layout, as on the wire (gpujoin.v1.Column):
// fixed-width values little-endian, booleans and validity as bitmaps (bit i of
// byte i / 8, LSB first; 1 = true / valid), strings as int32 offsets into one
// byte buffer.
//
// Two shapes of one concept: `Column` owns its buffers (results, and payload
// a caller assembles row by row); `ColumnView` borrows them (build and hash
// input, `Column::view()`), optionally starting at a row `offset`.
#pragma once

#include <concepts>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpujoin/common/column_type.hpp"
#include "gpujoin/common/bitmap.hpp"

namespace gpujoin::client {

// The column vocabulary (gpujoin/common/column_type.hpp, bitmap.hpp): the value
// types of typed columns (payload and gathered columns take kUint32 .. kString;
// Hash takes every type), their names, parser and widths, and Arrow bitmaps.
using ::gpujoin::BitAt;
using ::gpujoin::BitmapBytes;
using ::gpujoin::ColumnType;
using ::gpujoin::ColumnTypeName;
using ::gpujoin::ColumnWidth;
using ::gpujoin::FixedWidthValue;
using ::gpujoin::IsHashOnly;
using ::gpujoin::IsVariableWidth;
using ::gpujoin::kColumnTypeOf;
using ::gpujoin::ParseColumnType;
using ::gpujoin::ValueWidth;

/// A borrowed typed column: rows [offset, offset + length) of caller buffers
/// (see "Borrowed memory" in client.hpp). Row r of the view is physical row
/// offset + r of the buffers:
///  - fixed width: `data` holds (offset + length) * width bytes at least;
///  - kBool: `data` is a bitmap of at least offset + length bits;
///  - kBinary, kString: `offsets` holds offset + length + 1 non-decreasing
///    entries (physical row i is data[offsets[i], offsets[i + 1])), the last at
///    most data.size();
///  - `validity`: empty (no nulls) or a bitmap of at least offset + length bits.
/// `name` names a payload column in builds (and is ignored by Hash).
struct ColumnView {
  std::string_view name;
  ColumnType type = ColumnType::kUint32;
  std::span<const uint8_t> data;
  std::span<const int32_t> offsets;
  std::span<const uint8_t> validity;
  uint64_t offset = 0;
  uint64_t length = 0;

  /// Rows [begin, begin + count) of this view (clamped to it), same buffers.
  ColumnView Slice(uint64_t begin, uint64_t count) const;
  /// True when row r is not null.
  bool Valid(uint64_t r) const { return validity.empty() || BitAt(validity, offset + r); }
  /// Null rows among the view's rows.
  uint64_t NullCount() const;
};

/// Checks that `view`'s buffers hold its rows as ColumnView describes
/// (INVALID_ARGUMENT naming `what`, the buffer and both sizes otherwise).
absl::Status CheckColumnView(const ColumnView& view, std::string_view what);

/// A typed column that owns its buffers. Invariants (kept by the Append
/// functions, checked for server data by the client):
///  - fixed width: data.size() == length * width; kBool: data.size() == BitmapBytes(length);
///  - kBinary, kString: offsets empty (only while length == 0) or length + 1
///    entries from 0, non-decreasing, the last == data.size();
///  - validity empty (no nulls) or BitmapBytes(length) bytes, bits past length 0;
///    null_count == the rows whose validity bit is 0.
/// A null row appended by AppendNull holds zero bytes, a false bit or an empty
/// string (as in results); rows appended from a view keep the view's bytes.
struct Column {
  std::string name;
  ColumnType type = ColumnType::kInt64;
  uint64_t length = 0;
  std::vector<uint8_t> data;
  std::vector<int32_t> offsets;
  std::vector<uint8_t> validity;
  uint64_t null_count = 0;

  /// An empty column.
  Column() = default;
  Column(std::string column_name, ColumnType column_type)
      : name(std::move(column_name)), type(column_type) {}

  /// A column of `values`, type kColumnTypeOf<T>, no nulls.
  template <FixedWidthValue T>
  static Column Of(std::string name, std::span<const T> values) {
    Column c(std::move(name), kColumnTypeOf<T>);
    c.length = values.size();
    c.data.resize(values.size_bytes());
    if (!values.empty()) std::memcpy(c.data.data(), values.data(), values.size_bytes());
    return c;
  }
  template <FixedWidthValue T>
  static Column Of(std::string name, const std::vector<T>& values) {
    return Of(std::move(name), std::span<const T>(values));
  }

  /// Appends a null row.
  void AppendNull();
  /// Appends a value of a fixed-width column; T must be the column's element type.
  template <FixedWidthValue T>
  void Append(T value) {
    const size_t at = data.size();
    data.resize(at + sizeof(T));
    std::memcpy(data.data() + at, &value, sizeof(T));
    MarkValid();
  }
  /// Appends a value of a kBool column.
  void AppendBool(bool value);
  /// Appends a value of a kString or kBinary column. A column over 2^31 - 1
  /// bytes cannot be held (int32 offsets): OUT_OF_RANGE naming the column.
  absl::Status AppendString(std::string_view value);
  /// Appends every row of `rows`, which must have this column's type
  /// (INVALID_ARGUMENT naming both types otherwise; OUT_OF_RANGE past 2^31 - 1
  /// string bytes). Reassembles results split over several batches or messages.
  absl::Status AppendRows(const ColumnView& rows);

  /// True when row r is not null.
  bool Valid(uint64_t r) const { return validity.empty() || BitAt(validity, r); }
  /// The value of row r of a fixed-width column (0 for a null row). T must be
  /// the column's element type.
  template <FixedWidthValue T>
  T Value(uint64_t r) const {
    T v;
    std::memcpy(&v, data.data() + r * sizeof(T), sizeof(T));
    return v;
  }
  /// The value of row r of a kBool column (false for a null row).
  bool Bool(uint64_t r) const { return BitAt(data, r); }
  /// The bytes of row r of a kString or kBinary column (empty for a null row).
  std::string_view String(uint64_t r) const {
    return {reinterpret_cast<const char*>(data.data()) + offsets[r],
            static_cast<size_t>(offsets[r + 1] - offsets[r])};
  }

  /// A view of all rows (valid while the column is neither changed nor moved).
  ColumnView view() const;

 private:
  // Adds row `length` as valid (validity and counters); the value is already appended.
  void MarkValid();
};

/// A payload column declared by a build (IndexSpec::payload): its rows arrive in
/// BuildChunk::payload views of this name.
struct PayloadColumnSpec {
  std::string name;  ///< [A-Za-z0-9_.-]{1,128}, unique within the index
  ColumnType type = ColumnType::kInt64;
};

/// A payload column as stored by an index (IndexInfo::payload).
struct PayloadColumnInfo {
  std::string name;
  ColumnType type = ColumnType::kInt64;
  uint64_t null_count = 0;  ///< retained values (one per retained key) that are null
  uint64_t bytes = 0;       ///< device (or host) memory the column occupies
  /// String and binary columns: distinct values of the resident dictionary
  /// (0: none) and the bytes it takes (included in `bytes`).
  uint64_t dictionary_values = 0;
  uint64_t dictionary_bytes = 0;
};

}  // namespace gpujoin::client
