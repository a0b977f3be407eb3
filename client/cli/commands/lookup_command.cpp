// gpujoin lookup: input rows with the matched value, a found flag and the
// selected payload columns appended.
#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "batch_queue.hpp"
#include "columns/columns.hpp"
#include "columns/key_columns.hpp"
#include "columns/payload.hpp"
#include "commands.hpp"
#include "output/progress.hpp"
#include "output/row_writer.hpp"

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

namespace {

// One input batch on its way: its rows wait for the answer to its keys.
struct LookupPending {
  Table rows;
  KeyVector keys;
};

}  // namespace

int CmdLookup(const Globals& g, const LookupArgs& a) {
  const KeyTypeFlag key_type = InputOrDie(ParseKeyTypeFlag(a.key_type));
  std::unique_ptr<TableReader> input = OpenInput(g, a.from);
  const std::string key = KeyColumnOf(a.key, *input, "lookup");
  auto c = Connect(g);
  const std::string what = absl::StrCat("lookup ", a.name);
  const client::IndexInfo info = RpcOrDie(c->DescribeIndex(a.name), what);
  // An index with key columns reads the --key columns as its key columns;
  // an explicit --key-type must fit the index before anything is read.
  IndexKeyReader key_reader = InputOrDie(IndexKeyReader::Make(key, key_type, info, "--key"));
  const std::vector<std::string> select = SelectedColumns(a.select, info, "lookup");
  // A multi-value index answers the first match; `matches` says how many there are.
  const bool matches = info.duplicates == client::DuplicatePolicy::kKeepAll;

  ResultTable columns = StartFrom(input->EmptyTable());
  columns.AddColumn("value", ColumnKind::kNumber);
  columns.AddColumn("found", ColumnKind::kBool);
  if (matches) columns.AddColumn("matches", ColumnKind::kNumber);
  for (const std::string& name : select) {
    for (const auto& p : info.payload) {
      if (p.name == name) columns.AddColumn(name, KindOf(p.type));
    }
  }
  RowWriter out(g, a.out);
  out.Begin(columns);

  // The source (the client's writer thread) parses a batch, converts its keys
  // and queues it; the sink (this thread) writes its rows with the answer.
  BatchQueue<LookupPending> queue;
  auto source = [&]() -> std::optional<client::LookupBatch> {
    auto p = std::make_unique<LookupPending>();
    auto more = input->Next(&p->rows);
    if (!more.ok()) {
      queue.SetError(more.status());
      return std::nullopt;
    }
    if (!*more) return std::nullopt;
    auto keys = key_reader.Read(p->rows);
    if (!keys.ok()) {
      queue.SetError(keys.status());
      return std::nullopt;
    }
    p->keys = *std::move(keys);
    client::LookupBatch batch;
    batch.keys = p->keys.keys();
    batch.select = select;
    batch.want_match_counts = matches;
    batch.max_probe_count = a.max_probes;
    queue.Push(std::move(p));
    return batch;
  };

  ProgressBar bar("lookup " + a.name, ProgressEnabled(g));
  client::QueryStatistics stats;
  uint64_t version = 0;
  // Rows are views of the batch's cells and the answer's columns: nothing is
  // copied until the writer's buffer.
  std::vector<CellView> row;
  std::vector<std::string> scratch(select.size());  // numbers spelled for the row
  std::string value_text, matches_text;
  absl::Status sink_error;
  auto sink = [&](client::LookupResult&& r) -> absl::Status {
    std::unique_ptr<LookupPending> p = queue.Pop();
    if (p == nullptr) return absl::InternalError("an answer without a batch");
    if (!r.error.ok()) return r.error;
    const size_t n = p->rows.rows.size();
    if (r.values.size() != n || r.found.size() != n || r.columns.size() != select.size() ||
        (matches && r.match_counts.size() != n)) {
      return absl::InternalError(absl::StrCat("the server answered ", r.values.size(),
                                              " values and ", r.columns.size(), " columns for ", n,
                                              " keys and ", select.size(), " selected columns"));
    }
    stats.Merge(r.statistics);
    version = r.index_version;
    out.SetLeadingKinds(InputKinds(p->rows));
    for (size_t i = 0; i < n; ++i) {
      // The row buffer keeps its capacity: no allocation per row.
      row.clear();
      for (const Cell& cell : p->rows.rows[i].cells) {
        row.push_back(cell ? CellView(*cell) : std::nullopt);
      }
      const bool found = r.found[i] != 0;
      if (found) {
        value_text = std::to_string(r.values[i]);
        row.emplace_back(value_text);
      } else {
        row.emplace_back(std::nullopt);
      }
      row.emplace_back(found ? "true" : "false");
      if (matches) {
        matches_text = std::to_string(r.match_counts[i]);
        row.emplace_back(matches_text);
      }
      for (size_t c = 0; c < r.columns.size(); ++c) {
        row.push_back(CellViewOf(r.columns[c], i, &scratch[c]));
      }
      out.Write(row);
    }
    bar.UpdateInput(out.rows(), input->bytes_read(), input->total_bytes());
    return absl::OkStatus();
  };
  const absl::Status st = c->Lookup(a.name, source, sink, Streaming(g));
  bar.Done();
  if (!queue.error().ok()) UsageFail(std::string(queue.error().message()));
  if (!st.ok()) RpcFail(st, what);
  for (const std::string& note : input->TakeNotes()) Note(g, note);
  Note(g, absl::StrCat("lookup ", a.name, " (version ", version, "): ", StatsLine(stats)));
  out.Finish(Json{{"index", a.name}, {"index_version", version}, {"statistics", StatsJson(stats)}});
  return kExitOk;
}

}  // namespace gpujoin::cli
