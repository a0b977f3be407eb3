// The client-side side of a Query before anything is sent: the plan builder
// (QueryPlan), the measure parser (ParseMeasure, the CLI's --agg spelling),
// the checks of an input batch (CheckQueryBatch), the cutting of whole
// columns into batches that fit a message (PlanQueryBatches) and the watch
// on a row plan's limit (QueryLimitTracker).
#include <algorithm>
#include <cctype>
#include <set>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "gpujoin/client/query.hpp"
#include "gpujoin/common/status_macros.hpp"
#include "wire.hpp"

namespace gpujoin::client {
namespace {

std::string_view TrimBlanks(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

bool NameStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool NameChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.';
}

// Reads a name at the front of `s` (blanks before it skipped): a plain name
// ([A-Za-z_][A-Za-z0-9_.]*) or a double-quoted one with "" for a quote. Empty
// with `*quoted` false when no name starts there; nullopt for an unterminated quote.
std::optional<std::string> TakeName(std::string_view* s, bool* quoted) {
  *s = TrimBlanks(*s);
  *quoted = false;
  std::string name;
  if (!s->empty() && s->front() == '"') {
    *quoted = true;
    size_t i = 1;
    for (;; ++i) {
      if (i >= s->size()) return std::nullopt;
      if ((*s)[i] == '"') {
        if (i + 1 < s->size() && (*s)[i + 1] == '"') {
          name.push_back('"');
          ++i;
          continue;
        }
        break;
      }
      name.push_back((*s)[i]);
    }
    s->remove_prefix(i + 1);
    return name;
  }
  size_t i = 0;
  if (i < s->size() && NameStart((*s)[i])) {
    while (i < s->size() && NameChar((*s)[i])) ++i;
  }
  name.assign(s->substr(0, i));
  s->remove_prefix(i);
  return name;
}

absl::Status MeasureError(std::string_view text, std::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("measure '", std::string(TrimBlanks(text)), "': ", std::string(why)));
}

}  // namespace

// ---------------------------------------------------------------- measures

absl::StatusOr<QueryMeasure> ParseMeasure(std::string_view text) {
  std::string_view s = TrimBlanks(text);
  size_t f = 0;
  while (f < s.size() && std::isalpha(static_cast<unsigned char>(s[f]))) ++f;
  const std::string_view function = s.substr(0, f);
  s.remove_prefix(f);
  s = TrimBlanks(s);
  if (function.empty() || s.empty() || s.front() != '(') {
    return MeasureError(text,
                        "write FUNCTION(COLUMN) [as NAME]: count(), count(col), sum(col), "
                        "min(col), max(col), mean(col) or avg(col)");
  }
  QueryMeasure m;
  if (EqualsIgnoreCase(function, "count")) {
    m.op = AggregateOp::kCount;
  } else if (EqualsIgnoreCase(function, "sum")) {
    m.op = AggregateOp::kSum;
  } else if (EqualsIgnoreCase(function, "min")) {
    m.op = AggregateOp::kMin;
  } else if (EqualsIgnoreCase(function, "max")) {
    m.op = AggregateOp::kMax;
  } else if (EqualsIgnoreCase(function, "mean") || EqualsIgnoreCase(function, "avg")) {
    m.op = AggregateOp::kMean;
  } else {
    return MeasureError(text, absl::StrCat("unknown function '", std::string(function),
                                           "' (count, sum, min, max, mean or avg)"));
  }
  s.remove_prefix(1);  // '('
  // count(*) is SQL's spelling of count().
  if (m.op == AggregateOp::kCount && TrimBlanks(s).starts_with('*')) {
    s = TrimBlanks(s);
    s.remove_prefix(1);
  }
  bool quoted = false;
  std::optional<std::string> column = TakeName(&s, &quoted);
  if (!column) return MeasureError(text, "unterminated \" in the column name");
  if (column->empty() && quoted) return MeasureError(text, "the column name is empty");
  s = TrimBlanks(s);
  if (s.empty() || s.front() != ')') {
    return MeasureError(
        text, s.empty() ? std::string("missing ')'")
                        : absl::StrCat("expected ')' after the column, found '",
                                       std::string(s.substr(0, 1)),
                                       "' (a column name with other characters: \"quote it\")"));
  }
  s.remove_prefix(1);
  m.column = *std::move(column);
  if (m.column.empty() && m.op != AggregateOp::kCount) {
    const std::string fn(function);
    return MeasureError(text, absl::StrCat(fn, "() needs a column: ", fn, "(COLUMN)"));
  }
  s = TrimBlanks(s);
  if (s.empty()) return m;
  size_t a = 0;
  while (a < s.size() && std::isalpha(static_cast<unsigned char>(s[a]))) ++a;
  if (!EqualsIgnoreCase(s.substr(0, a), "as") || a == s.size() ||
      (!std::isspace(static_cast<unsigned char>(s[a])) && s[a] != '"')) {
    return MeasureError(text, absl::StrCat("unexpected '", std::string(s),
                                           "' after the measure (to name it: ... as NAME)"));
  }
  s.remove_prefix(a);
  std::optional<std::string> name = TakeName(&s, &quoted);
  if (!name) return MeasureError(text, "unterminated \" in the name after 'as'");
  if (name->empty()) return MeasureError(text, "'as' needs a name");
  if (!TrimBlanks(s).empty()) {
    return MeasureError(text, absl::StrCat("unexpected '", std::string(TrimBlanks(s)),
                                           "' after the name (a name with other characters: "
                                           "\"quote it\")"));
  }
  m.name = *std::move(name);
  return m;
}

absl::StatusOr<std::vector<QueryMeasure>> ParseMeasures(std::string_view text) {
  std::vector<QueryMeasure> out;
  if (TrimBlanks(text).empty()) return absl::InvalidArgumentError("no measure given");
  // Split at the commas outside quotes and parentheses.
  std::vector<std::string_view> items;
  size_t start = 0;
  int depth = 0;
  bool quoted = false;
  for (size_t i = 0; i <= text.size(); ++i) {
    const char c = i < text.size() ? text[i] : ',';
    if (quoted && i < text.size()) {
      quoted = c != '"';
      continue;
    }
    if (c == '"') quoted = true;
    if (c == '(') ++depth;
    if (c == ')' && depth > 0) --depth;
    if (c == ',' && (depth == 0 || i == text.size())) {
      items.push_back(text.substr(start, i - start));
      start = i + 1;
    }
  }
  for (size_t i = 0; i < items.size(); ++i) {
    if (TrimBlanks(items[i]).empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("measure ", i + 1, " of ", items.size(), " is empty"));
    }
    GPUJOIN_ASSIGN_OR_RETURN(QueryMeasure m, ParseMeasure(items[i]));
    out.push_back(std::move(m));
  }
  return out;
}

// ---------------------------------------------------------------- plan

QueryPlan& QueryPlan::Add(QueryStep step) {
  steps_.push_back(std::move(step));
  return *this;
}

QueryPlan& QueryPlan::Lookup(QueryLookup step) { return Add(std::move(step)); }

QueryPlan& QueryPlan::Lookup(std::string index, std::vector<std::string> key,
                             std::vector<std::string> select, JoinKind kind) {
  QueryLookup l;
  l.index = std::move(index);
  l.key = std::move(key);
  l.select = std::move(select);
  l.kind = kind;
  return Add(std::move(l));
}

QueryPlan& QueryPlan::Filter(std::string where) { return Add(QueryFilter{std::move(where)}); }

QueryPlan& QueryPlan::Aggregate(std::vector<std::string> group_by,
                                std::vector<QueryMeasure> measures) {
  return Add(QueryAggregate{std::move(group_by), std::move(measures)});
}

QueryPlan& QueryPlan::Project(std::vector<QueryProjectColumn> columns) {
  return Add(QueryProject{std::move(columns)});
}

QueryPlan& QueryPlan::Limit(uint64_t rows) { return Add(QueryLimit{rows}); }

bool QueryPlan::has_aggregate() const {
  return std::any_of(steps_.begin(), steps_.end(),
                     [](const QueryStep& s) { return std::holds_alternative<QueryAggregate>(s); });
}

std::string_view QueryStepKind(const QueryStep& step) {
  struct Kind {
    std::string_view operator()(const QueryLookup&) const { return "lookup"; }
    std::string_view operator()(const QueryFilter&) const { return "filter"; }
    std::string_view operator()(const QueryAggregate&) const { return "aggregate"; }
    std::string_view operator()(const QueryProject&) const { return "project"; }
    std::string_view operator()(const QueryLimit&) const { return "limit"; }
  };
  return std::visit(Kind{}, step);
}

// ---------------------------------------------------------------- batches

absl::Status CheckQueryBatch(const QueryBatch& b, std::string_view what) {
  const std::string w(what);
  if (b.columns.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(w, " has no columns (a batch is named columns of one length)"));
  }
  std::set<std::string_view> names;
  const uint64_t rows = b.columns[0].length;
  for (size_t i = 0; i < b.columns.size(); ++i) {
    const ColumnView& v = b.columns[i];
    const std::string col = absl::StrCat(w, " column ", i, " ('", std::string(v.name), "')");
    if (v.name.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(w, " column ", i, " has no name (the plan's steps name the columns)"));
    }
    if (!names.insert(v.name).second) {
      return absl::InvalidArgumentError(absl::StrCat(col, ": the name is given twice"));
    }
    if (v.length != rows) {
      return absl::InvalidArgumentError(
          absl::StrCat(col, " has ", v.length, " rows but column 0 ('",
                       std::string(b.columns[0].name), "') has ", rows));
    }
    GPUJOIN_RETURN_IF_ERROR(CheckColumnView(v, col));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<QueryBatchRange>> PlanQueryBatches(std::span<const ColumnView> columns,
                                                              size_t max_rows, uint64_t max_bytes) {
  if (max_rows == 0) return absl::InvalidArgumentError("max_rows must be positive");
  const uint64_t rows = columns.empty() ? 0 : columns[0].length;
  // An upper bound on the bytes rows [pos, pos + n) of every column add to a request.
  auto bytes = [&](uint64_t pos, uint64_t n) {
    uint64_t b = 0;
    for (const ColumnView& c : columns) b += detail::EncodedColumnBytes(c.Slice(pos, n));
    return b;
  };
  std::vector<QueryBatchRange> out;
  if (rows == 0) {
    out.push_back(QueryBatchRange{0, 0});
    return out;
  }
  for (uint64_t pos = 0; pos < rows;) {
    // The most rows from `pos` that fit (bytes grows with n).
    uint64_t lo = 0, hi = std::min<uint64_t>(max_rows, rows - pos);
    while (lo < hi) {
      const uint64_t mid = lo + (hi - lo + 1) / 2;
      if (bytes(pos, mid) <= max_bytes) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
    if (lo == 0) {
      return absl::InvalidArgumentError(absl::StrCat("input row ", pos, " needs ", bytes(pos, 1),
                                                     " bytes, more than a Query request holds (",
                                                     max_bytes, ", from the max message size)"));
    }
    out.push_back(QueryBatchRange{pos, pos + lo});
    pos += lo;
  }
  return out;
}

// ---------------------------------------------------------------- limits

QueryLimitTracker::QueryLimitTracker(const QueryPlan& plan) {
  // An aggregate plan's limit counts groups, which only the end of the stream gives.
  if (plan.has_aggregate()) return;
  for (size_t i = 0; i < plan.steps().size(); ++i) {
    if (const auto* l = std::get_if<QueryLimit>(&plan.steps()[i])) {
      limits_.push_back(Limit{static_cast<uint32_t>(i), l->rows});
    }
  }
  done_ = std::any_of(limits_.begin(), limits_.end(), [](const Limit& l) { return l.rows == 0; });
}

void QueryLimitTracker::Add(const std::vector<QueryStepStatistics>& steps) {
  for (const QueryStepStatistics& s : steps) {
    for (Limit& l : limits_) {
      if (l.step != s.step) continue;
      l.passed += s.rows_out;
      if (l.passed >= l.rows) done_ = true;
    }
  }
}

}  // namespace gpujoin::client
