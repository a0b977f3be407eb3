// The keys of the load tester's workloads (--key-type): the seeded bijections
// that give index row i its key (Mix, Mix64), the key kinds, and the owned key
// columns of string and composite kinds (KeyColumnData). workload.hpp states
// the key scheme.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "gpujoin/client/client.hpp"

namespace gpujoin::loadtest {

/// The key used for "missing" in lookups and reserved as the empty key.
inline constexpr uint32_t kMissing = 0xffffffffu;

/// A seeded bijection of uint32 (xor, then the murmur3 finaliser, every step invertible).
uint32_t Mix(uint32_t x, uint32_t seed);

/// The reserved (empty) key of a uint64 index.
inline constexpr uint64_t kMissing64 = ~uint64_t{0};

/// A seeded bijection of uint64 (xor, then the splitmix64 finaliser, every step
/// invertible): the keys of a uint64 workload, spread over the full 64-bit range.
uint64_t Mix64(uint64_t x, uint64_t seed);

/// The keys of a workload (--key-type): one integer word, or key columns of an
/// index with a key schema.
enum class KeyKind {
  kUint32,  ///< u32: one uint32 word (the default)
  kUint64,  ///< u64: one uint64 word over the full 64-bit range
  kStr16,   ///< str16: one string column, 16 hex characters
  kStr32,   ///< str32: one string column, 32 hex characters
  kUuid,    ///< uuid: one string column, version-4 UUID text (36 characters)
  kPair,    ///< pair: two uint32 columns (a composite key)
};

/// The --key-type spelling: "u32", "u64", "str16", "str32", "uuid", "pair".
const char* KeyKindName(KeyKind kind);

/// Parses a --key-type spelling (INVALID_ARGUMENT listing them otherwise).
absl::StatusOr<KeyKind> ParseKeyKind(std::string_view text);

/// The index key of a kind: kUint32, kUint64, or kColumns for the others.
client::KeyType KeyTypeOf(KeyKind kind);

/// The key schema of a key-column kind (IndexSpec::key_columns); empty for
/// the integer kinds.
std::vector<client::KeyColumnSpec> KeyColumnsOf(KeyKind kind);

/// Request bytes of one key of `kind` on the wire: the word, or each column's
/// value bytes plus a 4-byte offset per string row.
uint32_t KeyWireBytes(KeyKind kind);

/// Owned key columns of a string or composite workload and the views the
/// client sends (client::Keys borrows them). Copies point their views at
/// their own buffers; moves keep the buffers, so the views stay valid.
class KeyColumnData {
 public:
  KeyColumnData() = default;
  /// Empty columns of `kind`'s key schema (a key-column kind), `rows` reserved.
  KeyColumnData(KeyKind kind, size_t rows);
  KeyColumnData(const KeyColumnData& other);
  KeyColumnData& operator=(const KeyColumnData& other);
  KeyColumnData(KeyColumnData&&) noexcept = default;
  KeyColumnData& operator=(KeyColumnData&&) noexcept = default;

  /// Appends the key of key index `i` (KeyOf's scheme).
  void Append(KeyKind kind, uint64_t i, uint32_t seed);
  /// Points the views at the columns; call after the last Append.
  void Seal();

  bool empty() const { return columns_.empty(); }
  size_t rows() const { return columns_.empty() ? 0 : columns_[0].length; }
  /// The keys as the client sends them (valid while this object lives, unchanged).
  client::Keys keys() const { return client::Keys(std::span<const client::ColumnView>(views_)); }
  const client::Column& column(size_t c) const { return columns_[c]; }
  /// Row r's key as text, for messages: "abc..." or "(1, 2)".
  std::string RowText(size_t r) const;

 private:
  std::vector<client::Column> columns_;
  std::vector<client::ColumnView> views_;
};

}  // namespace gpujoin::loadtest
