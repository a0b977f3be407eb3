// Filter expressions for the plan tests: a comparison with one literal, an
// integer literal, an and/or/not node.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "gpujoin/engine/plan.hpp"

namespace gpujoin::engine::testing {

inline PlanExpr Compare(uint32_t column, CompareOp op, PlanLiteral lit) {
  PlanExpr e;
  e.kind = PlanExpr::Kind::kCompare;
  e.column = column;
  e.op = op;
  e.literals.push_back(std::move(lit));
  return e;
}

inline PlanLiteral IntLit(__int128 v) {
  PlanLiteral l;
  l.kind = PlanLiteral::Kind::kInteger;
  l.integer = v;
  return l;
}

inline PlanExpr Node(PlanExpr::Kind kind, std::vector<PlanExpr> children) {
  PlanExpr e;
  e.kind = kind;
  e.children = std::move(children);
  return e;
}

}  // namespace gpujoin::engine::testing
