#include "columns.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <map>
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
// the cell, followed by `what` ("is not a number").
template <typename T, typename Convert>
absl::StatusOr<std::vector<T>> ConvertColumn(const Table& table, std::string_view name,
                                             Convert convert, const char* what) {
  auto col = table.Column(name);
  if (!col.ok()) return col.status();
  std::vector<T> out;
  out.reserve(table.rows.size());
  for (size_t r = 0; r < table.rows.size(); ++r) {
    const Cell& c = table.rows[r].cells[*col];
    std::optional<T> v = convert(c);
    if (!v) {
      return absl::InvalidArgumentError(
          absl::StrCat(Position(table, r, *col), ": ", Shown(c), " ", what));
    }
    out.push_back(*v);
  }
  return out;
}

}  // namespace

std::optional<uint32_t> ParseU32Text(std::string_view s) {
  s = Trim(s);
  int base = 10;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    s.remove_prefix(2);
    base = 16;
  }
  if (s.empty()) return std::nullopt;
  uint32_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v, base);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

std::optional<float> ParseF32Text(std::string_view s) {
  s = Trim(s);
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  if (s.empty()) return std::nullopt;
  float v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  // Out-of-range values saturate to +-inf like strtof rather than failing.
  if (ec == std::errc::result_out_of_range && p == s.data() + s.size()) {
    return s.front() == '-' ? -std::numeric_limits<float>::infinity()
                            : std::numeric_limits<float>::infinity();
  }
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

absl::StatusOr<std::vector<uint32_t>> KeyColumn(const Table& table, std::string_view name) {
  return ConvertColumn<uint32_t>(
      table, name, [](const Cell& c) { return c ? ParseU32Text(*c) : std::nullopt; },
      "is not a uint32 key");
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
