#include "mutate_model.hpp"

#include <algorithm>
#include <cstring>
#include <set>

#include "absl/strings/str_cat.h"
#include "fuzz_check.hpp"
#include "fuzz_support.hpp"

namespace gpujoin::fuzz {
namespace {

uint64_t BitmapBytes(uint64_t rows) { return rows / 8 + (rows % 8 != 0 ? 1 : 0); }

bool Bit(std::string_view bitmap, uint64_t i) {
  return (static_cast<uint8_t>(bitmap[i / 8]) >> (i % 8)) & 1u;
}

int32_t OffsetAt(const std::string& offsets, uint64_t i) {
  int32_t v = 0;
  std::memcpy(&v, offsets.data() + i * 4, 4);
  return v;
}

template <typename T>
std::string Le(T v) {
  std::string s(sizeof(T), '\0');
  std::memcpy(s.data(), &v, sizeof(T));
  return s;
}

bool VariableWidth(v1::ColumnType type) {
  return type == v1::COLUMN_TYPE_STRING || type == v1::COLUMN_TYPE_BINARY;
}

}  // namespace

size_t CellWidth(v1::ColumnType type) {
  switch (type) {
    case v1::COLUMN_TYPE_INT32:
    case v1::COLUMN_TYPE_UINT32:
    case v1::COLUMN_TYPE_FLOAT32:
      return 4;
    case v1::COLUMN_TYPE_INT64:
    case v1::COLUMN_TYPE_UINT64:
    case v1::COLUMN_TYPE_FLOAT64:
      return 8;
    default:
      return 0;
  }
}

v1::Column CellColumn(const std::string& name, v1::ColumnType type,
                      const std::vector<Cell>& cells) {
  v1::Column c;
  c.set_name(name);
  c.set_type(type);
  c.set_length(cells.size());
  const size_t width = CellWidth(type);
  std::string validity(BitmapBytes(cells.size()), '\0');
  std::string data, offsets;
  bool nulls = false;
  if (type == v1::COLUMN_TYPE_BOOL) data.assign(BitmapBytes(cells.size()), '\0');
  if (VariableWidth(type)) offsets = Le<int32_t>(0);
  for (size_t r = 0; r < cells.size(); ++r) {
    const Cell& cell = cells[r];
    if (cell) {
      validity[r / 8] = static_cast<char>(validity[r / 8] | (1u << (r % 8)));
    } else {
      nulls = true;
    }
    if (width != 0) {
      data += cell ? *cell : std::string(width, '\0');
    } else if (type == v1::COLUMN_TYPE_BOOL) {
      if (cell && (*cell)[0] != 0) data[r / 8] = static_cast<char>(data[r / 8] | (1u << (r % 8)));
    } else {
      if (cell) data += *cell;
      offsets += Le<int32_t>(static_cast<int32_t>(data.size()));
    }
  }
  c.set_data(std::move(data));
  if (VariableWidth(type)) c.set_offsets(std::move(offsets));
  if (nulls) c.set_validity(std::move(validity));
  return c;
}

std::vector<Cell> ReadCells(const v1::Column& c, const std::string& name, v1::ColumnType type,
                            uint64_t rows, const std::string& what) {
  FUZZ_CHECK(c.name() == name && c.type() == type && c.length() == rows,
             absl::StrCat(what, ": column \"", c.name(), "\" of type ", c.type(), " and length ",
                          c.length(), "; expected \"", name, "\", ", type, ", ", rows));
  const size_t width = CellWidth(type);
  if (width != 0) {
    FUZZ_CHECK(c.data().size() == rows * width && c.offsets().empty(),
               absl::StrCat(what, ": ", c.data().size(), " data bytes and ", c.offsets().size(),
                            " offset bytes for ", rows, " rows"));
  } else if (type == v1::COLUMN_TYPE_BOOL) {
    FUZZ_CHECK(c.data().size() == BitmapBytes(rows) && c.offsets().empty(),
               absl::StrCat(what, ": ", c.data().size(), " bitmap bytes for ", rows, " rows"));
  } else {
    FUZZ_CHECK(c.offsets().size() == (rows + 1) * 4 && OffsetAt(c.offsets(), 0) == 0 &&
                   static_cast<uint64_t>(OffsetAt(c.offsets(), rows)) == c.data().size(),
               absl::StrCat(what, ": ", c.offsets().size(), " offset bytes for ", rows,
                            " rows, or offsets that do not span the ", c.data().size(),
                            " data bytes from 0"));
    for (uint64_t r = 0; r < rows; ++r) {
      FUZZ_CHECK(OffsetAt(c.offsets(), r) <= OffsetAt(c.offsets(), r + 1),
                 absl::StrCat(what, ": offsets decrease at row ", r));
    }
  }
  uint64_t nulls = 0;
  if (!c.validity().empty()) {
    FUZZ_CHECK(
        c.validity().size() == BitmapBytes(rows),
        absl::StrCat(what, ": ", c.validity().size(), " validity bytes for ", rows, " rows"));
    for (uint64_t r = 0; r < rows; ++r) nulls += Bit(c.validity(), r) ? 0 : 1;
    for (uint64_t r = rows; r < 8 * BitmapBytes(rows); ++r) {
      FUZZ_CHECK(!Bit(c.validity(), r), absl::StrCat(what, ": validity bit ", r, " past the rows"));
    }
  }
  FUZZ_CHECK(c.null_count() == nulls && (nulls == 0) == c.validity().empty(),
             absl::StrCat(what, ": null_count ", c.null_count(), ", ", nulls,
                          " nulls in a validity bitmap of ", c.validity().size(), " bytes"));
  std::vector<Cell> cells(rows);
  for (uint64_t r = 0; r < rows; ++r) {
    if (!c.validity().empty() && !Bit(c.validity(), r)) continue;
    if (width != 0) {
      cells[r] = c.data().substr(r * width, width);
    } else if (type == v1::COLUMN_TYPE_BOOL) {
      cells[r] = std::string(1, Bit(c.data(), r) ? '\1' : '\0');
    } else {
      const int32_t begin = OffsetAt(c.offsets(), r);
      cells[r] = c.data().substr(begin, OffsetAt(c.offsets(), r + 1) - begin);
    }
  }
  return cells;
}

bool MutationModel::Holdable(const std::optional<KeyTuple>& key) const {
  if (!key) return false;
  if (!words_) return true;
  const std::string& word = key->front();
  return !std::all_of(word.begin(), word.end(), [](char c) { return c == '\xff'; });
}

void MutationModel::AddBuildRow(const std::optional<KeyTuple>& key, ModelRow row) {
  if (!Holdable(key)) return;
  std::vector<ModelRow>& group = keys_[*key];
  if (keep_all_ || group.empty()) group.push_back(std::move(row));
}

engine::MutationCounts MutationModel::Apply(const std::vector<DeleteKey>& deletes,
                                            const KeyRowList& upserts,
                                            const std::vector<ModelRow>& rows) {
  engine::MutationCounts counts;
  std::set<DeleteKey> seen;
  for (const DeleteKey& d : deletes) {
    if (!seen.insert(d).second) continue;
    std::optional<KeyTuple> key = KeyTuple();
    for (const auto& column : d) {
      if (!column) {
        key.reset();
        break;
      }
      key->push_back(*column);
    }
    const auto it = Holdable(key) ? keys_.find(*key) : keys_.end();
    if (it == keys_.end()) {
      ++counts.not_found_keys;
      continue;
    }
    ++counts.deleted_keys;
    counts.deleted_rows += it->second.size();
    keys_.erase(it);
  }
  std::set<KeyTuple> touched;
  for (size_t r = 0; r < upserts.size(); ++r) {
    FUZZ_CHECK(Holdable(upserts[r]), "the model applies a batch with an invalid upsert key");
    const KeyTuple& key = *upserts[r];
    auto it = keys_.find(key);
    if (touched.insert(key).second)
      ++(it == keys_.end() ? counts.inserted_keys : counts.updated_keys);
    std::vector<ModelRow>& group = keys_[key];
    if (!keep_all_) group.clear();
    group.push_back(rows[r]);
  }
  counts.upsert_rows = upserts.size();
  return counts;
}

uint64_t MutationModel::live_rows() const {
  uint64_t rows = 0;
  for (const auto& [key, group] : keys_) rows += group.size();
  return rows;
}

uint64_t MutationModel::largest_group() const {
  uint64_t largest = 0;
  for (const auto& [key, group] : keys_) largest = std::max<uint64_t>(largest, group.size());
  return largest;
}

std::vector<DeleteKey> DeleteKeysOf(const google::protobuf::RepeatedPtrField<v1::Column>& columns,
                                    const KeySchemaModel& schema) {
  // The values of every row, nulls' too, then the validity bitmaps over them.
  google::protobuf::RepeatedPtrField<v1::Column> values = columns;
  for (v1::Column& c : values) c.clear_validity();
  const KeyColumnsOutcome decoded = ModelKeyColumns(values, schema, "", false);
  FUZZ_CHECK(decoded.error.empty(), "DeleteKeysOf of key columns the model refuses");
  std::vector<DeleteKey> out;
  for (size_t r = 0; r < decoded.rows.size(); ++r) {
    DeleteKey key;
    for (int c = 0; c < columns.size(); ++c) {
      const std::string& validity = columns.Get(c).validity();
      if (!validity.empty() && !Bit(validity, r)) {
        key.push_back(std::nullopt);
      } else {
        key.push_back((*decoded.rows[r])[c]);
      }
    }
    out.push_back(std::move(key));
  }
  return out;
}

DeleteKey DeleteKeyOf(const KeyTuple& key) { return DeleteKey(key.begin(), key.end()); }

v1::ColumnType PayloadTypeOf(uint8_t b) {
  constexpr v1::ColumnType kTypes[] = {v1::COLUMN_TYPE_INT64, v1::COLUMN_TYPE_STRING,
                                       v1::COLUMN_TYPE_BOOL, v1::COLUMN_TYPE_BINARY};
  return kTypes[(b >> 6) & 3];
}

KeySchemaModel SchemaOf(mutate_input::KeyKind kind) {
  if (kind < mutate_input::kSchemaS) return {};
  return QueryFixtureKeyIndexes()[kind - mutate_input::kSchemaS].schema;
}

KeyRowList KeyUniverse(mutate_input::KeyKind kind) {
  KeyRowList keys;
  if (kind == mutate_input::kUint32) {
    for (uint32_t k : {0u, 1u, 2u, 3u, 4u, 5u, 6u, 7u, 8u, 100u, 1000u, 1001u, 0x7fffffffu,
                       0x80000000u, 0xfffffffeu}) {
      keys.push_back(KeyTuple{Le(k)});
    }
    for (uint32_t i = 1; keys.size() < 63; ++i) keys.push_back(KeyTuple{Le(i * 2654435761u)});
    keys.push_back(KeyTuple{Le(0xffffffffu)});
    return keys;
  }
  if (kind == mutate_input::kUint64) {
    for (uint64_t k = 0; k < 8; ++k) keys.push_back(KeyTuple{Le(k)});
    for (uint64_t k = 1; k <= 8; ++k) keys.push_back(KeyTuple{Le(k << 32 | 3)});
    for (uint64_t k : {uint64_t{0xffffffffu}, uint64_t{1} << 63, ~uint64_t{0} - 1,
                       ~uint64_t{0} << 32, uint64_t{3}}) {
      keys.push_back(KeyTuple{Le(k)});
    }
    for (uint64_t i = 1; keys.size() < 63; ++i) {
      keys.push_back(KeyTuple{Le(i * 0x9e3779b97f4a7c15ull)});
    }
    keys.push_back(KeyTuple{Le(~uint64_t{0})});
    return keys;
  }
  const FixtureKeyIndex fixture = QueryFixtureKeyIndexes()[kind - mutate_input::kSchemaS];
  std::set<KeyTuple> distinct;
  for (const auto& row : fixture.rows) {
    if (!row || !distinct.insert(*row).second) continue;
    keys.push_back(row);
    // Beside it, a key that differs in the first column only.
    KeyTuple beside = *row;
    if (CellWidth(fixture.schema.types[0]) != 0) {
      beside[0][0] = static_cast<char>(beside[0][0] + 1);
    } else {
      beside[0].push_back('z');
    }
    if (distinct.insert(beside).second) keys.push_back(std::move(beside));
  }
  keys.push_back(std::nullopt);
  return keys;
}

Cell CellOf(v1::ColumnType type, uint32_t batch, uint32_t row) {
  switch (type) {
    case v1::COLUMN_TYPE_INT64: {
      const int64_t v = (int64_t{batch} << 32 | row) * (row % 2 == 0 ? 1 : -1);
      return Le(v);
    }
    case v1::COLUMN_TYPE_BOOL:
      return std::string(1, static_cast<char>((batch + row) & 1));
    case v1::COLUMN_TYPE_BINARY:
      return absl::StrCat(std::string("\xff\0", 2), Le(batch), std::string(row % 3, '\x80'));
    default:
      // Empty, ASCII and multi-byte strings.
      if (row % 5 == 4) return std::string();
      return absl::StrCat("b", batch, "r", row, row % 3 == 0 ? "\xc3\xa4" : "");
  }
}

}  // namespace gpujoin::fuzz
