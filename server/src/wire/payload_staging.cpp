#include "wire/payload_staging.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gpujoin/common/status_macros.hpp"
#include "wire/column_check.hpp"
#include "wire/names.hpp"

namespace gpujoin::server {
namespace {

// The capacity a staged buffer of capacity `capacity` gets for `need` elements:
// 1.5x growth, so that appending chunk by chunk copies each byte a bounded number
// of times, while the capacity (what the staging budget is charged) stays within
// 1.5x of the rows held.
size_t Grown(size_t capacity, size_t need) {
  return need <= capacity ? capacity : std::max(need, capacity + capacity / 2);
}

template <typename T>
void ReserveGrown(std::vector<T>& v, size_t need) {
  const size_t capacity = Grown(v.capacity(), need);
  if (capacity > v.capacity()) v.reserve(capacity);
}

template <typename T>
uint64_t GrowthOf(const std::vector<T>& v, size_t need) {
  return (Grown(v.capacity(), need) - v.capacity()) * sizeof(T);
}

// Sets bits [first, first + bits) of `bitmap` to 1.
void SetBits(uint8_t* bitmap, uint64_t first, uint64_t bits) {
  while (bits > 0 && first % 8 != 0) {
    bitmap[first / 8] |= static_cast<uint8_t>(1u << (first % 8));
    ++first;
    --bits;
  }
  if (bits >= 8) {
    std::memset(bitmap + first / 8, 0xff, bits / 8);
    first += bits / 8 * 8;
    bits %= 8;
  }
  for (; bits > 0; ++first, --bits) bitmap[first / 8] |= static_cast<uint8_t>(1u << (first % 8));
}

// The declared names for an error message: all of them, or the first 16.
std::string DeclaredNames(const std::vector<std::string>& names) {
  if (names.empty()) return "spec.payload declares no columns";
  constexpr size_t kShown = 16;
  std::string list = absl::StrJoin(
      names.begin(), names.begin() + std::min(names.size(), kShown), ", ",
      [](std::string* out, const std::string& n) { absl::StrAppend(out, "\"", n, "\""); });
  if (names.size() > kShown) absl::StrAppend(&list, ", ... (", names.size(), " in all)");
  return absl::StrCat("spec.payload declares ", list);
}

}  // namespace

absl::Status PayloadStaging::Declare(
    const google::protobuf::RepeatedPtrField<v1::PayloadColumnSpec>& specs) {
  if (static_cast<size_t>(specs.size()) > kMaxPayloadColumns) {
    return absl::InvalidArgumentError(absl::StrCat(
        "spec.payload: ", specs.size(), " columns, at most ", kMaxPayloadColumns, " are allowed"));
  }
  std::map<std::string, int, std::less<>> seen;
  std::vector<Column> columns;
  for (int i = 0; i < specs.size(); ++i) {
    const v1::PayloadColumnSpec& spec = specs.Get(i);
    const std::string field = absl::StrCat("spec.payload[", i, "]");
    GPUJOIN_RETURN_IF_ERROR(ValidateColumnName(spec.name(), field + ".name"));
    auto [it, inserted] = seen.emplace(spec.name(), i);
    if (!inserted) {
      return absl::InvalidArgumentError(absl::StrCat(field, ".name: column \"", spec.name(),
                                                     "\" is declared twice (also spec.payload[",
                                                     it->second, "])"));
    }
    GPUJOIN_ASSIGN_OR_RETURN(engine::ColumnType type,
                             FromWireColumnType(spec.type(), field + ".type"));
    Column c;
    c.name = spec.name();
    c.type = type;
    if (engine::IsVariableWidth(type)) c.offsets.push_back(0);
    columns.push_back(std::move(c));
  }
  columns_ = std::move(columns);
  return absl::OkStatus();
}

absl::StatusOr<PayloadStaging::Chunk> PayloadStaging::Validate(
    const google::protobuf::RepeatedPtrField<v1::Column>& columns, std::string_view chunk_field,
    uint64_t max_rows, std::string_view max_rows_are) const {
  Chunk chunk;
  if (columns.empty()) return chunk;
  std::vector<uint64_t> rows(columns_.size());
  for (size_t j = 0; j < columns_.size(); ++j) rows[j] = columns_[j].rows;
  for (int i = 0; i < columns.size(); ++i) {
    const v1::Column& c = columns.Get(i);
    const std::string field = chunk_field.empty()
                                  ? absl::StrCat("payload[", i, "]")
                                  : absl::StrCat(std::string(chunk_field), ".payload[", i, "]");
    size_t j = 0;
    while (j < columns_.size() && columns_[j].name != c.name()) ++j;
    if (j == columns_.size()) {
      return absl::InvalidArgumentError(absl::StrCat(field, ".name: column \"", c.name(),
                                                     "\" is not declared (", DeclaredNames(Names()),
                                                     ")"));
    }
    const Column& column = columns_[j];
    const std::string where = absl::StrCat(field, " (column \"", column.name, "\")");
    if (c.type() != ToWireColumnType(column.type)) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ".type: ", WireColumnTypeName(c.type()), ", but spec.payload declares it ",
          WireColumnTypeName(ToWireColumnType(column.type))));
    }
    const uint64_t length = c.length();
    if (length > max_rows || rows[j] + length > max_rows) {
      return absl::InvalidArgumentError(absl::StrCat(where, ".length: ", length, " rows after ",
                                                     rows[j], " would exceed ", max_rows,
                                                     " rows, ", std::string(max_rows_are)));
    }
    GPUJOIN_ASSIGN_OR_RETURN(CheckedColumn checked, CheckColumnBuffers(c, column.type, where));
    Part part;
    part.column = j;
    part.rows = length;
    part.data = checked.data;
    part.offsets = std::move(checked.offsets);
    part.validity = checked.validity;
    rows[j] += length;
    chunk.push_back(std::move(part));
  }
  return chunk;
}

PayloadStaging::Target PayloadStaging::TargetOf(size_t j, const Chunk& chunk) const {
  const Column& column = columns_[j];
  Target t;
  t.rows = column.rows;
  size_t string_bytes = column.data.size();
  bool nullable = column.nullable;
  for (const Part& p : chunk) {
    if (p.column != j) continue;
    t.rows += p.rows;
    string_bytes += p.data.size();
    nullable = nullable || !p.validity.empty();
  }
  if (engine::IsVariableWidth(column.type)) {
    t.data = string_bytes;
    t.offsets = t.rows + 1;
  } else if (column.type == engine::ColumnType::kBool) {
    t.data = engine::BitmapBytes(t.rows);
  } else {
    t.data = t.rows * engine::ColumnWidth(column.type);
  }
  t.validity = nullable ? engine::BitmapBytes(t.rows) : 0;
  return t;
}

uint64_t PayloadStaging::GrowthBytes(const Chunk& chunk) const {
  std::set<size_t> touched;
  for (const Part& p : chunk) touched.insert(p.column);
  uint64_t bytes = 0;
  for (size_t j : touched) {
    const Target t = TargetOf(j, chunk);
    const Column& c = columns_[j];
    bytes += GrowthOf(c.data, t.data) + GrowthOf(c.offsets, t.offsets) +
             GrowthOf(c.validity, t.validity);
  }
  return bytes;
}

void PayloadStaging::Append(const Chunk& chunk) {
  std::set<size_t> touched;
  for (const Part& p : chunk) touched.insert(p.column);
  // Grow each buffer once, to what GrowthBytes counted.
  for (size_t j : touched) {
    const Target t = TargetOf(j, chunk);
    Column& c = columns_[j];
    ReserveGrown(c.data, t.data);
    ReserveGrown(c.offsets, t.offsets);
    ReserveGrown(c.validity, t.validity);
  }
  for (const Part& p : chunk) {
    Column& c = columns_[p.column];
    const uint64_t first_row = c.rows;
    const auto* bytes = reinterpret_cast<const std::byte*>(p.data.data());
    if (c.type == engine::ColumnType::kBool) {
      // The part's bits continue at the column's row, whatever its bit position.
      c.data.resize(engine::BitmapBytes(first_row + p.rows), std::byte{0});
      CopyBits(reinterpret_cast<const uint8_t*>(p.data.data()), 0, p.rows,
               reinterpret_cast<uint8_t*>(c.data.data()), first_row);
    } else if (engine::IsVariableWidth(c.type)) {
      const uint64_t base = c.data.size();
      c.data.insert(c.data.end(), bytes, bytes + p.data.size());
      const std::span<const int32_t> offsets = p.offsets.span();
      for (uint64_t r = 1; r <= p.rows; ++r) {
        c.offsets.push_back(base + static_cast<uint64_t>(offsets[r] - offsets[0]));
      }
    } else {
      c.data.insert(c.data.end(), bytes, bytes + p.data.size());
    }
    if (!p.validity.empty() && !c.nullable) {
      // The column's first null: every row before it was valid.
      c.nullable = true;
      c.validity.resize(engine::BitmapBytes(first_row), 0);
      SetBits(c.validity.data(), 0, first_row);
    }
    if (c.nullable) {
      c.validity.resize(engine::BitmapBytes(first_row + p.rows), 0);
      if (p.validity.empty()) {
        SetBits(c.validity.data(), first_row, p.rows);
      } else {
        CopyBits(reinterpret_cast<const uint8_t*>(p.validity.data()), 0, p.rows,
                 c.validity.data(), first_row);
      }
    }
    c.rows += p.rows;
  }
}

absl::Status PayloadStaging::CheckRows(uint64_t key_rows) const {
  for (size_t j = 0; j < columns_.size(); ++j) {
    const Column& c = columns_[j];
    if (c.rows != key_rows) {
      return absl::InvalidArgumentError(absl::StrCat(
          "spec.payload[", j, "] (column \"", c.name, "\"): ", c.rows,
          " rows in total, but the keys have ", key_rows,
          " (every payload column needs one row per key row, masked-out rows included)"));
    }
  }
  return absl::OkStatus();
}

std::vector<engine::ColumnView> PayloadStaging::Views() const {
  std::vector<engine::ColumnView> views;
  views.reserve(columns_.size());
  for (const Column& c : columns_) {
    engine::ColumnView v;
    v.type = c.type;
    v.rows = c.rows;
    v.data = std::span<const std::byte>(c.data.data(), c.data.size());
    if (engine::IsVariableWidth(c.type)) {
      v.offsets = std::span<const uint64_t>(c.offsets.data(), c.offsets.size());
    }
    v.validity = std::span<const uint8_t>(c.validity.data(), c.validity.size());
    views.push_back(v);
  }
  return views;
}

std::vector<engine::PayloadShape> PayloadStaging::Shapes() const {
  std::vector<engine::PayloadShape> shapes;
  shapes.reserve(columns_.size());
  for (const engine::ColumnView& v : Views()) shapes.push_back(engine::PayloadShapeOf(v));
  return shapes;
}

std::vector<std::string> PayloadStaging::Names() const {
  std::vector<std::string> names;
  names.reserve(columns_.size());
  for (const Column& c : columns_) names.push_back(c.name);
  return names;
}

uint64_t PayloadStaging::bytes() const {
  uint64_t bytes = 0;
  for (const Column& c : columns_) {
    bytes += c.data.capacity() + c.offsets.capacity() * sizeof(uint64_t) + c.validity.capacity();
  }
  return bytes;
}

void PayloadStaging::Clear() {
  for (Column& c : columns_) {
    std::vector<std::byte>().swap(c.data);
    std::vector<uint64_t>().swap(c.offsets);
    std::vector<uint8_t>().swap(c.validity);
    c.nullable = false;
    if (engine::IsVariableWidth(c.type)) c.offsets.push_back(0);
    c.rows = 0;
  }
}

}  // namespace gpujoin::server
