// Checks of request integers, shared by the decoders (join_wire) and the
// operations: 32-bit engine integers carried as uint64, generated values that
// must not reach the missing marker, the most rows one build may have, and
// prefixing a status with the field it concerns.
#pragma once

#include <cstdint>
#include <limits>
#include <string_view>
#include <type_traits>

#include "absl/status/status.h"
#include "gpujoin/engine/key_columns.hpp"

namespace gpujoin::server::detail {

/// Most rows one build may have: generated row IDs and source rows are uint32.
inline constexpr uint64_t kMaxBuildRows = std::numeric_limits<uint32_t>::max();

/// Largest generated value (first_value + row, row_base + position): 0xffffffff is
/// the missing marker of Lookup and Join, so a found key must never return it.
inline constexpr uint64_t kMaxGeneratedValue = 0xfffffffeu;

/// The proto carries 32-bit engine integers as uint64 so that a wider value
/// reaches the server (a uint32 field would be truncated by the parser):
/// INVALID_ARGUMENT naming `field` when `value` does not fit 32 bits.
absl::Status CheckFitsU32(uint64_t value, std::string_view field);

/// Generated values base, base + 1, ..., base + rows - 1 must all stay at most
/// kMaxGeneratedValue (no 0xffffffff, no wrap past 2^32): INVALID_ARGUMENT naming
/// `field` otherwise. `what` describes the rows for the message.
absl::Status CheckGeneratedValues(uint64_t base, uint64_t rows, std::string_view field,
                                  std::string_view what);

/// `s` with `prefix` before its message (OK stays OK).
absl::Status Prefixed(const absl::Status& s, std::string_view prefix);

/// The request field that carries keys of index key kind Key (a key word, or
/// engine::ColumnKey for a key schema).
template <typename Key>
constexpr const char* KeysField() {
  if constexpr (std::is_same_v<Key, engine::ColumnKey>) {
    return "key_columns";
  } else {
    return sizeof(Key) == 8 ? "keys64" : "keys";
  }
}

}  // namespace gpujoin::server::detail
