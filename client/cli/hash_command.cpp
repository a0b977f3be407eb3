// gpujoin hash: a row hash of one or more columns appended to the input rows.
#include "commands.hpp"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "hash_columns.hpp"
#include "progress.hpp"

namespace gpujoin::cli {

int CmdHash(const Globals& g, const HashArgs& a) {
  if (a.bits != 32 && a.bits != 64) UsageFail(absl::StrCat("hash: --bits must be 32 or 64"));
  Table t = Load(g, a.from);
  // Type expressions hold commas of their own (map<string, int64>).
  std::vector<std::string> specs = SplitHashColumnSpecs(a.cols);
  if (specs.empty()) UsageFail("hash: --cols needs at least one column");
  std::vector<HashInput> inputs;
  for (const auto& s : specs) inputs.push_back(InputOrDie(BuildHashInput(t, s)));
  std::vector<client::HashColumn> cols;
  for (const auto& in : inputs) cols.push_back(in.View());

  auto c = Connect(g);
  ProgressBar bar("hash " + t.source, ProgressEnabled(g));
  client::HashResult r = RpcOrDie(
      c->HashAll(cols, a.bits, g.batch_rows, Streaming(g),
                 [&](const client::Progress& p) {
                   bar.Update(p.rows_sent, p.total_rows, p.bytes_sent);
                 }),
      "hash");
  bar.Done();
  ResultTable out = StartFrom(t);
  out.AddColumn("hash", ColumnKind::kNumber);
  out.SetGenerator(t.rows.size(), [&](size_t i, std::vector<Cell>* row) {
    *row = t.rows[i].cells;
    row->emplace_back(r.Valid(i) ? Cell(std::to_string(r.hashes[i])) : std::nullopt);
  });
  Json types = Json::object();
  for (const auto& in : inputs) types[in.name] = in.TypeName();
  Note(g, absl::StrCat("hash: ", t.rows.size(), " rows, ", r.null_count, " null, ", a.bits,
                       "-bit"));
  EmitRows(g, Json{{"bits", a.bits}, {"column_types", types}, {"null_rows", r.null_count}}, out,
           a.out);
  return kExitOk;
}

}  // namespace gpujoin::cli
