// Test helpers for the Hash operation: owned Arrow-layout columns, random column
// generators and a runner that validates and hashes a node on the host.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gpujoin/engine/hashing.hpp"
#include "gpujoin/common/status_macros.hpp"
#include "hashing/hash_host.hpp"
#include "hashing/row_hash.hpp"

namespace gpujoin::engine::testing {

/// An Arrow-layout column that owns its buffers; View() borrows them.
struct OwnedColumn {
  ColumnType type = ColumnType::kUint32;
  std::vector<uint8_t> data;
  std::vector<int32_t> offsets;
  std::vector<uint8_t> validity;  ///< empty = all valid
  uint64_t offset = 0;
  uint64_t length = 0;

  HashColumn View() const {
    HashColumn c;
    c.type = type;
    c.data = data;
    c.offsets = offsets;
    c.validity = validity;
    c.offset = offset;
    c.length = length;
    return c;
  }
  /// The same buffers viewed as rows [offset + first, offset + first + rows).
  HashColumn Slice(uint64_t first, uint64_t rows) const {
    HashColumn c = View();
    c.offset = offset + first;
    c.length = rows;
    return c;
  }
};

inline bool BitAt(const std::vector<uint8_t>& bitmap, uint64_t bit) {
  return ((bitmap[bit / 8] >> (bit % 8)) & 1u) != 0;
}
inline void SetBit(std::vector<uint8_t>& bitmap, uint64_t bit, bool value) {
  if (value) {
    bitmap[bit / 8] |= static_cast<uint8_t>(1u << (bit % 8));
  } else {
    bitmap[bit / 8] &= static_cast<uint8_t>(~(1u << (bit % 8)));
  }
}

/// A fixed-width column of `values` (T matching `type`'s width); rows with
/// nullopt are null and hold `null_filler` bytes in the value buffer. `lead`
/// physical rows of filler come first, so the column starts at offset `lead`.
template <typename T>
OwnedColumn FixedColumn(ColumnType type, const std::vector<std::optional<T>>& values,
                        uint64_t lead = 0, T null_filler = T{}) {
  OwnedColumn c;
  c.type = type;
  c.offset = lead;
  c.length = values.size();
  const uint64_t physical = lead + values.size();
  c.data.resize(physical * sizeof(T));
  bool any_null = false;
  for (const auto& v : values) any_null |= !v.has_value();
  if (any_null || lead > 0) c.validity.assign((physical + 7) / 8, 0);
  for (uint64_t i = 0; i < lead; ++i) std::memcpy(&c.data[i * sizeof(T)], &null_filler, sizeof(T));
  for (uint64_t i = 0; i < values.size(); ++i) {
    const T v = values[i].value_or(null_filler);
    std::memcpy(&c.data[(lead + i) * sizeof(T)], &v, sizeof(T));
    if (!c.validity.empty()) SetBit(c.validity, lead + i, values[i].has_value());
  }
  return c;
}

template <typename T>
OwnedColumn FixedColumn(ColumnType type, const std::vector<T>& values) {
  std::vector<std::optional<T>> opt(values.begin(), values.end());
  OwnedColumn c = FixedColumn<T>(type, opt);
  return c;
}

/// A binary column; nullopt rows are null. A null row stores `null_filler` bytes
/// (Arrow allows a null slot to span bytes; they must not be hashed).
inline OwnedColumn BinaryColumn(const std::vector<std::optional<std::string>>& values,
                                const std::string& null_filler = "") {
  OwnedColumn c;
  c.type = ColumnType::kBinary;
  c.length = values.size();
  c.offsets.push_back(0);
  bool any_null = false;
  for (const auto& v : values) any_null |= !v.has_value();
  if (any_null) c.validity.assign((values.size() + 7) / 8, 0);
  for (uint64_t i = 0; i < values.size(); ++i) {
    const std::string& s = values[i] ? *values[i] : null_filler;
    c.data.insert(c.data.end(), s.begin(), s.end());
    c.offsets.push_back(static_cast<int32_t>(c.data.size()));
    if (any_null) SetBit(c.validity, i, values[i].has_value());
  }
  return c;
}

/// Output of one hash run: hashes widened to uint64 and the validity bitmap.
struct HashOutput {
  std::vector<uint64_t> hashes;
  std::vector<uint8_t> validity;
  uint64_t rows = 0;

  bool Valid(uint64_t row) const { return BitAt(validity, row); }
  friend bool operator==(const HashOutput&, const HashOutput&) = default;
};

/// Holds the output buffers of a node so that several runners can fill them.
struct NodeBuffers {
  std::vector<uint32_t> out32;
  std::vector<uint64_t> out64;
  std::vector<uint8_t> out_validity;
  HashNode node;

  NodeBuffers(const std::vector<HashColumn>& columns, HashBits bits) {
    const uint64_t rows = columns.empty() ? 0 : columns[0].length;
    // Prefilled with garbage: every element and bit must be written.
    if (bits == HashBits::k32) out32.assign(rows, 0xDEADBEEFu);
    if (bits == HashBits::k64) out64.assign(rows, 0xDEADBEEFDEADBEEFull);
    out_validity.assign((rows + 7) / 8, 0xA5);
    node.columns = columns;
    node.bits = bits;
    node.out32 = out32;
    node.out64 = out64;
    node.out_validity = out_validity;
  }

  HashOutput Output() const {
    HashOutput o;
    o.rows = node.columns.empty() ? 0 : node.columns[0].length;
    if (node.bits == HashBits::k32) {
      o.hashes.assign(out32.begin(), out32.end());
    } else {
      o.hashes = out64;
    }
    o.validity = out_validity;
    return o;
  }
};

/// Validates and hashes on the host.
inline absl::StatusOr<HashOutput> HashOnHost(const std::vector<HashColumn>& columns,
                                             HashBits bits) {
  NodeBuffers b(columns, bits);
  GPUJOIN_RETURN_IF_ERROR(detail::ValidateHashNode(b.node, "hash"));
  detail::HashRowsHost(b.node);
  return b.Output();
}

/// HashOnHost's output; a refusal is a test failure (and an empty output).
inline HashOutput MustHash(const std::vector<HashColumn>& columns, HashBits bits) {
  auto out = HashOnHost(columns, bits);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *out : HashOutput{};
}

/// Expects `status` to be INVALID_ARGUMENT with every one of `fragments` in its message.
inline void ExpectInvalid(const absl::Status& status, const std::vector<std::string>& fragments) {
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  for (const auto& f : fragments) {
    EXPECT_THAT(std::string(status.message()), ::testing::HasSubstr(f));
  }
}

inline std::vector<HashColumn> Views(const std::vector<OwnedColumn>& columns) {
  std::vector<HashColumn> v;
  for (const auto& c : columns) v.push_back(c.View());
  return v;
}

/// A random column of `rows` rows of `type` with about `null_fraction` nulls,
/// starting at physical row `lead` (validity and values). Binary values are
/// 0..max_len bytes and include long (>32 byte) strings when max_len allows.
inline OwnedColumn RandomColumn(ColumnType type, uint64_t rows, double null_fraction, uint64_t lead,
                                std::mt19937_64& rng, uint32_t max_len = 70) {
  OwnedColumn c;
  c.type = type;
  c.offset = lead;
  c.length = rows;
  const uint64_t physical = lead + rows;
  std::bernoulli_distribution is_null(null_fraction);
  if (null_fraction > 0 || lead % 2 == 1) {
    c.validity.assign((physical + 7) / 8, 0);
    for (uint64_t i = 0; i < physical; ++i) SetBit(c.validity, i, !is_null(rng));
  }
  const uint32_t width = detail::FixedWidth(type);
  if (width != 0) {
    c.data.resize(physical * width);
    for (auto& b : c.data) b = static_cast<uint8_t>(rng());
    // Sprinkle special float values: signed zeros and NaNs with payloads.
    if (type == ColumnType::kFloat32) {
      for (uint64_t i = 0; i < physical; i += 7) {
        const uint32_t specials[] = {0u, 0x80000000u, 0x7FC00000u, 0xFFC00001u, 0x7F800001u};
        const uint32_t v = specials[rng() % 5];
        std::memcpy(&c.data[i * 4], &v, 4);
      }
    } else if (type == ColumnType::kFloat64) {
      for (uint64_t i = 0; i < physical; i += 7) {
        const uint64_t specials[] = {0ull, 0x8000000000000000ull, 0x7FF8000000000000ull,
                                     0xFFF8000000000123ull, 0x7FF0000000000001ull};
        const uint64_t v = specials[rng() % 5];
        std::memcpy(&c.data[i * 8], &v, 8);
      }
    }
  } else {
    c.offsets.push_back(0);
    for (uint64_t i = 0; i < physical; ++i) {
      const uint32_t len = static_cast<uint32_t>(rng() % (max_len + 1));
      for (uint32_t k = 0; k < len; ++k) c.data.push_back(static_cast<uint8_t>(rng()));
      c.offsets.push_back(static_cast<int32_t>(c.data.size()));
    }
  }
  return c;
}

inline constexpr ColumnType kAllTypes[] = {
    ColumnType::kUint32,  ColumnType::kInt32,   ColumnType::kUint64, ColumnType::kInt64,
    ColumnType::kFloat32, ColumnType::kFloat64, ColumnType::kBinary};

}  // namespace gpujoin::engine::testing
