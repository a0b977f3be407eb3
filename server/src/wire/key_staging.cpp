#include "wire/key_staging.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "gpujoin/common/bitmap.hpp"

namespace gpujoin::server {
namespace {

// The capacity a staged buffer gets for `need` elements: 1.5x growth, as the
// payload's staging (so each byte is copied a bounded number of times).
size_t Grown(size_t capacity, size_t need) {
  return need <= capacity ? capacity : std::max(need, capacity + capacity / 2);
}

template <typename T>
uint64_t GrowthOf(const std::vector<T>& v, size_t need) {
  return (Grown(v.capacity(), need) - v.capacity()) * sizeof(T);
}

template <typename T>
void ReserveGrown(std::vector<T>& v, size_t need) {
  const size_t capacity = Grown(v.capacity(), need);
  if (capacity > v.capacity()) v.reserve(capacity);
}

// The value bytes rows [0, length) of variable-width column `c` cover.
uint64_t StringBytes(const engine::HashColumn& c) {
  if (c.length == 0) return 0;
  return static_cast<uint64_t>(c.offsets[c.offset + c.length] - c.offsets[c.offset]);
}

}  // namespace

void KeyStaging::Declare(std::vector<engine::ColumnType> types) {
  columns_.clear();
  for (engine::ColumnType type : types) {
    Column c;
    c.type = type;
    columns_.push_back(std::move(c));
  }
  Clear();
}

absl::StatusOr<uint64_t> KeyStaging::GrowthBytes(const engine::KeyColumns& keys,
                                                 std::string_view field) const {
  const uint64_t rows = rows_ + keys.rows();
  uint64_t bytes = 0;
  for (size_t i = 0; i < columns_.size() && i < keys.columns.size(); ++i) {
    const Column& c = columns_[i];
    const engine::HashColumn& k = keys.columns[i];
    if (engine::IsVariableWidth(c.type)) {
      const uint64_t data = c.data.size() + StringBytes(k);
      if (data > static_cast<uint64_t>(std::numeric_limits<int32_t>::max())) {
        return absl::InvalidArgumentError(absl::StrCat(
            std::string(field), ".key_columns[", i, "]: the build's key column ", i, " would hold ", data,
            " bytes of values, more than 2^31 - 1 (its int32 offsets); split the input into "
            "several indexes"));
      }
      bytes += GrowthOf(c.data, data) + GrowthOf(c.offsets, rows + 1);
    } else {
      bytes += GrowthOf(c.data, rows * engine::ColumnWidth(c.type));
    }
    if (c.nullable || !k.validity.empty()) bytes += GrowthOf(c.validity, engine::BitmapBytes(rows));
  }
  return bytes;
}

void KeyStaging::Append(const engine::KeyColumns& keys) {
  const uint64_t added = keys.rows();
  const uint64_t rows = rows_ + added;
  for (size_t i = 0; i < columns_.size() && i < keys.columns.size(); ++i) {
    Column& c = columns_[i];
    const engine::HashColumn& k = keys.columns[i];
    if (engine::IsVariableWidth(c.type)) {
      const uint64_t bytes = StringBytes(k);
      ReserveGrown(c.data, c.data.size() + bytes);
      ReserveGrown(c.offsets, rows + 1);
      const int32_t first = added == 0 ? 0 : k.offsets[k.offset];
      if (bytes != 0) c.data.insert(c.data.end(), k.data.data() + first, k.data.data() + first + bytes);
      // GrowthBytes kept the column's bytes within int32.
      const int32_t base = c.offsets.back();
      for (uint64_t r = 1; r <= added; ++r) {
        c.offsets.push_back(base + (k.offsets[k.offset + r] - first));
      }
    } else {
      const size_t width = engine::ColumnWidth(c.type);
      ReserveGrown(c.data, rows * width);
      const uint8_t* from = k.data.data() + k.offset * width;
      c.data.insert(c.data.end(), from, from + added * width);
    }
    if (!k.validity.empty() && !c.nullable) {
      // The column's first null: every row before it was valid.
      c.nullable = true;
      c.validity.assign(engine::BitmapBytes(rows_), 0xff);
    }
    if (c.nullable) {
      ReserveGrown(c.validity, engine::BitmapBytes(rows));
      c.validity.resize(engine::BitmapBytes(rows), 0);
      for (uint64_t r = 0; r < added; ++r) {
        const bool valid = k.validity.empty() || BitAt(k.validity, k.offset + r);
        SetBit(c.validity.data(), rows_ + r, valid);
      }
    }
  }
  rows_ = rows;
}

engine::KeyColumns KeyStaging::Slice(uint64_t first, uint64_t rows) const {
  engine::KeyColumns keys;
  for (const Column& c : columns_) {
    engine::HashColumn h;
    h.type = c.type;
    h.data = std::span<const uint8_t>(c.data.data(), c.data.size());
    if (engine::IsVariableWidth(c.type)) {
      h.offsets = std::span<const int32_t>(c.offsets.data(), c.offsets.size());
    }
    if (c.nullable) h.validity = std::span<const uint8_t>(c.validity.data(), c.validity.size());
    h.offset = first;
    h.length = rows;
    keys.columns.push_back(h);
  }
  return keys;
}

uint64_t KeyStaging::bytes() const {
  uint64_t bytes = 0;
  for (const Column& c : columns_) {
    bytes += c.data.capacity() + c.offsets.capacity() * sizeof(int32_t) + c.validity.capacity();
  }
  return bytes;
}

void KeyStaging::Clear() {
  for (Column& c : columns_) {
    std::vector<uint8_t>().swap(c.data);
    std::vector<int32_t>().swap(c.offsets);
    std::vector<uint8_t>().swap(c.validity);
    c.nullable = false;
    if (engine::IsVariableWidth(c.type)) c.offsets.push_back(0);
  }
  rows_ = 0;
}

}  // namespace gpujoin::server
