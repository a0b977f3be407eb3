// The groups of an aggregate plan run on every shard, merged by gpujoin-router
// (route_query.cpp): each shard answers its rows' groups with partial
// measures (a mean with its count) and the first router row number of each
// group; the router merges groups with equal group-by values, forms the
// measures as one gpujoind would (integer sums exact, OUT_OF_RANGE past 64
// bits; floats in their own width, in another order; a mean as the shards'
// means weighted by their counts, in float64), orders the groups by their
// first row, and applies the plan's project and limit steps after the
// aggregate. A sum whose part on one shard leaves 64 bits is OUT_OF_RANGE
// there, also when the whole sum would fit.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gpujoin/engine/types.hpp"
#include "gpujoin/v1/gpujoin.pb.h"

namespace gpujoin::server::router {

/// The column of each group's first router row number in a shard's groups.
inline constexpr const char* kFirstRowColumn = "__gpujoin_router_first";

/// How an aggregate step is run on the shards and merged.
struct GroupsPlan {
  struct Measure {
    engine::AggregateOp op = engine::AggregateOp::kCount;
    std::string name;     ///< the caller's output column
    std::string partial;  ///< the shards' column: the count, sum, min or max
    std::string count;    ///< mean: the shards' count column (`partial` is their mean)
  };
  std::vector<std::string> group_by;
  std::vector<Measure> measures;
  /// The steps after the aggregate (project and limit only).
  std::vector<v1::PlanStep> after;
  /// Their positions in the caller's plan.
  std::vector<uint32_t> after_positions;
};

/// The aggregate step the shards run for `step` (measures renamed to hidden
/// partial columns, a mean with the count of the values it takes: finite
/// ones for the columns named in `float_columns`, the first row number
/// added), and how to merge its answers.
v1::AggregateStep ShardAggregate(const v1::AggregateStep& step, const std::string& row_column,
                                 const std::set<std::string>& float_columns, GroupsPlan* plan);

/// The merged groups of every shard's answer messages (`answers[s]`), as the
/// caller's columns and the statistics of the steps after the aggregate.
struct MergedGroups {
  std::vector<v1::Column> columns;
  uint64_t rows = 0;
  uint64_t groups = 0;  ///< before the limit
};
absl::StatusOr<MergedGroups> MergeGroups(
    const GroupsPlan& plan, const std::vector<std::vector<v1::QueryResponse>>& answers);

}  // namespace gpujoin::server::router
