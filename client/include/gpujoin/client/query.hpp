// Plans in one round trip (the Query stream, docs/api.md "Query"): a plan of
// steps (lookups on resident indexes, filters, an aggregation, a projection, a
// limit) that the server runs on every input batch, so that only the result
// crosses the wire. QueryPlan builds the plan; QueryBatch is one input batch
// (named typed columns of one length); QueryResult the answer to one batch,
// reassembled when the server split it over several messages; QueryTable the
// whole result of Client::QueryAll.
//
// Row plans (no aggregate step) answer every batch with its result rows; an
// aggregate plan answers every batch with its step statistics only and the
// end of the stream (the client's half-close) with one more answer, `final`
// set, holding the groups (QueryBatch::flush asks for the groups so far).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpujoin/client/aggregate.hpp"
#include "gpujoin/client/column.hpp"
#include "gpujoin/client/join.hpp"
#include "gpujoin/client/progress.hpp"
#include "gpujoin/client/query_statistics.hpp"
#include "gpujoin/client/stream_options.hpp"

namespace gpujoin::client {

/// Looks `key` up in `index` and adds the `select`ed payload columns (named
/// `prefix` + name) and a bool found column to the rows (LookupStep).
struct QueryLookup {
  std::string index;
  /// The columns (input or made by earlier steps) that form the key: one
  /// integer column (int32, int64, uint32 or uint64) for a uint32 or uint64
  /// index, or one per key column of a key schema, in its order and of its types.
  std::vector<std::string> key;
  std::vector<std::string> select;  ///< payload columns of the index to add
  std::string prefix;               ///< prepended to the selected columns' names
  /// kInner: rows with a match (one per match on a keep_all index); kLeftOuter:
  /// every row (null payload without a match); kLeftSemi: rows with a match,
  /// once (the first match's payload); kLeftAnti: rows without one.
  JoinKind kind = JoinKind::kInner;
  std::string found_column;  ///< name of the found column; empty: "<index>.found"
};

/// Keeps the rows for which `where` is true (SQL: false and null drop the row).
/// The grammar is the server's (docs/api.md "Query", Filter); the client sends
/// the text as it is.
struct QueryFilter {
  std::string where;
};

/// One measure of an aggregate step: COUNT (of rows without a column, else of
/// the column's non-null values), SUM, MIN, MAX or MEAN of a numeric column.
struct QueryMeasure {
  AggregateOp op = AggregateOp::kCount;
  std::string column;  ///< empty: COUNT of rows
  std::string name;    ///< output column; empty: "count" or "<op>_<column>"
};

/// Parses one measure as the CLI's --agg spells it: `count()`, `count(col)`,
/// `sum(col)`, `min(col)`, `max(col)`, `mean(col)` (or `avg(col)`), each
/// optionally followed by ` as name`; function names and `as` in any case,
/// blanks around the parts ignored. `col` and `name` are plain names
/// ([A-Za-z_][A-Za-z0-9_.]*) or double-quoted ones (a quote doubled inside).
/// INVALID_ARGUMENT naming the text and what is wrong otherwise.
absl::StatusOr<QueryMeasure> ParseMeasure(std::string_view text);

/// Parses a comma-separated list of measures ("count(),mean(latency_ms) as m"):
/// ParseMeasure of each item (a comma inside double quotes does not split);
/// INVALID_ARGUMENT for an empty list or an empty item, naming its position.
absl::StatusOr<std::vector<QueryMeasure>> ParseMeasures(std::string_view text);

/// Groups the stream's rows by `group_by` (zero or more integer, bool, string
/// or binary columns; nulls form one group; groups in the order their first
/// row arrived) and computes `measures` (AggregateStep). Steps after it apply
/// to the groups.
struct QueryAggregate {
  std::vector<std::string> group_by;
  std::vector<QueryMeasure> measures;
};

/// One column kept by a project step, renamed when `name` is not empty.
struct QueryProjectColumn {
  std::string column;
  std::string name;
};

/// Keeps these columns, in this order (ProjectStep).
struct QueryProject {
  std::vector<QueryProjectColumn> columns;
};

/// Keeps the first `rows` rows (of the whole stream, for row plans).
struct QueryLimit {
  uint64_t rows = 0;
};

/// One step of a plan.
using QueryStep = std::variant<QueryLookup, QueryFilter, QueryAggregate, QueryProject, QueryLimit>;

/// A plan: steps applied in order, each to the columns the steps before made.
/// Built step by step:
///
///   QueryPlan plan;
///   plan.Lookup("sensors", {"sensor_id"}, {"type"})
///       .Filter("latency_ms > 2")
///       .Aggregate({"type"}, {{AggregateOp::kCount}, {AggregateOp::kMean, "latency_ms"}});
///
/// The server checks the whole plan against the first batch's columns and the
/// live indexes before anything runs (at most 64 steps).
class QueryPlan {
 public:
  /// Appends a lookup step.
  QueryPlan& Lookup(QueryLookup step);
  /// Appends a lookup of `key` in `index` adding the `select`ed payload columns.
  QueryPlan& Lookup(std::string index, std::vector<std::string> key,
                    std::vector<std::string> select = {}, JoinKind kind = JoinKind::kInner);
  /// Appends a filter step.
  QueryPlan& Filter(std::string where);
  /// Appends an aggregate step.
  QueryPlan& Aggregate(std::vector<std::string> group_by, std::vector<QueryMeasure> measures);
  /// Appends a project step.
  QueryPlan& Project(std::vector<QueryProjectColumn> columns);
  /// Appends a limit step.
  QueryPlan& Limit(uint64_t rows);
  /// Appends any step.
  QueryPlan& Add(QueryStep step);

  const std::vector<QueryStep>& steps() const { return steps_; }
  /// True when a step aggregates: the stream's result is then its final answer.
  bool has_aggregate() const;

 private:
  std::vector<QueryStep> steps_;
};

/// "lookup", "filter", "aggregate", "project" or "limit" (the server's
/// StepStatistics::kind of the step).
std::string_view QueryStepKind(const QueryStep& step);

/// What one step did for one answer (StepStatistics).
struct QueryStepStatistics {
  uint32_t step = 0;  ///< position in the plan
  std::string kind;   ///< "lookup", "filter", "aggregate", "project", "limit"
  uint64_t rows_in = 0;
  uint64_t rows_out = 0;
  /// Lookup steps: the index, the version and mutation sequence the batch
  /// used, and the probe statistics of its rows.
  std::string index;
  uint64_t index_version = 0;
  uint64_t mutation_sequence = 0;
  QueryStatistics statistics;
};

/// One input batch (borrowed; see "Borrowed memory" in client.hpp): named
/// columns of one length, the same names and types in every batch of a stream.
struct QueryBatch {
  std::vector<ColumnView> columns;
  /// Aggregate plans: answer this batch with the groups so far.
  bool flush = false;
};

/// The answer to one batch (or, `final` set, to the end of the stream).
struct QueryResult {
  /// 0-based position of the batch in the stream; the end of the stream's
  /// answer has the last batch's plus one.
  uint64_t batch_id = 0;
  /// The result rows, reassembled when the server split them over several
  /// messages (QueryResponse.more, by first_row). Aggregate plans: none for an
  /// input batch; the groups in the final answer (and in a flush's).
  std::vector<Column> columns;
  uint64_t rows = 0;
  /// One per step run, in plan order (aggregate results: for the whole stream).
  std::vector<QueryStepStatistics> steps;
  bool final = false;  ///< the answer to the end of the stream
  absl::Status error;  ///< in-band error of this batch (the stream goes on); results empty then
  std::chrono::nanoseconds latency{0};  ///< from the batch's write to its answer's arrival
};

/// Checks a batch before it is sent: at least one column, every column named
/// (names unique), of one length, passing CheckColumnView. INVALID_ARGUMENT
/// naming `what` and the column otherwise.
absl::Status CheckQueryBatch(const QueryBatch& batch, std::string_view what);

/// Rows [begin, end) of an input: one batch of PlanQueryBatches.
struct QueryBatchRange {
  uint64_t begin = 0;
  uint64_t end = 0;
};

/// Batches of whole in-memory columns that each fit one message: at most
/// `max_rows` rows and `max_bytes` encoded bytes each (the columns' data,
/// offsets, validity and headers), in input order. A single row larger than
/// `max_bytes` is INVALID_ARGUMENT naming the row and its bytes; `max_rows` 0
/// too. An input without rows gives one empty batch (its columns, typed, let
/// the server check the plan).
absl::StatusOr<std::vector<QueryBatchRange>> PlanQueryBatches(std::span<const ColumnView> columns,
                                                              size_t max_rows, uint64_t max_bytes);

/// Whether a row plan's limit is spent: fed the step statistics of every
/// answer in order, done() turns true once a limit step has let its `rows`
/// rows through, after which no batch can add a row (every later step sees
/// none): a caller may stop sending input. Always false for aggregate plans
/// (their limit applies to the groups).
class QueryLimitTracker {
 public:
  explicit QueryLimitTracker(const QueryPlan& plan);
  void Add(const std::vector<QueryStepStatistics>& steps);
  bool done() const { return done_; }

 private:
  struct Limit {
    uint32_t step;
    uint64_t rows;
    uint64_t passed = 0;
  };
  std::vector<Limit> limits_;
  bool done_ = false;
};

/// The whole result of Client::QueryAll.
struct QueryTable {
  /// The result columns: every batch's rows in input order (row plans), or the
  /// final answer's groups (aggregate plans).
  std::vector<Column> columns;
  uint64_t rows = 0;
  /// Every answer in stream order: one per input batch sent, and for
  /// aggregate plans the final answer last (`final` set). Their columns are
  /// moved into `columns`; rows, steps, batch_id and latency stay.
  std::vector<QueryResult> answers;
};

/// Options of Client::QueryAll.
struct QueryOptions {
  /// Most input rows per request. 0 (the default): automatic, at most 2^20
  /// rows and, guessing a batch's result at twice its input, half the
  /// server's --max-result-bytes; a batch the server still refuses for
  /// --max-result-bytes (a keep_all lookup expanded it) runs the whole query
  /// again in batches of half its rows (a limit or an aggregate spans the
  /// stream, so the batches after it cannot go on alone).
  size_t batch_rows = 0;
  /// Row plans with a limit: stop sending input once it is spent
  /// (QueryLimitTracker); `answers` then covers the batches sent.
  bool stop_at_limit = true;
  StreamOptions stream;
  /// May be empty; called as batches are answered (rows_sent: input rows
  /// answered, bytes_sent: their encoded bytes, total_rows: the input's rows).
  ProgressCallback progress;
};

}  // namespace gpujoin::client
