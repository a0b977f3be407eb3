// gpujoin agg: grouped aggregation, dictionary-encoding non-dense group labels.
#include "commands.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "columns.hpp"
#include "progress.hpp"

namespace gpujoin::cli {

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
  Table t = Load(g, a.from);
  GroupEncoding groups = InputOrDie(EncodeGroups(t, a.group));
  std::vector<float> values;
  if (!a.value.empty()) values = InputOrDie(ValueColumn(t, a.value));
  std::vector<uint32_t> mask;
  bool any_null_group =
      std::find(groups.present.begin(), groups.present.end(), 0u) != groups.present.end();
  if (!a.where_mask.empty()) {
    mask = InputOrDie(MaskColumn(t, a.where_mask));
    for (size_t i = 0; i < mask.size(); ++i) mask[i] &= groups.present[i];
  } else if (any_null_group) {
    mask = groups.present;  // rows without a group label take no part
  }

  auto c = Connect(g);
  client::AggregateSpec spec{op, groups.groups};
  ProgressBar bar("agg " + t.source, ProgressEnabled(g));
  client::AggregateResult r = RpcOrDie(
      c->AggregateAll(spec, groups.codes, values, mask, g.batch_rows, Streaming(g),
                      [&](const client::Progress& p) {
                        bar.Update(p.rows_sent, p.total_rows, p.bytes_sent);
                      }),
      "agg");
  bar.Done();
  const bool is_count = op == client::AggregateOp::kCount;
  if (is_count ? r.total_counts.size() != groups.groups : r.total_values.size() != groups.groups) {
    RpcFail(absl::InternalError(absl::StrCat("server returned ",
                                             is_count ? r.total_counts.size() : r.total_values.size(),
                                             " groups, expected ", groups.groups)),
            "agg");
  }
  ResultTable out;
  out.AddColumn(a.group, ColumnKind::kString);
  out.AddColumn(is_count ? std::string("count") : absl::StrCat(a.op, "_", a.value),
                ColumnKind::kNumber);
  for (uint32_t code : groups.order) {
    Cell v;
    if (is_count) {
      v = std::to_string(r.total_counts[code]);
    } else if (!std::isnan(r.total_values[code])) {
      v = FormatFloat(r.total_values[code]);
    }  // NaN (no contributing rows) stays null
    out.rows.push_back({groups.labels[code], std::move(v)});
  }
  Note(g, absl::StrCat("agg: ", a.op, " over ", t.rows.size(), " rows into ", groups.order.size(),
                       " groups", groups.dictionary ? " (labels dictionary-encoded locally)" : ""));
  EmitRows(g,
           Json{{"op", a.op},
                {"group", a.group},
                {"groups", groups.order.size()},
                {"dictionary_encoded", groups.dictionary},
                {"input_rows", t.rows.size()}},
           out, a.out);
  return kExitOk;
}

}  // namespace gpujoin::cli
