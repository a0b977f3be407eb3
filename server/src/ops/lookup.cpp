// Lookup: the keys decoded and checked (wire/column_codec, or the packed keys
// of wire/lookup_wire), the response and result sizes checked, one lookup node
// run (with the selected payload columns gathered), the outputs encoded.
#include <algorithm>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gpujoin/common/status_macros.hpp"
#include "gpujoin/engine/graph.hpp"
#include "ops/operations.hpp"
#include "wire/request_checks.hpp"
#include "wire/names.hpp"
#include "wire/query_statistics.hpp"

namespace gpujoin::server {

absl::Status Operations::Lookup(const v1::LookupRequest& request, v1::LookupResponse* response) {
  // The request's own fields first, so a malformed batch is INVALID_ARGUMENT
  // whatever the registry holds; which key column it must use depends on the index.
  GPUJOIN_RETURN_IF_ERROR(ValidateIndexName(request.index(), "index"));
  GPUJOIN_ASSIGN_OR_RETURN(KeyColumns columns, DecodeKeyColumns(request, ""));
  if (!columns.keys.present() && !columns.keys64.present() && request.key_columns_size() == 0) {
    // No keys: name the field of the index's key (uint32 when it is unknown).
    const auto live = state_.registry->Get(request.index());
    return WithIndexKey(live ? live->index->key_type() : engine::KeyType::kUint32, [&](auto word) {
      using Key = typename decltype(word)::type;
      return TakeIndexKeys<Key>(columns, request, "", request.index(),
                                live ? KeySchemaOf(*live) : KeySchemaView{}, Presence::kRequired)
          .status();
    });
  }
  GPUJOIN_ASSIGN_OR_RETURN(auto version, FindIndex(request.index(), "index"));
  GPUJOIN_RETURN_IF_ERROR(CheckPlacement(*version, state_.config.shard, request.replica(), false));
  const IndexReadLock read(*version);
  return WithIndexKey(version->index->key_type(), [&](auto word) -> absl::Status {
    using Key = typename decltype(word)::type;
    GPUJOIN_ASSIGN_OR_RETURN(DecodedKeys<Key> keys,
                             TakeIndexKeys<Key>(columns, request, "", version->name,
                                                KeySchemaOf(*version), Presence::kRequired));
    GPUJOIN_RETURN_IF_ERROR(
        CheckShardKeys(keys, KeysOwned(*version, state_.config.shard), detail::KeysField<Key>()));
    const size_t rows = keys.size();
    GPUJOIN_ASSIGN_OR_RETURN(const std::vector<SelectedColumn> selected,
                             ResolveSelect(*version, request.select()));
    GPUJOIN_ASSIGN_OR_RETURN(const uint64_t string_share,
                             CheckLookup(*version, request, rows, selected));
    PackedOutput<uint32_t> values(response->mutable_values(), rows);
    PackedOutput<uint8_t> found(response->mutable_found(), rows);
    std::optional<PackedOutput<uint32_t>> probes, match_counts;
    if (request.want_probes()) probes.emplace(response->mutable_probes(), rows);
    if (request.want_match_counts()) match_counts.emplace(response->mutable_match_counts(), rows);
    GatherTarget gather(selected, rows, string_share, response->mutable_columns());
    engine::QueryStatistics stats;
    GPUJOIN_RETURN_IF_ERROR(RunLookup<Key>(
        *version, request, KeyInputOf(keys), values.span(), found.span(),
        probes ? probes->span() : std::span<uint32_t>(),
        match_counts ? match_counts->span() : std::span<uint32_t>(), gather.Outputs(), &stats));
    values.Finish();
    found.Finish();
    if (probes) probes->Finish();
    if (match_counts) match_counts->Finish();
    const uint64_t gathered = gather.Finish(rows);
    if (!selected.empty()) state_.metrics->RecordGathered(QueryOp::kLookup, gathered);
    response->set_index_version(version->version);
    response->set_mutation_sequence(read.sequence());
    FillQueryStatistics(stats, response->mutable_statistics());
    return absl::OkStatus();
  });
}

absl::Status Operations::LookupPacked(const v1::LookupRequest& fields, engine::KeyType key_type,
                                      uint64_t rows, const std::function<void(uint8_t*)>& copy_keys,
                                      PackedLookupResult* result) {
  // The same checks in the same order as Lookup (packed keys of whole rows
  // always decode; the request's other key column, if any, was parsed into
  // `fields`).
  GPUJOIN_RETURN_IF_ERROR(ValidateIndexName(fields.index(), "index"));
  const bool wide = key_type == engine::KeyType::kUint64;
  GPUJOIN_ASSIGN_OR_RETURN(KeyColumns columns, DecodeKeyColumns(fields, ""));
  GPUJOIN_ASSIGN_OR_RETURN(auto version, FindIndex(fields.index(), "index"));
  GPUJOIN_RETURN_IF_ERROR(CheckPlacement(*version, state_.config.shard, fields.replica(), false));
  const IndexReadLock read(*version);
  KeyFieldsSent sent;
  sent.keys = !wide || columns.keys.present();
  sent.keys_bytes = wide ? 4 * columns.keys.size() : 4 * rows;
  sent.keys64 = wide || columns.keys64.present();
  sent.keys64_bytes = wide ? 8 * rows : 8 * columns.keys64.size();
  sent.key_columns = fields.key_columns_size();
  // The bytes path carries key words only: a key-schema index refuses them here.
  GPUJOIN_RETURN_IF_ERROR(
      CheckKeyFields(version->index->key_type(), sent, "", version->name, KeySchemaOf(*version)));
  return WithKeyWord(key_type, [&](auto word) -> absl::Status {
    using Key = typename decltype(word)::type;
    // The keys (bounded by the message) before the select and result checks, as Lookup.
    GPUJOIN_ASSIGN_OR_RETURN(engine::HostBuffer keys,
                             state_.backend->AllocateHostBuffer(rows * sizeof(Key)));
    copy_keys(keys.data());
    GPUJOIN_RETURN_IF_ERROR(CheckShardKeys(keys.Span<const Key>(0, rows),
                                           KeysOwned(*version, state_.config.shard),
                                           detail::KeysField<Key>()));
    GPUJOIN_ASSIGN_OR_RETURN(const std::vector<SelectedColumn> selected,
                             ResolveSelect(*version, fields.select()));
    GPUJOIN_ASSIGN_OR_RETURN(const uint64_t string_share,
                             CheckLookup(*version, fields, rows, selected));
    result->rows = rows;
    result->probes = fields.want_probes();
    result->match_counts = fields.want_match_counts();
    GPUJOIN_ASSIGN_OR_RETURN(result->outputs, state_.backend->AllocateHostBuffer(result->bytes()));
    const engine::HostBuffer& out = result->outputs;
    GatherTarget gather(selected, rows, string_share, &result->columns);
    GPUJOIN_RETURN_IF_ERROR(RunLookup<Key>(
        *version, fields, engine::Chunked<Key>{keys.Span<const Key>(0, rows)},
        out.Span<uint32_t>(result->values_offset(), rows),
        out.Span<uint8_t>(result->found_offset(), rows),
        result->probes ? out.Span<uint32_t>(result->probes_offset(), rows) : std::span<uint32_t>(),
        result->match_counts ? out.Span<uint32_t>(result->match_counts_offset(), rows)
                             : std::span<uint32_t>(),
        gather.Outputs(), &result->statistics));
    const uint64_t gathered = gather.Finish(rows);
    if (!selected.empty()) state_.metrics->RecordGathered(QueryOp::kLookup, gathered);
    result->index_version = version->version;
    result->mutation_sequence = read.sequence();
    return absl::OkStatus();
  });
}

template <typename Key>
absl::Status Operations::RunLookup(const IndexVersion& version, const v1::LookupRequest& request,
                                   engine::KeyChunks<Key> keys, std::span<uint32_t> values,
                                   std::span<uint8_t> found, std::span<uint32_t> probes,
                                   std::span<uint32_t> match_counts,
                                   std::vector<engine::GatherOutput> gather,
                                   engine::QueryStatistics* stats) {
  engine::CommandGraph graph;
  engine::LookupNodeT<Key> node;
  node.index = version.index.get();
  const uint64_t rows = engine::KeyRows(keys);
  node.keys = std::move(keys);
  node.values = values;
  node.found = found;
  node.probes = probes;
  node.match_counts = match_counts;
  node.statistics = stats;
  const auto string_output = std::find_if(gather.begin(), gather.end(),
                                          [](const auto& g) { return g.string_bytes != nullptr; });
  const bool strings = string_output != gather.end();
  const uint64_t string_share = strings ? string_output->max_string_bytes : 0;
  node.gather = std::move(gather);
  // CheckLookup checked max_probe_count <= capacity, so it fits.
  node.max_probe_count = static_cast<uint32_t>(request.max_probe_count());
  graph.Add(std::move(node));
  const absl::Status run = RunGraph(graph);
  if (run.code() == absl::StatusCode::kResourceExhausted && strings) {
    return absl::ResourceExhaustedError(
        absl::StrCat(run.message(),
                     " (the selected string columns share what --max-message-bytes and "
                     "--max-result-bytes leave of the response: ",
                     string_share,
                     " bytes each here; split "
                     "the batch)"));
  }
  GPUJOIN_RETURN_IF_ERROR(run);
  state_.metrics->RecordQuery(version.name, QueryOp::kLookup, rows, *stats);
  return absl::OkStatus();
}

// Lookup and LookupPacked use RunLookup above its definition, from generic
// lambdas; clang (the fuzz build) emits no implicit instantiation for those uses
// and the link fails, so every key kind is instantiated here explicitly.
#define GPUJOIN_INSTANTIATE_RUN_LOOKUP(Key)                                              \
  template absl::Status Operations::RunLookup<Key>(                                      \
      const IndexVersion&, const v1::LookupRequest&, engine::KeyChunks<Key>,             \
      std::span<uint32_t>, std::span<uint8_t>, std::span<uint32_t>, std::span<uint32_t>, \
      std::vector<engine::GatherOutput>, engine::QueryStatistics*);
GPUJOIN_INSTANTIATE_RUN_LOOKUP(uint32_t)
GPUJOIN_INSTANTIATE_RUN_LOOKUP(uint64_t)
GPUJOIN_INSTANTIATE_RUN_LOOKUP(engine::ColumnKey)
#undef GPUJOIN_INSTANTIATE_RUN_LOOKUP

}  // namespace gpujoin::server
