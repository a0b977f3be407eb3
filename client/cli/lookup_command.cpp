// gpujoin lookup: input rows with the matched value and a found flag appended.
#include "commands.hpp"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "columns.hpp"
#include "progress.hpp"

namespace gpujoin::cli {

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
  client::LookupResult r =
      RpcOrDie(c->LookupAll(a.name, keys.keys(), g.batch_rows, Streaming(g),
                            [&](const client::Progress& p) {
                              bar.Update(p.rows_sent, p.total_rows, p.rows_sent * key_bytes);
                            }),
               what);
  bar.Done();
  ResultTable out = StartFrom(t);
  out.AddColumn("value", ColumnKind::kNumber);
  out.AddColumn("found", ColumnKind::kBool);
  out.SetGenerator(t.rows.size(), [&](size_t i, std::vector<Cell>* row) {
    *row = t.rows[i].cells;
    const bool found = r.found[i] != 0;
    row->emplace_back(found ? Cell(std::to_string(r.values[i])) : std::nullopt);
    row->emplace_back(found ? "true" : "false");
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
