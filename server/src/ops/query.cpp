// Query: plans in one round trip (docs/api.md "Query"). The first message's
// plan is compiled against its columns and the live indexes; every batch then
// runs it on the live versions of its indexes, each read-locked for the
// batch (in name order, so that two plans never wait on each other).
#include <algorithm>
#include <map>
#include <shared_mutex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gpujoin/common/status_macros.hpp"
#include "ops/operations.hpp"
#include "wire/names.hpp"
#include "wire/plan_wire.hpp"

namespace gpujoin::server {
namespace {

// The live versions of a plan's index slots, read-locked while they are held.
struct PlanIndexes {
  std::vector<std::shared_ptr<const IndexVersion>> versions;  // per slot
  std::vector<const engine::HashIndex*> pointers;             // per slot
  std::vector<uint64_t> sequences;                            // per slot
  std::vector<std::unique_ptr<IndexReadLock>> locks;          // per distinct version
};

// `replicated`: the indexes the router left to every shard (QueryRequest.replicated).
absl::Status AcquireIndexes(const CompiledPlan& plan, const IndexRegistry& registry,
                            const engine::ShardIdentity& shard,
                            const std::set<std::string>& replicated, PlanIndexes* out) {
  const size_t n = plan.indexes.size();
  out->versions.resize(n);
  out->pointers.assign(n, nullptr);
  out->sequences.assign(n, 0);
  std::map<std::string, const IndexVersion*> distinct;
  for (size_t i = 0; i < n; ++i) {
    const PlanIndexUse& use = plan.indexes[i];
    auto v = registry.Get(use.name);
    if (v == nullptr) {
      return absl::NotFoundError(absl::StrCat("index \"", use.name, "\" (lookup step ", use.step,
                                              ") not found: it was dropped"));
    }
    GPUJOIN_RETURN_IF_ERROR(CheckIndexUse(use, *v));
    GPUJOIN_RETURN_IF_ERROR(CheckPlacement(*v, shard, replicated.contains(use.name), false));
    distinct.emplace(use.name, v.get());
    out->versions[i] = std::move(v);
  }
  // One lock per version, in name order.
  std::map<const IndexVersion*, uint64_t> sequence;
  for (const auto& [name, v] : distinct) {
    out->locks.push_back(std::make_unique<IndexReadLock>(*v));
    sequence[v] = out->locks.back()->sequence();
  }
  for (size_t i = 0; i < n; ++i) {
    out->pointers[i] = out->versions[i]->index.get();
    out->sequences[i] = sequence[out->versions[i].get()];
  }
  return absl::OkStatus();
}

// The statistics of the steps that ran, with the versions the lookups used.
void FillSteps(const CompiledPlan& plan, const std::vector<engine::PlanStepStatistics>& stats,
               const PlanIndexes& indexes, v1::QueryResponse* out) {
  std::vector<int> slot_of_step(plan.plan.steps.size(), -1);
  for (size_t s = 0; s < plan.indexes.size(); ++s)
    slot_of_step[plan.indexes[s].step] = static_cast<int>(s);
  for (size_t i = 0; i < stats.size(); ++i) {
    if (!stats[i].ran) continue;
    v1::StepStatistics* st = out->add_steps();
    st->set_step(static_cast<uint32_t>(i));
    st->set_kind(plan.step_kinds[i]);
    st->set_rows_in(stats[i].rows_in);
    st->set_rows_out(stats[i].rows_out);
    const int slot = slot_of_step[i];
    if (slot >= 0 && static_cast<size_t>(slot) < indexes.versions.size() &&
        indexes.versions[slot] != nullptr) {
      st->set_index(plan.indexes[slot].name);
      st->set_index_version(indexes.versions[slot]->version);
      st->set_mutation_sequence(indexes.sequences[slot]);
      v1::QueryStatistics* q = st->mutable_statistics();
      q->set_found(stats[i].query.found);
      q->set_missing(stats[i].query.missing);
      q->set_total_probes(stats[i].query.total_probes);
      q->set_max_probes(stats[i].query.max_probes);
    }
  }
}

}  // namespace

absl::Status Operations::Query(QueryStream& stream, const v1::QueryRequest& request, bool end,
                               QueryAnswer* answer) {
  if (!end) stream.last_batch_id = request.batch_id();
  if (!stream.started) {
    stream.started = true;
    stream.replicated = {request.replicated().begin(), request.replicated().end()};
    stream.plan_error = [&]() -> absl::Status {
      if (end) return absl::InvalidArgumentError("the stream ended before its plan arrived");
      if (!request.has_plan()) {
        return absl::InvalidArgumentError(
            "plan: the first message of a Query stream carries the plan (and the first batch's "
            "columns)");
      }
      // The plan is checked against the first batch's names and types; a
      // fault in its buffers is that batch's error, below.
      std::vector<std::string> names;
      std::vector<engine::ColumnType> types;
      GPUJOIN_RETURN_IF_ERROR(DecodePlanSchema(request.columns(), &names, &types));
      GPUJOIN_ASSIGN_OR_RETURN(CompiledPlan compiled,
                               CompilePlan(request.plan(), std::move(names), std::move(types),
                                           [this](const std::string& name, std::string_view field) {
                                             return FindIndex(name, field);
                                           }));
      engine::PlanLimits limits;
      limits.max_table_bytes = ResultLimit();
      limits.bytes_limit_name = "--max-result-bytes";
      limits.max_groups = state_.config.max_aggregate_groups;
      limits.groups_limit_name = "--max-aggregate-groups";
      stream.run = std::make_unique<engine::PlanRun>(state_.backend, compiled.plan, limits);
      stream.compiled = std::move(compiled);
      stream.answers_end.store(stream.run->aggregates());
      return absl::OkStatus();
    }();
  } else if (!end && request.has_plan()) {
    return absl::InvalidArgumentError(
        "plan: only the first message of a Query stream carries the plan; start a new stream for "
        "another plan");
  }
  if (!stream.plan_error.ok()) {
    return absl::Status(stream.plan_error.code(), absl::StrCat("the stream's plan was refused: ",
                                                               stream.plan_error.message()));
  }
  const CompiledPlan& plan = *stream.compiled;
  engine::PlanRun& run = *stream.run;
  std::vector<engine::PlanStepStatistics> stats;

  if (!end && (request.columns_size() > 0 || !request.flush())) {
    GPUJOIN_ASSIGN_OR_RETURN(engine::PlanTable batch, DecodePlanColumns(request.columns()));
    if (batch.names != plan.input_names) {
      return absl::InvalidArgumentError(absl::StrCat(
          "columns: this batch sends columns (", absl::StrJoin(batch.names, ", "),
          ") but the stream's first batch sent (", absl::StrJoin(plan.input_names, ", "), ")"));
    }
    for (size_t i = 0; i < batch.columns.size(); ++i) {
      if (batch.columns[i].type != plan.input_types[i]) {
        return absl::InvalidArgumentError(absl::StrCat(
            "columns[", i, "].type: column \"", batch.names[i], "\" is ",
            std::string(engine::ColumnTypeName(batch.columns[i].type)), " in this batch but ",
            std::string(engine::ColumnTypeName(plan.input_types[i])),
            " in the stream's first batch"));
      }
    }
    PlanIndexes indexes;
    GPUJOIN_RETURN_IF_ERROR(AcquireIndexes(plan, *state_.registry, state_.config.shard,
                                           stream.replicated, &indexes));
    absl::StatusOr<engine::PlanTable> result =
        run.RunBatch(std::move(batch), indexes.pointers, &stats);
    if (!result.ok()) {
      if (!state_.backend->Healthy() && state_.on_backend_fatal) state_.on_backend_fatal();
      return result.status();
    }
    // A flush's statistics are filled with the groups' below.
    if (!run.aggregates() || !request.flush()) FillSteps(plan, stats, indexes, &answer->message);
    if (!run.aggregates()) {
      answer->table = *std::move(result);
      answer->has_rows = true;
    }
  }
  if (run.aggregates() && (end || request.flush())) {
    // The groups: the aggregate step and those after it report the stream
    // (rows folded in so far, groups out), the steps before it this batch's.
    std::vector<engine::PlanStepStatistics> group_stats;
    PlanIndexes indexes;
    GPUJOIN_RETURN_IF_ERROR(AcquireIndexes(plan, *state_.registry, state_.config.shard,
                                           stream.replicated, &indexes));
    GPUJOIN_ASSIGN_OR_RETURN(engine::PlanTable groups, run.Groups(indexes.pointers, &group_stats));
    const size_t at = plan.plan.AggregatePosition();
    for (size_t i = 0; i < group_stats.size(); ++i) {
      if (i < at && i < stats.size()) group_stats[i] = stats[i];
    }
    FillSteps(plan, group_stats, indexes, &answer->message);
    answer->table = std::move(groups);
    answer->has_rows = true;
  }
  if (end) answer->message.set_final(true);
  if (answer->has_rows) {
    answer->names = plan.output_names;
    answer->parts = PlanResultParts(answer->table, ResponseLimit());
  }
  return absl::OkStatus();
}

}  // namespace gpujoin::server
