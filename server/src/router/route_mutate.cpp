// Mutate through gpujoin-router. A batch's upsert rows (keys, values and
// payload) and delete keys are split by the shard of their key; each shard
// with rows applies its part atomically, and the counts are summed (a key
// lives on one shard, so distinct counts add up). Upserts carry explicit
// values: the router keeps no global row counter for row-ID indexes. A
// replicated index gets every batch whole on every replica (row IDs too:
// each replica numbers the same rows alike), and the replicas must agree.
#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gpujoin/common/status_macros.hpp"
#include "router/merge.hpp"
#include "router/routes.hpp"
#include "router/wire_rows.hpp"

namespace gpujoin::server::router {
namespace {

using Answers = std::vector<std::vector<v1::MutateResponse>>;

template <class Message>
absl::StatusOr<KeyedRows> DeleteKeysOf(const Message& m, uint32_t shards) {
  return KeyedRows::Of(m.delete_keys(), m.delete_keys64(), m.has_delete_keys(),
                       m.has_delete_keys64(), m.delete_key_columns(), shards, "delete_");
}

// Every shard's part of `request`; send[s] when shard s has rows.
absl::Status SplitMutation(const v1::MutateRequest& request, uint32_t n,
                           std::vector<v1::MutateRequest>* parts, std::vector<bool>* send) {
  GPUJOIN_ASSIGN_OR_RETURN(const KeyedRows upserts, KeyedRowsOf(request, n, ""));
  GPUJOIN_ASSIGN_OR_RETURN(const KeyedRows deletes, DeleteKeysOf(request, n));
  const uint64_t rows = upserts.rows();
  std::vector<uint32_t> values;
  if (rows > 0) {
    if (!request.has_values()) {
      return absl::UnimplementedError(absl::StrCat(
          "values: gpujoin-router (and gpujoind --devices) takes upserts into a partitioned "
          "index with explicit values only (one per upsert row, here ", rows,
          "); it keeps no global row counter, so upserts into a row-ID index go to an index "
          "built with placement replicated, or to a gpujoind of one device (docs/operations.md, "
          "\"Replicated indexes\")"));
    }
    GPUJOIN_ASSIGN_OR_RETURN(values, WordsOf(request.values(), "values"));
    if (values.size() != rows) {
      return absl::InvalidArgumentError(absl::StrCat("values: ", values.size(),
                                                     " values but the batch has ", rows,
                                                     " upsert keys"));
    }
  } else if (request.payload_size() != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "payload: ", request.payload_size(), " columns but the batch has no upsert keys"));
  }
  for (int c = 0; c < request.payload_size(); ++c) {
    if (request.payload(c).length() != rows) {
      return absl::InvalidArgumentError(
          absl::StrCat("payload[", c, "] (\"", request.payload(c).name(), "\"): ",
                       request.payload(c).length(), " rows but the batch has ", rows,
                       " upsert keys (one per upsert key of the batch)"));
    }
  }
  // Each payload column is checked once, then cut for every shard.
  std::vector<CheckedColumn> payload(request.payload_size());
  for (int c = 0; c < request.payload_size(); ++c) {
    GPUJOIN_ASSIGN_OR_RETURN(payload[c],
                             CheckColumn(request.payload(c), absl::StrCat("payload[", c, "]")));
  }
  const RowSplit up = SplitRows(upserts.parts(), n);
  const RowSplit del = SplitRows(deletes.parts(), n);
  parts->assign(n, v1::MutateRequest{});
  send->assign(n, false);
  for (uint32_t s = 0; s < n; ++s) {
    v1::MutateRequest& part = (*parts)[s];
    part.set_index(request.index());
    part.set_batch_id(request.batch_id());
    (*send)[s] = !up.rows[s].empty() || !del.rows[s].empty();
    if (!up.rows[s].empty()) {
      GPUJOIN_RETURN_IF_ERROR(upserts.Put(up.rows[s], part.mutable_keys(), part.mutable_keys64(),
                                          part.mutable_key_columns()));
      if (!request.has_keys()) part.clear_keys();
      if (!request.has_keys64()) part.clear_keys64();
      *part.mutable_values() = PackedAt(std::span<const uint32_t>(values), up.rows[s]);
      for (size_t c = 0; c < payload.size(); ++c) {
        GPUJOIN_ASSIGN_OR_RETURN(
            *part.add_payload(),
            TakeColumnRows(payload[c], up.rows[s], absl::StrCat("payload[", c, "]")));
      }
    }
    if (!del.rows[s].empty()) {
      GPUJOIN_RETURN_IF_ERROR(deletes.Put(del.rows[s], part.mutable_delete_keys(),
                                          part.mutable_delete_keys64(),
                                          part.mutable_delete_key_columns()));
      if (!request.has_delete_keys()) part.clear_delete_keys();
      if (!request.has_delete_keys64()) part.clear_delete_keys64();
    }
  }
  return absl::OkStatus();
}

// What the router last heard of an index on one shard: a shard without a
// part in a batch still counts in the batch's answer.
struct ShardState {
  uint64_t version = 0;
  uint64_t sequence = 0;
  uint32_t capacity = 0;
  v1::BuildStatistics statistics;
};

// The index's state on every shard, when a stream begins, and whether it is
// replicated (every shard must say the same).
grpc::Status DescribeShards(const ShardCalls& calls, grpc::ServerContext* ctx,
                            const std::string& index, std::vector<ShardState>* state,
                            bool* replicated) {
  v1::DescribeIndexRequest request;
  request.set_name(index);
  std::vector<v1::DescribeIndexResponse> answers;
  grpc::Status st = calls.FanOut<v1::DescribeIndexRequest, v1::DescribeIndexResponse>(
      ctx, "DescribeIndex", request, &v1::GpuJoin::Stub::DescribeIndex, &answers);
  if (!st.ok()) return st;
  state->assign(answers.size(), ShardState{});
  std::vector<uint64_t> versions;
  for (size_t s = 0; s < answers.size(); ++s) {
    const v1::IndexInfo& i = answers[s].index();
    (*state)[s] = {i.version(), i.mutation_sequence(), i.capacity(), i.statistics()};
    versions.push_back(i.version());
  }
  *replicated = answers[0].index().placement() == v1::INDEX_PLACEMENT_REPLICATED;
  for (size_t s = 1; s < answers.size(); ++s) {
    if (answers[s].index().placement() != answers[0].index().placement()) {
      return grpc::Status(
          grpc::StatusCode::ABORTED,
          absl::StrCat("index \"", index, "\": ", calls.shard(0).Name(), " holds it ",
                       *replicated ? "replicated" : "partitioned", " but ", calls.shard(s).Name(),
                       *replicated ? " partitioned" : " replicated",
                       " (rebuild it through the router)"));
    }
  }
  calls.placements().Put(index, {versions[0], *replicated});
  return SameVersion(calls, index, versions);
}

// The replicas' answers to one whole batch: they must agree (else the
// replicas diverged: ABORTED naming the first that differs).
grpc::Status MergeReplicas(const ShardCalls& calls, const Answers& answers,
                           std::vector<ShardState>* state, v1::MutateResponse* out) {
  const v1::MutateResponse& a = answers[0].front();
  bool durable = true;
  for (uint32_t s = 0; s < answers.size(); ++s) {
    const v1::MutateResponse& b = answers[s].front();
    if (b.index_version() != a.index_version() || b.mutation_sequence() != a.mutation_sequence() ||
        b.inserted_keys() != a.inserted_keys() || b.updated_keys() != a.updated_keys() ||
        b.deleted_keys() != a.deleted_keys() || b.deleted_rows() != a.deleted_rows() ||
        b.not_found_keys() != a.not_found_keys()) {
      return grpc::Status(
          grpc::StatusCode::ABORTED,
          absl::StrCat("replicated index: ", calls.shard(s).Name(),
                       " answered the batch with (version ", b.index_version(), ", sequence ",
                       b.mutation_sequence(), ", ", b.inserted_keys(), " inserted, ",
                       b.updated_keys(), " updated, ", b.deleted_keys(), " deleted) but ",
                       calls.shard(0).Name(), " with (",
                       a.index_version(), ", ", a.mutation_sequence(), ", ", a.inserted_keys(),
                       ", ", a.updated_keys(), ", ", a.deleted_keys(),
                       "): the replicas differ; rebuild the index through the router"));
    }
    (*state)[s] = {b.index_version(), b.mutation_sequence(), b.capacity(), b.statistics()};
    durable &= b.durable();
  }
  const uint64_t batch_id = out->batch_id();
  *out = a;
  out->set_batch_id(batch_id);
  out->set_durable(durable);
  return grpc::Status::OK;
}

// The shards' answers summed into `out`, over `state` (updated).
grpc::Status MergeMutation(const ShardCalls& calls, const std::string& index,
                           const Answers& answers, std::vector<ShardState>* state,
                           v1::MutateResponse* out) {
  bool durable = true;
  for (uint32_t s = 0; s < answers.size(); ++s) {
    if (answers[s].empty()) continue;
    const v1::MutateResponse& a = answers[s].front();
    (*state)[s] = {a.index_version(), a.mutation_sequence(), a.capacity(), a.statistics()};
    out->set_upsert_rows(out->upsert_rows() + a.upsert_rows());
    out->set_inserted_keys(out->inserted_keys() + a.inserted_keys());
    out->set_updated_keys(out->updated_keys() + a.updated_keys());
    out->set_deleted_keys(out->deleted_keys() + a.deleted_keys());
    out->set_not_found_keys(out->not_found_keys() + a.not_found_keys());
    out->set_deleted_rows(out->deleted_rows() + a.deleted_rows());
    out->set_rehashed(out->rehashed() || a.rehashed());
    durable &= a.durable();
  }
  out->set_durable(durable);
  std::vector<uint64_t> versions;
  uint64_t sequence = 0, capacity = 0;
  for (const ShardState& st : *state) {
    versions.push_back(st.version);
    sequence += st.sequence;
    capacity += st.capacity;
    AddBuildStatistics(out->mutable_statistics(), st.statistics);
  }
  grpc::Status same = SameVersion(calls, index, versions);
  if (!same.ok()) return same;
  out->set_index_version(versions[0]);
  out->set_mutation_sequence(sequence);
  out->set_capacity(static_cast<uint32_t>(std::min<uint64_t>(capacity, 0xffffffffu)));
  out->set_load_factor(capacity == 0 ? 0.0
                                     : double(out->statistics().unique_keys()) / double(capacity));
  return grpc::Status::OK;
}

}  // namespace

grpc::Status RouteMutate(const ShardCalls& calls, grpc::ServerContext* ctx,
                         grpc::ServerReaderWriter<v1::MutateResponse, v1::MutateRequest>* stream) {
  grpc::Status denied = calls.Authorize(ctx);
  if (!denied.ok()) return denied;
  // Also with one shard: the router's checks (upserts carry values) hold.
  const uint32_t n = calls.count();
  ShardStreams<v1::MutateRequest, v1::MutateResponse> shards(calls, ctx,
                                                              &v1::GpuJoin::Stub::Mutate, "Mutate");
  std::string described;  // the index whose shards' state `state` holds
  std::vector<ShardState> state;
  bool replicated = false;  // the described index is
  v1::MutateRequest request;
  while (stream->Read(&request)) {
    request.clear_replica();  // the router's to set
    v1::MutateResponse out;
    out.set_batch_id(request.batch_id());
    std::vector<v1::MutateRequest> parts;
    std::vector<bool> send;
    absl::Status bad;
    if (described != request.index()) {
      grpc::Status st = DescribeShards(calls, ctx, request.index(), &state, &replicated);
      if (st.error_code() == grpc::StatusCode::NOT_FOUND) {
        bad = absl::NotFoundError(st.error_message());
      } else if (!st.ok()) {
        return shards.Close(st);
      } else {
        described = request.index();
      }
    }
    if (bad.ok() && replicated) {
      parts.assign(n, request);
      for (v1::MutateRequest& p : parts) p.set_replica(true);
      send.assign(n, true);
    } else if (bad.ok()) {
      bad = SplitMutation(request, n, &parts, &send);
      bool any = false;
      for (bool b : send) any |= b;
      if (bad.ok() && !any) {
        // No rows: shard 0 says what is wrong with it, as one server would.
        parts[0] = request;
        send[0] = true;
      }
    }
    if (bad.ok()) {
      Answers answers;
      grpc::Status st = shards.Exchange(parts, &answers, &send);
      if (!st.ok()) {
        // The shards that answered before one failed applied their part.
        std::vector<std::string> applied;
        for (uint32_t s = 0; s < answers.size(); ++s) {
          if (!answers[s].empty() && !answers[s].front().has_error()) {
            applied.push_back(calls.shard(s).Name());
          }
        }
        if (applied.empty() || st.error_code() == grpc::StatusCode::CANCELLED) return st;
        return grpc::Status(st.error_code(),
                            absl::StrCat(st.error_message(), "; batch ", request.batch_id(),
                                         " was applied on ", absl::StrJoin(applied, ", "),
                                         " (its other parts' fate is unknown)"));
      }
      if (auto refused = RefusedBatch(calls, answers)) {
        // Shards that applied their part while another refused: the batch
        // is not atomic any more, and the caller is told which.
        std::vector<std::string> applied;
        for (uint32_t s = 0; s < n; ++s) {
          if (!answers[s].empty() && !answers[s].front().has_error()) {
            applied.push_back(calls.shard(s).Name());
          }
        }
        *out.mutable_error() = *refused;
        if (!applied.empty()) {
          out.mutable_error()->set_code(static_cast<int>(grpc::StatusCode::ABORTED));
          out.mutable_error()->set_message(absl::StrCat(
              refused->message(), "; the batch was applied on ", absl::StrJoin(applied, ", "),
              replicated ? " only: the replicas now differ (rebuild the index through the router)"
                         : " only (apply it again, or rebuild)"));
        }
        described.clear();  // the sequences moved under us: ask again
      } else {
        st = replicated ? MergeReplicas(calls, answers, &state, &out)
                        : MergeMutation(calls, request.index(), answers, &state, &out);
        if (!st.ok()) return shards.Close(st);
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
