#include "ops/build_session.hpp"

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gpujoin/common/status_macros.hpp"
#include "gpujoin/engine/graph.hpp"
#include "ops/operations.hpp"
#include "storage/snapshot_store.hpp"
#include "wire/names.hpp"
#include "wire/request_checks.hpp"

namespace gpujoin::server {

using detail::CheckFitsU32;
using detail::CheckGeneratedValues;
using detail::KeysField;
using detail::kMaxBuildRows;
using detail::Prefixed;

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
  spec.key_columns = key_schema_.types;
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
  std::vector<engine::PayloadShape> payload_shapes = payload_.Shapes();
  for (const engine::PayloadShape& s : dictionaries_.Shapes()) payload_shapes.push_back(s);
  // A keep_all index keeps its groups and its payload per row: both grow with
  // the rows, which are known from the spec's expected_rows or the chunks so far.
  const uint64_t rows = shape == nullptr ? 0 : shape->rows;
  const uint64_t table = backend.IndexBytes(spec);
  const uint64_t groups = engine::GroupStorageBytes(spec, capacity, rows);
  const uint64_t payload =
      payload_shapes.empty() ? 0 : backend.PayloadBytes(spec, payload_shapes, rows);
  // A key schema's key columns and the value of every row (4 bytes a row) stay
  // with the index (HashIndex::memory_bytes counts them).
  const uint64_t keys = key_type_ == engine::KeyType::kColumns && shape != nullptr
                            ? shape->key_column_bytes + rows * sizeof(uint32_t)
                            : 0;
  uint64_t transient = 0;
  if (shape != nullptr) {
    engine::BuildShape with_payload = *shape;
    with_payload.payload = payload_shapes;
    transient = backend.BuildTransientBytes(spec, with_payload);
  }
  const uint64_t need =
      table + groups + payload + keys + transient + staged_bytes_ + dictionaries_.bytes;
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
                         payload_part,
                         keys == 0 ? std::string()
                                   : absl::StrCat(" + ", keys, " bytes of key columns and row values"),
                         " + ", transient, " transient bytes for the build of ",
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

uint64_t BuildSession::NextRowId() const {
  if (spec_.explicit_values()) return 0;
  if (!spec_.batch_mode()) return spec_.first_value() + key_rows_;
  uint64_t next = 0;
  for (size_t i = 0; i < row_bases_.size(); ++i) {
    next = std::max<uint64_t>(next, uint64_t{row_bases_[i]} + chunk_key_rows_[i]);
  }
  return next;
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
  if (key_type_ == engine::KeyType::kColumns) {
    shape.key_column_bytes = engine::KeyColumnBytes(key_staging_.View());
  }
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
  GPUJOIN_ASSIGN_OR_RETURN(key_schema_, DecodeKeySchema(key_type_, spec.key_columns()));
  if (key_type_ == engine::KeyType::kColumns) {
    key_staging_.Declare(key_schema_.types);
  } else {
    WithKeyWord(key_type_,
                [this](auto word) { keys_.emplace<KeyChunks<typename decltype(word)::type>>(); });
  }
  GPUJOIN_RETURN_IF_ERROR(payload_.Declare(spec.payload()));
  if (spec.wait_durable() && ops_->state_.snapshots == nullptr) {
    return absl::FailedPreconditionError(
        "spec.wait_durable: this gpujoind has no --data-dir, so nothing is durable; start it "
        "with --data-dir DIR or leave wait_durable unset");
  }
  if (spec.min_version() > IndexRegistry::kMaxMinVersion) {
    return absl::InvalidArgumentError(absl::StrCat("spec.min_version: ", spec.min_version(),
                                                   " is above the largest, ", IndexRegistry::kMaxMinVersion));
  }
  if (spec.router_values() != v1::ROUTER_VALUES_NONE &&
      (!spec.explicit_values() || !v1::RouterValues_IsValid(spec.router_values()))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "spec.router_values: ", static_cast<int>(spec.router_values()),
        " needs spec.explicit_values and one of ROUTER_VALUES_ROW_IDS, _BATCH_ROWS (the router "
        "sends the row IDs)"));
  }
  if (!v1::IndexPlacement_IsValid(spec.placement())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "spec.placement: ", static_cast<int>(spec.placement()),
        " is not one of INDEX_PLACEMENT_PARTITIONED, INDEX_PLACEMENT_REPLICATED"));
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
  const double max_lf = spec.max_load_factor();
  if (max_lf != 0 && !(max_lf > 0 && max_lf <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("spec.max_load_factor: ", max_lf, " is outside (0, 1]"));
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
    // A key schema's fixed-width columns; strings are counted as they arrive.
    for (engine::ColumnType type : key_schema_.types) {
      expected.key_column_bytes += engine::IsVariableWidth(type)
                                       ? (expected.rows + 1) * sizeof(int64_t)
                                       : expected.rows * engine::ColumnWidth(type);
    }
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
  return WithIndexKey(key_type_, [&](auto word) {
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
      DecodedKeys<Key> keys,
      TakeIndexKeys<Key>(key_columns, *chunk, field + ".", name_, key_schema_.view(),
                         batch && payload.empty() ? Presence::kRequired : Presence::kOptional));
  if (spec_.placement() != v1::INDEX_PLACEMENT_REPLICATED) {
    GPUJOIN_RETURN_IF_ERROR(CheckShardKeys(keys, ops_->state_.config.shard,
                                           field + "." + detail::KeysField<Key>()));
  }
  // Key columns leave the message like the payload (the views stay valid: the
  // Column messages do not move), copied into the staged key columns.
  google::protobuf::RepeatedPtrField<v1::Column> key_column_messages;
  key_column_messages.Swap(chunk->mutable_key_columns());
  uint64_t key_growth = 0;
  if constexpr (std::is_same_v<Key, engine::ColumnKey>) {
    GPUJOIN_ASSIGN_OR_RETURN(key_growth, key_staging_.GrowthBytes(keys.view(), field));
  }
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
                         validity.owned_bytes() + payload_.GrowthBytes(payload_parts) + key_growth;
  if (keys.size() != 0) ++nonempty_chunks_;
  any_validity_ = any_validity_ || validity.present();
  GPUJOIN_RETURN_IF_ERROR(CountStaged(bytes, field));
  payload_.Append(payload_parts);
  if constexpr (std::is_same_v<Key, engine::ColumnKey>) key_staging_.Append(keys.view());
  GPUJOIN_RETURN_IF_ERROR(ReserveRows(key_rows_ + keys.size(), any_validity_, field));
  key_rows_ += keys.size();
  value_rows_ += values.size();
  chunk_key_rows_.push_back(keys.size());
  if constexpr (!std::is_same_v<Key, engine::ColumnKey>) {
    std::get<KeyChunks<Key>>(keys_).push_back(std::move(keys));
  }
  values_.push_back(std::move(values));
  validity_.push_back(std::move(validity));
  row_bases_.push_back(static_cast<uint32_t>(chunk->row_base()));  // checked above
  chunks_.push_back(std::move(chunk));  // owns the bytes the views borrow
  return absl::OkStatus();
}

void BuildSession::Release() {
  std::visit([](auto& chunks) { chunks.clear(); }, keys_);
  key_staging_.Clear();
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
                           WithIndexKey(key_type_, [&](auto word) {
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
  version->router_values = spec_.router_values();
  version->batch_mode = spec_.batch_mode();
  version->replicated = spec_.placement() == v1::INDEX_PLACEMENT_REPLICATED;
  if (spec_.max_load_factor() != 0) version->max_load_factor = spec_.max_load_factor();
  version->mutation.next_row_id = NextRowId();
  version->base_id = NewBaseId();
  version->payload_names = payload_.Names();
  version->key_column_names = key_schema_.names;
  version->build_seconds = seconds;
  version->built_unix_millis = std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count();
  // The build's transient memory is free again: keep what the table holds.
  version->reservation = std::move(reservation_);
  version->reservation.ShrinkTo(version->index->held_bytes());
  std::shared_ptr<const IndexVersion> installed = version;
  GPUJOIN_ASSIGN_OR_RETURN(auto previous, ops_->state_.registry->Install(
                                              version, spec_.replace(), spec_.min_version()));
  {
    const IndexReadLock held(*installed);  // a Mutate may already change it
    ops_->state_.metrics->SetIndex(*installed);
  }
  if (ops_->state_.snapshots != nullptr) ops_->state_.snapshots->Schedule(installed);
  previous.reset();  // frees the old table once in-flight readers finish
  ops_->UpdateServiceGauges();
  // Drop the host copies of the input now rather than with the reactor.
  std::visit([](auto& chunks) { chunks.clear(); }, keys_);
  key_staging_.Clear();
  values_.clear();
  validity_.clear();
  chunks_.clear();
  payload_.Clear();
  dictionaries_ = DictionaryBuild{};
  staging_.Release();
  staged_bytes_ = 0;
  return installed;
}

template <typename Key>
absl::StatusOr<std::unique_ptr<engine::HashIndex>> BuildSession::BuildOf(double* seconds) {
  // The build node first: its shape sizes the reservation (table plus the build's
  // transient memory) before the backend allocates anything.
  constexpr bool kColumns = std::is_same_v<Key, engine::ColumnKey>;
  engine::BuildStatistics stats;
  // The declared columns, then the codes columns of their dictionaries.
  std::vector<engine::ColumnView> payload = payload_.Views();
  dictionaries_ = MakeDictionaries(payload, ops_->state_.config.dictionary_max_values);
  for (const engine::ColumnView& codes : dictionaries_.Views()) payload.push_back(codes);
  std::optional<engine::BuildBatchIndexNodeT<Key>> batch_node;
  std::optional<engine::BuildIndexNodeT<Key>> plain_node;
  if (spec_.batch_mode()) {
    batch_node.emplace();
    batch_node->statistics = &stats;
    uint64_t first = 0;
    for (size_t i = 0; i < chunk_key_rows_.size(); ++i) {
      if constexpr (kColumns) {
        batch_node->chunks.push_back(engine::BatchChunkT<Key>{
            key_staging_.Slice(first, chunk_key_rows_[i]), row_bases_[i], validity_[i].span()});
      } else {
        batch_node->chunks.push_back(engine::BatchChunkT<Key>{
            std::get<KeyChunks<Key>>(keys_)[i].span(), row_bases_[i], validity_[i].span()});
      }
      first += chunk_key_rows_[i];
    }
    batch_node->payload = payload;
  } else {
    plain_node.emplace();
    plain_node->statistics = &stats;
    plain_node->first_value = static_cast<uint32_t>(spec_.first_value());  // AddSpec checked it
    if constexpr (kColumns) {
      plain_node->keys = key_staging_.View();
    } else {
      for (const auto& k : std::get<KeyChunks<Key>>(keys_)) {
        if (k.size() != 0) plain_node->keys.push_back(k.span());
      }
    }
    if (spec_.explicit_values()) {
      plain_node->values.emplace();
      for (const auto& v : values_) {
        if (v.size() != 0) plain_node->values->push_back(v.span());
      }
    }
    plain_node->payload = payload;
  }
  engine::BuildShape shape =
      batch_node ? engine::BuildShapeOf(*batch_node) : engine::BuildShapeOf(*plain_node);
  // A key schema's stored key columns are the staged rows however they were
  // chunked; a batch's shape counts its non-empty chunks only, and so nothing
  // for a build of no rows, whose string and binary columns still keep an offset.
  if constexpr (kColumns) shape.key_column_bytes = engine::KeyColumnBytes(key_staging_.View());
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
  if (!dictionaries_.dictionaries->empty()) index->AttachDictionaries(dictionaries_.dictionaries);
  return index;
}

}  // namespace gpujoin::server
