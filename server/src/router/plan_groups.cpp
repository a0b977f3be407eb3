#include "router/plan_groups.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <set>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "gpujoin/common/status_macros.hpp"
#include "gpujoin/engine/aggregation.hpp"
#include "router/wire_rows.hpp"
#include "wire/aggregate_wire.hpp"
#include "wire/column_check.hpp"
#include "wire/column_codec.hpp"

namespace gpujoin::server::router {
namespace {

using engine::AggregateOp;
using engine::ColumnType;

v1::Measure MeasureOf(v1::AggregateOp op, const std::string& column, const std::string& name) {
  v1::Measure m;
  m.set_op(op);
  m.set_column(column);
  m.set_name(name);
  return m;
}

bool Valid(const v1::Column& c, uint64_t row) {
  return c.validity().empty() || ((static_cast<uint8_t>(c.validity()[row / 8]) >> (row % 8)) & 1u);
}

template <class T>
T At(const v1::Column& c, uint64_t row) {
  T v;
  std::memcpy(&v, c.data().data() + row * sizeof(T), sizeof(T));
  return v;
}

// A cell of a group-by column as bytes of a group key: a null flag, then the
// value (strings with their length).
void AppendCell(const v1::Column& c, ColumnType type, uint64_t row, std::string* key) {
  if (!Valid(c, row)) {
    key->push_back('\0');
    return;
  }
  key->push_back('\1');
  if (engine::IsVariableWidth(type)) {
    int32_t b, e;
    std::memcpy(&b, c.offsets().data() + 4 * row, 4);
    std::memcpy(&e, c.offsets().data() + 4 * (row + 1), 4);
    const uint32_t n = static_cast<uint32_t>(e - b);
    key->append(reinterpret_cast<const char*>(&n), 4);
    key->append(c.data(), b, n);
  } else if (type == ColumnType::kBool) {
    key->push_back(static_cast<char>((static_cast<uint8_t>(c.data()[row / 8]) >> (row % 8)) & 1u));
  } else {
    const uint64_t w = engine::ColumnWidth(type);
    key->append(c.data(), row * w, w);
  }
}

// One merged group's partial measure.
struct Partial {
  bool any = false;       // a non-null partial was folded in
  __int128 integer = 0;   // integer sums, integer min/max
  double real = 0;        // float64 sums, min/max
  float real32 = 0;       // float32 sums, min/max
  uint64_t count = 0;     // counts; a mean's count
};

bool IsInteger(ColumnType t) {
  return t == ColumnType::kInt32 || t == ColumnType::kInt64 || t == ColumnType::kUint32 ||
         t == ColumnType::kUint64;
}

__int128 IntegerAt(const v1::Column& c, ColumnType t, uint64_t row) {
  switch (t) {
    case ColumnType::kInt32: return At<int32_t>(c, row);
    case ColumnType::kInt64: return At<int64_t>(c, row);
    case ColumnType::kUint32: return At<uint32_t>(c, row);
    default: return At<uint64_t>(c, row);
  }
}

// Folds row `row` of partial column `c` (type `t`) into `p` for `op`.
void Fold(AggregateOp op, const v1::Column& c, ColumnType t, uint64_t row, Partial* p) {
  if (!Valid(c, row)) return;
  const bool first = !p->any;
  p->any = true;
  if (op == AggregateOp::kCount) {
    p->count += At<uint64_t>(c, row);
    return;
  }
  if (IsInteger(t)) {
    const __int128 v = IntegerAt(c, t, row);
    if (op == AggregateOp::kSum || op == AggregateOp::kMean) p->integer += v;
    else if (first || (op == AggregateOp::kMin ? v < p->integer : v > p->integer)) p->integer = v;
  } else if (t == ColumnType::kFloat64) {
    const double v = At<double>(c, row);
    if (op == AggregateOp::kSum || op == AggregateOp::kMean) p->real += v;
    else if (first || (op == AggregateOp::kMin ? engine::FloatLess(v, p->real)
                                               : engine::FloatLess(p->real, v))) {
      p->real = v;
    }
  } else {
    const float v = At<float>(c, row);
    if (op == AggregateOp::kSum || op == AggregateOp::kMean) p->real32 += v;
    else if (first || (op == AggregateOp::kMin ? engine::FloatLess(v, p->real32)
                                               : engine::FloatLess(p->real32, v))) {
      p->real32 = v;
    }
  }
}

// A typed result column being written.
struct Out {
  v1::Column column;
  std::string validity;
  uint64_t nulls = 0;
  uint64_t rows = 0;
  void Null(uint64_t width) {
    column.mutable_data()->append(width, '\0');
    ++nulls;
    ++rows;
  }
  template <class T>
  void Value(T v) {
    column.mutable_data()->append(reinterpret_cast<const char*>(&v), sizeof(T));
    validity.resize(BitmapBytes(rows + 1), '\0');
    validity[rows / 8] = static_cast<char>(static_cast<uint8_t>(validity[rows / 8]) | (1u << (rows % 8)));
    ++rows;
  }
  v1::Column Finish() {
    column.set_length(rows);
    if (nulls > 0) {
      validity.resize(BitmapBytes(rows), '\0');
      column.set_validity(std::move(validity));
    }
    column.set_null_count(nulls);
    return std::move(column);
  }
  static uint64_t BitmapBytes(uint64_t n) { return (n + 7) / 8; }
};

}  // namespace

v1::AggregateStep ShardAggregate(const v1::AggregateStep& step, const std::string& row_column,
                                 const std::set<std::string>& float_columns, GroupsPlan* plan) {
  v1::AggregateStep out;
  *out.mutable_group_by() = step.group_by();
  plan->group_by.assign(step.group_by().begin(), step.group_by().end());
  // The caller's measures keep their positions (a shard's refusal names
  // measures[j] as one server would); the counts of means and the first row
  // come after them.
  std::vector<v1::Measure> after;
  for (int j = 0; j < step.measures_size(); ++j) {
    const v1::Measure& m = step.measures(j);
    GroupsPlan::Measure g;
    absl::StatusOr<AggregateOp> op = ToEngineOp(m.op());
    g.op = op.ok() ? *op : AggregateOp::kCount;
    const std::string op_name = absl::AsciiStrToLower(std::string(engine::AggregateOpName(g.op)));
    g.name = !m.name().empty()      ? m.name()
             : m.column().empty()   ? std::string("count")
                                    : absl::StrCat(op_name, "_", m.column());
    g.partial = absl::StrCat("__gpujoin_router_m", j);
    if (!op.ok()) {
      *out.add_measures() = m;  // the shards refuse it
    } else if (g.op == AggregateOp::kMean) {
      g.count = absl::StrCat("__gpujoin_router_n", j);
      v1::Measure mean = m;  // the shards refuse what one server refuses
      mean.set_name(g.partial);
      *out.add_measures() = std::move(mean);
      // The finite values of a float column (its mean's rows); an integer
      // column's non-null ones are.
      v1::Measure n = MeasureOf(v1::AGGREGATE_OP_COUNT, m.column(), g.count);
      n.set_finite_only(float_columns.count(m.column()) != 0);
      after.push_back(std::move(n));
    } else {
      v1::Measure partial = m;  // finite_only and all
      partial.set_name(g.partial);
      *out.add_measures() = std::move(partial);
    }
    plan->measures.push_back(std::move(g));
  }
  for (v1::Measure& m : after) *out.add_measures() = std::move(m);
  *out.add_measures() = MeasureOf(v1::AGGREGATE_OP_MIN, row_column, kFirstRowColumn);
  return out;
}

absl::StatusOr<MergedGroups> MergeGroups(
    const GroupsPlan& plan, const std::vector<std::vector<v1::QueryResponse>>& answers) {
  // Every message with columns; the first is the header (names and types).
  std::vector<const v1::QueryResponse*> pieces;
  for (const auto& shard : answers) {
    for (const v1::QueryResponse& m : shard) {
      if (m.columns_size() > 0) pieces.push_back(&m);
    }
  }
  MergedGroups out;
  if (pieces.empty()) return out;
  const v1::QueryResponse& header = *pieces.front();
  std::map<std::string, int> at;
  std::vector<ColumnType> types(header.columns_size());
  for (int c = 0; c < header.columns_size(); ++c) {
    at[header.columns(c).name()] = c;
    GPUJOIN_ASSIGN_OR_RETURN(types[c], FromWireColumnType(header.columns(c).type(), "columns"));
  }
  auto column = [&](const std::string& name) -> absl::StatusOr<int> {
    auto it = at.find(name);
    if (it == at.end()) {
      return absl::InternalError(absl::StrCat("a shard's groups lack column \"", name, "\""));
    }
    return it->second;
  };
  std::vector<int> keys;
  for (const std::string& g : plan.group_by) {
    GPUJOIN_ASSIGN_OR_RETURN(int c, column(g));
    keys.push_back(c);
  }
  GPUJOIN_ASSIGN_OR_RETURN(const int first_row, column(kFirstRowColumn));
  auto uint64_column = [&](int c) -> absl::Status {
    if (types[c] == ColumnType::kUint64) return absl::OkStatus();
    return absl::InternalError(absl::StrCat("a shard's column \"", header.columns(c).name(),
                                            "\" is not UINT64"));
  };
  GPUJOIN_RETURN_IF_ERROR(uint64_column(first_row));
  std::vector<int> partial(plan.measures.size()), count(plan.measures.size(), -1);
  for (size_t j = 0; j < plan.measures.size(); ++j) {
    GPUJOIN_ASSIGN_OR_RETURN(partial[j], column(plan.measures[j].partial));
    if (!plan.measures[j].count.empty()) {
      GPUJOIN_ASSIGN_OR_RETURN(count[j], column(plan.measures[j].count));
      GPUJOIN_RETURN_IF_ERROR(uint64_column(count[j]));
    }
    if (plan.measures[j].op == AggregateOp::kCount) {
      GPUJOIN_RETURN_IF_ERROR(uint64_column(partial[j]));
    }
  }
  for (const v1::QueryResponse* p : pieces) {
    if (p->columns_size() != header.columns_size()) {
      return absl::InternalError("the shards' groups differ in their columns");
    }
    for (int c = 0; c < p->columns_size(); ++c) {
      if (p->columns(c).type() != header.columns(c).type() ||
          p->columns(c).length() != p->columns(0).length()) {
        return absl::InternalError("a shard's groups differ in their columns' types or lengths");
      }
      GPUJOIN_RETURN_IF_ERROR(
          CheckColumnBuffers(p->columns(c), types[c], absl::StrCat("columns[", c, "]")).status());
    }
  }
  // Groups by their group-by values, in the order first seen; each with its
  // first row number and its partial measures.
  struct Group {
    RowRef at;
    uint64_t first = std::numeric_limits<uint64_t>::max();
    size_t seen = 0;
    std::vector<Partial> measures;
  };
  absl::flat_hash_map<std::string, size_t> index;
  std::vector<Group> groups;
  std::string key;
  for (uint32_t source = 0; source < pieces.size(); ++source) {
    const v1::QueryResponse& m = *pieces[source];
    const uint64_t rows = m.columns(0).length();
    for (uint64_t r = 0; r < rows; ++r) {
      key.clear();
      for (int c : keys) AppendCell(m.columns(c), types[c], r, &key);
      auto [it, inserted] = index.try_emplace(key, groups.size());
      if (inserted) {
        groups.push_back(Group{{source, static_cast<uint32_t>(r)}, std::numeric_limits<uint64_t>::max(),
                               groups.size(), std::vector<Partial>(plan.measures.size())});
      }
      Group& g = groups[it->second];
      const v1::Column& f = m.columns(first_row);
      if (Valid(f, r)) g.first = std::min(g.first, At<uint64_t>(f, r));
      for (size_t j = 0; j < plan.measures.size(); ++j) {
        const AggregateOp op = plan.measures[j].op;
        if (op != AggregateOp::kMean) {
          Fold(op, m.columns(partial[j]), types[partial[j]], r, &g.measures[j]);
          continue;
        }
        // A mean: the shards' means weighted by their counts (no partial sum
        // can leave 64 bits, as one server's exact sum does not).
        Partial n;
        Fold(AggregateOp::kCount, m.columns(count[j]), types[count[j]], r, &n);
        const v1::Column& mean = m.columns(partial[j]);
        if (n.count == 0 || !Valid(mean, r)) continue;
        const double v = types[partial[j]] == ColumnType::kFloat32 ? At<float>(mean, r)
                                                                   : At<double>(mean, r);
        g.measures[j].any = true;
        g.measures[j].real += v * static_cast<double>(n.count);
        g.measures[j].count += n.count;
      }
    }
  }
  // In the order of their first rows, as one server orders them.
  std::stable_sort(groups.begin(), groups.end(), [](const Group& a, const Group& b) {
    return a.first != b.first ? a.first < b.first : a.seen < b.seen;
  });
  out.groups = groups.size();
  // The columns after the aggregate, by name.
  std::map<std::string, v1::Column> made;
  std::vector<RowRef> refs;
  for (const Group& g : groups) refs.push_back(g.at);
  for (size_t k = 0; k < keys.size(); ++k) {
    std::vector<const v1::Column*> sources;
    for (const v1::QueryResponse* p : pieces) sources.push_back(&p->columns(keys[k]));
    GPUJOIN_ASSIGN_OR_RETURN(v1::Column c, GatherColumn(sources, refs, plan.group_by[k]));
    made[plan.group_by[k]] = std::move(c);
  }
  for (size_t j = 0; j < plan.measures.size(); ++j) {
    const GroupsPlan::Measure& measure = plan.measures[j];
    const ColumnType t = types[partial[j]];
    Out o;
    o.column.set_name(measure.name);
    const ColumnType result = t;  // a mean's partial is already the mean's type
    o.column.set_type(ToWireColumnType(result));
    const uint64_t width = engine::ColumnWidth(result);
    for (size_t gi = 0; gi < groups.size(); ++gi) {
      const Partial& p = groups[gi].measures[j];
      if (measure.op == AggregateOp::kCount) {
        o.Value<uint64_t>(p.count);
        continue;
      }
      if (!p.any || (measure.op == AggregateOp::kMean && p.count == 0)) {
        o.Null(width);
        continue;
      }
      if (measure.op == AggregateOp::kMean) {
        const double mean = p.real / static_cast<double>(p.count);
        if (result == ColumnType::kFloat32) {
          o.Value<float>(static_cast<float>(mean));
        } else {
          o.Value<double>(mean);
        }
        continue;
      }
      if (IsInteger(t)) {
        const bool is_signed = t == ColumnType::kInt32 || t == ColumnType::kInt64;
        const __int128 v = p.integer;
        const bool fits = is_signed ? (v >= std::numeric_limits<int64_t>::min() &&
                                       v <= std::numeric_limits<int64_t>::max())
                                    : (v >= 0 && v <= static_cast<__int128>(
                                                          std::numeric_limits<uint64_t>::max()));
        if (!fits) {
          return absl::OutOfRangeError(absl::StrCat(
              "the aggregate's measure \"", measure.name, "\" leaves the 64-bit range in group ",
              gi, ": its exact sum over the shards does not fit ",
              std::string(engine::ColumnTypeName(t))));
        }
        if (width == 4) {
          o.Value<uint32_t>(static_cast<uint32_t>(static_cast<uint64_t>(v)));
        } else {
          o.Value<uint64_t>(static_cast<uint64_t>(v));
        }
      } else if (t == ColumnType::kFloat64) {
        o.Value<double>(p.real);
      } else {
        o.Value<float>(p.real32);
      }
    }
    made[measure.name] = o.Finish();
  }
  // The caller's order: group-by columns, then measures; then the steps after.
  std::vector<v1::Column> columns;
  for (const std::string& g : plan.group_by) columns.push_back(made[g]);
  for (const GroupsPlan::Measure& m : plan.measures) columns.push_back(made[m.name]);
  uint64_t rows = groups.size();
  for (const v1::PlanStep& step : plan.after) {
    if (step.has_project()) {
      std::vector<v1::Column> next;
      for (const v1::ProjectColumn& p : step.project().columns()) {
        auto it = std::find_if(columns.begin(), columns.end(),
                               [&](const v1::Column& c) { return c.name() == p.column(); });
        if (it == columns.end()) {
          return absl::InternalError(absl::StrCat("project: no column \"", p.column(), "\""));
        }
        v1::Column c = *it;
        if (!p.name().empty()) c.set_name(p.name());
        next.push_back(std::move(c));
      }
      columns = std::move(next);
    } else if (step.has_limit() && step.limit().rows() < rows) {
      rows = step.limit().rows();
      std::vector<uint32_t> keep(rows);
      for (uint64_t r = 0; r < rows; ++r) keep[r] = static_cast<uint32_t>(r);
      for (v1::Column& c : columns) {
        GPUJOIN_ASSIGN_OR_RETURN(v1::Column cut, TakeColumnRows(c, keep, c.name()));
        cut.set_null_count(0);
        for (uint64_t r = 0; r < rows; ++r) cut.set_null_count(cut.null_count() + !Valid(cut, r));
        c = std::move(cut);
      }
    }
  }
  out.columns = std::move(columns);
  out.rows = rows;
  return out;
}

}  // namespace gpujoin::server::router
