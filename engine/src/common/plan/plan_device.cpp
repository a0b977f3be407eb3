// DevicePlanShapeOf: which aggregate plans run on a device (plan_device.hpp).
#include "gpujoin/engine/plan_device.hpp"

#include <variant>

#include "gpujoin/engine/aggregation.hpp"
#include "gpujoin/engine/backend.hpp"

namespace gpujoin::engine {
namespace {

bool IsFixedNumeric(ColumnType t) { return IsNumericType(t); }

// Whether the device's filter evaluates `e` over columns of `types` (numeric
// and found columns; numeric and boolean literals), at most `depth` deep.
bool DeviceExpr(const PlanExpr& e, std::span<const ColumnType> types, int depth) {
  if (depth > kDevicePlanMaxExprDepth) return false;
  switch (e.kind) {
    case PlanExpr::Kind::kAnd:
    case PlanExpr::Kind::kOr:
    case PlanExpr::Kind::kNot:
      for (const PlanExpr& c : e.children) {
        if (!DeviceExpr(c, types, depth + 1)) return false;
      }
      return true;
    case PlanExpr::Kind::kIsNull:
    case PlanExpr::Kind::kIsNotNull:
      return e.column < types.size() &&
             (IsFixedNumeric(types[e.column]) || types[e.column] == ColumnType::kBool);
    case PlanExpr::Kind::kCompare:
    case PlanExpr::Kind::kIn:
    case PlanExpr::Kind::kNotIn: {
      if (e.column >= types.size()) return false;
      const ColumnType t = types[e.column];
      for (const PlanLiteral& l : e.literals) {
        const bool numeric = l.kind == PlanLiteral::Kind::kInteger ||
                             l.kind == PlanLiteral::Kind::kFloat;
        if (t == ColumnType::kBool ? l.kind != PlanLiteral::Kind::kBool
                                   : !(IsFixedNumeric(t) && numeric)) {
          return false;
        }
      }
      return e.literals.size() <= kDevicePlanMaxLiterals;
    }
  }
  return false;
}

}  // namespace

absl::StatusOr<std::unique_ptr<DevicePlanBatch>> Backend::StartDevicePlan(const DevicePlanInput&) {
  return absl::UnimplementedError("this backend runs plans' steps on the host");
}

std::optional<DevicePlanInput> DevicePlanShapeOf(const Plan& plan,
                                                 std::span<const ColumnType> input_types,
                                                 std::span<const HashIndex* const> indexes) {
  const size_t at = plan.AggregatePosition();
  if (at >= plan.steps.size()) return std::nullopt;
  std::vector<ColumnType> types(input_types.begin(), input_types.end());
  for (ColumnType t : types) {
    if (!IsFixedNumeric(t)) return std::nullopt;
  }
  for (size_t i = 0; i < at; ++i) {
    if (const auto* lookup = std::get_if<PlanLookupStep>(&plan.steps[i])) {
      if (lookup->index_slot >= indexes.size() || indexes[lookup->index_slot] == nullptr) {
        return std::nullopt;
      }
      const HashIndex& index = *indexes[lookup->index_slot];
      if (index.spec().duplicates != DuplicatePolicy::kLowestRow ||
          index.key_type() == KeyType::kColumns || lookup->key_columns.size() != 1 ||
          lookup->key_columns[0] >= types.size() || !IsIntegerType(types[lookup->key_columns[0]])) {
        return std::nullopt;
      }
      for (int32_t label : lookup->select_labels) {
        if (label >= 0) return std::nullopt;
      }
      for (uint32_t c : lookup->select) {
        if (c >= index.payload().size() || !IsFixedNumeric(index.payload()[c].type)) {
          return std::nullopt;
        }
        types.push_back(index.payload()[c].type);
      }
      types.push_back(ColumnType::kBool);
    } else if (const auto* filter = std::get_if<PlanFilterStep>(&plan.steps[i])) {
      if (!DeviceExpr(filter->where, types, 0)) return std::nullopt;
    } else {
      return std::nullopt;
    }
  }
  const auto& agg = std::get<PlanAggregateStep>(plan.steps[at]);
  DevicePlanInput input;
  input.plan = &plan;
  input.indexes = indexes;
  for (size_t j = 0; j < agg.group_by.size(); ++j) {
    if (j < agg.group_labels.size() && agg.group_labels[j] >= 0) return std::nullopt;
    const uint32_t c = agg.group_by[j];
    if (c >= types.size()) return std::nullopt;
    const ColumnType t = types[c];
    if (!IsIntegerType(t) && t != ColumnType::kBool) return std::nullopt;
    const uint8_t bits = t == ColumnType::kBool ? 1 : static_cast<uint8_t>(8 * ColumnWidth(t));
    input.layout.bits.push_back(bits);
    input.layout.value_bits += bits;
  }
  if (input.layout.value_bits + agg.group_by.size() > 63) return std::nullopt;
  for (const PlanMeasure& m : agg.measures) {
    DeviceMeasure d;
    d.column = m.column;
    if (m.column != PlanMeasure::kNoColumn) {
      if (m.column >= types.size()) return std::nullopt;
      const ColumnType t = types[m.column];
      if (!IsFixedNumeric(t) && t != ColumnType::kBool) return std::nullopt;
      if (m.op != AggregateOp::kCount) {
        // 64-bit integer sums are exact over the stream in two halves: host only.
        if (t == ColumnType::kBool ||
            ((m.op == AggregateOp::kSum || m.op == AggregateOp::kMean) && IsIntegerType(t) &&
             ColumnWidth(t) == 8)) {
          return std::nullopt;
        }
        d.value_type = t;
      }
    }
    // As GroupAggregator::Consume's nodes: the accumulator's partial op; a
    // finite-only count of a float column is the contributing rows of a sum.
    const ColumnType vt = m.column == PlanMeasure::kNoColumn || m.op == AggregateOp::kCount
                              ? ColumnType::kFloat32
                              : d.value_type;
    d.op = AggregationAccumulator(m.op, 0, vt).partial_op();
    if (m.op == AggregateOp::kCount && m.finite_only && m.column != PlanMeasure::kNoColumn &&
        (types[m.column] == ColumnType::kFloat32 || types[m.column] == ColumnType::kFloat64)) {
      d.op = AggregateOp::kSum;
      d.value_type = types[m.column];
    }
    d.overflow = m.op != AggregateOp::kCount && AggregateReportsOverflow(d.op, vt);
    input.measures.push_back(d);
  }
  return input;
}

}  // namespace gpujoin::engine
