// Decoding of request columns (packed little-endian bytes or typed lists) into
// engine views, and encoding of result columns into response bytes.
//
// Packed bytes are borrowed without copying when they are suitably aligned (the
// usual case: protobuf stores them in heap strings), so a decoded column must not
// outlive the request message it came from.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "absl/status/statusor.h"
#include "gpujoin/common/bitmap.hpp"
#include "gpujoin/engine/column.hpp"
#include "gpujoin/engine/graph.hpp"
#include "gpujoin/engine/hash_index.hpp"
#include "gpujoin/engine/types.hpp"
#include "gpujoin/v1/gpujoin.pb.h"

namespace gpujoin::server {

static_assert(std::endian::native == std::endian::little,
              "packed columns are little-endian; a big-endian host would need byte swaps");

/// A decoded column: a view that either borrows the request's bytes or owns a copy.
/// Moving keeps the view valid (std::vector keeps its buffer on move).
template <typename T>
class DecodedColumn {
 public:
  DecodedColumn() = default;
  /// A view of memory owned elsewhere (the request message).
  static DecodedColumn Borrow(std::span<const T> view) {
    DecodedColumn c;
    c.view_ = view;
    c.present_ = true;
    return c;
  }
  /// Takes ownership of `values`.
  static DecodedColumn Own(std::vector<T> values) {
    DecodedColumn c;
    c.storage_ = std::move(values);
    c.view_ = std::span<const T>(c.storage_.data(), c.storage_.size());
    c.present_ = true;
    return c;
  }
  DecodedColumn(DecodedColumn&&) noexcept = default;
  DecodedColumn& operator=(DecodedColumn&&) noexcept = default;
  DecodedColumn(const DecodedColumn&) = delete;
  DecodedColumn& operator=(const DecodedColumn&) = delete;

  /// False for an optional column the request did not set.
  bool present() const { return present_; }
  std::span<const T> span() const { return view_; }
  size_t size() const { return view_.size(); }
  /// Bytes of the copy this column owns (0 when it borrows the message's memory).
  size_t owned_bytes() const { return storage_.capacity() * sizeof(T); }

 private:
  std::span<const T> view_;
  std::vector<T> storage_;
  bool present_ = false;
};

/// Whether a column must be set.
enum class Presence { kRequired, kOptional };

/// Decodes a uint32 column. `has_column` is the parent's has_<field>(); `field` is
/// the field path used in errors (e.g. "batches[2].keys"). INVALID_ARGUMENT when
/// both `packed` and `values` are set, when neither is set for a required column,
/// or when `packed` has a byte length that is not a multiple of 4.
absl::StatusOr<DecodedColumn<uint32_t>> DecodeU32Column(bool has_column,
                                                        const v1::U32Column& column,
                                                        std::string_view field, Presence presence);

/// Same for uint64 columns (`packed` a multiple of 8 bytes).
absl::StatusOr<DecodedColumn<uint64_t>> DecodeU64Column(bool has_column,
                                                        const v1::U64Column& column,
                                                        std::string_view field, Presence presence);

/// Same for float32 columns.
absl::StatusOr<DecodedColumn<float>> DecodeF32Column(bool has_column, const v1::F32Column& column,
                                                     std::string_view field, Presence presence);

/// The two key columns of a message that carries keys (BuildChunk, LookupRequest,
/// LeftBatch): `keys` (uint32) and `keys64` (uint64), each decoded as optional.
/// Which one the request must use depends on the index's key type (TakeKeys).
struct KeyColumns {
  DecodedColumn<uint32_t> keys;
  DecodedColumn<uint64_t> keys64;
};

/// Decodes `message.keys` and `message.keys64` as optional columns (the checks of
/// DecodeU32Column / DecodeU64Column, fields named `prefix` + "keys" / "keys64",
/// e.g. prefix "chunks[3]."), so a malformed column is INVALID_ARGUMENT before the
/// index is looked up.
template <typename Message>
absl::StatusOr<KeyColumns> DecodeKeyColumns(const Message& message, std::string_view prefix);

/// The column of the index's key word `Key` (uint32_t: `keys`, uint64_t:
/// `keys64`), moved out of `columns`. INVALID_ARGUMENT when the column of the
/// other width is set, naming that field, the index's key type and its byte
/// length: `chunks[0].keys: index "ids" has uint64 keys; send them in
/// chunks[0].keys64 (got 12 bytes of uint32 keys)`. A required column that is not
/// set is INVALID_ARGUMENT as in DecodeU32Column; an optional one comes back not
/// present.
template <typename Key>
absl::StatusOr<DecodedColumn<Key>> TakeKeys(KeyColumns& columns, std::string_view prefix,
                                            std::string_view index, Presence presence);

/// The width check of TakeKeys alone, for a request whose key columns are given
/// by presence and byte length (the Lookup bytes path).
absl::Status CheckKeyWidth(engine::KeyType index_type, bool has_keys, uint64_t keys_bytes,
                           bool has_keys64, uint64_t keys64_bytes, std::string_view prefix,
                           std::string_view index);

/// Calls `f(std::type_identity<Key>{})` with the key word of `type` (uint32_t or
/// uint64_t) and returns its result: the dispatch from a key word to the code
/// templated on it (WithIndexKey, key_columns_wire.hpp, adds key schemas).
template <typename F>
decltype(auto) WithKeyWord(engine::KeyType type, F&& f) {
  if (type == engine::KeyType::kUint64) return f(std::type_identity<uint64_t>{});
  return f(std::type_identity<uint32_t>{});
}

/// The wire enum of an engine key type, and back (KEY_TYPE_UNSPECIFIED is uint32;
/// INVALID_ARGUMENT naming `field` for a value that is not a key type).
v1::KeyType ToWireKeyType(engine::KeyType type);
absl::StatusOr<engine::KeyType> FromWireKeyType(int type, std::string_view field);

/// The wire enum of an engine duplicate policy, and back
/// (DUPLICATE_POLICY_UNSPECIFIED is lowest_row; INVALID_ARGUMENT naming `field`
/// for a value that is not a policy).
v1::DuplicatePolicy ToWireDuplicatePolicy(engine::DuplicatePolicy policy);
absl::StatusOr<engine::DuplicatePolicy> FromWireDuplicatePolicy(int policy, std::string_view field);

/// The engine join kind of a wire JoinKind (JOIN_KIND_UNSPECIFIED is inner;
/// INVALID_ARGUMENT naming `field` for a value that is not a kind).
absl::StatusOr<engine::JoinKind> FromWireJoinKind(int kind, std::string_view field);

template <typename Message>
absl::StatusOr<KeyColumns> DecodeKeyColumns(const Message& message, std::string_view prefix) {
  KeyColumns c;
  auto keys = DecodeU32Column(message.has_keys(), message.keys(), std::string(prefix) + "keys",
                              Presence::kOptional);
  if (!keys.ok()) return keys.status();
  c.keys = *std::move(keys);
  auto keys64 = DecodeU64Column(message.has_keys64(), message.keys64(),
                                std::string(prefix) + "keys64", Presence::kOptional);
  if (!keys64.ok()) return keys64.status();
  c.keys64 = *std::move(keys64);
  return c;
}

/// The wire enum of an engine column type (engine type i is wire type i + 1).
v1::ColumnType ToWireColumnType(engine::ColumnType type);

/// The engine column type of a wire enum value; INVALID_ARGUMENT naming `field`
/// for COLUMN_TYPE_UNSPECIFIED and values that are not column types.
absl::StatusOr<engine::ColumnType> FromWireColumnType(int type, std::string_view field);

/// "COLUMN_TYPE_INT64", ... (the number for values outside the enum).
std::string WireColumnTypeName(int type);


/// Bits [first, first + bits) of `bitmap` as a bitmap of its own (bit 0 = bit
/// `first`), BitmapBytes(bits) bytes with the bits past `bits` zero.
std::string SliceBits(std::string_view bitmap, uint64_t first, uint64_t bits);

/// Bit `i` of an Arrow bitmap (LSB first); `bitmap` holds at least i / 8 + 1 bytes.
inline bool BitSet(std::string_view bitmap, uint64_t i) {
  return (static_cast<uint8_t>(bitmap[i / 8]) >> (i % 8)) & 1u;
}

/// Number of zero bits among the first `bits` bits of `bitmap` (null rows of a validity bitmap).
uint64_t CountZeroBits(const uint8_t* bitmap, uint64_t bits);

/// The position of the first byte of `text` where it stops being valid UTF-8
/// (RFC 3629: no overlong forms, surrogates or code points above U+10FFFF), or
/// std::string_view::npos when all of it is valid.
size_t FindInvalidUtf8(std::string_view text);

/// Borrows or copies `bytes` as an array of T (little-endian). INVALID_ARGUMENT naming
/// `field` when the length is not a multiple of sizeof(T).
template <typename T>
absl::StatusOr<DecodedColumn<T>> DecodePackedBytes(std::string_view bytes, std::string_view field);

/// Output column written in place into a response `bytes` field: resizes `dest` to
/// rows * sizeof(T) and exposes it as a span of T (through a scratch vector when the
/// string's storage is not aligned for T; Finish() then copies it over).
template <typename T>
class PackedOutput {
 public:
  PackedOutput(std::string* dest, size_t rows) : dest_(dest), rows_(rows) {
    dest_->resize(rows * sizeof(T));
    if (reinterpret_cast<uintptr_t>(dest_->data()) % alignof(T) != 0) scratch_.resize(rows);
  }
  std::span<T> span() {
    if (!scratch_.empty()) return std::span<T>(scratch_);
    return std::span<T>(reinterpret_cast<T*>(dest_->data()), rows_);
  }
  /// Copies the scratch vector, if one was used, into the destination; `rows` may
  /// shrink the output to its first `rows` elements (joins truncate to the pair count).
  void Finish(size_t rows) {
    if (!scratch_.empty()) std::memcpy(dest_->data(), scratch_.data(), rows * sizeof(T));
    dest_->resize(rows * sizeof(T));
  }
  void Finish() { Finish(rows_); }

 private:
  std::string* dest_;
  size_t rows_;
  std::vector<T> scratch_;
};

/// Copies `values` into a packed little-endian byte string.
template <typename T>
std::string PackColumn(std::span<const T> values) {
  std::string out(values.size() * sizeof(T), '\0');
  if (!values.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

/// Reads a packed little-endian byte string as a vector of T (sizes not a multiple
/// of sizeof(T) drop the tail). For clients and tests.
template <typename T>
std::vector<T> UnpackColumn(const std::string& bytes) {
  std::vector<T> out(bytes.size() / sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), bytes.data(), out.size() * sizeof(T));
  return out;
}

}  // namespace gpujoin::server
