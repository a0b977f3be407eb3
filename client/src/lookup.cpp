// Client::Lookup (a pipelined stream of key batches) and LookupAll, which
// looks up one in-memory key column in batches and concatenates the answers.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client_impl.hpp"
#include "gpujoin/client/client.hpp"
#include "gpujoin/common/status_macros.hpp"
#include "stream_runner.hpp"
#include "wire.hpp"

namespace gpujoin::client {

namespace pb = ::gpujoin::v1;
using detail::AppendColumns;
using detail::DecodeBatchHeader;
using detail::DecodeColumns;
using detail::SetColumn;
using detail::SetKeys;
using detail::SetPacked;
using detail::ToQueryStatistics;
using detail::Unpack;

absl::Status Client::Lookup(const std::string& index, const BatchSource<LookupBatch>& source,
                            const ResultSink<LookupResult>& sink, const StreamOptions& options) {
  grpc::ClientContext ctx;
  impl_->Prepare(&ctx, options.deadline);
  auto stream = impl_->stub_->Lookup(&ctx);
  auto encode = [&index](const LookupBatch& b, uint64_t id,
                         pb::LookupRequest* r) -> absl::Status {
    GPUJOIN_RETURN_IF_ERROR(CheckKeys(b.keys, absl::StrCat("lookup batch ", id)));
    r->set_index(index);
    SetKeys(b.keys, b.keys.type(), r);
    r->set_want_probes(b.want_probes);
    r->set_max_probe_count(b.max_probe_count);
    r->set_batch_id(id);
    for (const std::string& name : b.select) r->add_select(name);
    r->set_want_match_counts(b.want_match_counts);
    return absl::OkStatus();
  };
  auto decode = [](pb::LookupResponse& r, LookupResult* out) -> absl::Status {
    out->index_version = r.index_version();
    out->mutation_sequence = r.mutation_sequence();
    if (DecodeBatchHeader(r, out)) return absl::OkStatus();
    GPUJOIN_RETURN_IF_ERROR(Unpack(r.values(), "values", &out->values));
    out->found.assign(r.found().begin(), r.found().end());
    GPUJOIN_RETURN_IF_ERROR(Unpack(r.probes(), "probes", &out->probes));
    GPUJOIN_RETURN_IF_ERROR(Unpack(r.match_counts(), "match_counts", &out->match_counts));
    if (out->found.size() != out->values.size()) {
      return absl::InternalError(absl::StrCat("server sent ", out->values.size(), " values but ",
                                              out->found.size(), " found flags"));
    }
    if (!out->match_counts.empty() && out->match_counts.size() != out->values.size()) {
      return absl::InternalError(absl::StrCat("server sent ", out->match_counts.size(),
                                              " match counts for ", out->values.size(), " rows"));
    }
    out->statistics = ToQueryStatistics(r.statistics());
    return DecodeColumns(r.columns(), out->values.size(), &out->columns);
  };
  return detail::RunStream<pb::LookupRequest, pb::LookupResponse, LookupBatch, LookupResult>(
      &ctx, stream.get(), source, encode, decode, detail::kWhole, sink, options);
}

absl::StatusOr<LookupResult> Client::LookupAll(const std::string& index, Keys keys,
                                               size_t batch_rows, const StreamOptions& options,
                                               const ProgressCallback& progress) {
  QueryAllOptions o;
  o.batch_rows = batch_rows;
  o.stream = options;
  o.progress = progress;
  return LookupAll(index, keys, o);
}

absl::StatusOr<LookupResult> Client::LookupAll(const std::string& index, Keys keys,
                                               const QueryAllOptions& o) {
  if (o.batch_rows == 0) return absl::InvalidArgumentError("batch_rows must be positive");
  GPUJOIN_RETURN_IF_ERROR(CheckKeys(keys, "keys"));
  LookupResult all;
  all.values.reserve(keys.size());
  all.found.reserve(keys.size());
  size_t pos = 0;
  size_t answered = 0;  // rows
  bool sent_any = false;
  Progress p;
  p.total_rows = keys.size();
  BatchSource<LookupBatch> source = [&]() -> std::optional<LookupBatch> {
    // With a selection, empty input still sends one (empty) batch, whose
    // answer gives the columns their types.
    if (pos >= keys.size() && (sent_any || o.select.empty())) return std::nullopt;
    sent_any = true;
    const size_t n = std::min(o.batch_rows, keys.size() - pos);
    LookupBatch b;
    b.keys = keys.subspan(pos, n);
    b.select = o.select;
    b.want_match_counts = o.want_match_counts;
    b.max_probe_count = o.max_probe_count;
    pos += n;
    return b;
  };
  GPUJOIN_RETURN_IF_ERROR(Lookup(
      index, source,
      [&](LookupResult&& r) -> absl::Status {
        if (!r.error.ok()) return r.error;
        all.values.insert(all.values.end(), r.values.begin(), r.values.end());
        all.found.insert(all.found.end(), r.found.begin(), r.found.end());
        if (o.want_match_counts && r.match_counts.size() != r.values.size()) {
          return absl::InternalError(absl::StrCat("server sent ", r.match_counts.size(),
                                                  " match counts for ", r.values.size(), " rows"));
        }
        all.match_counts.insert(all.match_counts.end(), r.match_counts.begin(),
                                r.match_counts.end());
        GPUJOIN_RETURN_IF_ERROR(AppendColumns(std::move(r.columns), &all.columns));
        all.statistics.Merge(r.statistics);
        all.batch_id = r.batch_id;
        all.index_version = r.index_version;
        all.mutation_sequence = r.mutation_sequence;
        all.latency = r.latency;
        p.rows_sent += r.values.size();
        p.bytes_sent += keys.subspan(answered, r.values.size()).size_bytes();
        answered += r.values.size();
        if (o.progress) o.progress(p);
        return absl::OkStatus();
      },
      o.stream));
  if (all.values.size() != keys.size()) {
    return absl::InternalError(
        absl::StrCat("lookup answered ", all.values.size(), " of ", keys.size(), " rows"));
  }
  return all;
}

}  // namespace gpujoin::client
