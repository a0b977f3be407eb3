// A test model of Hash columns: an owned column tree in Arrow's
// physical layout that becomes both a gpujoin.v1.HashColumn (ToWire) and an
// engine::HashColumn (ToEngine, written here independently of the server's
// decoder), random trees of every type to a given depth, and the layout
// transformations the properties need (a child's buffers padded in front with
// its offset moved past the padding; a dictionary decoded into its values).
#pragma once

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gpujoin/engine/hashing.hpp"
#include "gpujoin/v1/gpujoin.pb.h"

namespace gpujoin::server::testing {

/// One column node with owned buffers. `offsets32` / `offsets64` hold the
/// int32 / int64 offsets of the types that have them.
struct ModelColumn {
  v1::ColumnType type = v1::COLUMN_TYPE_UINT32;
  std::string data;
  std::vector<int32_t> offsets32;
  std::vector<int64_t> offsets64;
  std::string validity;  ///< empty = all valid
  uint64_t offset = 0;
  uint64_t length = 0;
  uint32_t byte_width = 0;
  v1::ColumnType index_type = v1::COLUMN_TYPE_UNSPECIFIED;
  std::vector<ModelColumn> children;

  uint64_t end() const { return offset + length; }
  bool Valid(uint64_t physical) const {
    return validity.empty() ||
           ((static_cast<uint8_t>(validity[physical / 8]) >> (physical % 8)) & 1);
  }
};

/// Bytes per value of a fixed-width wire type (0 for the others).
inline uint32_t FixedWidth(v1::ColumnType t) {
  switch (t) {
    case v1::COLUMN_TYPE_INT8:
    case v1::COLUMN_TYPE_UINT8:
      return 1;
    case v1::COLUMN_TYPE_INT16:
    case v1::COLUMN_TYPE_UINT16:
    case v1::COLUMN_TYPE_FLOAT16:
      return 2;
    case v1::COLUMN_TYPE_UINT32:
    case v1::COLUMN_TYPE_INT32:
    case v1::COLUMN_TYPE_FLOAT32:
      return 4;
    case v1::COLUMN_TYPE_UINT64:
    case v1::COLUMN_TYPE_INT64:
    case v1::COLUMN_TYPE_FLOAT64:
      return 8;
    case v1::COLUMN_TYPE_DECIMAL128:
      return 16;
    default:
      return 0;
  }
}

inline bool IsBinaryLike(v1::ColumnType t) {
  return t == v1::COLUMN_TYPE_BINARY || t == v1::COLUMN_TYPE_STRING ||
         t == v1::COLUMN_TYPE_LARGE_BINARY || t == v1::COLUMN_TYPE_LARGE_STRING;
}
inline bool IsLarge(v1::ColumnType t) {
  return t == v1::COLUMN_TYPE_LARGE_BINARY || t == v1::COLUMN_TYPE_LARGE_STRING ||
         t == v1::COLUMN_TYPE_LARGE_LIST;
}
inline bool HasOffsets(v1::ColumnType t) {
  return IsBinaryLike(t) || t == v1::COLUMN_TYPE_LIST || t == v1::COLUMN_TYPE_LARGE_LIST ||
         t == v1::COLUMN_TYPE_MAP;
}

template <typename T>
std::string Bytes(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

inline v1::HashColumn ToWire(const ModelColumn& m) {
  v1::HashColumn c;
  c.set_type(m.type);
  c.set_data(m.data);
  if (!m.offsets32.empty()) c.set_offsets(Bytes(m.offsets32));
  if (!m.offsets64.empty()) c.set_offsets(Bytes(m.offsets64));
  c.set_validity(m.validity);
  c.set_offset(m.offset);
  c.set_length(m.length);
  c.set_byte_width(m.byte_width);
  c.set_index_type(m.index_type);
  for (const ModelColumn& k : m.children) *c.add_children() = ToWire(k);
  return c;
}

/// The engine type of a wire type, spelled out type by type (not by the
/// numbering), so a mix-up in the server's mapping shows.
inline engine::ColumnType EngineType(v1::ColumnType t) {
  using engine::ColumnType;
  switch (t) {
    case v1::COLUMN_TYPE_UINT32:
      return ColumnType::kUint32;
    case v1::COLUMN_TYPE_INT32:
      return ColumnType::kInt32;
    case v1::COLUMN_TYPE_UINT64:
      return ColumnType::kUint64;
    case v1::COLUMN_TYPE_INT64:
      return ColumnType::kInt64;
    case v1::COLUMN_TYPE_FLOAT32:
      return ColumnType::kFloat32;
    case v1::COLUMN_TYPE_FLOAT64:
      return ColumnType::kFloat64;
    case v1::COLUMN_TYPE_BINARY:
      return ColumnType::kBinary;
    case v1::COLUMN_TYPE_BOOL:
      return ColumnType::kBool;
    case v1::COLUMN_TYPE_STRING:
      return ColumnType::kString;
    case v1::COLUMN_TYPE_INT8:
      return ColumnType::kInt8;
    case v1::COLUMN_TYPE_UINT8:
      return ColumnType::kUint8;
    case v1::COLUMN_TYPE_INT16:
      return ColumnType::kInt16;
    case v1::COLUMN_TYPE_UINT16:
      return ColumnType::kUint16;
    case v1::COLUMN_TYPE_FLOAT16:
      return ColumnType::kFloat16;
    case v1::COLUMN_TYPE_DECIMAL128:
      return ColumnType::kDecimal128;
    case v1::COLUMN_TYPE_FIXED_SIZE_BINARY:
      return ColumnType::kFixedSizeBinary;
    case v1::COLUMN_TYPE_LARGE_BINARY:
      return ColumnType::kLargeBinary;
    case v1::COLUMN_TYPE_LARGE_STRING:
      return ColumnType::kLargeString;
    case v1::COLUMN_TYPE_DICTIONARY:
      return ColumnType::kDictionary;
    case v1::COLUMN_TYPE_STRUCT:
      return ColumnType::kStruct;
    case v1::COLUMN_TYPE_LIST:
      return ColumnType::kList;
    case v1::COLUMN_TYPE_LARGE_LIST:
      return ColumnType::kLargeList;
    case v1::COLUMN_TYPE_FIXED_SIZE_LIST:
      return ColumnType::kFixedSizeList;
    case v1::COLUMN_TYPE_MAP:
      return ColumnType::kMap;
    case v1::COLUMN_TYPE_NULL:
      return ColumnType::kNull;
    default:
      return ColumnType::kUint32;
  }
}

/// An engine view of `m` (valid while `m` lives unchanged).
inline engine::HashColumn ToEngine(const ModelColumn& m) {
  engine::HashColumn c;
  c.type = EngineType(m.type);
  c.data = std::span(reinterpret_cast<const uint8_t*>(m.data.data()), m.data.size());
  c.offsets = m.offsets32;
  c.large_offsets = m.offsets64;
  c.validity = std::span(reinterpret_cast<const uint8_t*>(m.validity.data()), m.validity.size());
  c.offset = m.offset;
  c.length = m.length;
  c.byte_width = m.byte_width;
  if (m.type == v1::COLUMN_TYPE_DICTIONARY) {
    c.index_type = m.index_type == v1::COLUMN_TYPE_UNSPECIFIED ? engine::ColumnType::kInt32
                                                               : EngineType(m.index_type);
  }
  for (const ModelColumn& k : m.children) c.children.push_back(ToEngine(k));
  return c;
}

/// Random column trees. Every node gets a random offset (0-3) and, with
/// probability 1/2, a validity bitmap with about one null in four.
class ModelGenerator {
 public:
  explicit ModelGenerator(uint64_t seed) : rng_(seed) {}

  uint64_t Uniform(uint64_t lo, uint64_t hi) {  // [lo, hi]
    return std::uniform_int_distribution<uint64_t>(lo, hi)(rng_);
  }

  /// A column of `length` logical rows; nested up to `depth` more levels.
  ModelColumn Column(uint64_t length, int depth) {
    static const v1::ColumnType kFlat[] = {
        v1::COLUMN_TYPE_UINT32,       v1::COLUMN_TYPE_INT32,
        v1::COLUMN_TYPE_UINT64,       v1::COLUMN_TYPE_INT64,
        v1::COLUMN_TYPE_FLOAT32,      v1::COLUMN_TYPE_FLOAT64,
        v1::COLUMN_TYPE_BINARY,       v1::COLUMN_TYPE_BOOL,
        v1::COLUMN_TYPE_STRING,       v1::COLUMN_TYPE_INT8,
        v1::COLUMN_TYPE_UINT8,        v1::COLUMN_TYPE_INT16,
        v1::COLUMN_TYPE_UINT16,       v1::COLUMN_TYPE_FLOAT16,
        v1::COLUMN_TYPE_DECIMAL128,   v1::COLUMN_TYPE_FIXED_SIZE_BINARY,
        v1::COLUMN_TYPE_LARGE_BINARY, v1::COLUMN_TYPE_LARGE_STRING,
        v1::COLUMN_TYPE_NULL,         v1::COLUMN_TYPE_DICTIONARY};
    static const v1::ColumnType kNested[] = {v1::COLUMN_TYPE_STRUCT, v1::COLUMN_TYPE_LIST,
                                             v1::COLUMN_TYPE_LARGE_LIST,
                                             v1::COLUMN_TYPE_FIXED_SIZE_LIST, v1::COLUMN_TYPE_MAP};
    v1::ColumnType t;
    if (depth > 0 && Uniform(0, 2) != 0) {
      t = kNested[Uniform(0, std::size(kNested) - 1)];
    } else {
      t = kFlat[Uniform(0, std::size(kFlat) - 1)];
    }
    return Of(t, length, depth);
  }

  /// A flat column (no dictionary, no nesting) of type `t`.
  ModelColumn Flat(v1::ColumnType t, uint64_t length, bool nulls) {
    ModelColumn m;
    m.type = t;
    m.offset = Uniform(0, 3);
    m.length = length;
    const uint64_t rows = m.end();
    if (nulls && t != v1::COLUMN_TYPE_NULL) m.validity = RandomBits(rows, 3);
    if (const uint32_t w = FixedWidth(t)) {
      m.data = RandomBytes(rows * w);
    } else if (t == v1::COLUMN_TYPE_BOOL) {
      m.data = RandomBits(rows, 1);
    } else if (t == v1::COLUMN_TYPE_FIXED_SIZE_BINARY) {
      m.byte_width = static_cast<uint32_t>(Uniform(0, 3));
      m.data = RandomBytes(rows * m.byte_width);
    } else if (IsBinaryLike(t)) {
      std::vector<int64_t> offsets = {static_cast<int64_t>(Uniform(0, 2))};
      for (uint64_t r = 0; r < rows; ++r) offsets.push_back(offsets.back() + Uniform(0, 4));
      m.data = RandomBytes(offsets.back() + Uniform(0, 2));
      SetOffsets(&m, offsets);
    }
    return m;
  }

  ModelColumn Of(v1::ColumnType t, uint64_t length, int depth) {
    const bool nulls = Uniform(0, 1) == 1;
    if (t == v1::COLUMN_TYPE_DICTIONARY) return Dictionary(length, nulls);
    if (t != v1::COLUMN_TYPE_STRUCT && t != v1::COLUMN_TYPE_LIST &&
        t != v1::COLUMN_TYPE_LARGE_LIST && t != v1::COLUMN_TYPE_FIXED_SIZE_LIST &&
        t != v1::COLUMN_TYPE_MAP) {
      return Flat(t, length, nulls);
    }
    ModelColumn m;
    m.type = t;
    m.offset = Uniform(0, 3);
    m.length = length;
    const uint64_t rows = m.end();
    if (nulls) m.validity = RandomBits(rows, 3);
    if (t == v1::COLUMN_TYPE_STRUCT) {
      const uint64_t fields = Uniform(1, 3);
      for (uint64_t f = 0; f < fields; ++f)
        m.children.push_back(Column(rows + Uniform(0, 2), depth - 1));
    } else if (t == v1::COLUMN_TYPE_FIXED_SIZE_LIST) {
      m.byte_width = static_cast<uint32_t>(Uniform(0, 3));
      m.children.push_back(Column(rows * m.byte_width + Uniform(0, 2), depth - 1));
    } else {
      std::vector<int64_t> offsets = {static_cast<int64_t>(Uniform(0, 2))};
      for (uint64_t r = 0; r < rows; ++r) offsets.push_back(offsets.back() + Uniform(0, 3));
      const uint64_t values = offsets.back() + Uniform(0, 2);
      SetOffsets(&m, offsets);
      if (t == v1::COLUMN_TYPE_MAP) {
        // Arrow's maps have non-null keys.
        static const v1::ColumnType kKeys[] = {v1::COLUMN_TYPE_INT32, v1::COLUMN_TYPE_STRING,
                                               v1::COLUMN_TYPE_UINT8};
        m.children.push_back(Flat(kKeys[Uniform(0, 2)], values, false));
        m.children.push_back(Column(values, depth - 1));
      } else {
        m.children.push_back(Column(values, depth - 1));
      }
    }
    return m;
  }

  /// A dictionary column: random indices (every index width) into a flat
  /// dictionary with nulls; null index slots hold out-of-range garbage.
  ModelColumn Dictionary(uint64_t length, bool nulls) {
    static const v1::ColumnType kIndex[] = {
        v1::COLUMN_TYPE_UNSPECIFIED, v1::COLUMN_TYPE_INT8,   v1::COLUMN_TYPE_UINT8,
        v1::COLUMN_TYPE_INT16,       v1::COLUMN_TYPE_UINT16, v1::COLUMN_TYPE_INT32,
        v1::COLUMN_TYPE_UINT32,      v1::COLUMN_TYPE_INT64,  v1::COLUMN_TYPE_UINT64};
    static const v1::ColumnType kValues[] = {v1::COLUMN_TYPE_INT64,
                                             v1::COLUMN_TYPE_STRING,
                                             v1::COLUMN_TYPE_FLOAT32,
                                             v1::COLUMN_TYPE_BOOL,
                                             v1::COLUMN_TYPE_FIXED_SIZE_BINARY,
                                             v1::COLUMN_TYPE_LARGE_BINARY,
                                             v1::COLUMN_TYPE_INT8};
    ModelColumn m;
    m.type = v1::COLUMN_TYPE_DICTIONARY;
    m.index_type = kIndex[Uniform(0, std::size(kIndex) - 1)];
    m.offset = Uniform(0, 3);
    m.length = length;
    const uint64_t rows = m.end();
    if (nulls) m.validity = RandomBits(rows, 3);
    const uint64_t entries = Uniform(1, 6);
    m.children.push_back(Flat(kValues[Uniform(0, std::size(kValues) - 1)], entries, true));
    const uint32_t w = IndexWidth(m.index_type);
    for (uint64_t r = 0; r < rows; ++r) {
      const uint64_t v = m.Valid(r) ? Uniform(0, entries - 1) : 100 + Uniform(0, 20);
      m.data.append(reinterpret_cast<const char*>(&v), w);
    }
    return m;
  }

  static uint32_t IndexWidth(v1::ColumnType t) {
    return t == v1::COLUMN_TYPE_UNSPECIFIED ? 4 : FixedWidth(t);
  }

  std::string RandomBytes(uint64_t n) {
    std::string s(n, '\0');
    for (char& c : s) c = static_cast<char>(Uniform(0, 255));
    // Small alphabets make equal values (and equal rows) common.
    if (Uniform(0, 1))
      for (char& c : s) c = static_cast<char>(c & 3);
    return s;
  }

  /// A bitmap of `bits` bits, each 0 with probability 1 / (1 + one_in) (bits past `bits` 0).
  std::string RandomBits(uint64_t bits, uint64_t one_in) {
    std::string s((bits + 7) / 8, '\0');
    for (uint64_t i = 0; i < bits; ++i) {
      if (Uniform(0, one_in) != 0) s[i / 8] |= static_cast<char>(1u << (i % 8));
    }
    return s;
  }

  std::mt19937_64& rng() { return rng_; }

 private:
  static void SetOffsets(ModelColumn* m, const std::vector<int64_t>& offsets) {
    if (IsLarge(m->type)) {
      m->offsets64 = offsets;
    } else {
      m->offsets32.assign(offsets.begin(), offsets.end());
    }
  }

  std::mt19937_64 rng_;
};

/// Bits [0, bits) of `bitmap` moved up by `pad`, the first `pad` bits from `fill`.
inline std::string ShiftBits(const std::string& bitmap, uint64_t bits, uint64_t pad,
                             std::mt19937_64& fill) {
  std::string out((bits + pad + 7) / 8, '\0');
  for (uint64_t i = 0; i < bits + pad; ++i) {
    const bool b = i < pad ? (fill() & 1)
                           : ((static_cast<uint8_t>(bitmap[(i - pad) / 8]) >> ((i - pad) % 8)) & 1);
    if (b) out[i / 8] |= static_cast<char>(1u << (i % 8));
  }
  return out;
}

/// `m` with `pad` physical rows of garbage in front of its own buffers and its
/// offset moved past them: the same logical rows, hence the same hashes. Applied
/// to every node whose children are addressed by value (offsets, indices) or
/// that has none; a struct's or fixed-size list's own rows stay put (their
/// children are addressed by the parent's physical row), but their children
/// are padded in turn.
inline ModelColumn PadEveryNode(const ModelColumn& m, uint64_t pad, std::mt19937_64& fill) {
  ModelColumn p = m;
  for (ModelColumn& k : p.children) k = PadEveryNode(k, pad, fill);
  if (m.type == v1::COLUMN_TYPE_STRUCT || m.type == v1::COLUMN_TYPE_FIXED_SIZE_LIST) return p;
  const uint64_t rows = m.end();
  if (!m.validity.empty()) p.validity = ShiftBits(m.validity, rows, pad, fill);
  if (const uint32_t w = FixedWidth(m.type)) {
    std::string garbage(pad * w, '\0');
    for (char& c : garbage) c = static_cast<char>(fill());
    p.data = garbage + m.data;
  } else if (m.type == v1::COLUMN_TYPE_BOOL) {
    p.data = ShiftBits(m.data, rows, pad, fill);
  } else if (m.type == v1::COLUMN_TYPE_FIXED_SIZE_BINARY) {
    std::string garbage(pad * m.byte_width, '\0');
    for (char& c : garbage) c = static_cast<char>(fill());
    p.data = garbage + m.data;
  } else if (m.type == v1::COLUMN_TYPE_DICTIONARY) {
    // Padded rows may be valid: they index entry 0.
    p.data = std::string(pad * ModelGenerator::IndexWidth(m.index_type), '\0') + m.data;
  } else if (HasOffsets(m.type)) {
    // Padded rows are empty (their offsets repeat the first one).
    if (!m.offsets32.empty()) p.offsets32.insert(p.offsets32.begin(), pad, m.offsets32.front());
    if (!m.offsets64.empty()) p.offsets64.insert(p.offsets64.begin(), pad, m.offsets64.front());
  }
  p.offset = m.offset + pad;
  return p;
}

}  // namespace gpujoin::server::testing
