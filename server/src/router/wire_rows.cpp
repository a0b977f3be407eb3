#include "router/wire_rows.hpp"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "gpujoin/engine/partition.hpp"
#include "gpujoin/common/bitmap.hpp"
#include "gpujoin/common/status_macros.hpp"
#include "wire/column_check.hpp"
#include "wire/column_codec.hpp"

namespace gpujoin::server::router {
namespace {

bool Bit(std::string_view bits, uint64_t i) {
  return (static_cast<uint8_t>(bits[i / 8]) >> (i % 8)) & 1u;
}

int32_t OffsetAt(std::string_view offsets, uint64_t i) {
  int32_t v;
  std::memcpy(&v, offsets.data() + 4 * i, 4);
  return v;
}

// Checks `c`'s buffers with the shards' own checker (sizes without overflow,
// offsets from 0 and non-decreasing within the data, UTF-8 strings) before
// the router reads them; its value width (0: bool, -1: bytes).
absl::StatusOr<int> Shape(const v1::Column& c, std::string_view field) {
  GPUJOIN_ASSIGN_OR_RETURN(engine::ColumnType type, FromWireColumnType(c.type(), field));
  GPUJOIN_RETURN_IF_ERROR(CheckColumnBuffers(c, type, std::string(field)).status());
  if (engine::IsVariableWidth(type)) return -1;
  if (type == engine::ColumnType::kBool) return 0;
  return static_cast<int>(engine::ColumnWidth(type));
}

}  // namespace

RowSplit SplitRows(std::span<const uint32_t> parts, uint32_t count) {
  RowSplit s;
  s.rows.resize(count);
  std::vector<uint32_t> sizes(count, 0);
  for (uint32_t p : parts) ++sizes[p];
  for (uint32_t p = 0; p < count; ++p) s.rows[p].reserve(sizes[p]);
  s.part.assign(parts.begin(), parts.end());
  s.position.resize(parts.size());
  for (size_t r = 0; r < parts.size(); ++r) {
    std::vector<uint32_t>& rows = s.rows[parts[r]];
    s.position[r] = static_cast<uint32_t>(rows.size());
    rows.push_back(static_cast<uint32_t>(r));
  }
  return s;
}

namespace {

// Row i of the result is refs[i] of `sources`, every one checked (Shape) and of
// one type, whose values are `width` bytes (0: bitmap, -1: offsets).
absl::StatusOr<v1::Column> Gather(std::span<const v1::Column* const> sources, int width,
                                  std::span<const RowRef> refs, std::string_view field) {
  v1::Column out;
  out.set_name(sources[0]->name());
  out.set_type(sources[0]->type());
  bool nullable = false;
  for (const v1::Column* source : sources) nullable |= !source->validity().empty();
  const uint64_t n = refs.size();
  out.set_length(n);
  for (const RowRef& ref : refs) {
    if (ref.source >= sources.size() || ref.row >= sources[ref.source]->length()) {
      return absl::InvalidArgumentError(
          absl::StrCat(std::string(field), ": a part has fewer rows than its keys"));
    }
  }
  std::string validity;
  uint64_t nulls = 0;
  if (nullable) {
    validity.assign(BitmapBytes(n), '\0');
    for (uint64_t i = 0; i < n; ++i) {
      const v1::Column& c = *sources[refs[i].source];
      const bool valid = c.validity().empty() || Bit(c.validity(), refs[i].row);
      if (valid) {
        validity[i / 8] = static_cast<char>(static_cast<uint8_t>(validity[i / 8]) | (1u << (i % 8)));
      } else {
        ++nulls;
      }
    }
  }
  std::string data;
  if (width < 0) {
    std::string offsets(4 * (n + 1), '\0');
    int64_t at = 0;
    for (uint64_t i = 0; i < n; ++i) {
      const v1::Column& c = *sources[refs[i].source];
      const int32_t b = OffsetAt(c.offsets(), refs[i].row);
      const int32_t e = OffsetAt(c.offsets(), refs[i].row + 1);
      if (e < b) {
        return absl::InvalidArgumentError(absl::StrCat(std::string(field), ": offsets decrease"));
      }
      data.append(c.data(), b, e - b);
      at += e - b;
      if (at > INT32_MAX) {
        return absl::ResourceExhaustedError(absl::StrCat(std::string(field), ": more than 2^31 - 1 bytes"));
      }
      const int32_t end = static_cast<int32_t>(at);
      std::memcpy(offsets.data() + 4 * (i + 1), &end, 4);
    }
    out.set_offsets(std::move(offsets));
  } else if (width == 0) {
    data.assign(BitmapBytes(n), '\0');
    for (uint64_t i = 0; i < n; ++i) {
      if (Bit(sources[refs[i].source]->data(), refs[i].row)) {
        data[i / 8] = static_cast<char>(static_cast<uint8_t>(data[i / 8]) | (1u << (i % 8)));
      }
    }
  } else {
    data.resize(n * width);
    for (uint64_t i = 0; i < n; ++i) {
      std::memcpy(data.data() + i * width,
                  sources[refs[i].source]->data().data() + uint64_t{refs[i].row} * width, width);
    }
  }
  out.set_data(std::move(data));
  if (nulls > 0) out.set_validity(std::move(validity));
  out.set_null_count(nulls);
  return out;
}

}  // namespace

absl::StatusOr<v1::Column> GatherColumn(std::span<const v1::Column* const> sources,
                                        std::span<const RowRef> refs, std::string_view field) {
  if (sources.empty()) return v1::Column();
  int width = 0;
  for (const v1::Column* source : sources) {
    if (source->type() != sources[0]->type()) {
      return absl::InvalidArgumentError(absl::StrCat(std::string(field), ": parts of column \"",
                                                     sources[0]->name(), "\" differ in type"));
    }
    GPUJOIN_ASSIGN_OR_RETURN(width, Shape(*source, field));
  }
  return Gather(sources, width, refs, field);
}

absl::StatusOr<CheckedColumn> CheckColumn(const v1::Column& column, std::string_view field) {
  GPUJOIN_ASSIGN_OR_RETURN(const int width, Shape(column, field));
  return CheckedColumn{&column, width};
}

absl::StatusOr<v1::Column> TakeColumnRows(const CheckedColumn& column,
                                          std::span<const uint32_t> rows, std::string_view field) {
  std::vector<RowRef> refs(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) refs[i] = {0, rows[i]};
  GPUJOIN_ASSIGN_OR_RETURN(
      v1::Column out,
      Gather(std::span<const v1::Column* const>(&column.column, 1), column.width, refs, field));
  // A request's column keeps its validity shape even without nulls in the part.
  out.clear_null_count();
  return out;
}

absl::StatusOr<v1::Column> TakeColumnRows(const v1::Column& column, std::span<const uint32_t> rows,
                                          std::string_view field) {
  GPUJOIN_ASSIGN_OR_RETURN(const CheckedColumn checked, CheckColumn(column, field));
  return TakeColumnRows(checked, rows, field);
}

template <class T, class Column>
absl::StatusOr<std::vector<T>> Words(const Column& c, std::string_view field) {
  std::vector<T> out;
  if (!c.packed().empty()) {
    if (c.packed().size() % sizeof(T) != 0) {
      return absl::InvalidArgumentError(absl::StrCat(std::string(field), ".packed: ", c.packed().size(),
                                                     " bytes, not a multiple of ", sizeof(T)));
    }
    out.resize(c.packed().size() / sizeof(T));
    std::memcpy(out.data(), c.packed().data(), c.packed().size());
  } else {
    out.assign(c.values().v().begin(), c.values().v().end());
  }
  return out;
}

absl::StatusOr<std::vector<uint32_t>> WordsOf(const v1::U32Column& c, std::string_view field) {
  return Words<uint32_t>(c, field);
}

absl::StatusOr<std::vector<uint64_t>> WordsOf(const v1::U64Column& c, std::string_view field) {
  return Words<uint64_t>(c, field);
}

template <class T, class Column>
Column Packed(std::span<const T> words, std::span<const uint32_t> rows) {
  std::string packed(rows.size() * sizeof(T), '\0');
  for (size_t i = 0; i < rows.size(); ++i) {
    std::memcpy(packed.data() + i * sizeof(T), &words[rows[i]], sizeof(T));
  }
  Column c;
  if (packed.empty()) {
    c.mutable_values();  // zero rows: an empty list (an empty `packed` is "not sent")
  } else {
    c.set_packed(std::move(packed));
  }
  return c;
}

v1::U32Column PackedAt(std::span<const uint32_t> words, std::span<const uint32_t> rows) {
  return Packed<uint32_t, v1::U32Column>(words, rows);
}

v1::U64Column PackedAt(std::span<const uint64_t> words, std::span<const uint32_t> rows) {
  return Packed<uint64_t, v1::U64Column>(words, rows);
}

absl::StatusOr<engine::KeyColumns> KeyColumnsOf(
    const google::protobuf::RepeatedPtrField<v1::Column>& columns, std::string_view field,
    std::vector<std::vector<int32_t>>* offsets) {
  engine::KeyColumns keys;
  offsets->assign(columns.size(), {});
  for (int i = 0; i < columns.size(); ++i) {
    const v1::Column& c = columns.Get(i);
    const std::string f = absl::StrCat(std::string(field), "[", i, "]");
    GPUJOIN_ASSIGN_OR_RETURN(engine::ColumnType type, FromWireColumnType(c.type(), f));
    if (!engine::IsKeyColumnType(type)) {
      return absl::InvalidArgumentError(absl::StrCat(f, ": ", std::string(engine::ColumnTypeName(type)),
                                                     " is not a key column type"));
    }
    GPUJOIN_RETURN_IF_ERROR(Shape(c, f).status());
    if (i > 0 && c.length() != columns.Get(0).length()) {
      return absl::InvalidArgumentError(absl::StrCat(f, ": ", c.length(), " rows, but ", std::string(field),
                                                     "[0] has ", columns.Get(0).length()));
    }
    engine::HashColumn h;
    h.type = type;
    h.data = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(c.data().data()),
                                      c.data().size());
    if (engine::IsVariableWidth(type)) {
      std::vector<int32_t>& o = (*offsets)[i];
      o.resize(c.length() + 1);
      std::memcpy(o.data(), c.offsets().data(), o.size() * 4);
      h.offsets = o;
    }
    if (!c.validity().empty()) {
      h.validity = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(c.validity().data()),
                                            c.validity().size());
    }
    h.length = c.length();
    keys.columns.push_back(h);
  }
  return keys;
}

absl::StatusOr<KeyedRows> KeyedRows::Of(const v1::U32Column& keys, const v1::U64Column& keys64,
                                         bool has_keys, bool has_keys64,
                                         const google::protobuf::RepeatedPtrField<v1::Column>& columns,
                                         uint32_t shards, std::string_view prefix) {
  KeyedRows k;
  k.prefix_ = std::string(prefix);
  if (columns.size() > 0) {
    k.kind_ = Kind::kColumns;
    k.columns_ = &columns;
    std::vector<std::vector<int32_t>> offsets;
    GPUJOIN_ASSIGN_OR_RETURN(engine::KeyColumns keyed,
                             KeyColumnsOf(columns, k.prefix_ + "key_columns", &offsets));
    k.parts_.resize(keyed.rows());
    engine::PartitionsOf(keyed, shards, k.parts_);
  } else if (has_keys64) {
    k.kind_ = Kind::kWords64;
    GPUJOIN_ASSIGN_OR_RETURN(k.words64_, WordsOf(keys64, k.prefix_ + "keys64"));
    k.parts_.resize(k.words64_.size());
    engine::PartitionsOf(std::span<const uint64_t>(k.words64_), shards, k.parts_);
  } else if (has_keys) {
    k.kind_ = Kind::kWords32;
    GPUJOIN_ASSIGN_OR_RETURN(k.words32_, WordsOf(keys, k.prefix_ + "keys"));
    k.parts_.resize(k.words32_.size());
    engine::PartitionsOf(std::span<const uint32_t>(k.words32_), shards, k.parts_);
  }
  return k;
}

absl::Status KeyedRows::Put(std::span<const uint32_t> rows, v1::U32Column* keys,
                            v1::U64Column* keys64,
                            google::protobuf::RepeatedPtrField<v1::Column>* columns) const {
  switch (kind_) {
    case Kind::kNone:
      return absl::OkStatus();
    case Kind::kWords32:
      *keys = PackedAt(std::span<const uint32_t>(words32_), rows);
      return absl::OkStatus();
    case Kind::kWords64:
      *keys64 = PackedAt(std::span<const uint64_t>(words64_), rows);
      return absl::OkStatus();
    case Kind::kColumns:
      for (int c = 0; c < columns_->size(); ++c) {
        GPUJOIN_ASSIGN_OR_RETURN(
            v1::Column col,
            TakeColumnRows(columns_->Get(c), rows, absl::StrCat(prefix_, "key_columns[", c, "]")));
        *columns->Add() = std::move(col);
      }
      return absl::OkStatus();
  }
  return absl::OkStatus();
}

}  // namespace gpujoin::server::router
