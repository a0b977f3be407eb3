#include "router/placement.hpp"

#include "absl/strings/match.h"
#include "gpujoin/engine/partition.hpp"
#include "router/shard_calls.hpp"

namespace gpujoin::server::router {

std::optional<Placements::Entry> Placements::Get(const std::string& index) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(index);
  if (it == entries_.end()) return std::nullopt;
  return it->second;
}

void Placements::Put(const std::string& index, Entry entry) {
  std::lock_guard<std::mutex> lock(mu_);
  // Names of indexes that do not exist are remembered too: a bound keeps
  // callers from growing the map without end (forgetting costs a describe).
  if (entries_.size() >= kMaxEntries && !entries_.contains(index)) entries_.clear();
  entries_[index] = entry;
}

void Placements::Forget(const std::string& index) {
  std::lock_guard<std::mutex> lock(mu_);
  entries_.erase(index);
}

bool IsReplicated(const ShardCalls& calls, grpc::ServerContext* ctx, const std::string& index) {
  if (auto entry = calls.placements().Get(index)) return entry->replicated;
  v1::DescribeIndexRequest request;
  request.set_name(index);
  v1::DescribeIndexResponse answer;
  auto context = calls.Context(ctx, /*unary=*/true);
  const auto start = Clock::now();
  const uint32_t s = calls.FirstServing();
  const grpc::Status st = calls.shard(s).stub->DescribeIndex(context.get(), request, &answer);
  calls.Record(s, "DescribeIndex", start, st.ok());
  if (st.error_code() == grpc::StatusCode::NOT_FOUND) {
    // Partitioned until it exists: the first answer on a version forgets this.
    calls.placements().Put(index, {0, false});
    return false;
  }
  if (!st.ok()) return false;
  const bool replicated = answer.index().placement() == v1::INDEX_PLACEMENT_REPLICATED;
  calls.placements().Put(index, {answer.index().version(), replicated});
  return replicated;
}

bool IsPlacementRefusal(const v1::BatchError& error) {
  return error.code() == static_cast<int>(grpc::StatusCode::FAILED_PRECONDITION) &&
         absl::StartsWith(error.message(), engine::kPlacementRefusal);
}

}  // namespace gpujoin::server::router
