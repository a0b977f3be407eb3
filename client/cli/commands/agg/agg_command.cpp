// gpujoin agg: grouped aggregation, dictionary-encoding non-dense group labels.
// CmdAgg checks the options, reads the input twice (the group labels and value
// type first, then the batches of the stream) and writes one row per group.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "batch_queue.hpp"
#include "columns/columns.hpp"
#include "commands.hpp"
#include "commands/agg/agg_values.hpp"
#include "output/progress.hpp"

namespace gpujoin::cli {
namespace {

// The value types --value-type accepts ("auto" picks one from the data).
constexpr std::string_view kValueTypes[] = {"float32", "float64", "int32",
                                            "int64",   "uint32",  "uint64"};

// The operation; UsageFail when the options do not fit it.
client::AggregateOp CheckAggOptions(const AggArgs& a) {
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
  return op;
}

// The first pass over `path`: the group labels into `encoder`; the value type
// (--value-type, or inferred over the whole value column, batch by batch).
std::string ScanGroupsAndValueType(const Globals& g, const AggArgs& a, const std::string& path,
                                   GroupEncoder* encoder) {
  std::string value_type = a.value_type;
  std::unique_ptr<TableReader> first = OpenInput(g, path);
  RequireColumn(*first, a.group);
  if (!a.value.empty()) RequireColumn(*first, a.value);
  if (!a.where_mask.empty()) RequireColumn(*first, a.where_mask);
  bool any = false, above_i64 = false, fractional = false;
  Table batch;
  while (InputOrDie(first->Next(&batch))) {
    const absl::Status st = encoder->Observe(batch, a.group);
    if (!st.ok()) UsageFail(std::string(st.message()));
    if (!a.value.empty() && value_type == "auto" && !fractional) {
      const std::string t = InferValueType(batch, InputOrDie(batch.Column(a.value)));
      bool batch_any = false;
      for (const Row& r : batch.rows) batch_any |= !BlankCell(r.cells[*batch.Column(a.value)]);
      if (t == "float64" && batch_any) fractional = true;
      if (t == "uint64") above_i64 = true;
      any |= batch_any;
    }
  }
  if (!a.value.empty() && value_type == "auto") {
    value_type = fractional || !any ? "float64" : above_i64 ? "uint64" : "int64";
  }
  return value_type;
}

// The wire type of a typed stream's values.
client::ColumnType WireValueType(const std::string& value_type) {
  return value_type == "float64"  ? client::ColumnType::kFloat64
         : value_type == "int32"  ? client::ColumnType::kInt32
         : value_type == "int64"  ? client::ColumnType::kInt64
         : value_type == "uint32" ? client::ColumnType::kUint32
                                  : client::ColumnType::kUint64;
}

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

// The second pass: the input's batches as the stream's requests, each with
// group codes, values and mask; then the totals of the last answer.
class AggStream {
 public:
  AggStream(const AggArgs& a, TableReader& input, const GroupEncoder& encoder,
            const std::string& value_type, bool is_typed, client::ColumnType spec_type)
      : a_(a),
        input_(input),
        encoder_(encoder),
        value_type_(value_type),
        is_typed_(is_typed),
        spec_type_(spec_type) {}

  // Runs the stream; UsageFail on bad input, RpcFail when the call fails.
  client::AggregateResult Run(const Globals& g, client::Client& c,
                              const client::AggregateSpec& spec, const std::string& source_name) {
    ProgressBar bar("agg " + source_name, ProgressEnabled(g));
    client::AggregateResult r;
    auto sink = [&](client::AggregateResult&& result) -> absl::Status {
      queue_.Pop();
      if (!result.error.ok()) return result.error;
      r = std::move(result);
      bar.UpdateInput(input_.rows_read(), input_.bytes_read(), input_.total_bytes());
      return absl::OkStatus();
    };
    const absl::Status st =
        c.Aggregate(spec, [this] { return NextBatch(); }, sink, Streaming(g));
    bar.Done();
    if (!queue_.error().ok()) UsageFail(std::string(queue_.error().message()));
    if (!st.ok()) RpcFail(st, "agg");
    return r;
  }

  uint64_t input_rows() const { return input_rows_; }

 private:
  std::optional<client::AggregateBatch> NextBatch() {
    // The conversions end a command by throwing; the source runs on the
    // client's writer thread, so it hands the error over instead.
    try {
      auto p = std::make_unique<AggPending>();
      Table batch;
      const bool more = InputOrDie(input_.Next(&batch));
      // Always send at least one batch, so that empty input still yields totals.
      if (!more && sent_) return std::nullopt;
      sent_ = true;
      input_rows_ += batch.rows.size();
      client::AggregateBatch b;
      if (more) {
        EncodeBatch(batch, p.get(), &b);
      } else if (is_typed_) {
        TypedBatch(nullptr, 0, p.get(), &b);  // an empty batch of the stream's type
      }
      b.keys = p->codes;
      if (!is_typed_) b.values = std::span<const float>(p->values);
      b.mask = p->mask;
      b.accumulate_only = true;
      queue_.Push(std::move(p));
      return b;
    } catch (const CliError& e) {
      queue_.SetError(absl::InvalidArgumentError(e.message));
      return std::nullopt;
    }
  }

  // The group codes, values and mask of one input batch.
  void EncodeBatch(const Table& batch, AggPending* p, client::AggregateBatch* b) {
    const absl::Status encoded = encoder_.Encode(batch, a_.group, &p->codes, &p->present);
    if (!encoded.ok()) UsageFail(std::string(encoded.message()));
    const size_t value_col = a_.value.empty() ? 0 : InputOrDie(batch.Column(a_.value));
    if (is_typed_) {
      TypedBatch(&batch, value_col, p, b);
    } else if (!a_.value.empty()) {
      p->values = InputOrDie(ValueColumn(batch, a_.value));
    }
    const bool any_null_group =
        std::find(p->present.begin(), p->present.end(), 0u) != p->present.end();
    const bool any_null_value = std::find(p->value_present.begin(), p->value_present.end(),
                                          0u) != p->value_present.end();
    if (!a_.where_mask.empty()) {
      p->mask = InputOrDie(MaskColumn(batch, a_.where_mask));
      for (size_t i = 0; i < p->mask.size(); ++i) p->mask[i] &= p->present[i];
    } else if (any_null_group || any_null_value) {
      p->mask = p->present;  // rows without a group label take no part
    }
    if (any_null_value) {
      for (size_t i = 0; i < p->mask.size(); ++i) p->mask[i] &= p->value_present[i];
    }
  }

  // Column `value_col` of `batch` (nullptr: no rows) as values of the stream's
  // type in `p`, which b's typed values then view.
  void TypedBatch(const Table* batch, size_t value_col, AggPending* p, client::AggregateBatch* b) {
    switch (spec_type_) {
      case client::ColumnType::kFloat64:
        if (batch) p->f64 = TypedValues<double>(*batch, value_col, value_type_, p->value_present);
        b->values = std::span<const double>(p->f64);
        break;
      case client::ColumnType::kInt32:
        if (batch) p->i32 = TypedValues<int32_t>(*batch, value_col, value_type_, p->value_present);
        b->values = std::span<const int32_t>(p->i32);
        break;
      case client::ColumnType::kInt64:
        if (batch) p->i64 = TypedValues<int64_t>(*batch, value_col, value_type_, p->value_present);
        b->values = std::span<const int64_t>(p->i64);
        break;
      case client::ColumnType::kUint32:
        if (batch) {
          p->u32 = TypedValues<uint32_t>(*batch, value_col, value_type_, p->value_present);
        }
        b->values = std::span<const uint32_t>(p->u32);
        break;
      default:
        if (batch) {
          p->u64 = TypedValues<uint64_t>(*batch, value_col, value_type_, p->value_present);
        }
        b->values = std::span<const uint64_t>(p->u64);
        break;
    }
  }

  const AggArgs& a_;
  TableReader& input_;
  const GroupEncoder& encoder_;
  const std::string& value_type_;
  const bool is_typed_;
  const client::ColumnType spec_type_;
  BatchQueue<AggPending> queue_;
  bool sent_ = false;
  uint64_t input_rows_ = 0;
};

// One row per group in label order, with a warning for overflowed sums, the
// note and the summary.
void WriteAggResult(const Globals& g, const AggArgs& a, client::AggregateOp op,
                    const GroupEncoding& groups, const client::AggregateResult& r, bool is_typed,
                    const std::string& value_type, uint64_t input_rows) {
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
}

}  // namespace

int CmdAgg(const Globals& g, const AggArgs& a) {
  const client::AggregateOp op = CheckAggOptions(a);
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
  const std::string value_type = ScanGroupsAndValueType(g, a, path, &encoder);
  GroupEncoding groups = InputOrDie(encoder.Finish(source_name, a.group));
  const bool is_typed = op != client::AggregateOp::kCount && value_type != "float32";
  const client::ColumnType spec_type =
      is_typed ? WireValueType(value_type) : client::ColumnType::kFloat32;
  std::unique_ptr<TableReader> input = OpenInput(g, path);

  auto c = Connect(g);
  client::AggregateSpec spec{op, groups.groups};
  spec.value_type = spec_type;
  AggStream stream(a, *input, encoder, value_type, is_typed, spec_type);
  const client::AggregateResult r = stream.Run(g, *c, spec, source_name);
  WriteAggResult(g, a, op, groups, r, is_typed, value_type, stream.input_rows());
  return kExitOk;
}

}  // namespace gpujoin::cli
