#include "query_model.hpp"

#include <algorithm>
#include <cstring>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace gpujoin::fuzz::query_model {
namespace {

bool IsInt(v1::ColumnType t) {
  return t == v1::COLUMN_TYPE_INT32 || t == v1::COLUMN_TYPE_INT64 || t == v1::COLUMN_TYPE_UINT32 ||
         t == v1::COLUMN_TYPE_UINT64;
}
bool IsFloat(v1::ColumnType t) {
  return t == v1::COLUMN_TYPE_FLOAT32 || t == v1::COLUMN_TYPE_FLOAT64;
}

template <typename T>
T Load(const std::string& bytes) {
  T v{};
  std::memcpy(&v, bytes.data(), std::min(sizeof v, bytes.size()));
  return v;
}

/// The integer a cell of integer type `t` holds.
__int128 IntOf(v1::ColumnType t, const std::string& bytes) {
  switch (t) {
    case v1::COLUMN_TYPE_INT32:
      return Load<int32_t>(bytes);
    case v1::COLUMN_TYPE_INT64:
      return Load<int64_t>(bytes);
    case v1::COLUMN_TYPE_UINT32:
      return Load<uint32_t>(bytes);
    default:
      return Load<uint64_t>(bytes);
  }
}

double FloatOf(v1::ColumnType t, const std::string& bytes) {
  return t == v1::COLUMN_TYPE_FLOAT32 ? Load<float>(bytes) : Load<double>(bytes);
}

template <typename T>
bool Apply(const std::string& op, const T& a, const T& b) {
  if (op == "=" || op == "==") return a == b;
  if (op == "!=" || op == "<>") return a != b;
  if (op == "<") return a < b;
  if (op == "<=") return a <= b;
  if (op == ">") return a > b;
  return a >= b;
}

/// SQL comparison of a non-null cell of type `t` with literal `l`.
bool Compare(v1::ColumnType t, const std::string& cell, const std::string& op, const Literal& l) {
  if (IsInt(t) && l.kind == Literal::kInt) return Apply(op, IntOf(t, cell), l.i);
  if (IsInt(t) || IsFloat(t)) {
    const double v = IsInt(t) ? static_cast<double>(IntOf(t, cell)) : FloatOf(t, cell);
    const double lit = l.kind == Literal::kInt ? static_cast<double>(l.i) : l.f;
    return Apply(op, v, lit);  // NaN: false except != and <>
  }
  if (t == v1::COLUMN_TYPE_BOOL) return Apply(op, cell != std::string(1, '\0'), l.b);
  return Apply(op, cell, l.s);  // bytewise: char_traits<char> compares as unsigned char
}

bool Bare(const std::string& name) {
  static const char* const kKeywords[] = {"and", "or", "not", "is", "null", "in", "true", "false"};
  if (name.empty() || !(absl::ascii_isalpha(name[0]) || name[0] == '_')) return false;
  for (char c : name) {
    if (!(absl::ascii_isalnum(c) || c == '_' || c == '.')) return false;
  }
  for (const char* k : kKeywords) {
    if (absl::AsciiStrToLower(name) == k) return false;
  }
  return true;
}

std::string ColumnText(const std::string& name) {
  if (Bare(name)) return name;
  std::string out = "\"";
  for (char c : name) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

ModelTable Take(const ModelTable& t, const std::vector<size_t>& rows) {
  ModelTable out;
  for (const ModelColumn& c : t) {
    ModelColumn o{c.name, c.type, {}};
    for (size_t r : rows) o.cells.push_back(c.cells[r]);
    out.push_back(std::move(o));
  }
  return out;
}

}  // namespace

size_t Rows(const ModelTable& t) { return t.empty() ? 0 : t[0].cells.size(); }

const ModelColumn* Find(const ModelTable& t, const std::string& name) {
  for (const ModelColumn& c : t) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

bool Comparable(v1::ColumnType type, Literal::Kind kind) {
  if (IsInt(type) || IsFloat(type)) return kind == Literal::kInt || kind == Literal::kFloat;
  if (type == v1::COLUMN_TYPE_BOOL) return kind == Literal::kBool;
  return kind == Literal::kString;
}

std::optional<bool> Evaluate(const Expr& e, const ModelTable& t, size_t row) {
  switch (e.kind) {
    case Expr::kCmp:
    case Expr::kIn: {
      const ModelColumn* c = Find(t, e.column);
      const Cell& cell = c->cells[row];
      if (!cell) return std::nullopt;
      if (e.kind == Expr::kCmp) return Compare(c->type, *cell, e.op, e.literals[0]);
      bool hit = false;
      for (const Literal& l : e.literals) hit = hit || Compare(c->type, *cell, "=", l);
      return hit != e.negated;
    }
    case Expr::kIsNull: {
      const bool null = !Find(t, e.column)->cells[row].has_value();
      return null != e.negated;
    }
    case Expr::kNot: {
      const auto a = Evaluate(*e.a, t, row);
      if (!a) return std::nullopt;
      return !*a;
    }
    case Expr::kAnd:
    case Expr::kOr: {
      const auto a = Evaluate(*e.a, t, row);
      const auto b = Evaluate(*e.b, t, row);
      const bool dominant = e.kind == Expr::kOr;  // true decides an or, false an and
      if ((a && *a == dominant) || (b && *b == dominant)) return dominant;
      if (!a || !b) return std::nullopt;
      return !dominant;
    }
  }
  return std::nullopt;
}

std::string Render(const Expr& e) {
  switch (e.kind) {
    case Expr::kCmp:
      return absl::StrCat(ColumnText(e.column), " ", e.op, " ", e.literals[0].text);
    case Expr::kIsNull:
      return absl::StrCat(ColumnText(e.column), e.negated ? " is not null" : " IS NULL");
    case Expr::kIn: {
      std::string items;
      for (const Literal& l : e.literals)
        absl::StrAppend(&items, items.empty() ? "" : ", ", l.text);
      return absl::StrCat(ColumnText(e.column), e.negated ? " not in (" : " In (", items, ")");
    }
    case Expr::kNot:
      return absl::StrCat("not (", Render(*e.a), ")");
    case Expr::kAnd:
    case Expr::kOr:
      return absl::StrCat("(", Render(*e.a), e.kind == Expr::kAnd ? ") AND (" : ") or (",
                          Render(*e.b), ")");
  }
  return "";
}

int Stream::aggregate() const {
  for (size_t i = 0; i < steps_.size(); ++i) {
    if (steps_[i].kind == Step::kAggregate) return static_cast<int>(i);
  }
  return -1;
}

size_t Stream::Matches(const std::string& index, const std::vector<const ModelColumn*>& key,
                       size_t row) const {
  for (const ModelColumn* c : key) {
    if (!c->cells[row]) return 0;
  }
  const auto [version, ref] = fixture_->Find(index);
  if (ref != nullptr) {
    // A word: a negative value, or one the key type cannot hold, is missing.
    const __int128 v = IntOf(key[0]->type, *key[0]->cells[row]);
    const __int128 top = ref->key_type == engine::KeyType::kUint32 ? 0xffffffffu : ~uint64_t{0};
    if (v < 0 || v > top || static_cast<uint64_t>(v) == ref->empty_key()) return 0;
    const ReferenceIndex::Entry* e = ref->Find(static_cast<uint64_t>(v), 0);
    return e == nullptr ? 0 : ref->Matches(static_cast<uint64_t>(v), *e).size();
  }
  const auto [cversion, cref] = fixture_->FindColumns(index);
  KeyTuple tuple;
  for (const ModelColumn* c : key) tuple.push_back(*c->cells[row]);
  const auto it = cref->groups.find(tuple);
  if (it == cref->groups.end()) return 0;
  return cref->keep_all ? it->second.size() : 1;
}

ModelTable Stream::Lookup(const Step& s, const ModelTable& t, StepRows* rows) const {
  std::vector<const ModelColumn*> key;
  for (const std::string& k : s.key) key.push_back(Find(t, k));
  std::vector<size_t> take;
  std::vector<bool> found;
  for (size_t r = 0; r < Rows(t); ++r) {
    const size_t m = Matches(s.index, key, r);
    rows->found += m > 0;
    rows->missing += m == 0;
    size_t copies = 0;
    switch (s.join) {
      case v1::JOIN_KIND_LEFT_OUTER:
        copies = std::max<size_t>(m, 1);
        break;
      case v1::JOIN_KIND_LEFT_SEMI:
        copies = m > 0;
        break;
      case v1::JOIN_KIND_LEFT_ANTI:
        copies = m == 0;
        break;
      default:
        copies = m;
    }
    for (size_t i = 0; i < copies; ++i) {
      take.push_back(r);
      found.push_back(m > 0);
    }
  }
  ModelTable out = Take(t, take);
  ModelColumn f{s.found, v1::COLUMN_TYPE_BOOL, {}};
  for (bool b : found) f.cells.push_back(std::string(1, b ? '\1' : '\0'));
  out.push_back(std::move(f));
  return out;
}

ModelTable Stream::Run(size_t first, size_t last, ModelTable t, bool groups_answer,
                       std::vector<StepRows>* steps) {
  for (size_t i = first; i < last; ++i) {
    const Step& s = steps_[i];
    StepRows st;
    st.rows_in = Rows(t);
    switch (s.kind) {
      case Step::kLookup:
        t = Lookup(s, t, &st);
        break;
      case Step::kFilter: {
        std::vector<size_t> keep;
        for (size_t r = 0; r < Rows(t); ++r) {
          if (Evaluate(*s.where, t, r) == std::optional<bool>(true)) keep.push_back(r);
        }
        t = Take(t, keep);
        break;
      }
      case Step::kProject: {
        ModelTable out;
        for (const std::string& c : s.columns) out.push_back(*Find(t, c));
        t = std::move(out);
        break;
      }
      case Step::kLimit: {
        uint64_t n = std::min<uint64_t>(Rows(t), groups_answer ? s.rows : limit_left_[i]);
        if (!groups_answer) limit_left_[i] -= n;
        std::vector<size_t> keep;
        for (size_t r = 0; r < n; ++r) keep.push_back(r);
        t = Take(t, keep);
        break;
      }
      case Step::kAggregate:
        break;  // Batch and Groups run it
    }
    st.rows_out = Rows(t);
    steps->push_back(st);
  }
  return t;
}

ModelTable Stream::Batch(ModelTable batch, std::vector<StepRows>* steps) {
  const int agg = aggregate();
  if (agg < 0) return Run(0, steps_.size(), std::move(batch), false, steps);
  ModelTable t = Run(0, agg, std::move(batch), false, steps);
  const Step& a = steps_[agg];
  StepRows st;
  st.rows_in = Rows(t);
  aggregate_rows_ += Rows(t);
  if (!a.columns.empty()) {
    const ModelColumn* g = Find(t, a.columns[0]);
    group_column_ = ModelColumn{g->name, g->type, {}};
  }
  const ModelColumn* by = a.columns.empty() ? nullptr : Find(t, a.columns[0]);
  for (size_t r = 0; r < Rows(t); ++r) {
    // Each group is its key cell (when grouped) and its count, in first-seen order.
    size_t g = 0;
    while (g < groups_.size() && by != nullptr && groups_[g][0] != by->cells[r]) ++g;
    if (g == groups_.size()) {
      groups_.emplace_back();
      if (by != nullptr) groups_.back().push_back(by->cells[r]);
      groups_.back().push_back(std::string(8, '\0'));
    }
    Cell& count = groups_[g].back();
    const uint64_t n = Load<uint64_t>(*count) + 1;
    count = std::string(reinterpret_cast<const char*>(&n), 8);
  }
  steps->push_back(st);
  return {};
}

size_t Stream::Groups(std::vector<StepRows>* steps) {
  const int agg = aggregate();
  const Step& a = steps_[agg];
  ModelTable t;
  ModelColumn count{"count", v1::COLUMN_TYPE_UINT64, {}};
  if (!a.columns.empty()) {
    // Named by the step even when no batch reached the aggregate (then it has
    // no rows, and its type is never looked at).
    ModelColumn g = group_column_;
    g.name = a.columns[0];
    g.cells.clear();
    for (const auto& key : groups_) g.cells.push_back(key[0]);
    t.push_back(std::move(g));
  }
  for (const auto& key : groups_) count.cells.push_back(key.back());
  if (a.columns.empty() && groups_.empty()) count.cells.push_back(std::string(8, '\0'));
  t.push_back(std::move(count));
  steps->push_back(StepRows{aggregate_rows_, Rows(t), 0});
  t = Run(agg + 1, steps_.size(), std::move(t), true, steps);
  return Rows(t);
}

}  // namespace gpujoin::fuzz::query_model
