#include "commands/hash/hash_json.hpp"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>

#include "absl/strings/str_cat.h"

namespace gpujoin::cli {
namespace {

using client::ColumnType;
using client::HashColumnBuilder;
using Json = nlohmann::json;

constexpr ColumnType kScalars[] = {
    ColumnType::kUint32,  ColumnType::kInt32,       ColumnType::kUint64,      ColumnType::kInt64,
    ColumnType::kFloat32, ColumnType::kFloat64,     ColumnType::kBinary,      ColumnType::kBool,
    ColumnType::kString,  ColumnType::kInt8,        ColumnType::kUint8,       ColumnType::kInt16,
    ColumnType::kUint16,  ColumnType::kLargeBinary, ColumnType::kLargeString, ColumnType::kNull};

bool IsStringType(ColumnType t) {
  return t == ColumnType::kString || t == ColumnType::kBinary || t == ColumnType::kLargeString ||
         t == ColumnType::kLargeBinary;
}

std::string Name(ColumnType t) { return std::string(client::ColumnTypeName(t)); }

// ---------------------------------------------------------------- type expressions

class SchemaParser {
 public:
  explicit SchemaParser(std::string_view text) : text_(text) {}

  absl::StatusOr<HashSchema> ParseAll() {
    auto s = Parse();
    if (!s.ok()) return s;
    Skip();
    if (pos_ != text_.size()) return Fail("unexpected text");
    return s;
  }

 private:
  absl::Status Fail(std::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat("type '", std::string(text_), "' at column ",
                                                   pos_ + 1, ": ", std::string(what)));
  }
  void Skip() {
    while (pos_ < text_.size() && text_[pos_] == ' ') ++pos_;
  }
  bool Eat(char c) {
    Skip();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  std::string Word() {
    Skip();
    const size_t start = pos_;
    while (pos_ < text_.size() &&
           (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_' ||
            text_[pos_] == '-' || text_[pos_] == '.')) {
      ++pos_;
    }
    return std::string(text_.substr(start, pos_ - start));
  }
  absl::StatusOr<uint32_t> Number() {
    const std::string w = Word();
    uint32_t v = 0;
    auto [p, ec] = std::from_chars(w.data(), w.data() + w.size(), v);
    if (w.empty() || ec != std::errc() || p != w.data() + w.size()) {
      return Fail("expected a size");
    }
    return v;
  }

  absl::StatusOr<HashSchema> Parse() {
    const std::string word = Word();
    HashSchema s;
    if (word == "list" || word == "large_list" || word == "fixed_size_list") {
      s.type = word == "list"         ? ColumnType::kList
               : word == "large_list" ? ColumnType::kLargeList
                                      : ColumnType::kFixedSizeList;
      if (!Eat('<')) return Fail("expected '<'");
      auto e = Parse();
      if (!e.ok()) return e;
      s.fields.emplace_back("", *std::move(e));
      if (s.type == ColumnType::kFixedSizeList) {
        if (!Eat(',')) return Fail("expected ', N' (the list size)");
        auto n = Number();
        if (!n.ok()) return n.status();
        s.size = *n;
      }
      if (!Eat('>')) return Fail("expected '>'");
      return s;
    }
    if (word == "map") {
      s.type = ColumnType::kMap;
      if (!Eat('<')) return Fail("expected '<'");
      auto k = Parse();
      if (!k.ok()) return k;
      if (!IsStringType(k->type)) return Fail("map keys are JSON object keys: a string type");
      if (!Eat(',')) return Fail("expected ','");
      auto v = Parse();
      if (!v.ok()) return v;
      if (!Eat('>')) return Fail("expected '>'");
      s.fields.emplace_back("key", *std::move(k));
      s.fields.emplace_back("value", *std::move(v));
      return s;
    }
    if (word == "struct") {
      s.type = ColumnType::kStruct;
      if (!Eat('<')) return Fail("expected '<'");
      if (Eat('>')) return s;
      do {
        const std::string name = Word();
        if (name.empty()) return Fail("expected a field name");
        if (!Eat(':')) return Fail("expected ':' after the field name");
        auto f = Parse();
        if (!f.ok()) return f;
        s.fields.emplace_back(name, *std::move(f));
      } while (Eat(','));
      if (!Eat('>')) return Fail("expected ',' or '>'");
      return s;
    }
    if (word == "fixed_size_binary") {
      s.type = ColumnType::kFixedSizeBinary;
      if (!Eat('<')) return Fail("expected '<N>' (the bytes per value)");
      auto n = Number();
      if (!n.ok()) return n.status();
      s.size = *n;
      if (!Eat('>')) return Fail("expected '>'");
      return s;
    }
    if (word == "utf8") {
      s.type = ColumnType::kString;
      return s;
    }
    for (ColumnType t : kScalars) {
      if (client::ColumnTypeName(t) == word) {
        s.type = t;
        return s;
      }
    }
    return Fail(absl::StrCat("unknown type '", word,
                             "' (expected a scalar type, list<T>, large_list<T>, "
                             "fixed_size_list<T, N>, struct<name: T, ...> or map<K, V>)"));
  }

  std::string_view text_;
  size_t pos_ = 0;
};

// ---------------------------------------------------------------- inference

// What the values seen at one path so far admit.
struct Inferred {
  bool seen = false;  // a non-null value
  enum Kind { kNone, kBool, kNumber, kString, kList, kObject } kind = kNone;
  bool u32 = true, i64 = true, u64 = true;  // kNumber: every integer fits
  bool floating = false;
  std::unique_ptr<Inferred> element;                                      // kList
  std::vector<std::pair<std::string, std::unique_ptr<Inferred>>> fields;  // kObject

  Inferred* Field(const std::string& name) {
    for (auto& [n, f] : fields) {
      if (n == name) return f.get();
    }
    fields.emplace_back(name, std::make_unique<Inferred>());
    return fields.back().second.get();
  }
};

const char* KindName(Inferred::Kind k) {
  switch (k) {
    case Inferred::kBool:
      return "a boolean";
    case Inferred::kNumber:
      return "a number";
    case Inferred::kString:
      return "a string";
    case Inferred::kList:
      return "an array";
    case Inferred::kObject:
      return "an object";
    default:
      return "nothing";
  }
}

absl::Status Observe(const Json& v, Inferred* in, const std::string& path, std::string_view where,
                     std::string_view name) {
  if (v.is_null()) return absl::OkStatus();
  Inferred::Kind k = v.is_boolean()  ? Inferred::kBool
                     : v.is_number() ? Inferred::kNumber
                     : v.is_string() ? Inferred::kString
                     : v.is_array()  ? Inferred::kList
                                     : Inferred::kObject;
  if (in->seen && in->kind != k) {
    return absl::InvalidArgumentError(absl::StrCat(
        std::string(where), ": column '", std::string(name), "'", path.empty() ? "" : " at ", path,
        ": ", KindName(k), " where earlier rows hold ", KindName(in->kind),
        "; give the type with --cols ", std::string(name), ":<type>"));
  }
  in->seen = true;
  in->kind = k;
  if (k == Inferred::kNumber) {
    if (v.is_number_float()) {
      in->floating = true;
    } else if (v.is_number_unsigned()) {
      const uint64_t u = v.get<uint64_t>();
      if (u > std::numeric_limits<uint32_t>::max()) in->u32 = false;
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) in->i64 = false;
    } else {
      const int64_t i = v.get<int64_t>();
      if (i < 0) {
        in->u32 = false;
        in->u64 = false;
      }
    }
  } else if (k == Inferred::kList) {
    if (!in->element) in->element = std::make_unique<Inferred>();
    for (const Json& e : v) {
      if (auto s = Observe(e, in->element.get(), path + "[]", where, name); !s.ok()) return s;
    }
  } else if (k == Inferred::kObject) {
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (auto s = Observe(it.value(), in->Field(it.key()),
                           path.empty() ? it.key() : path + "." + it.key(), where, name);
          !s.ok()) {
        return s;
      }
    }
  }
  return absl::OkStatus();
}

HashSchema Resolve(const Inferred& in) {
  HashSchema s;
  switch (in.kind) {
    case Inferred::kNone:
      s.type = ColumnType::kNull;
      break;
    case Inferred::kBool:
      s.type = ColumnType::kBool;
      break;
    case Inferred::kString:
      s.type = ColumnType::kString;
      break;
    case Inferred::kNumber:
      s.type = in.floating || !(in.u32 || in.i64 || in.u64) ? ColumnType::kFloat64
               : in.u32                                     ? ColumnType::kUint32
               : in.i64                                     ? ColumnType::kInt64
                                                            : ColumnType::kUint64;
      break;
    case Inferred::kList:
      s.type = ColumnType::kList;
      s.fields.emplace_back("", in.element ? Resolve(*in.element) : HashSchema{});
      break;
    case Inferred::kObject:
      s.type = ColumnType::kStruct;
      for (const auto& [n, f] : in.fields) s.fields.emplace_back(n, Resolve(*f));
      break;
  }
  return s;
}

// ---------------------------------------------------------------- appending

absl::Status Bad(std::string_view where, std::string_view name, const std::string& path,
                 const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(std::string(where), ": column '",
                                                 std::string(name), "'", path.empty() ? "" : " at ",
                                                 path, ": ", what));
}

std::string Shown(std::string_view s) {
  return s.size() > 40 ? std::string(s.substr(0, 37)) + "..." : std::string(s);
}

template <typename T>
std::optional<T> FromText(std::string_view s) {
  T v{};
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

// Appends the number `v` (a JSON number, or text) as `type`; false when it does not fit.
template <typename T>
bool AppendInteger(const Json& v, std::string_view text, HashColumnBuilder* b) {
  std::optional<T> x;
  if (v.is_number_integer()) {
    if (v.is_number_unsigned()) {
      const uint64_t u = v.get<uint64_t>();
      if (u <= static_cast<uint64_t>(std::numeric_limits<T>::max())) x = static_cast<T>(u);
    } else {
      const int64_t i = v.get<int64_t>();
      if (i >= static_cast<int64_t>(std::numeric_limits<T>::min()) &&
          (i < 0 ||
           static_cast<uint64_t>(i) <= static_cast<uint64_t>(std::numeric_limits<T>::max()))) {
        x = static_cast<T>(i);
      }
    }
  } else if (v.is_null()) {
    x = FromText<T>(text);
  }
  return x && b->Append<T>(*x).ok();
}

absl::Status AppendValue(const HashSchema& s, const Json& v, std::string_view text, bool from_text,
                         const std::string& path, std::string_view where, std::string_view name,
                         HashColumnBuilder* b) {
  if (!from_text && v.is_null()) {
    b->AppendNull();
    return absl::OkStatus();
  }
  auto mismatch = [&]() {
    return Bad(where, name, path,
               absl::StrCat("'", Shown(from_text ? std::string(text) : v.dump()),
                            "' is not a valid ", s.ToString()));
  };
  // `v` is null exactly when the cell is read as text.
  const Json none;
  const Json& jv = from_text ? none : v;
  switch (s.type) {
    case ColumnType::kUint32:
      return AppendInteger<uint32_t>(jv, text, b) ? absl::OkStatus() : mismatch();
    case ColumnType::kInt32:
      return AppendInteger<int32_t>(jv, text, b) ? absl::OkStatus() : mismatch();
    case ColumnType::kUint64:
      return AppendInteger<uint64_t>(jv, text, b) ? absl::OkStatus() : mismatch();
    case ColumnType::kInt64:
      return AppendInteger<int64_t>(jv, text, b) ? absl::OkStatus() : mismatch();
    case ColumnType::kInt8:
      return AppendInteger<int8_t>(jv, text, b) ? absl::OkStatus() : mismatch();
    case ColumnType::kUint8:
      return AppendInteger<uint8_t>(jv, text, b) ? absl::OkStatus() : mismatch();
    case ColumnType::kInt16:
      return AppendInteger<int16_t>(jv, text, b) ? absl::OkStatus() : mismatch();
    case ColumnType::kUint16:
      return AppendInteger<uint16_t>(jv, text, b) ? absl::OkStatus() : mismatch();
    case ColumnType::kFloat32:
    case ColumnType::kFloat64: {
      std::optional<double> d;
      if (from_text) {
        d = FromText<double>(text);
      } else if (v.is_number()) {
        d = v.get<double>();
      }
      if (!d) return mismatch();
      return s.type == ColumnType::kFloat32 ? b->Append<float>(static_cast<float>(*d))
                                            : b->Append<double>(*d);
    }
    case ColumnType::kBool: {
      if (from_text) {
        if (text == "true" || text == "1") return b->AppendBool(true);
        if (text == "false" || text == "0") return b->AppendBool(false);
        return mismatch();
      }
      if (!v.is_boolean()) return mismatch();
      return b->AppendBool(v.get<bool>());
    }
    case ColumnType::kBinary:
    case ColumnType::kString:
    case ColumnType::kLargeBinary:
    case ColumnType::kLargeString:
    case ColumnType::kFixedSizeBinary: {
      std::string bytes;
      if (from_text) {
        bytes = std::string(text);
      } else if (v.is_string()) {
        bytes = v.get<std::string>();
      } else {
        return mismatch();
      }
      if (auto st = b->AppendBytes(bytes); !st.ok()) {
        return Bad(where, name, path, std::string(st.message()));
      }
      return absl::OkStatus();
    }
    case ColumnType::kNull:
      // Only nulls fit (a non-null value here is a mismatch).
      return mismatch();
    case ColumnType::kList:
    case ColumnType::kLargeList:
    case ColumnType::kFixedSizeList: {
      if (from_text || !v.is_array()) return mismatch();
      if (s.type == ColumnType::kFixedSizeList && v.size() != s.size) {
        return Bad(where, name, path,
                   absl::StrCat("an array of ", v.size(), " values for ", s.ToString()));
      }
      size_t i = 0;
      for (const Json& e : v) {
        if (auto st = AppendValue(s.fields[0].second, e, "", false,
                                  absl::StrCat(path, "[", i++, "]"), where, name, &b->child(0));
            !st.ok()) {
          return st;
        }
      }
      if (auto st = b->AppendNested(); !st.ok())
        return Bad(where, name, path, std::string(st.message()));
      return absl::OkStatus();
    }
    case ColumnType::kMap: {
      if (from_text || !v.is_object()) return mismatch();
      for (auto it = v.begin(); it != v.end(); ++it) {
        const std::string p = path.empty() ? it.key() : path + "." + it.key();
        if (auto st = b->child(0).AppendBytes(it.key()); !st.ok()) {
          return Bad(where, name, p, std::string(st.message()));
        }
        if (auto st = AppendValue(s.fields[1].second, it.value(), "", false, p, where, name,
                                  &b->child(1));
            !st.ok()) {
          return st;
        }
      }
      if (auto st = b->AppendNested(); !st.ok())
        return Bad(where, name, path, std::string(st.message()));
      return absl::OkStatus();
    }
    case ColumnType::kStruct: {
      if (from_text || !v.is_object()) return mismatch();
      for (auto it = v.begin(); it != v.end(); ++it) {
        bool known = false;
        for (const auto& [n, f] : s.fields) known = known || n == it.key();
        if (!known) {
          return Bad(where, name, path,
                     absl::StrCat("field '", it.key(), "' is not in ", s.ToString()));
        }
      }
      static const Json kNull;
      for (size_t k = 0; k < s.fields.size(); ++k) {
        const auto& [n, f] = s.fields[k];
        const auto it = v.find(n);
        if (auto st = AppendValue(f, it == v.end() ? kNull : *it, "", false,
                                  path.empty() ? n : path + "." + n, where, name, &b->child(k));
            !st.ok()) {
          return st;
        }
      }
      if (auto st = b->AppendNested(); !st.ok())
        return Bad(where, name, path, std::string(st.message()));
      return absl::OkStatus();
    }
    default:
      return Bad(where, name, path, absl::StrCat(s.ToString(), " cannot be read from JSON"));
  }
}

}  // namespace

std::string HashSchema::ToString() const {
  switch (type) {
    case ColumnType::kList:
    case ColumnType::kLargeList:
      return absl::StrCat(Name(type), "<", fields[0].second.ToString(), ">");
    case ColumnType::kFixedSizeList:
      return absl::StrCat("fixed_size_list<", fields[0].second.ToString(), ", ", size, ">");
    case ColumnType::kFixedSizeBinary:
      return absl::StrCat("fixed_size_binary<", size, ">");
    case ColumnType::kMap:
      return absl::StrCat("map<", fields[0].second.ToString(), ", ", fields[1].second.ToString(),
                          ">");
    case ColumnType::kStruct: {
      std::string s = "struct<";
      for (size_t i = 0; i < fields.size(); ++i) {
        absl::StrAppend(&s, i ? ", " : "", fields[i].first, ": ", fields[i].second.ToString());
      }
      return s + ">";
    }
    default:
      return Name(type);
  }
}

bool HashSchema::nested() const { return client::HasChildren(type); }

absl::StatusOr<HashSchema> ParseHashSchema(std::string_view text) {
  return SchemaParser(text).ParseAll();
}

std::vector<std::string> SplitHashColumnSpecs(std::string_view cols) {
  std::vector<std::string> out;
  std::string cur;
  int depth = 0;
  for (char c : cols) {
    if (c == '<') ++depth;
    if (c == '>' && depth > 0) --depth;
    if (c == ',' && depth == 0) {
      if (!cur.empty()) out.push_back(std::move(cur));
      cur.clear();
      continue;
    }
    cur.push_back(c);
  }
  if (!cur.empty()) out.push_back(std::move(cur));
  return out;
}

bool IsNestedJsonColumn(const Table& table, size_t col) {
  if (table.format != InputFormat::kJsonLines) return false;
  bool any = false;
  for (const Row& row : table.rows) {
    const Cell& c = row.cells[col];
    if (!c) continue;
    const size_t first = c->find_first_not_of(" \t\r\n");
    if (first == std::string::npos || ((*c)[first] != '[' && (*c)[first] != '{')) return false;
    any = true;
  }
  return any;
}

absl::StatusOr<HashSchema> InferJsonSchema(const Table& table, size_t col, std::string_view name) {
  Inferred in;
  for (size_t r = 0; r < table.rows.size(); ++r) {
    const Cell& c = table.rows[r].cells[col];
    if (!c) continue;
    const Json v = Json::parse(*c, nullptr, /*allow_exceptions=*/false);
    if (v.is_discarded()) {
      return Bad(table.Where(r), name, "", absl::StrCat("'", Shown(*c), "' is not JSON"));
    }
    if (auto s = Observe(v, &in, "", table.Where(r), name); !s.ok()) return s;
  }
  return Resolve(in);
}

HashColumnBuilder MakeHashBuilder(const HashSchema& schema) {
  HashColumnBuilder b(schema.type, schema.size);
  for (const auto& [n, f] : schema.fields) b.AddChild(MakeHashBuilder(f));
  return b;
}

absl::Status AppendHashCell(const HashSchema& schema, const Cell& cell, std::string_view where,
                            std::string_view name, HashColumnBuilder* builder) {
  if (!cell) {
    builder->AppendNull();
    return absl::OkStatus();
  }
  if (!schema.nested()) return AppendValue(schema, Json(), *cell, true, "", where, name, builder);
  const Json v = Json::parse(*cell, nullptr, /*allow_exceptions=*/false);
  if (v.is_discarded()) {
    return Bad(where, name, "",
               absl::StrCat("'", Shown(*cell), "' is not JSON (", schema.ToString(),
                            " reads JSON arrays and objects)"));
  }
  return AppendValue(schema, v, "", false, "", where, name, builder);
}

}  // namespace gpujoin::cli
