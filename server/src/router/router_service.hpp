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

/// The service over `shards` (which, like the other arguments, outlive it).
std::unique_ptr<grpc::Service> MakeRouterService(const RouterConfig& config,
                                                 std::vector<Shard>* shards,
                                                 const TokenAuthenticator* auth,
                                                 std::string shard_token, ShardMetrics* metrics);

}  // namespace gpujoin::server::router
