// Columns of the Hash RPC: every type the service hashes, nested and
// dictionary ones included, in Arrow's physical layout (docs/api.md "Nested and
// dictionary columns"). `HashColumn` borrows caller buffers, as ColumnView does;
// `HashColumnBuilder` owns them and builds a column tree row by row.
//
// Arrow's rules apply: every node has its own offset and length; a struct's
// field rows are the struct's physical rows (field row offset + r for struct row
// r), list and map offsets index their children's logical rows, a fixed-size
// list's row r spans children[0] rows [(offset + r) * size, (offset + r + 1) *
// size), and dictionary indices index the dictionary's logical rows.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "gpujoin/client/column.hpp"

namespace gpujoin::client {

// Bytes per value of a fixed-width Hash type: ValueWidth (gpujoin/common/column_type.hpp).

/// kLargeBinary, kLargeString, kLargeList: int64 offsets (HashColumn::large_offsets).
constexpr bool HasLargeOffsets(ColumnType type) {
  return type == ColumnType::kLargeBinary || type == ColumnType::kLargeString ||
         type == ColumnType::kLargeList;
}

/// kStruct, the lists, kMap and kDictionary: columns with children.
constexpr bool HasChildren(ColumnType type) {
  return type == ColumnType::kStruct || type == ColumnType::kList ||
         type == ColumnType::kLargeList || type == ColumnType::kFixedSizeList ||
         type == ColumnType::kMap || type == ColumnType::kDictionary;
}

/// The deepest HashColumn tree the service hashes (a top-level column is depth 1).
inline constexpr uint32_t kMaxHashDepth = 64;

/// One hashed column, borrowed: rows [offset, offset + length) of caller
/// buffers (see "Borrowed memory" in client.hpp); its children likewise.
///  - fixed width (ValueWidth): `data` holds (offset + length) * width bytes;
///    kFixedSizeBinary the same with byte_width (0 allowed);
///  - kBool: `data` is a bitmap of at least offset + length bits;
///  - kBinary, kString: `offsets` holds offset + length + 1 non-decreasing
///    entries into `data`; kLargeBinary, kLargeString: `large_offsets` likewise;
///  - kDictionary: `data` holds the indices (index_type, 1 to 8 bytes each),
///    children[0] the dictionary (a flat type);
///  - kStruct: children are the fields, each of offset + length rows or more;
///  - kList (`offsets`), kLargeList (`large_offsets`): children[0] the values;
///    kMap (`offsets`): children[0] the keys, children[1] the items;
///  - kFixedSizeList: byte_width values per row in children[0];
///  - kNull: no buffers, every row null;
///  - `validity`: empty (no nulls) or a bitmap of at least offset + length bits.
/// Any column view of a payload type converts implicitly (its name is dropped).
struct HashColumn {
  ColumnType type = ColumnType::kUint32;
  std::span<const uint8_t> data;
  std::span<const int32_t> offsets;
  std::span<const int64_t> large_offsets;
  std::span<const uint8_t> validity;
  uint64_t offset = 0;
  uint64_t length = 0;
  uint32_t byte_width = 0;                     ///< kFixedSizeBinary bytes; kFixedSizeList values
  ColumnType index_type = ColumnType::kInt32;  ///< kDictionary: kInt8 .. kUint64
  std::vector<HashColumn> children;

  HashColumn() = default;
  /// A flat column of the view's type, buffers, offset and length.
  HashColumn(const ColumnView& view);  // NOLINT: implicit by design

  /// Rows [begin, begin + count) of this column (clamped to it), same buffers
  /// and children (which Arrow addresses independently of the parent's offset).
  HashColumn Slice(uint64_t begin, uint64_t count) const;
  /// True when row r is not null by its own validity (kNull: never).
  bool Valid(uint64_t r) const {
    return type != ColumnType::kNull && (validity.empty() || BitAt(validity, offset + r));
  }
};

/// Checks that `column`'s buffers and children hold its rows as HashColumn
/// describes, to the depth kMaxHashDepth (INVALID_ARGUMENT naming `what` and
/// the child's path, e.g. "hash column 0.children[1]", the buffer and both
/// sizes otherwise). Dictionary indices are checked by the service.
absl::Status CheckHashColumn(const HashColumn& column, std::string_view what);

/// An owned HashColumn tree built row by row. Create the node with its type,
/// add children for the nested types (AddChild: the struct's fields, a list's
/// values, a map's keys then items, a dictionary's values), then append rows:
/// values to flat columns, and for nested ones first the children's rows, then
/// the row itself with AppendNested (or AppendNull).
///
///   HashColumnBuilder list(ColumnType::kList);
///   HashColumnBuilder& values = list.AddChild(HashColumnBuilder(ColumnType::kInt64));
///   values.Append<int64_t>(1); values.Append<int64_t>(2);
///   GPUJOIN_RETURN_IF_ERROR(list.AppendNested());  // row 0: [1, 2]
///   list.AppendNull();                             // row 1: null
///
/// Errors are INVALID_ARGUMENT (a value of the wrong kind for the type, a row
/// whose children do not line up) or OUT_OF_RANGE (int32 offsets past 2^31 - 1).
class HashColumnBuilder {
 public:
  /// A column of `type`; `byte_width` is a kFixedSizeBinary's bytes or a
  /// kFixedSizeList's values per row; `index_type` a kDictionary's index type.
  explicit HashColumnBuilder(ColumnType type, uint32_t byte_width = 0,
                             ColumnType index_type = ColumnType::kInt32);

  ColumnType type() const { return type_; }
  uint32_t byte_width() const { return byte_width_; }
  uint64_t length() const { return length_; }
  uint64_t null_count() const { return null_count_; }

  /// Adds a child (see the class comment) and returns it, to be filled in place.
  /// The reference stays valid until the next AddChild.
  HashColumnBuilder& AddChild(HashColumnBuilder child);
  HashColumnBuilder& child(size_t i) { return children_[i]; }
  const HashColumnBuilder& child(size_t i) const { return children_[i]; }
  size_t num_children() const { return children_.size(); }

  /// Appends a fixed-width value; sizeof(T) must be the type's width (int8_t
  /// for kInt8, uint16_t bits for kFloat16, ...; INVALID_ARGUMENT otherwise).
  template <typename T>
  requires std::is_arithmetic_v<T> absl::Status Append(T value) {
    if (ValueWidth(type_) != sizeof(T) || type_ == ColumnType::kDecimal128) {
      return WrongKind("a value of " + std::to_string(sizeof(T)) + " bytes");
    }
    const size_t at = data_.size();
    data_.resize(at + sizeof(T));
    std::memcpy(data_.data() + at, &value, sizeof(T));
    MarkValid();
    return absl::OkStatus();
  }
  /// Appends a kBool value.
  absl::Status AppendBool(bool value);
  /// Appends the bytes of a kBinary, kString, kLargeBinary or kLargeString
  /// value, a kDecimal128 (16 bytes, little-endian two's complement) or a
  /// kFixedSizeBinary (byte_width bytes).
  absl::Status AppendBytes(std::string_view value);
  /// Appends a kDictionary index (it must fit the index type; that it lies
  /// inside the dictionary is the service's check).
  absl::Status AppendIndex(int64_t index);
  /// Appends a valid row of a nested column over the children's rows appended
  /// since the previous row: kList, kLargeList, kMap (the new values; a map's
  /// keys and items the same number), kFixedSizeList (exactly byte_width new
  /// values), kStruct (every field exactly one row more than the struct).
  absl::Status AppendNested();
  /// Appends a null row: zero value bytes, a false bit, an empty string or list,
  /// index 0; a struct appends a null row to every field and a fixed-size list
  /// byte_width null values, so the children stay lined up.
  void AppendNull();

  /// A view of the whole tree (valid while the builder is neither changed nor moved).
  HashColumn view() const;

 private:
  void MarkValid();
  absl::Status WrongKind(const std::string& what) const;
  absl::Status PushOffset(uint64_t end);

  ColumnType type_;
  uint32_t byte_width_;
  ColumnType index_type_;
  std::vector<uint8_t> data_;
  std::vector<int32_t> offsets_;
  std::vector<int64_t> large_offsets_;
  std::vector<uint8_t> validity_;  // kept all-valid until the first null
  bool has_nulls_ = false;
  uint64_t length_ = 0;
  uint64_t null_count_ = 0;
  std::vector<HashColumnBuilder> children_;
};

}  // namespace gpujoin::client
