// Fuzz target: a Query stream (server/src/ops/query.cpp) on the CPU backend,
// each message run as the stream reactor runs it (QueryTraits: Process, the
// in-band error of a bad batch, Seal into wire messages, the end-of-stream
// answer of an aggregate plan), against the query fixture's indexes (uint32,
// an overflowed uint32, uint64, keep_all, and the key schemas "s", "c", "cm";
// fuzz_support.hpp) and the row-count model of query_model.hpp.
//
// Input: frames (SplitFrames). Frame 0 is the plan: a step count, then per step
// an opcode and its parameters (lookups of every join kind on any fixture index
// or an unknown one, keyed by a fitting or a wrong column; filters from an
// expression tree over the current columns, sometimes comparing with a literal
// of the wrong kind or naming no column; raw filter text; limits; projections,
// possibly empty; an aggregate grouped by one column or none, counting rows,
// possibly by a float or twice). Frames 1.. are batches of the input columns
// k INT64, u UINT32, w UINT64, i INT32, s STRING, bin BINARY, f FLOAT64,
// b BOOL, with values drawn from the fixture's keys, nulls, negative and
// out-of-range words and strings that differ in one byte; a batch after the
// first may drop, rename or retype a column or be ragged; any may ask for a flush.
// Checked for every message:
//  - nothing crashes (ASan, UBSan), and every answer is a wire message with the
//    message's batch_id; an error is in-band with a code and a message;
//  - a plan the model refuses is refused with the model's code (NOT_FOUND for
//    an unknown index, RESOURCE_EXHAUSTED past 64 steps, else
//    INVALID_ARGUMENT naming "steps[<its step>]"), on every message;
//  - a bad batch is INVALID_ARGUMENT and changes nothing: later batches answer
//    as if it had not been sent;
//  - otherwise each answer's rows (the parts of a continued answer joined, in
//    order) and each step's rows_in, rows_out, found and missing keys are the model's:
//    lookups expand, keep or drop rows by their kind and the index's matches
//    (found + missing = rows_in, also for lookups the server runs together),
//    filters keep the rows SQL's three-valued logic makes true, limits count
//    over the stream, an aggregate plan answers a batch with no rows, a flush
//    and the end of the stream (`final` on each message, batch_id one past the last) with its
//    groups in first-seen order.
// A plan with raw filter text is only checked for the first two points.
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "fuzz_support.hpp"
#include "mutate_batches.hpp"
#include "query_model.hpp"
#include "rpc/rpc_traits.hpp"

namespace gpujoin::fuzz {
namespace {

using namespace query_model;
using mutate_input::Reader;

constexpr size_t kMaxFrames = 12;
constexpr size_t kMaxRows = 24;

// The input columns of every batch, in order.
struct InputColumn {
  const char* name;
  v1::ColumnType type;
};
constexpr InputColumn kInput[] = {{"k", v1::COLUMN_TYPE_INT64},   {"u", v1::COLUMN_TYPE_UINT32},
                                  {"w", v1::COLUMN_TYPE_UINT64},  {"i", v1::COLUMN_TYPE_INT32},
                                  {"s", v1::COLUMN_TYPE_STRING},  {"bin", v1::COLUMN_TYPE_BINARY},
                                  {"f", v1::COLUMN_TYPE_FLOAT64}, {"b", v1::COLUMN_TYPE_BOOL}};

bool IsInt(v1::ColumnType t) {
  return t == v1::COLUMN_TYPE_INT32 || t == v1::COLUMN_TYPE_INT64 || t == v1::COLUMN_TYPE_UINT32 ||
         t == v1::COLUMN_TYPE_UINT64;
}

template <typename T>
std::string Le(T v) {
  return std::string(reinterpret_cast<const char*>(&v), sizeof v);
}

// Integers the cells and literals draw from: fixture keys, their neighbours,
// negatives and words past 32 bits.
constexpr __int128 kInts[] = {0,
                              1,
                              5,
                              31,
                              1000,
                              1007,
                              32,
                              -1,
                              -5,
                              0xfffffffe,
                              0xffffffff,
                              __int128{1} << 32,
                              (__int128{1} << 32) + 5,
                              7,
                              2};
const char* const kStrings[] = {"", "a", "A", "abc", "sku-1000", "sku-1001", "x", "xy", "o'k"};

Cell IntCell(v1::ColumnType t, __int128 v) {
  switch (t) {
    case v1::COLUMN_TYPE_INT32:
      return Le(static_cast<int32_t>(v));
    case v1::COLUMN_TYPE_UINT32:
      return Le(static_cast<uint32_t>(v));
    case v1::COLUMN_TYPE_INT64:
      return Le(static_cast<int64_t>(v));
    default:
      return Le(static_cast<uint64_t>(v));
  }
}

Cell MakeCell(v1::ColumnType t, uint8_t code) {
  if (code % 8 == 7) return std::nullopt;
  const uint8_t c = code / 8;
  if (IsInt(t)) return IntCell(t, kInts[c % std::size(kInts)]);
  switch (t) {
    case v1::COLUMN_TYPE_FLOAT64: {
      const double fs[] = {0.5,
                           -1.25,
                           2.0,
                           1000.0,
                           std::numeric_limits<double>::quiet_NaN(),
                           std::numeric_limits<double>::infinity(),
                           -0.0};
      return Le(fs[c % std::size(fs)]);
    }
    case v1::COLUMN_TYPE_BOOL:
      return std::string(1, static_cast<char>(c & 1));
    case v1::COLUMN_TYPE_BINARY: {
      const std::string bs[] = {std::string(), std::string("\xff\0", 2), std::string("\xc3"),
                                std::string("a")};
      return bs[c % std::size(bs)];
    }
    default:
      return std::string(kStrings[c % std::size(kStrings)]);
  }
}

Literal MakeLiteral(v1::ColumnType t, uint8_t code, bool wrong_kind) {
  Literal l;
  const bool numeric = IsInt(t) || t == v1::COLUMN_TYPE_FLOAT64;
  Literal::Kind kind = numeric                     ? (code & 1 ? Literal::kFloat : Literal::kInt)
                       : t == v1::COLUMN_TYPE_BOOL ? Literal::kBool
                                                   : Literal::kString;
  if (wrong_kind) kind = kind == Literal::kString ? Literal::kInt : Literal::kString;
  l.kind = kind;
  const uint8_t c = code / 2;
  switch (kind) {
    case Literal::kInt:
      l.i = kInts[c % std::size(kInts)];
      l.text = absl::StrCat(static_cast<int64_t>(l.i));
      break;
    case Literal::kFloat: {
      const double fs[] = {0.5, -1.25, 2.0, 1000.0, 31.5};
      const char* texts[] = {"0.5", "-1.25", "2.0", "1000.0", "31.5"};
      l.f = fs[c % 5];
      l.text = texts[c % 5];
      break;
    }
    case Literal::kBool:
      l.b = c & 1;
      l.text = l.b ? "true" : "FALSE";
      break;
    case Literal::kString: {
      l.s = kStrings[c % std::size(kStrings)];
      l.text = "'";
      for (char ch : l.s) l.text += ch == '\'' ? std::string("''") : std::string(1, ch);
      l.text += "'";
      break;
    }
  }
  return l;
}

// A plan read from frame 0, its model, and what the server must answer.
struct PlanInput {
  v1::Plan plan;
  std::vector<Step> steps;
  bool known = true;  // no raw filter text: the model predicts the rows
  absl::StatusCode error = absl::StatusCode::kOk;
  int error_step = -1;  // the step an INVALID_ARGUMENT must name (-1: none)
};

class PlanReader {
 public:
  PlanReader(Reader& in, const QueryFixture& fixture) : in_(in), fixture_(fixture) {
    for (const InputColumn& c : kInput) cols_.push_back({c.name, c.type});
  }

  PlanInput Read() {
    const size_t n = in_.Next() % 8;
    for (size_t i = 0; i < n && out_.error == absl::StatusCode::kOk; ++i) ReadStep(i);
    if (n == 0) Refuse(absl::StatusCode::kInvalidArgument, -1);  // a plan needs a step
    if (in_.Next() == 0xff) {                                    // past the limit of 64 steps
      out_ = PlanInput();
      for (int i = 0; i < 65; ++i) out_.plan.add_steps()->mutable_limit()->set_rows(5);
      out_.error = absl::StatusCode::kResourceExhausted;
    }
    return std::move(out_);
  }

 private:
  struct Col {
    std::string name;
    v1::ColumnType type;
  };

  void Refuse(absl::StatusCode code, int step) {
    out_.error = code;
    out_.error_step = code == absl::StatusCode::kInvalidArgument ? step : -1;
  }

  const Col* FindCol(const std::string& name) const {
    for (const Col& c : cols_) {
      if (c.name == name) return &c;
    }
    return nullptr;
  }

  void ReadStep(size_t i) {
    const int step = static_cast<int>(i);
    v1::PlanStep* p = out_.plan.add_steps();
    Step s;
    switch (in_.Next() % 6) {
      case 0: {  // lookup
        const char* const indexes[] = {"x", "tight", "x64", "xm", "s", "c", "cm", "nope"};
        s.kind = Step::kLookup;
        s.index = indexes[in_.Next() % std::size(indexes)];
        const uint8_t key_code = in_.Next();
        const auto [version, ref] = fixture_.Find(s.index);
        if (ref != nullptr) {
          std::vector<std::string> ints;
          for (const Col& c : cols_) {
            if (IsInt(c.type)) ints.push_back(c.name);
          }
          s.key = {key_code % 8 == 7 || ints.empty() ? std::string("s")
                                                     : ints[key_code % ints.size()]};
        } else if (s.index == "s") {
          s.key = {key_code % 8 == 7 ? "k" : "s"};
        } else if (s.index == "c") {
          s.key = key_code % 8 == 7 ? std::vector<std::string>{"k", "s"}
                                    : std::vector<std::string>{"k", "s", "i"};
        } else if (s.index == "cm") {
          s.key = key_code % 8 == 7 ? std::vector<std::string>{"u", "bin", "k"}
                                    : std::vector<std::string>{"u", "bin", "w"};
        } else {
          s.key = {"k"};
        }
        const uint8_t kind = in_.Next();
        s.join = static_cast<v1::JoinKind>(kind % 16 == 15 ? 9 : kind % 5);
        s.found = in_.Next() & 1 ? absl::StrCat("f", i) : s.index + ".found";
        v1::LookupStep& l = *p->mutable_lookup();
        l.set_index(s.index);
        for (const auto& k : s.key) l.add_key(k);
        l.set_kind(s.join);
        if (s.found != s.index + ".found") l.set_found_column(s.found);
        if (s.join == 0) s.join = v1::JOIN_KIND_INNER;
        // The checks: the index, its key columns (count, presence, types), the kind, the name.
        if (s.index == "nope") return Refuse(absl::StatusCode::kNotFound, step);
        bool key_ok = true;
        std::vector<v1::ColumnType> want;
        if (ref == nullptr) {
          want = fixture_.FindColumns(s.index).second->schema.types;
          key_ok = want.size() == s.key.size();
        }
        for (size_t c = 0; key_ok && c < s.key.size(); ++c) {
          const Col* col = FindCol(s.key[c]);
          key_ok = col != nullptr && (ref != nullptr ? IsInt(col->type) : col->type == want[c]);
        }
        if (!key_ok || s.join > 4 || FindCol(s.found) != nullptr) {
          return Refuse(absl::StatusCode::kInvalidArgument, step);
        }
        cols_.push_back({s.found, v1::COLUMN_TYPE_BOOL});
        break;
      }
      case 1:
      case 2: {  // filter from a tree
        s.kind = Step::kFilter;
        bool valid = true;
        s.where = std::shared_ptr<Expr>(ReadExpr(0, &valid).release());
        p->mutable_filter()->set_where(Render(*s.where));
        if (!valid) return Refuse(absl::StatusCode::kInvalidArgument, step);
        break;
      }
      case 3: {  // raw filter text, or a limit
        const uint8_t len = in_.Next();
        if (len & 1) {
          s.kind = Step::kLimit;
          s.rows = len / 2 % 9;
          p->mutable_limit()->set_rows(s.rows);
          break;
        }
        // Text from the grammar's own characters (a client cannot send text
        // that is not UTF-8: protobuf refuses to parse it).
        static constexpr char kAlphabet[] = "kusbinfw019.,()'\"=<>! -andortuefslINOT";
        std::string text;
        for (size_t j = 0; j < len / 2 % 24; ++j) {
          text += kAlphabet[in_.Next() % (sizeof kAlphabet - 1)];
        }
        p->mutable_filter()->set_where(text);
        out_.known = false;
        s.kind = Step::kFilter;
        break;
      }
      case 4: {  // project
        s.kind = Step::kProject;
        const uint8_t mask = in_.Next();
        std::vector<Col> kept;
        for (size_t c = 0; c < cols_.size(); ++c) {
          if (mask >> (c % 8) & 1) {
            kept.push_back(cols_[c]);
            s.columns.push_back(cols_[c].name);
            p->mutable_project()->add_columns()->set_column(cols_[c].name);
          }
        }
        if (kept.empty()) return Refuse(absl::StatusCode::kInvalidArgument, step);
        cols_ = std::move(kept);
        break;
      }
      default: {  // aggregate: count() by one column or none
        s.kind = Step::kAggregate;
        const uint8_t by = in_.Next();
        v1::AggregateStep& a = *p->mutable_aggregate();
        a.add_measures()->set_op(v1::AGGREGATE_OP_COUNT);
        std::vector<Col> out;
        if (by % (cols_.size() + 1) < cols_.size()) {
          const Col& g = cols_[by % (cols_.size() + 1)];
          s.columns.push_back(g.name);
          a.add_group_by(g.name);
          out.push_back(g);
          if (g.type == v1::COLUMN_TYPE_FLOAT64 || g.name == "count") {
            return Refuse(absl::StatusCode::kInvalidArgument, step);
          }
        }
        if (aggregated_) return Refuse(absl::StatusCode::kInvalidArgument, step);
        aggregated_ = true;
        out.push_back({"count", v1::COLUMN_TYPE_UINT64});
        cols_ = std::move(out);
        break;
      }
    }
    out_.steps.push_back(std::move(s));
  }

  std::unique_ptr<Expr> ReadExpr(int depth, bool* valid) {
    auto e = std::make_unique<Expr>();
    const uint8_t op = in_.Next();
    if (depth < 3 && op % 8 < 3) {
      e->kind = op % 8 == 0 ? Expr::kAnd : op % 8 == 1 ? Expr::kOr : Expr::kNot;
      e->a = ReadExpr(depth + 1, valid);
      if (e->kind != Expr::kNot) e->b = ReadExpr(depth + 1, valid);
      return e;
    }
    const uint8_t c = in_.Next();
    if (c == 0xff) {
      e->column = "zz";  // no such column
      *valid = false;
    } else {
      e->column = cols_[c % cols_.size()].name;
    }
    const v1::ColumnType type = c == 0xff ? v1::COLUMN_TYPE_INT64 : cols_[c % cols_.size()].type;
    const uint8_t lit = in_.Next();
    const bool wrong = lit == 0xff;  // a literal of another kind (not for `is null`)
    if (wrong && op % 8 != 3) *valid = false;
    if (op % 8 == 3) {
      e->kind = Expr::kIsNull;
      e->negated = op & 0x80;
    } else if (op % 8 == 4) {
      e->kind = Expr::kIn;
      e->negated = op & 0x80;
      for (int j = 0; j <= (op >> 4) % 3; ++j) {
        e->literals.push_back(MakeLiteral(type, in_.Next(), wrong));
      }
    } else {
      const char* const ops[] = {"=", "==", "!=", "<>", "<", "<=", ">", ">="};
      e->kind = Expr::kCmp;
      e->op = type == v1::COLUMN_TYPE_BOOL ? ops[(op >> 4) % 4] : ops[(op >> 4) % 8];
      e->literals.push_back(MakeLiteral(type, in_.Next(), wrong));
    }
    return e;
  }

  Reader& in_;
  const QueryFixture& fixture_;
  std::vector<Col> cols_;
  bool aggregated_ = false;
  PlanInput out_;
};

// One batch of the input columns from a frame, possibly with a defect.
struct BatchInput {
  v1::QueryRequest request;
  ModelTable table;
  bool bad = false;
};

// `defects`: whether the frame may spoil the batch (not the first: the plan is
// checked against it, and tests/python/test_query_errors.py covers a spoilt one).
BatchInput ReadBatch(Reader& in, uint64_t batch_id, bool defects) {
  BatchInput b;
  b.request.set_batch_id(batch_id);
  const uint8_t head = in.Next();
  const size_t rows = head % kMaxRows;
  b.request.set_flush(head & 0x80);
  for (const InputColumn& c : kInput) {
    ModelColumn col{c.name, c.type, {}};
    for (size_t r = 0; r < rows; ++r) col.cells.push_back(MakeCell(c.type, in.Next()));
    b.table.push_back(std::move(col));
  }
  for (const ModelColumn& c : b.table)
    *b.request.add_columns() = CellColumn(c.name, c.type, c.cells);
  const uint8_t defect = defects ? in.Next() : 0;
  const size_t victim = (defect >> 3) % std::size(kInput);
  switch (defect % 32) {
    case 1:  // a column less
      b.request.mutable_columns()->DeleteSubrange(static_cast<int>(victim), 1);
      b.bad = true;
      break;
    case 2:  // renamed
      b.request.mutable_columns(static_cast<int>(victim))->set_name("renamed");
      b.bad = true;
      break;
    case 3: {  // ragged: one column a row longer
      ModelColumn c = b.table[victim];
      c.cells.push_back(MakeCell(c.type, defect));
      *b.request.mutable_columns(static_cast<int>(victim)) = CellColumn(c.name, c.type, c.cells);
      b.bad = true;
      break;
    }
    case 4: {  // retyped (an integer column sent as the other width)
      v1::Column& c = *b.request.mutable_columns(0);  // k INT64 -> UINT64
      c.set_type(v1::COLUMN_TYPE_UINT64);
      b.bad = true;
      break;
    }
    default:
      break;
  }
  return b;
}

// A message's answer as the client reads it: its wire messages.
struct Wire {
  absl::Status status;
  std::vector<v1::QueryResponse> parts;
  uint64_t rows = 0;
};

class Target {
 public:
  void Run(const std::vector<std::string_view>& frames) {
    Reader plan_in(frames.empty() ? std::string_view() : frames[0]);
    PlanInput plan = PlanReader(plan_in, fixture_).Read();
    auto stream = std::make_shared<server::QueryStream>();
    std::optional<Stream> model;
    if (plan.error == absl::StatusCode::kOk) model.emplace(&fixture_, plan.steps);
    const bool aggregates = model && model->aggregate() >= 0;
    uint64_t last_batch_id = 0;
    for (size_t f = 1; f < std::max<size_t>(frames.size(), 2); ++f) {
      Reader in(f < frames.size() ? frames[f] : std::string_view());
      BatchInput b = ReadBatch(in, 100 + f, f > 1);
      if (f == 1) *b.request.mutable_plan() = plan.plan;
      last_batch_id = b.request.batch_id();
      const std::string what =
          absl::StrCat("message ", f, " (plan ", plan.plan.ShortDebugString(), ")");
      Wire got = Send(stream, b.request, false, what);
      if (!plan.known) continue;  // raw text may be refused before the model's error
      if (plan.error != absl::StatusCode::kOk) {
        CheckPlanError(got, plan, what);
        continue;
      }
      if (b.bad) {
        FUZZ_CHECK(got.status.code() == absl::StatusCode::kInvalidArgument,
                   what + ": a bad batch answered " + Describe(got.status));
        continue;
      }
      FUZZ_CHECK(got.status.ok(), what + ": " + Describe(got.status));
      std::vector<StepRows> want_steps;
      ModelTable rows = model->Batch(b.table, &want_steps);
      if (!aggregates) {
        CheckAnswer(got, Rows(rows), want_steps, 0, false, what);
      } else if (b.request.flush()) {
        std::vector<StepRows> groups;
        const size_t n = model->Groups(&groups);
        CheckAnswer(got, n, {}, 0, true, what + " (flush)");
      } else {
        CheckAnswer(got, 0, want_steps, 0, false, what);
      }
    }
    FUZZ_CHECK(stream->answers_end.load() == aggregates || !plan.known,
               "answers_end is not whether the plan aggregates");
    if (!stream->answers_end.load()) return;
    const std::string what = "the end of the stream";
    Wire got = Send(stream, v1::QueryRequest(), true, what);
    for (const v1::QueryResponse& m : got.parts) {
      FUZZ_CHECK(m.final() && m.batch_id() == last_batch_id + 1,
                 what + ": a message not final, or its batch_id not one past the last");
    }
    if (!plan.known) return;
    FUZZ_CHECK(got.status.ok(), what + ": " + Describe(got.status));
    std::vector<StepRows> want_steps;
    const size_t n = model->Groups(&want_steps);
    CheckAnswer(got, n, want_steps, model->aggregate(), true, what);
  }

 private:
  // Runs one message as the reactor does and reads back its wire messages.
  Wire Send(const std::shared_ptr<server::QueryStream>& stream, const v1::QueryRequest& request,
            bool end, const std::string& what) {
    using server::detail::QueryTraits;
    server::detail::QueryWireRequest r;
    r.message = request;
    r.end = end;
    r.stream = stream;
    server::QueryAnswer answer;
    Wire out;
    out.status = QueryTraits::Process(fixture_.ops(), r, &answer, nullptr);
    if (!out.status.ok()) {
      FUZZ_CHECK(!out.status.message().empty(), what + ": an error without a message");
      QueryTraits::SetBatchError(&answer, out.status);
    }
    do {
      grpc::ByteBuffer buffer;
      grpc::ByteBuffer* wire = QueryTraits::Seal(r, &answer, &buffer);
      v1::QueryResponse m;
      FUZZ_CHECK(grpc::SerializationTraits<v1::QueryResponse>::Deserialize(wire, &m).ok(),
                 what + ": a sealed answer does not parse");
      FUZZ_CHECK(end || m.batch_id() == request.batch_id(), what + ": batch_id not echoed");
      FUZZ_CHECK(m.first_row() == out.rows, what + ": parts out of order");
      for (const v1::Column& c : m.columns()) {
        FUZZ_CHECK(c.length() == m.rows(), what + ": a column's length is not the part's rows");
      }
      out.rows += m.rows();
      if (!out.status.ok()) {
        FUZZ_CHECK(m.has_error() && m.error().code() == static_cast<int>(out.status.code()) &&
                       m.columns_size() == 0,
                   what + ": the error is not in-band");
      }
      out.parts.push_back(std::move(m));
    } while (QueryTraits::More(answer));
    FUZZ_CHECK(!out.parts.back().more(), what + ": the last part has `more` set");
    return out;
  }

  static void CheckPlanError(const Wire& got, const PlanInput& plan, const std::string& what) {
    FUZZ_CHECK(got.status.code() == plan.error,
               absl::StrCat(what, ": want code ", static_cast<int>(plan.error), ", got ",
                            Describe(got.status)));
    if (plan.error_step >= 0) {
      FUZZ_CHECK(MessageHas(got.status, absl::StrCat("steps[", plan.error_step, "]")),
                 absl::StrCat(what, ": the error does not name steps[", plan.error_step,
                              "]: ", Describe(got.status)));
    }
  }

  // `groups`: the answer holds an aggregate's groups (its statistics start
  // at the aggregate, `first_step`).
  static void CheckAnswer(const Wire& got, size_t rows, const std::vector<StepRows>& steps,
                          size_t first_step, bool groups, const std::string& what) {
    FUZZ_CHECK(got.rows == rows, absl::StrCat(what, ": ", got.rows, " rows, the model has ", rows));
    if (steps.empty()) return;
    const v1::QueryResponse& head = got.parts.front();
    FUZZ_CHECK(static_cast<size_t>(head.steps_size()) == steps.size(),
               absl::StrCat(what, ": ", head.steps_size(), " step statistics, the model has ",
                            steps.size()));
    for (size_t i = 0; i < steps.size(); ++i) {
      const v1::StepStatistics& s = head.steps(static_cast<int>(i));
      // The aggregate's rows_in over the stream and its rows_out in a batch's
      // answer are left to tests/python/test_query_random.py.
      const bool aggregate = s.kind() == "aggregate";
      FUZZ_CHECK(s.step() == first_step + i && (aggregate || s.rows_in() == steps[i].rows_in) &&
                     (aggregate && !groups ? s.rows_in() == steps[i].rows_in
                                           : s.rows_out() == steps[i].rows_out) &&
                     (s.kind() != "lookup" || (s.statistics().found() == steps[i].found &&
                                               s.statistics().missing() == steps[i].missing)),
                 absl::StrCat(what, ": step ", s.step(), " (", s.kind(), ") rows ", s.rows_in(),
                              " -> ", s.rows_out(), " found ", s.statistics().found(), " missing ",
                              s.statistics().missing(), "; the model has ", steps[i].rows_in,
                              " -> ", steps[i].rows_out, " found ", steps[i].found, " missing ",
                              steps[i].rows_in - steps[i].found));
    }
  }

  QueryFixture fixture_;
};

}  // namespace
}  // namespace gpujoin::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpujoin::fuzz;
  static Target* target = new Target();
  target->Run(SplitFrames(AsView(data, size), kMaxFrames));
  return 0;
}
