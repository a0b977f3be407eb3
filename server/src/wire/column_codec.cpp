#include "wire/column_codec.hpp"

#include <algorithm>
#include <bit>

#include "absl/strings/str_cat.h"

namespace gpujoin::server {

template <typename T>
absl::StatusOr<DecodedColumn<T>> DecodePackedBytes(std::string_view bytes, std::string_view field) {
  if (bytes.size() % sizeof(T) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(field), ": byte length ",
                                                   bytes.size(), " is not a multiple of ",
                                                   sizeof(T), " (the element size)"));
  }
  const size_t rows = bytes.size() / sizeof(T);
  if (reinterpret_cast<uintptr_t>(bytes.data()) % alignof(T) == 0) {
    return DecodedColumn<T>::Borrow(
        std::span<const T>(reinterpret_cast<const T*>(bytes.data()), rows));
  }
  std::vector<T> copy(rows);
  if (rows != 0) std::memcpy(copy.data(), bytes.data(), bytes.size());
  return DecodedColumn<T>::Own(std::move(copy));
}

template absl::StatusOr<DecodedColumn<uint32_t>> DecodePackedBytes<uint32_t>(std::string_view,
                                                                             std::string_view);
template absl::StatusOr<DecodedColumn<uint64_t>> DecodePackedBytes<uint64_t>(std::string_view,
                                                                             std::string_view);
template absl::StatusOr<DecodedColumn<int32_t>> DecodePackedBytes<int32_t>(std::string_view,
                                                                           std::string_view);
template absl::StatusOr<DecodedColumn<float>> DecodePackedBytes<float>(std::string_view,
                                                                       std::string_view);
template absl::StatusOr<DecodedColumn<int64_t>> DecodePackedBytes<int64_t>(std::string_view,
                                                                           std::string_view);

namespace {

absl::Status MissingColumnError(std::string_view field) {
  return absl::InvalidArgumentError(
      absl::StrCat(std::string(field), ": neither ", std::string(field), ".packed nor ",
                   std::string(field), ".values is set (send zero rows as an empty values list)"));
}

// Shared by the uint32, uint64 and float32 columns, which have the same shape.
template <typename T, typename Column>
absl::StatusOr<DecodedColumn<T>> DecodeColumn(bool has_column, const Column& column,
                                              std::string_view field, Presence presence) {
  const bool has_packed = has_column && !column.packed().empty();
  const bool has_values = has_column && column.has_values();
  if (has_packed && has_values) {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(field), ": both ", std::string(field), ".packed (",
                     column.packed().size(), " bytes) and ", std::string(field), ".values (",
                     column.values().v_size(), " values) are set; set exactly one"));
  }
  if (!has_packed && !has_values) {
    if (presence == Presence::kOptional) return DecodedColumn<T>();
    return MissingColumnError(field);
  }
  if (has_packed)
    return DecodePackedBytes<T>(column.packed(), absl::StrCat(std::string(field), ".packed"));
  const auto& v = column.values().v();
  return DecodedColumn<T>::Borrow(std::span<const T>(v.data(), static_cast<size_t>(v.size())));
}

}  // namespace

absl::StatusOr<DecodedColumn<uint32_t>> DecodeU32Column(bool has_column,
                                                        const v1::U32Column& column,
                                                        std::string_view field, Presence presence) {
  return DecodeColumn<uint32_t>(has_column, column, field, presence);
}

absl::StatusOr<DecodedColumn<uint64_t>> DecodeU64Column(bool has_column,
                                                        const v1::U64Column& column,
                                                        std::string_view field, Presence presence) {
  return DecodeColumn<uint64_t>(has_column, column, field, presence);
}

absl::StatusOr<DecodedColumn<float>> DecodeF32Column(bool has_column, const v1::F32Column& column,
                                                     std::string_view field, Presence presence) {
  return DecodeColumn<float>(has_column, column, field, presence);
}

absl::Status CheckKeyWidth(engine::KeyType index_type, bool has_keys, uint64_t keys_bytes,
                           bool has_keys64, uint64_t keys64_bytes, std::string_view prefix,
                           std::string_view index) {
  const bool wide = index_type == engine::KeyType::kUint64;
  // The column of the other width: its name, the right one's, and what it holds.
  const bool wrong = wide ? has_keys : has_keys64;
  if (!wrong) return absl::OkStatus();
  const std::string p(prefix);
  const std::string sent = p + (wide ? "keys" : "keys64");
  const std::string want = p + (wide ? "keys64" : "keys");
  return absl::InvalidArgumentError(absl::StrCat(
      sent, ": index \"", std::string(index), "\" has ",
      std::string(engine::KeyTypeName(index_type)), " keys; send them in ", want, " (got ",
      wide ? keys_bytes : keys64_bytes, " bytes of ", wide ? "uint32" : "uint64", " keys)"));
}

template <typename Key>
absl::StatusOr<DecodedColumn<Key>> TakeKeys(KeyColumns& columns, std::string_view prefix,
                                            std::string_view index, Presence presence) {
  const absl::Status width = CheckKeyWidth(
      engine::KeyTypeOf<Key>(), columns.keys.present(), uint64_t{4} * columns.keys.size(),
      columns.keys64.present(), uint64_t{8} * columns.keys64.size(), prefix, index);
  if (!width.ok()) return width;
  DecodedColumn<Key>* column;
  if constexpr (sizeof(Key) == 8) {
    column = &columns.keys64;
  } else {
    column = &columns.keys;
  }
  if (!column->present() && presence == Presence::kRequired) {
    return MissingColumnError(
        absl::StrCat(std::string(prefix), sizeof(Key) == 8 ? "keys64" : "keys"));
  }
  return std::move(*column);
}

template absl::StatusOr<DecodedColumn<uint32_t>> TakeKeys<uint32_t>(KeyColumns&, std::string_view,
                                                                    std::string_view, Presence);
template absl::StatusOr<DecodedColumn<uint64_t>> TakeKeys<uint64_t>(KeyColumns&, std::string_view,
                                                                    std::string_view, Presence);

v1::KeyType ToWireKeyType(engine::KeyType type) {
  switch (type) {
    case engine::KeyType::kUint64:
      return v1::KEY_TYPE_UINT64;
    case engine::KeyType::kColumns:
      return v1::KEY_TYPE_COLUMNS;
    default:
      return v1::KEY_TYPE_UINT32;
  }
}

absl::StatusOr<engine::KeyType> FromWireKeyType(int type, std::string_view field) {
  switch (type) {
    case v1::KEY_TYPE_UNSPECIFIED:
    case v1::KEY_TYPE_UINT32:
      return engine::KeyType::kUint32;
    case v1::KEY_TYPE_UINT64:
      return engine::KeyType::kUint64;
    case v1::KEY_TYPE_COLUMNS:
      return engine::KeyType::kColumns;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          std::string(field), ": ", type,
          " is not a key type; set KEY_TYPE_UINT32 (the default), KEY_TYPE_UINT64 or "
          "KEY_TYPE_COLUMNS"));
  }
}

v1::DuplicatePolicy ToWireDuplicatePolicy(engine::DuplicatePolicy policy) {
  return policy == engine::DuplicatePolicy::kKeepAll ? v1::DUPLICATE_POLICY_KEEP_ALL
                                                     : v1::DUPLICATE_POLICY_LOWEST_ROW;
}

absl::StatusOr<engine::DuplicatePolicy> FromWireDuplicatePolicy(int policy,
                                                                std::string_view field) {
  switch (policy) {
    case v1::DUPLICATE_POLICY_UNSPECIFIED:
    case v1::DUPLICATE_POLICY_LOWEST_ROW:
      return engine::DuplicatePolicy::kLowestRow;
    case v1::DUPLICATE_POLICY_KEEP_ALL:
      return engine::DuplicatePolicy::kKeepAll;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          std::string(field), ": ", policy,
          " is not a duplicate policy; set DUPLICATE_POLICY_LOWEST_ROW (the default) or "
          "DUPLICATE_POLICY_KEEP_ALL"));
  }
}

absl::StatusOr<engine::JoinKind> FromWireJoinKind(int kind, std::string_view field) {
  switch (kind) {
    case v1::JOIN_KIND_UNSPECIFIED:
    case v1::JOIN_KIND_INNER:
      return engine::JoinKind::kInner;
    case v1::JOIN_KIND_LEFT_OUTER:
      return engine::JoinKind::kLeftOuter;
    case v1::JOIN_KIND_LEFT_SEMI:
      return engine::JoinKind::kLeftSemi;
    case v1::JOIN_KIND_LEFT_ANTI:
      return engine::JoinKind::kLeftAnti;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          std::string(field), ": ", kind,
          " is not a join kind; set JOIN_KIND_INNER (the default), JOIN_KIND_LEFT_OUTER, "
          "JOIN_KIND_LEFT_SEMI or JOIN_KIND_LEFT_ANTI"));
  }
}

v1::ColumnType ToWireColumnType(engine::ColumnType type) {
  return static_cast<v1::ColumnType>(static_cast<int>(type) + 1);
}

absl::StatusOr<engine::ColumnType> FromWireColumnType(int type, std::string_view field) {
  if (type > v1::COLUMN_TYPE_UNSPECIFIED && type <= v1::COLUMN_TYPE_STRING &&
      v1::ColumnType_IsValid(type)) {
    return static_cast<engine::ColumnType>(type - 1);
  }
  // The types past STRING exist for Hash only.
  return absl::InvalidArgumentError(absl::StrCat(
      std::string(field), ": ", WireColumnTypeName(type),
      type > v1::COLUMN_TYPE_STRING && v1::ColumnType_IsValid(type)
          ? " is a Hash-only type, not a payload column type"
          : " is not a column type",
      " (expected one of COLUMN_TYPE_UINT32, _INT32, _UINT64, _INT64, "
      "_FLOAT32, _FLOAT64, _BINARY, _BOOL, _STRING)"));
}

std::string WireColumnTypeName(int type) {
  if (v1::ColumnType_IsValid(type)) return v1::ColumnType_Name(static_cast<v1::ColumnType>(type));
  return absl::StrCat(type);
}

std::string SliceBits(std::string_view bitmap, uint64_t first, uint64_t bits) {
  std::string out(engine::BitmapBytes(bits), '\0');
  CopyBits(reinterpret_cast<const uint8_t*>(bitmap.data()), first, bits,
           reinterpret_cast<uint8_t*>(out.data()), 0);
  return out;
}

uint64_t CountZeroBits(const uint8_t* bitmap, uint64_t bits) {
  return bits - CountOnes(bitmap, 0, bits);
}

size_t FindInvalidUtf8(std::string_view text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    // ASCII runs, eight bytes at a time.
    if (i + 8 <= n) {
      uint64_t word;
      std::memcpy(&word, s + i, 8);
      if ((word & 0x8080808080808080ull) == 0) {
        i += 8;
        continue;
      }
    }
    const unsigned char c = s[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    // The length of the sequence and the range of its second byte (RFC 3629, table 3-7
    // of the Unicode standard), which excludes overlong forms, surrogates and code
    // points above U+10FFFF.
    size_t length = 0;
    unsigned char low = 0x80, high = 0xbf;
    if (c >= 0xc2 && c <= 0xdf) {
      length = 2;
    } else if (c >= 0xe0 && c <= 0xef) {
      length = 3;
      if (c == 0xe0) low = 0xa0;
      if (c == 0xed) high = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      length = 4;
      if (c == 0xf0) low = 0x90;
      if (c == 0xf4) high = 0x8f;
    } else {
      return i;
    }
    if (i + length > n || s[i + 1] < low || s[i + 1] > high) return i;
    for (size_t k = 2; k < length; ++k) {
      if (s[i + k] < 0x80 || s[i + k] > 0xbf) return i;
    }
    i += length;
  }
  return std::string_view::npos;
}

}  // namespace gpujoin::server
