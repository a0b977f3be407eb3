// Client::Mutate: a pipelined stream of upsert and delete batches. The server
// applies a stream's batches one at a time in order.
#include <string>

#include "absl/strings/str_cat.h"
#include "client_impl.hpp"
#include "gpujoin/client/client.hpp"
#include "gpujoin/common/status_macros.hpp"
#include "stream_runner.hpp"
#include "wire.hpp"

namespace gpujoin::client {

namespace pb = ::gpujoin::v1;
using detail::DecodeBatchHeader;
using detail::EncodeColumn;
using detail::SetColumn;
using detail::SetKeys;
using detail::ToBuildStatistics;

namespace {

// The delete keys in the delete field of their kind (delete_keys,
// delete_keys64 or delete_key_columns).
void SetDeleteKeys(const Keys& k, pb::MutateRequest* r) {
  if (k.type() == KeyType::kColumns) {
    for (size_t i = 0; i < k.column_count(); ++i) {
      EncodeColumn(k.column(i), r->add_delete_key_columns());
    }
  } else if (k.type() == KeyType::kUint64) {
    SetColumn(k.u64(), r->mutable_delete_keys64());
  } else {
    SetColumn(k.u32(), r->mutable_delete_keys());
  }
}

// Client-side misuse, before anything is sent: malformed keys or columns,
// values or payload rows that are not one per upsert key.
absl::Status CheckBatch(const MutateBatch& b, uint64_t id) {
  const std::string what = absl::StrCat("mutate batch ", id);
  GPUJOIN_RETURN_IF_ERROR(CheckKeys(b.keys, what + " keys"));
  GPUJOIN_RETURN_IF_ERROR(CheckKeys(b.delete_keys, what + " delete_keys"));
  if (!b.values.empty() && b.values.size() != b.keys.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ", b.values.size(), " values for ", b.keys.size(), " upsert keys"));
  }
  for (size_t i = 0; i < b.payload.size(); ++i) {
    const std::string column = absl::StrCat(what, " payload[", i, "]");
    GPUJOIN_RETURN_IF_ERROR(CheckColumnView(b.payload[i], column));
    if (b.payload[i].length != b.keys.size()) {
      return absl::InvalidArgumentError(absl::StrCat(column, ": ", b.payload[i].length,
                                                     " rows for ", b.keys.size(), " upsert keys"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Client::Mutate(const std::string& index, const BatchSource<MutateBatch>& source,
                            const ResultSink<MutateResult>& sink, const StreamOptions& options) {
  grpc::ClientContext ctx;
  impl_->Prepare(&ctx, options.deadline);
  auto stream = impl_->stub_->Mutate(&ctx);
  auto encode = [&index](const MutateBatch& b, uint64_t id, pb::MutateRequest* r) -> absl::Status {
    GPUJOIN_RETURN_IF_ERROR(CheckBatch(b, id));
    r->set_index(index);
    r->set_batch_id(id);
    if (!b.keys.empty()) SetKeys(b.keys, b.keys.type(), r);
    if (!b.values.empty()) SetColumn(b.values, r->mutable_values());
    for (const ColumnView& p : b.payload) EncodeColumn(p, r->add_payload());
    if (!b.delete_keys.empty()) SetDeleteKeys(b.delete_keys, r);
    return absl::OkStatus();
  };
  auto decode = [](pb::MutateResponse& r, MutateResult* out) -> absl::Status {
    out->index_version = r.index_version();
    if (DecodeBatchHeader(r, out)) return absl::OkStatus();
    out->mutation_sequence = r.mutation_sequence();
    out->upsert_rows = r.upsert_rows();
    out->inserted_keys = r.inserted_keys();
    out->updated_keys = r.updated_keys();
    out->deleted_keys = r.deleted_keys();
    out->not_found_keys = r.not_found_keys();
    out->deleted_rows = r.deleted_rows();
    out->statistics = ToBuildStatistics(r.statistics());
    out->capacity = r.capacity();
    out->load_factor = r.load_factor();
    out->rehashed = r.rehashed();
    out->durable = r.durable();
    return absl::OkStatus();
  };
  return detail::RunStream<pb::MutateRequest, pb::MutateResponse, MutateBatch, MutateResult>(
      &ctx, stream.get(), source, encode, decode, detail::kWhole, sink, options);
}

}  // namespace gpujoin::client
