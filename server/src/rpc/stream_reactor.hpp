// The bidi stream reactor shared by Lookup, Join, Aggregate and Hash: one
// response per batch, in request order, in-band batch errors, per-stream flow
// control (--max-inflight-per-stream), the global in-flight bound
// (--max-inflight-batches), graceful drain, and an unparseable message ending the
// stream with INVALID_ARGUMENT (never OK). What differs between the RPCs is
// in their traits (rpc_traits.hpp).
#pragma once

#include "rpc/stream_host.hpp"
#include "grpcpp/grpcpp.h"
#include "rpc/rpc_traits.hpp"

namespace gpujoin::server::detail {

/// A new reactor for one call of the stream RPC that `Traits` describes, served
/// on gRPC's raw API (messages parsed by Traits::Decode, so that one that does not
/// parse ends the stream with INVALID_ARGUMENT naming its position, after the
/// responses to the messages before it). It admits the call (auth, drain) through
/// `host`, registers itself for drain, and deletes itself in OnDone; gRPC owns
/// it until then. Instantiated in stream_reactor.cpp for the four traits below.
template <typename Traits>
grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* NewStreamReactor(
    StreamHost* host, grpc::CallbackServerContext* context);

extern template grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>*
NewStreamReactor<LookupTraits>(StreamHost*, grpc::CallbackServerContext*);
extern template grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>*
NewStreamReactor<JoinTraits>(StreamHost*, grpc::CallbackServerContext*);
extern template grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>*
NewStreamReactor<AggregateTraits>(StreamHost*, grpc::CallbackServerContext*);
extern template grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>*
NewStreamReactor<HashTraits>(StreamHost*, grpc::CallbackServerContext*);

}  // namespace gpujoin::server::detail
