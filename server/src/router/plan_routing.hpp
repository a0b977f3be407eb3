// How gpujoin-router splits a Query plan over its shards (route_query.cpp):
// the plan checked for a key its partitioned lookups share (an input key,
// indexes of one key type; a replicated index's lookup may use any key), the
// plan each shard runs (its project steps keeping the router's row numbers,
// its aggregate with partial measures), the shard of every row of a batch,
// and the plan's trailing limits run again over merged rows.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gpujoin/v1/gpujoin.pb.h"
#include "router/plan_groups.hpp"

namespace gpujoin::server::router {

/// The column of global input row numbers the router adds to every batch.
inline constexpr const char* kRowColumn = "__gpujoin_router_row";

// How a plan is split over the shards.
struct PlanRouting {
  /// The input columns the lookups' key is made of (empty: no lookup; rows
  /// are then split in ranges).
  std::vector<std::string> key;
  v1::KeyType key_type = v1::KEY_TYPE_UNSPECIFIED;
  /// The indexes of lookups the shards run on their own rows because every
  /// shard holds all of them (IndexSpec.placement replicated): sent as
  /// QueryRequest.replicated, so that a shard refuses a batch if one is not
  /// replicated any more.
  std::vector<std::string> replicated;
  /// The plan each shard runs: the caller's, its project steps keeping the
  /// row column.
  v1::Plan shard_plan;
  /// Row plans: the first limit step (only project and limit steps follow
  /// it), whose chain the router runs again over the merged rows; the rows
  /// each step of the chain let through so far.
  int first_limit = -1;
  std::vector<uint64_t> passed;
  /// Aggregate plans: the aggregate's position, and how its groups merge.
  int aggregate_step = -1;
  GroupsPlan groups;
};

/// An index's IndexInfo, by name (a DescribeIndex over the shards).
using DescribeIndex = std::function<absl::StatusOr<v1::IndexInfo>(const std::string&)>;

/// The routing of `plan` over the first batch's columns `inputs`:
/// UNIMPLEMENTED naming the step the router cannot split; INVALID_ARGUMENT
/// (and the describe's errors) for what one server would refuse too.
absl::StatusOr<PlanRouting> RoutePlan(const v1::Plan& plan,
                                      const google::protobuf::RepeatedPtrField<v1::Column>& inputs,
                                      const DescribeIndex& describe);

/// The shard of every row of `request`'s batch of `rows` rows (checked):
/// by the lookups' key (a row without one: shard 0), else in ranges.
absl::StatusOr<std::vector<uint32_t>> PartsOf(const PlanRouting& routing,
                                              const v1::QueryRequest& request, uint64_t rows,
                                              uint32_t n);

/// The rows a row plan's limits let through of this batch, as one server
/// runs them: the rows reaching the first limit (from the shards' `steps`),
/// then each step of the chain after it with its own count over the stream
/// (`routing->passed`). `steps` get the chain's statistics. Without a limit:
/// every row.
uint64_t LimitChain(const v1::Plan& plan, PlanRouting* routing,
                    std::vector<v1::StepStatistics>* steps);

}  // namespace gpujoin::server::router
