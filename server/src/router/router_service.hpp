// RouterService: the gpujoin.v1 calls of gpujoin-router (router.hpp), each
// split over the shards by key, or fanned out, and merged.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gpujoin/v1/gpujoin.grpc.pb.h"
#include "router/router.hpp"
#include "router/shards.hpp"
#include "transport/auth.hpp"

namespace gpujoin::server::router {

/// One index over every shard: the shards' IndexInfos merged (ABORTED when
/// they serve different versions).
absl::StatusOr<v1::IndexInfo> MergeIndexInfos(const std::vector<v1::IndexInfo>& infos,
                                              const std::vector<std::string>& shard_names);

/// The service over `shards` (which, like the other arguments, outlive it).
std::unique_ptr<grpc::Service> MakeRouterService(const RouterConfig& config,
                                                 std::vector<Shard>* shards,
                                                 const TokenAuthenticator* auth,
                                                 std::string shard_token, ShardMetrics* metrics);

}  // namespace gpujoin::server::router
