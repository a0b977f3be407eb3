#include "state/index_registry.hpp"

#include <algorithm>
#include <chrono>
#include <random>

#include "absl/strings/str_cat.h"

namespace gpujoin::server {

engine::ShardIdentity KeysOwned(const IndexVersion& v, const engine::ShardIdentity& shard) {
  return v.replicated ? engine::ShardIdentity{} : shard;
}

absl::Status CheckPlacement(const IndexVersion& v, const engine::ShardIdentity& shard,
                            bool replica, bool changes) {
  if (!shard.sharded()) return absl::OkStatus();
  if (replica && !v.replicated) {
    return absl::FailedPreconditionError(absl::StrCat(
        engine::kPlacementRefusal, "index \"", v.name, "\" version ", v.version,
        " is partitioned over the shards, not replicated: shard ", shard.index, " of ", shard.count,
        " holds only its keys, so the batch must be split by key"));
  }
  if (changes && v.replicated && !replica) {
    return absl::FailedPreconditionError(absl::StrCat(
        engine::kPlacementRefusal, "index \"", v.name, "\" version ", v.version,
        " is replicated: every replica must apply every batch, so mutate it through "
        "gpujoin-router (or gpujoind --devices), not one shard"));
  }
  return absl::OkStatus();
}

uint64_t NewBaseId() {
  static std::mutex mu;
  static std::mt19937_64 rng = [] {
    std::random_device device;
    std::seed_seq seed{device(), device(), device(), device(),
                       uint32_t(std::chrono::steady_clock::now().time_since_epoch().count())};
    return std::mt19937_64(seed);
  }();
  std::lock_guard<std::mutex> lock(mu);
  uint64_t id = 0;
  while (id == 0) id = rng();
  return id;
}

std::shared_ptr<const IndexVersion> IndexRegistry::Get(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(name);
  return it == live_.end() ? nullptr : it->second;
}

std::vector<std::shared_ptr<const IndexVersion>> IndexRegistry::List() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::shared_ptr<const IndexVersion>> out;
  out.reserve(live_.size());
  for (const auto& [name, v] : live_) out.push_back(v);
  return out;
}

size_t IndexRegistry::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return live_.size();
}

bool IndexRegistry::Contains(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  return live_.count(name) != 0;
}

absl::StatusOr<std::shared_ptr<const IndexVersion>> IndexRegistry::Install(
    std::shared_ptr<IndexVersion> version, bool replace, uint64_t min_version) {
  std::shared_ptr<const IndexVersion> previous;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(version->name);
    if (it != live_.end() && !replace) {
      return absl::AlreadyExistsError(absl::StrCat(
          "index \"", version->name, "\" already exists (version ", it->second->version,
          "); set spec.replace to rebuild it"));
    }
    uint64_t& last = last_version_[version->name];
    last = std::max(last + 1, std::min(min_version, kMaxMinVersion));
    version->version = last;
    if (it != live_.end()) {
      previous = std::move(it->second);
      it->second = std::move(version);
    } else {
      std::string key = version->name;
      live_.emplace(std::move(key), std::move(version));
    }
  }
  // `previous` is released by the caller (outside the lock): freeing a table may be slow.
  return previous;
}

absl::StatusOr<std::shared_ptr<const IndexVersion>> IndexRegistry::Remove(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(name);
  if (it == live_.end()) {
    return absl::NotFoundError(absl::StrCat("index \"", name, "\" not found"));
  }
  auto v = std::move(it->second);
  live_.erase(it);
  return v;
}

}  // namespace gpujoin::server
