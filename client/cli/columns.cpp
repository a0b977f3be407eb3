#include "columns.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <type_traits>
#include <unordered_map>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace gpujoin::cli {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::string Shown(const Cell& c) {
  if (!c) return "an empty (null) cell";
  if (c->size() > 40) return absl::StrCat("'", c->substr(0, 37), "...'");
  return absl::StrCat("'", *c, "'");
}

std::string Position(const Table& t, size_t row, size_t col) {
  return absl::StrCat(t.Where(row), ": column '", t.header[col], "' (", col + 1, ")");
}

// Converts every cell of column `name` with `convert` (Cell -> std::optional<T>).
// The first cell it rejects is an INVALID_ARGUMENT naming the row, the column and
// the cell, followed by `what(cell)` ("is not a number").
template <typename T, typename Convert, typename What>
absl::StatusOr<std::vector<T>> ConvertColumn(const Table& table, std::string_view name,
                                             Convert convert, What what) {
  auto col = table.Column(name);
  if (!col.ok()) return col.status();
  std::vector<T> out;
  out.reserve(table.rows.size());
  for (size_t r = 0; r < table.rows.size(); ++r) {
    const Cell& c = table.rows[r].cells[*col];
    std::optional<T> v = convert(c);
    if (!v) {
      return absl::InvalidArgumentError(
          absl::StrCat(Position(table, r, *col), ": ", Shown(c), " ", what(c)));
    }
    out.push_back(*v);
  }
  return out;
}

template <typename T, typename Convert>
absl::StatusOr<std::vector<T>> ConvertColumn(const Table& table, std::string_view name,
                                             Convert convert, const char* what) {
  return ConvertColumn<T>(table, name, convert, [what](const Cell&) { return std::string(what); });
}

// What an integer cell's text is, for inference and for the reason a key type
// rejects it.
enum class IntegerShape {
  kNone,      // not an integer
  kU32,       // 0 .. 2^32-1
  kU64Small,  // 2^32 .. 2^63-1: uint64 and int64
  kU64Large,  // 2^63 .. 2^64-1: uint64 only
  kNegative,  // -2^63 .. -1: int64 only
  kTooWide,   // digits, but beyond 64 bits
};

IntegerShape ShapeOf(std::string_view text) {
  if (ParseKeyText<uint32_t>(text)) return IntegerShape::kU32;
  if (auto v = ParseKeyText<uint64_t>(text)) {
    return *v <= uint64_t{std::numeric_limits<int64_t>::max()} ? IntegerShape::kU64Small
                                                               : IntegerShape::kU64Large;
  }
  if (ParseKeyText<int64_t>(text)) return IntegerShape::kNegative;
  std::string_view t = Trim(text);
  if (!t.empty() && t.front() == '-') t.remove_prefix(1);
  bool hex = t.size() > 2 && t[0] == '0' && (t[1] == 'x' || t[1] == 'X');
  if (hex) t.remove_prefix(2);
  if (t.empty()) return IntegerShape::kNone;
  for (char ch : t) {
    if (!(std::isdigit(static_cast<unsigned char>(ch)) ||
          (hex && std::isxdigit(static_cast<unsigned char>(ch))))) {
      return IntegerShape::kNone;
    }
  }
  return IntegerShape::kTooWide;
}

constexpr const char* kNotAnIntegerKey = "is not an integer key; string keys: see docs/cli.md";

template <typename T>
constexpr const char* kTypeName = std::is_same_v<T, uint32_t>   ? "uint32"
                                  : std::is_same_v<T, uint64_t> ? "uint64"
                                                                : "int64";

// Why ParseKeyText<T> rejected cell `c` (a key of type T, or a uint32 value).
template <typename T>
std::string Rejection(const Cell& c, const char* role) {
  const std::string head =
      absl::StrCat("is not a", std::is_same_v<T, int64_t> ? "n " : " ", kTypeName<T>, " ", role);
  if (!c) return head;
  switch (ShapeOf(*c)) {
    case IntegerShape::kNone:
      return std::string(role) == "key" ? kNotAnIntegerKey : head;
    case IntegerShape::kU64Small:
    case IntegerShape::kU64Large:
      if (std::is_same_v<T, int64_t>) return head + " (it is above 9223372036854775807)";
      return head + " (it is above 4294967295)";
    case IntegerShape::kNegative:
      return head + " (it is negative)";
    case IntegerShape::kTooWide:
      return head + " (it needs more than 64 bits)";
    case IntegerShape::kU32:
      break;
  }
  return head;
}

// Column `name` as keys of T, stored as Stored (int64 keys as uint64 bit patterns).
template <typename T, typename Stored = T>
absl::StatusOr<std::vector<Stored>> KeysOf(const Table& table, std::string_view name) {
  return ConvertColumn<Stored>(
      table, name,
      [](const Cell& c) -> std::optional<Stored> {
        if (!c) return std::nullopt;
        auto v = ParseKeyText<T>(*c);
        if (!v) return std::nullopt;
        return static_cast<Stored>(*v);
      },
      [](const Cell& c) { return Rejection<T>(c, "key"); });
}

}  // namespace

absl::StatusOr<KeyKind> ParseKeyKind(std::string_view name) {
  for (KeyKind k : {KeyKind::kAuto, KeyKind::kU32, KeyKind::kU64, KeyKind::kI64}) {
    if (KeyKindName(k) == name) return k;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--key-type: unknown key type '", std::string(name), "' (expected auto, u32, u64 or i64)"));
}

std::string_view KeyKindName(KeyKind kind) {
  switch (kind) {
    case KeyKind::kAuto:
      return "auto";
    case KeyKind::kU32:
      return "u32";
    case KeyKind::kU64:
      return "u64";
    case KeyKind::kI64:
      return "i64";
  }
  return "?";
}

std::string_view KeyKindTypeName(KeyKind kind) {
  switch (kind) {
    case KeyKind::kAuto:
      return "auto";
    case KeyKind::kU32:
      return "uint32";
    case KeyKind::kU64:
      return "uint64";
    case KeyKind::kI64:
      return "int64";
  }
  return "?";
}

client::KeyType WireKeyType(KeyKind kind) {
  return kind == KeyKind::kU64 || kind == KeyKind::kI64 ? client::KeyType::kUint64
                                                        : client::KeyType::kUint32;
}

template <typename T>
std::optional<T> ParseKeyText(std::string_view s) {
  static_assert(std::is_same_v<T, uint32_t> || std::is_same_v<T, uint64_t> ||
                std::is_same_v<T, int64_t>);
  s = Trim(s);
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    // Hex spells the bits (of the unsigned word of T's width).
    s.remove_prefix(2);
    if (s.empty() || s.front() == '-' || s.front() == '+') return std::nullopt;
    std::make_unsigned_t<T> v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v, 16);
    if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
    return static_cast<T>(v);
  }
  if (s.empty()) return std::nullopt;
  T v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v, 10);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

template std::optional<uint32_t> ParseKeyText<uint32_t>(std::string_view);
template std::optional<uint64_t> ParseKeyText<uint64_t>(std::string_view);
template std::optional<int64_t> ParseKeyText<int64_t>(std::string_view);

std::optional<uint32_t> ParseU32Text(std::string_view s) { return ParseKeyText<uint32_t>(s); }

std::optional<float> ParseF32Text(std::string_view s) {
  s = Trim(s);
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  if (s.empty()) return std::nullopt;
  float v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  // Out-of-range values round like strtof rather than failing: too large to
  // +-inf, too small to a subnormal or +-0 (from_chars reports both as out of
  // range and leaves `v` unset).
  if (ec == std::errc::result_out_of_range && p == s.data() + s.size()) {
    return std::strtof(std::string(s).c_str(), nullptr);
  }
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

absl::StatusOr<KeyKind> InferKeyKind(const Table& table, std::string_view name) {
  auto col = table.Column(name);
  if (!col.ok()) return col.status();
  // A binary file says what it holds.
  switch (table.format) {
    case InputFormat::kU32:
      return KeyKind::kU32;
    case InputFormat::kU64:
      return KeyKind::kU64;
    case InputFormat::kI64:
      return KeyKind::kI64;
    default:
      break;
  }
  std::optional<size_t> negative, above_i64, above_u32;
  for (size_t r = 0; r < table.rows.size(); ++r) {
    const Cell& c = table.rows[r].cells[*col];
    const IntegerShape shape = c ? ShapeOf(*c) : IntegerShape::kNone;
    auto fail = [&](const std::string& why) {
      return absl::InvalidArgumentError(
          absl::StrCat(Position(table, r, *col), ": ", Shown(c), " ", why));
    };
    switch (shape) {
      case IntegerShape::kNone:
        return fail(c ? kNotAnIntegerKey : "is not an integer key");
      case IntegerShape::kTooWide:
        return fail("fits no key type (it needs more than 64 bits)");
      case IntegerShape::kNegative:
        if (!negative) negative = r;
        break;
      case IntegerShape::kU64Large:
        if (!above_i64) above_i64 = r;
        [[fallthrough]];
      case IntegerShape::kU64Small:
        if (!above_u32) above_u32 = r;
        break;
      case IntegerShape::kU32:
        break;
    }
    if (negative && above_i64) {
      // This row completes the conflict: name it and the other one.
      const bool this_is_negative = *negative == r;
      const size_t other = this_is_negative ? *above_i64 : *negative;
      return fail(
          absl::StrCat("fits no key type: ",
                       this_is_negative ? "it is negative (int64) but "
                                        : "it is above 9223372036854775807 "
                                          "(uint64 only) but ",
                       table.binary_rows ? "row " : "line ", table.rows[other].line, " holds ", Shown(table.rows[other].cells[*col]),
                       this_is_negative ? ", above 9223372036854775807" : ", a negative key"));
    }
  }
  if (negative) return KeyKind::kI64;
  if (above_u32) return KeyKind::kU64;
  return KeyKind::kU32;
}

KeyKind WiderKeyKind(KeyKind a, KeyKind b) {
  if (a == KeyKind::kI64 || b == KeyKind::kI64) return KeyKind::kI64;
  if (a == KeyKind::kU64 || b == KeyKind::kU64) return KeyKind::kU64;
  if (a == KeyKind::kAuto) return b;
  return a;
}

absl::StatusOr<KeyKind> KindForIndex(KeyKind flag, KeyKind data, client::KeyType index_type,
                                     std::string_view index) {
  if (flag != KeyKind::kAuto) {
    if (WireKeyType(flag) == index_type) return flag;
    return absl::InvalidArgumentError(absl::StrCat(
        "--key-type ", std::string(KeyKindName(flag)), ": index '", std::string(index), "' has ",
        std::string(client::KeyTypeName(index_type)), " keys; use ",
        index_type == client::KeyType::kUint32 ? "--key-type u32" : "--key-type u64 or i64",
        " (or auto)"));
  }
  if (index_type == client::KeyType::kUint32) return KeyKind::kU32;
  return data == KeyKind::kI64 ? KeyKind::kI64 : KeyKind::kU64;
}

absl::StatusOr<KeyVector> ForIndex(absl::StatusOr<KeyVector> keys, const client::IndexInfo& index) {
  if (keys.ok()) return keys;
  return absl::Status(keys.status().code(),
                      absl::StrCat(keys.status().message(), "; index '", index.name, "' has ",
                                   std::string(client::KeyTypeName(index.key_type)), " keys"));
}

absl::StatusOr<KeyVector> KeyColumn(const Table& table, std::string_view name, KeyKind kind) {
  if (kind == KeyKind::kAuto) {
    auto inferred = InferKeyKind(table, name);
    if (!inferred.ok()) return inferred.status();
    kind = *inferred;
  }
  KeyVector v;
  v.kind = kind;
  if (kind == KeyKind::kU32) {
    auto k = KeysOf<uint32_t>(table, name);
    if (!k.ok()) return k.status();
    v.u32 = *std::move(k);
  } else {
    auto k = kind == KeyKind::kI64 ? KeysOf<int64_t, uint64_t>(table, name)
                                   : KeysOf<uint64_t>(table, name);
    if (!k.ok()) return k.status();
    v.u64 = *std::move(k);
  }
  return v;
}

absl::StatusOr<std::vector<uint32_t>> KeyColumn(const Table& table, std::string_view name) {
  return KeysOf<uint32_t>(table, name);
}

absl::StatusOr<std::vector<uint32_t>> U32ValueColumn(const Table& table, std::string_view name) {
  return ConvertColumn<uint32_t>(
      table, name, [](const Cell& c) { return c ? ParseU32Text(*c) : std::nullopt; },
      [](const Cell& c) { return Rejection<uint32_t>(c, "value"); });
}

absl::StatusOr<std::vector<float>> ValueColumn(const Table& table, std::string_view name) {
  return ConvertColumn<float>(
      table, name,
      [](const Cell& c) -> std::optional<float> {
        if (!c || Trim(*c).empty()) return std::numeric_limits<float>::quiet_NaN();
        return ParseF32Text(*c);
      },
      "is not a number");
}

absl::StatusOr<std::vector<uint32_t>> MaskColumn(const Table& table, std::string_view name) {
  return ConvertColumn<uint32_t>(
      table, name,
      [](const Cell& c) -> std::optional<uint32_t> {
        if (!c) return 0;
        const std::string_view t = Trim(*c);
        if (t == "true") return 1;
        if (t == "false") return 0;
        if (auto v = ParseU32Text(t)) return *v != 0 ? 1 : 0;
        return std::nullopt;
      },
      "is not a mask (uint32, true or false)");
}

absl::StatusOr<GroupEncoding> EncodeGroups(const Table& table, std::string_view name,
                                           uint32_t max_direct) {
  auto col = table.Column(name);
  if (!col.ok()) return col.status();
  const size_t n = table.rows.size();
  GroupEncoding g;
  g.codes.assign(n, 0);
  g.present.assign(n, 0);

  // Direct mode when every label is a small uint32.
  bool direct = true;
  uint32_t max_label = 0;
  bool numeric = true;  // every label parses as uint32 (for ordering)
  for (size_t r = 0; r < n; ++r) {
    const Cell& c = table.rows[r].cells[*col];
    if (!c) continue;
    auto v = ParseU32Text(*c);
    if (!v) {
      numeric = false;
      direct = false;
      break;
    }
    if (*v > max_direct) direct = false;
    max_label = std::max(max_label, *v);
  }
  if (direct) {
    std::vector<bool> seen;
    for (size_t r = 0; r < n; ++r) {
      const Cell& c = table.rows[r].cells[*col];
      if (!c) continue;
      const uint32_t v = *ParseU32Text(*c);
      g.codes[r] = v;
      g.present[r] = 1;
      if (seen.size() <= v) seen.resize(v + 1, false);
      seen[v] = true;
    }
    g.groups = static_cast<uint32_t>(seen.size());
    g.labels.resize(g.groups);
    for (uint32_t v = 0; v < g.groups; ++v) {
      g.labels[v] = std::to_string(v);
      if (seen[v]) g.order.push_back(v);
    }
    return g;
  }

  // Dictionary mode: sort the distinct labels (numerically when all are
  // numbers) and number them densely.
  std::unordered_map<std::string, uint32_t> code;
  std::vector<std::string> distinct;
  for (size_t r = 0; r < n; ++r) {
    const Cell& c = table.rows[r].cells[*col];
    if (!c) continue;
    if (code.emplace(*c, 0).second) distinct.push_back(*c);
  }
  if (numeric) {
    std::sort(distinct.begin(), distinct.end(), [](const std::string& a, const std::string& b) {
      return *ParseU32Text(a) < *ParseU32Text(b);
    });
  } else {
    std::sort(distinct.begin(), distinct.end());
  }
  if (distinct.size() > std::numeric_limits<uint32_t>::max()) {
    return absl::InvalidArgumentError(absl::StrCat(table.source, ": column '", std::string(name),
                                                   "' has too many distinct labels"));
  }
  for (size_t i = 0; i < distinct.size(); ++i) code[distinct[i]] = static_cast<uint32_t>(i);
  for (size_t r = 0; r < n; ++r) {
    const Cell& c = table.rows[r].cells[*col];
    if (!c) continue;
    g.codes[r] = code[*c];
    g.present[r] = 1;
  }
  g.groups = static_cast<uint32_t>(distinct.size());
  g.labels = std::move(distinct);
  g.order.resize(g.groups);
  for (uint32_t i = 0; i < g.groups; ++i) g.order[i] = i;
  g.dictionary = true;
  return g;
}

}  // namespace gpujoin::cli
