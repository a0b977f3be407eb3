// Operations::Mutate: one batch of upserts and deletes applied to a live index
// (docs/api.md "Mutate"; the semantics are engine/mutation.hpp's).
//
// A batch is decoded and checked whole first (keys of the index's kind, values,
// payload columns, --max-mutation-rows, the staged-bytes limit); then, with the
// index's mutations serialized (IndexVersion::mutate_mu), it is applied one of
// two ways, both under the version's latch held exclusively when the index
// changes, so a query sees the batch wholly or not at all and a refused batch
// changes nothing:
//  - in place, when the backend can (Backend::MutateInPlace: the CPU
//    backend's lowest_row indexes of key words with fixed-width payload, when
//    the batch fits the table); undone if it cannot be logged;
//  - else merged with the index's content and built into a new table beside
//    it (larger when the load would pass max_load_factor or a key found no
//    slot within the probe bound), its memory reserved in the budget first,
//    then swapped in.
//
// With --data-dir (MutationLogs) a batch waits until its version's snapshot is
// durable, is appended to the index's write-ahead log right before the swap
// (a failed append changes nothing), and is acknowledged once the log's Sync
// says it is durable, outside the lane so that batches share fsyncs.
#include <algorithm>
#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gpujoin/common/status_macros.hpp"
#include "gpujoin/engine/mutation.hpp"
#include "ops/operations.hpp"
#include "storage/mutation_logs.hpp"
#include "storage/snapshot_store.hpp"
#include "wire/request_checks.hpp"
#include "wire/names.hpp"

namespace gpujoin::server {
namespace {

// MutateRequest's delete fields seen as a message carrying keys, so that they
// decode like every other key input (fields "delete_keys", "delete_keys64",
// "delete_key_columns").
struct DeleteKeys {
  const v1::MutateRequest& m;
  bool has_keys() const { return m.has_delete_keys(); }
  const v1::U32Column& keys() const { return m.delete_keys(); }
  bool has_keys64() const { return m.has_delete_keys64(); }
  const v1::U64Column& keys64() const { return m.delete_keys64(); }
  int key_columns_size() const { return m.delete_key_columns_size(); }
  const google::protobuf::RepeatedPtrField<v1::Column>& key_columns() const {
    return m.delete_key_columns();
  }
};

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Blocks until the snapshot of `name` holds `version` or a later one.
absl::Status WaitDurable(SnapshotStore& store, const std::string& name, uint64_t version) {
  std::promise<absl::Status> done;
  std::future<absl::Status> result = done.get_future();
  store.WhenDurable(name, version, [&done](absl::Status s) { done.set_value(std::move(s)); });
  return result.get();
}

}  // namespace

absl::Status Operations::Mutate(const v1::MutateRequest& request, v1::MutateResponse* response) {
  GPUJOIN_RETURN_IF_ERROR(ValidateIndexName(request.index(), "index"));
  MutationLogs* logs = state_.mutation_logs;
  for (;;) {
    GPUJOIN_ASSIGN_OR_RETURN(auto version, FindIndex(request.index(), "index"));
    if (logs != nullptr) {
      // A restart replays the log onto the version's snapshot: it must exist.
      const absl::Status durable = WaitDurable(*state_.snapshots, version->name, version->version);
      if (!durable.ok()) {
        return absl::FailedPreconditionError(absl::StrCat(
            "index \"", version->name, "\" takes no mutations until its snapshot is written: ",
            durable.message()));
      }
    }
    uint64_t ticket = 0;
    bool rewrite_snapshot = false;
    {
      std::unique_lock<std::mutex> lane(version->mutate_mu);
      // A build, load or drop may have replaced the version while this batch
      // waited for the lane: apply it to what is live now.
      if (state_.registry->Get(version->name) != version) continue;
      GPUJOIN_RETURN_IF_ERROR(WithIndexKey(version->index->key_type(), [&](auto word) {
        return MutateOf<typename decltype(word)::type>(*version, request, response,
                                                       logs != nullptr ? &ticket : nullptr,
                                                       &rewrite_snapshot);
      }));
    }
    if (logs == nullptr) return absl::OkStatus();
    if (rewrite_snapshot) state_.snapshots->Rewrite(version);
    // Outside the lane: the next batch appends while this one's fsync runs,
    // and one fsync covers both (group commit).
    const absl::StatusOr<bool> synced = logs->Sync(version->name, ticket);
    if (!synced.ok()) {
      return absl::Status(synced.status().code(),
                          absl::StrCat("the batch was applied to index \"", version->name,
                                       "\" but could not be made durable, and the index takes no "
                                       "more mutations: ",
                                       synced.status().message()));
    }
    response->set_durable(*synced);
    return absl::OkStatus();
  }
}

absl::Status Operations::ReplayMutation(const IndexVersion& version,
                                        const v1::MutateRequest& request) {
  std::unique_lock<std::mutex> lane(version.mutate_mu);
  v1::MutateResponse response;
  return WithIndexKey(version.index->key_type(), [&](auto word) {
    return MutateOf<typename decltype(word)::type>(version, request, &response, nullptr, nullptr);
  });
}

template <typename Key>
absl::Status Operations::MutateOf(const IndexVersion& version, const v1::MutateRequest& request,
                                  v1::MutateResponse* response, uint64_t* ticket,
                                  bool* rewrite_snapshot) {
  const auto start = std::chrono::steady_clock::now();
  const KeySchemaView schema = KeySchemaOf(version);
  GPUJOIN_ASSIGN_OR_RETURN(KeyColumns upsert_words, DecodeKeyColumns(request, ""));
  const DeleteKeys delete_fields{request};
  GPUJOIN_ASSIGN_OR_RETURN(KeyColumns delete_words, DecodeKeyColumns(delete_fields, "delete_"));
  GPUJOIN_ASSIGN_OR_RETURN(DecodedKeys<Key> upserts,
                           TakeIndexKeys<Key>(upsert_words, request, "", version.name, schema,
                                              Presence::kOptional));
  GPUJOIN_ASSIGN_OR_RETURN(DecodedKeys<Key> deletes,
                           TakeIndexKeys<Key>(delete_words, delete_fields, "delete_", version.name,
                                              schema, Presence::kOptional));
  GPUJOIN_RETURN_IF_ERROR(
      CheckPlacement(version, state_.config.shard, request.replica(), /*changes=*/true));
  const engine::ShardIdentity owned = KeysOwned(version, state_.config.shard);
  GPUJOIN_RETURN_IF_ERROR(CheckShardKeys(upserts, owned, detail::KeysField<Key>()));
  GPUJOIN_RETURN_IF_ERROR(CheckShardKeys(deletes, owned,
                                         std::string("delete_") + detail::KeysField<Key>()));
  const uint64_t upsert_rows = upserts.size();
  const uint64_t delete_rows = deletes.size();
  if (upsert_rows + delete_rows == 0) {
    return absl::InvalidArgumentError(
        "the batch has no upsert keys (keys, keys64 or key_columns) and no delete keys "
        "(delete_keys, delete_keys64 or delete_key_columns)");
  }
  const uint64_t max_rows = state_.config.max_mutation_rows;
  if (upsert_rows + delete_rows > max_rows) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the batch has ", upsert_rows, " upsert rows and ", delete_rows,
        " delete rows, more than --max-mutation-rows=", max_rows, "; split it"));
  }

  // Values: explicit, or the next row IDs.
  std::vector<uint32_t> row_ids;
  DecodedColumn<uint32_t> values;
  if (version.explicit_values) {
    GPUJOIN_ASSIGN_OR_RETURN(
        values, DecodeU32Column(request.has_values(), request.values(), "values",
                                upsert_rows == 0 ? Presence::kOptional : Presence::kRequired));
    if (values.size() != upsert_rows) {
      return absl::InvalidArgumentError(absl::StrCat("values: ", values.size(),
                                                     " values but the batch has ", upsert_rows,
                                                     " upsert keys"));
    }
  } else {
    if (request.has_values()) {
      return absl::InvalidArgumentError(
          absl::StrCat("values: index \"", version.name,
                       "\" gives rows their row IDs (it was built without explicit_values); "
                       "upserted rows get the next row IDs, so send no values"));
    }
    const uint64_t next = version.mutation.next_row_id;
    if (upsert_rows != 0 && next + upsert_rows - 1 > 0xfffffffeull) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "index \"", version.name, "\" has given out row IDs up to ", next,
          "; the batch's ", upsert_rows, " upsert rows would pass 0xfffffffe, the largest"));
    }
    row_ids.resize(upsert_rows);
    for (uint64_t i = 0; i < upsert_rows; ++i) row_ids[i] = uint32_t(next + i);
  }

  // Payload: every declared column, with the upsert rows.
  PayloadStaging payload;
  {
    google::protobuf::RepeatedPtrField<v1::PayloadColumnSpec> declared;
    // The declared columns (the codes columns of dictionaries after them are the server's).
    const std::vector<engine::PayloadColumnInfo>& stored = version.index->payload();
    for (size_t c = 0; c < version.payload_names.size() && c < stored.size(); ++c) {
      v1::PayloadColumnSpec* spec = declared.Add();
      spec->set_name(version.payload_names[c]);
      spec->set_type(ToWireColumnType(stored[c].type));
    }
    GPUJOIN_RETURN_IF_ERROR(payload.Declare(declared));
  }
  if (upsert_rows == 0 && request.payload_size() != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "payload: ", request.payload_size(), " columns but the batch has no upsert keys"));
  }
  GPUJOIN_ASSIGN_OR_RETURN(
      PayloadStaging::Chunk parts,
      payload.Validate(request.payload(), "", upsert_rows, "one per upsert key of the batch"));
  MemoryBudget::Reservation staged;
  if (state_.staging != nullptr) {
    const uint64_t bytes = payload.GrowthBytes(parts) + 4 * upsert_rows;
    GPUJOIN_ASSIGN_OR_RETURN(
        staged, state_.staging->Reserve(bytes, absl::StrCat("the Mutate batch of index \"",
                                                            version.name, "\" (", bytes,
                                                            " bytes staged)")));
  }
  payload.Append(parts);
  if (upsert_rows != 0) {
    // PayloadStaging::CheckRows names a build's spec.payload; a batch's field is `payload`.
    const std::vector<std::string> names = payload.Names();
    const std::vector<engine::ColumnView> columns = payload.Views();
    for (size_t c = 0; c < columns.size(); ++c) {
      if (columns[c].rows != upsert_rows) {
        return absl::InvalidArgumentError(absl::StrCat(
            "payload: column \"", names[c], "\" (payload[", c, "] of index \"", version.name,
            "\") has ", columns[c].rows, " rows, but the batch has ", upsert_rows,
            " upsert keys (every payload column of the index needs one row per upsert key)"));
      }
    }
  }

  engine::MutationBatchT<Key> batch;
  batch.upsert_keys = KeyInputOf(upserts);
  batch.delete_keys = KeyInputOf(deletes);
  batch.values = {version.explicit_values ? values.span() : std::span<const uint32_t>(row_ids)};
  batch.payload = payload.Views();
  // The upsert rows' dictionary codes (new values join the dictionaries when
  // the batch is applied).
  const DictionaryAppend dictionary_codes(*version.index, batch.payload,
                                          state_.config.dictionary_max_values);
  if (!batch.payload.empty()) {
    for (const engine::ColumnView& codes : dictionary_codes.Views()) batch.payload.push_back(codes);
  }

  // In place when the backend can (the CPU backend's lowest_row indexes of key
  // words with fixed-width payload): readers wait for the batch, then see it.
  engine::MutationCounts counts;
  uint64_t sequence = 0;
  bool applied = false;
  {
    std::unique_lock<IndexLatch> write(version.latch);
    GPUJOIN_ASSIGN_OR_RETURN(
        engine::InPlaceMutation in_place,
        state_.backend->MutateInPlace(*version.index, batch, version.max_load_factor));
    if (in_place.applied) {
      // Logged before it is visible: a failed append undoes it.
      if (ticket != nullptr) {
        absl::StatusOr<uint64_t> appended = state_.mutation_logs->Append(
            version, version.mutation.sequence + 1, request, rewrite_snapshot);
        if (!appended.ok()) {
          in_place.undo->Undo();
          return appended.status();
        }
        *ticket = *appended;
      }
      dictionary_codes.Commit(*version.index);
      MutationState& m = version.mutation;
      sequence = ++m.sequence;
      if (!version.explicit_values) m.next_row_id += upsert_rows;
      counts = in_place.counts;
      applied = true;
    }
  }
  bool rehashed = false;
  if (!applied) {
    GPUJOIN_RETURN_IF_ERROR(MutateByRebuild(version, request, batch, dictionary_codes, ticket,
                                            rewrite_snapshot, &counts, &rehashed, &sequence));
  }

  response->set_index_version(version.version);
  response->set_mutation_sequence(sequence);
  response->set_upsert_rows(counts.upsert_rows);
  response->set_inserted_keys(counts.inserted_keys);
  response->set_updated_keys(counts.updated_keys);
  response->set_deleted_keys(counts.deleted_keys);
  response->set_not_found_keys(counts.not_found_keys);
  response->set_deleted_rows(counts.deleted_rows);
  response->set_rehashed(rehashed);
  {
    const IndexReadLock read(version);
    const engine::HashIndex& index = *version.index;
    const engine::BuildStatistics& st = index.build_statistics();
    v1::BuildStatistics* s = response->mutable_statistics();
    s->set_unique_keys(st.unique_keys);
    s->set_duplicate_rows(st.duplicate_rows);
    s->set_overflow_rows(st.overflow_rows);
    s->set_invalid_rows(st.invalid_rows);
    s->set_total_probes(st.total_probes);
    s->set_max_probes(st.max_probes);
    s->set_max_group_rows(st.max_group_rows);
    response->set_capacity(index.spec().capacity);
    response->set_load_factor(index.load_factor());
    state_.metrics->SetIndex(version);
  }
  state_.metrics->RecordMutation(counts.upsert_rows, counts.deleted_rows, rehashed,
                                 SecondsSince(start));
  UpdateServiceGauges();
  return absl::OkStatus();
}

// The batch merged with the index's content and built beside the live table
// (larger when it must grow), then swapped in: every index kind.
template <typename Key>
absl::Status Operations::MutateByRebuild(const IndexVersion& version,
                                         const v1::MutateRequest& request,
                                         const engine::MutationBatchT<Key>& batch,
                                         const DictionaryAppend& dictionary_codes, uint64_t* ticket,
                                         bool* rewrite_snapshot, engine::MutationCounts* counts,
                                         bool* rehashed_out, uint64_t* sequence_out) {
  const uint64_t upsert_rows = engine::KeyRows(batch.upsert_keys);
  // Merge with the index's content (queries go on meanwhile).
  std::unique_ptr<engine::MutationRebuild> merged;
  {
    const IndexReadLock read(version);
    GPUJOIN_ASSIGN_OR_RETURN(merged, engine::MutationRebuild::Prepare(*state_.backend,
                                                                      *version.index, batch));
  }
  const engine::HashIndexSpec& source = merged->source_spec();
  GPUJOIN_ASSIGN_OR_RETURN(uint32_t capacity,
                           engine::GrownCapacity(merged->live_keys(), source.capacity,
                                                 version.max_load_factor));
  // Build the result beside the live table, growing while keys overflow.
  std::unique_ptr<engine::HashIndex> built;
  MemoryBudget::Reservation reservation;
  for (;;) {
    engine::HashIndexSpec spec = source;
    spec.capacity = capacity;
    const uint64_t rows = merged->rows();
    const std::vector<engine::PayloadShape> shapes = merged->payload_shapes();
    engine::BuildShape shape;
    shape.rows = rows;
    shape.key_type = spec.key_type;
    shape.key_column_bytes = merged->key_column_bytes();
    shape.explicit_values = true;
    shape.payload = shapes;
    const engine::Backend& backend = *state_.backend;
    const uint64_t keys = spec.key_type == engine::KeyType::kColumns
                              ? merged->key_column_bytes() + 4 * rows
                              : 0;
    const uint64_t need = backend.IndexBytes(spec) +
                          engine::GroupStorageBytes(spec, capacity, rows) +
                          (shapes.empty() ? 0 : backend.PayloadBytes(spec, shapes, rows)) + keys +
                          backend.BuildTransientBytes(spec, shape) +
                          // The dictionaries it shares with the live table, as they grow.
                          version.index->dictionary_bytes() + dictionary_codes.GrowthBytes();
    GPUJOIN_ASSIGN_OR_RETURN(
        reservation,
        state_.budget->Reserve(need, absl::StrCat("the Mutate batch of index \"", version.name,
                                                  "\" (a table of ", capacity, " slots for ",
                                                  merged->live_keys(), " keys built beside the "
                                                  "live one)")));
    GPUJOIN_ASSIGN_OR_RETURN(built, state_.backend->CreateIndex(spec));
    engine::BuildStatistics stats;
    const absl::Status st = merged->BuildInto(*state_.backend, built.get(), &stats);
    if (st.code() == absl::StatusCode::kFailedPrecondition && capacity < (uint32_t{1} << 31)) {
      capacity *= 2;  // a key found no slot within the probe bound: grow
      built.reset();
      reservation.Release();
      continue;
    }
    if (!st.ok() && !state_.backend->Healthy() && state_.on_backend_fatal) {
      state_.on_backend_fatal();
    }
    GPUJOIN_RETURN_IF_ERROR(st);
    break;
  }
  const bool rehashed = capacity != source.capacity;

  // Logged before it is visible: a failed append changes nothing.
  if (ticket != nullptr) {
    GPUJOIN_ASSIGN_OR_RETURN(*ticket,
                             state_.mutation_logs->Append(version, version.mutation.sequence + 1,
                                                          request, rewrite_snapshot));
  }

  // Swap it in.
  uint64_t sequence = 0;
  {
    std::unique_lock<IndexLatch> write(version.latch);
    built->AttachDictionaries(version.index->shared_dictionaries());
    std::swap(version.index, built);
    dictionary_codes.Commit(*version.index);
    std::swap(version.reservation, reservation);
    version.reservation.ShrinkTo(version.index->held_bytes());
    MutationState& m = version.mutation;
    sequence = ++m.sequence;
    if (!version.explicit_values) m.next_row_id += upsert_rows;
    if (rehashed) ++m.rehashes;
  }
  built.reset();  // the old table: no query holds it any more
  reservation.Release();
  *counts = merged->counts();
  *rehashed_out = rehashed;
  *sequence_out = sequence;
  return absl::OkStatus();
}

// Mutate uses MutateOf from a generic lambda above its definition; instantiate
// every key kind explicitly (see lookup.cpp).
template absl::Status Operations::MutateOf<uint32_t>(const IndexVersion&, const v1::MutateRequest&,
                                                     v1::MutateResponse*, uint64_t*, bool*);
template absl::Status Operations::MutateOf<uint64_t>(const IndexVersion&, const v1::MutateRequest&,
                                                     v1::MutateResponse*, uint64_t*, bool*);
template absl::Status Operations::MutateOf<engine::ColumnKey>(const IndexVersion&,
                                                              const v1::MutateRequest&,
                                                              v1::MutateResponse*, uint64_t*,
                                                              bool*);
template absl::Status Operations::MutateByRebuild<uint32_t>(
    const IndexVersion&, const v1::MutateRequest&, const engine::MutationBatchT<uint32_t>&,
    const DictionaryAppend&, uint64_t*, bool*, engine::MutationCounts*, bool*, uint64_t*);
template absl::Status Operations::MutateByRebuild<uint64_t>(
    const IndexVersion&, const v1::MutateRequest&, const engine::MutationBatchT<uint64_t>&,
    const DictionaryAppend&, uint64_t*, bool*, engine::MutationCounts*, bool*, uint64_t*);
template absl::Status Operations::MutateByRebuild<engine::ColumnKey>(
    const IndexVersion&, const v1::MutateRequest&, const engine::MutationBatchT<engine::ColumnKey>&,
    const DictionaryAppend&, uint64_t*, bool*, engine::MutationCounts*, bool*, uint64_t*);

}  // namespace gpujoin::server
