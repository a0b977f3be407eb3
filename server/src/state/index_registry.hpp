// The handle registry: index name -> the live, immutable index version. Readers
// take a std::shared_ptr<const IndexVersion> and keep it for the whole batch, so a
// rebuild (which installs a new version atomically) or a drop never changes or
// frees what an in-flight batch is reading.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gpujoin/engine/hash_index.hpp"
#include "state/memory_budget.hpp"

namespace gpujoin::server {

/// One successful build of a name. Immutable once installed.
struct IndexVersion {
  std::string name;
  uint64_t version = 0;  ///< assigned by IndexRegistry::Install
  std::unique_ptr<engine::HashIndex> index;
  uint32_t first_value = 0;
  bool explicit_values = false;
  bool batch_mode = false;
  double build_seconds = 0;
  int64_t built_unix_millis = 0;
  /// The payload column names (IndexSpec.payload), aligned with index->payload().
  std::vector<std::string> payload_names;
  /// A key-schema index (key type kColumns): its key column names
  /// (IndexSpec.key_columns), aligned with index->spec().key_columns (their
  /// types). Empty for a key word.
  std::vector<std::string> key_column_names;
  /// The budget share of the table; released when the version is destroyed.
  MemoryBudget::Reservation reservation;
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
  /// of it, including dropped ones) and makes `version` live, atomically replacing
  /// the previous version, which is returned (nullptr when there was none). When
  /// `replace` is false and the name is live: ALREADY_EXISTS and nothing changes.
  absl::StatusOr<std::shared_ptr<const IndexVersion>> Install(std::shared_ptr<IndexVersion> version,
                                                              bool replace);

  /// Removes `name` and returns its version (NOT_FOUND when not live).
  absl::StatusOr<std::shared_ptr<const IndexVersion>> Remove(const std::string& name);

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<const IndexVersion>> live_;
  std::map<std::string, uint64_t> last_version_;
};

}  // namespace gpujoin::server
