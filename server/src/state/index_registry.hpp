// The handle registry: index name -> the live index version. Readers take a
// std::shared_ptr<const IndexVersion> and keep it for the whole batch, so a
// rebuild (which installs a new version atomically) or a drop never changes or
// frees what an in-flight batch is reading. A Mutate batch changes a version in
// place (ops/mutate.cpp): readers hold its latch shared while they read it
// (IndexReadLock), the mutation holds it exclusively while it changes it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gpujoin/engine/hash_index.hpp"
#include "gpujoin/engine/partition.hpp"
#include "state/index_latch.hpp"
#include "state/memory_budget.hpp"

namespace gpujoin::server {

/// What Mutate changes of a version (under its latch, exclusively).
struct MutationState {
  /// Batches applied since the build or load (IndexInfo.mutation_sequence).
  uint64_t sequence = 0;
  /// Row-ID indexes: the value the next upserted row gets.
  uint64_t next_row_id = 0;
  /// Times a batch made the table grow.
  uint64_t rehashes = 0;
};

/// One successful build (or load) of a name. Its name, version and spec are
/// fixed once installed; `index`, `reservation` and `mutation` change only
/// under `latch` held exclusively, by Mutate batches, which `mutate_mu`
/// serializes.
struct IndexVersion {
  std::string name;
  uint64_t version = 0;  ///< assigned by IndexRegistry::Install
  mutable std::unique_ptr<engine::HashIndex> index;
  /// Which write-ahead log records (MutationLogs) apply to this version: a
  /// random number drawn by each build and LoadIndex, kept by the snapshot
  /// and by a start-up load (version numbers restart with the process).
  uint64_t base_id = 0;
  /// IndexSpec.max_load_factor (0.8 unless set).
  double max_load_factor = 0.8;
  mutable MutationState mutation;
  mutable IndexLatch latch;
  mutable std::mutex mutate_mu;
  uint32_t first_value = 0;
  bool explicit_values = false;
  /// The explicit values are row IDs a router gave (IndexSpec.router_values):
  /// described as the router's caller built the index.
  int router_values = 0;
  bool batch_mode = false;
  /// IndexSpec.placement is replicated: a shard holds every row of the
  /// index, not only its keys' (docs/operations.md "Replicated indexes").
  bool replicated = false;
  double build_seconds = 0;
  int64_t built_unix_millis = 0;
  /// The payload column names (IndexSpec.payload), aligned with index->payload().
  std::vector<std::string> payload_names;
  /// A key-schema index (key type kColumns): its key column names
  /// (IndexSpec.key_columns), aligned with index->spec().key_columns (their
  /// types). Empty for a key word.
  std::vector<std::string> key_column_names;
  /// The budget share of the table; released when the version is destroyed.
  mutable MemoryBudget::Reservation reservation;
};

/// A fresh IndexVersion::base_id (random, never 0).
uint64_t NewBaseId();

/// The keys a shard checks it owns for `v`: every key of a replicated index.
engine::ShardIdentity KeysOwned(const IndexVersion& v, const engine::ShardIdentity& shard);

/// What a shard refuses (FAILED_PRECONDITION starting engine::kPlacementRefusal)
/// of a router's batch on `v`: `replica` (the batch was sent whole to this
/// replica) for a partitioned index, and, for a mutation (`changes`), a batch
/// that is not `replica` on a replicated index (its replicas would diverge).
/// Nothing for a server that is not a shard.
absl::Status CheckPlacement(const IndexVersion& v, const engine::ShardIdentity& shard,
                            bool replica, bool changes);

/// A query's hold on a version: `latch` shared for its lifetime, so no
/// mutation batch changes the index meanwhile; `sequence` is the mutation
/// sequence the query sees.
class IndexReadLock {
 public:
  explicit IndexReadLock(const IndexVersion& v) : lock_(v.latch), sequence_(v.mutation.sequence) {}
  uint64_t sequence() const { return sequence_; }

 private:
  std::shared_lock<IndexLatch> lock_;
  uint64_t sequence_;
};

class IndexRegistry {
 public:
  /// The live version of `name`, or nullptr.
  std::shared_ptr<const IndexVersion> Get(const std::string& name) const;

  /// All live versions, ordered by name.
  std::vector<std::shared_ptr<const IndexVersion>> List() const;

  /// Live index count.
  size_t size() const;

  /// Whether `name` is live (for a create-only build's early check).
  bool Contains(const std::string& name) const;

  /// Assigns the next version number of the name (one more than any earlier build
  /// of it, including dropped ones, and at least `min_version`) and makes
  /// `version` live, atomically replacing the previous version, which is
  /// returned (nullptr when there was none). When `replace` is false and the
  /// name is live: ALREADY_EXISTS and nothing changes.
  /// The largest `min_version` a build or load may ask for (2^62): versions
  /// stay far from wrapping.
  static constexpr uint64_t kMaxMinVersion = uint64_t{1} << 62;

  absl::StatusOr<std::shared_ptr<const IndexVersion>> Install(std::shared_ptr<IndexVersion> version,
                                                              bool replace,
                                                              uint64_t min_version = 0);

  /// Removes `name` and returns its version (NOT_FOUND when not live).
  absl::StatusOr<std::shared_ptr<const IndexVersion>> Remove(const std::string& name);

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<const IndexVersion>> live_;
  std::map<std::string, uint64_t> last_version_;
};

}  // namespace gpujoin::server
