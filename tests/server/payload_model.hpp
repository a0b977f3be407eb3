// A reference model of payload columns for the server tests: a table
// of typed cells (nulls included), wire Column chunks cut from it at any row
// range, and a strict reader of result Columns that checks the wire layout
// (sizes, offsets, validity present exactly when null_count > 0, bits past the
// rows zero) while it decodes them back into cells; the reassembly of a join's
// continuation messages into whole responses.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "wire/column_codec.hpp"
#include "gpujoin/v1/gpujoin.pb.h"

namespace gpujoin::server::testing {

/// One value: its bytes (fixed width: little-endian; BOOL: "\0" or "\1"; STRING
/// and BINARY: the value bytes), or nullopt for null.
using Cell = std::optional<std::string>;

/// Bytes per value of a fixed-width wire type; 0 for BOOL, BINARY and STRING.
inline size_t WireWidth(v1::ColumnType type) {
  switch (type) {
    case v1::COLUMN_TYPE_UINT32:
    case v1::COLUMN_TYPE_INT32:
    case v1::COLUMN_TYPE_FLOAT32:
      return 4;
    case v1::COLUMN_TYPE_UINT64:
    case v1::COLUMN_TYPE_INT64:
    case v1::COLUMN_TYPE_FLOAT64:
      return 8;
    default:
      return 0;
  }
}

inline bool IsVarWidth(v1::ColumnType type) {
  return type == v1::COLUMN_TYPE_STRING || type == v1::COLUMN_TYPE_BINARY;
}

/// The little-endian bytes of `v`.
template <typename T>
std::string Bytes(T v) {
  std::string s(sizeof(T), '\0');
  std::memcpy(s.data(), &v, sizeof(T));
  return s;
}

/// A named column of cells.
struct ModelColumn {
  std::string name;
  v1::ColumnType type = v1::COLUMN_TYPE_INT64;
  std::vector<Cell> cells;
};

/// Random cells of `type`: about `null_percent`% null; strings of 0..max_len bytes
/// (STRING: ASCII and multi-byte UTF-8; BINARY: any bytes).
inline std::vector<Cell> RandomCells(v1::ColumnType type, size_t rows, std::mt19937_64& rng,
                                     int null_percent = 20, size_t max_len = 12) {
  std::vector<Cell> cells(rows);
  for (Cell& c : cells) {
    if (static_cast<int>(rng() % 100) < null_percent) continue;
    const size_t width = WireWidth(type);
    if (width != 0) {
      std::string b(width, '\0');
      for (char& ch : b) ch = static_cast<char>(rng());
      c = b;
    } else if (type == v1::COLUMN_TYPE_BOOL) {
      c = std::string(1, static_cast<char>(rng() & 1));
    } else {
      const size_t len = rng() % (max_len + 1);
      std::string s;
      while (s.size() < len) {
        if (type == v1::COLUMN_TYPE_BINARY) {
          s.push_back(static_cast<char>(rng()));
        } else if (rng() % 4 == 0) {
          s += "\xc3\xa4";  // a two-byte UTF-8 character
        } else if (rng() % 8 == 0) {
          s += "\xe2\x82\xac";  // three bytes
        } else {
          s.push_back(static_cast<char>('a' + rng() % 26));
        }
      }
      c = s;
    }
  }
  return cells;
}

/// Rows [first, first + rows) of `column` as a wire chunk. `validity`: always send
/// a bitmap (also without nulls); else only when a row is null. `garbage_bits`:
/// set the bitmap bits past the rows (the server must ignore them).
inline v1::Column WireChunk(const ModelColumn& column, size_t first, size_t rows,
                            bool validity = false, bool garbage_bits = false) {
  v1::Column c;
  c.set_name(column.name);
  c.set_type(column.type);
  c.set_length(rows);
  std::string bitmap((rows + 7) / 8, garbage_bits ? '\xff' : '\0');
  if (garbage_bits && rows % 8 != 0) bitmap.back() = static_cast<char>(0xff);
  bool nulls = false;
  std::string data, offsets;
  const size_t width = WireWidth(column.type);
  std::string bools((rows + 7) / 8, garbage_bits ? '\xff' : '\0');
  int32_t offset = 3;  // offsets need not start at 0
  if (IsVarWidth(column.type)) {
    data = "xyz";
    offsets += Bytes<int32_t>(offset);
  }
  for (size_t i = 0; i < rows; ++i) {
    const Cell& cell = column.cells[first + i];
    const bool valid = cell.has_value();
    if (valid) {
      bitmap[i / 8] = static_cast<char>(bitmap[i / 8] | (1 << (i % 8)));
    } else {
      bitmap[i / 8] = static_cast<char>(bitmap[i / 8] & ~(1 << (i % 8)));
      nulls = true;
    }
    if (width != 0) {
      data += valid ? *cell : std::string(width, '\x5a');  // a null row's value is ignored
    } else if (column.type == v1::COLUMN_TYPE_BOOL) {
      const bool bit = valid ? (*cell)[0] != 0 : (i % 2 == 0);
      if (bit) {
        bools[i / 8] = static_cast<char>(bools[i / 8] | (1 << (i % 8)));
      } else {
        bools[i / 8] = static_cast<char>(bools[i / 8] & ~(1 << (i % 8)));
      }
    } else {
      const std::string v = valid ? *cell : std::string("ignored");
      data += v;
      offset += static_cast<int32_t>(v.size());
      offsets += Bytes<int32_t>(offset);
    }
  }
  if (column.type == v1::COLUMN_TYPE_BOOL) data = bools;
  if (IsVarWidth(column.type)) {
    data += "tail";  // bytes past the last offset are ignored
    c.set_offsets(offsets);
  }
  c.set_data(data);
  if (nulls || validity) c.set_validity(bitmap);
  return c;
}

/// Decodes a result column of `rows` rows into cells, checking its layout.
inline std::vector<Cell> ReadColumn(const v1::Column& c, uint64_t rows) {
  std::vector<Cell> out(rows);
  EXPECT_EQ(c.length(), rows) << c.name();
  if (c.length() != rows) return out;
  auto bit = [](const std::string& bitmap, uint64_t i) {
    return (static_cast<uint8_t>(bitmap[i / 8]) >> (i % 8)) & 1;
  };
  auto tail_zero = [&](const std::string& bitmap, const char* what) {
    EXPECT_EQ(bitmap.size(), (rows + 7) / 8) << c.name() << " " << what;
    for (uint64_t i = rows; i < bitmap.size() * 8; ++i)
      EXPECT_EQ(bit(bitmap, i), 0) << c.name() << " " << what << " bit " << i;
  };
  uint64_t nulls = 0;
  if (c.null_count() > 0) {
    tail_zero(c.validity(), "validity");
    if (c.validity().size() != (rows + 7) / 8) return out;
  } else {
    EXPECT_TRUE(c.validity().empty()) << c.name() << ": validity without nulls";
  }
  const size_t width = WireWidth(c.type());
  if (width != 0) {
    EXPECT_EQ(c.data().size(), rows * width) << c.name();
    EXPECT_TRUE(c.offsets().empty()) << c.name();
    if (c.data().size() != rows * width) return out;
  } else if (c.type() == v1::COLUMN_TYPE_BOOL) {
    tail_zero(c.data(), "data");
    if (c.data().size() != (rows + 7) / 8) return out;
  } else {
    EXPECT_EQ(c.offsets().size(), (rows + 1) * 4) << c.name();
    if (c.offsets().size() != (rows + 1) * 4) return out;
  }
  auto offset = [&](uint64_t i) {
    uint32_t v;
    std::memcpy(&v, c.offsets().data() + i * 4, 4);
    return v;
  };
  if (IsVarWidth(c.type())) {
    EXPECT_EQ(offset(0), 0u) << c.name();
    EXPECT_EQ(offset(rows), c.data().size()) << c.name();
  }
  for (uint64_t r = 0; r < rows; ++r) {
    const bool valid = c.null_count() == 0 || bit(c.validity(), r);
    if (width != 0) {
      const std::string v = c.data().substr(r * width, width);
      if (valid) {
        out[r] = v;
      } else {
        EXPECT_EQ(v, std::string(width, '\0')) << c.name() << " null row " << r;
      }
    } else if (c.type() == v1::COLUMN_TYPE_BOOL) {
      if (valid) {
        out[r] = std::string(1, static_cast<char>(bit(c.data(), r)));
      } else {
        EXPECT_EQ(bit(c.data(), r), 0) << c.name() << " null row " << r;
      }
    } else {
      EXPECT_LE(offset(r), offset(r + 1)) << c.name() << " row " << r;
      if (offset(r) > offset(r + 1) || offset(r + 1) > c.data().size()) return out;
      const std::string v = c.data().substr(offset(r), offset(r + 1) - offset(r));
      if (valid) {
        out[r] = v;
      } else {
        EXPECT_EQ(v, "") << c.name() << " null row " << r;
      }
    }
    nulls += valid ? 0 : 1;
  }
  EXPECT_EQ(nulls, c.null_count()) << c.name();
  return out;
}

/// The cells of `column` at `rows` (a row of kNoRow is a miss: null).
inline constexpr uint32_t kNoRow = 0xffffffffu;
inline std::vector<Cell> CellsAt(const ModelColumn& column, const std::vector<uint32_t>& rows) {
  std::vector<Cell> out;
  out.reserve(rows.size());
  for (uint32_t r : rows) out.push_back(r == kNoRow ? Cell() : column.cells[r]);
  return out;
}

// Appends the bits [0, bits) of `src` to a bitmap of `*have` bits.
inline void AppendBitmap(std::string* dst, uint64_t* have, const std::string& src, uint64_t bits) {
  for (uint64_t i = 0; i < bits; ++i) {
    const uint64_t at = *have + i;
    if (at / 8 >= dst->size()) dst->push_back('\0');
    if ((static_cast<uint8_t>(src[i / 8]) >> (i % 8)) & 1) {
      (*dst)[at / 8] = static_cast<char>((*dst)[at / 8] | (1 << (at % 8)));
    }
  }
  *have += bits;
}

// Appends the rows of column part `part` to `whole` (same name and type).
inline void AppendColumn(v1::Column* whole, const v1::Column& part) {
  const uint64_t rows = whole->length();
  const uint64_t n = part.length();
  if (IsVarWidth(part.type())) {
    std::vector<uint32_t> offsets = UnpackColumn<uint32_t>(whole->offsets());
    if (offsets.empty()) offsets.push_back(0);
    const std::vector<uint32_t> more = UnpackColumn<uint32_t>(part.offsets());
    for (uint64_t i = 1; i <= n; ++i) offsets.push_back(offsets[rows] + more[i] - more[0]);
    whole->set_offsets(PackColumn<uint32_t>(offsets));
    whole->mutable_data()->append(part.data());
  } else if (part.type() == v1::COLUMN_TYPE_BOOL) {
    uint64_t have = rows;
    AppendBitmap(whole->mutable_data(), &have, part.data(), n);
  } else {
    whole->mutable_data()->append(part.data());
  }
  // Validity: every row valid where a part has none.
  std::string validity = whole->validity();
  const bool nulls = whole->null_count() > 0 || part.null_count() > 0;
  if (validity.empty() && nulls) {
    validity.assign((rows + 7) / 8, '\xff');
    if (rows % 8 != 0) validity.back() = static_cast<char>((1 << (rows % 8)) - 1);
  }
  if (nulls) {
    std::string part_validity = part.validity();
    if (part_validity.empty()) part_validity.assign((n + 7) / 8, '\xff');
    uint64_t have = rows;
    AppendBitmap(&validity, &have, part_validity, n);
    whole->set_validity(validity);
  }
  whole->set_null_count(whole->null_count() + part.null_count());
  whole->set_length(rows + n);
}

// The whole responses of a stream of join messages: each request's parts
// (`more` on all but its last) reassembled in batch order. Checks the
// continuation rules on the way: one batch_id and index_version per request,
// every message within `max_bytes`, a batch's parts contiguous from pair 0, the
// head fields in its first part only.
inline std::vector<v1::JoinResponse> Reassemble(const std::vector<v1::JoinResponse>& messages,
                                                uint64_t max_bytes, size_t* parts = nullptr) {
  std::vector<v1::JoinResponse> out;
  bool open = false;
  for (const v1::JoinResponse& m : messages) {
    EXPECT_LE(m.ByteSizeLong(), max_bytes);
    if (parts != nullptr) ++*parts;
    if (!open) {
      out.emplace_back();
      out.back().set_batch_id(m.batch_id());
      out.back().set_index_version(m.index_version());
      if (m.has_error()) *out.back().mutable_error() = m.error();
    }
    v1::JoinResponse& whole = out.back();
    EXPECT_EQ(m.batch_id(), whole.batch_id());
    EXPECT_EQ(m.index_version(), whole.index_version());
    for (const v1::JoinBatchResult& r : m.results()) {
      const bool head =
          whole.results_size() == 0 || whole.results(whole.results_size() - 1).batch() != r.batch();
      if (head) {
        EXPECT_EQ(r.batch(), static_cast<uint64_t>(whole.results_size()));
        EXPECT_EQ(r.first_pair(), 0u);
        v1::JoinBatchResult* w = whole.add_results();
        *w = r;
        continue;
      }
      v1::JoinBatchResult* w = whole.mutable_results(whole.results_size() - 1);
      EXPECT_EQ(r.first_pair(), w->left_rows().size() / 4) << "batch " << r.batch();
      EXPECT_EQ(r.count(), 0u);  // only in the first part
      EXPECT_FALSE(r.has_statistics());
      EXPECT_TRUE(r.found().empty());
      EXPECT_TRUE(r.probes().empty());
      w->mutable_left_rows()->append(r.left_rows());
      w->mutable_right_rows()->append(r.right_rows());
      EXPECT_EQ(r.columns_size(), w->columns_size());
      for (int c = 0; c < r.columns_size() && c < w->columns_size(); ++c) {
        AppendColumn(w->mutable_columns(c), r.columns(c));
      }
    }
    open = m.more();
  }
  EXPECT_FALSE(open) << "the last message has `more` set";
  for (v1::JoinResponse& whole : out) {
    for (v1::JoinBatchResult& r : *whole.mutable_results()) r.set_first_pair(0);
  }
  return out;
}

}  // namespace gpujoin::server::testing
