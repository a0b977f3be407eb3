// gpujoin index upsert|delete: the rows of a file streamed as Mutate batches
// into a live index. The index is described first: the keys are read as its
// key (IndexKeyReader), the upsert payload as its payload columns
// (PlanPayloadForIndex). Each input batch becomes one request, or several when
// it passes the server's --max-mutation-rows or a message (PlanMutation); each
// request is atomic, the command as a whole is not, so a refused request or a
// bad input cell ends it with what was applied before.
#include <algorithm>
#include <atomic>
#include <deque>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "batch_queue.hpp"
#include "columns/columns.hpp"
#include "columns/key_columns.hpp"
#include "columns/payload.hpp"
#include "commands.hpp"
#include "output/progress.hpp"

namespace gpujoin::cli {
namespace {

// One request on its way: the input rows it carries.
struct MutatePending {
  std::string where;  // "FILE:LINE" of its first row
  uint64_t rows = 0;
};

std::string Plural(uint64_t n, std::string_view one, std::string_view many) {
  return absl::StrCat(n, " ", std::string(n == 1 ? one : many));
}

// The rows applied, for a command that ends early: `before` names what ended it.
std::string AppliedText(const client::MutateSummary& s, uint64_t applied_rows,
                        std::string_view before) {
  if (s.applied_requests == 0) return "nothing was applied";
  return absl::StrCat(Plural(applied_rows, "input row", "input rows"), " in ",
                      Plural(s.applied_requests, "request", "requests"), std::string(before),
                      " were applied (mutation sequence ", s.mutation_sequence, ")");
}

void Report(const Globals& g, bool upsert, const std::string& name, const std::string& source,
            const client::MutateSummary& s) {
  if (g.json) {
    std::cout << Json{{"index", name},
                      {"operation", upsert ? "upsert" : "delete"},
                      {"source", source},
                      {"index_version", s.index_version},
                      {"mutation_sequence", s.mutation_sequence},
                      {"requests", s.applied_requests},
                      {"upsert_rows", s.upsert_rows},
                      {"inserted_keys", s.inserted_keys},
                      {"updated_keys", s.updated_keys},
                      {"deleted_keys", s.deleted_keys},
                      {"not_found_keys", s.not_found_keys},
                      {"deleted_rows", s.deleted_rows},
                      {"rehashes", s.rehashes},
                      {"capacity", s.capacity},
                      {"load_factor", s.load_factor},
                      {"statistics", BuildStatsJson(s.statistics)},
                      {"durable", s.durable}}
                     .dump(2)
              << '\n';
    return;
  }
  if (g.quiet) return;
  if (upsert) {
    std::cout << "upserted     " << Plural(s.upsert_rows, "row", "rows") << " of " << source
              << " into index " << name << " (version " << s.index_version << ")\n"
              << "keys         " << s.inserted_keys << " inserted, " << s.updated_keys
              << " updated\n";
  } else {
    std::cout << "deleted      " << Plural(s.deleted_keys, "key", "keys") << " ("
              << Plural(s.deleted_rows, "row", "rows") << ") of " << source << " from index "
              << name << " (version " << s.index_version << ")\n"
              << "not found    " << Plural(s.not_found_keys, "key", "keys") << "\n";
  }
  std::cout << "sequence     " << s.mutation_sequence << " ("
            << Plural(s.applied_requests, "request", "requests") << ")\n"
            << "table        " << s.capacity << " slots, load factor " << Fixed(s.load_factor, 3)
            << ", " << s.statistics.unique_keys << " unique keys\n";
  if (s.rehashes != 0) {
    std::cout << "rehashed     " << Plural(s.rehashes, "time", "times") << ": the table grew to "
              << s.capacity << " slots\n";
  }
  if (s.durable) std::cout << "durable      yes (in the index's write-ahead log)\n";
}

int RunMutate(const Globals& g, const MutateArgs& a, bool upsert) {
  const std::string command = upsert ? "index upsert" : "index delete";
  const std::string what = absl::StrCat(command, " ", a.name);
  const KeyTypeFlag flag = InputOrDie(ParseKeyTypeFlag(a.key_type));
  std::unique_ptr<TableReader> input = OpenInput(g, a.from);
  const std::string key = KeyColumnOf(a.key, *input, command);
  auto c = Connect(g);
  const client::IndexInfo info = RpcOrDie(c->DescribeIndex(a.name), what);
  IndexKeyReader key_reader = InputOrDie(IndexKeyReader::Make(key, flag, info, "--key"));
  PayloadPlan plan;
  if (upsert) {
    if (info.explicit_values && a.value.empty()) {
      UsageFail(absl::StrCat(what, ": index '", a.name,
                             "' has explicit values (built with --value): give --value COL"));
    }
    if (!info.explicit_values && !a.value.empty()) {
      UsageFail(absl::StrCat(what, ": index '", a.name,
                             "' has row-ID values: its upserted rows get the next row IDs (from ",
                             info.next_row_id, "); leave --value out"));
    }
    if (!a.value.empty()) RequireColumn(*input, a.value);
    plan = InputOrDie(PlanPayloadForIndex(input->EmptyTable(), key, a.value, info));
  }
  // Requests of at most the server's rows and a message (less 1 KiB for the
  // request's own fields); the input's batches are --batch-rows rows.
  const client::ServerInfo server = RpcOrDie(c->GetServerInfo(), what);
  const size_t max_rows = server.max_mutation_rows != 0
                              ? static_cast<size_t>(std::min<uint64_t>(
                                    server.max_mutation_rows, std::numeric_limits<size_t>::max()))
                              : std::numeric_limits<size_t>::max();
  const uint64_t max_message = static_cast<uint64_t>(c->options().max_message_bytes);
  const uint64_t max_bytes = max_message > 2048 ? max_message - 1024 : max_message / 2;

  // The source (the client's writer thread) reads and converts a batch, plans
  // its requests and hands them out one by one; the views borrow the batch's
  // columns, which stay until every request of it is sent.
  BatchQueue<MutatePending> queue;
  std::atomic<bool> stop{false};  // a request was refused: send no more
  Table batch;
  KeyVector keys;
  std::vector<uint32_t> values;
  std::vector<client::Column> payload;
  std::deque<client::MutateBatch> todo;
  std::deque<MutatePending> todo_rows;
  auto fail = [&](const absl::Status& s) -> std::optional<client::MutateBatch> {
    queue.SetError(s);
    return std::nullopt;
  };
  auto source = [&]() -> std::optional<client::MutateBatch> {
    while (todo.empty()) {
      if (stop.load()) return std::nullopt;
      auto more = input->Next(&batch);
      if (!more.ok()) return fail(more.status());
      if (!*more) return std::nullopt;
      auto k = key_reader.Read(batch);
      if (!k.ok()) return fail(k.status());
      keys = *std::move(k);
      client::MutateBatch whole;
      if (upsert) {
        values.clear();
        if (!a.value.empty()) {
          auto v = U32ValueColumn(batch, a.value);
          if (!v.ok()) return fail(v.status());
          values = *std::move(v);
        }
        payload.clear();
        for (size_t i = 0; i < plan.columns.size(); ++i) {
          auto col = PayloadColumn(batch, plan.columns[i], plan.schema[i], false);
          if (!col.ok()) {
            return fail(
                absl::Status(col.status().code(),
                             absl::StrCat(col.status().message(), " (index '", a.name,
                                          "' stores column '", plan.schema[i].name, "' as ",
                                          std::string(SchemaTypeName(plan.schema[i].type)), ")")));
          }
          payload.push_back(*std::move(col));
        }
        whole.upsert_keys = keys.keys();
        whole.values = values;
        for (const auto& p : payload) whole.payload.push_back(p.view());
      } else {
        whole.delete_keys = keys.keys();
      }
      auto requests = client::PlanMutation(whole, max_rows, max_bytes);
      if (!requests.ok()) {
        return fail(absl::Status(requests.status().code(),
                                 absl::StrCat(batch.Where(0), ": ", requests.status().message())));
      }
      for (size_t i = 0; i < requests->batches.size(); ++i) {
        const client::MutateRequestResult& r = requests->ranges[i];
        const uint64_t first = upsert ? r.upsert_begin : r.delete_begin;
        const uint64_t end = upsert ? r.upsert_end : r.delete_end;
        todo.push_back(std::move(requests->batches[i]));
        todo_rows.push_back(MutatePending{batch.Where(first), end - first});
      }
    }
    if (stop.load()) return std::nullopt;
    client::MutateBatch next = std::move(todo.front());
    todo.pop_front();
    queue.Push(std::make_unique<MutatePending>(std::move(todo_rows.front())));
    todo_rows.pop_front();
    return next;
  };

  ProgressBar bar(absl::StrCat(upsert ? "upsert " : "delete ", a.name), ProgressEnabled(g));
  client::MutateSummary summary;
  uint64_t answered_rows = 0, applied_rows = 0;
  // The first request the server refused and the rows it carried. The
  // requests in flight behind it are still answered (and may be applied).
  absl::Status refused;
  std::string refused_rows;
  auto sink = [&](client::MutateResult&& r) -> absl::Status {
    std::unique_ptr<MutatePending> p = queue.Pop();
    if (p == nullptr) return absl::InternalError("an answer without a request");
    if (!r.error.ok() && refused.ok()) {
      refused = r.error;
      refused_rows =
          absl::StrCat("the request of ", Plural(p->rows, "row", "rows"), " from ", p->where);
      stop = true;
    }
    if (r.error.ok()) applied_rows += p->rows;
    answered_rows += p->rows;
    client::MutateRequestResult request;
    request.result = std::move(r);
    summary.Add(std::move(request));
    bar.UpdateInput(answered_rows, input->bytes_read(), input->total_bytes());
    return absl::OkStatus();
  };
  const absl::Status st = c->Mutate(a.name, source, sink, Streaming(g));
  bar.Done();
  if (!queue.error().ok()) {
    UsageFail(absl::StrCat(queue.error().message(), "; ",
                           AppliedText(summary, applied_rows, " before it")));
  }
  if (!refused.ok()) {
    RpcFail(absl::Status(refused.code(), absl::StrCat(refused.message(), " (", refused_rows,
                                                      "; nothing of it was applied; ",
                                                      AppliedText(summary, applied_rows, ""), ")")),
            what);
  }
  if (!st.ok()) {
    RpcFail(absl::Status(st.code(), absl::StrCat(st.message(), " (",
                                                 AppliedText(summary, applied_rows, ""), ")")),
            what);
  }
  for (const std::string& note : input->TakeNotes()) Note(g, note);
  if (summary.applied_requests == 0) {
    // An input without rows: the index as it is.
    summary.index_version = info.version;
    summary.mutation_sequence = info.mutation_sequence;
    summary.capacity = info.capacity;
    summary.load_factor = info.load_factor;
    summary.statistics = info.statistics;
  }
  Report(g, upsert, a.name, input->source(), summary);
  return kExitOk;
}

}  // namespace

int CmdIndexUpsert(const Globals& g, const MutateArgs& a) { return RunMutate(g, a, true); }

int CmdIndexDelete(const Globals& g, const MutateArgs& a) { return RunMutate(g, a, false); }

}  // namespace gpujoin::cli
