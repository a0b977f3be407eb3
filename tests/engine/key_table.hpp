// Key columns owned by a test and the contract's model of a key-schema
// index (shared by tests/engine/key_columns_test.cpp and the CUDA-vs-CPU
// tests/gpu/key_columns_differential_test.cpp).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "gpujoin/common/bitmap.hpp"
#include "gpujoin/engine/key_columns.hpp"

namespace gpujoin::engine {

// One key column owned by the test: string/binary values or int64/int32/uint32/
// uint64 values, nulls where `null` is set.
struct TestColumn {
  ColumnType type = ColumnType::kString;
  std::vector<std::string> strings;
  std::vector<int64_t> ints;
  std::vector<bool> null;

  // Arrow buffers, made by View().
  std::string bytes;
  std::vector<int32_t> offsets;
  std::vector<uint8_t> data;
  std::vector<uint8_t> validity;

  size_t rows() const { return IsVariableWidth(type) ? strings.size() : ints.size(); }

  // The column as a HashColumn; rows [first, first + n) when given.
  HashColumn View(size_t first = 0, std::optional<size_t> n = std::nullopt) {
    const size_t total = rows();
    bytes.clear();
    offsets.assign(1, 0);
    data.clear();
    validity.assign(BitmapBytes(total), 0);
    bool any_null = false;
    for (size_t r = 0; r < total; ++r) {
      const bool is_null = r < null.size() && null[r];
      any_null = any_null || is_null;
      SetBit(validity.data(), r, !is_null);
      if (IsVariableWidth(type)) {
        bytes += strings[r];
        offsets.push_back(static_cast<int32_t>(bytes.size()));
      } else {
        const size_t width = ColumnWidth(type);
        const uint64_t v = static_cast<uint64_t>(ints[r]);
        for (size_t b = 0; b < width; ++b) data.push_back(static_cast<uint8_t>(v >> (8 * b)));
      }
    }
    HashColumn c;
    c.type = type;
    if (IsVariableWidth(type)) {
      c.data = std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
      c.offsets = offsets;
    } else {
      c.data = data;
    }
    if (any_null) c.validity = validity;
    c.offset = first;
    c.length = n.value_or(total - first);
    return c;
  }
  // The model's spelling of row r's value.
  std::string Cell(size_t r) const {
    if (IsVariableWidth(type)) return strings[r];
    return std::to_string(ints[r]);
  }
};

// A key of the model: one cell per column, tagged with its length so that
// ("ab", "c") and ("a", "bc") differ.
using ModelKey = std::vector<std::string>;

struct Table {
  std::vector<TestColumn> columns;
  size_t rows() const { return columns.empty() ? 0 : columns[0].rows(); }
  bool Null(size_t r) const {
    for (const TestColumn& c : columns) {
      if (r < c.null.size() && c.null[r]) return true;
    }
    return false;
  }
  ModelKey Key(size_t r) const {
    ModelKey k;
    for (const TestColumn& c : columns) k.push_back(c.Cell(r));
    return k;
  }
  KeyColumns View(size_t first = 0, std::optional<size_t> n = std::nullopt) {
    KeyColumns keys;
    for (TestColumn& c : columns) keys.columns.push_back(c.View(first, n));
    return keys;
  }
  std::vector<ColumnType> Types() const {
    std::vector<ColumnType> t;
    for (const TestColumn& c : columns) t.push_back(c.type);
    return t;
  }
};

// The contract's answers: per key its rows in source order.
inline std::map<ModelKey, std::vector<uint32_t>> Model(const Table& t) {
  std::map<ModelKey, std::vector<uint32_t>> m;
  for (size_t r = 0; r < t.rows(); ++r) {
    if (!t.Null(r)) m[t.Key(r)].push_back(static_cast<uint32_t>(r));
  }
  return m;
}

inline TestColumn Strings(std::vector<std::string> v, std::vector<bool> null = {}) {
  TestColumn c;
  c.type = ColumnType::kString;
  c.strings = std::move(v);
  c.null = std::move(null);
  return c;
}
inline TestColumn Ints(ColumnType type, std::vector<int64_t> v, std::vector<bool> null = {}) {
  TestColumn c;
  c.type = type;
  c.ints = std::move(v);
  c.null = std::move(null);
  return c;
}

}  // namespace gpujoin::engine
