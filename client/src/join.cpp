// Client::Join (a pipelined stream of join requests, answers reassembled by
// JoinAssembler) and JoinAll, which joins one in-memory key column in batches,
// sizing them with a count-only pass on a multi-value index.
#include <algorithm>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client_impl.hpp"
#include "gpujoin/client/client.hpp"
#include "gpujoin/common/status_macros.hpp"
#include "join_assembler.hpp"
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

namespace {

// Left rows of JoinAll's batch `b`: o.batch_rows from b * o.batch_rows on,
// fewer in the last batch, none past the keys.
uint64_t LeftBatchRows(const Keys& keys, const QueryAllOptions& o, uint64_t b) {
  return std::min<uint64_t>(o.batch_rows,
                            keys.size() - std::min<uint64_t>(keys.size(), b * o.batch_rows));
}

// One Join stream over JoinAll's `batches` left batches, left rows numbered
// from 0: `configure` sets a batch's capacity and count_only (on the writer
// thread, in batch order), `take` consumes its answer. `progress` counts the
// answered left rows (reported to o.progress); `version` and `sequence` become
// the index version and mutation sequence of the last answer.
absl::Status JoinPass(Client& client, const std::string& index, Keys keys, const QueryAllOptions& o,
                      size_t batches, const std::function<void(uint64_t, JoinLeft*)>& configure,
                      const std::function<absl::Status(uint64_t, JoinPairs&&)>& take,
                      Progress* progress, uint64_t* version, uint64_t* sequence) {
  uint64_t next = 0;
  BatchSource<JoinBatch> source = [&]() -> std::optional<JoinBatch> {
    if (next >= batches) return std::nullopt;
    const uint64_t pos = next * o.batch_rows;
    JoinBatch b;
    JoinLeft l;
    l.keys = keys.subspan(pos, LeftBatchRows(keys, o, next));
    l.first_left_row = static_cast<uint32_t>(pos);
    configure(next, &l);
    b.lefts.push_back(l);
    b.select = o.select;
    b.kind = o.kind;
    b.max_probe_count = o.max_probe_count;
    ++next;
    return b;
  };
  return client.Join(
      index, source,
      [&](JoinResult&& r) -> absl::Status {
        if (!r.error.ok()) return r.error;
        if (r.results.size() != 1) {
          return absl::InternalError(
              absl::StrCat("server sent ", r.results.size(), " join results for one left batch"));
        }
        JoinPairs& jp = r.results[0];
        *version = r.index_version;
        *sequence = r.mutation_sequence;
        progress->rows_sent += jp.statistics.found + jp.statistics.missing;
        progress->bytes_sent += jp.left_rows.size() * 2 * sizeof(uint32_t);
        GPUJOIN_RETURN_IF_ERROR(take(r.batch_id, std::move(jp)));
        if (o.progress) o.progress(*progress);
        return absl::OkStatus();
      },
      o.stream);
}

}  // namespace

absl::Status Client::Join(const std::string& index, const BatchSource<JoinBatch>& source,
                          const ResultSink<JoinResult>& sink, const StreamOptions& options) {
  grpc::ClientContext ctx;
  impl_->Prepare(&ctx, options.deadline);
  auto stream = impl_->stub_->Join(&ctx);
  auto encode = [&index](const JoinBatch& b, uint64_t id, pb::JoinRequest* r) -> absl::Status {
    if (b.lefts.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("join batch ", id, " has no left batches (lefts is empty)"));
    }
    r->set_index(index);
    r->set_max_probe_count(b.max_probe_count);
    r->set_batch_id(id);
    r->set_kind(detail::ToProtoJoinKind(b.kind));
    for (const std::string& name : b.select) r->add_select(name);
    for (size_t i = 0; i < b.lefts.size(); ++i) {
      const JoinLeft& l = b.lefts[i];
      if (!l.left_rows.empty() && l.left_rows.size() != l.keys.size()) {
        return absl::InvalidArgumentError(absl::StrCat("join batch ", id, " left ", i,
                                                       ": left_rows has ", l.left_rows.size(),
                                                       " rows but keys has ", l.keys.size()));
      }
      GPUJOIN_RETURN_IF_ERROR(CheckKeys(l.keys, absl::StrCat("join batch ", id, " left ", i)));
      auto* lb = r->add_batches();
      SetKeys(l.keys, l.keys.type(), lb);
      if (!l.left_rows.empty()) SetPacked(l.left_rows, lb->mutable_left_rows()->mutable_packed());
      lb->set_first_left_row(l.first_left_row);
      lb->set_capacity(l.capacity);
      lb->set_want_found(l.want_found);
      lb->set_want_probes(l.want_probes);
      lb->set_count_only(l.count_only);
    }
    return absl::OkStatus();
  };
  // Called on the reading thread only, part by part.
  detail::JoinAssembler assembler;
  auto decode = [&assembler](pb::JoinResponse& r, JoinResult* out) -> absl::Status {
    return assembler.Add(r, out);
  };
  auto more = [](const pb::JoinResponse& r) { return r.more(); };
  return detail::RunStream<pb::JoinRequest, pb::JoinResponse, JoinBatch, JoinResult>(
      &ctx, stream.get(), source, encode, decode, more, sink, options);
}

absl::StatusOr<JoinPairs> Client::JoinAll(const std::string& index, Keys keys, size_t batch_rows,
                                          uint64_t capacity, const StreamOptions& options,
                                          const ProgressCallback& progress) {
  QueryAllOptions o;
  o.batch_rows = batch_rows;
  o.capacity = capacity;
  o.stream = options;
  o.progress = progress;
  return JoinAll(index, keys, o);
}

absl::StatusOr<JoinPairs> Client::JoinAll(const std::string& index, Keys keys,
                                          const QueryAllOptions& o) {
  if (o.batch_rows == 0) return absl::InvalidArgumentError("batch_rows must be positive");
  GPUJOIN_RETURN_IF_ERROR(CheckKeys(keys, "keys"));
  if (keys.size() > std::numeric_limits<uint32_t>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat("join has ", keys.size(), " left rows; left row IDs are uint32"));
  }
  // Inner and left-outer joins on a multi-value index may yield more pairs than
  // left rows: with no capacity given, count first, then ask for exactly that.
  bool sized = false;
  if (o.capacity == 0 && !o.count_only &&
      (o.kind == JoinKind::kInner || o.kind == JoinKind::kLeftOuter)) {
    GPUJOIN_ASSIGN_OR_RETURN(const IndexInfo info, DescribeIndex(index));
    sized = info.duplicates == DuplicatePolicy::kKeepAll;
  }
  // With a selection, empty input still sends one (empty) batch (as LookupAll).
  const size_t batches =
      keys.empty() ? (o.select.empty() ? 0 : 1) : (keys.size() + o.batch_rows - 1) / o.batch_rows;
  auto rows_of = [&](uint64_t b) { return LeftBatchRows(keys, o, b); };
  // The largest capacity the server takes for one batch.
  constexpr uint64_t kMaxCapacity = uint64_t{1} << 31;

  Progress p;
  p.total_rows = sized ? 2 * keys.size() : keys.size();
  uint64_t version = 0;   // of the last answer
  uint64_t sequence = 0;  // of the last answer
  auto pass = [&](const std::function<void(uint64_t, JoinLeft*)>& configure,
                  const std::function<absl::Status(uint64_t, JoinPairs &&)>& take) {
    return JoinPass(*this, index, keys, o, batches, configure, take, &p, &version, &sequence);
  };

  std::vector<uint64_t> counts;  // sized: the count pass's count of every batch
  if (sized) {
    counts.assign(batches, 0);
    GPUJOIN_RETURN_IF_ERROR(pass([](uint64_t, JoinLeft* l) { l->count_only = true; },
                                 [&](uint64_t b, JoinPairs&& jp) -> absl::Status {
                                   counts[b] = jp.count;
                                   return absl::OkStatus();
                                 }));
  }

  JoinPairs all;
  uint64_t left_to_ask = o.max_pairs ? o.max_pairs : std::numeric_limits<uint64_t>::max();
  // Called on the writer thread, in batch order, so `left_to_ask` needs no lock.
  auto configure = [&](uint64_t b, JoinLeft* l) {
    if (o.count_only) {
      l->count_only = true;
    } else if (sized) {
      const uint64_t want = std::min({counts[b], left_to_ask, kMaxCapacity});
      left_to_ask -= want;
      // Capacity 0 would mean "the batch's rows", and a count-only answer has no
      // columns: a batch with nothing to ask asks for one pair (dropped by `take`
      // when max_pairs is spent), so the gathered columns stay typed.
      l->capacity = std::max<uint64_t>(want, 1);
    } else {
      l->capacity = o.capacity;
      if (o.max_pairs) {
        l->capacity = std::min<uint64_t>(o.capacity ? o.capacity : l->keys.size(), o.max_pairs);
      }
    }
  };
  auto take = [&](uint64_t b, JoinPairs&& jp) -> absl::Status {
    if (sized && jp.count > counts[b]) {
      return absl::AbortedError(absl::StrCat(
          "join of index '", index, "': batch ", b, " yields ", jp.count, " pairs, its count pass ",
          counts[b],
          ": the index changed (a rebuild or a Mutate) between the passes; run the join again"));
    }
    if (!sized && o.capacity == 0 && !o.count_only && jp.count > rows_of(b)) {
      return absl::AbortedError(absl::StrCat("join of index '", index, "': batch ", b, " yields ",
                                             jp.count, " pairs for ", rows_of(b),
                                             " left rows: the index was rebuilt with keep_all "
                                             "during the join; run the join again"));
    }
    size_t keep = jp.left_rows.size();
    if (o.max_pairs) keep = std::min<uint64_t>(keep, o.max_pairs - all.left_rows.size());
    all.left_rows.insert(all.left_rows.end(), jp.left_rows.begin(), jp.left_rows.begin() + keep);
    all.right_rows.insert(all.right_rows.end(), jp.right_rows.begin(),
                          jp.right_rows.begin() + keep);
    if (keep < jp.left_rows.size()) {
      for (Column& c : jp.columns) {
        Column prefix(c.name, c.type);
        GPUJOIN_RETURN_IF_ERROR(prefix.AppendRows(c.view().Slice(0, keep)));
        c = std::move(prefix);
      }
    }
    GPUJOIN_RETURN_IF_ERROR(AppendColumns(std::move(jp.columns), &all.columns));
    all.count += jp.count;
    all.capacity += jp.capacity;
    all.overflow = all.overflow || jp.overflow;
    all.statistics.Merge(jp.statistics);
    return absl::OkStatus();
  };
  GPUJOIN_RETURN_IF_ERROR(pass(configure, take));
  if (o.max_pairs && all.count > o.max_pairs && !o.count_only) all.overflow = true;
  all.index_version = version;
  all.mutation_sequence = sequence;
  return all;
}

}  // namespace gpujoin::client
