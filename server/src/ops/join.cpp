// Join: every left batch decoded and checked (wire/join_wire.cpp), the result
// planned within --max-result-bytes (result_budget.cpp), one join node run over
// all batches, the pairs, found flags, probes and gathered columns encoded per
// batch.
#include <algorithm>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gpujoin/common/status_macros.hpp"
#include "gpujoin/engine/graph.hpp"
#include "ops/operations.hpp"
#include "ops/result_budget.hpp"
#include "wire/request_checks.hpp"
#include "wire/join_parts.hpp"
#include "wire/join_wire.hpp"
#include "wire/query_statistics.hpp"

namespace gpujoin::server {
namespace {

// One left batch: the request's batch decoded, its pair counts, and (once
// planned) its engine result and response outputs.
template <typename Key>
struct BatchBuffers {
  DecodedLeftBatch<Key> decoded;
  uint64_t capacity = 0;   // the truncation point (reported back)
  uint64_t wanted = 0;     // pairs the batch may yield, at most: min(capacity, bound)
  uint64_t allocated = 0;  // pairs allocated (<= wanted); 0 when count-only
  engine::JoinResult result;
  std::optional<PackedOutput<uint32_t>> out_left, out_right, probes;
  std::optional<PackedOutput<uint8_t>> found;
  std::optional<GatherTarget> gather;
};

// The pairs of decoded batch `buf` where no left row yields more than
// `pairs_per_row` pairs: those it may yield and those allocated before the
// result budget is consulted.
template <typename Key>
void PlanPairs(uint64_t pairs_per_row, BatchBuffers<Key>& buf) {
  if (buf.decoded.count_only) return;
  const uint64_t rows = buf.decoded.keys.size();
  buf.capacity = buf.decoded.capacity;
  // No batch yields more than pairs_per_row pairs a left row, so a larger
  // capacity costs nothing beyond them.
  buf.wanted = std::min<uint64_t>(buf.capacity, rows * pairs_per_row);
  // The pairs of one per left row are always allocated (or the request is
  // refused by the result budget); pairs beyond them only as far as
  // --max-result-bytes allows.
  buf.allocated = std::min<uint64_t>(buf.wanted, rows);
}

// Found, probes and the column headers travel in a batch's first response
// message, whole: refuse before running what JoinParts::Plan could not send.
// Returns the bytes of its found and probes.
absl::StatusOr<uint64_t> CheckFirstPart(const v1::LeftBatch& b, const std::string& field,
                                        uint64_t rows, bool count_only,
                                        std::span<const SelectedColumn> selected,
                                        uint64_t max_message_bytes) {
  const size_t strings = VariableWidthCount(selected);
  uint64_t name_bytes = 0;
  for (const SelectedColumn& c : selected) name_bytes += c.name.size();
  const uint64_t head = rows * ((b.want_found() ? 1 : 0) + (b.want_probes() ? 4 : 0));
  const uint64_t first_part =
      JoinParts::FirstPartBytes(head, count_only ? 0 : selected.size(),
                                count_only ? 0 : name_bytes, count_only ? 0 : strings);
  const uint64_t room = JoinParts::MessageRoom(max_message_bytes);
  if (first_part > room) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": the batch's first response part (found and probes of ", rows, " rows",
        count_only || selected.empty() ? "" : ", the selected columns' headers",
        ") would need ", first_part, " bytes, more than the ", room,
        " bytes one message of --max-message-bytes=", max_message_bytes,
        " carries; split the batch"));
  }
  return head;
}

// The engine batch of left batch `b`, with its outputs made in `r` (the pairs
// allocated, found and probes when asked, the gathered columns sharing
// `string_share` bytes each).
template <typename Key>
engine::JoinBatchT<Key> MakeEngineBatch(const v1::LeftBatch& b,
                                        std::span<const SelectedColumn> selected,
                                        uint64_t string_share, BatchBuffers<Key>& buf,
                                        v1::JoinBatchResult* r) {
  buf.out_left.emplace(r->mutable_left_rows(), buf.allocated);
  buf.out_right.emplace(r->mutable_right_rows(), buf.allocated);
  engine::JoinBatchT<Key> jb;
  jb.keys = KeyInputOf(buf.decoded.keys);
  jb.left_rows = buf.decoded.left_rows.span();
  jb.first_left_row = static_cast<uint32_t>(b.first_left_row());  // checked when decoded
  jb.out_left_rows = buf.out_left->span();
  jb.out_right_rows = buf.out_right->span();
  jb.result = &buf.result;
  if (b.want_found()) {
    buf.found.emplace(r->mutable_found(), buf.decoded.keys.size());
    jb.found = buf.found->span();
  }
  if (b.want_probes()) {
    buf.probes.emplace(r->mutable_probes(), buf.decoded.keys.size());
    jb.probes = buf.probes->span();
  }
  if (!buf.decoded.count_only && !selected.empty()) {
    buf.gather.emplace(selected, buf.allocated, string_share, r->mutable_columns());
    jb.gather = buf.gather->Outputs();
  }
  return jb;
}

// Encodes a run batch's result into `r`; returns the value bytes it gathered.
// `build_overflowed`: the index lost rows at build time.
template <typename Key>
uint64_t FinishBatch(BatchBuffers<Key>& buf, bool build_overflowed, v1::JoinBatchResult* r) {
  const uint64_t kept = std::min(buf.result.count, buf.allocated);
  buf.out_left->Finish(kept);
  buf.out_right->Finish(kept);
  if (buf.found) buf.found->Finish();
  if (buf.probes) buf.probes->Finish();
  const uint64_t gathered = buf.gather ? buf.gather->Finish(kept) : 0;
  r->set_count(buf.result.count);
  r->set_capacity(buf.capacity);
  // Count-only: no pairs were asked for, so only a lossy build makes the count short.
  r->set_overflow(buf.decoded.count_only ? build_overflowed : buf.result.overflow);
  FillQueryStatistics(buf.result.statistics, r->mutable_statistics());
  return gathered;
}

}  // namespace

absl::Status Operations::Join(const v1::JoinRequest& request, v1::JoinResponse* response) {
  // A kind that is not one is a malformed request, whatever the registry holds.
  GPUJOIN_RETURN_IF_ERROR(FromWireJoinKind(request.kind(), "kind").status());
  GPUJOIN_ASSIGN_OR_RETURN(auto version, FindIndex(request.index(), "index"));
  GPUJOIN_RETURN_IF_ERROR(CheckPlacement(*version, state_.config.shard, request.replica(), false));
  const IndexReadLock read(*version);
  response->set_mutation_sequence(read.sequence());
  if (request.batches_size() == 0) {
    return absl::InvalidArgumentError("batches: at least one left batch is required");
  }
  const uint32_t capacity = version->index->spec().capacity;
  if (request.max_probe_count() > capacity) {
    return absl::InvalidArgumentError(absl::StrCat("max_probe_count: ", request.max_probe_count(),
                                                   " exceeds the capacity ", capacity,
                                                   " of index \"", version->name, "\""));
  }
  return WithIndexKey(version->index->key_type(), [&](auto word) {
    return JoinOf<typename decltype(word)::type>(*version, request, response);
  });
}

template <typename Key>
absl::Status Operations::JoinOf(const IndexVersion& version, const v1::JoinRequest& request,
                                v1::JoinResponse* response) {
  // The response's objects per batch must stay within what the result budget
  // charges for them.
  static_assert(sizeof(BatchBuffers<Key>) + sizeof(engine::JoinBatchT<Key>) +
                    sizeof(v1::JoinBatchResult) <=
                kJoinBatchObjectBytes);
  static_assert(2 * sizeof(engine::HashColumn) + sizeof(DecodedColumn<int32_t>) <=
                kKeyColumnObjectBytes);
  GPUJOIN_ASSIGN_OR_RETURN(const engine::JoinKind kind, FromWireJoinKind(request.kind(), "kind"));
  GPUJOIN_ASSIGN_OR_RETURN(const std::vector<SelectedColumn> selected,
                           ResolveSelect(version, request.select()));
  // Pairs per left row, at most: one, except for inner and outer joins on a
  // keep_all index, where a row yields a pair per row of its key's group.
  const bool multi = version.index->spec().duplicates == engine::DuplicatePolicy::kKeepAll &&
                     (kind == engine::JoinKind::kInner || kind == engine::JoinKind::kLeftOuter);
  const uint64_t pairs_per_row =
      multi ? std::max<uint64_t>(1, version.index->build_statistics().max_group_rows) : 1;
  JoinResultBudget budget(selected, ResultLimit(), static_cast<uint64_t>(request.batches_size()),
                          version.index->spec().key_columns.size());
  // Refused before the per-batch buffers are made.
  GPUJOIN_RETURN_IF_ERROR(budget.CheckBatchObjects());
  std::vector<BatchBuffers<Key>> buffers(request.batches_size());
  for (int i = 0; i < request.batches_size(); ++i) {
    const v1::LeftBatch& b = request.batches(i);
    const std::string field = absl::StrCat("batches[", i, "]");
    BatchBuffers<Key>& buf = buffers[i];
    GPUJOIN_ASSIGN_OR_RETURN(buf.decoded,
                             DecodeLeftBatch<Key>(b, field, version.name, KeySchemaOf(version)));
    GPUJOIN_RETURN_IF_ERROR(CheckShardKeys(buf.decoded.keys,
                                           KeysOwned(version, state_.config.shard),
                                           field + "." + detail::KeysField<Key>()));
    PlanPairs(pairs_per_row, buf);
    GPUJOIN_ASSIGN_OR_RETURN(const uint64_t head, CheckFirstPart(b, field, buf.decoded.keys.size(),
                                                                 buf.decoded.count_only, selected,
                                                                 state_.config.max_message_bytes));
    budget.AddBatch(buf.decoded.count_only, head, buf.allocated);
  }
  // Refused before any batch's outputs or gather targets are made.
  GPUJOIN_RETURN_IF_ERROR(budget.Check());
  // Pairs beyond one per left row (keep_all inner and outer joins), in batch
  // order, as far as what is left of --max-result-bytes allows: never more.
  // A batch cut short here reports the pairs allocated as its capacity, and
  // overflow when its count exceeds them.
  const size_t strings = VariableWidthCount(selected);
  uint64_t string_outputs = 0;
  for (BatchBuffers<Key>& buf : buffers) {
    buf.allocated = budget.Grow(buf.allocated, buf.wanted);
    if (buf.allocated < buf.wanted) buf.capacity = buf.allocated;
  }
  for (const BatchBuffers<Key>& buf : buffers) {
    if (buf.allocated != 0) string_outputs += strings;
  }
  // The string outputs share what is left equally.
  const uint64_t string_share = budget.StringShare(string_outputs);

  engine::CommandGraph graph;
  engine::JoinNodeT<Key> node;
  node.index = version.index.get();
  node.max_probe_count = static_cast<uint32_t>(request.max_probe_count());  // <= capacity
  node.kind = kind;
  for (int i = 0; i < request.batches_size(); ++i) {
    v1::JoinBatchResult* r = response->add_results();
    r->set_batch(static_cast<uint64_t>(i));
    node.batches.push_back(
        MakeEngineBatch<Key>(request.batches(i), selected, string_share, buffers[i], r));
  }
  graph.Add(std::move(node));
  const absl::Status run = RunGraph(graph);
  if (run.code() == absl::StatusCode::kResourceExhausted && string_outputs != 0) {
    return absl::ResourceExhaustedError(
        absl::StrCat(run.message(),
                     " (the batches' selected string columns share what --max-result-bytes "
                     "leaves of the results: ",
                     string_share,
                     " bytes each here; lower the capacities or "
                     "split the request)"));
  }
  GPUJOIN_RETURN_IF_ERROR(run);

  response->set_index_version(version.version);
  const bool build_overflowed = version.index->build_statistics().overflow_rows != 0;
  uint64_t gathered = 0;
  for (int i = 0; i < request.batches_size(); ++i) {
    BatchBuffers<Key>& buf = buffers[i];
    v1::JoinBatchResult* r = response->mutable_results(i);
    gathered += FinishBatch<Key>(buf, build_overflowed, r);
    state_.metrics->RecordQuery(version.name, QueryOp::kJoin, buf.decoded.keys.size(),
                                buf.result.statistics);
    state_.metrics->RecordJoinBatch(version.name, buf.result.count, r->overflow());
  }
  if (!selected.empty()) state_.metrics->RecordGathered(QueryOp::kJoin, gathered);
  return absl::OkStatus();
}

}  // namespace gpujoin::server
