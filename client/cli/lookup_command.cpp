// gpujoin lookup: input rows with the matched value, a found flag and the
// selected payload columns appended.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "columns.hpp"
#include "commands.hpp"
#include "payload.hpp"
#include "progress.hpp"

namespace gpujoin::cli {

std::vector<std::string> SelectedColumns(const std::string& flag, const client::IndexInfo& info,
                                         std::string_view command) {
  std::vector<std::string> names;
  std::vector<std::string> payload;
  for (const auto& p : info.payload) payload.push_back(p.name);
  for (const std::string& name : SplitList(flag)) {
    if (std::find(payload.begin(), payload.end(), name) == payload.end()) {
      UsageFail(absl::StrCat(
          std::string(command), ": --select '", name, "': index '", info.name,
          "' has no payload column '", name, "' (",
          payload.empty() ? std::string("it stores no payload; build it with payload columns")
                          : absl::StrCat("payload: ", absl::StrJoin(payload, ", ")),
          ")"));
    }
    if (std::find(names.begin(), names.end(), name) != names.end()) {
      UsageFail(absl::StrCat(std::string(command), ": --select '", name, "' is given twice"));
    }
    names.push_back(name);
  }
  return names;
}

int CmdLookup(const Globals& g, const LookupArgs& a) {
  const KeyKind flag = InputOrDie(ParseKeyKind(a.key_type));
  Table t = Load(g, a.from);
  // The data's own type first, so that a bad cell is an input error before any call.
  const KeyKind data = flag == KeyKind::kAuto ? InputOrDie(InferKeyKind(t, a.key)) : flag;
  auto c = Connect(g);
  const std::string what = absl::StrCat("lookup ", a.name);
  const client::IndexInfo info = RpcOrDie(c->DescribeIndex(a.name), what);
  const KeyKind kind = InputOrDie(KindForIndex(flag, data, info.key_type, a.name));
  const KeyVector keys = InputOrDie(ForIndex(KeyColumn(t, a.key, kind), info));
  ProgressBar bar("lookup " + a.name, ProgressEnabled(g));
  const size_t key_bytes = keys.keys().key_bytes();
  client::QueryAllOptions options;
  options.batch_rows = g.batch_rows;
  options.select = SelectedColumns(a.select, info, "lookup");
  // A multi-value index answers the first match; `matches` says how many there are.
  const bool matches = info.duplicates == client::DuplicatePolicy::kKeepAll;
  options.want_match_counts = matches;
  options.stream = Streaming(g);
  options.progress = [&](const client::Progress& p) {
    bar.Update(p.rows_sent, p.total_rows, p.rows_sent * key_bytes);
  };
  client::LookupResult r = RpcOrDie(c->LookupAll(a.name, keys.keys(), options), what);
  bar.Done();
  if (r.columns.size() != options.select.size()) {
    RpcFail(absl::InternalError(absl::StrCat("the server answered ", r.columns.size(),
                                             " columns for ", options.select.size(), " selected")),
            what);
  }
  ResultTable out = StartFrom(t);
  out.AddColumn("value", ColumnKind::kNumber);
  out.AddColumn("found", ColumnKind::kBool);
  if (matches) out.AddColumn("matches", ColumnKind::kNumber);
  for (const auto& col : r.columns) out.AddColumn(col.name, KindOf(col.type));
  if (matches && r.match_counts.size() != t.rows.size()) {
    RpcFail(absl::InternalError(absl::StrCat("the server answered ", r.match_counts.size(),
                                             " match counts for ", t.rows.size(), " rows")),
            what);
  }
  out.SetGenerator(t.rows.size(), [&](size_t i, std::vector<Cell>* row) {
    *row = t.rows[i].cells;
    const bool found = r.found[i] != 0;
    row->emplace_back(found ? Cell(std::to_string(r.values[i])) : std::nullopt);
    row->emplace_back(found ? "true" : "false");
    if (matches) row->emplace_back(std::to_string(r.match_counts[i]));
    for (const auto& col : r.columns) row->push_back(CellOf(col, i));
  });
  Note(g, absl::StrCat("lookup ", a.name, " (version ", r.index_version,
                       "): ", StatsLine(r.statistics)));
  EmitRows(g,
           Json{{"index", a.name},
                {"index_version", r.index_version},
                {"statistics", StatsJson(r.statistics)}},
           out, a.out);
  return kExitOk;
}

}  // namespace gpujoin::cli
