// Join through gpujoin-router. Every left batch's rows are split by the shard
// of their key; each shard joins its part with the rows' positions in the
// batch as left row IDs, so that its pairs say which input row they belong
// to. All of a row's pairs come from its key's shard, so the join order (left
// row order, then right source order) is every row's pairs taken in input
// order; the caller's capacity keeps the stable prefix, as from one server.
// Continued shard answers are collected whole and the merged answer is
// continued again within the router's --max-message-bytes (JoinParts).
#include <algorithm>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "gpujoin/common/status_macros.hpp"
#include "router/merge.hpp"
#include "router/replicas.hpp"
#include "router/routes.hpp"
#include "router/wire_rows.hpp"
#include "wire/join_parts.hpp"

namespace gpujoin::server::router {
namespace {

using Answers = std::vector<std::vector<v1::JoinResponse>>;

uint32_t U32At(const std::string& bytes, uint64_t i) {
  uint32_t v;
  std::memcpy(&v, bytes.data() + 4 * i, 4);
  return v;
}

void AppendU32(std::string* bytes, uint32_t v) {
  bytes->append(reinterpret_cast<const char*>(&v), 4);
}

// One left batch of the request as the router split it.
struct SplitBatch {
  KeyedRows keys;
  RowSplit split;
  /// The caller's left row ID of every input row.
  std::vector<uint32_t> left_rows;
  /// The pair capacity the caller asked for (0 = one per left row).
  uint64_t capacity = 0;
};

absl::StatusOr<SplitBatch> SplitLeftBatch(const v1::LeftBatch& b, uint32_t n,
                                          const std::string& field) {
  SplitBatch out;
  GPUJOIN_ASSIGN_OR_RETURN(out.keys, KeyedRowsOf(b, n, field + "."));
  const uint64_t rows = out.keys.rows();
  out.split = SplitRows(out.keys.parts(), n);
  if (b.has_left_rows()) {
    GPUJOIN_ASSIGN_OR_RETURN(out.left_rows, WordsOf(b.left_rows(), field + ".left_rows"));
    if (out.left_rows.size() != rows) {
      return absl::InvalidArgumentError(absl::StrCat(field, ".left_rows: ", out.left_rows.size(),
                                                     " rows, but the batch has ", rows, " keys"));
    }
  } else {
    constexpr uint64_t kMax = std::numeric_limits<uint32_t>::max();
    if (rows > 0 && (b.first_left_row() > kMax || rows - 1 > kMax - b.first_left_row())) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".first_left_row: ", b.first_left_row(), " + ", rows,
                       " rows passes the largest left row ID 0xffffffff"));
    }
    out.left_rows.resize(rows);
    for (uint64_t r = 0; r < rows; ++r) {
      out.left_rows[r] = static_cast<uint32_t>(b.first_left_row() + r);
    }
  }
  out.capacity = b.capacity() == 0 ? rows : b.capacity();
  return out;
}

// Shard s's answer to one batch: its parts in order (pairs and columns), the
// first carrying count, capacity, overflow, statistics, found and probes.
struct ShardResult {
  std::vector<const v1::JoinBatchResult*> parts;
  /// Per pair, in order: its left position and where its columns are.
  std::vector<uint32_t> positions;
  std::vector<RowRef> refs;
  const v1::JoinBatchResult& head() const { return *parts.front(); }
};

// The merged result of batch `b` (`batch` as split) from the shards' answers.
grpc::Status MergeBatch(const ShardCalls& calls, int b, const v1::LeftBatch& request,
                        const SplitBatch& batch, const Answers& answers, int select,
                        v1::JoinBatchResult* out) {
  const uint32_t n = calls.count();
  std::vector<ShardResult> shard(n);
  // Every part of every shard, in order: a pair's RowRef names its part here.
  std::vector<const v1::JoinBatchResult*> all_parts;
  for (uint32_t s = 0; s < n; ++s) {
    for (const v1::JoinResponse& m : answers[s]) {
      for (const v1::JoinBatchResult& r : m.results()) {
        if (r.batch() == static_cast<uint64_t>(b)) shard[s].parts.push_back(&r);
      }
    }
    if (shard[s].parts.empty()) {
      return grpc::Status(grpc::StatusCode::INTERNAL,
                          absl::StrCat(calls.shard(s).Name(), ": answered no result for batch ", b));
    }
    for (const v1::JoinBatchResult* r : shard[s].parts) {
      const uint64_t pairs = r->left_rows().size() / 4;
      if (pairs > 0 && (r->right_rows().size() != 4 * pairs || r->columns_size() < select)) {
        return grpc::Status(grpc::StatusCode::INTERNAL,
                            absl::StrCat(calls.shard(s).Name(), ": answered ", pairs,
                                         " pairs with ", r->right_rows().size() / 4,
                                         " right rows and ", r->columns_size(), " of the ", select,
                                         " selected columns"));
      }
      const uint32_t source = static_cast<uint32_t>(all_parts.size());
      all_parts.push_back(r);
      for (uint64_t p = 0; p < pairs; ++p) {
        shard[s].positions.push_back(U32At(r->left_rows(), p));
        shard[s].refs.push_back({source, static_cast<uint32_t>(p)});
      }
    }
  }
  const uint64_t rows = batch.keys.rows();
  uint64_t count = 0;
  bool overflow = false;
  v1::QueryStatistics statistics;
  for (uint32_t s = 0; s < n; ++s) {
    count += shard[s].head().count();
    overflow |= shard[s].head().overflow();
    AddQueryStatistics(&statistics, shard[s].head().statistics());
  }
  // Found and probes per input row, from its shard.
  std::string found, probes;
  for (uint64_t r = 0; r < rows; ++r) {
    const v1::JoinBatchResult& h = shard[batch.split.part[r]].head();
    const uint64_t p = batch.split.position[r];
    if (request.want_found()) {
      if (h.found().size() <= p) {
        return grpc::Status(grpc::StatusCode::INTERNAL, "a shard answered fewer found flags");
      }
      found.push_back(h.found()[p]);
    }
    if (request.want_probes()) {
      if (h.probes().size() < 4 * (p + 1)) {
        return grpc::Status(grpc::StatusCode::INTERNAL, "a shard answered fewer probe counts");
      }
      AppendU32(&probes, U32At(h.probes(), p));
    }
  }
  out->set_batch(static_cast<uint64_t>(b));
  out->set_count(count);
  *out->mutable_statistics() = statistics;
  if (request.want_found()) out->set_found(std::move(found));
  if (request.want_probes()) out->set_probes(std::move(probes));
  if (request.count_only()) {
    out->set_capacity(0);  // ignored, reported as 0 (as one server)
    out->set_overflow(overflow);
    return grpc::Status::OK;
  }
  // Every input row's pairs, in input order, up to the capacity. A shard whose
  // own result was cut (by its --max-result-bytes) ends the stable prefix
  // where its pairs run out.
  const uint64_t capacity = batch.capacity;
  uint64_t kept_capacity = capacity;
  std::vector<uint64_t> next(n, 0);
  std::string left, right;
  std::vector<RowRef> refs;
  auto cut = [&](uint32_t s) {
    return next[s] == shard[s].positions.size() &&
           shard[s].positions.size() < shard[s].head().count();
  };
  for (uint64_t r = 0; r < rows && refs.size() < capacity; ++r) {
    const uint32_t s = batch.split.part[r];
    const uint32_t position = static_cast<uint32_t>(r);
    if (cut(s)) {
      kept_capacity = refs.size();
      break;
    }
    ShardResult& sr = shard[s];
    uint64_t& i = next[s];
    while (i < sr.positions.size() && sr.positions[i] == position && refs.size() < capacity) {
      AppendU32(&left, batch.left_rows[r]);
      refs.push_back(sr.refs[i]);
      ++i;
    }
    if (refs.size() < capacity && cut(s)) {
      kept_capacity = refs.size();
      break;
    }
  }
  if (kept_capacity == capacity && refs.size() < capacity) {
    // Every pair of every shard was taken: one out of its order is a shard's fault.
    for (uint32_t s = 0; s < n; ++s) {
      if (next[s] != shard[s].positions.size()) {
        return grpc::Status(grpc::StatusCode::INTERNAL,
                            absl::StrCat(calls.shard(s).Name(), ": answered pairs out of order "
                                                                "or for rows it was not sent"));
      }
    }
  }
  for (const RowRef& ref : refs) AppendU32(&right, U32At(all_parts[ref.source]->right_rows(), ref.row));
  out->set_left_rows(std::move(left));
  out->set_right_rows(std::move(right));
  out->set_capacity(kept_capacity);
  out->set_overflow(overflow || count > kept_capacity);
  for (int c = 0; c < select; ++c) {
    // Column c of every part; a part without columns (it has no pairs) lends
    // the first one's, which no pair reads.
    const v1::Column* header = nullptr;
    for (const v1::JoinBatchResult* r : all_parts) {
      if (r->columns_size() > c) {
        header = &r->columns(c);
        break;
      }
    }
    if (header == nullptr) break;
    std::vector<const v1::Column*> sources;
    for (const v1::JoinBatchResult* r : all_parts) {
      sources.push_back(r->columns_size() > c ? &r->columns(c) : header);
    }
    absl::StatusOr<v1::Column> merged =
        GatherColumn(sources, refs, absl::StrCat("results[", b, "].columns[", c, "]"));
    if (!merged.ok()) return ToGrpc(merged.status());
    *out->add_columns() = *std::move(merged);
  }
  return grpc::Status::OK;
}

}  // namespace

grpc::Status RouteJoin(const ShardCalls& calls, grpc::ServerContext* ctx,
                       grpc::ServerReaderWriter<v1::JoinResponse, v1::JoinRequest>* stream) {
  grpc::Status denied = calls.Authorize(ctx);
  if (!denied.ok()) return denied;
  const uint32_t n = calls.count();
  if (n == 1) return calls.Passthrough(ctx, stream, 0, "Join", &v1::GpuJoin::Stub::Join);
  ShardStreams<v1::JoinRequest, v1::JoinResponse> shards(calls, ctx, &v1::GpuJoin::Stub::Join,
                                                          "Join");
  v1::JoinRequest request;
  while (stream->Read(&request)) {
    request.clear_replica();  // the router's to set
    if (IsReplicated(calls, ctx, request.index())) {
      // The whole batch to one replica; its answer (continued or not) is the answer.
      std::vector<v1::JoinResponse> answer;
      uint32_t s = 0;
      grpc::Status st = OnOneReplica(calls, shards, request, &answer, &s);
      if (!st.ok()) return st;
      if (!answer.empty()) {
        // The replica continued its answer at its own --max-message-bytes.
        uint64_t largest = 0;
        for (const v1::JoinResponse& m : answer) {
          largest = std::max<uint64_t>(largest, m.ByteSizeLong());
        }
        if (largest > calls.config().max_message_bytes) {
          v1::JoinResponse e;
          e.set_batch_id(request.batch_id());
          e.mutable_error()->set_code(static_cast<int>(grpc::StatusCode::RESOURCE_EXHAUSTED));
          e.mutable_error()->set_message(absl::StrCat(
              calls.shard(s).Name(), " answered the batch in messages of up to ", largest,
              " bytes, more than this router's --max-message-bytes=",
              calls.config().max_message_bytes, ": give the router at least its shards' limit"));
          if (!stream->Write(e)) return shards.Close(grpc::Status::CANCELLED);
          continue;
        }
        for (const v1::JoinResponse& m : answer) {
          if (!stream->Write(m)) return shards.Close(grpc::Status::CANCELLED);
        }
        continue;
      }
      // A stale placement: the batch is split below.
    }
    v1::JoinResponse out;
    out.set_batch_id(request.batch_id());
    absl::Status bad;
    std::vector<SplitBatch> batches;
    std::vector<v1::JoinRequest> parts(n);
    for (uint32_t s = 0; s < n; ++s) {
      parts[s] = request;
      parts[s].clear_batches();
    }
    for (int i = 0; i < request.batches_size() && bad.ok(); ++i) {
      const v1::LeftBatch& b = request.batches(i);
      absl::StatusOr<SplitBatch> split = SplitLeftBatch(b, n, absl::StrCat("batches[", i, "]"));
      if (!split.ok()) {
        bad = split.status();
        break;
      }
      for (uint32_t s = 0; s < n && bad.ok(); ++s) {
        const std::vector<uint32_t>& rows = split->split.rows[s];
        absl::StatusOr<v1::LeftBatch> part = WithKeysAt(b, split->keys, rows);
        if (!part.ok()) {
          bad = part.status();
          break;
        }
        // The shard's left row IDs are the rows' positions in the batch.
        part->clear_first_left_row();
        std::string positions(4 * rows.size(), '\0');
        std::memcpy(positions.data(), rows.data(), positions.size());
        part->clear_left_rows();
        if (rows.empty()) {
          part->mutable_left_rows()->mutable_values();
        } else {
          part->mutable_left_rows()->set_packed(std::move(positions));
        }
        part->set_capacity(split->capacity);
        *parts[s].add_batches() = *std::move(part);
      }
      batches.push_back(*std::move(split));
    }
    if (bad.ok()) {
      Answers answers;
      grpc::Status st = shards.Exchange(parts, &answers);
      if (!st.ok()) return st;
      if (auto refused = RefusedBatch(calls, answers)) {
        *out.mutable_error() = *refused;
      } else {
        std::vector<uint64_t> versions;
        uint64_t sequence = 0;
        for (const auto& a : answers) {
          versions.push_back(a.front().index_version());
          sequence += a.front().mutation_sequence();
        }
        st = SameVersion(calls, request.index(), versions);
        for (int i = 0; i < request.batches_size() && st.ok(); ++i) {
          st = MergeBatch(calls, i, request.batches(i), batches[i], answers,
                          request.select_size(), out.add_results());
        }
        if (!st.ok()) return shards.Close(st);
        out.set_index_version(versions[0]);
        NoteVersion(calls, request.index(), out);
        out.set_mutation_sequence(sequence);
      }
    } else {
      out.mutable_error()->set_code(static_cast<int>(bad.code()));
      out.mutable_error()->set_message(std::string(bad.message()));
    }
    // Continued within the router's message limit, as gpujoind continues it.
    const uint64_t batch_id = out.batch_id();
    absl::StatusOr<JoinParts> planned =
        out.has_error() ? absl::StatusOr<JoinParts>(absl::InternalError("unused"))
                        : JoinParts::Plan(out, calls.config().max_message_bytes);
    if (out.has_error() || !planned.ok()) {
      if (!out.has_error()) {
        v1::JoinResponse e;
        e.set_batch_id(batch_id);
        e.mutable_error()->set_code(static_cast<int>(planned.status().code()));
        e.mutable_error()->set_message(std::string(planned.status().message()));
        out = std::move(e);
      }
      if (!stream->Write(out)) return shards.Close(grpc::Status::CANCELLED);
      continue;
    }
    for (size_t k = 0; k < planned->size(); ++k) {
      v1::JoinResponse m = planned->Message(k);
      m.set_batch_id(batch_id);
      m.set_mutation_sequence(out.mutation_sequence());
      if (!stream->Write(m)) return shards.Close(grpc::Status::CANCELLED);
    }
  }
  return shards.Close(grpc::Status::OK);
}

}  // namespace gpujoin::server::router
