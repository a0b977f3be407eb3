// gpujoin agg's values (agg_values.hpp): value types inferred from the data,
// value columns converted to the stream's type, result words spelled as cells.
#include "commands/agg/agg_values.hpp"

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "cli_context.hpp"
#include "columns/columns.hpp"
#include "output/output.hpp"

namespace gpujoin::cli {

std::optional<double> ParseF64Text(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  if (s.empty()) return std::nullopt;
  const std::string text(s);
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size()) return std::nullopt;
  return v;
}

bool BlankCell(const Cell& c) { return !c || c->find_first_not_of(" \t") == std::string::npos; }

std::string InferValueType(const Table& t, size_t col) {
  bool any = false, above_i64 = false;
  for (const Row& row : t.rows) {
    const Cell& c = row.cells[col];
    if (BlankCell(c)) continue;
    any = true;
    if (ParseKeyText<int64_t>(*c)) continue;
    if (ParseKeyText<uint64_t>(*c)) {
      above_i64 = true;
      continue;
    }
    return "float64";
  }
  if (!any) return "float64";
  return above_i64 ? "uint64" : "int64";
}

template <typename V>
std::vector<V> TypedValues(const Table& t, size_t col, std::string_view type,
                           std::vector<uint32_t>& present) {
  std::vector<V> out(t.rows.size(), V{0});
  present.assign(t.rows.size(), 1);
  for (size_t r = 0; r < t.rows.size(); ++r) {
    const Cell& c = t.rows[r].cells[col];
    if (BlankCell(c)) {
      present[r] = 0;
      continue;
    }
    std::optional<V> v;
    if constexpr (std::is_same_v<V, double>) {
      v = ParseF64Text(*c);
    } else if constexpr (std::is_same_v<V, int32_t>) {
      if (auto w = ParseKeyText<int64_t>(*c); w && *w >= INT32_MIN && *w <= INT32_MAX) {
        v = static_cast<int32_t>(*w);
      }
    } else {
      v = ParseKeyText<V>(*c);
    }
    if (!v) {
      // A float64 column is the default for decimal text: "not a number" says
      // what is wrong without naming a type the user never chose.
      const std::string what =
          std::is_same_v<V, double>
              ? std::string("is not a number (float64; see --value-type)")
              : absl::StrCat("is not a valid ", std::string(type), " (see --value-type)");
      InputOrDie(absl::StatusOr<int>(absl::InvalidArgumentError(absl::StrCat(
          t.Where(r), ": column '", t.header[col], "' (", col + 1, "): '", *c, "' ", what))));
    }
    out[r] = *v;
  }
  return out;
}

Cell TypedCell(client::ColumnType type, uint64_t word) {
  switch (type) {
    case client::ColumnType::kInt32:
    case client::ColumnType::kInt64:
      return std::to_string(static_cast<int64_t>(word));
    case client::ColumnType::kUint32:
    case client::ColumnType::kUint64:
      return std::to_string(word);
    default: {
      const double d = std::bit_cast<double>(word);
      if (std::isnan(d)) return std::nullopt;
      return FormatDouble(d);
    }
  }
}

template std::vector<double> TypedValues<double>(const Table&, size_t, std::string_view,
                                                 std::vector<uint32_t>&);
template std::vector<int32_t> TypedValues<int32_t>(const Table&, size_t, std::string_view,
                                                   std::vector<uint32_t>&);
template std::vector<int64_t> TypedValues<int64_t>(const Table&, size_t, std::string_view,
                                                   std::vector<uint32_t>&);
template std::vector<uint32_t> TypedValues<uint32_t>(const Table&, size_t, std::string_view,
                                                     std::vector<uint32_t>&);
template std::vector<uint64_t> TypedValues<uint64_t>(const Table&, size_t, std::string_view,
                                                     std::vector<uint32_t>&);

}  // namespace gpujoin::cli
