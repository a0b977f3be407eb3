#include "wire/plan_wire.hpp"

#include <cstring>
#include <set>

#include "absl/strings/str_cat.h"
#include "gpujoin/common/bitmap.hpp"
#include "gpujoin/common/status_macros.hpp"
#include "wire/column_check.hpp"
#include "wire/column_codec.hpp"
#include "wire/names.hpp"

namespace gpujoin::server {

using engine::ColumnType;
using engine::PlanColumn;
using engine::PlanTable;

absl::Status DecodePlanSchema(const google::protobuf::RepeatedPtrField<v1::Column>& columns,
                              std::vector<std::string>* names, std::vector<ColumnType>* types) {
  std::set<std::string> seen;
  for (int i = 0; i < columns.size(); ++i) {
    const v1::Column& c = columns[i];
    const std::string field = absl::StrCat("columns[", i, "]");
    GPUJOIN_RETURN_IF_ERROR(ValidateColumnName(c.name(), field + ".name"));
    if (!seen.insert(c.name()).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".name: column \"", c.name(), "\" is sent twice"));
    }
    GPUJOIN_ASSIGN_OR_RETURN(ColumnType type, FromWireColumnType(c.type(), field + ".type"));
    if (::gpujoin::IsHashOnly(type)) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ".type: ", WireColumnTypeName(c.type()),
          " is not a query column type (UINT32, INT32, UINT64, INT64, FLOAT32, FLOAT64, BINARY, "
          "BOOL, STRING)"));
    }
    names->push_back(c.name());
    types->push_back(type);
  }
  return absl::OkStatus();
}

absl::StatusOr<PlanTable> DecodePlanColumns(
    const google::protobuf::RepeatedPtrField<v1::Column>& columns) {
  PlanTable table;
  std::vector<std::string> names;
  std::vector<ColumnType> types;
  GPUJOIN_RETURN_IF_ERROR(DecodePlanSchema(columns, &names, &types));
  for (int i = 0; i < columns.size(); ++i) {
    const v1::Column& c = columns[i];
    const std::string field = absl::StrCat("columns[", i, "]");
    const ColumnType type = types[i];
    if (i > 0 && c.length() != table.rows) {
      return absl::InvalidArgumentError(absl::StrCat(field, ".length: column \"", c.name(),
                                                     "\" has ", c.length(), " rows but columns[0] has ",
                                                     table.rows));
    }
    GPUJOIN_ASSIGN_OR_RETURN(CheckedColumn checked,
                             CheckColumnBuffers(c, type, absl::StrCat(field, " (column \"", c.name(), "\")"),
                                                "this batch"));
    table.rows = c.length();
    PlanColumn col;
    col.type = type;
    col.rows = checked.rows;
    const auto* bytes = reinterpret_cast<const std::byte*>(checked.data.data());
    if (engine::IsVariableWidth(type)) {
      const std::span<const int32_t> off = checked.offsets.span();
      col.offsets.resize(col.rows + 1);
      const int32_t base = off.empty() ? 0 : off[0];
      for (uint64_t r = 0; r <= col.rows; ++r) col.offsets[r] = static_cast<uint32_t>(off[r] - base);
      col.data.assign(bytes, bytes + checked.data.size());
    } else if (type == ColumnType::kBool) {
      col.data.assign(bytes, bytes + engine::BitmapBytes(col.rows));
    } else {
      col.data.assign(bytes, bytes + col.rows * engine::ColumnWidth(type));
    }
    if (!checked.validity.empty()) {
      col.validity.assign(checked.validity.begin(), checked.validity.end());
    }
    table.names.push_back(c.name());
    table.columns.push_back(std::move(col));
  }
  return table;
}

void EncodePlanRows(const PlanTable& table, const std::vector<std::string>& names, uint64_t first,
                    uint64_t rows, google::protobuf::RepeatedPtrField<v1::Column>* out) {
  for (size_t i = 0; i < table.columns.size(); ++i) {
    const PlanColumn& c = table.columns[i];
    v1::Column* m = out->Add();
    m->set_name(i < names.size() ? names[i] : std::string());
    m->set_type(ToWireColumnType(c.type));
    m->set_length(rows);
    if (engine::IsVariableWidth(c.type)) {
      const uint32_t begin = c.offsets[first];
      const uint32_t end = c.offsets[first + rows];
      std::string* offsets = m->mutable_offsets();
      offsets->resize((rows + 1) * 4);
      for (uint64_t r = 0; r <= rows; ++r) {
        const int32_t v = static_cast<int32_t>(c.offsets[first + r] - begin);
        std::memcpy(offsets->data() + r * 4, &v, 4);
      }
      m->set_data(reinterpret_cast<const char*>(c.data.data()) + begin, end - begin);
    } else if (c.type == ColumnType::kBool) {
      std::string* data = m->mutable_data();
      data->assign(engine::BitmapBytes(rows), '\0');
      if (rows > 0) {
        CopyBits(reinterpret_cast<const uint8_t*>(c.data.data()), first, rows,
                 reinterpret_cast<uint8_t*>(data->data()), 0);
      }
    } else {
      const size_t w = engine::ColumnWidth(c.type);
      m->set_data(reinterpret_cast<const char*>(c.data.data()) + first * w, rows * w);
    }
    if (!c.validity.empty()) {
      uint64_t nulls = 0;
      for (uint64_t r = 0; r < rows; ++r) nulls += c.valid(first + r) ? 0 : 1;
      if (nulls > 0) {
        std::string* validity = m->mutable_validity();
        validity->assign(engine::BitmapBytes(rows), '\0');
        CopyBits(c.validity.data(), first, rows, reinterpret_cast<uint8_t*>(validity->data()), 0);
        m->set_null_count(nulls);
      }
    }
  }
}

std::vector<std::pair<uint64_t, uint64_t>> PlanResultParts(const PlanTable& table,
                                                           uint64_t max_bytes) {
  std::vector<std::pair<uint64_t, uint64_t>> parts;
  // Per column a header's worth, then per row its values, offsets and bits.
  const uint64_t header = 64 * (table.columns.size() + 1);
  double fixed_row = 0;
  for (const PlanColumn& c : table.columns) {
    if (engine::IsVariableWidth(c.type)) {
      fixed_row += 4;
    } else if (c.type == ColumnType::kBool) {
      fixed_row += 0.125;
    } else {
      fixed_row += static_cast<double>(engine::ColumnWidth(c.type));
    }
    if (!c.validity.empty()) fixed_row += 0.125;
  }
  const double budget = max_bytes > header ? static_cast<double>(max_bytes - header) : 1;
  uint64_t first = 0;
  double used = 0;
  for (uint64_t r = 0; r < table.rows; ++r) {
    double row = fixed_row;
    for (const PlanColumn& c : table.columns) {
      if (engine::IsVariableWidth(c.type)) row += c.offsets[r + 1] - c.offsets[r];
    }
    if (r > first && used + row + 2 > budget) {
      parts.emplace_back(first, r);
      first = r;
      used = 0;
    }
    used += row;
  }
  parts.emplace_back(first, table.rows);
  return parts;
}

}  // namespace gpujoin::server
