#include "common/plan/plan_filter.hpp"

#include <algorithm>
#include <cmath>
#include <string_view>
#include <type_traits>

namespace gpujoin::engine::plan_detail {
namespace {

// -1, 0 or 1; `unordered` for a NaN.
struct Order {
  int sign = 0;
  bool unordered = false;
};

template <class T>
Order Cmp(T a, T b) {
  return Order{a < b ? -1 : (b < a ? 1 : 0), false};
}

Order CmpReal(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return Order{0, true};
  return Cmp(a, b);
}

bool Holds(CompareOp op, Order o) {
  if (o.unordered) return op == CompareOp::kNe;
  switch (op) {
    case CompareOp::kEq: return o.sign == 0;
    case CompareOp::kNe: return o.sign != 0;
    case CompareOp::kLt: return o.sign < 0;
    case CompareOp::kLe: return o.sign <= 0;
    case CompareOp::kGt: return o.sign > 0;
    case CompareOp::kGe: return o.sign >= 0;
  }
  return false;
}

__int128 IntegerAt(const PlanColumn& c, uint64_t row) {
  switch (c.type) {
    case ColumnType::kInt32: return c.value<int32_t>(row);
    case ColumnType::kInt64: return c.value<int64_t>(row);
    case ColumnType::kUint32: return c.value<uint32_t>(row);
    case ColumnType::kUint64: return c.value<uint64_t>(row);
    default: return 0;
  }
}

double RealAt(const PlanColumn& c, uint64_t row) {
  switch (c.type) {
    case ColumnType::kFloat32: return c.value<float>(row);
    case ColumnType::kFloat64: return c.value<double>(row);
    default: return static_cast<double>(IntegerAt(c, row));
  }
}

bool BoolAt(const PlanColumn& c, uint64_t row) {
  return BitAt(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(c.data.data()),
                                        c.data.size()),
               row);
}

// The order of a non-null row against a literal of a kind the compiler
// matched with the column's type.
Order CompareRow(const PlanColumn& c, uint64_t row, const PlanLiteral& lit) {
  switch (lit.kind) {
    case PlanLiteral::Kind::kInteger:
      if (IsIntegerType(c.type)) return Cmp(IntegerAt(c, row), lit.integer);
      return CmpReal(RealAt(c, row), static_cast<double>(lit.integer));
    case PlanLiteral::Kind::kFloat:
      return CmpReal(RealAt(c, row), lit.real);
    case PlanLiteral::Kind::kString: {
      const int s = c.text(row).compare(std::string_view(lit.text));
      return Order{s < 0 ? -1 : (s > 0 ? 1 : 0), false};
    }
    case PlanLiteral::Kind::kBool:
      return Cmp(static_cast<int>(BoolAt(c, row)), static_cast<int>(lit.boolean));
  }
  return Order{};
}

// `out[r]` = kTrue / kFalse for `value(r) op literal` over every row, where
// `value` converts the column's row to V (the type the literal compares in);
// NaN compares as CompareRow's unordered does (only != holds).
template <class V, class ValueOf>
void CompareLoop(uint64_t n, CompareOp op, V literal, const ValueOf& value, uint8_t* out) {
  const auto loop = [&](const auto& holds) {
    for (uint64_t r = 0; r < n; ++r) out[r] = holds(value(r)) ? kTrue : kFalse;
  };
  switch (op) {
    case CompareOp::kEq: return loop([&](V v) { return v == literal; });
    case CompareOp::kNe: return loop([&](V v) { return !(v == literal); });
    case CompareOp::kLt: return loop([&](V v) { return v < literal; });
    case CompareOp::kLe: return loop([&](V v) { return v <= literal; });
    case CompareOp::kGt: return loop([&](V v) { return v > literal; });
    case CompareOp::kGe: return loop([&](V v) { return v >= literal; });
  }
}

// A comparison of a numeric column with a numeric literal, column-wise
// (nulls are set by the caller); false for the other kinds.
bool CompareNumericColumn(const PlanColumn& c, CompareOp op, const PlanLiteral& lit,
                          uint8_t* out) {
  if (!IsNumericType(c.type)) return false;
  const bool exact = IsIntegerType(c.type) && lit.kind == PlanLiteral::Kind::kInteger;
  if (!exact && lit.kind != PlanLiteral::Kind::kInteger && lit.kind != PlanLiteral::Kind::kFloat) {
    return false;
  }
  const double real =
      lit.kind == PlanLiteral::Kind::kFloat ? lit.real : static_cast<double>(lit.integer);
  const auto run = [&]<class T>(T*) {
    const T* d = reinterpret_cast<const T*>(c.data.data());
    if constexpr (std::is_integral_v<T>) {
      if (exact) {
        return CompareLoop<__int128>(c.rows, op, lit.integer,
                                     [d](uint64_t r) { return static_cast<__int128>(d[r]); }, out);
      }
    }
    CompareLoop<double>(c.rows, op, real, [d](uint64_t r) { return static_cast<double>(d[r]); },
                        out);
  };
  switch (c.type) {
    case ColumnType::kInt32: run(static_cast<int32_t*>(nullptr)); break;
    case ColumnType::kInt64: run(static_cast<int64_t*>(nullptr)); break;
    case ColumnType::kUint32: run(static_cast<uint32_t*>(nullptr)); break;
    case ColumnType::kUint64: run(static_cast<uint64_t*>(nullptr)); break;
    case ColumnType::kFloat32: run(static_cast<float*>(nullptr)); break;
    case ColumnType::kFloat64: run(static_cast<double*>(nullptr)); break;
    default: return false;
  }
  return true;
}

uint8_t Not(uint8_t v) { return v == kUnknown ? kUnknown : (v == kTrue ? kFalse : kTrue); }

}  // namespace

std::vector<uint8_t> EvaluateFilter(const PlanExpr& expr, const PlanTable& table) {
  std::vector<const PlanColumn*> columns;
  columns.reserve(table.columns.size());
  for (const PlanColumn& c : table.columns) columns.push_back(&c);
  return EvaluateFilter(expr, columns, table.rows);
}

std::vector<uint8_t> EvaluateFilter(const PlanExpr& expr,
                                    std::span<const PlanColumn* const> columns, uint64_t rows) {
  const uint64_t n = rows;
  std::vector<uint8_t> out(n, kFalse);
  switch (expr.kind) {
    case PlanExpr::Kind::kCompare: {
      const PlanColumn& c = *columns[expr.column];
      if (CompareNumericColumn(c, expr.op, expr.literals[0], out.data())) {
        if (!c.validity.empty()) {
          for (uint64_t r = 0; r < n; ++r) {
            if (!c.valid(r)) out[r] = kUnknown;
          }
        }
        break;
      }
      for (uint64_t r = 0; r < n; ++r) {
        out[r] = !c.valid(r) ? kUnknown
                             : (Holds(expr.op, CompareRow(c, r, expr.literals[0])) ? kTrue : kFalse);
      }
      break;
    }
    case PlanExpr::Kind::kIsNull:
    case PlanExpr::Kind::kIsNotNull: {
      const PlanColumn& c = *columns[expr.column];
      const bool want_null = expr.kind == PlanExpr::Kind::kIsNull;
      for (uint64_t r = 0; r < n; ++r) out[r] = (!c.valid(r)) == want_null ? kTrue : kFalse;
      break;
    }
    case PlanExpr::Kind::kIn:
    case PlanExpr::Kind::kNotIn: {
      // SQL: x IN (list) is true on a match, else false (no null literals).
      const PlanColumn& c = *columns[expr.column];
      const bool negate = expr.kind == PlanExpr::Kind::kNotIn;
      for (uint64_t r = 0; r < n; ++r) {
        if (!c.valid(r)) {
          out[r] = kUnknown;
          continue;
        }
        bool hit = false;
        for (const PlanLiteral& lit : expr.literals) {
          if (Holds(CompareOp::kEq, CompareRow(c, r, lit))) {
            hit = true;
            break;
          }
        }
        out[r] = (hit != negate) ? kTrue : kFalse;
      }
      break;
    }
    case PlanExpr::Kind::kAnd:
    case PlanExpr::Kind::kOr: {
      const bool is_and = expr.kind == PlanExpr::Kind::kAnd;
      std::fill(out.begin(), out.end(), is_and ? kTrue : kFalse);
      for (const PlanExpr& child : expr.children) {
        const std::vector<uint8_t> v = EvaluateFilter(child, columns, rows);
        for (uint64_t r = 0; r < n; ++r) {
          if (is_and) {
            if (out[r] == kFalse || v[r] == kFalse) {
              out[r] = kFalse;
            } else if (v[r] == kUnknown) {
              out[r] = kUnknown;
            }
          } else {
            if (out[r] == kTrue || v[r] == kTrue) {
              out[r] = kTrue;
            } else if (v[r] == kUnknown) {
              out[r] = kUnknown;
            }
          }
        }
      }
      break;
    }
    case PlanExpr::Kind::kNot: {
      out = EvaluateFilter(expr.children[0], columns, rows);
      for (uint8_t& v : out) v = Not(v);
      break;
    }
  }
  return out;
}

}  // namespace gpujoin::engine::plan_detail
