// The RPC traits: what each bidi stream RPC (Lookup, Join, Aggregate, Hash) plugs
// into the shared StreamReactor (stream_reactor.hpp).
//
// A traits type describes one RPC: its messages and how they meet the wire, the
// per-batch work (on the executor), cheap in-order admission (on the reactor) and
// the in-order completion step before a response is written. StreamReactor<T>
// uses these members of T:
//   Request, Response, Partial      the Item's types (Partial: per-batch state
//                                   handed from Process to Complete)
//   kRpc                            the `rpc` label and log name
//   T(const ServiceState&)          one per stream, constructed with the reactor
//   Admit(request)                  in read order, on the reactor thread
//   Complete(request, out, partial) in write order, before the write
//   static Decode(wire, request)    parses a received message; false: unparseable
//   static Seal(request, out, wire) stamps and serialises the next response message
//                                   for writing
//   static More(out)                after Seal: another message of this batch's
//                                   response follows (Join continuation)
//   static Process, SetBatchError, Rows
//   static HeldBytes(request, out, partial)
//                                   after a successful Process: the host bytes
//                                   the response (and partial) may hold until its
//                                   last message is written, counted against
//                                   --max-pending-response-bytes
//   static kMayInline, InlineCost   whether and up to which work bound a batch
//                                   may run on the gRPC thread (CPU backend)
//   static kSerial                  one batch of a stream at a time, in order
//                                   (Mutate: batch 2 must see batch 1)
//
// Every stream is served on gRPC's raw (byte buffer) API and parsed by Decode, so
// that a message that does not parse is told apart from the client's half-close
// (see StreamReactor::OnReadDone and UnparseableMessageError).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "wire/join_parts.hpp"
#include "wire/lookup_wire.hpp"
#include "ops/operations.hpp"
#include "gpujoin/v1/gpujoin.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace gpujoin::server::detail {

/// Rows of a U32Column (packed bytes / 4 plus typed values); 0 when absent.
uint64_t U32Rows(bool has, const v1::U32Column& c);
/// Rows of a U64Column (packed bytes / 8 plus typed values); 0 when absent.
uint64_t U64Rows(bool has, const v1::U64Column& c);
/// Key rows of a message that carries keys in `keys`, `keys64` or
/// `key_columns` (the first key column's length).
template <typename Message>
uint64_t KeyRows(const Message& m) {
  return U32Rows(m.has_keys(), m.keys()) + U64Rows(m.has_keys64(), m.keys64()) +
         (m.key_columns_size() == 0 ? 0 : m.key_columns(0).length());
}

/// The error that ends a stream at its `position`-th message (1-based), of
/// `bytes` bytes, which did not parse as a `message_type` (e.g.
/// "gpujoin.v1.LookupRequest"); `consequence` says what became of the stream.
absl::Status UnparseableMessageError(std::string_view message_type, uint64_t position, size_t bytes,
                                     std::string_view consequence);

/// How an RPC's messages meet the wire, for RPCs served with generated protobuf
/// messages: parsed from and serialised into gRPC byte buffers with the same
/// codec gRPC's typed API uses.
template <typename RequestT, typename ResponseT>
struct ProtoWire {
  /// Parses a received message (consuming `wire`); false when it does not parse.
  static bool Decode(grpc::ByteBuffer* wire, RequestT* r) {
    return grpc::SerializationTraits<RequestT>::Deserialize(wire, r).ok();
  }
  /// Replaces the response with an in-band error.
  static void SetBatchError(ResponseT* out, const absl::Status& status) {
    out->Clear();
    out->mutable_error()->set_code(static_cast<int>(status.code()));
    out->mutable_error()->set_message(std::string(status.message()));
  }
  /// Stamps the batch ID and serialises the response into `wire`; returns what to
  /// write. A response protobuf cannot serialise (over 2 GiB, beyond any
  /// --max-message-bytes) is answered with an in-band INTERNAL error instead.
  static grpc::ByteBuffer* Seal(const RequestT& r, ResponseT* out, grpc::ByteBuffer* wire) {
    out->set_batch_id(r.batch_id());
    bool own = false;
    const grpc::Status s = grpc::SerializationTraits<ResponseT>::Serialize(*out, wire, &own);
    if (!s.ok()) {
      SetBatchError(out, absl::InternalError(absl::StrCat("the response could not be serialised (",
                                                          out->ByteSizeLong(),
                                                          " bytes): ", s.error_message())));
      out->set_batch_id(r.batch_id());
      (void)grpc::SerializationTraits<ResponseT>::Serialize(*out, wire, &own);
    }
    return wire;
  }
  /// One message per response.
  static bool More(const ResponseT&) { return false; }
  /// The message and, while it is written, its serialised copy.
  template <typename Partial>
  static uint64_t HeldBytes(const RequestT&, const ResponseT& out, const Partial&) {
    return 2 * static_cast<uint64_t>(out.ByteSizeLong());
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
  static constexpr bool kSerial = false;
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
  static constexpr std::string_view kRpc = "Lookup";

  /// On the gRPC thread, where gRPC parsed the message before: takes `wire` into
  /// the request, then a scan that copies nothing large, or the protobuf parse
  /// gRPC would have done. False when neither accepts it.
  static bool Decode(grpc::ByteBuffer* wire, Request* r);
  /// Runs the lookup and serialises the response (on the executor, rather than
  /// under the stream's lock).
  static absl::Status Process(Operations& ops, const Request& r, Response* out, Partial*);
  static void SetBatchError(Response* out, const absl::Status& status);
  /// Serialises into the response's own buffer (once; `wire` is unused).
  static grpc::ByteBuffer* Seal(const Request& r, Response* out, grpc::ByteBuffer* wire);
  static uint64_t Rows(const Request& r);
  /// The serialised response Process made (it is written from that buffer).
  static uint64_t HeldBytes(const Request&, const Response& out, const Partial&);
  /// Work bound for running on the gRPC thread: rows probed and written.
  static constexpr bool kMayInline = true;
  static uint64_t InlineCost(const Request& r) { return Rows(r); }
};

/// A Join response: the whole result, then the messages it is sent as
/// (join_parts.hpp), written one after the other before the next batch's.
struct JoinWireResponse {
  v1::JoinResponse message;        // the whole result, or an in-band error
  std::optional<JoinParts> parts;  // the planned messages, after a successful Process
  size_t next = 0;                 // the next message of `parts` to seal
};

struct JoinTraits : StatelessTraits<v1::JoinRequest, JoinWireResponse> {
  using StatelessTraits::StatelessTraits;
  static constexpr std::string_view kRpc = "Join";
  /// Runs the join and plans its messages (on the executor).
  static absl::Status Process(Operations& ops, const Request& r, Response* out, Partial*);
  static void SetBatchError(Response* out, const absl::Status& status);
  /// Serialises the next message of the response into `wire`.
  static grpc::ByteBuffer* Seal(const Request& r, Response* out, grpc::ByteBuffer* wire);
  static bool More(const Response& out) { return out.parts && out.next < out.parts->size(); }
  /// The planned messages' JoinParts::HeldBytes.
  static uint64_t HeldBytes(const Request&, const Response& out, const Partial&);
  static uint64_t Rows(const Request& r);
  static constexpr bool kMayInline = true;
  /// Rows probed, or the capacities asked for where larger (pairs beyond one per
  /// left row are allocated on keep_all indexes only, up to the capacity).
  static uint64_t InlineCost(const Request& r);
};

struct AggregateTraits : ProtoWire<v1::AggregateRequest, v1::AggregateResponse> {
  using Request = v1::AggregateRequest;
  using Response = v1::AggregateResponse;
  using Partial = AggregatePartial;
  static constexpr std::string_view kRpc = "Aggregate";
  explicit AggregateTraits(const ServiceState& s)
      : max_message_bytes(s.config.max_message_bytes), max_groups(s.config.max_aggregate_groups) {}
  absl::Status Admit(const Request& r) { return stream.Admit(r, max_message_bytes, max_groups); }
  static absl::Status Process(Operations& ops, const Request& r, Response* out, Partial* p);
  void Complete(const Request& r, Response* out, Partial& p) { stream.Complete(r, out, p); }
  /// The partial, the response and the stream's totals that Complete adds to it
  /// (per group a result word, a 64-bit count for typed values or
  /// want_counts64, and typed bitmaps), and while it is written its serialised
  /// copy.
  static uint64_t HeldBytes(const Request& r, const Response& out, const Partial& p);
  static uint64_t Rows(const Request& r) { return U32Rows(r.has_keys(), r.keys()); }
  // Work depends on the group count, not the rows: always on the executor.
  static constexpr bool kMayInline = false;
  static uint64_t InlineCost(const Request&) { return 0; }
  static constexpr bool kSerial = false;

  uint64_t max_message_bytes;
  uint64_t max_groups;  // --max-aggregate-groups
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

/// Mutate: a stream's batches are applied one at a time in stream order
/// (kSerial), each on the executor (a batch rebuilds its index's table).
struct MutateTraits : StatelessTraits<v1::MutateRequest, v1::MutateResponse> {
  using StatelessTraits::StatelessTraits;
  static constexpr std::string_view kRpc = "Mutate";
  static constexpr bool kSerial = true;
  static absl::Status Process(Operations& ops, const Request& r, Response* out, Partial*) {
    return ops.Mutate(r, out);
  }
  static uint64_t Rows(const Request& r) {
    return KeyRows(r) + U32Rows(r.has_delete_keys(), r.delete_keys()) +
           U64Rows(r.has_delete_keys64(), r.delete_keys64()) +
           (r.delete_key_columns_size() == 0 ? 0 : r.delete_key_columns(0).length());
  }
};

/// Query: a stream's messages run one at a time in stream order (kSerial):
/// the first compiles the plan that serves the rest (QueryStream). An
/// aggregate plan answers the client's half-close with one more message
/// (AnswersEnd); a result larger than a message is cut by rows (More).
struct QueryWireRequest {
  v1::QueryRequest message;
  bool end = false;                     // the client's half-close
  std::shared_ptr<QueryStream> stream;  // set by Admit
  uint64_t batch_id() const { return message.batch_id(); }
};

struct QueryTraits {
  using Request = QueryWireRequest;
  using Response = QueryAnswer;
  using Partial = std::monostate;
  static constexpr std::string_view kRpc = "Query";
  explicit QueryTraits(const ServiceState&) : stream(std::make_shared<QueryStream>()) {}

  static bool Decode(grpc::ByteBuffer* wire, Request* r) {
    return grpc::SerializationTraits<v1::QueryRequest>::Deserialize(wire, &r->message).ok();
  }
  absl::Status Admit(Request& r) {
    r.stream = stream;
    return absl::OkStatus();
  }
  void Complete(const Request&, Response*, Partial&) {}
  /// Whether the half-close gets an answer (read after every earlier message
  /// was processed: the stream runs one message at a time).
  bool AnswersEnd() const { return stream->answers_end.load(); }
  static void MarkEnd(Request* r) { r->end = true; }
  static absl::Status Process(Operations& ops, const Request& r, Response* out, Partial*) {
    return ops.Query(*r.stream, r.message, r.end, out);
  }
  static void SetBatchError(Response* out, const absl::Status& status);
  static grpc::ByteBuffer* Seal(const Request& r, Response* out, grpc::ByteBuffer* wire);
  static bool More(const Response& out) { return out.has_rows && out.next < out.parts.size(); }
  static uint64_t HeldBytes(const Request&, const Response& out, const Partial&) {
    return 2 * (out.table.bytes() + static_cast<uint64_t>(out.message.ByteSizeLong()));
  }
  static uint64_t Rows(const Request& r) {
    return r.message.columns_size() == 0 ? 0 : r.message.columns(0).length();
  }
  /// Small batches run on the gRPC thread (CPU backend): rows times steps.
  /// The plan is read after the message before was answered (kSerial), so
  /// after the executor compiled it.
  static constexpr bool kMayInline = true;
  static uint64_t InlineCost(const Request& r) {
    const uint64_t steps = r.stream != nullptr && r.stream->compiled
                               ? r.stream->compiled->plan.steps.size()
                               : kMaxPlanSteps;
    return Rows(r) * std::max<uint64_t>(1, steps);
  }
  static constexpr bool kSerial = true;

  std::shared_ptr<QueryStream> stream;
};

}  // namespace gpujoin::server::detail
