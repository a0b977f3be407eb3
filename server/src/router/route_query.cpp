// Query through gpujoin-router. A plan whose lookup steps all look up by the
// same input columns (on indexes of one key type) is split by that key
// (plan_routing.hpp): each shard runs the plan on the rows whose key it
// holds, so every lookup finds its matches on the shard the row went to. The
// router adds a column of global row numbers, which the plan's project steps
// keep, and merges the shards' rows back into input order by it; a limit at
// the end of the plan is run again over the merged rows; an aggregate's
// groups are merged (plan_groups.hpp). Plans the router cannot split so are
// refused UNIMPLEMENTED naming the step.
#include <algorithm>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "gpujoin/common/status_macros.hpp"
#include "router/merge.hpp"
#include "router/plan_groups.hpp"
#include "router/plan_routing.hpp"
#include "router/routes.hpp"
#include "router/wire_rows.hpp"
#include "wire/column_check.hpp"
#include "wire/column_codec.hpp"
#include "wire/plan_wire.hpp"

namespace gpujoin::server::router {
namespace {

using Answers = std::vector<std::vector<v1::QueryResponse>>;

// A column of `c`'s name and type without rows.
v1::Column EmptyLike(const v1::Column& c) {
  v1::Column out;
  out.set_name(c.name());
  out.set_type(c.type());
  if (c.type() == v1::COLUMN_TYPE_STRING || c.type() == v1::COLUMN_TYPE_BINARY) {
    out.set_offsets(std::string(4, '\0'));
  }
  return out;
}

// Rows [base, base + rows) as the router's row column.
v1::Column RowColumn(std::span<const uint32_t> rows, uint64_t base) {
  v1::Column c;
  c.set_name(kRowColumn);
  c.set_type(v1::COLUMN_TYPE_UINT64);
  c.set_length(rows.size());
  std::string data(8 * rows.size(), '\0');
  for (size_t i = 0; i < rows.size(); ++i) {
    const uint64_t v = base + rows[i];
    std::memcpy(data.data() + 8 * i, &v, 8);
  }
  c.set_data(std::move(data));
  return c;
}

// The shards' rows merged into input order, the router's limit applied.
struct MergedRows {
  std::vector<v1::Column> columns;
  uint64_t rows = 0;
  std::vector<v1::StepStatistics> steps;
};

// The step statistics of the shards' answers, summed per step (lookups: the
// same index version on every shard, their mutation sequences summed).
absl::StatusOr<std::vector<v1::StepStatistics>> MergeSteps(const ShardCalls& calls,
                                                           const Answers& answers) {
  const uint32_t n = calls.count();
  std::vector<v1::StepStatistics> out;
  // Step statistics: the shards' summed, per step.
  std::map<uint32_t, v1::StepStatistics> steps;
  std::map<uint32_t, std::vector<uint64_t>> versions;
  for (uint32_t s = 0; s < n; ++s) {
    if (answers[s].empty()) continue;
    for (const v1::StepStatistics& st : answers[s].front().steps()) {
      auto [it, inserted] = steps.try_emplace(st.step(), st);
      versions[st.step()].push_back(st.index_version());
      if (inserted) continue;
      v1::StepStatistics& m = it->second;
      m.set_rows_in(m.rows_in() + st.rows_in());
      m.set_rows_out(m.rows_out() + st.rows_out());
      m.set_mutation_sequence(m.mutation_sequence() + st.mutation_sequence());
      AddQueryStatistics(m.mutable_statistics(), st.statistics());
    }
  }
  for (auto& [step, st] : steps) {
    if (!st.index().empty()) {
      grpc::Status same = SameVersion(calls, st.index(), versions[step]);
      if (!same.ok()) return absl::AbortedError(same.error_message());
    }
    out.push_back(st);
  }
  return out;
}

absl::StatusOr<MergedRows> MergeRows(const ShardCalls& calls, const std::vector<uint32_t>& parts, uint64_t base,
                                     uint64_t room, const Answers& answers) {
  const uint32_t n = calls.count();
  MergedRows out;
  // Every message of every shard; per shard, its rows' numbers and refs.
  std::vector<const v1::QueryResponse*> pieces;
  std::vector<std::vector<uint64_t>> numbers(n);
  std::vector<std::vector<RowRef>> refs(n);
  int row_column = -1;
  for (uint32_t s = 0; s < n; ++s) {
    for (const v1::QueryResponse& m : answers[s]) {
      const uint32_t source = static_cast<uint32_t>(pieces.size());
      pieces.push_back(&m);
      if (m.rows() == 0) continue;
      int at = -1;
      for (int c = 0; c < m.columns_size(); ++c) {
        if (m.columns(c).name() == kRowColumn) at = c;
      }
      const v1::Column* col = at < 0 ? nullptr : &m.columns(at);
      if (col == nullptr || col->type() != v1::COLUMN_TYPE_UINT64 || col->length() != m.rows() ||
          m.rows() > 0xffffffffu || col->data().size() != 8 * m.rows() ||
          (row_column >= 0 && at != row_column)) {
        return absl::InternalError(
            absl::StrCat(calls.shard(s).Name(), ": its rows lack the router's row numbers"));
      }
      row_column = at;
      for (uint64_t r = 0; r < m.rows(); ++r) {
        uint64_t v;
        std::memcpy(&v, col->data().data() + 8 * r, 8);
        numbers[s].push_back(v);
        refs[s].push_back({source, static_cast<uint32_t>(r)});
      }
    }
  }
  // Input order: every input row's rows, from its shard, up to the room left.
  std::vector<RowRef> merged;
  std::vector<size_t> next(n, 0);
  for (uint64_t r = 0; r < parts.size() && merged.size() < room; ++r) {
    const uint32_t s = parts[r];
    size_t& i = next[s];
    while (i < numbers[s].size() && numbers[s][i] == base + r && merged.size() < room) {
      merged.push_back(refs[s][i]);
      ++i;
    }
  }
  out.rows = merged.size();
  // The columns: the first piece's names and order, the router's row column left out.
  const v1::QueryResponse* header = nullptr;
  for (const v1::QueryResponse* p : pieces) {
    if (p->columns_size() > 0) {
      header = p;
      break;
    }
  }
  if (header != nullptr) {
    for (int c = 0; c < header->columns_size(); ++c) {
      if (header->columns(c).name() == kRowColumn) continue;
      std::vector<const v1::Column*> sources;
      for (const v1::QueryResponse* p : pieces) {
        sources.push_back(p->columns_size() > c ? &p->columns(c) : &header->columns(c));
      }
      GPUJOIN_ASSIGN_OR_RETURN(v1::Column col,
                               GatherColumn(sources, merged, absl::StrCat("columns[", c, "]")));
      out.columns.push_back(std::move(col));
    }
  }
  return out;
}

// Bytes row `r` of `c` takes in a message (its value, offset and bits).
uint64_t RowBytes(const v1::Column& c, uint64_t r) {
  if (c.type() == v1::COLUMN_TYPE_STRING || c.type() == v1::COLUMN_TYPE_BINARY) {
    int32_t b, e;
    std::memcpy(&b, c.offsets().data() + 4 * r, 4);
    std::memcpy(&e, c.offsets().data() + 4 * (r + 1), 4);
    return 5 + static_cast<uint64_t>(e - b);
  }
  if (c.type() == v1::COLUMN_TYPE_BOOL) return 1;
  const uint64_t rows = std::max<uint64_t>(1, c.length());
  return 1 + c.data().size() / rows;
}

// The merged rows as messages within the router's message limit: cut where
// the rows' own bytes would pass half of it (the rest is framing), each
// message's columns with their own null counts.
absl::StatusOr<std::vector<v1::QueryResponse>> Messages(MergedRows merged, uint64_t batch_id,
                                                        uint64_t max_message_bytes) {
  const uint64_t room = std::max<uint64_t>(1, max_message_bytes / 2);
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  uint64_t first = 0, bytes = 0;
  for (uint64_t r = 0; r < merged.rows; ++r) {
    uint64_t row = 0;
    for (const v1::Column& c : merged.columns) row += RowBytes(c, r);
    if (r > first && bytes + row > room) {
      ranges.emplace_back(first, r);
      first = r;
      bytes = 0;
    }
    bytes += row;
  }
  ranges.emplace_back(first, merged.rows);
  std::vector<v1::QueryResponse> out;
  for (const auto& [begin, end] : ranges) {
    v1::QueryResponse m;
    m.set_batch_id(batch_id);
    m.set_first_row(begin);
    m.set_rows(end - begin);
    if (begin == 0) {
      for (const v1::StepStatistics& st : merged.steps) *m.add_steps() = st;
    }
    if (ranges.size() == 1) {
      for (v1::Column& c : merged.columns) *m.add_columns() = std::move(c);
    } else {
      std::vector<uint32_t> rows(end - begin);
      for (uint64_t r = begin; r < end; ++r) rows[r - begin] = static_cast<uint32_t>(r);
      for (const v1::Column& c : merged.columns) {
        GPUJOIN_ASSIGN_OR_RETURN(v1::Column part, TakeColumnRows(c, rows, c.name()));
        uint64_t nulls = 0;
        for (uint64_t r = 0; r < part.length() && !part.validity().empty(); ++r) {
          nulls += (static_cast<uint8_t>(part.validity()[r / 8]) >> (r % 8)) & 1u ? 0 : 1;
        }
        part.set_null_count(nulls);
        *m.add_columns() = std::move(part);
      }
    }
    out.push_back(std::move(m));
  }
  for (size_t i = 0; i + 1 < out.size(); ++i) out[i].set_more(true);
  return out;
}

// A shard's error about the router's partial measures, in the caller's names.
v1::BatchError CallersNames(const GroupsPlan& groups, v1::BatchError error) {
  std::string message = error.message();
  for (const GroupsPlan::Measure& m : groups.measures) {
    for (const std::string& hidden : {m.partial, m.count}) {
      if (hidden.empty()) continue;
      message = absl::StrReplaceAll(message, {{absl::StrCat("\"", hidden, "\""),
                                               absl::StrCat("\"", m.name, "\"")}});
    }
  }
  error.set_message(std::move(message));
  return error;
}

// `answer` (its batch_id and final flag) carrying `status` as the batch's error.
v1::QueryResponse BatchErrorOf(const absl::Status& status, v1::QueryResponse answer) {
  answer.clear_steps();
  answer.clear_columns();
  answer.mutable_error()->set_code(static_cast<int>(status.code()));
  answer.mutable_error()->set_message(std::string(status.message()));
  return answer;
}

// The answer to a flush or to the end of an aggregate plan's stream: the
// shards' groups merged, the steps after the aggregate applied.
absl::StatusOr<std::vector<v1::QueryResponse>> GroupsAnswer(const ShardCalls& calls,
                                                            const PlanRouting& routing,
                                                            const Answers& answers,
                                                            uint64_t batch_id, bool final) {
  GPUJOIN_ASSIGN_OR_RETURN(MergedGroups groups, MergeGroups(routing.groups, answers));
  MergedRows rows;
  GPUJOIN_ASSIGN_OR_RETURN(rows.steps, MergeSteps(calls, answers));
  for (v1::StepStatistics& st : rows.steps) {
    if (st.step() == static_cast<uint32_t>(routing.aggregate_step)) st.set_rows_out(groups.groups);
  }
  uint64_t in = groups.groups;
  for (size_t i = 0; i < routing.groups.after.size(); ++i) {
    v1::StepStatistics st;
    st.set_step(routing.groups.after_positions[i]);
    const v1::PlanStep& step = routing.groups.after[i];
    st.set_kind(step.has_limit() ? "limit" : "project");
    st.set_rows_in(in);
    if (step.has_limit()) in = std::min<uint64_t>(in, step.limit().rows());
    st.set_rows_out(in);
    rows.steps.push_back(st);
  }
  rows.columns = std::move(groups.columns);
  rows.rows = groups.rows;
  GPUJOIN_ASSIGN_OR_RETURN(std::vector<v1::QueryResponse> out,
                           Messages(std::move(rows), batch_id, calls.config().max_message_bytes));
  for (v1::QueryResponse& m : out) m.set_final(final);
  return out;
}

}  // namespace

grpc::Status RouteQuery(const ShardCalls& calls, grpc::ServerContext* ctx,
                        grpc::ServerReaderWriter<v1::QueryResponse, v1::QueryRequest>* stream) {
  grpc::Status denied = calls.Authorize(ctx);
  if (!denied.ok()) return denied;
  const uint32_t n = calls.count();
  if (n == 1) return calls.Passthrough(ctx, stream, 0, "Query", &v1::GpuJoin::Stub::Query);
  ShardStreams<v1::QueryRequest, v1::QueryResponse> shards(calls, ctx, &v1::GpuJoin::Stub::Query,
                                                            "Query");
  std::optional<PlanRouting> routing;
  uint64_t next_row = 0;  // global row number of the next batch's first row
  v1::Plan plan;          // the caller's
  uint64_t last_batch_id = 0;
  absl::Status plan_error;  // a plan refused: every message's answer
  v1::QueryRequest request;
  while (stream->Read(&request)) {
    request.clear_replicated();  // the router's to set
    last_batch_id = request.batch_id();
    if (!routing.has_value()) {
      if (!request.has_plan()) {
        // No plan: the shards say so, as one server would.
        std::vector<v1::QueryRequest> parts(n, request);
        Answers answers;
        grpc::Status st = shards.Exchange(parts, &answers);
        if (!st.ok()) return st;
        v1::QueryResponse out = answers[0].front();
        if (!stream->Write(out)) return shards.Close(grpc::Status::CANCELLED);
        continue;
      }
      auto describe = [&](const std::string& index) -> absl::StatusOr<v1::IndexInfo> {
        v1::DescribeIndexRequest d;
        d.set_name(index);
        std::vector<v1::DescribeIndexResponse> described;
        grpc::Status st = calls.FanOut<v1::DescribeIndexRequest, v1::DescribeIndexResponse>(
            ctx, "DescribeIndex", d, &v1::GpuJoin::Stub::DescribeIndex, &described);
        if (!st.ok()) {
          return absl::Status(static_cast<absl::StatusCode>(st.error_code()), st.error_message());
        }
        return described[0].index();
      };
      absl::StatusOr<PlanRouting> routed = RoutePlan(request.plan(), request.columns(), describe);
      if (!routed.ok() && routed.status().code() == absl::StatusCode::kUnimplemented) {
        return shards.Close(ToGrpc(routed.status()));
      }
      if (!routed.ok()) {
        // A plan one server would refuse: every message is answered so, in-band.
        plan_error = absl::Status(routed.status().code(),
                                  absl::StrCat("the stream's plan was refused: ",
                                               routed.status().message()));
        routing.emplace();
      } else {
        routing = *std::move(routed);
      }
      plan = request.plan();
    }
    if (!plan_error.ok()) {
      v1::QueryResponse refused;
      refused.set_batch_id(request.batch_id());
      refused.mutable_error()->set_code(static_cast<int>(plan_error.code()));
      refused.mutable_error()->set_message(std::string(plan_error.message()));
      if (!stream->Write(refused)) return shards.Close(grpc::Status::CANCELLED);
      continue;
    }
    const bool batch = request.columns_size() > 0;
    v1::QueryResponse out;
    out.set_batch_id(request.batch_id());
    // The batch checked as one server checks it (names, types, one length,
    // buffers) before the router reads a row of it.
    absl::Status bad = batch ? DecodePlanColumns(request.columns()).status() : absl::OkStatus();
    const uint64_t rows = bad.ok() && batch ? request.columns(0).length() : 0;
    absl::StatusOr<std::vector<uint32_t>> parts =
        bad.ok() ? PartsOf(*routing, request, rows, n) : absl::StatusOr<std::vector<uint32_t>>(bad);
    if (!parts.ok()) {
      if (request.has_plan()) {
        // The shards still need the plan: its columns' names and types, no rows.
        std::vector<v1::QueryRequest> first(n);
        for (v1::QueryRequest& f : first) {
          f.set_batch_id(request.batch_id());
          *f.mutable_plan() = routing->shard_plan;
          for (const std::string& r : routing->replicated) f.add_replicated(r);
          for (const v1::Column& c : request.columns()) *f.add_columns() = EmptyLike(c);
          *f.add_columns() = RowColumn({}, next_row);
        }
        Answers ignored;
        grpc::Status st = shards.Exchange(first, &ignored);
        if (!st.ok()) return st;
      }
      out.mutable_error()->set_code(static_cast<int>(parts.status().code()));
      out.mutable_error()->set_message(std::string(parts.status().message()));
      if (!stream->Write(out)) return shards.Close(grpc::Status::CANCELLED);
      continue;
    }
    const RowSplit split = SplitRows(*parts, n);
    // The batch's columns were checked above; each is checked once more here
    // (not once per shard) for the widths its parts are cut with.
    std::vector<CheckedColumn> columns(batch ? request.columns_size() : 0);
    for (size_t c = 0; c < columns.size(); ++c) {
      absl::StatusOr<CheckedColumn> checked =
          CheckColumn(request.columns(c), absl::StrCat("columns[", c, "]"));
      if (!checked.ok()) return shards.Close(ToGrpc(checked.status()));
      columns[c] = *checked;
    }
    std::vector<v1::QueryRequest> shard_requests(n);
    for (uint32_t s = 0; s < n; ++s) {
      v1::QueryRequest& part = shard_requests[s];
      part.set_batch_id(request.batch_id());
      part.set_flush(request.flush());
      if (request.has_plan()) {
        *part.mutable_plan() = routing->shard_plan;
        for (const std::string& r : routing->replicated) part.add_replicated(r);
      }
      if (!batch) continue;
      for (size_t c = 0; c < columns.size(); ++c) {
        absl::StatusOr<v1::Column> col =
            TakeColumnRows(columns[c], split.rows[s], absl::StrCat("columns[", c, "]"));
        if (!col.ok()) return shards.Close(ToGrpc(col.status()));  // checked above
        *part.add_columns() = *std::move(col);
      }
      *part.add_columns() = RowColumn(split.rows[s], next_row);
    }
    Answers answers;
    grpc::Status st = shards.Exchange(shard_requests, &answers);
    if (!st.ok()) return st;
    if (auto refused = RefusedBatch(calls, answers)) {
      next_row += rows;
      // A plan that keeps state over the stream (groups, limits) cannot take
      // back a batch that some shards folded in: the stream ends.
      std::vector<std::string> took;
      for (uint32_t s = 0; s < n; ++s) {
        if (!answers[s].front().has_error()) took.push_back(calls.shard(s).Name());
      }
      if (!took.empty() && (routing->aggregate_step >= 0 || routing->first_limit >= 0)) {
        return shards.Close(grpc::Status(
            grpc::StatusCode::ABORTED,
            absl::StrCat("batch ", request.batch_id(), ": ", refused->message(), "; ",
                         absl::StrJoin(took, ", "),
                         " took it in, so the plan's groups or limits are no longer one "
                         "server's: run the stream again")));
      }
      *out.mutable_error() = CallersNames(routing->groups, *refused);
      if (!stream->Write(out)) return shards.Close(grpc::Status::CANCELLED);
      continue;
    }
    if (routing->aggregate_step >= 0) {
      // Batches fold into the shards' groups; a flush answers with them.
      next_row += rows;
      absl::StatusOr<std::vector<v1::QueryResponse>> answer;
      if (request.flush()) {
        answer = GroupsAnswer(calls, *routing, answers, request.batch_id(), false);
      } else {
        absl::StatusOr<std::vector<v1::StepStatistics>> steps = MergeSteps(calls, answers);
        if (steps.ok()) {
          for (const v1::StepStatistics& st : *steps) *out.add_steps() = st;
          answer = std::vector<v1::QueryResponse>{out};
        } else {
          answer = steps.status();
        }
      }
      if (!answer.ok()) answer = std::vector<v1::QueryResponse>{BatchErrorOf(answer.status(), out)};
      for (const v1::QueryResponse& m : *answer) {
        if (!stream->Write(m)) return shards.Close(grpc::Status::CANCELLED);
      }
      continue;
    }
    absl::StatusOr<std::vector<v1::StepStatistics>> steps = MergeSteps(calls, answers);
    if (!steps.ok()) return shards.Close(ToGrpc(steps.status()));
    const uint64_t room = LimitChain(plan, &*routing, &*steps);
    absl::StatusOr<MergedRows> merged = MergeRows(calls, *parts, next_row, room, answers);
    if (!merged.ok()) return shards.Close(ToGrpc(merged.status()));
    merged->steps = *std::move(steps);
    next_row += rows;
    absl::StatusOr<std::vector<v1::QueryResponse>> messages =
        Messages(*std::move(merged), request.batch_id(), calls.config().max_message_bytes);
    if (!messages.ok()) return shards.Close(ToGrpc(messages.status()));
    for (const v1::QueryResponse& m : *messages) {
      if (!stream->Write(m)) return shards.Close(grpc::Status::CANCELLED);
    }
  }
  if (routing.has_value() && plan_error.ok() && routing->aggregate_step >= 0) {
    // The end of the stream: every shard's final groups, merged.
    Answers answers;
    grpc::Status st = shards.Drain(&answers);
    if (!st.ok()) return st;
    v1::QueryResponse out;
    out.set_batch_id(last_batch_id + 1);
    out.set_final(true);
    if (auto refused = RefusedBatch(calls, answers)) {
      *out.mutable_error() = CallersNames(routing->groups, *refused);
      stream->Write(out);
      return grpc::Status::OK;
    }
    absl::StatusOr<std::vector<v1::QueryResponse>> answer =
        GroupsAnswer(calls, *routing, answers, last_batch_id + 1, true);
    if (!answer.ok()) answer = std::vector<v1::QueryResponse>{BatchErrorOf(answer.status(), out)};
    for (const v1::QueryResponse& m : *answer) {
      if (!stream->Write(m)) return grpc::Status::CANCELLED;
    }
    return grpc::Status::OK;
  }
  return shards.Close(grpc::Status::OK);
}

}  // namespace gpujoin::server::router
