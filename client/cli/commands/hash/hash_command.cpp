// gpujoin hash: a row hash of one or more columns appended to the input rows.
#include "commands.hpp"

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "batch_queue.hpp"
#include "commands/hash/hash_columns.hpp"
#include "output/progress.hpp"
#include "output/row_writer.hpp"

namespace gpujoin::cli {

namespace {

// One input batch on its way: its rows and encoded columns wait for the answer.
struct HashPending {
  Table rows;
  std::vector<HashInput> inputs;
};

}  // namespace

int CmdHash(const Globals& g, const HashArgs& a) {
  if (a.bits != 32 && a.bits != 64) UsageFail(absl::StrCat("hash: --bits must be 32 or 64"));
  // Type expressions hold commas of their own (map<string, int64>).
  std::vector<std::string> specs = SplitHashColumnSpecs(a.cols);
  if (specs.empty()) UsageFail("hash: --cols needs at least one column");
  std::unique_ptr<TableReader> input = OpenInput(g, a.from);
  // The first batch decides the inferred types (a hash depends on its type);
  // later batches are encoded as those types, and a cell that does not fit one
  // is an error naming it.
  auto first = std::make_unique<HashPending>();
  const bool have_first = InputOrDie(input->Next(&first->rows));
  if (!have_first) first->rows = input->EmptyTable();
  for (const auto& s : specs) first->inputs.push_back(InputOrDie(BuildHashInput(first->rows, s)));
  std::vector<std::string> typed;
  Json types = Json::object();
  for (const auto& in : first->inputs) {
    typed.push_back(absl::StrCat(in.name, ":", in.TypeName()));
    types[in.name] = in.TypeName();
  }

  auto c = Connect(g);
  ResultTable columns = StartFrom(first->rows.header.empty() ? input->EmptyTable() : first->rows);
  columns.AddColumn("hash", ColumnKind::kNumber);
  RowWriter out(g, a.out);
  out.Begin(columns);
  BatchQueue<HashPending> queue;
  bool sent = false;
  auto source = [&]() -> std::optional<client::HashBatch> {
    std::unique_ptr<HashPending> p;
    if (!sent) {
      // The first batch, even when empty, so that the server checks the types.
      p = std::move(first);
    } else {
      p = std::make_unique<HashPending>();
      auto more = input->Next(&p->rows);
      if (!more.ok()) {
        queue.SetError(more.status());
        return std::nullopt;
      }
      if (!*more) return std::nullopt;
      for (const auto& s : typed) {
        auto in = BuildHashInput(p->rows, s);
        if (!in.ok()) {
          queue.SetError(absl::Status(
              in.status().code(),
              absl::StrCat(in.status().message(), " (the type was inferred from the first ",
                           g.batch_rows, " rows; give --cols COL:TYPE)")));
          return std::nullopt;
        }
        p->inputs.push_back(*std::move(in));
      }
    }
    sent = true;
    client::HashBatch batch;
    batch.bits = a.bits;
    for (const auto& in : p->inputs) batch.columns.push_back(in.View());
    queue.Push(std::move(p));
    return batch;
  };
  ProgressBar bar("hash " + input->source(), ProgressEnabled(g));
  uint64_t null_rows = 0;
  std::vector<Cell> row;
  auto sink = [&](client::HashResult&& r) -> absl::Status {
    std::unique_ptr<HashPending> p = queue.Pop();
    if (p == nullptr) return absl::InternalError("an answer without a batch");
    if (!r.error.ok()) return r.error;
    const size_t n = p->rows.rows.size();
    if (r.hashes.size() != n) {
      return absl::InternalError(
          absl::StrCat("the server answered ", r.hashes.size(), " hashes for ", n, " rows"));
    }
    null_rows += r.null_count;
    out.SetLeadingKinds(InputKinds(p->rows));
    for (size_t i = 0; i < n; ++i) {
      row.clear();
      for (Cell& cell : p->rows.rows[i].cells) row.push_back(std::move(cell));
      row.emplace_back(r.Valid(i) ? Cell(std::to_string(r.hashes[i])) : std::nullopt);
      out.Write(row);
    }
    bar.UpdateInput(out.rows(), input->bytes_read(), input->total_bytes());
    return absl::OkStatus();
  };
  const absl::Status st = c->Hash(source, sink, Streaming(g));
  bar.Done();
  if (!queue.error().ok()) UsageFail(std::string(queue.error().message()));
  if (!st.ok()) RpcFail(st, "hash");
  for (const std::string& note : input->TakeNotes()) Note(g, note);
  Note(g, absl::StrCat("hash: ", out.rows(), " rows, ", null_rows, " null, ", a.bits, "-bit"));
  out.Finish(Json{{"bits", a.bits}, {"column_types", types}, {"null_rows", null_rows}});
  return kExitOk;
}

}  // namespace gpujoin::cli
