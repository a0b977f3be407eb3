// Validation of HashNode (shared by every backend) and the CPU row hash.
#include "hashing/hash_host.hpp"

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "gpujoin/common/status_macros.hpp"
#include "hashing/row_hash.hpp"

namespace gpujoin::engine::detail {

namespace {

std::string ColumnName(const HashNode& node, size_t i, std::string_view where) {
  return absl::StrCat(std::string(where), ": column ", i, " (",
                      std::string(ColumnTypeName(node.columns[i].type)), ")");
}

// True when a + b overflows or exceeds `limit`.
bool RangeExceeds(uint64_t a, uint64_t b, uint64_t limit) { return a > limit || b > limit - a; }

absl::Status ValidateColumn(const HashNode& node, size_t i, std::string_view where, uint64_t rows) {
  const HashColumn& c = node.columns[i];
  const std::string name = ColumnName(node, i, where);
  switch (c.type) {
    case ColumnType::kUint32:
    case ColumnType::kInt32:
    case ColumnType::kUint64:
    case ColumnType::kInt64:
    case ColumnType::kFloat32:
    case ColumnType::kFloat64:
    case ColumnType::kBinary:
      break;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          std::string(where), ": column ", i, ": unknown column type ", static_cast<int>(c.type)));
  }
  if (c.length != rows) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": has ", c.length,
                                                   " rows but column 0 has ", rows,
                                                   "; all columns must have the same length"));
  }
  // Physical rows offset .. offset + length - 1 must be addressable; the limit keeps
  // every later byte computation (rows * 8, bits) free of overflow.
  constexpr uint64_t kMaxRows = uint64_t{1} << 56;
  if (RangeExceeds(c.offset, c.length, kMaxRows)) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": offset ", c.offset, " + length ", c.length, " exceeds 2^56 rows"));
  }
  const uint64_t end_row = c.offset + c.length;
  const uint32_t width = FixedWidth(c.type);
  if (width != 0) {
    if (!c.offsets.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, ": offsets must be empty for a fixed-width column, got ", c.offsets.size()));
    }
    if (c.data.size() < end_row * width) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, ": data has ", c.data.size(), " bytes, needs at least ", end_row * width,
          " (offset ", c.offset, " + length ", c.length, ") * ", width, " bytes"));
    }
  } else if (c.length > 0) {
    if (c.offsets.size() < end_row + 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ": offsets has ", c.offsets.size(), " entries, needs at least ",
                       end_row + 1, " (offset ", c.offset, " + length ", c.length, " + 1)"));
    }
    const int32_t first = c.offsets[c.offset];
    if (first < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ": offsets[", c.offset, "] is negative (", first, ")"));
    }
    for (uint64_t r = c.offset; r < end_row; ++r) {
      if (c.offsets[r + 1] < c.offsets[r]) {
        return absl::InvalidArgumentError(
            absl::StrCat(name, ": offsets decrease at row ", r - c.offset, ": offsets[", r,
                         "] = ", c.offsets[r], " > offsets[", r + 1, "] = ", c.offsets[r + 1]));
      }
    }
    const int32_t last = c.offsets[end_row];
    if (static_cast<uint64_t>(last) > c.data.size()) {
      return absl::InvalidArgumentError(absl::StrCat(name, ": offsets[", end_row, "] = ", last,
                                                     " is past the end of data (", c.data.size(),
                                                     " bytes)"));
    }
  }
  if (!c.validity.empty() && c.validity.size() < BitmapBytes(end_row)) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, ": validity has ", c.validity.size(), " bytes, needs at least ", BitmapBytes(end_row),
        " for bits up to offset ", c.offset, " + length ", c.length));
  }
  return absl::OkStatus();
}

ColumnView HostView(const HashColumn& c) {
  ColumnView v;
  v.type = c.type;
  v.data = c.data.data();
  v.offsets = c.offsets.empty() ? nullptr : c.offsets.data();
  v.validity = c.validity.empty() ? nullptr : c.validity.data();
  v.value_offset = c.offset;
  v.validity_bit_offset = c.offset;
  v.data_base = 0;
  return v;
}

// Hashes rows [first, first + rows); `first` is a multiple of 8.
template <typename H>
void HashRowRange(const std::vector<ColumnView>& views, uint64_t first, uint64_t rows, H* out,
                  uint8_t* out_validity) {
  const uint32_t n = static_cast<uint32_t>(views.size());
  const uint64_t end = first + rows;
  uint64_t row = first;
  // Eight rows per output validity byte; the last byte's unused high bits are 0.
  for (uint64_t byte = first / 8; row < end; ++byte) {
    uint8_t bits = 0;
    for (int b = 0; b < 8 && row < end; ++b, ++row) {
      if (HashRow<H>(views.data(), n, row, out + row)) bits |= static_cast<uint8_t>(1u << b);
    }
    out_validity[byte] = bits;
  }
}

}  // namespace

absl::Status ValidateHashNode(const HashNode& node, std::string_view where) {
  if (node.columns.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(where), ": columns: at least one column is required"));
  }
  const uint64_t rows = node.columns[0].length;
  for (size_t i = 0; i < node.columns.size(); ++i) {
    GPUJOIN_RETURN_IF_ERROR(ValidateColumn(node, i, where, rows));
  }
  switch (node.bits) {
    case HashBits::k32:
      if (node.out32.size() != rows) {
        return absl::InvalidArgumentError(
            absl::StrCat(std::string(where), ": out32 has ", node.out32.size(),
                         " elements, needs one per row (", rows, ") for 32-bit hashes"));
      }
      break;
    case HashBits::k64:
      if (node.out64.size() != rows) {
        return absl::InvalidArgumentError(
            absl::StrCat(std::string(where), ": out64 has ", node.out64.size(),
                         " elements, needs one per row (", rows, ") for 64-bit hashes"));
      }
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat(std::string(where), ": bits: unknown value ", static_cast<int>(node.bits)));
  }
  if (node.out_validity.size() != BitmapBytes(rows)) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(where), ": out_validity has ",
                                                   node.out_validity.size(), " bytes, needs ceil(",
                                                   rows, " / 8) = ", BitmapBytes(rows)));
  }
  return absl::OkStatus();
}

void HashRowsHost(const HashNode& node) {
  HashRowsHost(node, 0, node.columns.empty() ? 0 : node.columns[0].length);
}

void HashRowsHost(const HashNode& node, uint64_t first_row, uint64_t rows) {
  if (rows == 0) return;
  std::vector<ColumnView> views;
  views.reserve(node.columns.size());
  for (const HashColumn& c : node.columns) views.push_back(HostView(c));
  if (node.bits == HashBits::k32) {
    HashRowRange<uint32_t>(views, first_row, rows, node.out32.data(), node.out_validity.data());
  } else {
    HashRowRange<uint64_t>(views, first_row, rows, node.out64.data(), node.out_validity.data());
  }
}

}  // namespace gpujoin::engine::detail
