#include "router/plan_routing.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gpujoin/common/status_macros.hpp"
#include "gpujoin/engine/partition.hpp"
#include "router/wire_rows.hpp"
#include "wire/column_check.hpp"
#include "wire/column_codec.hpp"

namespace gpujoin::server::router {
namespace {

absl::Status Unsupported(int step, const char* kind, const std::string& why) {
  return absl::UnimplementedError(absl::StrCat(
      "steps[", step, "] (", kind, "): gpujoin-router (or gpujoind --devices) cannot split this plan over ",
      "its parts: ", why,
      " (docs/operations.md, \"Sharding\"; send it to a gpujoind of one device)"));
}

}  // namespace

absl::StatusOr<PlanRouting> RoutePlan(const v1::Plan& plan,
                                      const google::protobuf::RepeatedPtrField<v1::Column>& inputs,
                                      const DescribeIndex& describe) {
  PlanRouting out;
  out.shard_plan = plan;
  // Where each column name comes from: an input column, or none (made by a
  // step); and its type.
  std::map<std::string, std::optional<std::string>> origin;
  std::map<std::string, int> type;
  for (const v1::Column& c : inputs) type[c.name()] = c.type();
  for (const v1::Column& c : inputs) {
    const std::string& name = c.name();
    if (name == kRowColumn) {
      return absl::InvalidArgumentError(absl::StrCat(
          "columns: \"", kRowColumn, "\" is the name gpujoin-router (and gpujoind --devices) gives its row numbers"));
    }
    origin[name] = name;
  }
  int first_lookup = -1;
  std::vector<int> key_types;
  bool limited = false;
  for (int i = 0; i < plan.steps_size(); ++i) {
    const v1::PlanStep& step = plan.steps(i);
    if (limited && !step.has_project() && !step.has_limit()) {
      return Unsupported(i, "after a limit",
                         absl::StrCat("only project and limit steps may follow the limit of steps[",
                                      out.first_limit, "]"));
    }
    if (step.has_aggregate()) {
      // The shards run the plan up to its aggregate, with partial measures;
      // the router merges their groups and runs the steps after it.
      out.aggregate_step = i;
      std::set<std::string> floats;
      for (const auto& [name, t] : type) {
        if (t == v1::COLUMN_TYPE_FLOAT32 || t == v1::COLUMN_TYPE_FLOAT64) floats.insert(name);
      }
      *out.shard_plan.mutable_steps(i)->mutable_aggregate() =
          ShardAggregate(step.aggregate(), kRowColumn, floats, &out.groups);
      // The columns after it, which the router's own project steps name.
      std::vector<std::string> names(step.aggregate().group_by().begin(),
                                     step.aggregate().group_by().end());
      for (const GroupsPlan::Measure& m : out.groups.measures) names.push_back(m.name);
      for (int j = i + 1; j < plan.steps_size(); ++j) {
        const v1::PlanStep& after = plan.steps(j);
        if (!after.has_project() && !after.has_limit()) {
          return Unsupported(j, after.has_filter() ? "filter" : "lookup",
                             "after an aggregate the router runs only project and limit steps");
        }
        if (after.has_project()) {
          std::vector<std::string> next;
          for (int k = 0; k < after.project().columns_size(); ++k) {
            const v1::ProjectColumn& c = after.project().columns(k);
            if (std::find(names.begin(), names.end(), c.column()) == names.end()) {
              return absl::InvalidArgumentError(absl::StrCat(
                  "plan.steps[", j, "].project.columns[", k, "].column: no column \"", c.column(),
                  "\" at this step (it sees: ", absl::StrJoin(names, ", "), ")"));
            }
            next.push_back(c.name().empty() ? c.column() : c.name());
          }
          names = std::move(next);
        }
        out.groups.after.push_back(after);
        out.groups.after_positions.push_back(static_cast<uint32_t>(j));
      }
      out.shard_plan.mutable_steps()->DeleteSubrange(i + 1, plan.steps_size() - i - 1);
      break;
    }
    if (step.has_lookup()) {
      const v1::LookupStep& lookup = step.lookup();
      GPUJOIN_ASSIGN_OR_RETURN(const v1::IndexInfo info, describe(lookup.index()));
      // Every shard holds every row of a replicated index: its lookup runs
      // on any shard's rows, by any key (an input or an earlier step's column).
      const bool anywhere = info.placement() == v1::INDEX_PLACEMENT_REPLICATED;
      if (anywhere) out.replicated.push_back(lookup.index());
      std::vector<std::string> key;
      for (const std::string& k : anywhere ? std::vector<std::string>() :
                                             std::vector<std::string>(lookup.key().begin(),
                                                                      lookup.key().end())) {
        auto it = origin.find(k);
        if (it == origin.end() || !it->second.has_value()) {
          return Unsupported(i, "lookup",
                             absl::StrCat("its key column \"", k,
                                          "\" is not an input column (the router splits the rows "
                                          "by input columns)"));
        }
        key.push_back(*it->second);
      }
      const v1::KeyType key_type = info.key_type();
      std::vector<int> types;
      for (const v1::KeyColumnSpec& k : info.key_columns()) types.push_back(k.type());
      if (anywhere) {
        // Not a key the rows are split by.
      } else if (first_lookup < 0) {
        first_lookup = i;
        out.key = key;
        out.key_type = key_type;
        key_types = types;
      } else if (key != out.key || key_type != out.key_type || types != key_types) {
        return Unsupported(
            i, "lookup",
            absl::StrCat("it looks up by (", absl::StrJoin(key, ", "), ") on a ",
                         v1::KeyType_Name(key_type), " index, but steps[", first_lookup,
                         "] by (", absl::StrJoin(out.key, ", "), ") on a ",
                         v1::KeyType_Name(out.key_type),
                         " index: the router splits a plan by one key its lookups share"));
      }
      const std::string prefix = lookup.prefix();
      for (const std::string& s : lookup.select()) {
        origin[prefix + s] = std::nullopt;
        for (const v1::PayloadColumnInfo& p : info.payload()) {
          if (p.name() == s) type[prefix + s] = p.type();
        }
      }
      const std::string found =
          lookup.found_column().empty() ? lookup.index() + ".found" : lookup.found_column();
      origin[found] = std::nullopt;
      type[found] = v1::COLUMN_TYPE_BOOL;
    } else if (step.has_project()) {
      std::map<std::string, std::optional<std::string>> next;
      std::map<std::string, int> next_type;
      for (const v1::ProjectColumn& c : step.project().columns()) {
        auto it = origin.find(c.column());
        const std::string name = c.name().empty() ? c.column() : c.name();
        next[name] = it == origin.end() ? std::nullopt : it->second;
        next_type[name] = type.count(c.column()) ? type[c.column()] : 0;
      }
      origin = std::move(next);
      type = std::move(next_type);
      v1::ProjectColumn* keep = out.shard_plan.mutable_steps(i)->mutable_project()->add_columns();
      keep->set_column(kRowColumn);
    } else if (step.has_limit() && !limited) {
      limited = true;
      out.first_limit = i;
    }
  }
  out.passed.assign(plan.steps_size(), 0);
  return out;
}

namespace {

// Key words of an integer key column as the index's key type: a null, or a
// value the type cannot hold, has none (the row is missing everywhere).
template <class K>
absl::Status KeyWords(const v1::Column& c, const std::string& field, std::vector<K>* words,
                      std::vector<uint8_t>* present) {
  GPUJOIN_ASSIGN_OR_RETURN(const engine::ColumnType type, FromWireColumnType(c.type(), field));
  GPUJOIN_RETURN_IF_ERROR(CheckColumnBuffers(c, type, field).status());
  const uint64_t rows = c.length();
  words->assign(rows, 0);
  present->assign(rows, 0);
  const bool integer = type == engine::ColumnType::kInt32 || type == engine::ColumnType::kInt64 ||
                       type == engine::ColumnType::kUint32 || type == engine::ColumnType::kUint64;
  if (!integer) return absl::OkStatus();  // the plan is refused by the shards
  const uint64_t width = engine::ColumnWidth(type);
  const bool is_signed = type == engine::ColumnType::kInt32 || type == engine::ColumnType::kInt64;
  for (uint64_t r = 0; r < rows; ++r) {
    if (!c.validity().empty() && !((static_cast<uint8_t>(c.validity()[r / 8]) >> (r % 8)) & 1u)) {
      continue;
    }
    __int128 v = 0;
    const char* at = c.data().data() + r * width;
    if (width == 4) {
      if (is_signed) {
        int32_t x;
        std::memcpy(&x, at, 4);
        v = x;
      } else {
        uint32_t x;
        std::memcpy(&x, at, 4);
        v = x;
      }
    } else if (is_signed) {
      int64_t x;
      std::memcpy(&x, at, 8);
      v = x;
    } else {
      uint64_t x;
      std::memcpy(&x, at, 8);
      v = x;
    }
    if (v < 0 || v >= static_cast<__int128>(std::numeric_limits<K>::max())) continue;
    (*words)[r] = static_cast<K>(v);
    (*present)[r] = 1;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<uint32_t>> PartsOf(const PlanRouting& routing,
                                              const v1::QueryRequest& request, uint64_t rows,
                                              uint32_t n) {
  std::vector<uint32_t> parts(rows, 0);
  if (routing.key.empty()) {
    for (uint64_t r = 0; r < rows; ++r) parts[r] = static_cast<uint32_t>(r * n / rows);
    return parts;
  }
  std::vector<const v1::Column*> key;
  for (const std::string& name : routing.key) {
    const v1::Column* found = nullptr;
    for (const v1::Column& c : request.columns()) {
      if (c.name() == name) found = &c;
    }
    if (found == nullptr || found->length() != rows) return parts;  // the shards refuse the batch
    key.push_back(found);
  }
  if (routing.key_type == v1::KEY_TYPE_COLUMNS) {
    google::protobuf::RepeatedPtrField<v1::Column> columns;
    for (const v1::Column* c : key) *columns.Add() = *c;
    std::vector<std::vector<int32_t>> offsets;
    GPUJOIN_ASSIGN_OR_RETURN(engine::KeyColumns keys, KeyColumnsOf(columns, "columns", &offsets));
    engine::PartitionsOf(keys, n, parts);
    return parts;
  }
  std::vector<uint8_t> present;
  const std::string field = absl::StrCat("columns (\"", routing.key[0], "\")");
  if (routing.key_type == v1::KEY_TYPE_UINT64) {
    std::vector<uint64_t> words;
    GPUJOIN_RETURN_IF_ERROR(KeyWords(*key[0], field, &words, &present));
    engine::PartitionsOf(std::span<const uint64_t>(words), n, parts);
  } else {
    std::vector<uint32_t> words;
    GPUJOIN_RETURN_IF_ERROR(KeyWords(*key[0], field, &words, &present));
    engine::PartitionsOf(std::span<const uint32_t>(words), n, parts);
  }
  for (uint64_t r = 0; r < rows; ++r) {
    if (present[r] == 0) parts[r] = 0;
  }
  return parts;
}

uint64_t LimitChain(const v1::Plan& plan, PlanRouting* routing,
                    std::vector<v1::StepStatistics>* steps) {
  if (routing->first_limit < 0) return std::numeric_limits<uint64_t>::max();
  auto stat = [&](int i) -> v1::StepStatistics& {
    for (v1::StepStatistics& st : *steps) {
      if (st.step() == static_cast<uint32_t>(i)) return st;
    }
    v1::StepStatistics& st = steps->emplace_back();
    st.set_step(static_cast<uint32_t>(i));
    st.set_kind(plan.steps(i).has_limit() ? "limit" : "project");
    return st;
  };
  uint64_t in = stat(routing->first_limit).rows_in();
  for (int i = routing->first_limit; i < plan.steps_size(); ++i) {
    v1::StepStatistics& st = stat(i);
    st.set_rows_in(in);
    if (plan.steps(i).has_limit()) {
      const uint64_t rows = plan.steps(i).limit().rows();
      const uint64_t pass = std::min(in, rows - std::min(rows, routing->passed[i]));
      routing->passed[i] += pass;
      in = pass;
    }
    st.set_rows_out(in);
  }
  std::sort(steps->begin(), steps->end(),
            [](const v1::StepStatistics& a, const v1::StepStatistics& b) { return a.step() < b.step(); });
  return in;
}


}  // namespace gpujoin::server::router
