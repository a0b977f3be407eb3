// Client::Mutate (a pipelined stream of upsert/delete batches) and MutateAll,
// Upsert and Delete, which cut one in-memory input into requests that fit
// (PlanMutation) and sum what they applied.
#include <atomic>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "client_impl.hpp"
#include "gpujoin/client/client.hpp"
#include "gpujoin/common/status_macros.hpp"
#include "stream_runner.hpp"
#include "wire.hpp"

namespace gpujoin::client {

namespace pb = ::gpujoin::v1;
using detail::DecodeBatchHeader;
using detail::SetColumn;
using detail::SetKeys;

namespace {

// Sets the delete keys of `r` in the field of their kind: delete_keys (uint32),
// delete_keys64 (uint64) or delete_key_columns.
void SetDeleteKeys(const Keys& k, pb::MutateRequest* r) {
  if (k.type() == KeyType::kColumns) {
    for (size_t i = 0; i < k.column_count(); ++i) {
      detail::EncodeColumn(k.column(i), r->add_delete_key_columns());
    }
  } else if (k.type() == KeyType::kUint64) {
    SetColumn(k.u64(), r->mutable_delete_keys64());
  } else {
    SetColumn(k.u32(), r->mutable_delete_keys());
  }
}

// The bytes of a request's rows, for progress.
uint64_t RowBytes(const MutateBatch& b) {
  uint64_t bytes = b.delete_keys.size_bytes() + b.upsert_keys.size_bytes() + b.values.size_bytes();
  for (const ColumnView& p : b.payload) bytes += detail::EncodedColumnBytes(p);
  return bytes;
}

}  // namespace

absl::Status Client::Mutate(const std::string& index, const BatchSource<MutateBatch>& source,
                            const ResultSink<MutateResult>& sink, const StreamOptions& options) {
  grpc::ClientContext ctx;
  impl_->Prepare(&ctx, options.deadline);
  auto stream = impl_->stub_->Mutate(&ctx);
  auto encode = [&index](const MutateBatch& b, uint64_t id, pb::MutateRequest* r) -> absl::Status {
    GPUJOIN_RETURN_IF_ERROR(CheckMutateBatch(b, absl::StrCat("mutate batch ", id)));
    r->set_index(index);
    r->set_batch_id(id);
    // A side without rows is left unset: the server reads a set key field as
    // that side's keys (and its width as the index's).
    if (!b.upsert_keys.empty()) {
      SetKeys(b.upsert_keys, b.upsert_keys.type(), r);
      if (!b.values.empty()) SetColumn(b.values, r->mutable_values());
      for (const ColumnView& v : b.payload) detail::EncodeColumn(v, r->add_payload());
    }
    if (!b.delete_keys.empty()) SetDeleteKeys(b.delete_keys, r);
    return absl::OkStatus();
  };
  auto decode = [](pb::MutateResponse& r, MutateResult* out) -> absl::Status {
    out->index_version = r.index_version();
    out->mutation_sequence = r.mutation_sequence();
    if (DecodeBatchHeader(r, out)) return absl::OkStatus();
    out->upsert_rows = r.upsert_rows();
    out->inserted_keys = r.inserted_keys();
    out->updated_keys = r.updated_keys();
    out->deleted_keys = r.deleted_keys();
    out->not_found_keys = r.not_found_keys();
    out->deleted_rows = r.deleted_rows();
    out->statistics = detail::ToBuildStatistics(r.statistics());
    out->capacity = r.capacity();
    out->load_factor = r.load_factor();
    out->rehashed = r.rehashed();
    out->durable = r.durable();
    return absl::OkStatus();
  };
  return detail::RunStream<pb::MutateRequest, pb::MutateResponse, MutateBatch, MutateResult>(
      &ctx, stream.get(), source, encode, decode, detail::kWhole, sink, options);
}

absl::StatusOr<MutateSummary> Client::MutateAll(const std::string& index,
                                                const MutateBatch& changes,
                                                const MutateOptions& o) {
  if (o.batch_rows == 0) return absl::InvalidArgumentError("batch_rows must be positive");
  GPUJOIN_RETURN_IF_ERROR(CheckMutateBatch(changes, "changes"));
  // The index's key, values and payload are checked before anything is sent:
  // a split call is not atomic, so a request refused half-way is worth avoiding.
  GPUJOIN_ASSIGN_OR_RETURN(const IndexInfo info, DescribeIndex(index));
  GPUJOIN_RETURN_IF_ERROR(CheckMutateBatchFor(changes, info, "changes"));
  size_t max_rows = o.batch_rows;
  GPUJOIN_ASSIGN_OR_RETURN(const ServerInfo server, GetServerInfo());
  if (server.max_mutation_rows != 0 && server.max_mutation_rows < max_rows) {
    max_rows = static_cast<size_t>(server.max_mutation_rows);
  }
  // 1 KiB below the message limit: room for the request's own fields.
  const uint64_t max_message = static_cast<uint64_t>(options().max_message_bytes);
  const uint64_t max_bytes = max_message > 2048 ? max_message - 1024 : max_message / 2;
  GPUJOIN_ASSIGN_OR_RETURN(MutatePlan plan, PlanMutation(changes, max_rows, max_bytes));

  MutateSummary summary;
  if (plan.batches.empty()) {
    summary.index_version = info.version;
    summary.mutation_sequence = info.mutation_sequence;
    summary.capacity = info.capacity;
    summary.load_factor = info.load_factor;
    summary.statistics = info.statistics;
    return summary;
  }
  Progress p;
  p.total_rows = changes.upsert_keys.size() + changes.delete_keys.size();
  absl::Status first_error;  // the first request the server refused
  std::atomic<bool> stop{false};
  size_t next = 0;
  BatchSource<MutateBatch> source = [&]() -> std::optional<MutateBatch> {
    if (next >= plan.batches.size() || stop.load()) return std::nullopt;
    return plan.batches[next++];
  };
  ResultSink<MutateResult> sink = [&](MutateResult&& r) -> absl::Status {
    if (r.batch_id >= plan.ranges.size()) {
      return absl::InternalError(
          absl::StrCat("an answer to request ", r.batch_id, " of ", plan.ranges.size()));
    }
    MutateRequestResult request = plan.ranges[r.batch_id];
    if (!r.error.ok() && first_error.ok()) {
      first_error = absl::Status(
          r.error.code(),
          absl::StrCat("mutate request ", r.batch_id, " (delete rows [", request.delete_begin, ", ",
                       request.delete_end, "), upsert rows [", request.upsert_begin, ", ",
                       request.upsert_end, ")) of ", plan.batches.size(), ": ", r.error.message(),
                       "; ", summary.applied_requests,
                       " requests before it were applied (mutation sequence ",
                       summary.mutation_sequence, ")"));
      if (!o.continue_on_error) stop = true;
    }
    p.rows_sent +=
        (request.delete_end - request.delete_begin) + (request.upsert_end - request.upsert_begin);
    p.bytes_sent += RowBytes(plan.batches[r.batch_id]);
    request.result = std::move(r);
    summary.Add(std::move(request));
    if (o.progress) o.progress(p);
    return absl::OkStatus();
  };
  const absl::Status st = Mutate(index, source, sink, o.stream);
  if (st.ok() && first_error.ok()) return summary;
  if (o.partial != nullptr) *o.partial = summary;
  return first_error.ok() ? st : first_error;
}

absl::StatusOr<MutateSummary> Client::Upsert(const std::string& index, Keys keys,
                                             std::span<const uint32_t> values,
                                             std::span<const ColumnView> payload,
                                             const MutateOptions& options) {
  MutateBatch changes;
  changes.upsert_keys = keys;
  changes.values = values;
  changes.payload.assign(payload.begin(), payload.end());
  return MutateAll(index, changes, options);
}

absl::StatusOr<MutateSummary> Client::Delete(const std::string& index, Keys keys,
                                             const MutateOptions& options) {
  MutateBatch changes;
  changes.delete_keys = keys;
  return MutateAll(index, changes, options);
}

}  // namespace gpujoin::client
