#include "plan/plan_compile.hpp"

#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gpujoin/common/status_macros.hpp"
#include "plan/filter_parse.hpp"
#include "wire/names.hpp"

namespace gpujoin::server {
namespace {

using engine::ColumnType;

std::string TypeName(ColumnType t) { return std::string(engine::ColumnTypeName(t)); }

// The columns a step sees, by name.
struct Schema {
  std::vector<std::string> names;
  std::vector<ColumnType> types;

  int Find(std::string_view name) const {
    for (size_t i = 0; i < names.size(); ++i) {
      if (names[i] == name) return static_cast<int>(i);
    }
    return -1;
  }
  std::string List() const { return names.empty() ? "none" : absl::StrJoin(names, ", "); }
};

absl::StatusOr<uint32_t> Column(const Schema& s, const std::string& name, const std::string& field) {
  const int c = s.Find(name);
  if (c < 0) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": no column \"", name,
                                                   "\" at this step (it sees: ", s.List(), ")"));
  }
  return static_cast<uint32_t>(c);
}

absl::Status AddColumn(Schema* s, std::string name, ColumnType type, const std::string& field) {
  GPUJOIN_RETURN_IF_ERROR(ValidateColumnName(name, field));
  if (s->Find(name) >= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": the step would make a second column \"", name,
                     "\" (rename it with a prefix, found_column or a project step)"));
  }
  s->names.push_back(std::move(name));
  s->types.push_back(type);
  return absl::OkStatus();
}

engine::JoinKind KindOf(v1::JoinKind k) {
  switch (k) {
    case v1::JOIN_KIND_LEFT_OUTER: return engine::JoinKind::kLeftOuter;
    case v1::JOIN_KIND_LEFT_SEMI: return engine::JoinKind::kLeftSemi;
    case v1::JOIN_KIND_LEFT_ANTI: return engine::JoinKind::kLeftAnti;
    default: return engine::JoinKind::kInner;
  }
}

absl::Status CompileLookup(const v1::LookupStep& step, const std::string& field, uint32_t position,
                           const FindIndexFn& find_index, Schema* schema, CompiledPlan* out) {
  absl::StatusOr<std::shared_ptr<const IndexVersion>> found = find_index(step.index(), field + ".index");
  if (!found.ok()) {
    if (found.status().code() != absl::StatusCode::kNotFound) return found.status();
    return absl::NotFoundError(absl::StrCat(field, ".index: ", found.status().message()));
  }
  const std::shared_ptr<const IndexVersion> version = *std::move(found);
  if (!v1::JoinKind_IsValid(step.kind())) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ".kind: unknown join kind ", static_cast<int>(step.kind())));
  }
  const engine::HashIndexSpec& spec = version->index->spec();
  PlanIndexUse use;
  use.name = step.index();
  use.key_type = spec.key_type;
  use.key_types = spec.key_columns;
  use.step = position;
  engine::PlanLookupStep lookup;
  lookup.index_slot = static_cast<uint32_t>(out->indexes.size());
  lookup.key_type = spec.key_type;
  lookup.kind = KindOf(step.kind());
  const size_t want_keys = spec.key_type == engine::KeyType::kColumns ? spec.key_columns.size() : 1;
  if (static_cast<size_t>(step.key_size()) != want_keys) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ".key: index \"", step.index(), "\" is keyed by ", want_keys, " column",
        want_keys == 1 ? "" : "s",
        spec.key_type == engine::KeyType::kColumns
            ? absl::StrCat(" (", absl::StrJoin(version->key_column_names, ", "), ")")
            : absl::StrCat(" (", std::string(engine::KeyTypeName(spec.key_type)), " keys)"),
        ", the step names ", step.key_size()));
  }
  for (int k = 0; k < step.key_size(); ++k) {
    const std::string key_field = absl::StrCat(field, ".key[", k, "]");
    GPUJOIN_ASSIGN_OR_RETURN(uint32_t c, Column(*schema, step.key(k), key_field));
    const ColumnType t = schema->types[c];
    if (spec.key_type == engine::KeyType::kColumns) {
      if (t != spec.key_columns[k]) {
        return absl::InvalidArgumentError(absl::StrCat(
            key_field, ": column \"", step.key(k), "\" is ", TypeName(t), " but key column \"",
            version->key_column_names[k], "\" of index \"", step.index(), "\" is ",
            TypeName(spec.key_columns[k])));
      }
    } else if (!engine::IsIntegerType(t)) {
      return absl::InvalidArgumentError(absl::StrCat(
          key_field, ": column \"", step.key(k), "\" is ", TypeName(t), "; index \"", step.index(),
          "\" has ", std::string(engine::KeyTypeName(spec.key_type)),
          " keys (an INT32, INT64, UINT32 or UINT64 column)"));
    }
    lookup.key_columns.push_back(c);
  }
  std::set<std::string> selected;
  for (int i = 0; i < step.select_size(); ++i) {
    const std::string select_field = absl::StrCat(field, ".select[", i, "]");
    const std::string& name = step.select(i);
    int found = -1;
    for (size_t p = 0; p < version->payload_names.size(); ++p) {
      if (version->payload_names[p] == name) found = static_cast<int>(p);
    }
    if (found < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          select_field, ": index \"", step.index(), "\" has no payload column \"", name,
          "\" (it has: ",
          version->payload_names.empty() ? "none" : absl::StrJoin(version->payload_names, ", "),
          ")"));
    }
    if (!selected.insert(name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(select_field, ": payload column \"", name, "\" is selected twice"));
    }
    const ColumnType t = version->index->payload()[found].type;
    lookup.select.push_back(static_cast<uint32_t>(found));
    use.select.push_back(static_cast<uint32_t>(found));
    use.select_names.push_back(name);
    use.select_types.push_back(t);
    GPUJOIN_RETURN_IF_ERROR(AddColumn(schema, step.prefix() + name, t, select_field));
  }
  const std::string found_name =
      step.found_column().empty() ? step.index() + ".found" : step.found_column();
  GPUJOIN_RETURN_IF_ERROR(AddColumn(schema, found_name, ColumnType::kBool, field + ".found_column"));
  out->indexes.push_back(std::move(use));
  out->plan.steps.emplace_back(std::move(lookup));
  return absl::OkStatus();
}

absl::Status CompileAggregate(const v1::AggregateStep& step, const std::string& field,
                              Schema* schema, CompiledPlan* out) {
  engine::PlanAggregateStep agg;
  Schema next;
  out->plan.aggregate_input_types = schema->types;
  for (int i = 0; i < step.group_by_size(); ++i) {
    const std::string f = absl::StrCat(field, ".group_by[", i, "]");
    GPUJOIN_ASSIGN_OR_RETURN(uint32_t c, Column(*schema, step.group_by(i), f));
    const ColumnType t = schema->types[c];
    if (!engine::IsGroupableType(t)) {
      return absl::InvalidArgumentError(absl::StrCat(
          f, ": column \"", step.group_by(i), "\" is ", TypeName(t),
          "; groups are formed by integer, BOOL, STRING or BINARY columns"));
    }
    agg.group_by.push_back(c);
    GPUJOIN_RETURN_IF_ERROR(AddColumn(&next, step.group_by(i), t, f));
  }
  if (step.measures_size() == 0 && step.group_by_size() == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": an aggregate needs at least one group_by column or measure"));
  }
  for (int i = 0; i < step.measures_size(); ++i) {
    const std::string f = absl::StrCat(field, ".measures[", i, "]");
    const v1::Measure& m = step.measures(i);
    engine::PlanMeasure measure;
    switch (m.op()) {
      case v1::AGGREGATE_OP_COUNT: measure.op = engine::AggregateOp::kCount; break;
      case v1::AGGREGATE_OP_SUM: measure.op = engine::AggregateOp::kSum; break;
      case v1::AGGREGATE_OP_MIN: measure.op = engine::AggregateOp::kMin; break;
      case v1::AGGREGATE_OP_MAX: measure.op = engine::AggregateOp::kMax; break;
      case v1::AGGREGATE_OP_MEAN: measure.op = engine::AggregateOp::kMean; break;
      default:
        return absl::InvalidArgumentError(absl::StrCat(
            f, ".op: ", static_cast<int>(m.op()), " is not COUNT, SUM, MIN, MAX or MEAN"));
    }
    const std::string op_name = absl::AsciiStrToLower(std::string(engine::AggregateOpName(measure.op)));
    ColumnType input = ColumnType::kUint64;
    if (m.column().empty()) {
      if (measure.op != engine::AggregateOp::kCount) {
        return absl::InvalidArgumentError(
            absl::StrCat(f, ".column: ", op_name, " needs a column"));
      }
    } else {
      GPUJOIN_ASSIGN_OR_RETURN(measure.column, Column(*schema, m.column(), f + ".column"));
      input = schema->types[measure.column];
      if (measure.op != engine::AggregateOp::kCount && !engine::IsNumericType(input)) {
        return absl::InvalidArgumentError(absl::StrCat(
            f, ".column: ", op_name, " of column \"", m.column(), "\", which is ", TypeName(input),
            "; sum, min, max and mean take INT32, INT64, UINT32, UINT64, FLOAT32 or FLOAT64"));
      }
    }
    if (m.finite_only()) {
      if (measure.op != engine::AggregateOp::kCount ||
          (input != ColumnType::kFloat32 && input != ColumnType::kFloat64) || m.column().empty()) {
        return absl::InvalidArgumentError(absl::StrCat(
            f, ".finite_only: only a count of a FLOAT32 or FLOAT64 column counts finite values"));
      }
      measure.finite_only = true;
    }
    std::string name = m.name();
    if (name.empty()) name = m.column().empty() ? "count" : absl::StrCat(op_name, "_", m.column());
    GPUJOIN_RETURN_IF_ERROR(AddColumn(&next, name, engine::PlanMeasureType(measure.op, input),
                                      f + ".name"));
    agg.measures.push_back(measure);
    agg.measure_names.push_back(name);
  }
  *schema = std::move(next);
  out->plan.steps.emplace_back(std::move(agg));
  return absl::OkStatus();
}

bool Uses(const engine::PlanExpr& e, uint32_t column) {
  if (e.kind != engine::PlanExpr::Kind::kAnd && e.kind != engine::PlanExpr::Kind::kOr &&
      e.kind != engine::PlanExpr::Kind::kNot && e.column == column) {
    return true;
  }
  for (const engine::PlanExpr& c : e.children) {
    if (Uses(c, column)) return true;
  }
  return false;
}

// Where select entry `entry` of the lookup at step `at` (a column at
// `position` after it) is at the aggregate's input, or -1 when something
// before the aggregate reads it (a filter, a later lookup's key, a measure)
// or it does not reach the aggregate's group_by exactly once.
int GroupByOnly(const engine::Plan& plan, size_t at, uint32_t position, size_t* group) {
  const size_t agg_at = plan.AggregatePosition();
  for (size_t i = at + 1; i < agg_at; ++i) {
    const engine::PlanStep& step = plan.steps[i];
    if (const auto* lookup = std::get_if<engine::PlanLookupStep>(&step)) {
      for (uint32_t k : lookup->key_columns) {
        if (k == position) return -1;
      }
    } else if (const auto* filter = std::get_if<engine::PlanFilterStep>(&step)) {
      if (Uses(filter->where, position)) return -1;
    } else if (const auto* project = std::get_if<engine::PlanProjectStep>(&step)) {
      int moved = -1;
      for (size_t c = 0; c < project->columns.size(); ++c) {
        if (project->columns[c] != position) continue;
        if (moved >= 0) return -1;
        moved = static_cast<int>(c);
      }
      if (moved < 0) return -1;
      position = static_cast<uint32_t>(moved);
    }
  }
  const auto& agg = std::get<engine::PlanAggregateStep>(plan.steps[agg_at]);
  for (const engine::PlanMeasure& m : agg.measures) {
    if (m.column == position) return -1;
  }
  int found = -1;
  for (size_t g = 0; g < agg.group_by.size(); ++g) {
    if (agg.group_by[g] != position) continue;
    if (found >= 0) return -1;
    found = static_cast<int>(g);
  }
  if (found >= 0) *group = static_cast<size_t>(found);
  return found < 0 ? -1 : static_cast<int>(position);
}

// Lets the string and binary payload columns that an aggregate only groups by
// travel as label ids (engine::PlanLookupStep::select_labels): a batch then
// gathers their dictionary codes, not their strings, where the index keeps a
// dictionary of the column.
void AssignLabels(CompiledPlan* out) {
  engine::Plan& plan = out->plan;
  const size_t agg_at = plan.AggregatePosition();
  if (agg_at == plan.steps.size()) return;
  auto& agg = std::get<engine::PlanAggregateStep>(plan.steps[agg_at]);
  uint32_t width = static_cast<uint32_t>(out->input_names.size());
  for (size_t i = 0; i < agg_at; ++i) {
    engine::PlanStep& step = plan.steps[i];
    if (auto* lookup = std::get_if<engine::PlanLookupStep>(&step)) {
      const PlanIndexUse& use = out->indexes[lookup->index_slot];
      for (size_t e = 0; e < lookup->select.size(); ++e) {
        if (!engine::IsVariableWidth(use.select_types[e])) continue;
        size_t group = 0;
        const int at_agg = GroupByOnly(plan, i, width + static_cast<uint32_t>(e), &group);
        if (at_agg < 0) continue;
        const int32_t table = static_cast<int32_t>(plan.label_types.size());
        plan.label_types.push_back(use.select_types[e]);
        lookup->select_labels.resize(lookup->select.size(), -1);
        lookup->select_labels[e] = table;
        agg.group_labels.resize(agg.group_by.size(), -1);
        agg.group_labels[group] = table;
        plan.aggregate_input_types[at_agg] = ColumnType::kUint32;
      }
      width += static_cast<uint32_t>(lookup->select.size()) + 1;
    } else if (const auto* project = std::get_if<engine::PlanProjectStep>(&step)) {
      width = static_cast<uint32_t>(project->columns.size());
    }
  }
}

}  // namespace

absl::StatusOr<CompiledPlan> CompilePlan(const v1::Plan& plan, std::vector<std::string> names,
                                         std::vector<engine::ColumnType> types,
                                         const FindIndexFn& find_index) {
  CompiledPlan out;
  out.input_names = names;
  out.input_types = types;
  Schema schema{std::move(names), std::move(types)};
  if (plan.steps_size() == 0) {
    return absl::InvalidArgumentError("plan.steps: a plan needs at least one step");
  }
  if (static_cast<size_t>(plan.steps_size()) > kMaxPlanSteps) {
    return absl::ResourceExhaustedError(absl::StrCat("plan.steps: ", plan.steps_size(),
                                                     " steps, more than the limit of ",
                                                     kMaxPlanSteps, " steps per plan"));
  }
  bool aggregated = false;
  for (int i = 0; i < plan.steps_size(); ++i) {
    const v1::PlanStep& step = plan.steps(i);
    const std::string field = absl::StrCat("plan.steps[", i, "]");
    switch (step.step_case()) {
      case v1::PlanStep::kLookup:
        out.step_kinds.push_back("lookup");
        GPUJOIN_RETURN_IF_ERROR(CompileLookup(step.lookup(), field + ".lookup",
                                              static_cast<uint32_t>(i), find_index, &schema, &out));
        break;
      case v1::PlanStep::kFilter: {
        out.step_kinds.push_back("filter");
        GPUJOIN_ASSIGN_OR_RETURN(engine::PlanExpr where,
                                 ParseFilter(step.filter().where(), schema.names, schema.types,
                                             field + ".filter.where"));
        out.plan.steps.emplace_back(engine::PlanFilterStep{std::move(where)});
        break;
      }
      case v1::PlanStep::kAggregate:
        out.step_kinds.push_back("aggregate");
        if (aggregated) {
          return absl::InvalidArgumentError(
              absl::StrCat(field, ".aggregate: a plan has at most one aggregate step"));
        }
        aggregated = true;
        GPUJOIN_RETURN_IF_ERROR(CompileAggregate(step.aggregate(), field + ".aggregate", &schema, &out));
        break;
      case v1::PlanStep::kProject: {
        out.step_kinds.push_back("project");
        const v1::ProjectStep& p = step.project();
        if (p.columns_size() == 0) {
          return absl::InvalidArgumentError(
              absl::StrCat(field, ".project.columns: a project step keeps at least one column"));
        }
        engine::PlanProjectStep project;
        Schema next;
        for (int c = 0; c < p.columns_size(); ++c) {
          const std::string f = absl::StrCat(field, ".project.columns[", c, "]");
          GPUJOIN_ASSIGN_OR_RETURN(uint32_t col, Column(schema, p.columns(c).column(), f + ".column"));
          project.columns.push_back(col);
          const std::string& name = p.columns(c).name().empty() ? p.columns(c).column() : p.columns(c).name();
          GPUJOIN_RETURN_IF_ERROR(AddColumn(&next, name, schema.types[col], f + ".name"));
        }
        schema = std::move(next);
        out.plan.steps.emplace_back(std::move(project));
        break;
      }
      case v1::PlanStep::kLimit:
        out.step_kinds.push_back("limit");
        out.plan.steps.emplace_back(engine::PlanLimitStep{step.limit().rows()});
        break;
      default:
        return absl::InvalidArgumentError(
            absl::StrCat(field, ": the step sets none of lookup, filter, aggregate, project, limit"));
    }
  }
  out.plan.index_slots = static_cast<uint32_t>(out.indexes.size());
  AssignLabels(&out);
  out.output_names = std::move(schema.names);
  out.output_types = std::move(schema.types);
  return out;
}

absl::Status CheckIndexUse(const PlanIndexUse& use, const IndexVersion& version) {
  const engine::HashIndexSpec& spec = version.index->spec();
  auto changed = [&](std::string_view what) {
    return absl::FailedPreconditionError(absl::StrCat(
        "index \"", use.name, "\" (lookup step ", use.step, ") was rebuilt as version ",
        version.version, " with ", std::string(what),
        " than the plan was checked against; start a new Query stream"));
  };
  if (spec.key_type != use.key_type || spec.key_columns != use.key_types) {
    return changed("another key");
  }
  const auto& payload = version.index->payload();
  for (size_t i = 0; i < use.select.size(); ++i) {
    const uint32_t p = use.select[i];
    if (p >= payload.size() || p >= version.payload_names.size() ||
        version.payload_names[p] != use.select_names[i] || payload[p].type != use.select_types[i]) {
      return changed("other payload columns");
    }
  }
  return absl::OkStatus();
}

}  // namespace gpujoin::server
