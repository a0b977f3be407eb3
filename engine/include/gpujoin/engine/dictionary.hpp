// Resident dictionaries of string and binary payload columns (docs/engine.md
// "Dictionaries"): the distinct values of a column, each given a dense uint32
// code in first-seen order, and beside the index a uint32 payload column that
// holds each stored row's code. A plan that groups by such a column gathers
// the codes (4 bytes a row, on the backend) instead of the strings, and turns
// each distinct code of a batch into its label once.
//
// The codes column is an ordinary payload column of the index (stored,
// gathered, mutated and saved like any other); the dictionary is host memory
// kept with the index. Codes are never reused: a value that no row holds any
// more keeps its code until the next build.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/hash/hash.h"
#include "absl/status/statusor.h"
#include "gpujoin/engine/column.hpp"

namespace gpujoin::engine {

/// A null row's code in a codes column is 0 with its validity bit clear.
class StringDictionary {
 public:
  StringDictionary();
  StringDictionary(const StringDictionary& other);
  StringDictionary& operator=(const StringDictionary& other);
  StringDictionary(StringDictionary&&) noexcept;
  StringDictionary& operator=(StringDictionary&&) noexcept;
  ~StringDictionary();

  /// Distinct values.
  uint32_t size() const { return static_cast<uint32_t>(offsets_.size() - 1); }
  /// The value of `code` (< size()).
  std::string_view Value(uint32_t code) const {
    return {bytes_.data() + offsets_[code], offsets_[code + 1] - offsets_[code]};
  }
  /// The code of `value`, or nullopt-like kAbsent.
  static constexpr uint32_t kAbsent = 0xffffffffu;
  uint32_t Find(std::string_view value) const;
  /// The code of `value`, adding it when new.
  uint32_t Add(std::string_view value);
  /// Host bytes held (values, offsets and the hash set at its usual load),
  /// by the contents: equal dictionaries count the same.
  uint64_t bytes() const;

  /// The values' bytes and their size() + 1 offsets (for snapshots).
  std::string_view value_bytes() const { return {bytes_.data(), bytes_.size()}; }
  const std::vector<uint64_t>& offsets() const { return offsets_; }
  /// A dictionary of the values `bytes` and `offsets` describe (size + 1
  /// non-decreasing offsets from 0 to bytes.size()). INVALID_ARGUMENT when the
  /// offsets do not fit or a value repeats.
  static absl::StatusOr<StringDictionary> FromValues(std::string_view bytes,
                                                     std::vector<uint64_t> offsets);

 private:
  // Codes hashed and compared by their values; a string_view is a value
  // being looked up (heterogeneous lookup).
  struct Hash {
    using is_transparent = void;
    const StringDictionary* d = nullptr;
    size_t operator()(uint32_t code) const { return (*this)(d->Value(code)); }
    size_t operator()(std::string_view v) const { return absl::HashOf(v); }
  };
  struct Eq {
    using is_transparent = void;
    const StringDictionary* d = nullptr;
    bool operator()(uint32_t a, uint32_t b) const { return a == b || d->Value(a) == d->Value(b); }
    bool operator()(uint32_t a, std::string_view b) const { return d->Value(a) == b; }
    bool operator()(std::string_view a, uint32_t b) const { return a == d->Value(b); }
  };
  void Rehash();

  std::vector<char> bytes_;
  std::vector<uint64_t> offsets_;  // size() + 1
  absl::flat_hash_set<uint32_t, Hash, Eq> codes_;
};

/// A codes column: one uint32 code per row and a validity bitmap (empty when
/// no row is null), in ColumnView's layout.
struct CodesColumn {
  std::vector<uint32_t> codes;
  std::vector<uint8_t> validity;
  ColumnView View() const;
};

/// Most bytes of values all the dictionaries of one index hold together (a
/// dictionary that would pass it is not kept; snapshots keep them in their
/// metadata).
inline constexpr uint64_t kMaxDictionaryValueBytes = uint64_t{32} << 20;

/// Codes `column` (kString or kBinary) through `dictionary`, adding its new
/// values. When the dictionary would pass `max_values` distinct values or
/// `max_bytes` bytes of values, RESOURCE_EXHAUSTED naming the limit, and the
/// dictionary is left holding the values added before.
absl::StatusOr<CodesColumn> EncodeColumn(const ColumnView& column, StringDictionary& dictionary,
                                         uint64_t max_values, uint64_t max_bytes);

/// A dictionary kept with an index (HashIndex::dictionaries()).
struct PayloadDictionary {
  /// The payload column it codes (kString or kBinary).
  uint32_t column = 0;
  /// The uint32 payload column holding each stored row's code.
  uint32_t codes_column = 0;
  StringDictionary values;
  /// True once a mutation brought more distinct values than the limit: the
  /// codes column is no longer maintained (its rows are null from then on)
  /// and plans read the strings instead, until the next build.
  bool retired = false;
};

}  // namespace gpujoin::engine
