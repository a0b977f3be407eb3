#include "columns/key_columns.hpp"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace gpujoin::cli {
namespace {

using client::ColumnType;

constexpr ColumnType kKeyColumnTypes[] = {ColumnType::kInt32,  ColumnType::kInt64,
                                          ColumnType::kUint32, ColumnType::kUint64,
                                          ColumnType::kString, ColumnType::kBinary};

absl::StatusOr<ColumnType> ParseKeyColumnTypeWord(std::string_view word, std::string_view text) {
  for (ColumnType t : kKeyColumnTypes) {
    if (KeyColumnTypeWord(t) == word) return t;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--key-type '", std::string(text), "': unknown key column type '",
                   std::string(word), "' (expected i32, i64, u32, u64, str or bin)"));
}

bool IsBinaryFile(const Table& t) {
  return t.format == InputFormat::kU32 || t.format == InputFormat::kU64 ||
         t.format == InputFormat::kI64;
}

// Whether `text` spells an integer, whatever its width: optional spaces, an
// optional '-', then decimal digits or 0x and hex digits.
bool IntegerText(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  if (!text.empty() && text.front() == '-') text.remove_prefix(1);
  const bool hex = text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X');
  if (hex) text.remove_prefix(2);
  if (text.empty()) return false;
  return std::all_of(text.begin(), text.end(), [hex](char ch) {
    return std::isdigit(static_cast<unsigned char>(ch)) ||
           (hex && std::isxdigit(static_cast<unsigned char>(ch)));
  });
}

bool IsIntegerType(ColumnType t) { return t != ColumnType::kString && t != ColumnType::kBinary; }

// The key column type of an integer key kind (a side of an ad-hoc join read
// as integers, joined with a side of key columns).
ColumnType ColumnTypeOf(KeyKind kind) {
  return kind == KeyKind::kU32 || kind == KeyKind::kU64 ? ColumnType::kUint64 : ColumnType::kInt64;
}

std::string Shown(const Cell& c) {
  if (!c) return "an empty (null) cell";
  if (c->size() > 40) return absl::StrCat("'", c->substr(0, 37), "...'");
  return absl::StrCat("'", *c, "'");
}

// Appends the integer in `text` to `out` as a value of its type; false when
// it is none.
bool AppendInteger(std::string_view text, client::Column* out) {
  switch (out->type) {
    case ColumnType::kInt32: {
      auto v = ParseKeyText<int64_t>(text);
      if (!v || *v < std::numeric_limits<int32_t>::min() ||
          *v > std::numeric_limits<int32_t>::max()) {
        return false;
      }
      out->Append(static_cast<int32_t>(*v));
      return true;
    }
    case ColumnType::kInt64: {
      auto v = ParseKeyText<int64_t>(text);
      if (v) out->Append(*v);
      return v.has_value();
    }
    case ColumnType::kUint32: {
      auto v = ParseKeyText<uint32_t>(text);
      if (v) out->Append(*v);
      return v.has_value();
    }
    case ColumnType::kUint64: {
      auto v = ParseKeyText<uint64_t>(text);
      if (v) out->Append(*v);
      return v.has_value();
    }
    default:
      return false;
  }
}

// Column `name` of `table` as a key column of `type`.
absl::StatusOr<client::Column> ReadKeyColumn(const Table& table, std::string_view name,
                                             ColumnType type) {
  auto col = table.Column(name);
  if (!col.ok()) return col.status();
  client::Column out(std::string(name), type);
  for (size_t r = 0; r < table.rows.size(); ++r) {
    const Cell& c = table.rows[r].cells[*col];
    if (!c) {
      out.AppendNull();
      continue;
    }
    if (!IsIntegerType(type)) {
      const absl::Status st = out.AppendString(*c);
      if (!st.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(table.Where(r), ": ", st.message()));
      }
    } else if (!AppendInteger(*c, &out)) {
      const std::string word(KeyColumnTypeWord(type));
      return absl::InvalidArgumentError(absl::StrCat(
          table.Where(r), ": column '", table.header[*col], "' (", *col + 1, "): ", Shown(c),
          " is not a", type == ColumnType::kInt32 || type == ColumnType::kInt64 ? "n " : " ",
          std::string(ColumnTypeName(type)), " key (--key-type ", std::string(name), ":", word,
          "; str reads the column as text)"));
    }
  }
  return out;
}

}  // namespace

std::optional<ColumnType> KeyTypeFlag::TypeOf(std::string_view name) const {
  for (const auto& [n, t] : per_column) {
    if (n == name) return t;
  }
  return all;
}

absl::StatusOr<KeyTypeFlag> ParseKeyTypeFlag(std::string_view text) {
  KeyTypeFlag f;
  if (text == "str") {
    f.kind = KeyKind::kColumns;
    f.all = ColumnType::kString;
    return f;
  }
  if (text.find(':') == std::string_view::npos) {
    auto k = ParseKeyKind(text);
    if (!k.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--key-type: unknown key type '", std::string(text),
                       "' (expected auto, u32, u64, i64, str or COL:TYPE,...)"));
    }
    f.kind = *k;
    return f;
  }
  f.kind = KeyKind::kColumns;
  for (const std::string& part : SplitKeyColumns(text)) {
    const size_t colon = part.rfind(':');
    if (colon == std::string::npos || colon == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--key-type '", std::string(text), "': '", part, "' is not COL:TYPE (e.g. id:i64,sku:str)"));
    }
    auto t = ParseKeyColumnTypeWord(part.substr(colon + 1), text);
    if (!t.ok()) return t.status();
    f.per_column.emplace_back(part.substr(0, colon), *t);
  }
  return f;
}

std::string_view KeyColumnTypeWord(ColumnType type) {
  switch (type) {
    case ColumnType::kInt32:
      return "i32";
    case ColumnType::kInt64:
      return "i64";
    case ColumnType::kUint32:
      return "u32";
    case ColumnType::kUint64:
      return "u64";
    case ColumnType::kString:
      return "str";
    case ColumnType::kBinary:
      return "bin";
    default:
      return ColumnTypeName(type);
  }
}

std::vector<std::string> SplitKeyColumns(std::string_view text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    out.emplace_back(text.substr(start, comma - start));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

std::string KeyPlan::TypesText() const {
  if (kind != KeyKind::kColumns) return std::string(KeyKindName(kind));
  std::vector<std::string> parts;
  for (size_t i = 0; i < columns.size(); ++i) {
    parts.push_back(absl::StrCat(columns[i], ":", std::string(KeyColumnTypeWord(types[i]))));
  }
  return absl::StrJoin(parts, ",");
}

std::vector<client::KeyColumnSpec> KeyPlan::Schema() const {
  std::vector<client::KeyColumnSpec> schema;
  for (size_t i = 0; i < columns.size(); ++i) schema.push_back({columns[i], types[i]});
  return schema;
}

absl::StatusOr<ColumnType> InferKeyColumnType(const Table& table, std::string_view name) {
  auto col = table.Column(name);
  if (!col.ok()) return col.status();
  bool negative = false, above_i64 = false;
  for (const Row& r : table.rows) {
    const Cell& c = r.cells[*col];
    if (!c) continue;
    if (auto u = ParseKeyText<uint64_t>(*c)) {
      // Hex spells the bits of the word: 0xffffffffffffffff is -1 as int64.
      if (*u > uint64_t{std::numeric_limits<int64_t>::max()}) above_i64 = true;
    } else if (ParseKeyText<int64_t>(*c)) {
      negative = true;
    } else if (!IntegerText(*c)) {
      return ColumnType::kString;
    }
  }
  // Numbers that fit no one integer type (wider than 64 bits, or negative
  // beside ones above 2^63 - 1) stay numbers: the integer parse names them.
  return above_i64 && !negative ? ColumnType::kUint64 : ColumnType::kInt64;
}

absl::StatusOr<KeyPlan> PlanKey(const Table& batch, std::vector<std::string> columns,
                                const KeyTypeFlag& flag) {
  KeyPlan plan;
  plan.columns = std::move(columns);
  for (const std::string& c : plan.columns) {
    auto col = batch.Column(c);
    if (!col.ok()) return col.status();
  }
  for (const auto& [name, type] : flag.per_column) {
    if (std::find(plan.columns.begin(), plan.columns.end(), name) == plan.columns.end()) {
      return absl::InvalidArgumentError(absl::StrCat("--key-type: '", name,
                                                     "' is not a key column (the key: ",
                                                     absl::StrJoin(plan.columns, ","), ")"));
    }
  }
  if (plan.columns.size() == 1 && flag.kind != KeyKind::kColumns) {
    if (flag.kind != KeyKind::kAuto) {
      plan.kind = flag.kind;
      return plan;
    }
    auto t = IsBinaryFile(batch) ? ColumnType::kInt64 : InferKeyColumnType(batch, plan.columns[0]);
    if (!t.ok()) return t.status();
    if (*t != ColumnType::kString) {
      auto k = InferKeyKind(batch, plan.columns[0]);
      if (!k.ok()) return k.status();
      plan.kind = *k;
      return plan;
    }
  }
  plan.kind = KeyKind::kColumns;
  for (const std::string& c : plan.columns) {
    std::optional<ColumnType> t = flag.TypeOf(c);
    if (!t) {
      auto inferred = InferKeyColumnType(batch, c);
      if (!inferred.ok()) return inferred.status();
      t = *inferred;
    }
    plan.types.push_back(*t);
  }
  return plan;
}

absl::StatusOr<std::pair<KeyPlan, KeyPlan>> JoinKeyPlans(const KeyPlan& left,
                                                         const KeyPlan& right) {
  if (left.columns.size() != right.columns.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("join: --on: the left key has ", left.columns.size(),
                     " columns but the right key has ", right.columns.size()));
  }
  std::pair<KeyPlan, KeyPlan> out{left, right};
  if (left.kind != KeyKind::kColumns && right.kind != KeyKind::kColumns) {
    out.first.kind = out.second.kind = WiderKeyKind(left.kind, right.kind);
    return out;
  }
  auto types_of = [](const KeyPlan& p) {
    return p.kind == KeyKind::kColumns ? p.types
                                       : std::vector<ColumnType>{ColumnTypeOf(p.kind)};
  };
  const std::vector<ColumnType> lt = types_of(left), rt = types_of(right);
  std::vector<ColumnType> types;
  for (size_t i = 0; i < lt.size(); ++i) {
    ColumnType t = lt[i];
    if (lt[i] != rt[i]) {
      if (!IsIntegerType(lt[i]) || !IsIntegerType(rt[i])) {
        t = lt[i] == ColumnType::kBinary || rt[i] == ColumnType::kBinary ? ColumnType::kBinary
                                                                         : ColumnType::kString;
      } else {
        t = lt[i] == ColumnType::kUint64 || rt[i] == ColumnType::kUint64 ? ColumnType::kUint64
                                                                         : ColumnType::kInt64;
      }
    }
    types.push_back(t);
  }
  for (KeyPlan* p : {&out.first, &out.second}) {
    p->kind = KeyKind::kColumns;
    p->types = types;
  }
  return out;
}

absl::StatusOr<KeyPlan> PlanForKeyColumnsIndex(std::vector<std::string> columns,
                                               const KeyTypeFlag& flag,
                                               const client::IndexInfo& index,
                                               std::string_view option) {
  KeyPlan plan;
  plan.columns = std::move(columns);
  plan.kind = KeyKind::kColumns;
  std::vector<std::string> schema;
  for (const auto& k : index.key_columns) {
    schema.push_back(absl::StrCat(k.name, ":", std::string(KeyColumnTypeWord(k.type))));
  }
  const std::string key = absl::StrJoin(schema, ",");
  if (plan.columns.size() != index.key_columns.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        std::string(option), " '", absl::StrJoin(plan.columns, ","), "': ", plan.columns.size(),
        " key columns, but index '", index.name, "' has a key of ", index.key_columns.size(),
        " (", key, "); name one column of the file per key column, in that order"));
  }
  if (flag.kind != KeyKind::kAuto && flag.kind != KeyKind::kColumns) {
    return absl::InvalidArgumentError(absl::StrCat("--key-type ", std::string(KeyKindName(flag.kind)),
                                                   ": index '", index.name,
                                                   "' is keyed by columns (", key,
                                                   "); leave --key-type out"));
  }
  for (size_t i = 0; i < plan.columns.size(); ++i) {
    const ColumnType t = index.key_columns[i].type;
    if (auto given = flag.TypeOf(plan.columns[i]); given && *given != t) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--key-type ", plan.columns[i], ":", std::string(KeyColumnTypeWord(*given)),
          ": key column ", i, " of index '", index.name, "' is ", index.key_columns[i].name, ":",
          std::string(KeyColumnTypeWord(t)), " (", key, ")"));
    }
    plan.types.push_back(t);
  }
  return plan;
}

absl::StatusOr<std::optional<KeyPlan>> PlanForIndex(std::string_view key_text,
                                                    const KeyTypeFlag& flag,
                                                    const client::IndexInfo& index,
                                                    std::string_view option) {
  std::vector<std::string> columns = SplitKeyColumns(key_text);
  if (index.key_type == client::KeyType::kColumns) {
    auto plan = PlanForKeyColumnsIndex(std::move(columns), flag, index, option);
    if (!plan.ok()) return plan.status();
    return std::optional<KeyPlan>(*std::move(plan));
  }
  const std::string word(client::KeyTypeName(index.key_type));
  if (columns.size() > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        std::string(option), " '", std::string(key_text), "': ", columns.size(),
        " key columns, but index '", index.name, "' has one ", word, " key column"));
  }
  if (flag.kind == KeyKind::kColumns) {
    return absl::InvalidArgumentError(absl::StrCat("--key-type: index '", index.name, "' has ",
                                                   word, " keys; give u32, u64, i64 or auto"));
  }
  return std::optional<KeyPlan>();
}

absl::StatusOr<IndexKeyReader> IndexKeyReader::Make(std::string key_text, const KeyTypeFlag& flag,
                                                    const client::IndexInfo& index,
                                                    std::string_view option) {
  IndexKeyReader r;
  auto plan = PlanForIndex(key_text, flag, index, option);
  if (!plan.ok()) return plan.status();
  r.column_plan_ = *std::move(plan);
  // An explicit --key-type must fit the index before anything is read.
  if (!r.column_plan_ && flag.kind != KeyKind::kAuto) {
    auto kind = KindForIndex(flag.kind, flag.kind, index.key_type, index.name);
    if (!kind.ok()) return kind.status();
  }
  r.key_ = std::move(key_text);
  r.flag_ = flag.kind;
  r.last_kind_ = flag.kind;
  r.index_ = index;
  return r;
}

absl::StatusOr<KeyVector> IndexKeyReader::Read(const Table& batch) {
  if (column_plan_) return ReadKeys(batch, *column_plan_);
  KeyKind kind = flag_;
  // A batch of plain keys takes one pass; it leaves the inferred type as it is.
  std::optional<KeyVector> plain;
  if (!first_) plain = tracker_.PlainKeys(batch, key_, last_kind_);
  if (plain) {
    kind = last_kind_;
  } else if (flag_ == KeyKind::kAuto && index_.key_type == client::KeyType::kUint32 && !first_) {
    kind = KeyKind::kU32;  // KeyColumn names a cell that is no uint32 key
  } else if (flag_ == KeyKind::kAuto) {
    // The data's own type first, so that a bad cell is named as InferKeyKind names it.
    auto data = tracker_.Observe(batch, key_);
    if (!data.ok()) return data.status();
    auto fits = KindForIndex(flag_, *data, index_.key_type, index_.name);
    if (!fits.ok()) return fits.status();
    kind = *fits;
  }
  last_kind_ = kind;
  first_ = false;
  if (plain) return *std::move(plain);
  return ForIndex(KeyColumn(batch, key_, kind), index_);
}

absl::StatusOr<KeyVector> ReadKeys(const Table& table, const KeyPlan& plan) {
  if (plan.kind != KeyKind::kColumns) return KeyColumn(table, plan.columns.at(0), plan.kind);
  KeyVector out;
  out.kind = KeyKind::kColumns;
  for (size_t i = 0; i < plan.columns.size(); ++i) {
    auto c = ReadKeyColumn(table, plan.columns[i], plan.types[i]);
    if (!c.ok()) return c.status();
    // Sent without a name: the key columns are the index's by position.
    c->name.clear();
    out.columns.push_back(*std::move(c));
  }
  return out;
}

}  // namespace gpujoin::cli
