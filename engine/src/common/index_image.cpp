// IndexImage checks and helpers shared by both backends, and the defaults of
// Backend::ExportIndex / ImportIndex.
#include "gpujoin/engine/index_image.hpp"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "gpujoin/common/status_macros.hpp"
#include "gpujoin/engine/backend.hpp"
#include "gpujoin/engine/key_columns.hpp"

namespace gpujoin::engine {
namespace {

absl::Status SizeIs(const ImageBuffer& buffer, uint64_t want, std::string_view what) {
  if (buffer.size() == want) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("index image: ", std::string(what), " holds ",
                                                 buffer.size(), " bytes, expected ", want));
}

// Bytes of a payload column's data array at `positions` positions.
uint64_t DataBytes(const PayloadShape& shape, uint64_t positions) {
  if (IsVariableWidth(shape.type)) return shape.string_bytes;
  if (shape.type == ColumnType::kBool) return BitmapBytes(positions);
  return positions * ColumnWidth(shape.type);
}

// Whether bits [bits, 8 * bytes) of a bitmap are all 0.
bool TailClear(const ImageBuffer& bitmap, uint64_t bits) {
  if (bits % 8 == 0 || bitmap.size() == 0) return true;
  const uint8_t last = static_cast<uint8_t>(bitmap.data()[bitmap.size() - 1]);
  return (last >> (bits % 8)) == 0;
}

template <class T>
std::string FirstDifference(std::span<const T> a, std::span<const T> b, std::string_view what,
                            std::string_view unit) {
  if (a.size() != b.size()) {
    return absl::StrCat(std::string(what), " sizes differ: ", a.size(), " vs ", b.size());
  }
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] != b[i]) {
      return absl::StrCat(std::string(what), " differ at ", std::string(unit), " ", i, ": ",
                          uint64_t(a[i]), " vs ", uint64_t(b[i]));
    }
  }
  return "";
}

// A column of `positions` positions in PayloadImage's layout; `what` names it.
absl::Status CheckColumnImage(const PayloadImage& p, uint64_t positions, const std::string& what) {
  if (IsVariableWidth(p.type)) {
    GPUJOIN_RETURN_IF_ERROR(SizeIs(p.offsets, (positions + 1) * 8, what + " offsets"));
    const std::span<const uint64_t> offsets = p.offsets.as<uint64_t>();
    if (offsets[0] != 0 || offsets[positions] != p.data.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("index image: ", what, " offsets run from ", offsets[0], " to ",
                       offsets[positions], ", expected 0 to its ", p.data.size(), " bytes"));
    }
    for (uint64_t i = 0; i < positions; ++i) {
      if (offsets[i + 1] < offsets[i]) {
        return absl::InvalidArgumentError(
            absl::StrCat("index image: ", what, " offsets decrease at position ", i));
      }
    }
  } else {
    GPUJOIN_RETURN_IF_ERROR(
        SizeIs(p.data, DataBytes(PayloadShape{p.type}, positions), what + " data"));
    GPUJOIN_RETURN_IF_ERROR(SizeIs(p.offsets, 0, what + " offsets"));
  }
  GPUJOIN_RETURN_IF_ERROR(
      SizeIs(p.validity, p.nullable ? BitmapBytes(positions) : 0, what + " validity"));
  if (!TailClear(p.validity, positions) ||
      (p.type == ColumnType::kBool && !TailClear(p.data, positions))) {
    return absl::InvalidArgumentError(
        absl::StrCat("index image: ", what, " has bits set past its ", positions, " positions"));
  }
  return absl::OkStatus();
}

// The first difference between two columns in PayloadImage's layout.
std::string ColumnDifference(const PayloadImage& pa, const PayloadImage& pb,
                             const std::string& what) {
  if (pa.type != pb.type || pa.nullable != pb.nullable) return what + " types differ";
  if (pa.null_count != pb.null_count) {
    return absl::StrCat(what, " null counts differ: ", pa.null_count, " vs ", pb.null_count);
  }
  std::string d =
      FirstDifference(pa.data.as<uint8_t>(), pb.data.as<uint8_t>(), what + " data", "byte");
  if (d.empty()) {
    d = FirstDifference(pa.offsets.as<uint64_t>(), pb.offsets.as<uint64_t>(), what + " offsets",
                        "position");
  }
  if (d.empty()) {
    d = FirstDifference(pa.validity.as<uint8_t>(), pb.validity.as<uint8_t>(), what + " validity",
                        "byte");
  }
  return d;
}

// A key schema's image: its key columns are the schema's, of key_rows
// positions, its row values one per key row, and every row its table and
// value list name is one of them.
absl::Status CheckKeyColumnImages(const IndexImage& image, uint64_t kept) {
  const std::vector<ColumnType>& schema = image.spec.key_columns;
  const uint64_t rows = image.row_values.size() / 4;
  GPUJOIN_RETURN_IF_ERROR(SizeIs(image.row_values, rows * 4, "row values"));
  if (image.key_columns.size() != schema.size()) {
    return absl::InvalidArgumentError(absl::StrCat("index image: ", image.key_columns.size(),
                                                   " key columns, expected ", schema.size()));
  }
  for (size_t c = 0; c < schema.size(); ++c) {
    const std::string what =
        absl::StrCat("key column ", c, " (", std::string(ColumnTypeName(schema[c])), ")");
    if (image.key_columns[c].type != schema[c]) {
      return absl::InvalidArgumentError(absl::StrCat("index image: ", what, " holds ",
                                                     std::string(ColumnTypeName(
                                                         image.key_columns[c].type))));
    }
    GPUJOIN_RETURN_IF_ERROR(CheckColumnImage(image.key_columns[c], rows, what));
  }
  const std::span<const uint32_t> slots = image.values.as<uint32_t>();
  for (size_t s = 0; s < slots.size(); ++s) {
    if (slots[s] != kEmptySlotRow && slots[s] >= rows) {
      return absl::InvalidArgumentError(absl::StrCat("index image: slot ", s, " names row ",
                                                     slots[s], " of ", rows, " key rows"));
    }
  }
  const std::span<const uint32_t> listed = image.group_values.as<uint32_t>();
  for (uint64_t i = 0; i < kept; ++i) {
    if (listed[i] >= rows) {
      return absl::InvalidArgumentError(absl::StrCat("index image: group value ", i,
                                                     " names row ", listed[i], " of ", rows,
                                                     " key rows"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

IndexImageShape IndexImage::shape() const {
  IndexImageShape s;
  s.spec = spec;
  s.kept_rows = group_values.size() / sizeof(uint32_t);
  s.key_rows = row_values.size() / sizeof(uint32_t);
  for (const PayloadImage& k : key_columns) {
    s.key_columns.push_back(
        PayloadShape{k.type, k.nullable, IsVariableWidth(k.type) ? uint64_t(k.data.size()) : 0});
  }
  for (const PayloadImage& p : payload) {
    s.payload.push_back(
        PayloadShape{p.type, p.nullable, IsVariableWidth(p.type) ? uint64_t(p.data.size()) : 0});
  }
  return s;
}

uint64_t IndexImage::bytes() const {
  uint64_t b =
      keys.size() + values.size() + group_ranges.size() + group_values.size() + row_values.size();
  for (const std::vector<PayloadImage>* columns : {&payload, &key_columns}) {
    for (const PayloadImage& p : *columns) {
      b += p.data.size() + p.offsets.size() + p.validity.size();
    }
  }
  return b;
}

uint64_t KeyStorageBytes(const IndexImageShape& shape) {
  if (shape.spec.key_type != KeyType::kColumns) return 0;
  uint64_t bytes = shape.key_rows * 4;  // row values
  for (const PayloadShape& k : shape.key_columns) {
    bytes += DataBytes(k, shape.key_rows) +
             (IsVariableWidth(k.type) ? (shape.key_rows + 1) * 8 : 0) +
             (k.nullable ? BitmapBytes(shape.key_rows) : 0);
  }
  return bytes;
}

absl::Status IndexImage::Validate() const {
  GPUJOIN_RETURN_IF_ERROR(spec.Validate());

  const uint64_t capacity = spec.capacity;
  GPUJOIN_RETURN_IF_ERROR(SizeIs(keys, capacity * KeyBytes(spec.key_type), "keys"));
  GPUJOIN_RETURN_IF_ERROR(SizeIs(values, capacity * 4, "values"));
  const bool keep_all = spec.duplicates == DuplicatePolicy::kKeepAll;
  uint64_t kept = 0;
  if (keep_all) {
    GPUJOIN_RETURN_IF_ERROR(SizeIs(group_ranges, capacity * 8, "group ranges"));
    if (group_values.size() % 4 != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "index image: group values hold ", group_values.size(), " bytes, not a multiple of 4"));
    }
    kept = group_values.size() / 4;
    const std::span<const uint32_t> ranges = group_ranges.as<uint32_t>();
    for (uint64_t s = 0; s < capacity; ++s) {
      const uint64_t start = ranges[2 * s], size = ranges[2 * s + 1];
      if (start + size > kept) {
        return absl::InvalidArgumentError(
            absl::StrCat("index image: group of slot ", s, " [", start, ", ", start + size,
                         ") lies outside the ", kept, " group values"));
      }
    }
  } else {
    GPUJOIN_RETURN_IF_ERROR(SizeIs(group_ranges, 0, "group ranges (lowest_row)"));
    GPUJOIN_RETURN_IF_ERROR(SizeIs(group_values, 0, "group values (lowest_row)"));
  }
  const uint64_t positions = keep_all ? kept : capacity;
  for (size_t c = 0; c < payload.size(); ++c) {
    const PayloadImage& p = payload[c];
    const std::string what =
        absl::StrCat("payload ", c, " (", std::string(ColumnTypeName(p.type)), ")");
    if (static_cast<uint8_t>(p.type) > static_cast<uint8_t>(ColumnType::kString)) {
      return absl::InvalidArgumentError(
          absl::StrCat("index image: payload ", c, " has type ", static_cast<int>(p.type)));
    }
    GPUJOIN_RETURN_IF_ERROR(CheckColumnImage(p, positions, what));
  }
  if (spec.key_type == KeyType::kColumns) return CheckKeyColumnImages(*this, kept);
  if (!key_columns.empty() || row_values.size() != 0) {
    return absl::InvalidArgumentError(
        "index image: key columns or row values in the image of an integer-keyed index");
  }
  return absl::OkStatus();
}

IndexImage AllocateImage(const IndexImageShape& shape) {
  IndexImage image;
  image.spec = shape.spec;
  const uint64_t capacity = shape.spec.capacity;
  image.keys = ImageBuffer(capacity * KeyBytes(shape.spec.key_type));
  image.values = ImageBuffer(capacity * 4);
  if (shape.spec.duplicates == DuplicatePolicy::kKeepAll) {
    image.group_ranges = ImageBuffer(capacity * 8);
    image.group_values = ImageBuffer(shape.kept_rows * 4);
  }
  auto columns = [](const std::vector<PayloadShape>& shapes, uint64_t positions,
                    std::vector<PayloadImage>& out) {
    for (const PayloadShape& s : shapes) {
      PayloadImage p;
      p.type = s.type;
      p.nullable = s.nullable;
      p.data = ImageBuffer(DataBytes(s, positions));
      if (IsVariableWidth(s.type)) p.offsets = ImageBuffer((positions + 1) * 8);
      if (s.nullable) p.validity = ImageBuffer(BitmapBytes(positions));
      out.push_back(std::move(p));
    }
  };
  columns(shape.payload, shape.positions(), image.payload);
  columns(shape.key_columns, shape.key_rows, image.key_columns);
  if (shape.spec.key_type == KeyType::kColumns) image.row_values = ImageBuffer(shape.key_rows * 4);
  return image;
}

std::string ImageDifference(const IndexImage& a, const IndexImage& b, bool ignore_total_probes) {
  if (!(a.spec.capacity == b.spec.capacity && a.spec.max_probe_count == b.spec.max_probe_count &&
        a.spec.key_type == b.spec.key_type && a.spec.duplicates == b.spec.duplicates)) {
    return "specs differ";
  }
  BuildStatistics sa = a.statistics, sb = b.statistics;
  if (ignore_total_probes) sa.total_probes = sb.total_probes = 0;
  if (!(sa == sb)) return "statistics differ";
  if (a.built_rows != b.built_rows || a.built != b.built) return "built rows differ";
  std::string d;
  if (a.spec.key_columns != b.spec.key_columns) return "key schemas differ";
  if (a.spec.key_type != KeyType::kUint32) {
    d = FirstDifference(a.keys.as<uint64_t>(), b.keys.as<uint64_t>(), "keys", "slot");
  } else {
    d = FirstDifference(a.keys.as<uint32_t>(), b.keys.as<uint32_t>(), "keys", "slot");
  }
  if (d.empty())
    d = FirstDifference(a.values.as<uint32_t>(), b.values.as<uint32_t>(), "values", "slot");
  if (d.empty()) {
    d = FirstDifference(a.group_ranges.as<uint32_t>(), b.group_ranges.as<uint32_t>(),
                        "group ranges", "word");
  }
  if (d.empty()) {
    d = FirstDifference(a.group_values.as<uint32_t>(), b.group_values.as<uint32_t>(),
                        "group values", "position");
  }
  if (!d.empty()) return d;
  if (a.payload.size() != b.payload.size()) return "payload column counts differ";
  for (size_t c = 0; c < a.payload.size(); ++c) {
    d = ColumnDifference(a.payload[c], b.payload[c],
                         absl::StrCat("payload ", c, " (",
                                      std::string(ColumnTypeName(a.payload[c].type)), ")"));
    if (!d.empty()) return d;
  }
  if (a.key_columns.size() != b.key_columns.size()) return "key column counts differ";
  for (size_t c = 0; c < a.key_columns.size(); ++c) {
    d = ColumnDifference(a.key_columns[c], b.key_columns[c],
                         absl::StrCat("key column ", c, " (",
                                      std::string(ColumnTypeName(a.key_columns[c].type)), ")"));
    if (!d.empty()) return d;
  }
  return FirstDifference(a.row_values.as<uint32_t>(), b.row_values.as<uint32_t>(), "row values",
                         "row");
}

absl::StatusOr<IndexImage> Backend::ExportIndex(const HashIndex&) const {
  return absl::UnimplementedError("this backend cannot export indexes");
}

absl::StatusOr<std::unique_ptr<HashIndex>> Backend::ImportIndex(const IndexImage&) {
  return absl::UnimplementedError("this backend cannot import indexes");
}

uint64_t ImportedIndexBytes(const Backend& backend, const IndexImageShape& shape) {
  return backend.IndexBytes(shape.spec) +
         GroupStorageBytes(shape.spec, shape.spec.capacity, shape.kept_rows) +
         backend.PayloadBytes(shape.spec, shape.payload, shape.kept_rows) + KeyStorageBytes(shape);
}

}  // namespace gpujoin::engine
