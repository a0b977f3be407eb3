// gpujoin agg: grouped aggregation, dictionary-encoding non-dense group labels.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <memory>
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
#include "batch_queue.hpp"
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
// INT64_MAX, else float64 (decimal text, as DuckDB and pandas read it; float32,
// the reference path, only when asked for).
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
    return "float64";
  }
  if (!any) return "float64";
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
  // Two passes over the file: the first finds the group labels (keeping the
  // distinct labels only) and the value type; the second streams codes and
  // values. Standard input is copied to a temporary file first, as it is.
  std::string path = a.from;
  std::string spooled;
  if (path == "-") {
    spooled = InputOrDie(SpoolStdin());
    path = spooled;
  }
  struct Unlink {
    std::string path;
    ~Unlink() {
      if (!path.empty()) std::remove(path.c_str());
    }
  } unlink{spooled};
  const std::string source_name = a.from == "-" ? "<stdin>" : a.from;
  GroupEncoder encoder;
  std::string value_type = a.value_type;
  {
    std::unique_ptr<TableReader> first = OpenInput(g, path);
    RequireColumn(*first, a.group);
    if (!a.value.empty()) RequireColumn(*first, a.value);
    if (!a.where_mask.empty()) RequireColumn(*first, a.where_mask);
    // InferValueType over the whole column, batch by batch.
    bool any = false, above_i64 = false, fractional = false;
    Table batch;
    while (InputOrDie(first->Next(&batch))) {
      const absl::Status st = encoder.Observe(batch, a.group);
      if (!st.ok()) UsageFail(std::string(st.message()));
      if (!a.value.empty() && value_type == "auto" && !fractional) {
        const std::string t = InferValueType(batch, InputOrDie(batch.Column(a.value)));
        bool batch_any = false;
        for (const Row& r : batch.rows) batch_any |= !Blank(r.cells[*batch.Column(a.value)]);
        if (t == "float64" && batch_any) fractional = true;
        if (t == "uint64") above_i64 = true;
        any |= batch_any;
      }
    }
    if (!a.value.empty() && value_type == "auto") {
      value_type = fractional || !any ? "float64" : above_i64 ? "uint64" : "int64";
    }
  }
  GroupEncoding groups = InputOrDie(encoder.Finish(source_name, a.group));
  const bool is_typed = op != client::AggregateOp::kCount && value_type != "float32";
  client::ColumnType spec_type = client::ColumnType::kFloat32;
  if (is_typed) {
    spec_type = value_type == "float64" ? client::ColumnType::kFloat64
                : value_type == "int32" ? client::ColumnType::kInt32
                : value_type == "int64" ? client::ColumnType::kInt64
                : value_type == "uint32" ? client::ColumnType::kUint32
                                         : client::ColumnType::kUint64;
  }
  std::unique_ptr<TableReader> input = OpenInput(g, path);

  auto c = Connect(g);
  client::AggregateSpec spec{op, groups.groups};
  spec.value_type = spec_type;
  ProgressBar bar("agg " + source_name, ProgressEnabled(g));
  // One batch on its way: the buffers its request borrows.
  struct AggPending {
    std::vector<uint32_t> codes, present, mask, value_present;
    std::vector<float> values;
    std::vector<int32_t> i32;
    std::vector<int64_t> i64;
    std::vector<uint32_t> u32;
    std::vector<uint64_t> u64;
    std::vector<double> f64;
  };
  BatchQueue<AggPending> queue;
  bool sent = false;
  uint64_t input_rows = 0;
  auto batch_source = [&]() -> std::optional<client::AggregateBatch> {
    // The conversions end a command by throwing; the source runs on the
    // client's writer thread, so it hands the error over instead.
    try {
      auto p = std::make_unique<AggPending>();
      Table batch;
      const bool more = InputOrDie(input->Next(&batch));
      // Always send at least one batch, so that empty input still yields totals.
      if (!more && sent) return std::nullopt;
      sent = true;
      input_rows += batch.rows.size();
      client::AggregateBatch b;
      if (more) {
        const absl::Status encoded = encoder.Encode(batch, a.group, &p->codes, &p->present);
        if (!encoded.ok()) UsageFail(std::string(encoded.message()));
        const size_t value_col = a.value.empty() ? 0 : InputOrDie(batch.Column(a.value));
        if (is_typed) {
          switch (spec_type) {
            case client::ColumnType::kFloat64:
              p->f64 = TypedValues<double>(batch, value_col, value_type, p->value_present);
              b.typed_values = std::span<const double>(p->f64);
              break;
            case client::ColumnType::kInt32:
              p->i32 = TypedValues<int32_t>(batch, value_col, value_type, p->value_present);
              b.typed_values = std::span<const int32_t>(p->i32);
              break;
            case client::ColumnType::kInt64:
              p->i64 = TypedValues<int64_t>(batch, value_col, value_type, p->value_present);
              b.typed_values = std::span<const int64_t>(p->i64);
              break;
            case client::ColumnType::kUint32:
              p->u32 = TypedValues<uint32_t>(batch, value_col, value_type, p->value_present);
              b.typed_values = std::span<const uint32_t>(p->u32);
              break;
            default:
              p->u64 = TypedValues<uint64_t>(batch, value_col, value_type, p->value_present);
              b.typed_values = std::span<const uint64_t>(p->u64);
              break;
          }
        } else if (!a.value.empty()) {
          p->values = InputOrDie(ValueColumn(batch, a.value));
        }
        const bool any_null_group =
            std::find(p->present.begin(), p->present.end(), 0u) != p->present.end();
        const bool any_null_value = std::find(p->value_present.begin(), p->value_present.end(),
                                              0u) != p->value_present.end();
        if (!a.where_mask.empty()) {
          p->mask = InputOrDie(MaskColumn(batch, a.where_mask));
          for (size_t i = 0; i < p->mask.size(); ++i) p->mask[i] &= p->present[i];
        } else if (any_null_group || any_null_value) {
          p->mask = p->present;  // rows without a group label take no part
        }
        if (any_null_value) {
          for (size_t i = 0; i < p->mask.size(); ++i) p->mask[i] &= p->value_present[i];
        }
      } else if (is_typed) {
        // An empty batch of the stream's type.
        switch (spec_type) {
          case client::ColumnType::kFloat64:
            b.typed_values = std::span<const double>(p->f64);
            break;
          case client::ColumnType::kInt32:
            b.typed_values = std::span<const int32_t>(p->i32);
            break;
          case client::ColumnType::kInt64:
            b.typed_values = std::span<const int64_t>(p->i64);
            break;
          case client::ColumnType::kUint32:
            b.typed_values = std::span<const uint32_t>(p->u32);
            break;
          default:
            b.typed_values = std::span<const uint64_t>(p->u64);
            break;
        }
      }
      b.keys = p->codes;
      b.values = p->values;
      b.mask = p->mask;
      b.accumulate_only = true;
      queue.Push(std::move(p));
      return b;
    } catch (const CliError& e) {
      queue.SetError(absl::InvalidArgumentError(e.message));
      return std::nullopt;
    }
  };
  client::AggregateResult r;
  auto sink = [&](client::AggregateResult&& result) -> absl::Status {
    queue.Pop();
    if (!result.error.ok()) return result.error;
    r = std::move(result);
    bar.UpdateInput(input->rows_read(), input->bytes_read(), input->total_bytes());
    return absl::OkStatus();
  };
  const absl::Status st = c->Aggregate(spec, batch_source, sink, Streaming(g));
  bar.Done();
  if (!queue.error().ok()) UsageFail(std::string(queue.error().message()));
  if (!st.ok()) RpcFail(st, "agg");
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
  Note(g, absl::StrCat("agg: ", a.op, " over ", input_rows, " rows into ", groups.order.size(),
                       " groups", is_count ? "" : absl::StrCat(" (", value_type, " values)"),
                       groups.dictionary ? " (labels dictionary-encoded locally)" : ""));
  Json meta{{"op", a.op},
            {"group", a.group},
            {"groups", groups.order.size()},
            {"dictionary_encoded", groups.dictionary},
            {"input_rows", input_rows}};
  if (!is_count) meta["value_type"] = value_type;
  if (is_typed) meta["overflow_groups"] = overflowed;
  EmitRows(g, meta, out, a.out);
  return kExitOk;
}

}  // namespace gpujoin::cli
