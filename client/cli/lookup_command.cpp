// gpujoin lookup: input rows with the matched value and a found flag appended.
#include "commands.hpp"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "columns.hpp"
#include "progress.hpp"

namespace gpujoin::cli {

int CmdLookup(const Globals& g, const LookupArgs& a) {
  Table t = Load(g, a.from);
  std::vector<uint32_t> keys = InputOrDie(KeyColumn(t, a.key));
  auto c = Connect(g);
  ProgressBar bar("lookup " + a.name, ProgressEnabled(g));
  client::LookupResult r = RpcOrDie(
      c->LookupAll(a.name, keys, g.batch_rows, Streaming(g),
                   [&](const client::Progress& p) {
                     bar.Update(p.rows_sent, p.total_rows, p.rows_sent * 4);
                   }),
      absl::StrCat("lookup ", a.name));
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
  Note(g, absl::StrCat("lookup ", a.name, " (version ", r.index_version, "): ",
                       StatsLine(r.statistics)));
  EmitRows(g,
           Json{{"index", a.name},
                {"index_version", r.index_version},
                {"statistics", StatsJson(r.statistics)}},
           out, a.out);
  return kExitOk;
}

}  // namespace gpujoin::cli
