// The streaming calls of gpujoin-router, one room each (route_*.cpp): how a
// call is split over the shards and how their answers merge
// (docs/operations.md "Sharding"). RouterService (router_service.cpp) serves
// them beside the calls that fan out to every shard.
#pragma once

#include "gpujoin/v1/gpujoin.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "router/shard_calls.hpp"

namespace gpujoin::server::router {

/// Build chunks split by key, with the router's global values (route_build.cpp).
grpc::Status RouteBuild(const ShardCalls& calls, grpc::ServerContext* ctx,
                        grpc::ServerReader<v1::BuildIndexRequest>* reader,
                        v1::BuildIndexResponse* response);

/// Lookup batches split by key, answers merged in input order (route_lookup.cpp).
grpc::Status RouteLookup(const ShardCalls& calls, grpc::ServerContext* ctx,
                         grpc::ServerReaderWriter<v1::LookupResponse, v1::LookupRequest>* stream);

/// Join batches split by left key, pairs merged by left row (route_join.cpp).
grpc::Status RouteJoin(const ShardCalls& calls, grpc::ServerContext* ctx,
                       grpc::ServerReaderWriter<v1::JoinResponse, v1::JoinRequest>* stream);

/// Aggregate batches split by rows, partial results merged (route_aggregate.cpp).
grpc::Status RouteAggregate(
    const ShardCalls& calls, grpc::ServerContext* ctx,
    grpc::ServerReaderWriter<v1::AggregateResponse, v1::AggregateRequest>* stream);

/// Mutate batches split by key, counts summed (route_mutate.cpp).
grpc::Status RouteMutate(const ShardCalls& calls, grpc::ServerContext* ctx,
                         grpc::ServerReaderWriter<v1::MutateResponse, v1::MutateRequest>* stream);

/// Row plans whose lookups share one key, split by it and merged in input
/// order (route_query.cpp); other plans UNIMPLEMENTED naming the step.
grpc::Status RouteQuery(const ShardCalls& calls, grpc::ServerContext* ctx,
                        grpc::ServerReaderWriter<v1::QueryResponse, v1::QueryRequest>* stream);

}  // namespace gpujoin::server::router
