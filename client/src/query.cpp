// Client::Query (a pipelined stream of input batches run through one plan,
// answers reassembled by first_row) and QueryAll, which cuts whole in-memory
// columns into batches that fit a message and assembles the result table.
#include <algorithm>
#include <atomic>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client_impl.hpp"
#include "gpujoin/client/client.hpp"
#include "gpujoin/common/status_macros.hpp"
#include "stream_runner.hpp"
#include "wire.hpp"

namespace gpujoin::client {

namespace pb = ::gpujoin::v1;

namespace {

// The wire spelling of one step.
void ToProtoStep(const QueryStep& step, pb::PlanStep* out) {
  if (const auto* l = std::get_if<QueryLookup>(&step)) {
    pb::LookupStep* p = out->mutable_lookup();
    p->set_index(l->index);
    for (const std::string& k : l->key) p->add_key(k);
    for (const std::string& s : l->select) p->add_select(s);
    p->set_prefix(l->prefix);
    p->set_kind(detail::ToProtoJoinKind(l->kind));
    p->set_found_column(l->found_column);
  } else if (const auto* f = std::get_if<QueryFilter>(&step)) {
    out->mutable_filter()->set_where(f->where);
  } else if (const auto* a = std::get_if<QueryAggregate>(&step)) {
    pb::AggregateStep* p = out->mutable_aggregate();
    for (const std::string& g : a->group_by) p->add_group_by(g);
    for (const QueryMeasure& m : a->measures) {
      pb::Measure* pm = p->add_measures();
      pm->set_op(detail::ToProtoAggregateOp(m.op));
      pm->set_column(m.column);
      pm->set_name(m.name);
    }
  } else if (const auto* pr = std::get_if<QueryProject>(&step)) {
    pb::ProjectStep* p = out->mutable_project();
    for (const QueryProjectColumn& c : pr->columns) {
      pb::ProjectColumn* pc = p->add_columns();
      pc->set_column(c.column);
      pc->set_name(c.name);
    }
  } else if (const auto* lim = std::get_if<QueryLimit>(&step)) {
    out->mutable_limit()->set_rows(lim->rows);
  }
}

pb::Plan ToProtoPlan(const QueryPlan& plan) {
  pb::Plan p;
  for (const QueryStep& s : plan.steps()) ToProtoStep(s, p.add_steps());
  return p;
}

QueryStepStatistics FromProtoStep(const pb::StepStatistics& s) {
  QueryStepStatistics out;
  out.step = s.step();
  out.kind = s.kind();
  out.rows_in = s.rows_in();
  out.rows_out = s.rows_out();
  out.index = s.index();
  out.index_version = s.index_version();
  out.mutation_sequence = s.mutation_sequence();
  out.statistics = detail::ToQueryStatistics(s.statistics());
  return out;
}

// Adds one message of an answer to `out`: the first message starts it, a
// continuation (the message before had `more`) holds the rows from `first_row`
// on, which must be those that came so far.
absl::Status AddResponse(pb::QueryResponse& r, QueryResult* out) {
  out->final = out->final || r.final();
  if (detail::DecodeBatchHeader(r, out)) {
    out->columns.clear();
    out->rows = 0;
    return absl::OkStatus();
  }
  if (r.first_row() != out->rows) {
    return absl::InternalError(absl::StrCat("server sent rows from first_row ", r.first_row(),
                                            " of batch ", r.batch_id(), " where row ", out->rows,
                                            " was expected"));
  }
  // The statistics belong to the answer, not to one part: the first part that
  // carries them gives them.
  if (out->steps.empty()) {
    for (const pb::StepStatistics& s : r.steps()) out->steps.push_back(FromProtoStep(s));
  }
  std::vector<Column> part;
  GPUJOIN_RETURN_IF_ERROR(detail::DecodeColumns(r.columns(), r.rows(), &part));
  // A part without rows may come without columns (an aggregate plan's answer
  // to an input batch); it adds nothing.
  if (!part.empty() || r.rows() != 0) {
    GPUJOIN_RETURN_IF_ERROR(detail::AppendColumns(std::move(part), &out->columns));
  }
  out->rows += r.rows();
  return absl::OkStatus();
}

// One Query stream of QueryAll: `columns` in the batches `ranges`, the answers
// assembled; the batch an in-band error answered goes to `refused`.
absl::StatusOr<QueryTable> QueryStream(Client& client, const QueryPlan& plan,
                                       std::span<const ColumnView> columns,
                                       const std::vector<QueryBatchRange>& ranges,
                                       const QueryOptions& o, std::optional<uint64_t>* refused) {
  QueryTable table;
  const bool aggregate = plan.has_aggregate();
  QueryLimitTracker limit(plan);
  std::atomic<bool> stop{false};  // set by the sink (the calling thread), read by the source
  size_t next = 0;
  BatchSource<QueryBatch> source = [&]() -> std::optional<QueryBatch> {
    if (next >= ranges.size() || (next > 0 && stop.load())) return std::nullopt;
    const QueryBatchRange range = ranges[next++];
    QueryBatch b;
    for (const ColumnView& c : columns) {
      b.columns.push_back(c.Slice(range.begin, range.end - range.begin));
    }
    return b;
  };
  Progress p;
  p.total_rows = columns[0].length;
  bool have_final = false;
  ResultSink<QueryResult> sink = [&](QueryResult&& r) -> absl::Status {
    if (!r.error.ok()) {
      *refused = r.batch_id;
      return r.error;
    }
    if (r.batch_id < ranges.size()) {
      const QueryBatchRange range = ranges[r.batch_id];
      p.rows_sent += range.end - range.begin;
      for (const ColumnView& c : columns) {
        p.bytes_sent += detail::EncodedColumnBytes(c.Slice(range.begin, range.end - range.begin));
      }
    }
    if (o.stop_at_limit) {
      limit.Add(r.steps);
      if (limit.done()) stop = true;
    }
    // Row plans: every answer's rows in order. Aggregate plans: the final
    // answer's groups (a row plan's final answer, if the server sends one, has none).
    if (!aggregate || r.final) {
      if (aggregate) {
        table.columns.clear();
        table.rows = 0;
      }
      if (!r.columns.empty() || r.rows != 0) {
        GPUJOIN_RETURN_IF_ERROR(detail::AppendColumns(std::move(r.columns), &table.columns));
      }
      table.rows += r.rows;
    }
    have_final = have_final || r.final;
    r.columns.clear();
    table.answers.push_back(std::move(r));
    if (o.progress) o.progress(p);
    return absl::OkStatus();
  };
  GPUJOIN_RETURN_IF_ERROR(client.Query(plan, source, sink, o.stream));
  if (aggregate && !have_final) {
    return absl::InternalError(
        "the server did not answer the end of the stream (an aggregate plan's groups)");
  }
  return table;
}

}  // namespace

absl::Status Client::Query(const QueryPlan& plan, const BatchSource<QueryBatch>& source,
                           const ResultSink<QueryResult>& sink, const StreamOptions& options) {
  if (plan.steps().empty()) return absl::InvalidArgumentError("the query plan has no steps");
  const pb::Plan proto_plan = ToProtoPlan(plan);
  const uint64_t max_message = static_cast<uint64_t>(this->options().max_message_bytes);
  grpc::ClientContext ctx;
  impl_->Prepare(&ctx, options.deadline);
  auto stream = impl_->stub_->Query(&ctx);
  // The first message carries the plan, so a stream always sends one: a
  // source without any batch gets an empty one, which encode refuses.
  bool any = false;
  BatchSource<QueryBatch> batches = [&]() -> std::optional<QueryBatch> {
    std::optional<QueryBatch> b = source();
    if (!b && !any) b = QueryBatch{};
    any = true;
    return b;
  };
  auto encode = [&](const QueryBatch& b, uint64_t id, pb::QueryRequest* r) -> absl::Status {
    if (id == 0 && b.columns.empty()) {
      return absl::InvalidArgumentError(
          "a Query stream needs a first batch with columns: the plan is checked against them "
          "(for input without rows send its columns, typed, with zero rows)");
    }
    GPUJOIN_RETURN_IF_ERROR(CheckQueryBatch(b, absl::StrCat("query batch ", id)));
    r->set_batch_id(id);
    if (id == 0) *r->mutable_plan() = proto_plan;
    for (const ColumnView& v : b.columns) detail::EncodeColumn(v, r->add_columns());
    r->set_flush(b.flush);
    const uint64_t bytes = r->ByteSizeLong();
    if (bytes > max_message) {
      return absl::InvalidArgumentError(
          absl::StrCat("query batch ", id, " (", b.columns[0].length, " rows) encodes to ", bytes,
                       " bytes, more than ConnectOptions::max_message_bytes (", max_message,
                       "): send fewer rows per batch (PlanQueryBatches cuts whole columns)"));
    }
    return absl::OkStatus();
  };
  auto more = [](const pb::QueryResponse& r) { return r.more() && !r.has_error(); };
  return detail::RunStream<pb::QueryRequest, pb::QueryResponse, QueryBatch, QueryResult>(
      &ctx, stream.get(), batches, encode, AddResponse, more, sink, options);
}

absl::StatusOr<QueryTable> Client::QueryAll(const QueryPlan& plan,
                                            std::span<const ColumnView> columns,
                                            const QueryOptions& o) {
  GPUJOIN_RETURN_IF_ERROR(
      CheckQueryBatch(QueryBatch{{columns.begin(), columns.end()}, false}, "columns"));
  // A request holds the batch's columns and, the first, the plan: cut the
  // input to what the smaller of the client's and the server's message
  // limits leaves, less 1 KiB for the request's own fields.
  uint64_t max_message = static_cast<uint64_t>(options().max_message_bytes);
  GPUJOIN_ASSIGN_OR_RETURN(const ServerInfo server, GetServerInfo());
  if (server.max_message_bytes != 0) max_message = std::min(max_message, server.max_message_bytes);
  const uint64_t overhead = 1024 + ToProtoPlan(plan).ByteSizeLong();
  const uint64_t max_bytes = max_message > 2 * overhead ? max_message - overhead : max_message / 2;
  const uint64_t rows = columns[0].length;
  uint64_t batch_rows = o.batch_rows;
  if (batch_rows == 0) {
    // A batch's result (its rows and what lookups add) must stay within the
    // server's --max-result-bytes: guess twice the input's row.
    batch_rows = uint64_t{1} << 20;
    if (rows > 0 && server.max_result_bytes != 0) {
      uint64_t input_bytes = 0;
      for (const ColumnView& c : columns) input_bytes += detail::EncodedColumnBytes(c);
      const double row_bytes =
          2.0 * static_cast<double>(input_bytes) / static_cast<double>(rows) + 16;
      const double fit =
          static_cast<double>(std::min(max_message, server.max_result_bytes)) / 2 / row_bytes;
      batch_rows = std::clamp<uint64_t>(static_cast<uint64_t>(fit), 1, batch_rows);
    }
  }
  for (;;) {
    GPUJOIN_ASSIGN_OR_RETURN(const std::vector<QueryBatchRange> ranges,
                             PlanQueryBatches(columns, batch_rows, max_bytes));
    std::optional<uint64_t> refused;  // the batch an in-band error answered
    absl::StatusOr<QueryTable> table = QueryStream(*this, plan, columns, ranges, o, &refused);
    // The whole query runs again in smaller batches (automatic sizing only).
    if (!table.ok() && o.batch_rows == 0 && refused && *refused < ranges.size() &&
        table.status().code() == absl::StatusCode::kResourceExhausted &&
        table.status().message().find("--max-result-bytes") != std::string_view::npos) {
      const uint64_t n = ranges[*refused].end - ranges[*refused].begin;
      if (n > 1) {
        batch_rows = n / 2;
        continue;
      }
    }
    return table;
  }
}

}  // namespace gpujoin::client
