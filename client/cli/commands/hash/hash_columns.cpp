#include "commands/hash/hash_columns.hpp"

#include <charconv>
#include <cstring>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "columns/columns.hpp"

namespace gpujoin::cli {
namespace {

using client::ColumnType;

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

template <typename T>
bool ParseInt(std::string_view s, T* out) {
  s = Trim(s);
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && p == s.data() + s.size();
}

bool ParseDouble(std::string_view s, double* out) {
  s = Trim(s);
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && p == s.data() + s.size();
}

template <typename T>
void Append(std::vector<uint8_t>* data, T v) {
  const size_t at = data->size();
  data->resize(at + sizeof(T));
  std::memcpy(data->data() + at, &v, sizeof(T));
}

// Parses one cell as `type` and appends its little-endian bytes.
bool AppendValue(ColumnType type, std::string_view s, std::vector<uint8_t>* data) {
  switch (type) {
    case ColumnType::kUint32: {
      auto v = ParseU32Text(s);
      if (!v) return false;
      Append(data, *v);
      return true;
    }
    case ColumnType::kInt32: {
      int32_t v;
      if (!ParseInt(s, &v)) return false;
      Append(data, v);
      return true;
    }
    case ColumnType::kUint64: {
      uint64_t v;
      if (!ParseInt(s, &v)) return false;
      Append(data, v);
      return true;
    }
    case ColumnType::kInt64: {
      int64_t v;
      if (!ParseInt(s, &v)) return false;
      Append(data, v);
      return true;
    }
    case ColumnType::kFloat32: {
      auto v = ParseF32Text(s);
      if (!v) return false;
      Append(data, *v);
      return true;
    }
    case ColumnType::kFloat64: {
      double v;
      if (!ParseDouble(s, &v)) return false;
      Append(data, v);
      return true;
    }
    default: break;
  }
  return false;
}

size_t Width(ColumnType type) {
  switch (type) {
    case ColumnType::kUint32:
    case ColumnType::kInt32:
    case ColumnType::kFloat32: return 4;
    case ColumnType::kUint64:
    case ColumnType::kInt64:
    case ColumnType::kFloat64: return 8;
    default: return 0;
  }
  return 0;
}

}  // namespace

std::string_view HashTypeName(ColumnType type) {
  switch (type) {
    case ColumnType::kUint32: return "uint32";
    case ColumnType::kInt32: return "int32";
    case ColumnType::kUint64: return "uint64";
    case ColumnType::kInt64: return "int64";
    case ColumnType::kFloat32: return "float32";
    case ColumnType::kFloat64: return "float64";
    case ColumnType::kBinary: return "string";
    default: break;
  }
  return "?";
}

absl::StatusOr<ColumnType> ParseHashType(std::string_view name) {
  for (ColumnType t : {ColumnType::kUint32, ColumnType::kInt32, ColumnType::kUint64,
                       ColumnType::kInt64, ColumnType::kFloat32, ColumnType::kFloat64,
                       ColumnType::kBinary}) {
    if (HashTypeName(t) == name) return t;
  }
  if (name == "binary" || name == "utf8") return ColumnType::kBinary;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown column type '", std::string(name),
                   "' (expected uint32, int32, uint64, int64, float32, float64 or string)"));
}

ColumnType InferHashType(const Table& table, size_t col) {
  bool u32 = true, i64 = true, u64 = true, f64 = true;
  for (const Row& row : table.rows) {
    const Cell& c = row.cells[col];
    if (!c) continue;
    int64_t a;
    uint64_t b;
    double d;
    if (u32 && !ParseU32Text(*c)) u32 = false;
    if (i64 && !ParseInt(*c, &a)) i64 = false;
    if (u64 && !ParseInt(*c, &b)) u64 = false;
    if (f64 && !ParseDouble(*c, &d)) f64 = false;
    if (!f64) return ColumnType::kBinary;
  }
  if (u32) return ColumnType::kUint32;
  if (i64) return ColumnType::kInt64;
  if (u64) return ColumnType::kUint64;
  return ColumnType::kFloat64;
}

std::string HashInput::TypeName() const {
  return schema ? schema->ToString() : std::string(HashTypeName(type));
}

client::HashColumn HashInput::View() const {
  if (tree) return tree->view();
  client::HashColumn c;
  c.type = type;
  c.data = data;
  c.offsets = offsets;
  c.validity = validity;
  c.offset = 0;
  c.length = rows;
  return c;
}

absl::StatusOr<HashInput> BuildHashInput(const Table& table, std::string_view spec) {
  std::string_view name = spec;
  std::optional<ColumnType> forced;
  std::optional<HashSchema> schema;
  // A type expression may hold ':' itself (struct<a: int32>): the column name
  // ends at the first ':' whose remainder parses as a type.
  for (size_t colon = spec.find(':'); colon != std::string_view::npos && !forced && !schema;
       colon = spec.find(':', colon + 1)) {
    const std::string_view type = spec.substr(colon + 1);
    if (auto t = ParseHashType(type); t.ok()) {
      forced = *t;
      name = spec.substr(0, colon);
    } else if (auto s = ParseHashSchema(type); s.ok()) {
      schema = *std::move(s);
      name = spec.substr(0, colon);
    } else if (spec.find(':', colon + 1) == std::string_view::npos && !table.Column(spec).ok()) {
      // Not a column name containing ':' either: report the bad type.
      const bool expression = type.find('<') != std::string_view::npos;
      return absl::InvalidArgumentError(absl::StrCat(
          "--cols ", std::string(spec), ": ",
          std::string(expression ? s.status().message() : t.status().message())));
    }
  }
  auto col = table.Column(name);
  if (!col.ok()) return col.status();
  HashInput in;
  in.name = std::string(name);
  if (!forced && !schema && IsNestedJsonColumn(table, *col)) {
    auto inferred = InferJsonSchema(table, *col, in.name);
    if (!inferred.ok()) return inferred.status();
    schema = *std::move(inferred);
  }
  if (schema) {
    in.type = schema->type;
    in.rows = table.rows.size();
    in.tree.emplace(MakeHashBuilder(*schema));
    for (size_t r = 0; r < table.rows.size(); ++r) {
      if (auto s = AppendHashCell(*schema, table.rows[r].cells[*col], table.Where(r), in.name,
                                  &*in.tree);
          !s.ok()) {
        return s;
      }
    }
    in.null_count = in.tree->null_count();
    in.schema = std::move(schema);
    return in;
  }
  in.type = forced ? *forced : InferHashType(table, *col);
  in.rows = table.rows.size();
  in.validity.assign((in.rows + 7) / 8, 0);
  if (in.type == ColumnType::kBinary) in.offsets.push_back(0);
  const size_t width = Width(in.type);
  for (size_t r = 0; r < table.rows.size(); ++r) {
    const Cell& c = table.rows[r].cells[*col];
    if (!c) {
      ++in.null_count;
      if (in.type == ColumnType::kBinary) {
        in.offsets.push_back(in.offsets.back());
      } else {
        in.data.resize(in.data.size() + width, 0);
      }
      continue;
    }
    in.validity[r / 8] |= static_cast<uint8_t>(1u << (r % 8));
    if (in.type == ColumnType::kBinary) {
      if (in.data.size() + c->size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
        return absl::InvalidArgumentError(absl::StrCat(
            table.source, ": column '", in.name, "' holds more than 2 GiB of text"));
      }
      in.data.insert(in.data.end(), c->begin(), c->end());
      in.offsets.push_back(static_cast<int32_t>(in.data.size()));
    } else if (!AppendValue(in.type, *c, &in.data)) {
      std::string shown = c->size() > 40 ? c->substr(0, 37) + "..." : *c;
      return absl::InvalidArgumentError(absl::StrCat(table.Where(r), ": column '", in.name, "' (",
                                                     *col + 1, "): '", shown, "' is not a valid ",
                                                     std::string(HashTypeName(in.type))));
    }
  }
  return in;
}

}  // namespace gpujoin::cli
