// Test helpers for hashing Arrow's nested, dictionary and narrow types: logical
// types and values (LType, LValue), an encoder into Arrow's physical layout with
// random, independent child offsets, garbage under null slots and optional
// dictionary encoding (Encode), and an independent model of the documented hash
// (ModelHash, written from docs/hashing.md "Algorithm", not from the engine's
// code) to compare the engine with.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "gpujoin/engine/hashing.hpp"
#include "hash_test_util.hpp"
#include "hashing/row_hash.hpp"

namespace gpujoin::engine::testing {

/// An Arrow-layout column tree that owns its buffers; View() borrows them.
struct OwnedTree {
  ColumnType type = ColumnType::kInt32;
  std::vector<uint8_t> data;
  std::vector<int32_t> offsets;
  std::vector<int64_t> large_offsets;
  std::vector<uint8_t> validity;
  uint64_t offset = 0;
  uint64_t length = 0;
  uint32_t byte_width = 0;
  ColumnType index_type = ColumnType::kInt32;
  std::vector<OwnedTree> children;

  HashColumn View() const {
    HashColumn c;
    c.type = type;
    c.data = data;
    c.offsets = offsets;
    c.large_offsets = large_offsets;
    c.validity = validity;
    c.offset = offset;
    c.length = length;
    c.byte_width = byte_width;
    c.index_type = index_type;
    for (const OwnedTree& child : children) c.children.push_back(child.View());
    return c;
  }
  /// Logical rows [first, first + rows) of this column (children untouched).
  HashColumn Slice(uint64_t first, uint64_t rows) const {
    HashColumn c = View();
    c.offset = offset + first;
    c.length = rows;
    return c;
  }
};

/// A logical type. Dictionary is an encoding, not a logical type: Encode may
/// dictionary-encode any flat type.
struct LType {
  ColumnType type =
      ColumnType::kInt32;       ///< flat, kStruct, kList, kLargeList, kFixedSizeList, kMap, kNull
  uint32_t width = 0;           ///< kFixedSizeBinary bytes; kFixedSizeList elements
  std::vector<LType> children;  ///< struct fields; list: values; map: keys, items
};

/// A logical value of an LType.
struct LValue {
  bool null = false;
  std::vector<uint8_t> bytes;  ///< flat: the stored bytes (LE; bool: one byte 0/1)
  std::vector<LValue> elems;   ///< struct: fields; lists: elements; map: keys
  std::vector<LValue> items;   ///< map: items
};

inline bool IsVarBinary(ColumnType t) {
  return t == ColumnType::kBinary || t == ColumnType::kString || t == ColumnType::kLargeBinary ||
         t == ColumnType::kLargeString;
}
inline bool IsLargeOffsets(ColumnType t) {
  return t == ColumnType::kLargeBinary || t == ColumnType::kLargeString ||
         t == ColumnType::kLargeList;
}
inline bool IsListLike(ColumnType t) {
  return t == ColumnType::kList || t == ColumnType::kLargeList || t == ColumnType::kMap;
}
/// Stored bytes per value of a flat fixed-width logical type (0: not fixed-width).
inline uint32_t ValueWidth(const LType& t) {
  if (t.type == ColumnType::kFixedSizeBinary) return t.width;
  return detail::FixedWidth(t.type);
}
inline bool IsFlat(const LType& t) {
  return t.type != ColumnType::kStruct && !IsListLike(t.type) &&
         t.type != ColumnType::kFixedSizeList && t.type != ColumnType::kNull;
}

// ------------------------------------------------------------------ values

inline LValue Null() { return LValue{true, {}, {}, {}}; }
inline LValue Bytes(std::vector<uint8_t> b) { return LValue{false, std::move(b), {}, {}}; }
inline LValue Str(const std::string& s) { return Bytes(std::vector<uint8_t>(s.begin(), s.end())); }
template <typename T>
LValue Scalar(T v) {
  std::vector<uint8_t> b(sizeof(T));
  std::memcpy(b.data(), &v, sizeof(T));
  return Bytes(std::move(b));
}
inline LValue Bool(bool v) { return Bytes({static_cast<uint8_t>(v ? 1 : 0)}); }
inline LValue Seq(std::vector<LValue> elems) { return LValue{false, {}, std::move(elems), {}}; }
inline LValue MapOf(std::vector<LValue> keys, std::vector<LValue> items) {
  return LValue{false, {}, std::move(keys), std::move(items)};
}

inline LType T(ColumnType t, uint32_t width = 0) { return LType{t, width, {}}; }
inline LType StructOf(std::vector<LType> fields) {
  return LType{ColumnType::kStruct, 0, std::move(fields)};
}
inline LType ListOf(LType v, ColumnType t = ColumnType::kList, uint32_t size = 0) {
  return LType{t, size, {std::move(v)}};
}
inline LType MapType(LType k, LType v) {
  return LType{ColumnType::kMap, 0, {std::move(k), std::move(v)}};
}

// ------------------------------------------------------------------ random

inline const std::vector<LType>& FlatTypes() {
  static const std::vector<LType> types = {T(ColumnType::kInt8),
                                           T(ColumnType::kUint8),
                                           T(ColumnType::kInt16),
                                           T(ColumnType::kUint16),
                                           T(ColumnType::kInt32),
                                           T(ColumnType::kUint32),
                                           T(ColumnType::kInt64),
                                           T(ColumnType::kUint64),
                                           T(ColumnType::kFloat16),
                                           T(ColumnType::kFloat32),
                                           T(ColumnType::kFloat64),
                                           T(ColumnType::kDecimal128),
                                           T(ColumnType::kFixedSizeBinary, 0),
                                           T(ColumnType::kFixedSizeBinary, 3),
                                           T(ColumnType::kFixedSizeBinary, 16),
                                           T(ColumnType::kBinary),
                                           T(ColumnType::kString),
                                           T(ColumnType::kLargeBinary),
                                           T(ColumnType::kLargeString),
                                           T(ColumnType::kBool)};
  return types;
}

inline LType RandomType(std::mt19937_64& rng, int depth) {
  const uint64_t pick = rng() % 16;
  if (depth <= 0 || pick < 6) {
    if (rng() % 25 == 0) return T(ColumnType::kNull);
    const auto& flat = FlatTypes();
    return flat[rng() % flat.size()];
  }
  switch (pick % 5) {
    case 0: {
      std::vector<LType> fields(rng() % 4);  // zero fields included
      for (auto& f : fields) f = RandomType(rng, depth - 1);
      return StructOf(std::move(fields));
    }
    case 1:
      return ListOf(RandomType(rng, depth - 1));
    case 2:
      return ListOf(RandomType(rng, depth - 1), ColumnType::kLargeList);
    case 3:
      return ListOf(RandomType(rng, depth - 1), ColumnType::kFixedSizeList,
                    static_cast<uint32_t>(rng() % 4));
    default: {
      const auto& flat = FlatTypes();
      return MapType(flat[rng() % flat.size()], RandomType(rng, depth - 1));
    }
  }
}

/// Random bytes of a flat type; floats often take special values (signed zeros,
/// NaNs with payloads), strings a small alphabet (so values repeat).
inline std::vector<uint8_t> RandomFlatBytes(const LType& t, std::mt19937_64& rng) {
  if (t.type == ColumnType::kBool) return {static_cast<uint8_t>(rng() % 2)};
  if (IsVarBinary(t.type)) {
    std::vector<uint8_t> b(rng() % 6 == 0 ? rng() % 40 : rng() % 4);
    for (auto& x : b) x = static_cast<uint8_t>('a' + rng() % 3);
    return b;
  }
  std::vector<uint8_t> b(ValueWidth(t));
  for (auto& x : b) x = static_cast<uint8_t>(rng() % 4 == 0 ? rng() : rng() % 3);
  const bool special = rng() % 4 == 0;
  if (special && t.type == ColumnType::kFloat16) {
    const uint16_t s[] = {0x0000, 0x8000, 0x7E00, 0xFE01, 0x7C01, 0x7C00};
    std::memcpy(b.data(), &s[rng() % 6], 2);
  } else if (special && t.type == ColumnType::kFloat32) {
    const uint32_t s[] = {0u, 0x80000000u, 0x7FC00000u, 0xFFC00001u, 0x7F800001u};
    std::memcpy(b.data(), &s[rng() % 5], 4);
  } else if (special && t.type == ColumnType::kFloat64) {
    const uint64_t s[] = {0ull, 0x8000000000000000ull, 0x7FF8000000000000ull, 0xFFF8000000000123ull,
                          0x7FF0000000000001ull};
    std::memcpy(b.data(), &s[rng() % 5], 8);
  }
  return b;
}

inline LValue RandomValue(const LType& t, std::mt19937_64& rng, double null_p) {
  std::bernoulli_distribution is_null(null_p);
  if (t.type == ColumnType::kNull || is_null(rng)) return Null();
  LValue v;
  switch (t.type) {
    case ColumnType::kStruct:
      for (const LType& f : t.children) v.elems.push_back(RandomValue(f, rng, null_p));
      return v;
    case ColumnType::kList:
    case ColumnType::kLargeList:
    case ColumnType::kFixedSizeList: {
      const uint64_t n = t.type == ColumnType::kFixedSizeList ? t.width : rng() % 5;
      for (uint64_t i = 0; i < n; ++i) v.elems.push_back(RandomValue(t.children[0], rng, null_p));
      return v;
    }
    case ColumnType::kMap: {
      const uint64_t n = rng() % 4;
      for (uint64_t i = 0; i < n; ++i) {
        v.elems.push_back(RandomValue(t.children[0], rng, 0.0));  // Arrow: keys are not null
        v.items.push_back(RandomValue(t.children[1], rng, null_p));
      }
      return v;
    }
    default:
      v.bytes = RandomFlatBytes(t, rng);
      return v;
  }
}

// ------------------------------------------------------------------ encoding

struct EncodeOptions {
  uint64_t max_lead = 5;        ///< physical garbage rows before a column's logical rows
  uint64_t max_tail = 3;        ///< extra logical rows after (children only)
  int dictionary_percent = 30;  ///< chance that a flat column is dictionary-encoded
  double garbage_null_p = 0.3;  ///< nulls among garbage rows
};

/// Encodes `values` as a column: `lead` garbage physical rows first (offset =
/// lead), then the values, then `tail` garbage rows that are logical rows of
/// the column (length = values + tail), as a parent's unused child rows are.
/// Children get their own random lead and tail; null slots hold garbage.
inline OwnedTree Encode(const LType& t, const std::vector<LValue>& values, uint64_t lead,
                        uint64_t tail, std::mt19937_64& rng, const EncodeOptions& o,
                        bool allow_dictionary = true);

namespace detail_encode {

inline void SetBitIn(std::vector<uint8_t>& bitmap, uint64_t bit, bool v) { SetBit(bitmap, bit, v); }

// Physical rows: `lead` garbage, the values, `tail` garbage.
inline std::vector<LValue> PhysicalRows(const LType& t, const std::vector<LValue>& values,
                                        uint64_t lead, uint64_t tail, std::mt19937_64& rng,
                                        const EncodeOptions& o) {
  std::vector<LValue> rows;
  for (uint64_t i = 0; i < lead; ++i) rows.push_back(RandomValue(t, rng, o.garbage_null_p));
  rows.insert(rows.end(), values.begin(), values.end());
  for (uint64_t i = 0; i < tail; ++i) rows.push_back(RandomValue(t, rng, o.garbage_null_p));
  return rows;
}

// The value a null slot of `t` stores (garbage with the right shape).
inline LValue Filler(const LType& t, std::mt19937_64& rng, const EncodeOptions& o) {
  LValue v = RandomValue(t, rng, 0.3);
  if (t.type == ColumnType::kNull) return v;
  // RandomValue may return a null: give the slot content anyway.
  if (v.null) v = RandomValue(t, rng, 0.0);
  return v;
}

// Turns `c` (whose validity is already set) into a dictionary column over the
// physical `rows`: every distinct value, some twice, some extras, some nulls,
// shuffled. A null row may instead be a valid index to a null entry.
inline void EncodeDictionary(const LType& t, const std::vector<LValue>& rows,
                             const std::vector<bool>& valid, std::mt19937_64& rng,
                             const EncodeOptions& o, OwnedTree& c) {
  const uint64_t n = rows.size();
  std::vector<LValue> dict;
  std::vector<bool> dict_valid;
  for (uint64_t i = 0; i < n; ++i) {
    dict.push_back(rows[i]);
    dict_valid.push_back(true);
    if (rng() % 4 == 0) {
      dict.push_back(rows[i]);
      dict_valid.push_back(true);
    }
  }
  for (int k = 0; k < 2; ++k) {
    dict.push_back(RandomValue(t, rng, 0.0));
    dict_valid.push_back(rng() % 2 == 0);
  }
  std::vector<uint64_t> perm(dict.size());
  for (uint64_t i = 0; i < perm.size(); ++i) perm[i] = i;
  std::shuffle(perm.begin(), perm.end(), rng);
  std::vector<LValue> shuffled;
  std::vector<uint64_t> position(dict.size());
  for (uint64_t i = 0; i < perm.size(); ++i) {
    LValue v = dict[perm[i]];
    if (!dict_valid[perm[i]]) v = Null();
    shuffled.push_back(v);
    position[perm[i]] = i;
  }
  // Entries that are null in the dictionary, for null rows to point at.
  std::vector<uint64_t> null_entries;
  for (uint64_t i = 0; i < shuffled.size(); ++i) {
    if (shuffled[i].null) null_entries.push_back(i);
  }
  std::vector<int64_t> index(n);
  // Row i points at any entry holding its value (values repeat in the dictionary).
  std::map<std::vector<uint8_t>, std::vector<uint64_t>> entries;
  for (uint64_t e = 0; e < shuffled.size(); ++e) {
    if (!shuffled[e].null) entries[shuffled[e].bytes].push_back(e);
  }
  for (uint64_t i = 0; i < n; ++i) {
    const std::vector<uint64_t>& matches = entries[rows[i].bytes];
    index[i] = static_cast<int64_t>(matches[rng() % matches.size()]);
    if (!valid[i]) {
      if (!null_entries.empty() && rng() % 2 == 0) {
        // A valid index to a null entry: the row is null through the dictionary.
        index[i] = static_cast<int64_t>(null_entries[rng() % null_entries.size()]);
        SetBit(c.validity, i, true);
      } else {
        index[i] = static_cast<int64_t>(rng() % 1000) - 500;  // garbage under a null index
      }
    }
  }
  const ColumnType index_types[] = {ColumnType::kInt8,   ColumnType::kUint8, ColumnType::kInt16,
                                    ColumnType::kUint16, ColumnType::kInt32, ColumnType::kUint32,
                                    ColumnType::kInt64,  ColumnType::kUint64};
  ColumnType it = index_types[rng() % 8];
  if (shuffled.size() > 120 && detail::FixedWidth(it) == 1) it = ColumnType::kInt32;
  if (shuffled.size() > 30000 && detail::FixedWidth(it) == 2) it = ColumnType::kInt32;
  c.type = ColumnType::kDictionary;
  c.index_type = it;
  const uint32_t iw = detail::FixedWidth(it);
  c.data.resize(n * iw);
  for (uint64_t i = 0; i < n; ++i) std::memcpy(&c.data[i * iw], &index[i], iw);
  c.children.push_back(
      Encode(t, shuffled, rng() % (o.max_lead + 1), rng() % (o.max_tail + 1), rng, o, false));
}

}  // namespace detail_encode

inline OwnedTree Encode(const LType& t, const std::vector<LValue>& values, uint64_t lead,
                        uint64_t tail, std::mt19937_64& rng, const EncodeOptions& o,
                        bool allow_dictionary) {
  using detail_encode::Filler;
  using detail_encode::PhysicalRows;
  OwnedTree c;
  c.type = t.type;
  c.offset = lead;
  c.length = values.size() + tail;
  std::vector<LValue> rows = PhysicalRows(t, values, lead, tail, rng, o);
  const uint64_t n = rows.size();
  if (t.type == ColumnType::kNull) return c;
  // Null slots store garbage content, as Arrow allows.
  bool any_null = false;
  std::vector<bool> valid(n);
  for (uint64_t i = 0; i < n; ++i) {
    valid[i] = !rows[i].null;
    any_null |= rows[i].null;
    if (rows[i].null) rows[i] = Filler(t, rng, o);
  }
  if (any_null || rng() % 3 == 0) {
    c.validity.assign(BitmapBytes(n) + rng() % 2, 0);
    for (uint64_t i = 0; i < n; ++i) SetBit(c.validity, i, valid[i]);
  }

  if (IsFlat(t) && allow_dictionary && static_cast<int>(rng() % 100) < o.dictionary_percent) {
    detail_encode::EncodeDictionary(t, rows, valid, rng, o, c);
    return c;
  }

  switch (t.type) {
    case ColumnType::kStruct:
      for (size_t f = 0; f < t.children.size(); ++f) {
        std::vector<LValue> field;
        for (const LValue& r : rows) field.push_back(r.elems[f]);
        // The field's logical row j is the struct's physical row j.
        c.children.push_back(Encode(t.children[f], field, rng() % (o.max_lead + 1),
                                    rng() % (o.max_tail + 1), rng, o));
      }
      return c;
    case ColumnType::kFixedSizeList: {
      std::vector<LValue> elems;
      for (const LValue& r : rows) elems.insert(elems.end(), r.elems.begin(), r.elems.end());
      c.byte_width = t.width;
      c.children.push_back(
          Encode(t.children[0], elems, rng() % (o.max_lead + 1), rng() % (o.max_tail + 1), rng, o));
      return c;
    }
    case ColumnType::kList:
    case ColumnType::kLargeList:
    case ColumnType::kMap: {
      std::vector<LValue> keys, items;
      std::vector<int64_t> offs{0};
      for (const LValue& r : rows) {
        keys.insert(keys.end(), r.elems.begin(), r.elems.end());
        items.insert(items.end(), r.items.begin(), r.items.end());
        offs.push_back(static_cast<int64_t>(keys.size()));
      }
      if (t.type == ColumnType::kLargeList) {
        c.large_offsets = offs;
      } else {
        c.offsets.assign(offs.begin(), offs.end());
      }
      c.children.push_back(
          Encode(t.children[0], keys, rng() % (o.max_lead + 1), rng() % (o.max_tail + 1), rng, o));
      if (t.type == ColumnType::kMap) {
        c.children.push_back(Encode(t.children[1], items, rng() % (o.max_lead + 1),
                                    rng() % (o.max_tail + 1), rng, o));
      }
      return c;
    }
    default:
      break;
  }
  // Flat.
  if (t.type == ColumnType::kBool) {
    c.data.assign(BitmapBytes(n) + rng() % 2, 0);
    for (uint64_t i = 0; i < n; ++i) SetBit(c.data, i, rows[i].bytes[0] != 0);
    return c;
  }
  if (IsVarBinary(t.type)) {
    std::vector<int64_t> offs{static_cast<int64_t>(rng() % 3)};  // data may start anywhere
    c.data.assign(static_cast<size_t>(offs[0]), 'z');
    for (const LValue& r : rows) {
      c.data.insert(c.data.end(), r.bytes.begin(), r.bytes.end());
      offs.push_back(static_cast<int64_t>(c.data.size()));
    }
    if (IsLargeOffsets(t.type)) {
      c.large_offsets = offs;
    } else {
      c.offsets.assign(offs.begin(), offs.end());
    }
    return c;
  }
  c.byte_width = t.type == ColumnType::kFixedSizeBinary ? t.width : 0;
  for (const LValue& r : rows) c.data.insert(c.data.end(), r.bytes.begin(), r.bytes.end());
  return c;
}

/// A top-level column of `values` with a random lead and no tail.
inline OwnedTree EncodeTop(const LType& t, const std::vector<LValue>& values, std::mt19937_64& rng,
                           const EncodeOptions& o = {}) {
  return Encode(t, values, rng() % (o.max_lead + 1), 0, rng, o);
}

// ------------------------------------------------------------------ the model

/// docs/hashing.md "Algorithm", written independently of the engine: the hash of
/// one logical value for width H, nullopt when the value is null.
template <typename H>
std::optional<H> ModelHash(const LType& t, const LValue& v) {
  using detail::CombineHash;
  if (v.null || t.type == ColumnType::kNull) return std::nullopt;
  auto xxh = [](const std::vector<uint8_t>& b) -> H {
    if constexpr (sizeof(H) == 8) {
      return detail::Xxh64Bytes(b.data(), b.size(), 0);
    } else {
      return detail::Xxh32Bytes(b.data(), b.size(), 0);
    }
  };
  auto fold = [&](const LType& et, const std::vector<LValue>& elems) -> H {
    H values = sizeof(H) == 8 ? H(0x27D4EB2F165667C5ull) : H(0x165667B1u);  // PRIME_5
    H nulls = sizeof(H) == 8 ? H(0x85EBCA77C2B2AE63ull) : H(0x27D4EB2Fu);   // PRIME_4
    bool any_null = false;
    for (uint64_t p = 0; p < elems.size(); ++p) {
      const std::optional<H> k = ModelHash<H>(et, elems[p]);
      if (k) {
        values = CombineHash(values, *k);
      } else {
        std::vector<uint8_t> pos(8);
        std::memcpy(pos.data(), &p, 8);
        nulls = CombineHash(nulls, xxh(pos));
        any_null = true;
      }
    }
    return any_null ? CombineHash(values, nulls) : values;
  };
  switch (t.type) {
    case ColumnType::kStruct: {
      if (t.children.empty()) return xxh({});
      std::optional<H> h;
      for (size_t f = 0; f < t.children.size(); ++f) {
        const std::optional<H> k = ModelHash<H>(t.children[f], v.elems[f]);
        if (!k) return std::nullopt;
        h = f == 0 ? *k : CombineHash(*h, *k);
      }
      return h;
    }
    case ColumnType::kList:
    case ColumnType::kLargeList:
    case ColumnType::kFixedSizeList:
      return fold(t.children[0], v.elems);
    case ColumnType::kMap:
      return CombineHash(fold(t.children[0], v.elems), fold(t.children[1], v.items));
    default:
      break;
  }
  std::vector<uint8_t> b = v.bytes;
  if (t.type == ColumnType::kFloat16) {
    uint16_t x;
    std::memcpy(&x, b.data(), 2);
    if ((x & 0x7FFF) == 0) x = 0;
    if ((x & 0x7FFF) > 0x7C00) x = 0x7E00;
    std::memcpy(b.data(), &x, 2);
  } else if (t.type == ColumnType::kFloat32) {
    uint32_t x;
    std::memcpy(&x, b.data(), 4);
    if ((x & 0x7FFFFFFFu) == 0) x = 0;
    if ((x & 0x7FFFFFFFu) > 0x7F800000u) x = 0x7FC00000u;
    std::memcpy(b.data(), &x, 4);
  } else if (t.type == ColumnType::kFloat64) {
    uint64_t x;
    std::memcpy(&x, b.data(), 8);
    if ((x & 0x7FFFFFFFFFFFFFFFull) == 0) x = 0;
    if ((x & 0x7FFFFFFFFFFFFFFFull) > 0x7FF0000000000000ull) x = 0x7FF8000000000000ull;
    std::memcpy(b.data(), &x, 8);
  }
  return xxh(b);
}

/// The model's composite row hash over columns (nullopt: the row is null).
template <typename H>
std::optional<H> ModelRow(const std::vector<LType>& types,
                          const std::vector<std::vector<LValue>>& columns, uint64_t row) {
  std::optional<H> h;
  for (size_t c = 0; c < types.size(); ++c) {
    const std::optional<H> k = ModelHash<H>(types[c], columns[c][row]);
    if (!k) return std::nullopt;
    h = c == 0 ? *k : detail::CombineHash(*h, *k);
  }
  return h;
}

}  // namespace gpujoin::engine::testing
