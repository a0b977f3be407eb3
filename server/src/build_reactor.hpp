// The BuildIndex reactor: a client stream of build chunks, decoded and validated
// on the reactor as they arrive (BuildSession::Add), then one engine build and
// the atomic install on the executor; a cancelled call never installs its index.
#pragma once

#include "gpujoin/server/service.hpp"
#include "gpujoin/v1/gpujoin.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace gpujoin::server::detail {

/// A new reactor for one BuildIndex call. It admits the call (auth, drain)
/// through `service`, fills `response` (owned by gRPC) when the build succeeds,
/// counts the build and the RPC in the service's metrics, and deletes itself in
/// OnDone; gRPC owns it until then.
grpc::ServerReadReactor<v1::BuildIndexRequest>* NewBuildReactor(
    GpuJoinService* service, grpc::CallbackServerContext* context,
    v1::BuildIndexResponse* response);

}  // namespace gpujoin::server::detail
