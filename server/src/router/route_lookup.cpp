// Lookup through gpujoin-router: each batch's keys split by shard, every
// shard sent its part (maybe none), the answers put back in input order.
#include <cstring>

#include "absl/strings/str_cat.h"
#include "router/merge.hpp"
#include "router/replicas.hpp"
#include "router/routes.hpp"
#include "router/wire_rows.hpp"

namespace gpujoin::server::router {
namespace {

using Answers = std::vector<std::vector<v1::LookupResponse>>;

// The shards' answers to `request`, split as `split`, in input order.
grpc::Status MergeLookup(const ShardCalls& calls, const v1::LookupRequest& request,
                         const RowSplit& split, const Answers& answers, v1::LookupResponse* out) {
  const uint32_t n = calls.count();
  std::vector<uint64_t> versions;
  for (const auto& a : answers) versions.push_back(a.front().index_version());
  grpc::Status same = SameVersion(calls, request.index(), versions);
  if (!same.ok()) return same;
  const uint64_t rows = split.part.size();
  out->set_index_version(versions[0]);
  std::string values(4 * rows, '\0'), found(rows, '\0'), probes, counts;
  if (request.want_probes()) probes.assign(4 * rows, '\0');
  if (request.want_match_counts()) counts.assign(4 * rows, '\0');
  for (uint64_t r = 0; r < rows; ++r) {
    const v1::LookupResponse& a = answers[split.part[r]].front();
    const uint64_t p = split.position[r];
    if (a.values().size() < 4 * (p + 1) || a.found().size() < p + 1 ||
        (request.want_probes() && a.probes().size() < 4 * (p + 1)) ||
        (request.want_match_counts() && a.match_counts().size() < 4 * (p + 1))) {
      return grpc::Status(grpc::StatusCode::INTERNAL,
                          absl::StrCat(calls.shard(split.part[r]).Name(),
                                       ": answered fewer rows than it was sent"));
    }
    std::memcpy(values.data() + 4 * r, a.values().data() + 4 * p, 4);
    found[r] = a.found()[p];
    if (request.want_probes()) std::memcpy(probes.data() + 4 * r, a.probes().data() + 4 * p, 4);
    if (request.want_match_counts()) {
      std::memcpy(counts.data() + 4 * r, a.match_counts().data() + 4 * p, 4);
    }
  }
  out->set_values(std::move(values));
  out->set_found(std::move(found));
  if (request.want_probes()) out->set_probes(std::move(probes));
  if (request.want_match_counts()) out->set_match_counts(std::move(counts));
  uint64_t sequence = 0;
  for (const auto& a : answers) {
    AddQueryStatistics(out->mutable_statistics(), a.front().statistics());
    sequence += a.front().mutation_sequence();
  }
  out->set_mutation_sequence(sequence);
  std::vector<RowRef> refs(rows);
  for (uint64_t r = 0; r < rows; ++r) refs[r] = {split.part[r], split.position[r]};
  const int columns = answers[0].front().columns_size();
  for (uint32_t s = 1; s < n; ++s) {
    if (answers[s].front().columns_size() != columns) {
      return grpc::Status(grpc::StatusCode::INTERNAL,
                          absl::StrCat(calls.shard(s).Name(), " answered ",
                                       answers[s].front().columns_size(), " payload columns, ",
                                       calls.shard(0).Name(), " ", columns));
    }
  }
  for (int c = 0; c < columns; ++c) {
    std::vector<const v1::Column*> sources;
    for (const auto& a : answers) sources.push_back(&a.front().columns(c));
    absl::StatusOr<v1::Column> merged =
        GatherColumn(sources, refs, absl::StrCat("columns[", c, "]"));
    if (!merged.ok()) return ToGrpc(merged.status());
    *out->add_columns() = *std::move(merged);
  }
  return grpc::Status::OK;
}

}  // namespace

grpc::Status RouteLookup(const ShardCalls& calls, grpc::ServerContext* ctx,
                         grpc::ServerReaderWriter<v1::LookupResponse, v1::LookupRequest>* stream) {
  grpc::Status denied = calls.Authorize(ctx);
  if (!denied.ok()) return denied;
  const uint32_t n = calls.count();
  // One shard holds every key: its answers are the answers.
  if (n == 1) return calls.Passthrough(ctx, stream, 0, "Lookup", &v1::GpuJoin::Stub::Lookup);
  ShardStreams<v1::LookupRequest, v1::LookupResponse> shards(calls, ctx,
                                                              &v1::GpuJoin::Stub::Lookup, "Lookup");
  v1::LookupRequest request;
  while (stream->Read(&request)) {
    request.clear_replica();  // the router's to set
    if (IsReplicated(calls, ctx, request.index())) {
      // The whole batch to one replica; its answer is the answer.
      std::vector<v1::LookupResponse> answer;
      uint32_t s = 0;
      grpc::Status st = OnOneReplica(calls, shards, request, &answer, &s);
      if (!st.ok()) return st;
      if (!answer.empty()) {
        if (!stream->Write(answer.front())) return shards.Close(grpc::Status::CANCELLED);
        continue;
      }
      // A stale placement: the batch is split below.
    }
    v1::LookupResponse out;
    out.set_batch_id(request.batch_id());
    absl::StatusOr<KeyedRows> keys = KeyedRowsOf(request, n, "");
    std::vector<v1::LookupRequest> parts;
    absl::Status bad = keys.status();
    if (bad.ok()) {
      const RowSplit split = SplitRows(keys->parts(), n);
      for (uint32_t s = 0; s < n && bad.ok(); ++s) {
        absl::StatusOr<v1::LookupRequest> part = WithKeysAt(request, *keys, split.rows[s]);
        if (part.ok()) parts.push_back(*std::move(part));
        else bad = part.status();
      }
      if (bad.ok()) {
        Answers answers;
        grpc::Status st = shards.Exchange(parts, &answers);
        if (!st.ok()) return st;
        if (auto refused = RefusedBatch(calls, answers)) {
          *out.mutable_error() = *refused;
        } else {
          st = MergeLookup(calls, request, split, answers, &out);
          if (!st.ok()) return shards.Close(st);
          NoteVersion(calls, request.index(), out);
        }
      }
    }
    if (!bad.ok()) {
      out.mutable_error()->set_code(static_cast<int>(bad.code()));
      out.mutable_error()->set_message(std::string(bad.message()));
    }
    if (!stream->Write(out)) return shards.Close(grpc::Status::CANCELLED);
  }
  return shards.Close(grpc::Status::OK);
}

}  // namespace gpujoin::server::router
