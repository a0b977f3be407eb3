#include "keys.hpp"

#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"

namespace gpujoin::loadtest {

uint32_t Mix(uint32_t x, uint32_t seed) {
  x ^= seed;
  x *= 0x9e3779b1u;
  x ^= x >> 16;
  x *= 0x85ebca6bu;
  x ^= x >> 13;
  x *= 0xc2b2ae35u;
  x ^= x >> 16;
  return x;
}

uint64_t Mix64(uint64_t x, uint64_t seed) {
  x ^= seed * 0x9e3779b97f4a7c15ull;
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

const char* KeyKindName(KeyKind kind) {
  switch (kind) {
    case KeyKind::kUint32:
      return "u32";
    case KeyKind::kUint64:
      return "u64";
    case KeyKind::kStr16:
      return "str16";
    case KeyKind::kStr32:
      return "str32";
    case KeyKind::kUuid:
      return "uuid";
    case KeyKind::kPair:
      return "pair";
  }
  return "?";
}

absl::StatusOr<KeyKind> ParseKeyKind(std::string_view text) {
  for (KeyKind k : {KeyKind::kUint32, KeyKind::kUint64, KeyKind::kStr16, KeyKind::kStr32,
                    KeyKind::kUuid, KeyKind::kPair}) {
    if (text == KeyKindName(k)) return k;
  }
  return absl::InvalidArgumentError(absl::StrCat("--key-type: '", std::string(text),
                                                 "' is not u32, u64, str16, str32, uuid or pair"));
}

client::KeyType KeyTypeOf(KeyKind kind) {
  switch (kind) {
    case KeyKind::kUint32:
      return client::KeyType::kUint32;
    case KeyKind::kUint64:
      return client::KeyType::kUint64;
    default:
      return client::KeyType::kColumns;
  }
}

std::vector<client::KeyColumnSpec> KeyColumnsOf(KeyKind kind) {
  switch (kind) {
    case KeyKind::kUint32:
    case KeyKind::kUint64:
      return {};
    case KeyKind::kPair:
      return {{"key_a", client::ColumnType::kUint32}, {"key_b", client::ColumnType::kUint32}};
    default:
      return {{"key", client::ColumnType::kString}};
  }
}

uint32_t KeyWireBytes(KeyKind kind) {
  switch (kind) {
    case KeyKind::kUint32:
      return 4;
    case KeyKind::kUint64:
    case KeyKind::kPair:
      return 8;
    case KeyKind::kStr16:
      return 16 + 4;
    case KeyKind::kStr32:
      return 32 + 4;
    case KeyKind::kUuid:
      return 36 + 4;
  }
  return 8;
}

namespace {

// Salts of the second word of str32 and uuid keys and of the pair's columns.
constexpr uint64_t kStringSalt = 0x2545f4914f6cdd1dull;
constexpr uint32_t kPairSaltA = 0x68e31da4u, kPairSaltB = 0xb5297a4du;

// Writes the 16 lowercase hex digits of `v`, most significant first.
void Hex16(uint64_t v, char* out) {
  static constexpr char kDigits[] = "0123456789abcdef";
  for (int d = 15; d >= 0; --d, v >>= 4) out[d] = kDigits[v & 15];
}

// Version-4 UUID text whose first 16 free hex digits (all but the version and
// variant nibbles) are those of `a`, the other 14 the top of `b`, the variant's
// two free bits the bottom of `b`: distinct `a`, distinct text.
void UuidText(uint64_t a, uint64_t b, char* out) {
  char hex[32];
  char a_hex[16], b_hex[16];
  Hex16(a, a_hex);
  Hex16(b, b_hex);
  int from_a = 0, from_b = 0;
  for (int n = 0; n < 32; ++n) {
    if (n == 12) {
      hex[n] = '4';
    } else if (n == 16) {
      hex[n] = "89ab"[b & 3];
    } else {
      hex[n] = from_a < 16 ? a_hex[from_a++] : b_hex[from_b++];
    }
  }
  // 8-4-4-4-12
  int at = 0;
  for (int n = 0; n < 32; ++n) {
    if (n == 8 || n == 12 || n == 16 || n == 20) out[at++] = '-';
    out[at++] = hex[n];
  }
}

}  // namespace

KeyColumnData::KeyColumnData(KeyKind kind, size_t rows) {
  for (const client::KeyColumnSpec& spec : KeyColumnsOf(kind)) {
    client::Column c(spec.name, spec.type);
    if (spec.type == client::ColumnType::kString) {
      c.data.reserve(rows * (KeyWireBytes(kind) - 4));
      c.offsets.reserve(rows + 1);
    } else {
      c.data.reserve(rows * 4);
    }
    columns_.push_back(std::move(c));
  }
}

KeyColumnData::KeyColumnData(const KeyColumnData& other) : columns_(other.columns_) { Seal(); }

KeyColumnData& KeyColumnData::operator=(const KeyColumnData& other) {
  if (this != &other) {
    columns_ = other.columns_;
    Seal();
  }
  return *this;
}

void KeyColumnData::Append(KeyKind kind, uint64_t i, uint32_t seed) {
  char text[36];
  std::string_view key;
  switch (kind) {
    case KeyKind::kStr16:
      Hex16(Mix64(i, seed), text);
      key = {text, 16};
      break;
    case KeyKind::kStr32: {
      char wide[32];
      Hex16(Mix64(i, seed), wide);
      Hex16(Mix64(i, seed ^ kStringSalt), wide + 16);
      (void)columns_[0].AppendString({wide, 32});
      return;
    }
    case KeyKind::kUuid:
      UuidText(Mix64(i, seed), Mix64(i, seed ^ kStringSalt), text);
      key = {text, 36};
      break;
    case KeyKind::kPair: {
      // Mix is a bijection, so (high half, low half) of x is one key index's;
      // neither column alone is unique (65,536 values each).
      const uint32_t x = Mix(static_cast<uint32_t>(i), seed);
      columns_[0].Append<uint32_t>(Mix(x >> 16, seed ^ kPairSaltA));
      columns_[1].Append<uint32_t>(Mix(x & 0xffffu, seed ^ kPairSaltB));
      return;
    }
    case KeyKind::kUint32:
    case KeyKind::kUint64:
      return;
  }
  // At most 36 bytes a row: far from the 2^31 string bytes a column can hold
  // within a pool's budget.
  (void)columns_[0].AppendString(key);
}

void KeyColumnData::Seal() {
  views_.clear();
  for (const client::Column& c : columns_) views_.push_back(c.view());
}

std::string KeyColumnData::RowText(size_t r) const {
  if (columns_.size() == 1) return absl::StrCat("'", std::string(columns_[0].String(r)), "'");
  std::string out = "(";
  for (size_t c = 0; c < columns_.size(); ++c) {
    absl::StrAppend(&out, c ? ", " : "", columns_[c].Value<uint32_t>(r));
  }
  return out + ")";
}

}  // namespace gpujoin::loadtest
