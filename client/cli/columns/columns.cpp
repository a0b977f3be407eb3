#include "columns/columns.hpp"

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
  // One uint64 parse classifies every non-negative key (a uint32 key, decimal
  // or hex, is a uint64 key of the same value).
  if (auto v = ParseKeyText<uint64_t>(text)) {
    if (*v <= std::numeric_limits<uint32_t>::max()) return IntegerShape::kU32;
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

// Whether `s` is a plain decimal of at most 18 digits: a uint32 key, or (past
// 9 digits) possibly a key from 2^32 to 2^63 - 1, never anything wider.
bool ShortDecimal(std::string_view s) {
  if (s.empty() || s.size() > 18) return false;
  for (char ch : s) {
    if (ch < '0' || ch > '9') return false;
  }
  return true;
}

constexpr const char* kNotAnIntegerKey =
    "is not an integer key (for a string key give --key-type str)";

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
    case KeyKind::kColumns:
      return "columns";
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
    case KeyKind::kColumns:
      return "columns";
  }
  return "?";
}

client::KeyType WireKeyType(KeyKind kind) {
  if (kind == KeyKind::kColumns) return client::KeyType::kColumns;
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

absl::StatusOr<KeyKind> KeyKindTracker::Observe(const Table& table, std::string_view name) {
  auto col = table.Column(name);
  if (!col.ok()) return col.status();
  // A binary file says what it holds.
  switch (table.format) {
    case InputFormat::kU32:
      binary_ = KeyKind::kU32;
      return *binary_;
    case InputFormat::kU64:
      binary_ = KeyKind::kU64;
      return *binary_;
    case InputFormat::kI64:
      binary_ = KeyKind::kI64;
      return *binary_;
    default:
      break;
  }
  for (size_t r = 0; r < table.rows.size(); ++r) {
    const Cell& c = table.rows[r].cells[*col];
    // The common cell changes nothing the tracker knows: a uint32 key, or one
    // below 2^63 once a key above 4294967295 was seen (KeyColumn parses it).
    if (c && ShortDecimal(*c) && (above_u32_ || c->size() <= 9)) continue;
    const IntegerShape shape = c ? ShapeOf(*c) : IntegerShape::kNone;
    auto fail = [&](const std::string& why) {
      return absl::InvalidArgumentError(
          absl::StrCat(Position(table, r, *col), ": ", Shown(c), " ", why));
    };
    bool this_is_negative = false;
    switch (shape) {
      case IntegerShape::kNone:
        return fail(c ? kNotAnIntegerKey : "is not an integer key");
      case IntegerShape::kTooWide:
        return fail("fits no key type (it needs more than 64 bits)");
      case IntegerShape::kNegative:
        if (!negative_) negative_ = Seen{table.rows[r].line, Shown(c)};
        this_is_negative = true;
        break;
      case IntegerShape::kU64Large:
        if (!above_i64_) above_i64_ = Seen{table.rows[r].line, Shown(c)};
        above_u32_ = true;
        break;
      case IntegerShape::kU64Small:
        above_u32_ = true;
        break;
      case IntegerShape::kU32:
        break;
    }
    if (negative_ && above_i64_ &&
        (shape == IntegerShape::kNegative || shape == IntegerShape::kU64Large)) {
      // This row completes the conflict: name it and the other one.
      const Seen& other = this_is_negative ? *above_i64_ : *negative_;
      return fail(
          absl::StrCat("fits no key type: ",
                       this_is_negative ? "it is negative (int64) but "
                                        : "it is above 9223372036854775807 "
                                          "(uint64 only) but ",
                       table.binary_rows ? "row " : "line ", other.line, " holds ", other.shown,
                       this_is_negative ? ", above 9223372036854775807" : ", a negative key"));
    }
  }
  return kind();
}

std::optional<KeyVector> KeyKindTracker::PlainKeys(const Table& table, std::string_view name,
                                                   KeyKind kind) {
  // A binary file's keys are no text (and its kind is its own).
  const bool text = table.format == InputFormat::kCsv || table.format == InputFormat::kTsv ||
                    table.format == InputFormat::kJsonLines;
  if (kind == KeyKind::kAuto || kind == KeyKind::kColumns || !text) return std::nullopt;
  auto col = table.Column(name);
  if (!col.ok()) return std::nullopt;
  const bool narrow = kind == KeyKind::kU32;
  KeyVector out;
  out.kind = kind;
  std::vector<uint64_t> keys(table.rows.size());
  bool above_u32 = false;
  for (size_t r = 0; r < table.rows.size(); ++r) {
    const Cell& c = table.rows[r].cells[*col];
    if (!c || !ShortDecimal(*c)) return std::nullopt;
    uint64_t v = 0;  // at most 18 digits: no overflow
    for (char ch : *c) v = v * 10 + static_cast<uint64_t>(ch - '0');
    above_u32 |= v > std::numeric_limits<uint32_t>::max();
    keys[r] = v;
  }
  if (above_u32) {
    if (narrow) return std::nullopt;  // KeyColumn names the cell
    above_u32_ = true;
  }
  if (narrow) {
    out.u32.assign(keys.begin(), keys.end());
  } else {
    out.u64 = std::move(keys);
  }
  return out;
}

KeyKind KeyKindTracker::kind() const {
  if (binary_) return *binary_;
  if (negative_) return KeyKind::kI64;
  if (above_u32_) return KeyKind::kU64;
  return KeyKind::kU32;
}

absl::StatusOr<KeyKind> InferKeyKind(const Table& table, std::string_view name) {
  KeyKindTracker tracker;
  return tracker.Observe(table, name);
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

absl::Status GroupEncoder::Observe(const Table& table, std::string_view name) {
  auto col = table.Column(name);
  if (!col.ok()) return col.status();
  for (const Row& row : table.rows) {
    const Cell& c = row.cells[*col];
    if (!c) continue;
    // The distinct labels as written (dictionary mode), and in direct mode
    // which values occur.
    if (!code_.emplace(*c, 0).second) continue;
    if (!numeric_) continue;
    auto v = ParseU32Text(*c);
    if (!v) {
      numeric_ = false;
      direct_ = false;
    } else if (*v > max_direct_) {
      direct_ = false;
    } else {
      if (seen_.size() <= *v) seen_.resize(*v + 1, false);
      seen_[*v] = true;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<GroupEncoding> GroupEncoder::Finish(std::string_view source, std::string_view name) {
  GroupEncoding g;
  finished_direct_ = direct_;
  if (direct_) {
    g.groups = static_cast<uint32_t>(seen_.size());
    g.labels.resize(g.groups);
    for (uint32_t v = 0; v < g.groups; ++v) {
      g.labels[v] = std::to_string(v);
      if (seen_[v]) g.order.push_back(v);
    }
    return g;
  }
  // Dictionary mode: sort the distinct labels (numerically when all are
  // numbers) and number them densely.
  std::vector<std::string> distinct;
  distinct.reserve(code_.size());
  for (const auto& [label, code] : code_) distinct.push_back(label);
  if (numeric_) {
    std::sort(distinct.begin(), distinct.end(), [](const std::string& a, const std::string& b) {
      return *ParseU32Text(a) < *ParseU32Text(b);
    });
  } else {
    std::sort(distinct.begin(), distinct.end());
  }
  if (distinct.size() > std::numeric_limits<uint32_t>::max()) {
    return absl::InvalidArgumentError(absl::StrCat(
        std::string(source), ": column '", std::string(name), "' has too many distinct labels"));
  }
  for (size_t i = 0; i < distinct.size(); ++i) code_[distinct[i]] = static_cast<uint32_t>(i);
  g.groups = static_cast<uint32_t>(distinct.size());
  g.labels = std::move(distinct);
  g.order.resize(g.groups);
  for (uint32_t i = 0; i < g.groups; ++i) g.order[i] = i;
  g.dictionary = true;
  return g;
}

absl::Status GroupEncoder::Encode(const Table& table, std::string_view name,
                                  std::vector<uint32_t>* codes,
                                  std::vector<uint32_t>* present) const {
  auto col = table.Column(name);
  if (!col.ok()) return col.status();
  const size_t n = table.rows.size();
  codes->assign(n, 0);
  present->assign(n, 0);
  for (size_t r = 0; r < n; ++r) {
    const Cell& c = table.rows[r].cells[*col];
    if (!c) continue;
    if (finished_direct_) {
      auto v = ParseU32Text(*c);
      if (!v || *v >= seen_.size()) {
        return absl::InvalidArgumentError(
            absl::StrCat(table.Where(r), ": group label ", *c, " was not in the first pass"));
      }
      (*codes)[r] = *v;
    } else {
      auto it = code_.find(*c);
      if (it == code_.end()) {
        return absl::InvalidArgumentError(
            absl::StrCat(table.Where(r), ": group label ", *c, " was not in the first pass"));
      }
      (*codes)[r] = it->second;
    }
    (*present)[r] = 1;
  }
  return absl::OkStatus();
}

absl::StatusOr<GroupEncoding> EncodeGroups(const Table& table, std::string_view name,
                                           uint32_t max_direct) {
  GroupEncoder e(max_direct);
  absl::Status st = e.Observe(table, name);
  if (!st.ok()) return st;
  auto g = e.Finish(table.source, name);
  if (!g.ok()) return g.status();
  st = e.Encode(table, name, &g->codes, &g->present);
  if (!st.ok()) return st;
  return g;
}

}  // namespace gpujoin::cli
