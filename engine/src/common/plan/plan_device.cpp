// DevicePlanShapeOf: which plans run as a backend's lowered batch
// (plan_device.hpp), and the default lowered batch (node_plan_batch.hpp).
#include "gpujoin/engine/plan_device.hpp"

#include <algorithm>
#include <bit>
#include <variant>

#include "absl/strings/str_cat.h"
#include "common/plan/node_plan_batch.hpp"
#include "gpujoin/engine/aggregation.hpp"
#include "gpujoin/engine/backend.hpp"

namespace gpujoin::engine {
namespace {

// Whether the device's filter evaluates `e` over columns of `types` (numeric
// and found columns; numeric and boolean literals), at most `depth` deep.
bool DeviceExpr(const PlanExpr& e, std::span<const ColumnType> types, int depth) {
  if (depth > kDevicePlanMaxExprDepth) return false;
  switch (e.kind) {
    case PlanExpr::Kind::kAnd:
    case PlanExpr::Kind::kOr:
    case PlanExpr::Kind::kNot:
      // The forms the compiler makes (the program folds and/or pairwise).
      if (e.kind == PlanExpr::Kind::kNot ? e.children.size() != 1 : e.children.size() < 2) {
        return false;
      }
      for (const PlanExpr& c : e.children) {
        if (!DeviceExpr(c, types, depth + 1)) return false;
      }
      return true;
    case PlanExpr::Kind::kIsNull:
    case PlanExpr::Kind::kIsNotNull:
      return e.column < types.size() &&
             (IsNumericType(types[e.column]) || types[e.column] == ColumnType::kBool);
    case PlanExpr::Kind::kCompare:
    case PlanExpr::Kind::kIn:
    case PlanExpr::Kind::kNotIn: {
      if (e.column >= types.size()) return false;
      const ColumnType t = types[e.column];
      for (const PlanLiteral& l : e.literals) {
        const bool numeric = l.kind == PlanLiteral::Kind::kInteger ||
                             l.kind == PlanLiteral::Kind::kFloat;
        if (t == ColumnType::kBool ? l.kind != PlanLiteral::Kind::kBool
                                   : !(IsNumericType(t) && numeric)) {
          return false;
        }
      }
      return e.kind == PlanExpr::Kind::kCompare
                 ? e.literals.size() == 1
                 : !e.literals.empty() && e.literals.size() <= kDevicePlanMaxLiterals;
    }
  }
  return false;
}

// Marks the columns `e` reads.
void MarkColumns(const PlanExpr& e, std::vector<bool>* read) {
  for (const PlanExpr& c : e.children) MarkColumns(c, read);
  if (e.children.empty() && e.column < read->size()) (*read)[e.column] = true;
}

}  // namespace

absl::Status GroupLimitError(uint64_t max_groups, const std::string& name) {
  return absl::ResourceExhaustedError(absl::StrCat("the aggregate step would hold more than ",
                                                   max_groups, " groups (", name, ")"));
}

absl::StatusOr<std::unique_ptr<DevicePlanBatch>> Backend::StartDevicePlan(
    const DevicePlanInput& input) {
  return plan_detail::StartNodePlanBatch(*this, input);
}

std::optional<DevicePlanInput> DevicePlanShapeOf(const Plan& plan,
                                                 std::span<const ColumnType> input_types,
                                                 std::span<const HashIndex* const> indexes) {
  const size_t at = plan.AggregatePosition();
  const bool aggregate = at < plan.steps.size();
  // The types as the device reads them: an input kBool column is a bitmap,
  // which it does not read (its found columns are bytes), so it counts as
  // one of a type the device does not take.
  std::vector<ColumnType> types(input_types.begin(), input_types.end());
  for (ColumnType& t : types) {
    if (t == ColumnType::kBool) t = ColumnType::kString;
  }
  std::vector<bool> read(types.size(), false);
  // Per column: the dictionary a labelled lookup column's codes come from.
  std::vector<const StringDictionary*> dictionary(types.size(), nullptr);
  std::vector<std::vector<uint32_t>> gathered;
  const auto reads = [&](uint32_t c) {
    if (c < read.size()) read[c] = true;
    return c < types.size() && (IsNumericType(types[c]) || types[c] == ColumnType::kBool);
  };
  size_t end = 0;
  for (; end < at; ++end) {
    if (const auto* lookup = std::get_if<PlanLookupStep>(&plan.steps[end])) {
      if (lookup->index_slot >= indexes.size() || indexes[lookup->index_slot] == nullptr) break;
      const HashIndex& index = *indexes[lookup->index_slot];
      if (index.spec().duplicates != DuplicatePolicy::kLowestRow ||
          index.key_type() == KeyType::kColumns || lookup->key_columns.size() != 1 ||
          lookup->key_columns[0] >= types.size() || !IsIntegerType(types[lookup->key_columns[0]])) {
        break;
      }
      // Numeric payload; a labelled entry (aggregate plans: only a group-by
      // reads it, the kString type keeps filters and measures off it) as its
      // live dictionary's codes.
      bool fits = true;
      std::vector<uint32_t> columns;
      std::vector<const StringDictionary*> dictionaries;
      for (size_t k = 0; k < lookup->select.size() && fits; ++k) {
        const uint32_t c = lookup->select[k];
        const bool labelled = k < lookup->select_labels.size() && lookup->select_labels[k] >= 0;
        const PayloadDictionary* d = labelled ? index.LiveDictionaryOf(c) : nullptr;
        const uint32_t column = d != nullptr ? d->codes_column : c;
        fits = (!labelled || (aggregate && d != nullptr)) && column < index.payload().size() &&
               IsNumericType(index.payload()[column].type);
        columns.push_back(column);
        dictionaries.push_back(d != nullptr ? &d->values : nullptr);
      }
      if (!fits) break;
      reads(lookup->key_columns[0]);
      for (size_t k = 0; k < columns.size(); ++k) {
        types.push_back(dictionaries[k] != nullptr ? ColumnType::kString
                                                   : index.payload()[columns[k]].type);
        read.push_back(false);
        dictionary.push_back(dictionaries[k]);
      }
      types.push_back(ColumnType::kBool);
      read.push_back(false);
      dictionary.push_back(nullptr);
      gathered.push_back(std::move(columns));
    } else if (const auto* filter = std::get_if<PlanFilterStep>(&plan.steps[end])) {
      if (!DeviceExpr(filter->where, types, 0)) break;
      MarkColumns(filter->where, &read);
      gathered.emplace_back();
    } else {
      break;
    }
  }
  DevicePlanInput input;
  input.plan = &plan;
  input.indexes = indexes;
  input.steps = end;
  input.aggregate = aggregate;
  input.gathered = std::move(gathered);
  if (!aggregate) {
    if (end == 0) return std::nullopt;
    input.uploaded.assign(read.begin(), read.begin() + static_cast<ptrdiff_t>(input_types.size()));
    return input;
  }
  if (end != at) return std::nullopt;
  const auto& agg = std::get<PlanAggregateStep>(plan.steps[at]);
  unsigned host_bits = 0;
  for (size_t j = 0; j < agg.group_by.size(); ++j) {
    const uint32_t c = agg.group_by[j];
    if (j < agg.group_labels.size() && agg.group_labels[j] >= 0) {
      // A label: the codes of a dictionary a lookup gathered, in as few bits
      // as hold its size (a code past them is a null, as past the dictionary).
      if (c >= dictionary.size() || dictionary[c] == nullptr) return std::nullopt;
      const uint8_t bits = static_cast<uint8_t>(
          std::clamp<int>(std::bit_width(uint64_t{dictionary[c]->size()}), 1, 32));
      input.layout.bits.push_back(bits);
      input.layout.value_bits += bits;
      input.layout.dictionaries.push_back(dictionary[c]);
      host_bits += 32;  // its label id on the host
      continue;
    }
    input.layout.dictionaries.push_back(nullptr);
    if (!reads(c)) return std::nullopt;
    const ColumnType t = types[c];
    if (!IsIntegerType(t) && t != ColumnType::kBool) return std::nullopt;
    const uint8_t bits = t == ColumnType::kBool ? 1 : static_cast<uint8_t>(8 * ColumnWidth(t));
    input.layout.bits.push_back(bits);
    input.layout.value_bits += bits;
    host_bits += bits;
  }
  // The device's key and the host's (whose groups the batch joins: values at
  // their full widths in 64 bits) must both pack.
  if (input.layout.value_bits + agg.group_by.size() > 63 || host_bits > 64) return std::nullopt;
  for (const PlanMeasure& m : agg.measures) {
    DeviceMeasure d;
    d.column = m.column;
    if (m.column != PlanMeasure::kNoColumn) {
      if (!reads(m.column)) return std::nullopt;
      const ColumnType t = types[m.column];
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
  input.uploaded.assign(read.begin(), read.begin() + static_cast<ptrdiff_t>(input_types.size()));
  return input;
}

}  // namespace gpujoin::engine
