// The BuildIndex reactor: a client stream of build chunks, decoded and validated
// on the reactor as they arrive (BuildSession::Add), then one engine build and
// the atomic install on the executor. A stream that ends with an error (an
// unparseable or invalid message, a cancel, a deadline) never installs its index.
#pragma once

#include "rpc/stream_host.hpp"
#include "gpujoin/v1/gpujoin.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace gpujoin::server::detail {

/// A new reactor for one BuildIndex call, served on gRPC's raw API: each message
/// is parsed here, so that one that does not parse fails the build with
/// INVALID_ARGUMENT naming its position, and nothing is installed. It admits the
/// call (auth, drain) through `host`, serialises the BuildIndexResponse into
/// `response` (owned by gRPC) when the build succeeds, counts the build and the
/// RPC in the host's metrics, and deletes itself in OnDone; gRPC owns it until
/// then.
grpc::ServerReadReactor<grpc::ByteBuffer>* NewBuildReactor(StreamHost* host,
                                                           grpc::CallbackServerContext* context,
                                                           grpc::ByteBuffer* response);

}  // namespace gpujoin::server::detail
