// The model of fuzz_query (docs/operations.md, "Fuzzing"): Query plans over
// the query fixture's indexes (fuzz_support.hpp) as docs/api.md, "Query: plans
// in one round trip", describes them, written apart from the server: the rows
// each step keeps of a batch (lookups of every join kind and their found
// column, filters with SQL's three-valued logic, projections, the stream-wide
// limit, an aggregate's first-seen groups), and the filter texts it renders
// from expression trees.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fuzz_support.hpp"
#include "gpujoin/v1/gpujoin.pb.h"
#include "mutate_model.hpp"

namespace gpujoin::fuzz::query_model {

/// A named column of cells (mutate_model.hpp: little-endian bytes, BOOL "\0" or
/// "\1", nullopt for null).
struct ModelColumn {
  std::string name;
  v1::ColumnType type = v1::COLUMN_TYPE_UNSPECIFIED;
  std::vector<Cell> cells;
};
using ModelTable = std::vector<ModelColumn>;

/// Rows of a table (its first column's cells; 0 without columns).
size_t Rows(const ModelTable& t);
/// The column named `name`, or nullptr.
const ModelColumn* Find(const ModelTable& t, const std::string& name);

/// A literal of a filter: its kind, value and text.
struct Literal {
  enum Kind { kInt, kFloat, kString, kBool } kind = kInt;
  __int128 i = 0;
  double f = 0;
  std::string s;
  bool b = false;
  std::string text;
};

/// A filter expression tree.
struct Expr {
  enum Kind { kCmp, kIsNull, kIn, kAnd, kOr, kNot } kind = kCmp;
  std::string column;
  std::string op;  ///< kCmp: = == != <> < <= > >=
  bool negated = false;
  std::vector<Literal> literals;  ///< kCmp: one; kIn: one or more
  std::unique_ptr<Expr> a, b;
};

/// Whether a literal of `kind` may be compared with a column of `type`
/// (integers and floats with either number, strings with strings, BOOL with
/// true/false).
bool Comparable(v1::ColumnType type, Literal::Kind kind);

/// SQL's value of `e` for row `row`: true, false or nullopt (null).
std::optional<bool> Evaluate(const Expr& e, const ModelTable& t, size_t row);

/// The text of `e` by the grammar of docs/api.md (columns quoted where they
/// must be).
std::string Render(const Expr& e);

/// One step of a plan the model knows how to run.
struct Step {
  enum Kind { kLookup, kFilter, kProject, kLimit, kAggregate } kind = kLookup;
  // kLookup
  std::string index;
  std::vector<std::string> key;
  v1::JoinKind join = v1::JOIN_KIND_INNER;
  std::string found;  ///< the found column's name
  // kFilter
  std::shared_ptr<Expr> where;
  // kProject: the kept columns (renamed to themselves)
  std::vector<std::string> columns;
  // kLimit
  uint64_t rows = 0;
  // kAggregate: grouped by `columns` (zero or one), measure count()
};

/// What a step did to a batch.
struct StepRows {
  uint64_t rows_in = 0;
  uint64_t rows_out = 0;
  /// Lookups: the input rows whose key was found, and whose was missing
  /// (found + missing = rows_in).
  uint64_t found = 0;
  uint64_t missing = 0;
};

/// A stream of one plan: the rows each batch keeps, step by step, and the
/// groups of an aggregate plan.
class Stream {
 public:
  Stream(const QueryFixture* fixture, std::vector<Step> steps)
      : fixture_(fixture), steps_(std::move(steps)) {
    for (const Step& s : steps_) limit_left_.push_back(s.rows);
  }

  /// The position of the aggregate step, or -1.
  int aggregate() const;

  /// Runs `batch` through the steps (an aggregate plan: up to and into the
  /// aggregate); returns the rows it ends with and each step's rows.
  ModelTable Batch(ModelTable batch, std::vector<StepRows>* steps);

  /// The groups so far with the steps after the aggregate run on them: the
  /// rows of the answer and the statistics of the aggregate and later steps.
  size_t Groups(std::vector<StepRows>* steps);

 private:
  ModelTable Run(size_t first, size_t last, ModelTable t, bool groups_answer,
                 std::vector<StepRows>* steps);
  ModelTable Lookup(const Step& s, const ModelTable& t, StepRows* rows) const;
  /// Matches of one row's key in `index` (0: missing).
  size_t Matches(const std::string& index, const std::vector<const ModelColumn*>& key,
                 size_t row) const;

  const QueryFixture* fixture_;
  std::vector<Step> steps_;
  std::vector<uint64_t> limit_left_;
  std::vector<std::vector<Cell>> groups_;  ///< group keys in first-seen order
  ModelColumn group_column_;               ///< the group-by column's name and type
  uint64_t aggregate_rows_ = 0;
};

}  // namespace gpujoin::fuzz::query_model
