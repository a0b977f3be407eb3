// Merging what the shards answered into one answer (gpujoin-router): build
// and query statistics summed (maxima kept), IndexInfos merged, and the check
// that every shard served the same version of an index.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gpujoin/v1/gpujoin.pb.h"
#include "grpcpp/grpcpp.h"
#include "router/shard_calls.hpp"

namespace gpujoin::server::router {

/// Adds b into a, keeping the maxima of max fields.
void AddBuildStatistics(v1::BuildStatistics* a, const v1::BuildStatistics& b);
void AddQueryStatistics(v1::QueryStatistics* a, const v1::QueryStatistics& b);

/// One index over every shard: the shards' IndexInfos merged (ABORTED when
/// they serve different versions).
absl::StatusOr<v1::IndexInfo> MergeIndexInfos(const std::vector<v1::IndexInfo>& infos,
                                              const std::vector<std::string>& shard_names);

/// The least version a build or load through the router gives an index on
/// every shard (IndexSpec.min_version): the router's clock in milliseconds, or
/// `asked` when larger. Every shard's part then has the same version, also a
/// shard that restarted and counts its builds afresh.
uint64_t RouterVersion(uint64_t asked);

/// ABORTED naming two shards that served `index` at different versions, else OK.
grpc::Status SameVersion(const ShardCalls& calls, const std::string& index,
                         const std::vector<uint64_t>& versions);

}  // namespace gpujoin::server::router
