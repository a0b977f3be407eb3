// The index control calls: DropIndex, ListIndexes, DescribeIndex (an index's
// description, FillIndexInfo) and GetServerInfo. Indexes are created by
// BuildSession (build_session.cpp) and LoadIndex (index_files.cpp).
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gpujoin/engine/dictionary.hpp"
#include "gpujoin/common/status_macros.hpp"
#include "ops/operations.hpp"
#include "storage/mutation_logs.hpp"
#include "storage/snapshot_store.hpp"
#include "wire/names.hpp"

namespace gpujoin::server {

void Operations::FillIndexInfo(const IndexVersion& v, v1::IndexInfo* info) const {
  const IndexReadLock read(v);
  const engine::HashIndex& index = *v.index;
  info->set_mutation_sequence(read.sequence());
  info->set_max_load_factor(v.max_load_factor);
  info->set_next_row_id(v.explicit_values ? 0 : v.mutation.next_row_id);
  info->set_rehashes(v.mutation.rehashes);
  const engine::BuildStatistics& st = index.build_statistics();
  info->set_name(v.name);
  info->set_version(v.version);
  if (state_.snapshots != nullptr) info->set_durable_version(state_.snapshots->DurableVersion(v.name));
  info->set_capacity(index.spec().capacity);
  info->set_max_probe_count(index.spec().probe_bound());
  info->set_first_value(v.first_value);
  info->set_explicit_values(v.explicit_values && v.router_values == v1::ROUTER_VALUES_NONE);
  info->set_batch_mode(v.batch_mode || v.router_values == v1::ROUTER_VALUES_BATCH_ROWS);
  info->set_rows(index.built_rows());
  info->set_placement(v.replicated ? v1::INDEX_PLACEMENT_REPLICATED
                                   : v1::INDEX_PLACEMENT_PARTITIONED);
  auto* s = info->mutable_statistics();
  s->set_unique_keys(st.unique_keys);
  s->set_duplicate_rows(st.duplicate_rows);
  s->set_overflow_rows(st.overflow_rows);
  s->set_invalid_rows(st.invalid_rows);
  s->set_total_probes(st.total_probes);
  s->set_max_probes(st.max_probes);
  s->set_max_group_rows(st.max_group_rows);
  info->set_load_factor(index.load_factor());
  info->set_device_bytes(index.held_bytes());
  info->set_build_seconds(v.build_seconds);
  info->set_backend(std::string(engine::BackendKindName(index.backend())));
  info->set_built_unix_millis(v.built_unix_millis);
  info->set_key_type(ToWireKeyType(index.key_type()));
  info->set_duplicates(ToWireDuplicatePolicy(index.spec().duplicates));
  const std::vector<engine::ColumnType>& key_types = index.spec().key_columns;
  for (size_t i = 0; i < key_types.size(); ++i) {
    v1::KeyColumnSpec* k = info->add_key_columns();
    k->set_name(i < v.key_column_names.size() ? v.key_column_names[i] : std::string());
    k->set_type(ToWireColumnType(key_types[i]));
  }
  uint64_t payload_bytes = 0;
  const std::vector<engine::PayloadColumnInfo>& payload = index.payload();
  // The declared columns; a dictionary's codes column and values count with
  // the column it codes.
  for (size_t i = 0; i < payload.size() && i < v.payload_names.size(); ++i) {
    v1::PayloadColumnInfo* p = info->add_payload();
    p->set_name(v.payload_names[i]);
    p->set_type(ToWireColumnType(payload[i].type));
    p->set_null_count(payload[i].null_count);
    uint64_t dictionary_bytes = 0;
    if (const auto* dictionaries = index.dictionaries()) {
      for (const engine::PayloadDictionary& d : *dictionaries) {
        if (d.column != i) continue;
        dictionary_bytes = d.values.bytes() +
                           (d.codes_column < payload.size() ? payload[d.codes_column].bytes : 0);
        if (!d.retired) p->set_dictionary_values(d.values.size());
      }
    }
    p->set_dictionary_bytes(dictionary_bytes);
    p->set_bytes(payload[i].bytes + dictionary_bytes);
    payload_bytes += payload[i].bytes + dictionary_bytes;
  }
  info->set_payload_bytes(payload_bytes);
}

absl::Status Operations::DropIndex(const v1::DropIndexRequest& request,
                                   v1::DropIndexResponse* response) {
  GPUJOIN_RETURN_IF_ERROR(ValidateIndexName(request.name(), "name"));
  GPUJOIN_ASSIGN_OR_RETURN(auto version, state_.registry->Remove(request.name()));
  state_.metrics->RemoveIndex(request.name());
  if (state_.snapshots != nullptr) state_.snapshots->Forget(request.name(), version->version);
  if (state_.mutation_logs != nullptr) {
    // After the batches already in the index's lane (later ones find it gone).
    std::lock_guard<std::mutex> lane(version->mutate_mu);
    state_.mutation_logs->Forget(request.name());
  }
  response->set_dropped_version(version->version);
  {
    const IndexReadLock read(*version);
    response->set_freed_bytes(version->index->held_bytes());
  }
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
  response->set_max_mutation_rows(state_.config.max_mutation_rows);
  // The write-ahead log's policy; no log (and "") without --data-dir.
  if (!state_.config.data_dir.empty()) response->set_wal_sync(state_.config.wal_sync.ToString());
  if (state_.pending_responses != nullptr) {
    response->set_max_pending_response_bytes(state_.pending_responses->limit_bytes());
    response->set_pending_response_bytes(state_.pending_responses->used_bytes());
  }
  response->set_index_count(static_cast<uint32_t>(state_.registry->size()));
  response->set_serving(serving);
  return absl::OkStatus();
}

}  // namespace gpujoin::server
