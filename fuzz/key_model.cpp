#include "key_model.hpp"

#include <cstring>
#include <set>

#include "absl/strings/str_cat.h"
#include "fuzz_support.hpp"
#include "gpujoin/engine/detail/slot_hash.hpp"
#include "gpujoin/engine/graph.hpp"
#include "gpujoin/engine/hashing.hpp"
#include "gpujoin/engine/index_image.hpp"
#include "gpujoin/engine/key_columns.hpp"

namespace gpujoin::fuzz {
namespace {

// Bytes per value of a fixed-width key type; 0 for string and binary.
size_t Width(v1::ColumnType type) {
  switch (type) {
    case v1::COLUMN_TYPE_INT32:
    case v1::COLUMN_TYPE_UINT32:
      return 4;
    case v1::COLUMN_TYPE_INT64:
    case v1::COLUMN_TYPE_UINT64:
      return 8;
    default:
      return 0;
  }
}

engine::ColumnType EngineType(v1::ColumnType type) {
  switch (type) {
    case v1::COLUMN_TYPE_INT32:
      return engine::ColumnType::kInt32;
    case v1::COLUMN_TYPE_UINT32:
      return engine::ColumnType::kUint32;
    case v1::COLUMN_TYPE_INT64:
      return engine::ColumnType::kInt64;
    case v1::COLUMN_TYPE_UINT64:
      return engine::ColumnType::kUint64;
    case v1::COLUMN_TYPE_STRING:
      return engine::ColumnType::kString;
    default:
      return engine::ColumnType::kBinary;
  }
}

int32_t OffsetAt(const std::string& offsets, uint64_t i) {
  int32_t v = 0;
  std::memcpy(&v, offsets.data() + i * 4, 4);
  return v;
}

bool Bit(std::string_view bitmap, uint64_t i) {
  return (static_cast<uint8_t>(bitmap[i / 8]) >> (i % 8)) & 1u;
}

// ceil(rows / 8) without wrapping for the largest lengths.
uint64_t BitmapBytesOf(uint64_t rows) { return rows / 8 + (rows % 8 != 0 ? 1 : 0); }

}  // namespace

bool IsKeyColumnType(v1::ColumnType type) {
  return Width(type) != 0 || type == v1::COLUMN_TYPE_STRING || type == v1::COLUMN_TYPE_BINARY;
}

std::optional<KeySchemaModel> ModelKeySchema(
    const google::protobuf::RepeatedPtrField<v1::KeyColumnSpec>& columns) {
  if (columns.empty() || columns.size() > 8) return std::nullopt;
  KeySchemaModel schema;
  std::set<std::string> seen;
  for (const v1::KeyColumnSpec& c : columns) {
    if (!ValidColumnName(c.name()) || !seen.insert(c.name()).second || !IsKeyColumnType(c.type())) {
      return std::nullopt;
    }
    schema.names.push_back(c.name());
    schema.types.push_back(c.type());
  }
  return schema;
}

bool IsUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const uint8_t b = static_cast<uint8_t>(s[i]);
    size_t n = 0;
    uint32_t cp = 0, min = 0;
    if (b < 0x80) {
      ++i;
      continue;
    } else if ((b & 0xe0) == 0xc0) {
      n = 1, cp = b & 0x1f, min = 0x80;
    } else if ((b & 0xf0) == 0xe0) {
      n = 2, cp = b & 0x0f, min = 0x800;
    } else if ((b & 0xf8) == 0xf0) {
      n = 3, cp = b & 0x07, min = 0x10000;
    } else {
      return false;  // a continuation byte first, or 0xf8..0xff
    }
    if (s.size() - i <= n) return false;  // the sequence is cut short
    for (size_t k = 1; k <= n; ++k) {
      const uint8_t c = static_cast<uint8_t>(s[i + k]);
      if ((c & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (c & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += n + 1;
  }
  return true;
}

KeyColumnsOutcome ModelKeyColumns(const google::protobuf::RepeatedPtrField<v1::Column>& columns,
                                  const KeySchemaModel& schema, std::string_view prefix,
                                  bool required) {
  KeyColumnsOutcome out;
  const std::string field = absl::StrCat(std::string(prefix), "key_columns");
  if (columns.empty() && !required) return out;
  if (static_cast<size_t>(columns.size()) != schema.size()) {
    out.error = absl::StrCat(field, ": ", columns.size(), " columns, but index");
    return out;
  }
  for (size_t i = 0; i < schema.size(); ++i) {
    const v1::Column& c = columns.Get(static_cast<int>(i));
    const std::string where = absl::StrCat(field, "[", i, "]");
    if (!c.name().empty() && c.name() != schema.names[i]) {
      out.error = where + ".name: ";
      return out;
    }
    if (c.type() != schema.types[i]) {
      out.error = where + ".type: ";
      return out;
    }
    const uint64_t length = c.length();
    if (i > 0 && length != columns.Get(0).length()) {
      out.error = where + ".length: ";
      return out;
    }
    const std::string w = absl::StrCat(where, " (column \"", schema.names[i], "\")");
    const size_t width = Width(c.type());
    if (width != 0) {
      if (!c.offsets().empty()) {
        out.error = w + ".offsets: ";
        return out;
      }
      if (c.data().size() % width != 0 || c.data().size() / width != length) {
        out.error = w + ".data: ";
        return out;
      }
    } else {
      const std::string& offsets = c.offsets();
      if (offsets.size() % 4 != 0 || offsets.size() / 4 == 0 || offsets.size() / 4 - 1 != length) {
        out.error = w + ".offsets: ";
        return out;
      }
      if (OffsetAt(offsets, 0) < 0) {
        out.error = w + ".offsets[0]: ";
        return out;
      }
      for (uint64_t r = 1; r <= length; ++r) {
        if (OffsetAt(offsets, r) < OffsetAt(offsets, r - 1)) {
          out.error = absl::StrCat(w, ".offsets[", r, "]: ");
          return out;
        }
      }
      if (static_cast<uint64_t>(OffsetAt(offsets, length)) > c.data().size()) {
        out.error = absl::StrCat(w, ".offsets[", length, "]: ");
        return out;
      }
      if (c.type() == v1::COLUMN_TYPE_STRING) {
        for (uint64_t r = 0; r < length; ++r) {
          const int32_t begin = OffsetAt(offsets, r);
          if (!IsUtf8(std::string_view(c.data()).substr(begin, OffsetAt(offsets, r + 1) - begin))) {
            out.error = absl::StrCat(w, ": row ", r, " of the keys is not valid UTF-8");
            return out;
          }
        }
      }
    }
    if (!c.validity().empty() && c.validity().size() != BitmapBytesOf(length)) {
      out.error = w + ".validity: ";
      return out;
    }
  }
  out.present = true;
  const uint64_t rows = columns.Get(0).length();
  out.rows.reserve(rows);
  for (uint64_t r = 0; r < rows; ++r) {
    KeyTuple key;
    bool null = false;
    for (const v1::Column& c : columns) {
      if (!c.validity().empty() && !Bit(c.validity(), r)) null = true;
      const size_t width = Width(c.type());
      if (width != 0) {
        key.push_back(c.data().substr(r * width, width));
      } else {
        const int32_t begin = OffsetAt(c.offsets(), r);
        key.push_back(c.data().substr(begin, OffsetAt(c.offsets(), r + 1) - begin));
      }
    }
    if (null) {
      out.rows.push_back(std::nullopt);
    } else {
      out.rows.push_back(std::move(key));
    }
  }
  return out;
}

void AppendKeyColumns(const KeySchemaModel& schema, const KeyRowList& rows, bool named,
                      google::protobuf::RepeatedPtrField<v1::Column>* out) {
  bool any_null = false;
  for (const auto& row : rows) any_null = any_null || !row.has_value();
  for (size_t i = 0; i < schema.size(); ++i) {
    v1::Column& c = *out->Add();
    if (named) c.set_name(schema.names[i]);
    c.set_type(schema.types[i]);
    c.set_length(rows.size());
    const size_t width = Width(schema.types[i]);
    std::string offsets;
    auto append_offset = [&](int32_t v) { offsets.append(reinterpret_cast<const char*>(&v), 4); };
    if (width == 0) append_offset(0);
    std::string validity(any_null ? BitmapBytesOf(rows.size()) : 0, '\0');
    for (size_t r = 0; r < rows.size(); ++r) {
      if (rows[r]) {
        c.mutable_data()->append((*rows[r])[i]);
        if (any_null) validity[r / 8] = static_cast<char>(validity[r / 8] | (1u << (r % 8)));
      } else if (width != 0) {
        c.mutable_data()->append(width, '\0');
      }
      if (width == 0) append_offset(static_cast<int32_t>(c.data().size()));
    }
    if (width == 0) c.set_offsets(std::move(offsets));
    c.set_validity(std::move(validity));
  }
}

std::vector<uint64_t> Fingerprints(engine::Backend& backend, const KeySchemaModel& schema,
                                   const KeyRowList& rows) {
  std::vector<uint64_t> out(rows.size(), 0);
  if (rows.empty()) return out;
  google::protobuf::RepeatedPtrField<v1::Column> columns;
  AppendKeyColumns(schema, rows, /*named=*/false, &columns);
  std::vector<std::vector<int32_t>> offsets(schema.size());
  engine::HashNode node;
  for (size_t i = 0; i < schema.size(); ++i) {
    const v1::Column& c = columns.Get(static_cast<int>(i));
    engine::HashColumn h;
    h.type = EngineType(c.type());
    h.length = rows.size();
    h.data = {reinterpret_cast<const uint8_t*>(c.data().data()), c.data().size()};
    if (!c.offsets().empty()) {
      offsets[i].resize(c.offsets().size() / 4);
      std::memcpy(offsets[i].data(), c.offsets().data(), c.offsets().size());
      h.offsets = offsets[i];
    }
    h.validity = {reinterpret_cast<const uint8_t*>(c.validity().data()), c.validity().size()};
    node.columns.push_back(h);
  }
  std::vector<uint8_t> validity(BitmapBytesOf(rows.size()));
  node.bits = engine::HashBits::k64;
  node.out64 = out;
  node.out_validity = validity;
  engine::CommandGraph graph;
  graph.Add(std::move(node));
  const absl::Status run = backend.Run(graph);
  FUZZ_CHECK(run.ok(), "hashing key columns: " + Describe(run));
  return out;
}

RowAnswer ColumnReference::Answer(const std::optional<KeyTuple>& key, uint64_t fp,
                                  uint64_t max_probe_count) const {
  RowAnswer a;
  if (!key) return a;
  const uint32_t bound =
      max_probe_count == 0 ? probe_bound : static_cast<uint32_t>(max_probe_count);
  const uint32_t home = engine::detail::HomeSlot(fp, capacity);
  for (uint32_t i = 0; i < bound; ++i) {
    const uint32_t pos = (home + i) & (capacity - 1u);
    a.probes = i + 1;
    const uint32_t row = slot_rows[pos];
    if (row == engine::kEmptySlotRow) return a;
    if (slot_fingerprints[pos] == fp) {
      if (rows[row] == key) {
        if (keep_all) {
          for (uint32_t r : groups.at(*key)) a.matches.push_back(values[r]);
        } else {
          a.matches.push_back(values[row]);
        }
        return a;
      }
      continue;  // another key of the same fingerprint
    }
    if (!engine::detail::ResidentComesFirst(slot_fingerprints[pos], fp, i, pos, capacity)) {
      return a;
    }
  }
  a.probes = bound;
  return a;
}

ColumnReference ReadColumnReference(engine::Backend& backend, const engine::HashIndex& index,
                                    KeySchemaModel schema, KeyRowList rows,
                                    std::vector<uint32_t> values) {
  ColumnReference ref;
  ref.schema = std::move(schema);
  ref.capacity = index.spec().capacity;
  ref.probe_bound = index.spec().probe_bound();
  ref.keep_all = index.spec().duplicates == engine::DuplicatePolicy::kKeepAll;
  ref.build_overflowed = index.build_statistics().overflow_rows != 0;
  ref.rows = std::move(rows);
  ref.values = std::move(values);
  FUZZ_CHECK(ref.values.size() == ref.rows.size(), "a value per build row");
  for (uint32_t r = 0; r < ref.rows.size(); ++r) {
    if (ref.rows[r]) ref.groups[*ref.rows[r]].push_back(r);
  }
  auto image = backend.ExportIndex(index);
  FUZZ_CHECK(image.ok(), "exporting a key-schema index: " + Describe(image.status()));
  const uint32_t cap = ref.capacity;
  const auto fps = image->keys.as<const uint64_t>();
  const auto slots = image->values.as<const uint32_t>();
  FUZZ_CHECK(fps.size() == cap && slots.size() == cap,
             absl::StrCat("image of ", fps.size(), " fingerprints and ", slots.size(),
                          " rows for capacity ", cap));
  ref.slot_fingerprints.assign(fps.begin(), fps.end());
  ref.slot_rows.assign(slots.begin(), slots.end());
  const auto row_values = image->row_values.as<const uint32_t>();
  FUZZ_CHECK(row_values.size() == ref.rows.size(),
             absl::StrCat("image of ", row_values.size(), " row values for ", ref.rows.size(),
                          " build rows"));
  for (size_t r = 0; r < ref.rows.size(); ++r) {
    FUZZ_CHECK(!ref.rows[r] || row_values[r] == ref.values[r],
               absl::StrCat("build row ", r, " has value ", row_values[r], "; the model's is ",
                            ref.values[r]));
  }
  const std::vector<uint64_t> row_fps = Fingerprints(backend, ref.schema, ref.rows);
  std::set<KeyTuple> seen;
  for (uint32_t pos = 0; pos < cap; ++pos) {
    const uint32_t row = ref.slot_rows[pos];
    if (row == engine::kEmptySlotRow) continue;
    FUZZ_CHECK(row < ref.rows.size() && ref.rows[row].has_value(),
               absl::StrCat("slot ", pos, " holds build row ", row,
                            ", which is not a valid row of ", ref.rows.size()));
    const KeyTuple& key = *ref.rows[row];
    const uint64_t fp = ref.slot_fingerprints[pos];
    FUZZ_CHECK(fp == row_fps[row],
               absl::StrCat("slot ", pos, " holds fingerprint ", fp, " for build row ", row,
                            " of fingerprint ", row_fps[row]));
    // A build that overflowed may have dropped a key's lowest row and kept a later one.
    FUZZ_CHECK(ref.build_overflowed || ref.groups.at(key).front() == row,
               absl::StrCat("slot ", pos, " holds build row ", row, "; its key's lowest row is ",
                            ref.groups.at(key).front()));
    FUZZ_CHECK(seen.insert(key).second,
               absl::StrCat("the key of build row ", row, " is in the table twice"));
    const uint32_t displacement = (pos - engine::detail::HomeSlot(fp, cap)) & (cap - 1u);
    FUZZ_CHECK(displacement < ref.probe_bound,
               absl::StrCat("build row ", row, " at slot ", pos, " is ", displacement,
                            " slots from its home; the probe bound is ", ref.probe_bound));
    if (displacement > 0) {
      const uint32_t before = (pos - 1u) & (cap - 1u);
      FUZZ_CHECK(ref.slot_rows[before] != engine::kEmptySlotRow &&
                     (ref.slot_fingerprints[before] == fp ||
                      engine::detail::ResidentComesFirst(ref.slot_fingerprints[before], fp,
                                                         displacement - 1, before, cap)),
                 absl::StrCat("build row ", row, " at slot ", pos, " (displacement ", displacement,
                              ") follows slot ", before, ", which does not come first"));
    }
  }
  FUZZ_CHECK(seen.size() == index.build_statistics().unique_keys,
             absl::StrCat(seen.size(), " keys in the table but unique_keys = ",
                          index.build_statistics().unique_keys));
  if (!ref.build_overflowed) {
    FUZZ_CHECK(seen.size() == ref.groups.size(),
               absl::StrCat(seen.size(), " keys in the table, ", ref.groups.size(),
                            " distinct valid keys built"));
  }
  return ref;
}

}  // namespace gpujoin::fuzz
