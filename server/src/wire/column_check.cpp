#include "wire/column_check.hpp"

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gpujoin/common/bitmap.hpp"
#include "gpujoin/common/status_macros.hpp"

namespace gpujoin::server {
namespace {

// The first row of `offsets` (rows + 1 of them, the rows' bytes in `data` from
// data[offsets[0]]) that is not valid UTF-8, and where in it; the caller knows
// one exists.
std::string FirstInvalidUtf8Row(std::span<const int32_t> offsets, std::string_view data,
                                std::string_view rows_of) {
  for (size_t r = 0; r + 1 < offsets.size(); ++r) {
    const std::string_view row = data.substr(offsets[r], offsets[r + 1] - offsets[r]);
    const size_t at = FindInvalidUtf8(row);
    if (at != std::string_view::npos) {
      return absl::StrFormat(
          "row %d of %s is not valid UTF-8 (byte 0x%02x at position %d "
          "of the row's %d bytes)",
          r, rows_of, static_cast<unsigned char>(row[at]), at, row.size());
    }
  }
  return "a row is not valid UTF-8";
}

}  // namespace

absl::StatusOr<CheckedColumn> CheckColumnBuffers(const v1::Column& c, engine::ColumnType type,
                                                 const std::string& where,
                                                 std::string_view rows_of) {
  CheckedColumn out;
  const uint64_t length = c.length();
  out.rows = length;
  const std::string_view data = c.data();
  if (!engine::IsVariableWidth(type)) {
    if (!c.offsets().empty()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ".offsets: set (", c.offsets().size(),
                                                     " bytes) for a fixed-width column"));
    }
    const size_t width = engine::ColumnWidth(type);
    const uint64_t need = width == 0 ? engine::BitmapBytes(length) : length * width;
    // Compared by division too: length * width wraps for a huge length.
    const bool fits = width == 0 ? data.size() == need
                                 : data.size() % width == 0 && data.size() / width == length;
    if (!fits) {
      return absl::InvalidArgumentError(
          width == 0 ? absl::StrCat(where, ".data: ", data.size(), " bytes, but a bitmap of length ",
                                    length, " rows has ceil(", length, " / 8) = ", need)
                     : absl::StrCat(where, ".data: ", data.size(), " bytes, need length ", length,
                                    " * ", width, " = ", need));
    }
    out.data = data;
  } else {
    GPUJOIN_ASSIGN_OR_RETURN(out.offsets,
                             DecodePackedBytes<int32_t>(c.offsets(), where + ".offsets"));
    const std::span<const int32_t> offsets = out.offsets.span();
    // Compared without length + 1, which wraps to 0 for the largest length and
    // would let no offsets at all through to the reads below.
    if (offsets.empty() || offsets.size() - 1 != length) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ".offsets: ", offsets.size(), " int32 offsets, need length ", length, " + 1 = ",
          length == UINT64_MAX ? std::string("2^64") : absl::StrCat(length + 1)));
    }
    if (offsets[0] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ".offsets[0]: ", offsets[0], " is negative"));
    }
    for (uint64_t r = 1; r <= length; ++r) {
      if (offsets[r] < offsets[r - 1]) {
        return absl::InvalidArgumentError(absl::StrCat(where, ".offsets[", r, "]: ", offsets[r],
                                                       " is below offsets[", r - 1,
                                                       "] = ", offsets[r - 1]));
      }
    }
    if (static_cast<uint64_t>(offsets[length]) > data.size()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ".offsets[", length,
                                                     "]: ", offsets[length], " is beyond ", where,
                                                     ".data (", data.size(), " bytes)"));
    }
    out.data = data.substr(offsets[0], offsets[length] - offsets[0]);
    if (type == engine::ColumnType::kString) {
      // The rows' bytes are valid as a whole, and no row starts inside a
      // multi-byte sequence, exactly when every row is valid on its own.
      bool valid = FindInvalidUtf8(out.data) == std::string_view::npos;
      for (uint64_t r = 1; valid && r < length; ++r) {
        const int32_t at = offsets[r];
        valid = at == offsets[length] ||
                (static_cast<unsigned char>(data[at]) & 0xc0) != 0x80;  // not a continuation
      }
      if (!valid) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": ", FirstInvalidUtf8Row(offsets, data, rows_of),
                         "; send bytes that are not UTF-8 text in a COLUMN_TYPE_BINARY column"));
      }
    }
  }
  const std::string_view validity = c.validity();
  if (!validity.empty()) {
    if (validity.size() != engine::BitmapBytes(length)) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ".validity: ", validity.size(), " bytes, but a bitmap of length ",
                       length, " rows has ceil(", length, " / 8) = ", engine::BitmapBytes(length),
                       " (or send none: no nulls)"));
    }
    // A bitmap without a zero bit carries nothing: the column has no null.
    if (CountZeroBits(reinterpret_cast<const uint8_t*>(validity.data()), length) != 0) {
      out.validity = validity;
    }
  }
  return out;
}

}  // namespace gpujoin::server
