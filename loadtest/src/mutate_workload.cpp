#include "mutate_workload.hpp"

#include "absl/strings/str_cat.h"

namespace gpujoin::loadtest {

client::MutateBatch MutateBatchOf(const BatchPool& pool, const PoolBatch& batch) {
  client::MutateBatch m;
  m.upsert_keys = batch.QueryKeys();
  if (pool.explicit_values) m.values = batch.mapped_values;
  for (const client::Column& c : pool.null_payload) m.payload.push_back(c.view());
  return m;
}

std::string CheckMutate(const BatchPool& pool, const PoolBatch& batch,
                        const client::MutateResult& r, uint64_t previous_sequence) {
  const uint64_t rows = batch.rows();
  if (r.upsert_rows != rows) {
    return absl::StrCat("mutate answer counts ", r.upsert_rows, " upsert rows for ", rows);
  }
  if (r.inserted_keys + r.updated_keys != batch.distinct_keys) {
    return absl::StrCat("inserted ", r.inserted_keys, " + updated ", r.updated_keys,
                        " keys, but the batch has ", batch.distinct_keys, " distinct keys");
  }
  if (pool.known_mapping && r.updated_keys < batch.distinct_hits) {
    return absl::StrCat("updated ", r.updated_keys, " keys, but ", batch.distinct_hits,
                        " distinct keys of the batch are in the index");
  }
  if (r.deleted_keys != 0 || r.not_found_keys != 0 || r.deleted_rows != 0) {
    return absl::StrCat("a batch without deletes deleted ", r.deleted_keys, " keys (",
                        r.deleted_rows, " rows) and found ", r.not_found_keys, " missing");
  }
  if (r.mutation_sequence <= previous_sequence) {
    return absl::StrCat("mutation sequence ", r.mutation_sequence,
                        " after this stream's previous answer at ", previous_sequence);
  }
  if (r.statistics.overflow_rows != 0 || r.capacity == 0 || r.statistics.unique_keys > r.capacity) {
    return absl::StrCat("the index holds ", r.statistics.unique_keys, " keys (",
                        r.statistics.overflow_rows, " overflowed) in ", r.capacity, " slots");
  }
  return "";
}

}  // namespace gpujoin::loadtest
