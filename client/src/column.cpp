// gpujoin::client typed columns: checks, appends and views.
#include "gpujoin/client/column.hpp"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "gpujoin/common/bitmap.hpp"

namespace gpujoin::client {
namespace {

constexpr int32_t kZeroOffset[1] = {0};

constexpr uint64_t kMaxStringBytes = std::numeric_limits<int32_t>::max();

}  // namespace

// ---------------------------------------------------------------- ColumnView

ColumnView ColumnView::Slice(uint64_t begin, uint64_t count) const {
  ColumnView v = *this;
  begin = std::min(begin, length);
  v.offset = offset + begin;
  v.length = std::min(count, length - begin);
  return v;
}

uint64_t ColumnView::NullCount() const {
  if (validity.empty()) return 0;
  return length - CountOnes(validity.data(), offset, length);
}

absl::Status CheckColumnView(const ColumnView& v, std::string_view what) {
  const uint64_t end = v.offset + v.length;
  auto fail = [&](std::string_view buffer, uint64_t has, std::string_view unit, uint64_t needs) {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(what), " (", std::string(ColumnTypeName(v.type)), ", ", v.length,
                     " rows from row ", v.offset, "): ", std::string(buffer), " has ", has, " ",
                     std::string(unit), ", needs ", needs));
  };
  if (IsHashOnly(v.type)) {
    return absl::InvalidArgumentError(absl::StrCat(
        std::string(what), ": ", std::string(ColumnTypeName(v.type)),
        " is a Hash-only type, not a payload column type (uint32, int32, uint64, int64, float32, "
        "float64, binary, bool or string)"));
  }
  if (IsVariableWidth(v.type)) {
    if (v.offsets.size() < end + 1) return fail("offsets", v.offsets.size(), "entries", end + 1);
    if (v.offsets[v.offset] < 0) {
      return absl::InvalidArgumentError(absl::StrCat(std::string(what), ": offsets[", v.offset,
                                                     "] is negative (", v.offsets[v.offset], ")"));
    }
    for (uint64_t i = v.offset; i < end; ++i) {
      if (v.offsets[i + 1] < v.offsets[i]) {
        return absl::InvalidArgumentError(
            absl::StrCat(std::string(what), ": offsets[", i + 1, "] = ", v.offsets[i + 1],
                         " is below offsets[", i, "] = ", v.offsets[i]));
      }
    }
    if (static_cast<uint64_t>(v.offsets[end]) > v.data.size()) {
      return fail("data", v.data.size(), "bytes", static_cast<uint64_t>(v.offsets[end]));
    }
  } else if (v.type == ColumnType::kBool) {
    if (v.data.size() < BitmapBytes(end))
      return fail("data", v.data.size(), "bytes", BitmapBytes(end));
  } else if (v.data.size() < end * ColumnWidth(v.type)) {
    return fail("data", v.data.size(), "bytes", end * ColumnWidth(v.type));
  }
  if (!v.validity.empty() && v.validity.size() < BitmapBytes(end)) {
    return fail("validity", v.validity.size(), "bytes", BitmapBytes(end));
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------- Column

void Column::MarkValid() {
  if (!validity.empty()) {
    validity.resize(BitmapBytes(length + 1), 0);
    SetBit(validity.data(), length, true);
  }
  ++length;
}

void Column::AppendNull() {
  if (validity.empty()) {
    // Materialise the bitmap: every earlier row is valid.
    validity.assign(BitmapBytes(length + 1), 0);
    for (uint64_t r = 0; r < length; ++r) SetBit(validity.data(), r, true);
  } else {
    validity.resize(BitmapBytes(length + 1), 0);
  }
  if (IsVariableWidth(type)) {
    if (offsets.empty()) offsets.push_back(0);
    offsets.push_back(offsets.back());
  } else if (type == ColumnType::kBool) {
    data.resize(BitmapBytes(length + 1), 0);
  } else {
    data.resize(data.size() + ColumnWidth(type), 0);
  }
  ++null_count;
  ++length;
}

void Column::AppendBool(bool value) {
  data.resize(BitmapBytes(length + 1), 0);
  if (value) SetBit(data.data(), length, true);
  MarkValid();
}

absl::Status Column::AppendString(std::string_view value) {
  if (data.size() + value.size() > kMaxStringBytes) {
    return absl::OutOfRangeError(absl::StrCat("column '", name, "' would hold ",
                                              data.size() + value.size(),
                                              " string bytes, more than 2147483647"));
  }
  if (offsets.empty()) offsets.push_back(0);
  data.insert(data.end(), value.begin(), value.end());
  offsets.push_back(static_cast<int32_t>(data.size()));
  MarkValid();
  return absl::OkStatus();
}

absl::Status Column::AppendRows(const ColumnView& rows) {
  if (rows.type != type) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot append ", std::string(ColumnTypeName(rows.type)), " rows to column '",
                     name, "' of type ", std::string(ColumnTypeName(type))));
  }
  const uint64_t n = rows.length;
  if (n == 0) return absl::OkStatus();
  const uint64_t nulls = rows.NullCount();
  if (IsVariableWidth(type)) {
    const int32_t first = rows.offsets[rows.offset];
    const uint64_t bytes = static_cast<uint64_t>(rows.offsets[rows.offset + n] - first);
    if (data.size() + bytes > kMaxStringBytes) {
      return absl::OutOfRangeError(absl::StrCat("column '", name, "' would hold ",
                                                data.size() + bytes,
                                                " string bytes, more than 2147483647"));
    }
    if (offsets.empty()) offsets.push_back(0);
    const int32_t base = offsets.back();
    offsets.reserve(offsets.size() + n);
    for (uint64_t i = 1; i <= n; ++i)
      offsets.push_back(base + (rows.offsets[rows.offset + i] - first));
    data.insert(data.end(), rows.data.begin() + first, rows.data.begin() + first + bytes);
  } else if (type == ColumnType::kBool) {
    data.resize(BitmapBytes(length + n), 0);
    CopyBits(rows.data.data(), rows.offset, n, data.data(), length);
  } else {
    const size_t w = ColumnWidth(type);
    data.insert(data.end(), rows.data.begin() + rows.offset * w,
                rows.data.begin() + (rows.offset + n) * w);
  }
  if (nulls > 0 || !validity.empty()) {
    if (validity.empty()) {
      // Materialise the bitmap: every earlier row is valid.
      validity.assign(BitmapBytes(length), 0);
      for (uint64_t r = 0; r < length; ++r) SetBit(validity.data(), r, true);
    }
    validity.resize(BitmapBytes(length + n), 0);
    if (rows.validity.empty()) {
      for (uint64_t r = 0; r < n; ++r) SetBit(validity.data(), length + r, true);
    } else {
      CopyBits(rows.validity.data(), rows.offset, n, validity.data(), length);
    }
  }
  null_count += nulls;
  length += n;
  return absl::OkStatus();
}

ColumnView Column::view() const {
  ColumnView v;
  v.name = name;
  v.type = type;
  v.data = data;
  v.offsets = offsets;
  if (IsVariableWidth(type) && offsets.empty()) v.offsets = kZeroOffset;
  v.validity = validity;
  v.length = length;
  return v;
}

}  // namespace gpujoin::client
