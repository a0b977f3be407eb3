#include "columns/payload.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <type_traits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "columns/key_columns.hpp"

namespace gpujoin::cli {
namespace {

using client::ColumnType;

constexpr ColumnType kSchemaTypes[] = {
    ColumnType::kInt32,  ColumnType::kUint32,  ColumnType::kInt64,
    ColumnType::kUint64, ColumnType::kFloat32, ColumnType::kFloat64,
    ColumnType::kBool,   ColumnType::kString,  ColumnType::kBinary};

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::string Shown(std::string_view s) {
  if (s.size() > 40) return absl::StrCat("'", std::string(s.substr(0, 37)), "...'");
  return absl::StrCat("'", std::string(s), "'");
}

// A decimal integer of type T, optionally signed ('+' too), surrounding blanks allowed.
template <typename T>
std::optional<T> ParseInteger(std::string_view s) {
  s = Trim(s);
  const bool plus = !s.empty() && s.front() == '+';
  if (plus) s.remove_prefix(1);
  if (s.empty() || (plus && (s.front() == '+' || s.front() == '-'))) return std::nullopt;
  T v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v, 10);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

// A float or double: decimal or exponent notation, "nan", "inf", "infinity"
// (any case, optionally signed). A value beyond the type's range reads as
// strtod does: +-inf for overflow, the nearest subnormal or zero for underflow.
template <typename T>
std::optional<T> ParseReal(std::string_view s) {
  s = Trim(s);
  const bool plus = !s.empty() && s.front() == '+';
  if (plus) s.remove_prefix(1);
  if (s.empty() || (plus && (s.front() == '+' || s.front() == '-'))) return std::nullopt;
  T v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (p != s.data() + s.size()) return std::nullopt;
  if (ec == std::errc::result_out_of_range) {
    const std::string copy(s);
    errno = 0;
    if constexpr (std::is_same_v<T, float>) {
      v = std::strtof(copy.c_str(), nullptr);
    } else {
      v = std::strtod(copy.c_str(), nullptr);
    }
    return v;
  }
  if (ec != std::errc()) return std::nullopt;
  return v;
}

std::optional<bool> ParseBool(std::string_view s) {
  s = Trim(s);
  auto is = [&](std::string_view word) {
    return s.size() == word.size() && std::equal(s.begin(), s.end(), word.begin(),
                                                 [](char a, char b) { return (a | 0x20) == b; });
  };
  if (is("true")) return true;
  if (is("false")) return false;
  return std::nullopt;
}

// True when `s` is well-formed UTF-8 (no overlong forms, surrogates or code
// points above U+10FFFF), as the server requires of string payload.
bool IsUtf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  for (size_t i = 0; i < n;) {
    const unsigned c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    uint32_t cp;
    if ((c & 0xE0) == 0xC0) {
      len = 2;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + len > n) return false;
    for (size_t k = 1; k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += len;
  }
  return true;
}

// Appends cell text `t` (not empty) to a fixed-width or bool column; false
// when it is no value of the column's type.
bool AppendParsed(std::string_view t, client::Column* c) {
  auto put = [&](auto v) {
    if (!v) return false;
    c->Append(*v);
    return true;
  };
  switch (c->type) {
    case ColumnType::kUint32:
      return put(ParseInteger<uint32_t>(t));
    case ColumnType::kInt32:
      return put(ParseInteger<int32_t>(t));
    case ColumnType::kUint64:
      return put(ParseInteger<uint64_t>(t));
    case ColumnType::kInt64:
      return put(ParseInteger<int64_t>(t));
    case ColumnType::kFloat32:
      return put(ParseReal<float>(t));
    case ColumnType::kFloat64:
      return put(ParseReal<double>(t));
    case ColumnType::kBool: {
      const auto b = ParseBool(t);
      if (!b) return false;
      c->AppendBool(*b);
      return true;
    }
    case ColumnType::kBinary:
    case ColumnType::kString:
      break;
  }
  return false;
}

}  // namespace

std::vector<std::string> SplitList(std::string_view text) {
  std::vector<std::string> out;
  while (true) {
    const size_t comma = text.find(',');
    const std::string_view item = Trim(text.substr(0, comma));
    if (!item.empty()) out.emplace_back(item);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return out;
}

std::string_view SchemaTypeName(ColumnType type) {
  switch (type) {
    case ColumnType::kInt32:
      return "i32";
    case ColumnType::kUint32:
      return "u32";
    case ColumnType::kInt64:
      return "i64";
    case ColumnType::kUint64:
      return "u64";
    case ColumnType::kFloat32:
      return "f32";
    case ColumnType::kFloat64:
      return "f64";
    case ColumnType::kBool:
      return "bool";
    case ColumnType::kString:
      return "str";
    case ColumnType::kBinary:
      return "bin";
  }
  return "?";
}

absl::StatusOr<ColumnType> ParseSchemaType(std::string_view name) {
  for (ColumnType t : kSchemaTypes) {
    if (SchemaTypeName(t) == name) return t;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown type ", Shown(name), " (expected i32, u32, i64, u64, f32, f64, bool, str or bin)"));
}

absl::StatusOr<std::vector<SchemaEntry>> ParseSchema(std::string_view text) {
  std::vector<SchemaEntry> out;
  for (const std::string& item : SplitList(text)) {
    const std::string_view entry = item;
    const size_t colon = entry.rfind(':');
    if (colon == std::string_view::npos || colon == 0 || colon + 1 == entry.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--schema ", Shown(entry),
                       ": write NAME:TYPE (e.g. price:f64), types i32, u32, i64, "
                       "u64, f32, f64, bool, str, bin"));
    }
    const std::string_view name = entry.substr(0, colon);
    auto type = ParseSchemaType(entry.substr(colon + 1));
    if (!type.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--schema ", Shown(entry), ": ", std::string(type.status().message())));
    }
    for (const SchemaEntry& e : out) {
      if (e.name == name) {
        return absl::InvalidArgumentError(
            absl::StrCat("--schema: column ", Shown(name), " is given twice"));
      }
    }
    out.push_back(SchemaEntry{std::string(name), *type});
  }
  return out;
}

std::string FormatSchema(const std::vector<SchemaEntry>& entries) {
  return absl::StrJoin(entries, ",", [](std::string* out, const SchemaEntry& e) {
    absl::StrAppend(out, e.name, ":", std::string(SchemaTypeName(e.type)));
  });
}

ColumnType InferPayloadType(const Table& table, size_t col) {
  bool integer = true, number = true, boolean = true;
  for (const Row& row : table.rows) {
    const Cell& c = row.cells[col];
    if (!c) continue;
    const std::string_view t = Trim(*c);
    if (t.empty()) continue;
    if (integer && !ParseInteger<int64_t>(t)) integer = false;
    if (number && !ParseReal<double>(t)) number = false;
    if (boolean && !ParseBool(t)) boolean = false;
    if (!integer && !number && !boolean) return ColumnType::kString;
  }
  if (integer) return ColumnType::kInt64;
  if (number) return ColumnType::kFloat64;
  return boolean ? ColumnType::kBool : ColumnType::kString;
}

bool ValidPayloadName(std::string_view name) {
  if (name.empty() || name.size() > 128) return false;
  return std::all_of(name.begin(), name.end(), [](char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           ch == '_' || ch == '.' || ch == '-';
  });
}

absl::StatusOr<PayloadPlan> PlanPayload(const Table& table, std::string_view key,
                                        std::string_view value,
                                        const std::optional<std::string>& columns_flag,
                                        std::string_view schema_text, bool no_payload) {
  PayloadPlan plan;
  if (no_payload && (columns_flag || !Trim(schema_text).empty())) {
    return absl::InvalidArgumentError("--no-payload excludes --columns and --schema");
  }
  auto schema = ParseSchema(schema_text);
  if (!schema.ok()) return schema.status();
  if (no_payload) return plan;
  const std::vector<std::string> keys = SplitKeyColumns(key);
  if (columns_flag) {
    for (const std::string& name : SplitList(*columns_flag)) {
      auto col = table.Column(name);
      if (!col.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("--columns: ", std::string(col.status().message())));
      }
      if (std::find(keys.begin(), keys.end(), name) != keys.end()) {
        return absl::InvalidArgumentError(
            absl::StrCat("--columns: ", Shown(name), " is the key column (--key)"));
      }
      if (std::find(plan.columns.begin(), plan.columns.end(), *col) != plan.columns.end()) {
        return absl::InvalidArgumentError(
            absl::StrCat("--columns: column ", Shown(name), " is given twice"));
      }
      plan.columns.push_back(*col);
    }
  } else {
    for (size_t c = 0; c < table.header.size(); ++c) {
      if (std::find(keys.begin(), keys.end(), table.header[c]) == keys.end() &&
          table.header[c] != value) {
        plan.columns.push_back(c);
      }
    }
  }
  std::vector<std::string> names;
  for (size_t c : plan.columns) names.push_back(table.header[c]);
  for (const SchemaEntry& e : *schema) {
    if (std::find(names.begin(), names.end(), e.name) != names.end()) continue;
    if (!table.Column(e.name).ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--schema: ", table.source, " has no column ", Shown(e.name),
                       " (columns: ", absl::StrJoin(table.header, ", "), ")"));
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "--schema names ", Shown(e.name), ", which is not stored as payload (payload: ",
        names.empty() ? std::string("none") : absl::StrJoin(names, ", "), ")"));
  }
  for (size_t c : plan.columns) {
    const std::string& name = table.header[c];
    if (!ValidPayloadName(name)) {
      return absl::InvalidArgumentError(absl::StrCat(
          table.source, ": column ", Shown(name),
          " cannot be a payload column: names are 1 to 128 of A-Z a-z 0-9 _ . - (choose "
          "columns with --columns, or --no-payload)"));
    }
    auto given = std::find_if(schema->begin(), schema->end(),
                              [&](const SchemaEntry& e) { return e.name == name; });
    if (given != schema->end()) {
      plan.schema.push_back(*given);
      plan.from_schema.push_back(true);
    } else {
      plan.schema.push_back(SchemaEntry{name, InferPayloadType(table, c)});
      plan.from_schema.push_back(false);
    }
  }
  return plan;
}

absl::StatusOr<PayloadPlan> PlanPayloadForIndex(const Table& table, std::string_view key,
                                                std::string_view value,
                                                const client::IndexInfo& index) {
  const std::vector<std::string> keys = SplitKeyColumns(key);
  std::vector<std::string> stored;
  for (const auto& p : index.payload) stored.push_back(p.name);
  const std::string listed = stored.empty()
                                 ? std::string("it stores no payload")
                                 : absl::StrCat("its payload: ", absl::StrJoin(stored, ", "));
  PayloadPlan plan;
  for (size_t c = 0; c < table.header.size(); ++c) {
    const std::string& name = table.header[c];
    if (std::find(keys.begin(), keys.end(), name) != keys.end() || name == value) continue;
    auto it = std::find_if(index.payload.begin(), index.payload.end(),
                           [&](const client::PayloadColumnInfo& p) { return p.name == name; });
    if (it == index.payload.end()) {
      return absl::InvalidArgumentError(absl::StrCat(table.source, ": column ", Shown(name),
                                                     " is not a payload column of index '",
                                                     index.name, "' (", listed, ")"));
    }
    plan.columns.push_back(c);
    plan.schema.push_back(SchemaEntry{name, it->type});
    plan.from_schema.push_back(false);
  }
  for (const auto& p : index.payload) {
    if (std::find(keys.begin(), keys.end(), p.name) != keys.end() || p.name == value) {
      return absl::InvalidArgumentError(absl::StrCat(
          "column ", Shown(p.name), " is read as the ",
          p.name == value ? "value (--value)" : "key (--key)", ", but index '", index.name,
          "' stores a payload column of that name, which an upsert carries too"));
    }
    if (std::find(table.header.begin(), table.header.end(), p.name) == table.header.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          table.source, " has no column ", Shown(p.name), ": index '", index.name,
          "' stores payload column ", Shown(p.name), " (", std::string(SchemaTypeName(p.type)),
          "), and an upsert carries every payload column of the index (", listed, ")"));
    }
  }
  return plan;
}

absl::StatusOr<client::Column> PayloadColumn(const Table& table, size_t col,
                                             const SchemaEntry& entry, bool from_schema) {
  client::Column out(entry.name, entry.type);
  const bool text = client::IsVariableWidth(entry.type);
  auto fail = [&](size_t r, const std::string& why) {
    return absl::InvalidArgumentError(
        absl::StrCat(table.Where(r), ": column '", table.header[col], "' (", col + 1, "): ", why,
                     from_schema ? absl::StrCat(" (--schema ", entry.name, ":",
                                                std::string(SchemaTypeName(entry.type)), ")")
                                 : std::string()));
  };
  for (size_t r = 0; r < table.rows.size(); ++r) {
    const Cell& c = table.rows[r].cells[col];
    if (text) {
      if (!c) {
        out.AppendNull();
        continue;
      }
      if (entry.type == ColumnType::kString && !IsUtf8(*c)) {
        return fail(r, "the text is not valid UTF-8 (str columns hold UTF-8; bin takes any bytes)");
      }
      const absl::Status st = out.AppendString(*c);
      if (!st.ok())
        return absl::InvalidArgumentError(absl::StrCat(table.source, ": ", st.message()));
      continue;
    }
    const std::string_view t = c ? Trim(*c) : std::string_view();
    if (t.empty()) {
      out.AppendNull();
    } else if (!AppendParsed(t, &out)) {
      return fail(
          r, absl::StrCat(Shown(*c), " is not a valid ", std::string(SchemaTypeName(entry.type))));
    }
  }
  return out;
}

ColumnKind KindOf(ColumnType type) {
  switch (type) {
    case ColumnType::kFloat32:
    case ColumnType::kFloat64:
      return ColumnKind::kFloat;
    case ColumnType::kBool:
      return ColumnKind::kBool;
    case ColumnType::kBinary:
    case ColumnType::kString:
      return ColumnKind::kString;
    default:
      return ColumnKind::kNumber;
  }
}

Cell CellOf(const client::Column& c, uint64_t r) {
  if (!c.Valid(r)) return std::nullopt;
  switch (c.type) {
    case ColumnType::kUint32:
      return std::to_string(c.Value<uint32_t>(r));
    case ColumnType::kInt32:
      return std::to_string(c.Value<int32_t>(r));
    case ColumnType::kUint64:
      return std::to_string(c.Value<uint64_t>(r));
    case ColumnType::kInt64:
      return std::to_string(c.Value<int64_t>(r));
    case ColumnType::kFloat32:
      return FormatFloat(c.Value<float>(r));
    case ColumnType::kFloat64:
      return FormatDouble(c.Value<double>(r));
    case ColumnType::kBool:
      return std::string(c.Bool(r) ? "true" : "false");
    case ColumnType::kBinary:
    case ColumnType::kString:
      return std::string(c.String(r));
  }
  return std::nullopt;
}

namespace {

template <typename T>
std::string_view SpellInteger(T v, std::string* scratch) {
  char buf[24];
  const auto end = std::to_chars(buf, buf + sizeof buf, v).ptr;
  scratch->assign(buf, end);
  return *scratch;
}

}  // namespace

std::optional<std::string_view> CellViewOf(const client::Column& c, uint64_t r,
                                           std::string* scratch) {
  if (!c.Valid(r)) return std::nullopt;
  switch (c.type) {
    case ColumnType::kUint32:
      return SpellInteger(c.Value<uint32_t>(r), scratch);
    case ColumnType::kInt32:
      return SpellInteger(c.Value<int32_t>(r), scratch);
    case ColumnType::kUint64:
      return SpellInteger(c.Value<uint64_t>(r), scratch);
    case ColumnType::kInt64:
      return SpellInteger(c.Value<int64_t>(r), scratch);
    case ColumnType::kBool:
      return std::string_view(c.Bool(r) ? "true" : "false");
    case ColumnType::kBinary:
    case ColumnType::kString:
      return c.String(r);
    default:
      break;
  }
  Cell cell = CellOf(c, r);
  if (!cell) return std::nullopt;
  *scratch = *std::move(cell);
  return *scratch;
}

}  // namespace gpujoin::cli
