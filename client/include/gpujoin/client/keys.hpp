// Keys of the gpujoin C++ client: the key of an index (KeyType: one integer
// word, or a key schema of typed columns, KeyColumnSpec), the borrowed keys
// every build, lookup and join sends (Keys), and the value that marks a
// missing match (kNoMatch).
#pragma once

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <ranges>
#include <span>
#include <string>
#include <string_view>
#include <vector>
#include <type_traits>

#include "absl/status/status.h"
#include "gpujoin/client/column.hpp"
#include "gpujoin/common/operation_kinds.hpp"

namespace gpujoin::client {

// The key of an index (IndexSpec::key_type): kUint32 (the default) or kUint64
// (int64 keys travel as their two's-complement bit pattern in a uint64 index),
// or kColumns, a key schema of 1 to 8 typed key columns (IndexSpec::key_columns:
// string, binary and integer columns; gpujoin/common/operation_kinds.hpp).
using ::gpujoin::KeyType;
using ::gpujoin::KeyTypeName;
using ::gpujoin::ParseKeyType;

/// The right row (value) of an outer or anti pair without a match, and the
/// value of a missing key in a lookup.
inline constexpr uint32_t kNoMatch = 0xffffffffu;

/// One column of a key schema (IndexSpec::key_columns, IndexInfo::key_columns).
struct KeyColumnSpec {
  std::string name;  ///< [A-Za-z0-9_.-]{1,128}, unique among the key columns
  /// kInt32, kInt64, kUint32, kUint64, kString (UTF-8) or kBinary.
  ColumnType type = ColumnType::kString;

  friend bool operator==(const KeyColumnSpec&, const KeyColumnSpec&) = default;
};

/// Most key columns in a key schema.
inline constexpr size_t kMaxKeyColumns = 8;

/// True for the column types a key column may have (IsKeyColumnType(kString)).
constexpr bool IsKeyColumnType(ColumnType t) {
  return t == ColumnType::kInt32 || t == ColumnType::kInt64 || t == ColumnType::kUint32 ||
         t == ColumnType::kUint64 || t == ColumnType::kString || t == ColumnType::kBinary;
}

/// The element types a Keys column is made from.
template <typename T>
concept KeyElement =
    std::same_as<T, uint32_t> || std::same_as<T, uint64_t> || std::same_as<T, int64_t>;

/// Borrowed keys (see "Borrowed memory" in client.hpp), in one of two
/// representations:
///  - one integer column: uint32 keys for a uint32 index, uint64 keys for a
///    uint64 index. Made implicitly from a span, vector or array of uint32_t,
///    uint64_t or int64_t (int64 keys are sent as their bit pattern, a uint64
///    column);
///  - key columns (type() kColumns) for an index with a key schema: one
///    ColumnView per key column, in the schema's order, all of one length (a
///    row's key is its values across the columns; a null in any of them never
///    matches). Made implicitly from a span or vector of ColumnView; the views
///    themselves are borrowed too. A view's `name` is sent as it is: empty, or
///    the key column's name (the server refuses another).
/// Keys of the wrong kind or width for the index are INVALID_ARGUMENT from the
/// server; a build checks them against IndexSpec before anything is sent, and
/// every call checks key columns (CheckKeys) first.
class Keys {
 public:
  /// An empty uint32 column.
  Keys() = default;
  Keys(std::span<const uint32_t> keys)  // NOLINT: implicit by design
      : type_(KeyType::kUint32), data_(keys.data()), size_(keys.size()) {}
  Keys(std::span<const uint64_t> keys)  // NOLINT
      : type_(KeyType::kUint64), data_(keys.data()), size_(keys.size()) {}
  /// int64 keys: their bit patterns (the memory is read as uint64, which the
  /// language allows for the unsigned type of the same width).
  Keys(std::span<const int64_t> keys)  // NOLINT
      : type_(KeyType::kUint64), data_(keys.data()), size_(keys.size()) {}
  /// Key columns: `columns[i]` is key column i; the rows are those of
  /// columns[0] (CheckKeys refuses columns of different lengths).
  Keys(std::span<const ColumnView> columns)  // NOLINT
      : type_(KeyType::kColumns),
        data_(columns.data()),
        column_count_(columns.size()),
        size_(columns.empty() ? 0 : columns[0].length) {}
  Keys(const std::vector<ColumnView>& columns)  // NOLINT
      : Keys(std::span<const ColumnView>(columns)) {}
  /// Any contiguous container of a key element type (std::vector, std::array, ...).
  template <typename Range>
  requires(std::ranges::contiguous_range<const Range&>&& std::ranges::sized_range<const Range&>&&
               KeyElement<std::ranges::range_value_t<Range>> &&
           !std::is_same_v<std::remove_cvref_t<Range>, Keys>) Keys(const Range& keys)  // NOLINT
      : Keys(std::span<const std::ranges::range_value_t<Range>>(std::ranges::data(keys),
                                                                std::ranges::size(keys))) {}

  KeyType type() const { return type_; }
  /// Rows (keys).
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  /// 4 or 8 bytes per integer key; 0 for key columns (their rows vary in size).
  size_t key_bytes() const {
    return type_ == KeyType::kUint64 ? 8 : type_ == KeyType::kUint32 ? 4 : 0;
  }
  /// The bytes of the keys' values: size() * key_bytes() for integer keys; for
  /// key columns, each column's values (string bytes, fixed-width words).
  size_t size_bytes() const;
  /// Rows [offset, offset + count) (clamped to the keys), of the same type.
  Keys subspan(size_t offset, size_t count = SIZE_MAX) const {
    Keys k = *this;
    offset = std::min(offset, size_);
    k.size_ = std::min(count, size_ - offset);
    if (type_ == KeyType::kColumns) {
      k.row_offset_ = row_offset_ + offset;
    } else {
      k.data_ = static_cast<const char*>(data_) + offset * key_bytes();
    }
    return k;
  }
  /// Key columns: how many (0 for integer keys).
  size_t column_count() const { return column_count_; }
  /// Key column i's rows of these keys (the caller's view, sliced to this
  /// subspan); i < column_count().
  ColumnView column(size_t i) const {
    return static_cast<const ColumnView*>(data_)[i].Slice(row_offset_, size_);
  }
  /// The keys of a uint32 column; empty for a uint64 one.
  std::span<const uint32_t> u32() const {
    if (type_ != KeyType::kUint32) return {};
    return {static_cast<const uint32_t*>(data_), size_};
  }
  /// The keys (bit patterns) of a uint64 column; empty for a uint32 one.
  std::span<const uint64_t> u64() const {
    if (type_ != KeyType::kUint64) return {};
    return {static_cast<const uint64_t*>(data_), size_};
  }
  /// The packed little-endian bytes of the column.
  std::string_view bytes() const { return {static_cast<const char*>(data_), size_bytes()}; }

 private:
  KeyType type_ = KeyType::kUint32;
  const void* data_ = nullptr;  // the words, or the key columns' views
  size_t column_count_ = 0;
  size_t row_offset_ = 0;  // key columns: the first row of the views
  size_t size_ = 0;
};

/// Checks keys before they are sent: for key columns, 1 to kMaxKeyColumns
/// columns of key types (IsKeyColumnType), all as long as column 0, each
/// passing CheckColumnView. INVALID_ARGUMENT naming `what`, the column (its
/// index and name) and the sizes otherwise. Integer keys always pass.
absl::Status CheckKeys(const Keys& keys, std::string_view what);

/// CheckKeys, and that `keys` fit the key of an index declared with `key_type`
/// and `schema` (IndexSpec::key_columns): the integer width, or for key columns
/// their count, and each column's type and (when not empty) name.
/// INVALID_ARGUMENT naming `what` and the key column otherwise. Empty integer
/// keys fit any index (an empty chunk).
absl::Status CheckKeysFor(const Keys& keys, KeyType key_type,
                          std::span<const KeyColumnSpec> schema, std::string_view what);

}  // namespace gpujoin::client
