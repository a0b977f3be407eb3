#include "commands/query/query_flags.hpp"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "columns/payload.hpp"
#include "gpujoin/common/status_macros.hpp"

namespace gpujoin::cli {
namespace {

absl::Status Fail(std::string message) {
  return absl::InvalidArgumentError(absl::StrCat("query: ", message));
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

constexpr char kLookupSyntax[] =
    "write INDEX:COL (the column holding the key), INDEX:COL1,COL2 (a composite key, in the "
    "index's order) or INDEX:KEY=COL,... (each key column of the index from a column)";

// "site:str, room:str", or the integer key's type.
std::string KeyText(const client::IndexInfo& index) {
  if (index.key_type != client::KeyType::kColumns) {
    return absl::StrCat("one ", std::string(client::KeyTypeName(index.key_type)), " key");
  }
  return absl::StrCat(
      "key columns ",
      absl::StrJoin(index.key_columns, ", ", [](std::string* out, const client::KeyColumnSpec& k) {
        absl::StrAppend(out, k.name, ":", std::string(SchemaTypeName(k.type)));
      }));
}

}  // namespace

absl::StatusOr<std::vector<LookupFlag>> ParseLookupFlags(const std::vector<OrderedFlag>& ordered) {
  std::vector<LookupFlag> out;
  bool select_given = false, prefix_given = false, how_given = false;
  for (const OrderedFlag& f : ordered) {
    if (f.flag == "--lookup") {
      LookupFlag l;
      l.spec = f.value;
      const std::string_view spec = Trim(f.value);
      const size_t colon = spec.find(':');
      l.index = std::string(Trim(spec.substr(0, colon)));
      if (l.index.empty()) return Fail(absl::StrCat("--lookup '", f.value, "': ", kLookupSyntax));
      if (colon != std::string_view::npos) {
        const std::vector<std::string> items = SplitList(spec.substr(colon + 1));
        if (items.empty()) {
          return Fail(
              absl::StrCat("--lookup '", f.value, "' names no key column: ", kLookupSyntax));
        }
        for (const std::string& item : items) {
          const size_t eq = item.find('=');
          if ((eq == std::string::npos) != l.keys.empty() && !l.columns.empty()) {
            return Fail(absl::StrCat("--lookup '", f.value,
                                     "': give every key column as KEY=COL, or none (COL,COL in "
                                     "the index's order)"));
          }
          if (eq == std::string::npos) {
            l.columns.push_back(item);
            continue;
          }
          const std::string key(Trim(std::string_view(item).substr(0, eq)));
          const std::string col(Trim(std::string_view(item).substr(eq + 1)));
          if (key.empty() || col.empty()) {
            return Fail(absl::StrCat("--lookup '", f.value, "': '", item,
                                     "' needs a key column and a column: KEY=COL"));
          }
          l.keys.push_back(key);
          l.columns.push_back(col);
        }
      }
      out.push_back(std::move(l));
      select_given = prefix_given = how_given = false;
      continue;
    }
    if (out.empty()) {
      return Fail(absl::StrCat(f.flag, " '", f.value,
                               "' comes before any --lookup: it applies to the --lookup before it "
                               "(--lookup INDEX:COL ",
                               f.flag, " ...)"));
    }
    LookupFlag& l = out.back();
    bool& given = f.flag == "--select"   ? select_given
                  : f.flag == "--prefix" ? prefix_given
                                         : how_given;
    if (given) {
      return Fail(absl::StrCat(f.flag, " is given twice for --lookup '", l.spec,
                               "' (each --lookup takes one)"));
    }
    given = true;
    if (f.flag == "--select") {
      l.select = f.value;
    } else if (f.flag == "--prefix") {
      l.prefix = f.value;
    } else if (f.value == "inner") {
      l.kind = client::JoinKind::kInner;
    } else if (f.value == "left") {
      l.kind = client::JoinKind::kLeftOuter;
    } else if (f.value == "semi") {
      l.kind = client::JoinKind::kLeftSemi;
    } else if (f.value == "anti") {
      l.kind = client::JoinKind::kLeftAnti;
    } else {
      return Fail(absl::StrCat("--how '", f.value, "' (for --lookup '", l.spec,
                               "'): expected inner, left, semi or anti"));
    }
  }
  return out;
}

absl::StatusOr<std::vector<std::string>> LookupKeyColumns(const LookupFlag& flag,
                                                          const client::IndexInfo& index) {
  const std::string what =
      absl::StrCat("--lookup '", flag.spec, "': index '", index.name, "' has ", KeyText(index));
  if (index.key_type != client::KeyType::kColumns) {
    if (flag.columns.size() != 1) {
      return Fail(
          absl::StrCat(what, ": give the one column holding it (--lookup ", index.name, ":COL)"));
    }
    return flag.columns;
  }
  const auto& schema = index.key_columns;
  std::vector<std::string> out;
  if (flag.columns.empty()) {
    // A bare INDEX: the columns named as the index's key columns.
    for (const client::KeyColumnSpec& k : schema) out.push_back(k.name);
    return out;
  }
  if (flag.keys.empty()) {
    if (flag.columns.size() != schema.size()) {
      return Fail(absl::StrCat(what, ": give ", schema.size(), " column",
                               schema.size() == 1 ? "" : "s",
                               " in that order (or KEY=COL pairs), not ", flag.columns.size()));
    }
    return flag.columns;
  }
  for (const client::KeyColumnSpec& k : schema) {
    const auto it = std::find(flag.keys.begin(), flag.keys.end(), k.name);
    if (it == flag.keys.end()) {
      return Fail(
          absl::StrCat(what, ": key column '", k.name, "' is not given (", k.name, "=COL)"));
    }
    if (std::find(it + 1, flag.keys.end(), k.name) != flag.keys.end()) {
      return Fail(
          absl::StrCat("--lookup '", flag.spec, "': key column '", k.name, "' is given twice"));
    }
    out.push_back(flag.columns[it - flag.keys.begin()]);
  }
  for (const std::string& key : flag.keys) {
    if (std::none_of(schema.begin(), schema.end(),
                     [&](const client::KeyColumnSpec& k) { return k.name == key; })) {
      return Fail(absl::StrCat(what, ": '", key, "' is not one of them"));
    }
  }
  return out;
}

absl::StatusOr<std::vector<client::QueryProjectColumn>> ParseProject(std::string_view text) {
  std::vector<client::QueryProjectColumn> out;
  const std::vector<std::string> items = SplitList(text);
  if (items.empty()) return Fail("--project names no column (--project a,b=new_name)");
  for (const std::string& item : items) {
    const size_t eq = item.find('=');
    client::QueryProjectColumn c;
    c.column = std::string(Trim(std::string_view(item).substr(0, eq)));
    if (eq != std::string::npos) c.name = std::string(Trim(std::string_view(item).substr(eq + 1)));
    if (c.column.empty() || (eq != std::string::npos && c.name.empty())) {
      return Fail(absl::StrCat("--project '", item, "': write COL or COL=NEW_NAME"));
    }
    out.push_back(std::move(c));
  }
  return out;
}

absl::StatusOr<client::QueryPlan> BuildQueryPlan(const QueryArgs& a,
                                                 const std::vector<LookupFlag>& lookups,
                                                 const std::vector<client::IndexInfo>& indexes) {
  client::QueryPlan plan;
  for (size_t i = 0; i < lookups.size(); ++i) {
    const LookupFlag& f = lookups[i];
    const client::IndexInfo& info = indexes[i];
    client::QueryLookup step;
    step.index = f.index;
    GPUJOIN_ASSIGN_OR_RETURN(step.key, LookupKeyColumns(f, info));
    std::vector<std::string> payload;
    for (const client::PayloadColumnInfo& p : info.payload) payload.push_back(p.name);
    if (!f.select) {
      step.select = payload;
    } else {
      for (const std::string& name : SplitList(*f.select)) {
        if (std::find(payload.begin(), payload.end(), name) == payload.end()) {
          return Fail(absl::StrCat("--select '", name, "' (for --lookup '", f.spec, "'): index '",
                                   info.name, "' has no payload column '", name, "' (",
                                   payload.empty()
                                       ? std::string("it stores no payload")
                                       : absl::StrCat("payload: ", absl::StrJoin(payload, ", ")),
                                   ")"));
        }
        if (std::find(step.select.begin(), step.select.end(), name) != step.select.end()) {
          return Fail(
              absl::StrCat("--select '", name, "' (for --lookup '", f.spec, "') is given twice"));
        }
        step.select.push_back(name);
      }
    }
    step.prefix = f.prefix;
    step.kind = f.kind;
    plan.Lookup(std::move(step));
  }
  for (const std::string& where : a.where) {
    if (Trim(where).empty()) return Fail("--where is empty (--where 'latency_ms > 2')");
    plan.Filter(where);
  }
  if (a.group_by || a.agg) {
    client::QueryAggregate step;
    if (a.group_by) {
      step.group_by = SplitList(*a.group_by);
      if (step.group_by.empty()) return Fail("--group-by names no column (--group-by a,b)");
    }
    if (a.agg) {
      auto measures = client::ParseMeasures(*a.agg);
      if (!measures.ok()) {
        return Fail(absl::StrCat("--agg '", *a.agg, "': ", measures.status().message()));
      }
      step.measures = *std::move(measures);
    } else {
      step.measures.push_back(client::QueryMeasure{});  // count()
    }
    plan.Add(std::move(step));
  }
  if (a.project) {
    GPUJOIN_ASSIGN_OR_RETURN(std::vector<client::QueryProjectColumn> columns,
                             ParseProject(*a.project));
    plan.Project(std::move(columns));
  }
  if (a.limit) plan.Limit(*a.limit);
  if (plan.steps().empty()) {
    return Fail(
        "the plan has no steps: give --lookup, --where, --group-by, --agg, --project or "
        "--limit");
  }
  return plan;
}

std::vector<std::string> StepFlags(const QueryArgs& a, const std::vector<LookupFlag>& lookups) {
  std::vector<std::string> out;
  for (const LookupFlag& l : lookups) out.push_back(absl::StrCat("--lookup '", l.spec, "'"));
  for (const std::string& w : a.where) out.push_back(absl::StrCat("--where '", w, "'"));
  if (a.group_by || a.agg) {
    std::string flags;
    if (a.group_by) absl::StrAppend(&flags, "--group-by '", *a.group_by, "'");
    if (a.agg) absl::StrAppend(&flags, a.group_by ? " " : "", "--agg '", *a.agg, "'");
    out.push_back(std::move(flags));
  }
  if (a.project) out.push_back(absl::StrCat("--project '", *a.project, "'"));
  if (a.limit) out.push_back(absl::StrCat("--limit ", *a.limit));
  return out;
}

std::string FailedQueryWhat(const absl::Status& status,
                            const std::vector<std::string>& step_flags) {
  constexpr std::string_view kStep = "plan.steps[";
  const std::string m(status.message());
  const size_t at = m.find(kStep);
  if (at == std::string_view::npos) return "query";
  size_t step = 0, i = at + kStep.size();
  if (i >= m.size() || m[i] < '0' || m[i] > '9') return "query";
  for (; i < m.size() && m[i] >= '0' && m[i] <= '9'; ++i) step = step * 10 + (m[i] - '0');
  if (i >= m.size() || m[i] != ']' || step >= step_flags.size()) return "query";
  return absl::StrCat("query ", step_flags[step]);
}

}  // namespace gpujoin::cli
