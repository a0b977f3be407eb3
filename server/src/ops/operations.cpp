#include "ops/operations.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "gpujoin/common/status_macros.hpp"
#include "gpujoin/engine/aggregation.hpp"
#include "gpujoin/engine/graph.hpp"
#include "wire/hash_wire.hpp"
#include "wire/join_parts.hpp"
#include "wire/names.hpp"
#include "storage/snapshot_format.hpp"
#include "storage/snapshot_store.hpp"

namespace gpujoin::server {
namespace {

using engine::AggregateOp;

// Most rows one build may have: generated row IDs and source rows are uint32.
constexpr uint64_t kMaxBuildRows = std::numeric_limits<uint32_t>::max();

// Largest generated value (first_value + row, row_base + position): 0xffffffff is
// the missing marker of Lookup and Join, so a found key must never return it.
constexpr uint64_t kMaxGeneratedValue = 0xfffffffeu;

// The proto carries 32-bit engine integers as uint64 so that a wider value reaches
// the server (a uint32 field would be truncated by the parser): refuse it here.
absl::Status CheckFitsU32(uint64_t value, std::string_view field) {
  if (value <= std::numeric_limits<uint32_t>::max()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(std::string(field), ": ", value,
                                                 " does not fit in 32 bits (at most ",
                                                 std::numeric_limits<uint32_t>::max(), ")"));
}

// Generated values base, base + 1, ..., base + rows - 1 must all stay at most
// kMaxGeneratedValue (no 0xffffffff, no wrap past 2^32). `what` describes the
// rows for the message.
absl::Status CheckGeneratedValues(uint64_t base, uint64_t rows, std::string_view field,
                                  std::string_view what) {
  if (rows == 0 || base + rows - 1 <= kMaxGeneratedValue) return absl::OkStatus();
  const uint64_t fit = base > kMaxGeneratedValue ? 0 : kMaxGeneratedValue - base + 1;
  return absl::InvalidArgumentError(absl::StrCat(
      std::string(field), ": ", base, " + ", rows, " rows - 1 = ", base + rows - 1, " (",
      std::string(what), ") exceeds ", kMaxGeneratedValue,
      " (0xfffffffe), the largest generated value (0xffffffff is the missing marker); at most ",
      fit, " rows fit from this value"));
}

absl::Status Prefixed(const absl::Status& s, std::string_view prefix) {
  if (s.ok()) return s;
  return absl::Status(s.code(), absl::StrCat(std::string(prefix), s.message()));
}

void FillQueryStatistics(const engine::QueryStatistics& s, v1::QueryStatistics* out) {
  out->set_found(s.found);
  out->set_missing(s.missing);
  out->set_total_probes(s.total_probes);
  out->set_max_probes(s.max_probes);
}

absl::StatusOr<AggregateOp> ToEngineOp(v1::AggregateOp op) {
  switch (op) {
    case v1::AGGREGATE_OP_COUNT:
      return AggregateOp::kCount;
    case v1::AGGREGATE_OP_SUM:
      return AggregateOp::kSum;
    case v1::AGGREGATE_OP_MIN:
      return AggregateOp::kMin;
    case v1::AGGREGATE_OP_MAX:
      return AggregateOp::kMax;
    case v1::AGGREGATE_OP_MEAN:
      return AggregateOp::kMean;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("op: ", static_cast<int>(op),
                       " is not an operation; set AGGREGATE_OP_COUNT, _SUM, _MIN, _MAX or _MEAN"));
  }
}

// Host bytes charged to --max-result-bytes for each batch of a join, whatever
// its rows (its buffers, engine batch and response result; static_assert'ed).
constexpr uint64_t kJoinBatchObjectBytes = 1024;

// Per-group output bytes of an aggregate response (batch + totals + contributing rows).
constexpr uint64_t kAggregateBytesPerGroup = 4 * 3;
// ... of a typed response: 8-byte batch and total results, contributing rows,
// uint64 total counts, and under 1 byte of validity and overflow bitmaps.
constexpr uint64_t kTypedAggregateBytesPerGroup = 8 + 8 + 4 + 8 + 4;
// ... of a float32 or count response with want_counts64.
constexpr uint64_t kCounts64AggregateBytesPerGroup = kAggregateBytesPerGroup + 8;

// The value type a request aggregates: kFloat32 for `values` (and count), else
// typed_values' type, which must be a typed aggregation type.
absl::StatusOr<engine::ColumnType> AggregateRequestValueType(const v1::AggregateRequest& request,
                                                             AggregateOp op) {
  if (!request.has_typed_values()) return engine::ColumnType::kFloat32;
  if (op == AggregateOp::kCount) {
    return absl::InvalidArgumentError("typed_values: must not be set for AGGREGATE_OP_COUNT");
  }
  GPUJOIN_ASSIGN_OR_RETURN(engine::ColumnType type,
                           FromWireColumnType(request.typed_values().type(), "typed_values.type"));
  if (type == engine::ColumnType::kFloat32) {
    return absl::InvalidArgumentError(
        "typed_values.type: COLUMN_TYPE_FLOAT32 values travel in `values` (the reference "
        "float32 path)");
  }
  if (!engine::IsTypedAggregateValue(type)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "typed_values.type: ", WireColumnTypeName(request.typed_values().type()),
        " cannot be aggregated; use INT32, INT64, UINT32, UINT64 or FLOAT64 (or `values` for "
        "float32)"));
  }
  return type;
}

// An Arrow bitmap (LSB first) of the nonzero flags.
std::string FlagBitmap(std::span<const uint8_t> flags, uint64_t* set) {
  std::string out(engine::BitmapBytes(flags.size()), '\0');
  uint64_t n = 0;
  for (size_t i = 0; i < flags.size(); ++i) {
    if (flags[i] == 0) continue;
    out[i / 8] = static_cast<char>(static_cast<uint8_t>(out[i / 8]) | (1u << (i % 8)));
    ++n;
  }
  if (set != nullptr) *set = n;
  return out;
}

// A typed aggregation result as a wire Column: AggregateResultType's type, the
// 64-bit engine words narrowed to 4 bytes for 32-bit min/max results, and the
// empty groups of an integer min/max null (`rows` = contributing rows per group).
template <typename Count>
v1::Column TypedResultColumn(AggregateOp op, engine::ColumnType value_type,
                             std::span<const uint64_t> words, std::span<const Count> rows) {
  const engine::ColumnType type = engine::AggregateResultType(op, value_type);
  v1::Column c;
  c.set_type(ToWireColumnType(type));
  c.set_length(words.size());
  if (engine::ColumnWidth(type) == 4) {
    std::vector<uint32_t> narrow(words.begin(), words.end());  // the low 32 bits
    c.set_data(PackColumn<uint32_t>(narrow));
  } else {
    c.set_data(PackColumn<uint64_t>(words));
  }
  const bool minmax = op == AggregateOp::kMin || op == AggregateOp::kMax;
  if (minmax && value_type != engine::ColumnType::kFloat64) {
    std::vector<uint8_t> valid(rows.size());
    uint64_t nulls = 0;
    for (size_t g = 0; g < rows.size(); ++g) {
      valid[g] = rows[g] != 0;
      nulls += rows[g] == 0;
    }
    if (nulls > 0) {
      c.set_validity(FlagBitmap(valid, nullptr));
      c.set_null_count(nulls);
    }
  }
  return c;
}

// The request field that carries keys of the key word Key.
template <typename Key>
constexpr const char* KeysField() {
  return sizeof(Key) == 8 ? "keys64" : "keys";
}

}  // namespace

std::string StatusCodeName(absl::StatusCode code) { return absl::StatusCodeToString(code); }

// ------------------------------------------------------------------ common

absl::Status Operations::RunGraph(const engine::CommandGraph& graph) {
  absl::Status s = state_.backend->Run(graph);
  if (!s.ok() && !state_.backend->Healthy() && state_.on_backend_fatal) state_.on_backend_fatal();
  return s;
}

absl::StatusOr<std::shared_ptr<const IndexVersion>> Operations::FindIndex(const std::string& name,
                                                                          std::string_view field) {
  GPUJOIN_RETURN_IF_ERROR(ValidateIndexName(name, field));
  auto v = state_.registry->Get(name);
  if (v == nullptr) return absl::NotFoundError(absl::StrCat("index \"", name, "\" not found"));
  return v;
}

uint64_t Operations::ResponseLimit() const {
  // Leave room for the response's other fields and framing.
  return state_.config.max_message_bytes -
         std::min<uint64_t>(4096, state_.config.max_message_bytes / 2);
}

uint64_t Operations::ResultLimit() const {
  return state_.config.max_result_bytes == 0 ? kDefaultMaxResultBytes
                                             : state_.config.max_result_bytes;
}

absl::Status Operations::CheckResponseSize(uint64_t bytes, std::string_view what) const {
  const uint64_t limit = ResponseLimit();
  if (bytes > limit) {
    return absl::InvalidArgumentError(absl::StrCat(
        std::string(what), " would need a ", bytes, " byte response, more than the ", limit,
        " bytes allowed by --max-message-bytes=", state_.config.max_message_bytes,
        "; split the batch"));
  }
  return absl::OkStatus();
}

void Operations::UpdateServiceGauges() {
  state_.metrics->SetDeviceMemory(state_.budget->used_bytes(), state_.budget->limit_bytes(),
                                  state_.backend_info.memory_total_bytes);
  state_.metrics->SetIndexCount(state_.registry->size());
}

void Operations::FillIndexInfo(const IndexVersion& v, v1::IndexInfo* info) const {
  const engine::HashIndex& index = *v.index;
  const engine::BuildStatistics& st = index.build_statistics();
  info->set_name(v.name);
  info->set_version(v.version);
  if (state_.snapshots != nullptr) info->set_durable_version(state_.snapshots->DurableVersion(v.name));
  info->set_capacity(index.spec().capacity);
  info->set_max_probe_count(index.spec().probe_bound());
  info->set_first_value(v.first_value);
  info->set_explicit_values(v.explicit_values);
  info->set_batch_mode(v.batch_mode);
  info->set_rows(index.built_rows());
  auto* s = info->mutable_statistics();
  s->set_unique_keys(st.unique_keys);
  s->set_duplicate_rows(st.duplicate_rows);
  s->set_overflow_rows(st.overflow_rows);
  s->set_invalid_rows(st.invalid_rows);
  s->set_total_probes(st.total_probes);
  s->set_max_probes(st.max_probes);
  s->set_max_group_rows(st.max_group_rows);
  info->set_load_factor(index.load_factor());
  info->set_device_bytes(index.memory_bytes());
  info->set_build_seconds(v.build_seconds);
  info->set_backend(std::string(engine::BackendKindName(index.backend())));
  info->set_built_unix_millis(v.built_unix_millis);
  info->set_key_type(ToWireKeyType(index.key_type()));
  info->set_duplicates(ToWireDuplicatePolicy(index.spec().duplicates));
  uint64_t payload_bytes = 0;
  const std::vector<engine::PayloadColumnInfo>& payload = index.payload();
  for (size_t i = 0; i < payload.size(); ++i) {
    v1::PayloadColumnInfo* p = info->add_payload();
    p->set_name(i < v.payload_names.size() ? v.payload_names[i] : std::string());
    p->set_type(ToWireColumnType(payload[i].type));
    p->set_null_count(payload[i].null_count);
    p->set_bytes(payload[i].bytes);
    payload_bytes += payload[i].bytes;
  }
  info->set_payload_bytes(payload_bytes);
}

// ------------------------------------------------------------------ lookup

absl::Status Operations::Lookup(const v1::LookupRequest& request, v1::LookupResponse* response) {
  // The request's own fields first, so a malformed batch is INVALID_ARGUMENT
  // whatever the registry holds; which key column it must use depends on the index.
  GPUJOIN_RETURN_IF_ERROR(ValidateIndexName(request.index(), "index"));
  GPUJOIN_ASSIGN_OR_RETURN(KeyColumns columns, DecodeKeyColumns(request, ""));
  if (!columns.keys.present() && !columns.keys64.present()) {
    // No keys: name the column of the index's width (uint32 when it is unknown).
    const auto live = state_.registry->Get(request.index());
    return WithKeyWord(live ? live->index->key_type() : engine::KeyType::kU32, [&](auto word) {
      using Key = typename decltype(word)::type;
      return TakeKeys<Key>(columns, "", request.index(), Presence::kRequired).status();
    });
  }
  GPUJOIN_ASSIGN_OR_RETURN(auto version, FindIndex(request.index(), "index"));
  return WithKeyWord(version->index->key_type(), [&](auto word) -> absl::Status {
    using Key = typename decltype(word)::type;
    GPUJOIN_ASSIGN_OR_RETURN(DecodedColumn<Key> keys,
                             TakeKeys<Key>(columns, "", version->name, Presence::kRequired));
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
        *version, request, keys.span(), values.span(), found.span(),
        probes ? probes->span() : std::span<uint32_t>(),
        match_counts ? match_counts->span() : std::span<uint32_t>(), gather.Outputs(), &stats));
    values.Finish();
    found.Finish();
    if (probes) probes->Finish();
    if (match_counts) match_counts->Finish();
    const uint64_t gathered = gather.Finish(rows);
    if (!selected.empty()) state_.metrics->RecordGathered(QueryOp::kLookup, gathered);
    response->set_index_version(version->version);
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
  const bool wide = key_type == engine::KeyType::kU64;
  GPUJOIN_ASSIGN_OR_RETURN(KeyColumns columns, DecodeKeyColumns(fields, ""));
  GPUJOIN_ASSIGN_OR_RETURN(auto version, FindIndex(fields.index(), "index"));
  GPUJOIN_RETURN_IF_ERROR(
      CheckKeyWidth(version->index->key_type(), !wide || columns.keys.present(),
                    wide ? 4 * columns.keys.size() : 4 * rows, wide || columns.keys64.present(),
                    wide ? 8 * rows : 8 * columns.keys64.size(), "", version->name));
  GPUJOIN_ASSIGN_OR_RETURN(const std::vector<SelectedColumn> selected,
                           ResolveSelect(*version, fields.select()));
  GPUJOIN_ASSIGN_OR_RETURN(const uint64_t string_share,
                           CheckLookup(*version, fields, rows, selected));
  return WithKeyWord(key_type, [&](auto word) -> absl::Status {
    using Key = typename decltype(word)::type;
    GPUJOIN_ASSIGN_OR_RETURN(engine::HostBuffer keys,
                             state_.backend->AllocateHostBuffer(rows * sizeof(Key)));
    copy_keys(keys.data());
    result->rows = rows;
    result->probes = fields.want_probes();
    result->match_counts = fields.want_match_counts();
    GPUJOIN_ASSIGN_OR_RETURN(result->outputs, state_.backend->AllocateHostBuffer(result->bytes()));
    const engine::HostBuffer& out = result->outputs;
    GatherTarget gather(selected, rows, string_share, &result->columns);
    GPUJOIN_RETURN_IF_ERROR(RunLookup<Key>(
        *version, fields, keys.Span<const Key>(0, rows),
        out.Span<uint32_t>(result->values_offset(), rows),
        out.Span<uint8_t>(result->found_offset(), rows),
        result->probes ? out.Span<uint32_t>(result->probes_offset(), rows) : std::span<uint32_t>(),
        result->match_counts ? out.Span<uint32_t>(result->match_counts_offset(), rows)
                             : std::span<uint32_t>(),
        gather.Outputs(), &result->statistics));
    const uint64_t gathered = gather.Finish(rows);
    if (!selected.empty()) state_.metrics->RecordGathered(QueryOp::kLookup, gathered);
    result->index_version = version->version;
    return absl::OkStatus();
  });
}

absl::StatusOr<uint64_t> Operations::CheckLookup(const IndexVersion& version,
                                                 const v1::LookupRequest& request, uint64_t rows,
                                                 std::span<const SelectedColumn> selected) const {
  const uint32_t capacity = version.index->spec().capacity;
  if (request.max_probe_count() > capacity) {
    return absl::InvalidArgumentError(absl::StrCat("max_probe_count: ", request.max_probe_count(),
                                                   " exceeds the capacity ", capacity,
                                                   " of index \"", version.name, "\""));
  }
  const bool wide = version.index->key_type() == engine::KeyType::kU64;
  const std::string what = absl::StrCat(wide ? "keys64" : "keys", ": ", rows, " rows");
  const uint64_t fixed =
      rows * (5 + (request.want_probes() ? 4 : 0) + (request.want_match_counts() ? 4 : 0)) +
      GatheredFixedBytes(selected, rows);
  // The columns' own fields count against the message, not the result bytes.
  const uint64_t headers = GatheredHeaderBytes(selected);
  GPUJOIN_RETURN_IF_ERROR(CheckResponseSize(
      fixed + headers,
      selected.empty() ? what : absl::StrCat(what, " gathering ", selected.size(), " columns")));
  const uint64_t result_limit = ResultLimit();
  if (fixed > result_limit) {
    return absl::ResourceExhaustedError(absl::StrCat(
        what, " gathering ", selected.size(), " columns need ", fixed,
        " bytes of results, above --max-result-bytes=", result_limit, "; split the batch"));
  }
  const size_t strings = VariableWidthCount(selected);
  if (strings == 0) return uint64_t{0};
  // The selected string columns share what is left of the response equally.
  const uint64_t room = std::min(ResponseLimit() - headers - fixed, result_limit - fixed);
  return std::min<uint64_t>(0x7fffffff, room / strings);
}

template <typename Key>
absl::Status Operations::RunLookup(const IndexVersion& version, const v1::LookupRequest& request,
                                   std::span<const Key> keys, std::span<uint32_t> values,
                                   std::span<uint8_t> found, std::span<uint32_t> probes,
                                   std::span<uint32_t> match_counts,
                                   std::vector<engine::GatherOutput> gather,
                                   engine::QueryStatistics* stats) {
  engine::CommandGraph graph;
  engine::LookupNodeT<Key> node;
  node.index = version.index.get();
  node.keys = {keys};
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
  state_.metrics->RecordQuery(version.name, QueryOp::kLookup, keys.size(), *stats);
  return absl::OkStatus();
}

// Lookup and LookupPacked use RunLookup above its definition, from generic
// lambdas; clang (the fuzz build) emits no implicit instantiation for those uses
// and the link fails, so both key words are instantiated here explicitly.
template absl::Status Operations::RunLookup<uint32_t>(const IndexVersion&, const v1::LookupRequest&,
                                                      std::span<const uint32_t>,
                                                      std::span<uint32_t>, std::span<uint8_t>,
                                                      std::span<uint32_t>, std::span<uint32_t>,
                                                      std::vector<engine::GatherOutput>,
                                                      engine::QueryStatistics*);
template absl::Status Operations::RunLookup<uint64_t>(const IndexVersion&, const v1::LookupRequest&,
                                                      std::span<const uint64_t>,
                                                      std::span<uint32_t>, std::span<uint8_t>,
                                                      std::span<uint32_t>, std::span<uint32_t>,
                                                      std::vector<engine::GatherOutput>,
                                                      engine::QueryStatistics*);

// ------------------------------------------------------------------ join

absl::Status Operations::Join(const v1::JoinRequest& request, v1::JoinResponse* response) {
  // A kind that is not one is a malformed request, whatever the registry holds.
  GPUJOIN_RETURN_IF_ERROR(FromWireJoinKind(request.kind(), "kind").status());
  GPUJOIN_ASSIGN_OR_RETURN(auto version, FindIndex(request.index(), "index"));
  if (request.batches_size() == 0) {
    return absl::InvalidArgumentError("batches: at least one left batch is required");
  }
  const uint32_t capacity = version->index->spec().capacity;
  if (request.max_probe_count() > capacity) {
    return absl::InvalidArgumentError(absl::StrCat("max_probe_count: ", request.max_probe_count(),
                                                   " exceeds the capacity ", capacity,
                                                   " of index \"", version->name, "\""));
  }
  return WithKeyWord(version->index->key_type(), [&](auto word) {
    return JoinOf<typename decltype(word)::type>(*version, request, response);
  });
}

template <typename Key>
absl::Status Operations::JoinOf(const IndexVersion& version, const v1::JoinRequest& request,
                                v1::JoinResponse* response) {
  struct BatchBuffers {
    DecodedColumn<Key> keys;
    DecodedColumn<uint32_t> left_rows;
    bool count_only = false;
    uint64_t capacity = 0;   // the truncation point (reported back)
    uint64_t wanted = 0;     // pairs the batch may yield, at most: min(capacity, bound)
    uint64_t allocated = 0;  // pairs allocated (<= wanted); 0 when count-only
    engine::JoinResult result;
    std::optional<PackedOutput<uint32_t>> out_left, out_right, probes;
    std::optional<PackedOutput<uint8_t>> found;
    std::optional<GatherTarget> gather;
  };
  GPUJOIN_ASSIGN_OR_RETURN(const engine::JoinKind kind, FromWireJoinKind(request.kind(), "kind"));
  GPUJOIN_ASSIGN_OR_RETURN(const std::vector<SelectedColumn> selected,
                           ResolveSelect(version, request.select()));
  // Pairs per left row, at most: one, except for inner and outer joins on a
  // keep_all index, where a row yields a pair per row of its key's group.
  const bool multi = version.index->spec().duplicates == engine::DuplicatePolicy::kKeepAll &&
                     (kind == engine::JoinKind::kInner || kind == engine::JoinKind::kLeftOuter);
  const uint64_t pairs_per_row =
      multi ? std::max<uint64_t>(1, version.index->build_statistics().max_group_rows) : 1;
  // Host bytes of `n` pairs with their fixed-width gathered values.
  const auto pair_bytes = [&selected](uint64_t n) {
    return n * 8 + GatheredFixedBytes(selected, n);
  };
  // Host objects every batch costs whatever its rows: its buffers, engine batch
  // and response result, and (unless count-only) one Column per selected column
  // with its name. An empty batch is a few request bytes, so these, not the
  // message size, must bound a request of many batches.
  static_assert(sizeof(BatchBuffers) + sizeof(engine::JoinBatchT<Key>) +
                    sizeof(v1::JoinBatchResult) <=
                kJoinBatchObjectBytes);
  const uint64_t column_objects = GatheredObjectBytes(selected);
  const uint64_t result_limit = ResultLimit();
  const auto refuse = [&](uint64_t bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "batches: the results of ", request.batches_size(), " batches (pair capacities",
        selected.empty() ? "" : absl::StrCat(" and ", selected.size(), " gathered columns"),
        ") need ", bytes, " bytes, above --max-result-bytes=", result_limit,
        "; lower the capacities (count_only sizes them), select fewer columns or split the "
        "request"));
  };
  // Refused before the per-batch buffers are made.
  const uint64_t batch_objects =
      static_cast<uint64_t>(request.batches_size()) * kJoinBatchObjectBytes;
  if (batch_objects > result_limit) return refuse(batch_objects);
  std::vector<BatchBuffers> buffers(request.batches_size());
  // Host bytes of the results before any string value bytes, and the string
  // outputs that share what --max-result-bytes leaves.
  uint64_t result_bytes = 0;
  uint64_t string_outputs = 0;
  const size_t strings = VariableWidthCount(selected);
  uint64_t name_bytes = 0;
  for (const SelectedColumn& c : selected) name_bytes += c.name.size();
  for (int i = 0; i < request.batches_size(); ++i) {
    const v1::LeftBatch& b = request.batches(i);
    const std::string field = absl::StrCat("batches[", i, "]");
    BatchBuffers& buf = buffers[i];
    GPUJOIN_ASSIGN_OR_RETURN(KeyColumns columns, DecodeKeyColumns(b, field + "."));
    GPUJOIN_ASSIGN_OR_RETURN(
        buf.keys, TakeKeys<Key>(columns, field + ".", version.name, Presence::kRequired));
    GPUJOIN_ASSIGN_OR_RETURN(buf.left_rows,
                             DecodeU32Column(b.has_left_rows(), b.left_rows(), field + ".left_rows",
                                             Presence::kOptional));
    if (buf.left_rows.present()) {
      if (buf.left_rows.size() != buf.keys.size()) {
        return absl::InvalidArgumentError(absl::StrCat(field, ".left_rows: ", buf.left_rows.size(),
                                                       " rows but ", field, ".", KeysField<Key>(),
                                                       " has ", buf.keys.size()));
      }
      if (b.first_left_row() != 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(field, ".first_left_row: ", b.first_left_row(), " is set together with ",
                         field, ".left_rows; set one of them"));
      }
    }
    GPUJOIN_RETURN_IF_ERROR(CheckFitsU32(b.first_left_row(), field + ".first_left_row"));
    if (!buf.left_rows.present()) {
      // Generated left row IDs never wrap past 2^32 (nor reach 0xffffffff).
      GPUJOIN_RETURN_IF_ERROR(
          CheckGeneratedValues(b.first_left_row(), buf.keys.size(), field + ".first_left_row",
                               absl::StrCat("the left row ID of the last row of ", field)));
    }
    buf.count_only = b.count_only();
    if (!buf.count_only) {
      buf.capacity = b.capacity() == 0 ? buf.keys.size() : b.capacity();
      if (buf.capacity > (uint64_t{1} << 31)) {
        return absl::InvalidArgumentError(
            absl::StrCat(field, ".capacity: ", buf.capacity, " pairs is more than 2^31"));
      }
      // No batch yields more than pairs_per_row pairs a left row, so a larger
      // capacity costs nothing beyond them.
      buf.wanted = std::min<uint64_t>(buf.capacity, buf.keys.size() * pairs_per_row);
      // The pairs of one per left row are always allocated (or the request is
      // refused below); pairs beyond them only as far as --max-result-bytes allows.
      buf.allocated = std::min<uint64_t>(buf.wanted, buf.keys.size());
    }
    // Found, probes and the column headers travel in the batch's first response
    // message, whole: refuse before running what JoinParts::Plan could not send.
    const uint64_t head = buf.keys.size() * ((b.want_found() ? 1 : 0) + (b.want_probes() ? 4 : 0));
    const uint64_t first_part =
        JoinParts::FirstPartBytes(head, buf.count_only ? 0 : selected.size(),
                                  buf.count_only ? 0 : name_bytes, buf.count_only ? 0 : strings);
    const uint64_t room = JoinParts::MessageRoom(state_.config.max_message_bytes);
    if (first_part > room) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ": the batch's first response part (found and probes of ", buf.keys.size(),
          " rows", buf.count_only || selected.empty() ? "" : ", the selected columns' headers",
          ") would need ", first_part, " bytes, more than the ", room,
          " bytes one message of --max-message-bytes=", state_.config.max_message_bytes,
          " carries; split the batch"));
    }
    result_bytes += kJoinBatchObjectBytes + (buf.count_only ? 0 : column_objects) + head +
                    pair_bytes(buf.allocated);
  }
  // Refused before any batch's outputs or gather targets are made.
  if (result_bytes > result_limit) return refuse(result_bytes);
  // Pairs beyond one per left row (keep_all inner and outer joins), in batch
  // order, as far as what is left of --max-result-bytes allows: never more.
  // A batch cut short here reports the pairs allocated as its capacity, and
  // overflow when its count exceeds them.
  for (BatchBuffers& buf : buffers) {
    if (buf.wanted == buf.allocated) continue;
    const uint64_t floor = pair_bytes(buf.allocated);
    uint64_t lo = buf.allocated, hi = buf.wanted;  // the most pairs that fit
    while (lo < hi) {
      const uint64_t mid = lo + (hi - lo + 1) / 2;
      if (result_bytes + pair_bytes(mid) - floor <= result_limit) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
    result_bytes += pair_bytes(lo) - floor;
    buf.allocated = lo;
    if (buf.allocated < buf.wanted) buf.capacity = buf.allocated;
  }
  for (const BatchBuffers& buf : buffers) {
    if (buf.allocated != 0) string_outputs += strings;
  }
  // The string outputs share what is left equally.
  const uint64_t string_share =
      string_outputs == 0
          ? 0
          : std::min<uint64_t>(0x7fffffff, (result_limit - result_bytes) / string_outputs);

  engine::CommandGraph graph;
  engine::JoinNodeT<Key> node;
  node.index = version.index.get();
  node.max_probe_count = static_cast<uint32_t>(request.max_probe_count());  // <= capacity
  node.kind = kind;
  for (int i = 0; i < request.batches_size(); ++i) {
    const v1::LeftBatch& b = request.batches(i);
    BatchBuffers& buf = buffers[i];
    v1::JoinBatchResult* r = response->add_results();
    r->set_batch(static_cast<uint64_t>(i));
    buf.out_left.emplace(r->mutable_left_rows(), buf.allocated);
    buf.out_right.emplace(r->mutable_right_rows(), buf.allocated);
    engine::JoinBatchT<Key> jb;
    jb.keys = {buf.keys.span()};
    jb.left_rows = buf.left_rows.span();
    jb.first_left_row = static_cast<uint32_t>(b.first_left_row());  // checked above
    jb.out_left_rows = buf.out_left->span();
    jb.out_right_rows = buf.out_right->span();
    jb.result = &buf.result;
    if (b.want_found()) {
      buf.found.emplace(r->mutable_found(), buf.keys.size());
      jb.found = buf.found->span();
    }
    if (b.want_probes()) {
      buf.probes.emplace(r->mutable_probes(), buf.keys.size());
      jb.probes = buf.probes->span();
    }
    if (!buf.count_only && !selected.empty()) {
      buf.gather.emplace(selected, buf.allocated, string_share, r->mutable_columns());
      jb.gather = buf.gather->Outputs();
    }
    node.batches.push_back(std::move(jb));
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
    BatchBuffers& buf = buffers[i];
    v1::JoinBatchResult* r = response->mutable_results(i);
    const uint64_t kept = std::min(buf.result.count, buf.allocated);
    buf.out_left->Finish(kept);
    buf.out_right->Finish(kept);
    if (buf.found) buf.found->Finish();
    if (buf.probes) buf.probes->Finish();
    if (buf.gather) gathered += buf.gather->Finish(kept);
    r->set_count(buf.result.count);
    r->set_capacity(buf.capacity);
    // Count-only: no pairs were asked for, so only a lossy build makes the count short.
    const bool overflow = buf.count_only ? build_overflowed : buf.result.overflow;
    r->set_overflow(overflow);
    FillQueryStatistics(buf.result.statistics, r->mutable_statistics());
    state_.metrics->RecordQuery(version.name, QueryOp::kJoin, buf.keys.size(),
                                buf.result.statistics);
    state_.metrics->RecordJoinBatch(version.name, buf.result.count, overflow);
  }
  if (!selected.empty()) state_.metrics->RecordGathered(QueryOp::kJoin, gathered);
  return absl::OkStatus();
}

// ------------------------------------------------------------------ aggregate

absl::Status AggregateStream::Admit(const v1::AggregateRequest& request, uint64_t max_message_bytes,
                                    uint64_t max_groups) {
  GPUJOIN_ASSIGN_OR_RETURN(AggregateOp op, ToEngineOp(request.op()));
  if (request.groups() == 0) return absl::InvalidArgumentError("groups: must be at least 1");
  GPUJOIN_RETURN_IF_ERROR(CheckFitsU32(request.groups(), "groups"));
  // Output, accumulators and work grow with the group count, whatever the rows:
  // a few bytes of request must not buy gigabytes.
  if (request.groups() > max_groups) {
    return absl::ResourceExhaustedError(
        absl::StrCat("groups: ", request.groups(),
                     " groups is over the limit --max-aggregate-groups=", max_groups));
  }
  GPUJOIN_ASSIGN_OR_RETURN(const engine::ColumnType value_type,
                           AggregateRequestValueType(request, op));
  const bool typed = value_type != engine::ColumnType::kFloat32;
  const uint64_t per_group = typed ? kTypedAggregateBytesPerGroup
                             : request.want_counts64() ? kCounts64AggregateBytesPerGroup
                                                       : kAggregateBytesPerGroup;
  const uint64_t limit = max_message_bytes / per_group;
  if (request.groups() > limit) {
    return absl::InvalidArgumentError(
        absl::StrCat("groups: ", request.groups(), " groups need more than --max-message-bytes=",
                     max_message_bytes, " per response (at most ", limit, " groups)"));
  }
  if (accumulator_.has_value()) {
    if (accumulator_->op() != op || accumulator_->groups() != request.groups()) {
      return absl::InvalidArgumentError(
          absl::StrCat("op/groups: this stream aggregates ",
                       std::string(engine::AggregateOpName(accumulator_->op())), " over ",
                       accumulator_->groups(), " groups; a batch asked for ",
                       std::string(engine::AggregateOpName(op)), " over ", request.groups(),
                       " (both must stay the same within a stream)"));
    }
    if (op != AggregateOp::kCount && accumulator_->value_type() != value_type) {
      const bool was_typed = accumulator_->value_type() != engine::ColumnType::kFloat32;
      return absl::InvalidArgumentError(absl::StrCat(
          typed ? "typed_values.type" : "values", ": this stream aggregates ",
          std::string(engine::ColumnTypeName(accumulator_->value_type())), " values (",
          was_typed ? "typed_values" : "values", "); a batch sent ",
          std::string(engine::ColumnTypeName(value_type)),
          " (the value type must stay the same within a stream)"));
    }
  } else {
    accumulator_.emplace(op, static_cast<uint32_t>(request.groups()), value_type);
  }
  return absl::OkStatus();
}

void AggregateStream::Complete(const v1::AggregateRequest& request, v1::AggregateResponse* response,
                               AggregatePartial& partial) {
  // Admit() ran before this batch was processed, so the accumulator exists and the
  // partial has its shape.
  const bool typed = accumulator_->value_type() != engine::ColumnType::kFloat32;
  absl::Status merged = typed ? accumulator_->Merge(partial.counts, partial.words, partial.overflow)
                              : accumulator_->Merge(partial.counts, partial.values);
  if (!merged.ok()) {
    response->Clear();
    response->mutable_error()->set_code(static_cast<int>(merged.code()));
    response->mutable_error()->set_message(std::string(merged.message()));
    return;
  }
  if (accumulator_->op() == AggregateOp::kCount) {
    *response->mutable_total_counts() = PackColumn<uint32_t>(accumulator_->counts());
  } else if (typed) {
    const std::vector<uint64_t> totals = accumulator_->Words();
    *response->mutable_total_typed_result() = TypedResultColumn<uint64_t>(
        accumulator_->op(), accumulator_->value_type(), totals, accumulator_->counts64());
    if (engine::AggregateReportsOverflow(accumulator_->op(), accumulator_->value_type())) {
      uint64_t set = 0;
      *response->mutable_total_overflow() = FlagBitmap(accumulator_->overflow(), &set);
      response->set_total_overflow_groups(set);
    }
  } else {
    const std::vector<float> totals = accumulator_->Values();
    *response->mutable_total_values() = PackColumn<float>(totals);
  }
  if (typed || request.want_counts64()) {
    *response->mutable_total_counts64() = PackColumn<uint64_t>(accumulator_->counts64());
  }
  if (request.accumulate_only()) {
    response->clear_counts();
    response->clear_values();
    response->clear_contributing_rows();
    response->clear_typed_result();
    response->clear_overflow();
  }
}

absl::Status Operations::Aggregate(const v1::AggregateRequest& request,
                                   v1::AggregateResponse* response, AggregatePartial* partial) {
  GPUJOIN_ASSIGN_OR_RETURN(AggregateOp op, ToEngineOp(request.op()));
  const uint32_t groups = static_cast<uint32_t>(request.groups());  // Admit checked it
  GPUJOIN_ASSIGN_OR_RETURN(
      auto keys, DecodeU32Column(request.has_keys(), request.keys(), "keys", Presence::kRequired));
  GPUJOIN_ASSIGN_OR_RETURN(auto values, DecodeF32Column(request.has_values(), request.values(),
                                                        "values", Presence::kOptional));
  GPUJOIN_ASSIGN_OR_RETURN(
      auto mask, DecodeU32Column(request.has_mask(), request.mask(), "mask", Presence::kOptional));
  if (op == AggregateOp::kCount && values.present()) {
    return absl::InvalidArgumentError("values: must not be set for AGGREGATE_OP_COUNT");
  }
  GPUJOIN_ASSIGN_OR_RETURN(const engine::ColumnType value_type,
                           AggregateRequestValueType(request, op));
  if (value_type != engine::ColumnType::kFloat32) {
    if (values.present()) {
      return absl::InvalidArgumentError(
          "values: set together with typed_values; send the values in exactly one of them");
    }
    if (mask.present() && mask.size() != keys.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("mask: ", mask.size(), " rows but keys has ", keys.size()));
    }
    return AggregateTyped(request, op, value_type, keys.span(),
                          mask.present() ? std::optional(mask.span()) : std::nullopt, response,
                          partial);
  }
  if (op != AggregateOp::kCount) {
    if (!values.present()) {
      return absl::InvalidArgumentError(
          absl::StrCat("values: required for AGGREGATE_OP_",
                       absl::AsciiStrToUpper(std::string(engine::AggregateOpName(op)))));
    }
    if (values.size() != keys.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("values: ", values.size(), " rows but keys has ", keys.size()));
    }
  }
  if (mask.present() && mask.size() != keys.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("mask: ", mask.size(), " rows but keys has ", keys.size()));
  }

  const engine::AggregationAccumulator shape(op, groups);
  const AggregateOp partial_op = shape.partial_op();
  partial->counts.assign(groups, 0);
  if (partial_op != AggregateOp::kCount) partial->values.assign(groups, 0.0f);

  engine::CommandGraph graph;
  engine::AggregateNode node;
  node.op = partial_op;
  node.keys = {keys.span()};
  if (values.present()) node.values = {values.span()};
  if (mask.present()) node.mask = engine::ChunkedU32{mask.span()};
  if (partial_op == AggregateOp::kCount) {
    node.count_output = partial->counts;
  } else {
    node.value_output = partial->values;
    node.contributing_rows = partial->counts;
  }
  graph.Add(std::move(node));
  GPUJOIN_RETURN_IF_ERROR(RunGraph(graph));

  response->set_rows(keys.size());
  *response->mutable_contributing_rows() = PackColumn<uint32_t>(partial->counts);
  if (op == AggregateOp::kCount) {
    *response->mutable_counts() = PackColumn<uint32_t>(partial->counts);
  } else if (op == AggregateOp::kMean) {
    // This batch's own mean: its sums over its contributing rows.
    engine::AggregationAccumulator batch(op, groups);
    GPUJOIN_RETURN_IF_ERROR(batch.Merge(partial->counts, partial->values));
    *response->mutable_values() = PackColumn<float>(batch.Values());
  } else {
    *response->mutable_values() = PackColumn<float>(partial->values);
  }
  return absl::OkStatus();
}

absl::Status Operations::AggregateTyped(const v1::AggregateRequest& request, AggregateOp op,
                                        engine::ColumnType value_type,
                                        std::span<const uint32_t> keys,
                                        std::optional<std::span<const uint32_t>> mask,
                                        v1::AggregateResponse* response,
                                        AggregatePartial* partial) {
  const uint32_t groups = static_cast<uint32_t>(request.groups());  // Admit checked it
  const v1::Column& column = request.typed_values();
  const size_t width = engine::ColumnWidth(value_type);
  if (!column.offsets().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "typed_values.offsets: ", column.offsets().size(), " bytes set, but ",
        std::string(engine::ColumnTypeName(value_type)), " values are fixed width (send none)"));
  }
  if (column.length() != keys.size() || column.data().size() != column.length() * width) {
    return absl::InvalidArgumentError(absl::StrCat(
        "typed_values: length ", column.length(), " and ", column.data().size(),
        " bytes of data, but keys has ", keys.size(), " rows (", width, " bytes per ",
        std::string(engine::ColumnTypeName(value_type)), " value)"));
  }
  // Null values (validity bit 0) do not contribute, as SQL's aggregates skip
  // nulls: to the engine they are masked-out rows. The combined mask costs 4
  // bytes a row, bounded by the request's own size.
  const std::string& validity = column.validity();
  std::vector<uint32_t> valid_mask;
  if (!validity.empty()) {
    if (validity.size() != engine::BitmapBytes(keys.size())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "typed_values.validity: ", validity.size(), " bytes, but a bitmap of ", keys.size(),
          " rows has ceil(", keys.size(), " / 8) = ", engine::BitmapBytes(keys.size()),
          " (or send none: no nulls)"));
    }
    valid_mask.resize(keys.size());
    for (size_t r = 0; r < keys.size(); ++r) {
      valid_mask[r] = BitSet(validity, r) && (!mask.has_value() || (*mask)[r] != 0) ? 1 : 0;
    }
    mask = std::span<const uint32_t>(valid_mask);
  }
  const engine::AggregationAccumulator shape(op, groups, value_type);
  const AggregateOp partial_op = shape.partial_op();
  const bool flags = engine::AggregateReportsOverflow(op, value_type);
  partial->counts.assign(groups, 0);
  partial->words.assign(groups, 0);
  partial->overflow.assign(flags ? groups : 0, 0);

  engine::CommandGraph graph;
  engine::AggregateNode node;
  node.op = partial_op;
  node.keys = {keys};
  if (mask.has_value()) node.mask = engine::ChunkedU32{*mask};
  node.typed_output = partial->words;
  node.overflow = partial->overflow;
  node.contributing_rows = partial->counts;
  // The values, aligned: borrowed when the request's bytes are, else copied (they
  // outlive the run). Float64 values are read through their uint64 words.
  DecodedColumn<uint32_t> words32;
  DecodedColumn<uint64_t> words64;
  if (width == 4) {
    GPUJOIN_ASSIGN_OR_RETURN(words32,
                             DecodePackedBytes<uint32_t>(column.data(), "typed_values.data"));
  } else {
    GPUJOIN_ASSIGN_OR_RETURN(words64,
                             DecodePackedBytes<uint64_t>(column.data(), "typed_values.data"));
  }
  auto view = [&](auto tag) {
    using V = decltype(tag);
    const void* data = width == 4 ? static_cast<const void*>(words32.span().data())
                                  : static_cast<const void*>(words64.span().data());
    return engine::Chunked<V>{std::span<const V>(static_cast<const V*>(data), keys.size())};
  };
  engine::AggregateValues typed;
  switch (value_type) {
    case engine::ColumnType::kInt32:
      typed = view(int32_t{});
      break;
    case engine::ColumnType::kInt64:
      typed = view(int64_t{});
      break;
    case engine::ColumnType::kUint32:
      typed = view(uint32_t{});
      break;
    case engine::ColumnType::kUint64:
      typed = view(uint64_t{});
      break;
    default:
      typed = view(double{});
      break;
  }
  node.typed_values = std::move(typed);
  graph.Add(std::move(node));
  GPUJOIN_RETURN_IF_ERROR(RunGraph(graph));

  response->set_rows(keys.size());
  *response->mutable_contributing_rows() = PackColumn<uint32_t>(partial->counts);
  if (op == AggregateOp::kMean) {
    // This batch's own mean: its exact sums over its contributing rows.
    engine::AggregationAccumulator batch(op, groups, value_type);
    GPUJOIN_RETURN_IF_ERROR(batch.Merge(partial->counts, partial->words, partial->overflow));
    const std::vector<uint64_t> means = batch.Words();
    *response->mutable_typed_result() =
        TypedResultColumn<uint32_t>(op, value_type, means, partial->counts);
  } else {
    *response->mutable_typed_result() =
        TypedResultColumn<uint32_t>(op, value_type, partial->words, partial->counts);
  }
  if (flags) *response->mutable_overflow() = FlagBitmap(partial->overflow, nullptr);
  return absl::OkStatus();
}

// ------------------------------------------------------------------ hash

absl::Status Operations::Hash(const v1::HashRequest& request, v1::HashResponse* response) {
  engine::HashBits bits;
  switch (request.bits()) {
    case 0:
    case 64:
      bits = engine::HashBits::k64;
      break;
    case 32:
      bits = engine::HashBits::k32;
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("bits: ", request.bits(), " is not 32 or 64 (0 means 64)"));
  }
  // The decoded views borrow the request (and aligned copies of its offsets held
  // by `decoded`), which both outlive the graph run below.
  GPUJOIN_ASSIGN_OR_RETURN(DecodedHashColumns decoded, DecodeHashColumns(request));
  const uint64_t rows = decoded.rows;
  engine::HashNode node;
  node.bits = bits;
  node.columns = std::move(decoded.columns);
  const uint64_t width = bits == engine::HashBits::k32 ? 4 : 8;
  GPUJOIN_RETURN_IF_ERROR(
      CheckResponseSize(rows * width + (rows + 7) / 8, absl::StrCat("columns: ", rows, " rows")));

  std::optional<PackedOutput<uint32_t>> out32;
  std::optional<PackedOutput<uint64_t>> out64;
  if (bits == engine::HashBits::k32) {
    out32.emplace(response->mutable_hashes(), rows);
    node.out32 = out32->span();
  } else {
    out64.emplace(response->mutable_hashes(), rows);
    node.out64 = out64->span();
  }
  PackedOutput<uint8_t> validity(response->mutable_validity(), (rows + 7) / 8);
  node.out_validity = validity.span();
  engine::CommandGraph graph;
  graph.Add(std::move(node));
  GPUJOIN_RETURN_IF_ERROR(RunGraph(graph));
  if (out32) out32->Finish();
  if (out64) out64->Finish();
  validity.Finish();
  uint64_t valid = 0;
  const std::string& bitmap = response->validity();
  for (uint64_t r = 0; r < rows; ++r)
    valid += (static_cast<uint8_t>(bitmap[r / 8]) >> (r % 8)) & 1u;
  response->set_null_count(rows - valid);
  return absl::OkStatus();
}

// ------------------------------------------------------------------ unary

absl::Status Operations::DropIndex(const v1::DropIndexRequest& request,
                                   v1::DropIndexResponse* response) {
  GPUJOIN_RETURN_IF_ERROR(ValidateIndexName(request.name(), "name"));
  GPUJOIN_ASSIGN_OR_RETURN(auto version, state_.registry->Remove(request.name()));
  state_.metrics->RemoveIndex(request.name());
  if (state_.snapshots != nullptr) state_.snapshots->Forget(request.name(), version->version);
  response->set_dropped_version(version->version);
  response->set_freed_bytes(version->index->memory_bytes());
  // The table is freed when the last in-flight batch reading it lets go.
  version.reset();
  UpdateServiceGauges();
  return absl::OkStatus();
}

absl::Status Operations::ListIndexes(v1::ListIndexesResponse* response) {
  for (const auto& v : state_.registry->List()) FillIndexInfo(*v, response->add_indexes());
  return absl::OkStatus();
}

absl::Status Operations::DescribeIndex(const v1::DescribeIndexRequest& request,
                                       v1::DescribeIndexResponse* response) {
  GPUJOIN_ASSIGN_OR_RETURN(auto version, FindIndex(request.name(), "name"));
  FillIndexInfo(*version, response->mutable_index());
  return absl::OkStatus();
}

namespace {

absl::Status NeedDataDir(std::string_view rpc) {
  return absl::FailedPreconditionError(absl::StrCat(
      std::string(rpc), ": this gpujoind has no --data-dir; start it with --data-dir DIR"));
}

}  // namespace

absl::Status Operations::SaveIndex(const v1::SaveIndexRequest& request,
                                   v1::SaveIndexResponse* response) {
  GPUJOIN_RETURN_IF_ERROR(ValidateIndexName(request.name(), "name"));
  if (state_.snapshots == nullptr) return NeedDataDir("SaveIndex");
  GPUJOIN_ASSIGN_OR_RETURN(std::string file, SaveFileOf(request.file(), request.name()));
  GPUJOIN_ASSIGN_OR_RETURN(auto version, FindIndex(request.name(), "name"));
  GPUJOIN_ASSIGN_OR_RETURN(SavedSnapshot saved, state_.snapshots->Save(*version, file));
  response->set_file(saved.file);
  response->set_bytes(saved.bytes);
  response->set_version(saved.version);
  response->set_seconds(saved.seconds);
  return absl::OkStatus();
}

absl::Status Operations::LoadIndex(const v1::LoadIndexRequest& request,
                                   v1::LoadIndexResponse* response) {
  GPUJOIN_RETURN_IF_ERROR(ValidateIndexName(request.name(), "name"));
  if (state_.snapshots == nullptr) return NeedDataDir("LoadIndex");
  GPUJOIN_ASSIGN_OR_RETURN(std::string file, LoadFileOf(request.file(), request.name()));
  if (!request.replace() && state_.registry->Contains(request.name())) {
    return absl::AlreadyExistsError(absl::StrCat("index \"", request.name(),
                                                 "\" already exists; set replace to load over it"));
  }
  FileIdentity read;
  GPUJOIN_ASSIGN_OR_RETURN(std::shared_ptr<IndexVersion> version,
                           state_.snapshots->Load(file, request.name(), 0, &read));
  std::shared_ptr<const IndexVersion> installed = version;
  GPUJOIN_ASSIGN_OR_RETURN(auto previous, state_.registry->Install(version, request.replace()));
  state_.metrics->SetIndex(*installed);
  // Like a build, the load is a new version of the name, and its snapshot must
  // follow: a write of an earlier version still pending or running must not
  // land after it. From the name's own file the write is skipped while that
  // file is still the one read.
  const bool own = file == request.name() + std::string(kSnapshotSuffix);
  state_.snapshots->Schedule(installed, own ? std::optional<FileIdentity>(read) : std::nullopt);
  previous.reset();
  UpdateServiceGauges();
  FillIndexInfo(*installed, response->mutable_index());
  return absl::OkStatus();
}

absl::Status Operations::ListFiles(v1::ListFilesResponse* response) {
  if (state_.snapshots == nullptr) return NeedDataDir("ListFiles");
  const DataFiles files = state_.snapshots->ListFiles();
  for (const DataFileInfo& f : files.files) {
    v1::DataFile* out = response->add_files();
    out->set_file(f.file);
    out->set_bytes(f.bytes);
    out->set_modified_unix_millis(f.modified_unix_millis);
    out->set_index(f.index);
    out->set_live(!f.index.empty() && state_.registry->Contains(f.index));
  }
  response->set_snapshot_bytes(files.snapshot_bytes);
  response->set_copy_bytes(files.copy_bytes);
  response->set_max_copy_bytes(state_.config.max_copy_bytes);
  response->set_max_snapshot_bytes(state_.config.max_snapshot_bytes);
  return absl::OkStatus();
}

absl::Status Operations::DeleteFile(const v1::DeleteFileRequest& request,
                                    v1::DeleteFileResponse* response) {
  if (state_.snapshots == nullptr) return NeedDataDir("DeleteFile");
  GPUJOIN_ASSIGN_OR_RETURN(
      uint64_t bytes, state_.snapshots->DeleteFile(request.file(), [this](const std::string& name) {
        return state_.registry->Contains(name);
      }));
  response->set_bytes(bytes);
  return absl::OkStatus();
}

absl::Status Operations::GetServerInfo(bool serving, v1::GetServerInfoResponse* response) {
  response->set_version(GPUJOIN_VERSION);
  response->set_backend(std::string(engine::BackendKindName(state_.backend_info.kind)));
  response->set_device_name(state_.backend_info.device_name);
  response->set_device_memory_total_bytes(state_.backend_info.memory_total_bytes);
  response->set_device_memory_used_bytes(state_.budget->used_bytes());
  response->set_device_memory_budget_bytes(state_.budget->limit_bytes());
  response->set_max_message_bytes(state_.config.max_message_bytes);
  response->set_max_inflight_batches_per_stream(state_.config.max_inflight_per_stream);
  response->set_max_inflight_batches(state_.config.max_inflight_batches);
  response->set_max_concurrent_builds(state_.config.max_concurrent_builds);
  response->set_max_aggregate_groups(state_.config.max_aggregate_groups);
  response->set_max_staged_bytes(state_.config.max_staged_bytes);
  response->set_max_build_staged_bytes(state_.config.max_build_staged_bytes);
  response->set_staged_bytes(state_.staging == nullptr ? 0 : state_.staging->used_bytes());
  response->set_max_streams_per_connection(state_.config.max_streams_per_connection);
  response->set_max_result_bytes(ResultLimit());
  if (state_.pending_responses != nullptr) {
    response->set_max_pending_response_bytes(state_.pending_responses->limit_bytes());
    response->set_pending_response_bytes(state_.pending_responses->used_bytes());
  }
  response->set_index_count(static_cast<uint32_t>(state_.registry->size()));
  response->set_serving(serving);
  return absl::OkStatus();
}

// ------------------------------------------------------------------ build

absl::StatusOr<uint32_t> BuildSession::CapacityFor(uint64_t rows) const {
  if (capacity_) return *capacity_;
  const double lf = spec_.target_load_factor() == 0 ? 0.5 : spec_.target_load_factor();
  return engine::CapacityForRows(std::max<uint64_t>(rows, 1), lf);
}

engine::HashIndexSpec BuildSession::EngineSpec(uint32_t capacity) const {
  engine::HashIndexSpec spec;
  spec.capacity = capacity;
  // AddSpec checked that it fits uint32; CheckProbeBound, that it fits the capacity.
  spec.max_probe_count = static_cast<uint32_t>(spec_.max_probe_count());
  spec.key_type = key_type_;
  spec.duplicates = duplicates_;
  return spec;
}

absl::Status BuildSession::CheckProbeBound(uint32_t capacity) const {
  const uint64_t bound = spec_.max_probe_count();
  if (bound <= capacity) return absl::OkStatus();
  const double lf = spec_.target_load_factor() == 0 ? 0.5 : spec_.target_load_factor();
  std::string sized;
  if (spec_.capacity() != 0) {
    sized = "spec.capacity";
  } else if (spec_.expected_rows() != 0) {
    sized = absl::StrCat("sized for spec.expected_rows ", spec_.expected_rows(), " at load factor ",
                         lf);
  } else {
    sized = absl::StrCat("sized for the ", key_rows_, " rows sent at load factor ", lf,
                         "; set spec.capacity or spec.expected_rows for a larger table");
  }
  return absl::InvalidArgumentError(absl::StrCat("spec.max_probe_count: ", bound,
                                                 " exceeds capacity ", capacity, " (", sized,
                                                 "); it must be at most the capacity, 0 means "
                                                 "capacity"));
}

absl::Status BuildSession::ReserveFor(uint32_t capacity, const engine::BuildShape* shape,
                                      bool grow_only) {
  engine::HashIndexSpec spec = EngineSpec(capacity);
  // The probe bound is held against the capacity the index will have. A table
  // sized from the rows so far (a chunk's ReserveRows) has an interim capacity
  // that later chunks grow, so there the bound waits for Finish.
  const bool interim = !capacity_ && grow_only;
  spec.max_probe_count = 0;
  GPUJOIN_RETURN_IF_ERROR(Prefixed(spec.Validate(), "spec: "));
  if (!interim) GPUJOIN_RETURN_IF_ERROR(CheckProbeBound(capacity));
  const engine::Backend& backend = *ops_->state_.backend;
  const std::vector<engine::PayloadShape> payload_shapes = payload_.Shapes();
  // A keep_all index keeps its groups and its payload per row: both grow with
  // the rows, which are known from the spec's expected_rows or the chunks so far.
  const uint64_t rows = shape == nullptr ? 0 : shape->rows;
  const uint64_t table = backend.IndexBytes(spec);
  const uint64_t groups = engine::GroupStorageBytes(spec, capacity, rows);
  const uint64_t payload =
      payload_shapes.empty() ? 0 : backend.PayloadBytes(spec, payload_shapes, rows);
  uint64_t transient = 0;
  if (shape != nullptr) {
    engine::BuildShape with_payload = *shape;
    with_payload.payload = payload_shapes;
    transient = backend.BuildTransientBytes(spec, with_payload);
  }
  const uint64_t need = table + groups + payload + transient + staged_bytes_;
  if (reserved_ && grow_only && need <= reservation_.bytes()) return absl::OkStatus();
  std::string payload_part =
      payload_shapes.empty()
          ? std::string()
          : absl::StrCat(" + ", payload, " bytes for ", payload_shapes.size(), " payload columns");
  if (duplicates_ == engine::DuplicatePolicy::kKeepAll) {
    payload_part = shape == nullptr ? std::string()
                                    : absl::StrCat(" + ", groups, " bytes of keep_all groups for ",
                                                   rows, " rows", payload_part,
                                                   payload_shapes.empty() ? "" : " (per row)");
  }
  const std::string what =
      shape == nullptr
          ? absl::StrCat("index \"", name_, "\" (capacity ", capacity, ": ", table, " table bytes",
                         payload_part,
                         duplicates_ == engine::DuplicatePolicy::kKeepAll
                             ? "; the keep_all groups, the payload (kept per row) and the "
                               "build's transient bytes are reserved once its rows are known)"
                             : "; the build's transient bytes are reserved once its rows are "
                               "known)")
          : absl::StrCat("index \"", name_, "\" (capacity ", capacity, ": ", table, " table bytes",
                         payload_part, " + ", transient, " transient bytes for the build of ",
                         shape->rows, " rows + ", staged_bytes_, " bytes of staged input)");
  if (reserved_) {
    GPUJOIN_RETURN_IF_ERROR(reservation_.Resize(need, what));
  } else {
    GPUJOIN_ASSIGN_OR_RETURN(reservation_, ops_->state_.budget->Reserve(need, what));
    reserved_ = true;
  }
  return absl::OkStatus();
}

absl::Status BuildSession::CountStaged(uint64_t bytes, const std::string& field) {
  const ServerConfig& config = ops_->state_.config;
  const uint64_t staged = staged_bytes_ + bytes;
  if (config.max_build_staged_bytes != 0 && staged > config.max_build_staged_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        field, ": the build of index \"", name_, "\" would hold ", staged,
        " bytes of staged input, above --max-build-staged-bytes=", config.max_build_staged_bytes,
        "; split the input into several indexes or raise the limit"));
  }
  const std::string what =
      absl::StrCat(field, " of the build of index \"", name_, "\" (", staged, " bytes staged)");
  if (ops_->state_.staging == nullptr) {
    // No host staging budget (unit tests that set up Operations themselves).
  } else if (staged_bytes_ == 0) {
    GPUJOIN_ASSIGN_OR_RETURN(staging_, ops_->state_.staging->Reserve(staged, what));
  } else {
    GPUJOIN_RETURN_IF_ERROR(staging_.Resize(staged, what));
  }
  staged_bytes_ = staged;
  return absl::OkStatus();
}

absl::Status BuildSession::ReserveRows(uint64_t rows, bool validity, const std::string& field) {
  // The index budget: the table and payload for these rows, the transient memory
  // of their build and the staged bytes, so a build that cannot fit stops here.
  auto capacity = CapacityFor(rows);
  if (!capacity.ok()) return Prefixed(capacity.status(), field + ": ");
  engine::BuildShape shape;
  shape.key_type = key_type_;
  shape.rows = rows;
  shape.explicit_values = spec_.explicit_values();
  shape.batch = spec_.batch_mode();
  shape.batch_chunks = shape.batch ? nonempty_chunks_ : 0;
  shape.batch_validity = shape.batch && validity;
  return Prefixed(ReserveFor(*capacity, &shape, /*grow_only=*/true), field + ": ");
}

absl::Status BuildSession::AddSpec(const v1::IndexSpec& spec) {
  if (have_spec_) {
    return absl::InvalidArgumentError("spec: sent twice; only the first message carries the spec");
  }
  GPUJOIN_RETURN_IF_ERROR(ValidateIndexName(spec.name(), "spec.name"));
  spec_ = spec;
  name_ = spec.name();
  have_spec_ = true;
  GPUJOIN_RETURN_IF_ERROR(CheckFitsU32(spec.capacity(), "spec.capacity"));
  GPUJOIN_RETURN_IF_ERROR(CheckFitsU32(spec.max_probe_count(), "spec.max_probe_count"));
  GPUJOIN_RETURN_IF_ERROR(CheckFitsU32(spec.first_value(), "spec.first_value"));
  GPUJOIN_ASSIGN_OR_RETURN(key_type_, FromWireKeyType(spec.key_type(), "spec.key_type"));
  GPUJOIN_ASSIGN_OR_RETURN(duplicates_,
                           FromWireDuplicatePolicy(spec.duplicates(), "spec.duplicates"));
  WithKeyWord(key_type_,
              [this](auto word) { keys_.emplace<KeyChunks<typename decltype(word)::type>>(); });
  GPUJOIN_RETURN_IF_ERROR(payload_.Declare(spec.payload()));
  if (spec.wait_durable() && ops_->state_.snapshots == nullptr) {
    return absl::FailedPreconditionError(
        "spec.wait_durable: this gpujoind has no --data-dir, so nothing is durable; start it "
        "with --data-dir DIR or leave wait_durable unset");
  }
  if (spec.explicit_values() && spec.batch_mode()) {
    return absl::InvalidArgumentError(
        "spec.explicit_values: cannot be combined with spec.batch_mode (batch values are row IDs)");
  }
  const double lf = spec.target_load_factor();
  if (lf != 0 && !(lf > 0 && lf <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("spec.target_load_factor: ", lf, " is outside (0, 1]"));
  }
  if (spec.capacity() != 0 && spec.expected_rows() != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("spec.capacity (", spec.capacity(), ") and spec.expected_rows (",
                     spec.expected_rows(), ") are both set; set one of them"));
  }
  if (!spec.replace() && ops_->state_.registry->Contains(name_)) {
    return absl::AlreadyExistsError(
        absl::StrCat("index \"", name_, "\" already exists; set spec.replace to rebuild it"));
  }
  if (spec.capacity() != 0) {
    capacity_ = static_cast<uint32_t>(spec.capacity());
    return ReserveFor(*capacity_, nullptr, /*grow_only=*/false);
  }
  if (spec.expected_rows() != 0) {
    auto capacity = engine::CapacityForRows(spec.expected_rows(), lf == 0 ? 0.5 : lf);
    if (!capacity.ok()) return Prefixed(capacity.status(), "spec.expected_rows: ");
    // The expected shape (one chunk, no masks); Finish reserves for the real one.
    engine::BuildShape expected;
    expected.key_type = key_type_;
    expected.rows = spec.expected_rows();
    expected.explicit_values = spec.explicit_values();
    expected.batch = spec.batch_mode();
    expected.batch_chunks = spec.batch_mode() ? 1 : 0;
    capacity_ = *capacity;
    return ReserveFor(*capacity, &expected, /*grow_only=*/false);
  }
  // Sized from the rows received, chunk by chunk: Finish checks the probe bound
  // against the capacity for all of them.
  return absl::OkStatus();
}

absl::Status BuildSession::AddChunk(std::unique_ptr<v1::BuildChunk> chunk) {
  const std::string field = absl::StrCat("chunks[", chunks_.size(), "]");
  if (!have_spec_) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": arrived before the spec; the first message must carry spec"));
  }
  GPUJOIN_ASSIGN_OR_RETURN(KeyColumns key_columns, DecodeKeyColumns(*chunk, field + "."));
  return WithKeyWord(key_type_, [&](auto word) {
    return AddChunkOf<typename decltype(word)::type>(std::move(chunk), key_columns);
  });
}

template <typename Key>
absl::Status BuildSession::AddChunkOf(std::unique_ptr<v1::BuildChunk> chunk,
                                      KeyColumns& key_columns) {
  const std::string field = absl::StrCat("chunks[", chunks_.size(), "]");
  const bool batch = spec_.batch_mode();
  // The payload leaves the message: its rows are copied into the staged columns,
  // so that the message kept (and counted) holds the keys only.
  google::protobuf::RepeatedPtrField<v1::Column> payload;
  payload.Swap(chunk->mutable_payload());
  // A batch chunk needs keys unless it carries payload only.
  GPUJOIN_ASSIGN_OR_RETURN(
      DecodedColumn<Key> keys,
      TakeKeys<Key>(key_columns, field + ".", name_,
                    batch && payload.empty() ? Presence::kRequired : Presence::kOptional));
  GPUJOIN_ASSIGN_OR_RETURN(auto values, DecodeU32Column(chunk->has_values(), chunk->values(),
                                                        field + ".values", Presence::kOptional));
  GPUJOIN_ASSIGN_OR_RETURN(
      auto validity, DecodeU32Column(chunk->has_validity(), chunk->validity(), field + ".validity",
                                     Presence::kOptional));
  if (values.present() && !spec_.explicit_values()) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ".values: ", values.size(), " values sent but spec.explicit_values is false"));
  }
  if (!batch && chunk->row_base() != 0) {
    return absl::InvalidArgumentError(absl::StrCat(field, ".row_base: ", chunk->row_base(),
                                                   " is set but spec.batch_mode is false"));
  }
  if (!batch && validity.present()) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ".validity: set but spec.batch_mode is false"));
  }
  if (validity.present() && validity.size() != keys.size()) {
    return absl::InvalidArgumentError(absl::StrCat(field, ".validity: ", validity.size(),
                                                   " rows but ", field, ".", KeysField<Key>(),
                                                   " has ", keys.size()));
  }
  if (key_rows_ + keys.size() > kMaxBuildRows || value_rows_ + values.size() > kMaxBuildRows) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": the build exceeds ", kMaxBuildRows, " rows"));
  }
  // Refuse at the chunk that would generate 0xffffffff (or wrap), before staging it.
  if (batch) {
    GPUJOIN_RETURN_IF_ERROR(CheckFitsU32(chunk->row_base(), field + ".row_base"));
    GPUJOIN_RETURN_IF_ERROR(CheckGeneratedValues(
        chunk->row_base(), keys.size(), field + ".row_base", "the value of the chunk's last row"));
  } else if (!spec_.explicit_values()) {
    GPUJOIN_RETURN_IF_ERROR(CheckGeneratedValues(
        spec_.first_value(), key_rows_ + keys.size(), "spec.first_value",
        absl::StrCat("the value of global row ", key_rows_ + keys.size() - 1, ", in ", field)));
  }
  GPUJOIN_ASSIGN_OR_RETURN(const PayloadStaging::Chunk payload_parts,
                           payload_.Validate(payload, field, kMaxBuildRows));
  const uint64_t bytes = chunk->SpaceUsedLong() + keys.owned_bytes() + values.owned_bytes() +
                         validity.owned_bytes() + payload_.GrowthBytes(payload_parts);
  if (keys.size() != 0) ++nonempty_chunks_;
  any_validity_ = any_validity_ || validity.present();
  GPUJOIN_RETURN_IF_ERROR(CountStaged(bytes, field));
  payload_.Append(payload_parts);
  GPUJOIN_RETURN_IF_ERROR(ReserveRows(key_rows_ + keys.size(), any_validity_, field));
  key_rows_ += keys.size();
  value_rows_ += values.size();
  std::get<KeyChunks<Key>>(keys_).push_back(std::move(keys));
  values_.push_back(std::move(values));
  validity_.push_back(std::move(validity));
  row_bases_.push_back(static_cast<uint32_t>(chunk->row_base()));  // checked above
  chunks_.push_back(std::move(chunk));  // owns the bytes the views borrow
  return absl::OkStatus();
}

void BuildSession::Release() {
  std::visit([](auto& chunks) { chunks.clear(); }, keys_);
  values_.clear();
  validity_.clear();
  chunks_.clear();
  payload_.Clear();
  staging_.Release();
  staged_bytes_ = 0;
  reservation_.Release();
  reserved_ = false;
}

absl::Status BuildSession::Add(v1::BuildIndexRequest&& message) {
  switch (message.kind_case()) {
    case v1::BuildIndexRequest::kSpec:
      return AddSpec(message.spec());
    case v1::BuildIndexRequest::kChunk: {
      auto chunk = std::make_unique<v1::BuildChunk>();
      chunk->Swap(message.mutable_chunk());
      return AddChunk(std::move(chunk));
    }
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "message ", chunks_.size() + (have_spec_ ? 1 : 0), ": neither spec nor chunk is set"));
  }
}

absl::StatusOr<std::shared_ptr<const IndexVersion>> BuildSession::Finish(
    const std::atomic<bool>& cancelled) {
  return Finish([&cancelled] { return cancelled.load(); });
}

absl::StatusOr<std::shared_ptr<const IndexVersion>> BuildSession::Finish(
    const std::function<bool()>& cancelled) {
  if (!have_spec_) {
    return absl::InvalidArgumentError("spec: missing; the first message must carry spec");
  }
  if (spec_.explicit_values() && value_rows_ != key_rows_) {
    return absl::InvalidArgumentError(
        absl::StrCat("values: ", value_rows_, " rows in total but keys has ", key_rows_));
  }
  GPUJOIN_RETURN_IF_ERROR(payload_.CheckRows(key_rows_));
  double seconds = 0;
  GPUJOIN_ASSIGN_OR_RETURN(std::unique_ptr<engine::HashIndex> index,
                           WithKeyWord(key_type_, [&](auto word) {
                             return BuildOf<typename decltype(word)::type>(&seconds);
                           }));
  if (cancelled()) {
    return absl::CancelledError(absl::StrCat(
        "build of index \"", name_, "\" cancelled; the previous version (if any) keeps serving"));
  }

  auto version = std::make_shared<IndexVersion>();
  version->name = name_;
  version->index = std::move(index);
  version->first_value = static_cast<uint32_t>(spec_.first_value());
  version->explicit_values = spec_.explicit_values();
  version->batch_mode = spec_.batch_mode();
  version->payload_names = payload_.Names();
  version->build_seconds = seconds;
  version->built_unix_millis = std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count();
  // The build's transient memory is free again: keep what the table holds.
  version->reservation = std::move(reservation_);
  version->reservation.ShrinkTo(version->index->memory_bytes());
  std::shared_ptr<const IndexVersion> installed = version;
  GPUJOIN_ASSIGN_OR_RETURN(auto previous, ops_->state_.registry->Install(version, spec_.replace()));
  ops_->state_.metrics->SetIndex(*installed);
  if (ops_->state_.snapshots != nullptr) ops_->state_.snapshots->Schedule(installed);
  previous.reset();  // frees the old table once in-flight readers finish
  ops_->UpdateServiceGauges();
  // Drop the host copies of the input now rather than with the reactor.
  std::visit([](auto& chunks) { chunks.clear(); }, keys_);
  values_.clear();
  validity_.clear();
  chunks_.clear();
  payload_.Clear();
  staging_.Release();
  staged_bytes_ = 0;
  return installed;
}

template <typename Key>
absl::StatusOr<std::unique_ptr<engine::HashIndex>> BuildSession::BuildOf(double* seconds) {
  // The build node first: its shape sizes the reservation (table plus the build's
  // transient memory) before the backend allocates anything.
  const KeyChunks<Key>& keys = std::get<KeyChunks<Key>>(keys_);
  engine::BuildStatistics stats;
  std::optional<engine::BuildBatchIndexNodeT<Key>> batch_node;
  std::optional<engine::BuildIndexNodeT<Key>> plain_node;
  if (spec_.batch_mode()) {
    batch_node.emplace();
    batch_node->statistics = &stats;
    for (size_t i = 0; i < keys.size(); ++i) {
      batch_node->chunks.push_back(
          engine::BatchChunkT<Key>{keys[i].span(), row_bases_[i], validity_[i].span()});
    }
    batch_node->payload = payload_.Views();
  } else {
    plain_node.emplace();
    plain_node->statistics = &stats;
    plain_node->first_value = static_cast<uint32_t>(spec_.first_value());  // AddSpec checked it
    for (const auto& k : keys) {
      if (k.size() != 0) plain_node->keys.push_back(k.span());
    }
    if (spec_.explicit_values()) {
      plain_node->values.emplace();
      for (const auto& v : values_) {
        if (v.size() != 0) plain_node->values->push_back(v.span());
      }
    }
    plain_node->payload = payload_.Views();
  }
  const engine::BuildShape shape =
      batch_node ? engine::BuildShapeOf(*batch_node) : engine::BuildShapeOf(*plain_node);
  auto sized = CapacityFor(key_rows_);
  if (!sized.ok()) return Prefixed(sized.status(), "chunks: ");
  const uint32_t capacity = *sized;
  GPUJOIN_RETURN_IF_ERROR(ReserveFor(capacity, &shape, /*grow_only=*/false));
  GPUJOIN_ASSIGN_OR_RETURN(std::unique_ptr<engine::HashIndex> index,
                           ops_->state_.backend->CreateIndex(EngineSpec(capacity)));

  engine::CommandGraph graph;
  if (batch_node) {
    batch_node->index = index.get();
    graph.Add(std::move(*batch_node));
  } else {
    plain_node->index = index.get();
    graph.Add(std::move(*plain_node));
  }
  const auto start = std::chrono::steady_clock::now();
  GPUJOIN_RETURN_IF_ERROR(ops_->RunGraph(graph));
  *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return index;
}

}  // namespace gpujoin::server
