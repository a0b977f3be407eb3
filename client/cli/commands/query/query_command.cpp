// gpujoin query: the rows of a file through a plan the server runs in one
// round trip (lookups, --where, --group-by/--agg, --project, --limit; the
// Query stream). CmdQuery checks the flags, reads the first batch, describes
// the lookups' indexes and types the input (query_flags, query_input), then
// streams the batches and writes the result rows as they arrive (row plans)
// or the groups at the end (aggregate plans).
#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "columns/payload.hpp"
#include "commands.hpp"
#include "commands/query/query_flags.hpp"
#include "commands/query/query_input.hpp"
#include "output/progress.hpp"
#include "output/row_writer.hpp"

namespace gpujoin::cli {
namespace {

// The needs of the lookups on the input columns they read keys from.
std::vector<KeyNeed> KeyNeeds(const client::QueryPlan& plan, const std::vector<LookupFlag>& flags,
                              const std::vector<client::IndexInfo>& indexes) {
  std::vector<KeyNeed> needs;
  size_t l = 0;
  for (const client::QueryStep& s : plan.steps()) {
    const auto* lookup = std::get_if<client::QueryLookup>(&s);
    if (lookup == nullptr) continue;
    const LookupFlag& f = flags[l];
    const client::IndexInfo& info = indexes[l++];
    for (size_t k = 0; k < lookup->key.size(); ++k) {
      KeyNeed n;
      n.column = lookup->key[k];
      if (info.key_type == client::KeyType::kColumns) {
        n.type = info.key_columns[k].type;
        n.why =
            absl::StrCat("--lookup '", f.spec, "': key column '", info.key_columns[k].name,
                         "' of index '", info.name, "' is ", std::string(SchemaTypeName(*n.type)));
      } else {
        n.why = absl::StrCat("--lookup '", f.spec, "': index '", info.name, "' has ",
                             std::string(client::KeyTypeName(info.key_type)), " keys");
      }
      needs.push_back(std::move(n));
    }
  }
  return needs;
}

// The step statistics of a whole stream: input rows and probe statistics
// summed over the answers, the last index version and mutation sequence a
// lookup used. Output rows are summed too, except that the final answer of an
// aggregate plan gives the steps it reports for the whole stream (the
// batches' answers count an aggregate's rows and groups so far, the final one
// the stream's rows and its groups).
class StepTotals {
 public:
  void Add(const client::QueryResult& r) {
    for (const client::QueryStepStatistics& s : r.steps) {
      auto [it, fresh] = steps_.try_emplace(s.step, s);
      if (fresh) continue;
      client::QueryStepStatistics& t = it->second;
      t.rows_in = r.final ? s.rows_in : t.rows_in + s.rows_in;
      t.rows_out = r.final ? s.rows_out : t.rows_out + s.rows_out;
      if (!s.index.empty()) {
        t.index_version = s.index_version;
        t.mutation_sequence = s.mutation_sequence;
      }
      t.statistics.Merge(s.statistics);
    }
  }

  Json ToJson() const {
    Json steps = Json::array();
    for (const auto& [step, s] : steps_) {
      Json j{{"step", s.step}, {"kind", s.kind}, {"rows_in", s.rows_in}, {"rows_out", s.rows_out}};
      if (s.kind == "lookup") {
        j["index"] = s.index;
        j["index_version"] = s.index_version;
        j["mutation_sequence"] = s.mutation_sequence;
        j["statistics"] = StatsJson(s.statistics);
      }
      steps.push_back(std::move(j));
    }
    return steps;
  }

  // One line per lookup for stderr.
  std::vector<std::string> LookupLines() const {
    std::vector<std::string> lines;
    for (const auto& [step, s] : steps_) {
      if (s.kind != "lookup") continue;
      lines.push_back(absl::StrCat("query: lookup ", s.index, " (version ", s.index_version,
                                   "): ", StatsLine(s.statistics)));
    }
    return lines;
  }

 private:
  std::map<uint32_t, client::QueryStepStatistics> steps_;
};

// Writes answers' columns as rows; the columns (names, kinds) come from the
// first answer that has them.
class ResultRows {
 public:
  explicit ResultRows(RowWriter* out) : out_(out) {}

  absl::Status Write(const client::QueryResult& r) {
    if (!begun_ && (!r.columns.empty() || r.rows != 0)) {
      std::vector<std::string> names;
      std::vector<ColumnKind> kinds;
      for (const client::Column& c : r.columns) {
        names.push_back(c.name);
        kinds.push_back(KindOf(c.type));
      }
      out_->Begin(names, kinds);
      names_ = std::move(names);
      begun_ = true;
    }
    if (r.rows == 0) return absl::OkStatus();
    if (r.columns.size() != names_.size()) {
      return absl::InternalError(absl::StrCat("the server answered batch ", r.batch_id, " with ",
                                              r.columns.size(), " columns where ", names_.size(),
                                              " came before"));
    }
    scratch_.resize(r.columns.size());
    for (uint64_t i = 0; i < r.rows; ++i) {
      row_.clear();
      for (size_t c = 0; c < r.columns.size(); ++c) {
        row_.push_back(CellViewOf(r.columns[c], i, &scratch_[c]));
      }
      out_->Write(row_);
    }
    return absl::OkStatus();
  }

  // Writes the header of a result that had no columns at all.
  void End() {
    if (!begun_) out_->Begin({}, {});
    begun_ = true;
  }

 private:
  RowWriter* out_;
  bool begun_ = false;
  std::vector<std::string> names_;
  std::vector<CellView> row_;
  std::vector<std::string> scratch_;
};

// The error of a batch with a row that fits no request: the first such row's
// file and line, and what PlanQueryBatches said of it.
absl::Status RowTooLarge(const Table& batch, const std::vector<client::ColumnView>& views,
                         uint64_t max_bytes, const absl::Status& cut) {
  for (size_t r = 0; r < batch.rows.size(); ++r) {
    std::vector<client::ColumnView> row;
    for (const client::ColumnView& v : views) row.push_back(v.Slice(r, 1));
    auto one = client::PlanQueryBatches(row, 1, max_bytes);
    if (!one.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(batch.Where(r), ": the row needs more than a Query request holds (",
                       max_bytes, " bytes, from the server's --max-message-bytes)"));
    }
  }
  return cut;
}

}  // namespace

int CmdQuery(const Globals& g, const QueryArgs& a) {
  // The flags alone first: a bad one is a usage error before anything is read.
  const std::vector<LookupFlag> lookups = InputOrDie(ParseLookupFlags(a.lookups));
  if (a.agg) {
    auto measures = client::ParseMeasures(*a.agg);
    if (!measures.ok()) {
      UsageFail(absl::StrCat("query: --agg '", *a.agg, "': ", measures.status().message()));
    }
  }
  if (a.project) (void)InputOrDie(ParseProject(*a.project));
  if (lookups.empty() && a.where.empty() && !a.group_by && !a.agg && !a.project && !a.limit) {
    UsageFail(
        "query: the plan has no steps: give --lookup, --where, --group-by, --agg, "
        "--project or --limit");
  }

  std::unique_ptr<TableReader> input = OpenInput(g, a.from);
  // The first batch types the input (and an empty file still sends its
  // columns, so that the server checks the plan).
  Table first;
  const bool have_first = InputOrDie(input->Next(&first));
  if (!have_first) first = input->EmptyTable();

  auto c = Connect(g);
  std::vector<client::IndexInfo> indexes;
  for (const LookupFlag& f : lookups) {
    indexes.push_back(
        RpcOrDie(c->DescribeIndex(f.index), absl::StrCat("query --lookup '", f.spec, "'")));
  }
  const client::QueryPlan plan = InputOrDie(BuildQueryPlan(a, lookups, indexes));
  const InputTypes types = InputOrDie(TypeInput(first, a.schema, KeyNeeds(plan, lookups, indexes)));
  // A request holds one batch: cut a batch whose rows do not fit the smaller
  // of the two message limits (less 64 KiB for the plan and the fields).
  uint64_t max_message = static_cast<uint64_t>(c->options().max_message_bytes);
  const client::ServerInfo server = RpcOrDie(c->GetServerInfo(), "query");
  if (server.max_message_bytes != 0) max_message = std::min(max_message, server.max_message_bytes);
  const uint64_t max_bytes = max_message - std::min<uint64_t>(max_message / 2, 64 << 10);

  // The source (the client's writer thread) types a parsed batch and hands
  // out its pieces that fit a message; the columns live until the next call.
  absl::Status input_error;
  std::atomic<bool> limit_spent{false};
  std::optional<Table> pending = std::move(first);
  std::vector<client::Column> columns;
  std::vector<client::QueryBatchRange> ranges;
  size_t next_range = 0;
  bool sent_any = false;
  bool stopped_at_limit = false;
  uint64_t rows_sent = 0;
  auto source = [&]() -> std::optional<client::QueryBatch> {
    if (sent_any && limit_spent.load()) {
      // Whether input was left unsent (the note says so), whatever the timing
      // of the answers: one more batch is read to tell.
      Table rest;
      auto more = next_range < ranges.size() ? absl::StatusOr<bool>(true) : input->Next(&rest);
      stopped_at_limit = !more.ok() || *more;
      return std::nullopt;
    }
    while (next_range >= ranges.size()) {
      Table batch;
      if (pending) {
        // The first batch; an empty one (a file without rows) is sent too.
        batch = std::move(*pending);
        pending.reset();
      } else {
        auto more = input->Next(&batch);
        if (!more.ok()) {
          input_error = more.status();
          return std::nullopt;
        }
        if (!*more) return std::nullopt;
      }
      auto typed = TypedColumns(batch, types);
      if (!typed.ok()) {
        input_error = typed.status();
        return std::nullopt;
      }
      columns = *std::move(typed);
      std::vector<client::ColumnView> views;
      for (const client::Column& col : columns) views.push_back(col.view());
      auto cut = client::PlanQueryBatches(views, SIZE_MAX, max_bytes);
      if (!cut.ok()) {
        input_error = RowTooLarge(batch, views, max_bytes, cut.status());
        return std::nullopt;
      }
      ranges = *std::move(cut);
      next_range = 0;
    }
    const client::QueryBatchRange range = ranges[next_range++];
    client::QueryBatch b;
    for (const client::Column& col : columns) {
      b.columns.push_back(col.view().Slice(range.begin, range.end - range.begin));
    }
    sent_any = true;
    rows_sent += range.end - range.begin;
    return b;
  };

  RowWriter out(g, a.out);
  ResultRows rows(&out);
  StepTotals totals;
  client::QueryLimitTracker limit(plan);
  const bool aggregate = plan.has_aggregate();
  ProgressBar bar("query", ProgressEnabled(g));
  auto sink = [&](client::QueryResult&& r) -> absl::Status {
    if (!r.error.ok()) return r.error;
    totals.Add(r);
    limit.Add(r.steps);
    if (limit.done()) limit_spent = true;
    if (!aggregate || r.final) {
      absl::Status st = rows.Write(r);
      if (!st.ok()) return st;
    }
    bar.UpdateInput(out.rows(), input->bytes_read(), input->total_bytes());
    return absl::OkStatus();
  };
  const absl::Status st = c->Query(plan, source, sink, Streaming(g));
  bar.Done();
  if (!input_error.ok()) UsageFail(std::string(input_error.message()));
  if (!st.ok()) {
    absl::Status shown = st;
    if (st.code() == absl::StatusCode::kResourceExhausted &&
        st.message().find("--max-result-bytes") != absl::string_view::npos) {
      // A batch's result (a keep_all lookup expands rows) is what the server
      // bounds: fewer rows per batch is the way through.
      shown = absl::Status(st.code(), absl::StrCat(st.message(), " (send fewer rows per batch: ",
                                                   "--batch-rows, now ", g.batch_rows, ")"));
    }
    RpcFail(shown, FailedQueryWhat(st, StepFlags(a, lookups)));
  }
  rows.End();
  for (const std::string& note : input->TakeNotes()) Note(g, note);
  for (const std::string& line : totals.LookupLines()) Note(g, line);
  Note(g,
       absl::StrCat(
           "query: ", rows_sent, " input rows, ", out.rows(), " result rows",
           stopped_at_limit ? " (the limit was reached: the input after them was not read)" : ""));
  out.Finish(Json{{"input_rows", rows_sent},
                  {"input_types", types.Text()},
                  {"result_rows", out.rows()},
                  {"steps", totals.ToJson()}});
  return kExitOk;
}

}  // namespace gpujoin::cli
