// gpujoin agg: grouped aggregation, dictionary-encoding non-dense group labels.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "columns.hpp"
#include "commands.hpp"
#include "progress.hpp"

namespace gpujoin::cli {
namespace {

// The value types --value-type accepts ("auto" picks one from the data).
constexpr std::string_view kValueTypes[] = {"float32", "float64", "int32",
                                            "int64",   "uint32",  "uint64"};

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

bool Blank(const Cell& c) { return !c || c->find_first_not_of(" \t") == std::string::npos; }

// The type `--value-type auto` gives column `col`: int64 when every non-null cell
// is an integer that fits it, uint64 when they all fit uint64 and one is above
// INT64_MAX, else float32 (the reference path).
std::string InferValueType(const Table& t, size_t col) {
  bool any = false, above_i64 = false;
  for (const Row& row : t.rows) {
    const Cell& c = row.cells[col];
    if (Blank(c)) continue;
    any = true;
    if (ParseKeyText<int64_t>(*c)) continue;
    if (ParseKeyText<uint64_t>(*c)) {
      above_i64 = true;
      continue;
    }
    return "float32";
  }
  if (!any) return "float32";
  return above_i64 ? "uint64" : "int64";
}

// Column `col` as values of V; a null cell is 0 with its row masked out
// (`present` 0). A cell that is not a V is a usage error naming its position.
template <typename V>
std::vector<V> TypedValues(const Table& t, size_t col, std::string_view type,
                           std::vector<uint32_t>& present) {
  std::vector<V> out(t.rows.size(), V{0});
  present.assign(t.rows.size(), 1);
  for (size_t r = 0; r < t.rows.size(); ++r) {
    const Cell& c = t.rows[r].cells[col];
    if (Blank(c)) {
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
      InputOrDie(absl::StatusOr<int>(absl::InvalidArgumentError(
          absl::StrCat(t.Where(r), ": column '", t.header[col], "' (", col + 1, "): '", *c,
                       "' is not a valid ", std::string(type), " (see --value-type)"))));
    }
    out[r] = *v;
  }
  return out;
}

// The cell of one typed result word (null for empty or overflowed groups).
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

}  // namespace

int CmdAgg(const Globals& g, const AggArgs& a) {
  auto op_or = client::ParseAggregateOp(a.op);
  if (!op_or.ok()) UsageFail(absl::StrCat("agg: --op: ", std::string(op_or.status().message())));
  const client::AggregateOp op = *op_or;
  if (op == client::AggregateOp::kCount && !a.value.empty()) {
    UsageFail("agg: --value is not used by --op count");
  }
  if (op != client::AggregateOp::kCount && a.value.empty()) {
    UsageFail(absl::StrCat("agg: --op ", a.op, " needs --value COL"));
  }
  if (a.value_type != "auto" && std::find(std::begin(kValueTypes), std::end(kValueTypes),
                                          a.value_type) == std::end(kValueTypes)) {
    UsageFail(absl::StrCat("agg: --value-type: '", a.value_type,
                           "' is not auto, float32, float64, int32, int64, uint32 or uint64"));
  }
  if (op == client::AggregateOp::kCount && a.value_type != "auto") {
    UsageFail("agg: --value-type is not used by --op count");
  }
  Table t = Load(g, a.from);
  GroupEncoding groups = InputOrDie(EncodeGroups(t, a.group));
  std::string value_type = a.value_type;
  size_t value_col = 0;
  if (!a.value.empty()) {
    value_col = InputOrDie(t.Column(a.value));
    if (value_type == "auto") value_type = InferValueType(t, value_col);
  }
  const bool is_typed = op != client::AggregateOp::kCount && value_type != "float32";
  std::vector<float> values;
  std::vector<int32_t> i32;
  std::vector<int64_t> i64;
  std::vector<uint32_t> u32;
  std::vector<uint64_t> u64;
  std::vector<double> f64;
  std::vector<uint32_t> value_present;
  client::AggregateValues typed;
  client::ColumnType spec_type = client::ColumnType::kFloat32;
  if (is_typed) {
    if (value_type == "float64") {
      f64 = TypedValues<double>(t, value_col, value_type, value_present);
      typed = std::span<const double>(f64);
      spec_type = client::ColumnType::kFloat64;
    } else if (value_type == "int32") {
      i32 = TypedValues<int32_t>(t, value_col, value_type, value_present);
      typed = std::span<const int32_t>(i32);
      spec_type = client::ColumnType::kInt32;
    } else if (value_type == "int64") {
      i64 = TypedValues<int64_t>(t, value_col, value_type, value_present);
      typed = std::span<const int64_t>(i64);
      spec_type = client::ColumnType::kInt64;
    } else if (value_type == "uint32") {
      u32 = TypedValues<uint32_t>(t, value_col, value_type, value_present);
      typed = std::span<const uint32_t>(u32);
      spec_type = client::ColumnType::kUint32;
    } else {
      u64 = TypedValues<uint64_t>(t, value_col, value_type, value_present);
      typed = std::span<const uint64_t>(u64);
      spec_type = client::ColumnType::kUint64;
    }
  } else if (!a.value.empty()) {
    values = InputOrDie(ValueColumn(t, a.value));
  }
  std::vector<uint32_t> mask;
  const bool any_null_group =
      std::find(groups.present.begin(), groups.present.end(), 0u) != groups.present.end();
  const bool any_null_value =
      std::find(value_present.begin(), value_present.end(), 0u) != value_present.end();
  if (!a.where_mask.empty()) {
    mask = InputOrDie(MaskColumn(t, a.where_mask));
    for (size_t i = 0; i < mask.size(); ++i) mask[i] &= groups.present[i];
  } else if (any_null_group || any_null_value) {
    mask = groups.present;  // rows without a group label take no part
  }
  if (any_null_value) {
    for (size_t i = 0; i < mask.size(); ++i) mask[i] &= value_present[i];
  }

  auto c = Connect(g);
  client::AggregateSpec spec{op, groups.groups};
  spec.value_type = spec_type;
  ProgressBar bar("agg " + t.source, ProgressEnabled(g));
  auto progress = [&](const client::Progress& p) {
    bar.Update(p.rows_sent, p.total_rows, p.bytes_sent);
  };
  client::AggregateResult r =
      is_typed ? RpcOrDie(c->AggregateAllTyped(spec, groups.codes, typed, mask, g.batch_rows,
                                               Streaming(g), progress),
                          "agg")
               : RpcOrDie(c->AggregateAll(spec, groups.codes, values, mask, g.batch_rows,
                                          Streaming(g), progress),
                          "agg");
  bar.Done();
  const bool is_count = op == client::AggregateOp::kCount;
  const size_t got = is_count   ? r.total_counts.size()
                     : is_typed ? r.total_typed_values.size()
                                : r.total_values.size();
  if (got != groups.groups) {
    RpcFail(absl::InternalError(
                absl::StrCat("server returned ", got, " groups, expected ", groups.groups)),
            "agg");
  }
  ResultTable out;
  out.AddColumn(a.group, ColumnKind::kString);
  out.AddColumn(is_count ? std::string("count") : absl::StrCat(a.op, "_", a.value),
                ColumnKind::kNumber);
  uint64_t overflowed = 0;
  for (uint32_t code : groups.order) {
    Cell v;
    if (is_count) {
      v = std::to_string(r.total_counts[code]);
    } else if (is_typed) {
      const bool empty = !r.total_counts64.empty() && r.total_counts64[code] == 0;
      const bool over = !r.total_overflow.empty() && r.total_overflow[code] != 0;
      overflowed += over;
      // Empty groups and overflowed sums stay null (never a wrapped number).
      if (!empty && !over) v = TypedCell(r.result_type, r.total_typed_values[code]);
    } else if (!std::isnan(r.total_values[code])) {
      v = FormatFloat(r.total_values[code]);
    }  // NaN (no contributing rows) stays null
    out.rows.push_back({groups.labels[code], std::move(v)});
  }
  if (overflowed > 0) {
    std::cerr << "gpujoin: agg: warning: the " << a.op << " of " << overflowed
              << " group(s) does not fit " << (value_type[0] == 'u' ? "uint64" : "int64")
              << "; shown empty (overflow)\n";
  }
  Note(g, absl::StrCat("agg: ", a.op, " over ", t.rows.size(), " rows into ", groups.order.size(),
                       " groups", is_count ? "" : absl::StrCat(" (", value_type, " values)"),
                       groups.dictionary ? " (labels dictionary-encoded locally)" : ""));
  Json meta{{"op", a.op},
            {"group", a.group},
            {"groups", groups.order.size()},
            {"dictionary_encoded", groups.dictionary},
            {"input_rows", t.rows.size()}};
  if (!is_count) meta["value_type"] = value_type;
  if (is_typed) meta["overflow_groups"] = overflowed;
  EmitRows(g, meta, out, a.out);
  return kExitOk;
}

}  // namespace gpujoin::cli
