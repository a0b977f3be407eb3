#include "router/merge.hpp"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"

namespace gpujoin::server::router {

// Sums a, b into a (statistics), keeping the maxima of max fields.
void AddBuildStatistics(v1::BuildStatistics* a, const v1::BuildStatistics& b) {
  a->set_unique_keys(a->unique_keys() + b.unique_keys());
  a->set_duplicate_rows(a->duplicate_rows() + b.duplicate_rows());
  a->set_overflow_rows(a->overflow_rows() + b.overflow_rows());
  a->set_invalid_rows(a->invalid_rows() + b.invalid_rows());
  a->set_total_probes(a->total_probes() + b.total_probes());
  a->set_max_probes(std::max(a->max_probes(), b.max_probes()));
  a->set_max_group_rows(std::max(a->max_group_rows(), b.max_group_rows()));
}

void AddQueryStatistics(v1::QueryStatistics* a, const v1::QueryStatistics& b) {
  a->set_found(a->found() + b.found());
  a->set_missing(a->missing() + b.missing());
  a->set_total_probes(a->total_probes() + b.total_probes());
  a->set_max_probes(std::max(a->max_probes(), b.max_probes()));
}

absl::StatusOr<v1::IndexInfo> MergeIndexInfos(const std::vector<v1::IndexInfo>& infos,
                                              const std::vector<std::string>& shard_names) {
  v1::IndexInfo out = infos.at(0);
  const bool replicated = out.placement() == v1::INDEX_PLACEMENT_REPLICATED;
  for (size_t s = 1; s < infos.size(); ++s) {
    const v1::IndexInfo& i = infos[s];
    if (i.version() != out.version() || i.placement() != out.placement()) {
      return absl::AbortedError(absl::StrCat(
          "index \"", out.name(), "\": ", shard_names[0], " serves version ", out.version(), " (",
          v1::IndexPlacement_Name(out.placement()), ") but ", shard_names[s], " serves version ",
          i.version(), " (", v1::IndexPlacement_Name(i.placement()),
          ") (an index is built through the router on every shard; rebuild it there)"));
    }
    if (replicated) {
      // Every replica holds the whole index: one describes it; memory adds up.
      out.set_device_bytes(out.device_bytes() + i.device_bytes());
      out.set_payload_bytes(out.payload_bytes() + i.payload_bytes());
      out.set_durable_version(std::min(out.durable_version(), i.durable_version()));
      for (int c = 0; c < out.payload_size() && c < i.payload_size(); ++c) {
        v1::PayloadColumnInfo* p = out.mutable_payload(c);
        p->set_bytes(p->bytes() + i.payload(c).bytes());
        p->set_dictionary_bytes(p->dictionary_bytes() + i.payload(c).dictionary_bytes());
      }
      continue;
    }
    out.set_capacity(out.capacity() + i.capacity());
    out.set_rows(out.rows() + i.rows());
    AddBuildStatistics(out.mutable_statistics(), i.statistics());
    out.set_device_bytes(out.device_bytes() + i.device_bytes());
    out.set_build_seconds(std::max(out.build_seconds(), i.build_seconds()));
    out.set_built_unix_millis(std::max(out.built_unix_millis(), i.built_unix_millis()));
    out.set_payload_bytes(out.payload_bytes() + i.payload_bytes());
    out.set_durable_version(std::min(out.durable_version(), i.durable_version()));
    out.set_mutation_sequence(out.mutation_sequence() + i.mutation_sequence());
    out.set_next_row_id(std::max(out.next_row_id(), i.next_row_id()));
    out.set_rehashes(out.rehashes() + i.rehashes());
    for (int c = 0; c < out.payload_size() && c < i.payload_size(); ++c) {
      v1::PayloadColumnInfo* p = out.mutable_payload(c);
      const v1::PayloadColumnInfo& q = i.payload(c);
      p->set_null_count(p->null_count() + q.null_count());
      p->set_bytes(p->bytes() + q.bytes());
      p->set_dictionary_bytes(p->dictionary_bytes() + q.dictionary_bytes());
      p->set_dictionary_values(std::max(p->dictionary_values(), q.dictionary_values()));
    }
  }
  if (replicated) return out;
  out.set_load_factor(out.capacity() == 0
                          ? 0.0
                          : double(out.statistics().unique_keys()) / double(out.capacity()));
  return out;
}

uint64_t RouterVersion(uint64_t asked) {
  const uint64_t now = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                                 std::chrono::system_clock::now().time_since_epoch())
                                                 .count());
  return std::max(asked, now);
}

grpc::Status SameVersion(const ShardCalls& calls, const std::string& index,
                         const std::vector<uint64_t>& versions) {
  for (size_t s = 1; s < versions.size(); ++s) {
    if (versions[s] != versions[0]) {
      return grpc::Status(grpc::StatusCode::ABORTED,
                          absl::StrCat("index \"", index, "\": ", calls.shard(0).Name(),
                                       " serves version ", versions[0], " but ",
                                       calls.shard(s).Name(), " serves version ", versions[s],
                                       " (rebuild it through the router)"));
    }
  }
  return grpc::Status::OK;
}

}  // namespace gpujoin::server::router
