#include "common/plan/plan_table.hpp"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace gpujoin::engine::plan_detail {

void DropValidityWithoutNulls(PlanColumn& column) {
  for (uint64_t r = 0; r < column.rows && !column.validity.empty(); ++r) {
    if (!column.valid(r)) return;
  }
  column.validity.clear();
}

PlanColumn NullColumn(ColumnType type, uint64_t rows) {
  PlanColumn c;
  c.type = type;
  c.rows = rows;
  if (IsVariableWidth(type)) {
    c.offsets.assign(rows + 1, 0);
  } else if (type == ColumnType::kBool) {
    c.data.assign(BitmapBytes(rows), std::byte{0});
  } else {
    c.data.assign(rows * ColumnWidth(type), std::byte{0});
  }
  if (rows > 0) c.validity.assign(BitmapBytes(rows), 0);
  return c;
}

PlanColumn TakeRows(const PlanColumn& column, std::span<const uint32_t> rows) {
  PlanColumn out;
  out.type = column.type;
  out.rows = rows.size();
  const size_t n = rows.size();
  bool any_null = false;
  std::vector<uint8_t> validity(BitmapBytes(n), 0);
  if (IsVariableWidth(column.type)) {
    out.offsets.resize(n + 1);
    uint64_t total = 0;
    for (size_t i = 0; i < n; ++i) {
      const uint32_t r = rows[i];
      if (r != kNullRow && column.valid(r)) total += column.offsets[r + 1] - column.offsets[r];
    }
    out.data.resize(total);
    uint32_t at = 0;
    for (size_t i = 0; i < n; ++i) {
      out.offsets[i] = at;
      const uint32_t r = rows[i];
      const bool valid = r != kNullRow && column.valid(r);
      if (valid) {
        const uint32_t len = column.offsets[r + 1] - column.offsets[r];
        if (len != 0) std::memcpy(out.data.data() + at, column.data.data() + column.offsets[r], len);
        at += len;
      }
      SetBit(validity.data(), i, valid);
      any_null |= !valid;
    }
    out.offsets[n] = at;
  } else if (column.type == ColumnType::kBool) {
    out.data.assign(BitmapBytes(n), std::byte{0});
    auto* bits = reinterpret_cast<uint8_t*>(out.data.data());
    const auto in = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(column.data.data()),
                                             column.data.size());
    const bool nullable = !column.validity.empty();
    for (size_t i = 0; i < n; ++i) {
      const uint32_t r = rows[i];
      const bool valid = r != kNullRow && (!nullable || column.valid(r));
      if (valid && BitAt(in, r)) SetBit(bits, i, true);
      any_null |= !valid;
    }
    if (any_null) {
      for (size_t i = 0; i < n; ++i) {
        SetBit(validity.data(), i, rows[i] != kNullRow && column.valid(rows[i]));
      }
    }
  } else {
    out.data.resize(n * ColumnWidth(column.type));
    const auto gather = [&]<class T>(T*) {
      const T* in = reinterpret_cast<const T*>(column.data.data());
      T* to = reinterpret_cast<T*>(out.data.data());
      const bool nullable = !column.validity.empty();
      for (size_t i = 0; i < n; ++i) {
        const uint32_t r = rows[i];
        const bool valid = r != kNullRow && (!nullable || column.valid(r));
        to[i] = valid ? in[r] : T{0};
        any_null |= !valid;
      }
    };
    // Plan columns of fixed width are 4 or 8 bytes wide (ColumnWidth).
    if (ColumnWidth(column.type) == 4) {
      gather(static_cast<uint32_t*>(nullptr));
    } else if (ColumnWidth(column.type) == 8) {
      gather(static_cast<uint64_t*>(nullptr));
    }
    if (any_null) {
      for (size_t i = 0; i < n; ++i) {
        SetBit(validity.data(), i, rows[i] != kNullRow && column.valid(rows[i]));
      }
    }
  }
  if (any_null) out.validity = std::move(validity);
  return out;
}

PlanTable TakeRows(const PlanTable& table, std::span<const uint32_t> rows) {
  PlanTable out;
  out.names = table.names;
  out.rows = rows.size();
  out.columns.reserve(table.columns.size());
  for (const PlanColumn& c : table.columns) out.columns.push_back(TakeRows(c, rows));
  return out;
}

std::vector<uint32_t> SelectedRows(std::span<const uint8_t> keep) {
  size_t n = 0;
  for (uint8_t k : keep) n += k != 0;
  std::vector<uint32_t> rows(n);
  size_t at = 0;
  for (size_t i = 0; i < keep.size(); ++i) {
    if (keep[i] != 0) rows[at++] = static_cast<uint32_t>(i);
  }
  return rows;
}

ColumnBuilder::ColumnBuilder(ColumnType type) {
  column_.type = type;
  if (IsVariableWidth(type)) column_.offsets.push_back(0);
}

void ColumnBuilder::MarkValid(bool valid) {
  const uint64_t row = column_.rows;
  if (row % 8 == 0) validity_.push_back(0);
  SetBit(validity_.data(), row, valid);
  any_null_ |= !valid;
  ++column_.rows;
}

void ColumnBuilder::AppendFrom(const PlanColumn& from, uint64_t row) {
  if (!from.valid(row)) {
    AppendNull();
    return;
  }
  if (IsVariableWidth(column_.type)) {
    AppendText(from.text(row));
  } else if (column_.type == ColumnType::kBool) {
    AppendBool(BitAt(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(from.data.data()),
                                              from.data.size()),
                     row));
  } else {
    const size_t w = ColumnWidth(column_.type);
    AppendBytes(from.data.data() + row * w, w);
  }
}

void ColumnBuilder::AppendText(std::string_view value) {
  const auto* p = reinterpret_cast<const std::byte*>(value.data());
  column_.data.insert(column_.data.end(), p, p + value.size());
  column_.offsets.push_back(static_cast<uint32_t>(column_.data.size()));
  MarkValid(true);
}

void ColumnBuilder::AppendBytes(const void* value, size_t width) {
  const auto* p = static_cast<const std::byte*>(value);
  column_.data.insert(column_.data.end(), p, p + width);
  MarkValid(true);
}

void ColumnBuilder::AppendBool(bool value) {
  const uint64_t row = column_.rows;
  if (row % 8 == 0) column_.data.push_back(std::byte{0});
  SetBit(reinterpret_cast<uint8_t*>(column_.data.data()), row, value);
  MarkValid(true);
}

void ColumnBuilder::AppendNull() {
  if (IsVariableWidth(column_.type)) {
    column_.offsets.push_back(static_cast<uint32_t>(column_.data.size()));
  } else if (column_.type == ColumnType::kBool) {
    if (column_.rows % 8 == 0) column_.data.push_back(std::byte{0});
  } else {
    column_.data.resize(column_.data.size() + ColumnWidth(column_.type), std::byte{0});
  }
  MarkValid(false);
}

PlanColumn ColumnBuilder::Finish() {
  if (any_null_) column_.validity = std::move(validity_);
  validity_.clear();
  any_null_ = false;
  return std::move(column_);
}

AggregateValues ValuesOf(const PlanColumn& c) {
  auto span = [&c]<class T>(T*) {
    return Chunked<T>{std::span<const T>(reinterpret_cast<const T*>(c.data.data()), c.rows)};
  };
  switch (c.type) {
    case ColumnType::kFloat32:
      return span(static_cast<float*>(nullptr));
    case ColumnType::kFloat64:
      return span(static_cast<double*>(nullptr));
    case ColumnType::kInt32:
      return span(static_cast<int32_t*>(nullptr));
    case ColumnType::kInt64:
      return span(static_cast<int64_t*>(nullptr));
    case ColumnType::kUint32:
      return span(static_cast<uint32_t*>(nullptr));
    case ColumnType::kUint64:
      return span(static_cast<uint64_t*>(nullptr));
    default:
      return std::monostate{};
  }
}

HashColumn HashColumnOf(const PlanColumn& column) {
  HashColumn h;
  h.type = column.type;
  h.length = column.rows;
  h.data = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(column.data.data()),
                                    column.data.size());
  if (IsVariableWidth(column.type)) {
    // Offsets stay below 2^31 (PlanLimits keep tables smaller), so the uint32
    // offsets read as Arrow's int32 ones.
    h.offsets = std::span<const int32_t>(reinterpret_cast<const int32_t*>(column.offsets.data()),
                                         column.offsets.size());
  }
  h.validity = column.validity;
  return h;
}

absl::Status CheckTableBytes(uint64_t bytes, const PlanLimits& limits, std::string_view what) {
  if (bytes <= limits.max_table_bytes) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(std::string(what), " would take ", bytes,
                                                   " host bytes, more than ",
                                                   limits.bytes_limit_name, " (",
                                                   limits.max_table_bytes, ")"));
}

}  // namespace gpujoin::engine::plan_detail
