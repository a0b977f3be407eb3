// Key schemas: indexes keyed by one or more typed columns (string, binary and
// integer columns, alone or together) instead of one integer word
// (docs/engine.md, "Key schemas").
//
// A key-schema index stores, per slot, the 64-bit fingerprint of a key (the
// row hash of its key columns: HashNode's hash64, the Hash RPC's function) and
// the build row that holds it; the key columns stay in build-row order beside
// the table. A probe hashes the query row, walks from the fingerprint's home
// slot and, on an equal fingerprint, compares the key columns exactly: two keys
// with the same fingerprint are both found. No key value is reserved (an empty
// slot is marked by its row, kNoRow); a null in any key column never matches.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>
#include <vector>

#include "gpujoin/engine/column.hpp"
#include "gpujoin/engine/hashing.hpp"
#include "gpujoin/engine/types.hpp"

namespace gpujoin::engine {

/// The row an empty slot of a key-schema index holds (no build row has it:
/// builds have fewer than 2^32 - 1 rows).
inline constexpr uint32_t kEmptySlotRow = 0xffffffffu;

/// Most key columns one key schema may have.
inline constexpr size_t kMaxKeyColumns = 8;

/// Whether `type` can be a key column: int32, int64, uint32, uint64, string or binary.
constexpr bool IsKeyColumnType(ColumnType type) {
  return type == ColumnType::kInt32 || type == ColumnType::kInt64 ||
         type == ColumnType::kUint32 || type == ColumnType::kUint64 ||
         type == ColumnType::kString || type == ColumnType::kBinary;
}

/// The tag of key-schema indexes in the key-carrying node templates, beside
/// the key words uint32_t and uint64_t.
struct ColumnKey {};

/// The key columns of some rows of a key-schema index: one column per column of
/// the index's schema, in its order and of its types, all of the same length.
/// Each is a flat HashColumn (no children): fixed-width values in `data`, or
/// string and binary bytes in `data` with int32 `offsets` (or int64
/// `large_offsets`), an optional validity bitmap, and `offset` / `length` as
/// in hashing. Borrowed like every node input.
struct KeyColumns {
  std::vector<HashColumn> columns;
  /// Rows of the key (the first column's length; 0 without columns).
  uint64_t rows() const { return columns.empty() ? 0 : columns[0].length; }
};

/// What an index is keyed by, as the node templates' parameter: a key word or
/// the key-schema tag.
template <class K>
concept IndexKey = KeyWord<K> || std::same_as<K, ColumnKey>;

/// The keys of one logical input of key kind K: chunked words, or key columns
/// (one piece: a column's offset and length slice it).
template <IndexKey K>
using KeyChunks = std::conditional_t<KeyWord<K>, Chunked<K>, KeyColumns>;
/// The keys of one batch chunk (BatchChunkT): a span of words, or key columns.
template <IndexKey K>
using KeyChunk = std::conditional_t<KeyWord<K>, std::span<const K>, KeyColumns>;

/// Rows of a key input.
inline uint64_t KeyRows(const KeyColumns& keys) { return keys.rows(); }
template <KeyWord K>
uint64_t KeyRows(const Chunked<K>& keys) {
  uint64_t rows = 0;
  for (const auto& c : keys) rows += c.size();
  return rows;
}
template <KeyWord K>
uint64_t KeyRows(std::span<const K> keys) {
  return keys.size();
}

/// Bytes `keys` occupy once stored in an index: per column the values (fixed
/// width, or the rows' string bytes), int64 offsets for strings and binary
/// (rows + 1), and a validity bitmap when the column has one. Columns must be
/// valid (ValidateHashColumns).
uint64_t KeyColumnBytes(const KeyColumns& keys);

/// The KeyType of index key kind K (kColumns for ColumnKey).
template <IndexKey K>
constexpr KeyType KeyTypeOfKey() {
  if constexpr (std::same_as<K, ColumnKey>) {
    return KeyType::kColumns;
  } else {
    return KeyTypeOf<K>();
  }
}

}  // namespace gpujoin::engine
