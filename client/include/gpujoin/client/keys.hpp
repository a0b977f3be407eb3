// Key columns of the gpujoin C++ client: the key word of an index (KeyType),
// the borrowed key column every build, lookup and join sends (Keys), and the
// value that marks a missing match (kNoMatch).
#pragma once

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <ranges>
#include <span>
#include <string_view>
#include <type_traits>

#include "gpujoin/common/operation_kinds.hpp"

namespace gpujoin::client {

// The key word of an index (IndexSpec::key_type): kUint32 (the default) or
// kUint64; int64 keys travel as their two's-complement bit pattern in a uint64
// index (gpujoin/common/operation_kinds.hpp).
using ::gpujoin::KeyType;
using ::gpujoin::KeyTypeName;
using ::gpujoin::ParseKeyType;

/// The right row (value) of an outer or anti pair without a match, and the
/// value of a missing key in a lookup.
inline constexpr uint32_t kNoMatch = 0xffffffffu;

/// The element types a Keys column is made from.
template <typename T>
concept KeyElement =
    std::same_as<T, uint32_t> || std::same_as<T, uint64_t> || std::same_as<T, int64_t>;

/// A borrowed column of keys of one width (see "Borrowed memory" in client.hpp): uint32
/// keys for a uint32 index, uint64 keys for a uint64 index. Made implicitly from a
/// span, vector or array of uint32_t, uint64_t or int64_t (int64 keys are sent as
/// their bit pattern, a uint64 column). Sending keys of the wrong width for the
/// index is INVALID_ARGUMENT from the server (a build checks IndexSpec::key_type
/// before anything is sent).
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
  /// Any contiguous container of a key element type (std::vector, std::array, ...).
  template <typename Range>
  requires(std::ranges::contiguous_range<const Range&>&& std::ranges::sized_range<const Range&>&&
               KeyElement<std::ranges::range_value_t<Range>> &&
           !std::is_same_v<std::remove_cvref_t<Range>, Keys>) Keys(const Range& keys)  // NOLINT
      : Keys(std::span<const std::ranges::range_value_t<Range>>(std::ranges::data(keys),
                                                                std::ranges::size(keys))) {}

  KeyType type() const { return type_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  /// 4 or 8 bytes per key.
  size_t key_bytes() const { return type_ == KeyType::kUint64 ? 8 : 4; }
  size_t size_bytes() const { return size_ * key_bytes(); }
  /// Rows [offset, offset + count) (clamped to the column), of the same type.
  Keys subspan(size_t offset, size_t count = SIZE_MAX) const {
    Keys k = *this;
    offset = std::min(offset, size_);
    k.size_ = std::min(count, size_ - offset);
    k.data_ = static_cast<const char*>(data_) + offset * key_bytes();
    return k;
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
  const void* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace gpujoin::client
