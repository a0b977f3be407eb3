#include "rpc/rpc_traits.hpp"

#include "wire/plan_wire.hpp"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "gpujoin/common/status_macros.hpp"

namespace gpujoin::server::detail {

uint64_t U32Rows(bool has, const v1::U32Column& c) {
  return has ? c.packed().size() / 4 + static_cast<uint64_t>(c.values().v_size()) : 0;
}

uint64_t U64Rows(bool has, const v1::U64Column& c) {
  return has ? c.packed().size() / 8 + static_cast<uint64_t>(c.values().v_size()) : 0;
}

absl::Status UnparseableMessageError(std::string_view message_type, uint64_t position, size_t bytes,
                                     std::string_view consequence) {
  return absl::InvalidArgumentError(absl::StrCat(
      "message ", position, " could not be parsed as a ", std::string(message_type), " (", bytes,
      " bytes: corrupted, or a string field that is not valid UTF-8); ", std::string(consequence)));
}

bool LookupTraits::Decode(grpc::ByteBuffer* wire, Request* r) {
  r->buffer.Swap(wire);
  r->fast = ScanLookupRequest(r->buffer);
  if (r->fast) return true;
  return grpc::SerializationTraits<v1::LookupRequest>::Deserialize(&r->buffer, &r->message).ok();
}

absl::Status LookupTraits::Process(Operations& ops, const Request& r, Response* out, Partial*) {
  if (r.fast) {
    const LookupWire& wire = *r.fast;
    PackedLookupResult result;
    GPUJOIN_RETURN_IF_ERROR(ops.LookupPacked(
        wire.fields, wire.key_type, wire.rows(), [&wire](uint8_t* dst) { wire.CopyKeys(dst); },
        &result));
    out->packed = std::move(result);
  } else {
    GPUJOIN_RETURN_IF_ERROR(ops.Lookup(r.message, &out->message));
  }
  // Serialise here, on the executor, rather than on the stream's driver.
  Seal(r, out, nullptr);
  return absl::OkStatus();
}

void LookupTraits::SetBatchError(Response* out, const absl::Status& status) {
  out->packed.reset();
  out->sealed = false;
  out->buffer.Clear();
  ProtoWire<v1::LookupRequest, v1::LookupResponse>::SetBatchError(&out->message, status);
}

grpc::ByteBuffer* LookupTraits::Seal(const Request& r, Response* out, grpc::ByteBuffer*) {
  if (out->sealed) return &out->buffer;
  const uint64_t batch_id = r.fields().batch_id();
  if (out->packed) {
    out->buffer = SerializeLookupResponse(batch_id, std::move(*out->packed));
    out->packed.reset();
  } else {
    out->message.set_batch_id(batch_id);
    bool own = false;
    // Serialising a protobuf message into a ByteBuffer cannot fail short of
    // running out of memory, which gRPC would not survive either.
    (void)grpc::SerializationTraits<v1::LookupResponse>::Serialize(out->message, &out->buffer,
                                                                   &own);
  }
  out->sealed = true;
  return &out->buffer;
}

uint64_t LookupTraits::HeldBytes(const Request&, const Response& out, const Partial&) {
  return out.sealed ? out.buffer.Length() : 2 * static_cast<uint64_t>(out.message.ByteSizeLong());
}

uint64_t LookupTraits::Rows(const Request& r) {
  return r.fast ? r.fast->rows() : KeyRows(r.message);
}

absl::Status JoinTraits::Process(Operations& ops, const Request& r, Response* out, Partial*) {
  GPUJOIN_RETURN_IF_ERROR(ops.Join(r, &out->message));
  GPUJOIN_ASSIGN_OR_RETURN(JoinParts parts, JoinParts::Plan(std::move(out->message),
                                                            ops.state().config.max_message_bytes));
  out->parts.emplace(std::move(parts));
  out->next = 0;
  return absl::OkStatus();
}

void JoinTraits::SetBatchError(Response* out, const absl::Status& status) {
  out->parts.reset();
  out->next = 0;
  ProtoWire<v1::JoinRequest, v1::JoinResponse>::SetBatchError(&out->message, status);
}

grpc::ByteBuffer* JoinTraits::Seal(const Request& r, Response* out, grpc::ByteBuffer* wire) {
  wire->Clear();
  if (!out->parts)
    return ProtoWire<v1::JoinRequest, v1::JoinResponse>::Seal(r, &out->message, wire);
  v1::JoinResponse message = out->parts->Message(out->next++);
  return ProtoWire<v1::JoinRequest, v1::JoinResponse>::Seal(r, &message, wire);
}

void QueryTraits::SetBatchError(Response* out, const absl::Status& status) {
  *out = QueryAnswer();
  out->message.mutable_error()->set_code(static_cast<int>(status.code()));
  out->message.mutable_error()->set_message(std::string(status.message()));
}

grpc::ByteBuffer* QueryTraits::Seal(const Request& r, Response* out, grpc::ByteBuffer* wire) {
  wire->Clear();
  // The end-of-stream answer takes the batch_id after the stream's last.
  QueryWireRequest stamped;
  stamped.message.set_batch_id(r.end ? r.stream->last_batch_id + 1 : r.message.batch_id());
  // The answer to the end of the stream is final, also when it is an error.
  if (r.end) out->message.set_final(true);
  if (!out->has_rows || out->parts.empty()) {
    return ProtoWire<v1::QueryRequest, v1::QueryResponse>::Seal(stamped.message, &out->message,
                                                               wire);
  }
  const size_t part = out->next++;
  const auto [first, end] = out->parts[part];
  v1::QueryResponse message;
  if (part == 0) message = out->message;
  EncodePlanRows(out->table, out->names, first, end - first, message.mutable_columns());
  message.set_rows(end - first);
  message.set_first_row(first);
  message.set_more(out->next < out->parts.size());
  message.set_final(out->message.final());
  return ProtoWire<v1::QueryRequest, v1::QueryResponse>::Seal(stamped.message, &message, wire);
}

uint64_t JoinTraits::HeldBytes(const Request&, const Response& out, const Partial&) {
  return out.parts ? out.parts->HeldBytes()
                   : 2 * static_cast<uint64_t>(out.message.ByteSizeLong());
}

uint64_t JoinTraits::Rows(const Request& r) {
  uint64_t rows = 0;
  for (const auto& b : r.batches()) rows += KeyRows(b);
  return rows;
}

uint64_t JoinTraits::InlineCost(const Request& r) {
  uint64_t cost = 0;
  for (const auto& b : r.batches()) {
    // Rows probed, and the pairs allocated: at most the rows, or on a keep_all
    // index the capacity asked for (Operations::Join), which the index decides.
    const uint64_t rows = KeyRows(b);
    cost += b.count_only() ? rows : std::max(rows, b.capacity());
  }
  return cost;
}

absl::Status AggregateTraits::Process(Operations& ops, const Request& r, Response* out,
                                      Partial* p) {
  return ops.Aggregate(r, out, p);
}

uint64_t AggregateTraits::HeldBytes(const Request& r, const Response& out, const Partial& p) {
  const uint64_t groups = r.groups();
  const bool typed = r.has_typed_values();
  const uint64_t word = typed ? 8 : 4;
  const uint64_t counts64 = typed || r.want_counts64() ? 8 : 0;
  // Typed totals may carry an overflow and a validity bitmap; 64 bytes of tags.
  const uint64_t totals = groups * (word + counts64) + (typed ? 2 * (groups / 8 + 1) : 0) + 64;
  const uint64_t partial = 4 * p.counts.size() + 8 * p.words.size() + p.overflow.size();
  return partial + 2 * (static_cast<uint64_t>(out.ByteSizeLong()) + totals);
}

absl::Status HashTraits::Process(Operations& ops, const Request& r, Response* out, Partial*) {
  return ops.Hash(r, out);
}

}  // namespace gpujoin::server::detail
