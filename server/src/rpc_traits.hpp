// The RPC traits: what each bidi stream RPC (Lookup, Join, Aggregate, Hash) plugs
// into the shared StreamReactor (stream_reactor.hpp).
//
// A traits type describes one RPC: its messages and how they meet the wire, the
// per-batch work (on the executor), cheap in-order admission (on the reactor) and
// the in-order completion step before a response is written. StreamReactor<T>
// uses these members of T:
//   Request, Response, Partial      the Item's types (Partial: per-batch state
//                                   handed from Process to Complete)
//   ReadMessage, WriteMessage       what gRPC reads into and writes from
//   kRpc                            the `rpc` label and log name
//   T(const ServiceState&)          one per stream, constructed with the reactor
//   Admit(request)                  in read order, on the reactor thread
//   Complete(request, out, partial) in write order, before the write
//   static ReadTarget, Decode, Process, SetBatchError, Seal, Rows
//   static kMayInline, InlineCost   whether and up to which work bound a batch
//                                   may run on the gRPC thread (CPU backend)
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "absl/status/status.h"
#include "gpujoin/server/lookup_wire.hpp"
#include "gpujoin/server/operations.hpp"
#include "gpujoin/v1/gpujoin.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace gpujoin::server::detail {

/// Rows of a U32Column (packed bytes / 4 plus typed values); 0 when absent.
uint64_t U32Rows(bool has, const v1::U32Column& c);

/// How an RPC's messages meet the wire, for RPCs served with generated protobuf
/// messages: gRPC parses into and serialises from the Item's own messages.
template <typename RequestT, typename ResponseT>
struct ProtoWire {
  using ReadMessage = RequestT;
  using WriteMessage = ResponseT;
  static ReadMessage* ReadTarget(RequestT& r) { return &r; }
  /// After a successful read: false makes it count as a failed read (as gRPC
  /// does for a message it cannot parse).
  static bool Decode(RequestT&) { return true; }
  /// Replaces the response with an in-band error.
  static void SetBatchError(ResponseT* out, const absl::Status& status) {
    out->Clear();
    out->mutable_error()->set_code(static_cast<int>(status.code()));
    out->mutable_error()->set_message(std::string(status.message()));
  }
  /// Stamps the batch ID; returns what to write.
  static WriteMessage* Seal(const RequestT& r, ResponseT* out) {
    out->set_batch_id(r.batch_id());
    return out;
  }
};

/// Defaults for RPCs whose batches are independent: no per-stream state, nothing
/// to admit or complete in order, never run on the gRPC thread.
template <typename RequestT, typename ResponseT>
struct StatelessTraits : ProtoWire<RequestT, ResponseT> {
  using Request = RequestT;
  using Response = ResponseT;
  using Partial = std::monostate;
  explicit StatelessTraits(const ServiceState&) {}
  absl::Status Admit(const Request&) { return absl::OkStatus(); }
  void Complete(const Request&, Response*, Partial&) {}
  static constexpr bool kMayInline = false;
  static uint64_t InlineCost(const Request&) { return 0; }
};

/// Lookup travels as raw byte buffers (lookup_wire.hpp): packed keys are copied
/// once from the received slices into a backend host buffer, and the outputs are
/// written back as slices referencing the engine's output buffer. Requests the
/// scan does not accept are parsed by protobuf and served by Operations::Lookup,
/// exactly as before.
struct LookupWireRequest {
  grpc::ByteBuffer buffer;         // as received
  std::optional<LookupWire> fast;  // the scanned fast-path view, when accepted
  v1::LookupRequest message;       // the whole request otherwise
  const v1::LookupRequest& fields() const { return fast ? fast->fields : message; }
};

struct LookupWireResponse {
  std::optional<PackedLookupResult> packed;  // fast-path result
  v1::LookupResponse message;                // protobuf-path result, or an error
  grpc::ByteBuffer buffer;                   // what is written
  bool sealed = false;                       // `buffer` holds the final bytes
};

struct LookupTraits : StatelessTraits<LookupWireRequest, LookupWireResponse> {
  using StatelessTraits::StatelessTraits;
  using ReadMessage = grpc::ByteBuffer;
  using WriteMessage = grpc::ByteBuffer;
  static constexpr std::string_view kRpc = "Lookup";

  static ReadMessage* ReadTarget(Request& r) { return &r.buffer; }
  /// On the gRPC thread, where gRPC parsed the message before: a scan that copies
  /// nothing large, or the protobuf parse gRPC would have done.
  static bool Decode(Request& r);
  /// Runs the lookup and serialises the response (on the executor, rather than
  /// under the stream's lock).
  static absl::Status Process(Operations& ops, const Request& r, Response* out, Partial*);
  static void SetBatchError(Response* out, const absl::Status& status);
  static WriteMessage* Seal(const Request& r, Response* out);
  static uint64_t Rows(const Request& r);
  /// Work bound for running on the gRPC thread: rows probed and written.
  static constexpr bool kMayInline = true;
  static uint64_t InlineCost(const Request& r) { return Rows(r); }
};

struct JoinTraits : StatelessTraits<v1::JoinRequest, v1::JoinResponse> {
  using StatelessTraits::StatelessTraits;
  static constexpr std::string_view kRpc = "Join";
  static absl::Status Process(Operations& ops, const Request& r, Response* out, Partial*);
  static uint64_t Rows(const Request& r);
  static constexpr bool kMayInline = true;
  /// Rows probed plus pair capacity (the response is sized, and zero-filled, to it).
  static uint64_t InlineCost(const Request& r);
};

struct AggregateTraits : ProtoWire<v1::AggregateRequest, v1::AggregateResponse> {
  using Request = v1::AggregateRequest;
  using Response = v1::AggregateResponse;
  using Partial = AggregatePartial;
  static constexpr std::string_view kRpc = "Aggregate";
  explicit AggregateTraits(const ServiceState& s) : max_message_bytes(s.config.max_message_bytes) {}
  absl::Status Admit(const Request& r) { return stream.Admit(r, max_message_bytes); }
  static absl::Status Process(Operations& ops, const Request& r, Response* out, Partial* p);
  void Complete(const Request& r, Response* out, Partial& p) { stream.Complete(r, out, p); }
  static uint64_t Rows(const Request& r) { return U32Rows(r.has_keys(), r.keys()); }
  // Work depends on the group count, not the rows: always on the executor.
  static constexpr bool kMayInline = false;
  static uint64_t InlineCost(const Request&) { return 0; }

  uint64_t max_message_bytes;
  AggregateStream stream;
};

struct HashTraits : StatelessTraits<v1::HashRequest, v1::HashResponse> {
  using StatelessTraits::StatelessTraits;
  static constexpr std::string_view kRpc = "Hash";
  static absl::Status Process(Operations& ops, const Request& r, Response* out, Partial*);
  static uint64_t Rows(const Request& r) {
    return r.columns_size() == 0 ? 0 : r.columns(0).length();
  }
};

}  // namespace gpujoin::server::detail
