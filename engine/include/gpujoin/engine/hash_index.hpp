// A fixed-capacity open-addressing hash index (uint32 or uint64 keys -> uint32
// values) owned by a backend.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpujoin/engine/column.hpp"
#include "gpujoin/engine/types.hpp"

namespace gpujoin::engine {

struct PayloadDictionary;  // dictionary.hpp

enum class BackendKind { kAuto, kCpu, kCuda };

/// "auto", "cpu" or "cuda".
std::string_view BackendKindName(BackendKind kind);

// What a build keeps of rows whose key is already present
// (HashIndexSpec::duplicates; gpujoin/common/operation_kinds.hpp). kKeepAll: each
// key holds a group, the values of its rows in source-row order (docs/engine.md,
// "Multi-value indexes"); the table itself is the kLowestRow table of the same rows.
using ::gpujoin::DuplicatePolicy;
using ::gpujoin::DuplicatePolicyName;

/// Shape of a hash index, fixed when the index is created.
struct HashIndexSpec {
  /// Number of slots: a power of two, at least 1, at most 2^31.
  uint32_t capacity = 0;
  /// Most slots one row may examine (build and query). 0 means `capacity`.
  /// Must not exceed `capacity`.
  uint32_t max_probe_count = 0;
  /// The key (KeyType::kUint32 unless set). For a key word the reserved key is
  /// the all-ones word of its width; kColumns has no reserved key
  /// (key_columns.hpp). Every other part of the contract is the same for all.
  KeyType key_type = KeyType::kUint32;
  /// kLowestRow unless set.
  DuplicatePolicy duplicates = DuplicatePolicy::kLowestRow;
  /// kColumns only: the types of the key columns, 1 to kMaxKeyColumns of int32,
  /// int64, uint32, uint64, string or binary. Empty for a key word.
  std::vector<ColumnType> key_columns;

  /// The effective probe bound: max_probe_count, or capacity when it is 0.
  uint32_t probe_bound() const { return max_probe_count == 0 ? capacity : max_probe_count; }

  /// OK, or INVALID_ARGUMENT naming `capacity` / `max_probe_count` and their values.
  absl::Status Validate() const;
  // The bytes an index of this spec occupies depend on the backend:
  // Backend::IndexBytes.
};

/// Bytes a kKeepAll index keeps beside its table of `slots` slots for a build
/// of `rows` rows, on either backend (an upper bound: every row counted valid):
/// per slot the start and size of its key's group (8 bytes), per kept row its
/// value (4 bytes). 0 for kLowestRow. Payload of a kKeepAll index is stored per
/// kept row: PayloadStorageBytes(rows, shape) instead of per slot.
uint64_t GroupStorageBytes(const HashIndexSpec& spec, uint64_t slots, uint64_t rows);

/// Smallest valid capacity (a power of two) holding `expected_rows` at no more
/// than `target_load_factor` (0 < f <= 1). INVALID_ARGUMENT when it exceeds 2^31.
absl::StatusOr<uint32_t> CapacityForRows(uint64_t expected_rows, double target_load_factor);

/// Host copy of a table of key word K, for tests and diagnostics: keys[i] is
/// kEmptyKeyOf<K> for an empty slot (values[i] is then 0), values[i] is the value
/// retained for keys[i].
template <class K>
struct TableSnapshotOf {
  std::vector<K> keys;
  std::vector<uint32_t> values;
};
using TableSnapshot = TableSnapshotOf<uint32_t>;
using TableSnapshot64 = TableSnapshotOf<uint64_t>;

/// FAILED_PRECONDITION for a snapshot of key word `asked` taken of an index of
/// key type `held` (names both and the call that fits).
absl::Status SnapshotKeyTypeMismatch(KeyType held, KeyType asked);

/// A hash index created by Backend::CreateIndex.
///
/// Exact semantics shared by every backend (docs/engine.md has the full text):
///  - keys are spec().key_type words (uint32 or uint64), values uint32;
///  - a key's home slot is detail::HomeSlot(key, capacity); linear probing examines
///    slot (home + i) & (capacity - 1) for i = 0 .. bound - 1, bound =
///    spec().probe_bound() (or a query's nonzero max_probe_count);
///  - slots are kept in Robin Hood order (detail::ResidentComesFirst): every run
///    of occupied slots is sorted by home, then key, so without overflow the layout
///    depends only on the set of keys;
///  - probe count = slots examined. A build row stops at a slot holding its key
///    (duplicate) or at the first slot that is empty or whose resident comes after
///    its key (unique; the resident moves on by the same rule, and is dropped as an
///    overflow if it would pass `bound`); after `bound` slots with neither it is an
///    overflow row with probes = bound. A query row stops at its key (found), an
///    empty slot or a resident that comes after it (missing), else it is missing
///    with probes = bound. Reserved-key rows (kEmptyKeyOf<K>) and masked-out
///    batch rows examine 0 slots;
///  - the value of the lowest global source row of each key is retained (batch
///    builds: earliest chunk, then position, regardless of row_base). Its table lives in the
///    backend's
/// memory (device memory for CUDA). A build node (re)writes it; lookup and join
/// nodes read it. A built index may be read by many concurrent graphs; building
/// into an index while another graph reads it is not allowed (the service builds a
/// fresh index and swaps it in instead).
class HashIndex {
 public:
  virtual ~HashIndex() = default;
  HashIndex(const HashIndex&) = delete;
  HashIndex& operator=(const HashIndex&) = delete;

  const HashIndexSpec& spec() const { return spec_; }
  /// The key word of this index (spec().key_type).
  KeyType key_type() const { return spec_.key_type; }
  /// Statistics of the last build (all zero before the first build and after an empty one).
  const BuildStatistics& build_statistics() const { return statistics_; }
  /// True once a build node has run on this index.
  bool built() const { return built_; }
  /// Rows of the last build (sum of all chunks).
  uint64_t built_rows() const { return built_rows_; }
  /// unique_keys / capacity.
  double load_factor() const {
    return spec_.capacity == 0 ? 0.0 : double(statistics_.unique_keys) / spec_.capacity;
  }

  /// The payload columns of the last build, in the build node's order (empty
  /// before the first build and after a build without payload).
  const std::vector<PayloadColumnInfo>& payload() const { return payload_; }

  /// The dictionaries of string and binary payload columns (dictionary.hpp),
  /// in the order of the columns they code; nullptr when there are none. The
  /// index's owner attaches them after a build or a load (a build's codes
  /// columns are ordinary payload columns) and keeps them with the index's
  /// mutations; they stay when a later build replaces the payload only
  /// through the owner.
  const std::vector<PayloadDictionary>* dictionaries() const { return dictionaries_.get(); }
  std::vector<PayloadDictionary>* mutable_dictionaries() { return dictionaries_.get(); }
  void AttachDictionaries(std::shared_ptr<std::vector<PayloadDictionary>> dictionaries) {
    dictionaries_ = std::move(dictionaries);
  }
  /// The attached dictionaries themselves (to attach to an index rebuilt from this one).
  std::shared_ptr<std::vector<PayloadDictionary>> shared_dictionaries() const {
    return dictionaries_;
  }
  /// The dictionary coding payload column `column` that plans may read (not
  /// retired), or nullptr.
  const PayloadDictionary* LiveDictionaryOf(uint32_t column) const;
  /// Host bytes the dictionaries' values hold (their codes columns are
  /// payload, in memory_bytes()).
  uint64_t dictionary_bytes() const;
  /// Everything the index holds: memory_bytes() and dictionary_bytes() (what
  /// the service's memory budget charges it).
  uint64_t held_bytes() const { return memory_bytes() + dictionary_bytes(); }

  /// Which backend owns the table.
  virtual BackendKind backend() const = 0;
  /// Bytes held by this index in its backend's memory (table and payload).
  virtual uint64_t memory_bytes() const = 0;
  /// Copies the table of a uint32 index to the host (synchronous; not for
  /// request paths). FAILED_PRECONDITION for a uint64 index (use Snapshot64).
  virtual absl::StatusOr<TableSnapshot> Snapshot() const = 0;
  /// Copies the table of a uint64 index to the host (synchronous; not for
  /// request paths). FAILED_PRECONDITION for a uint32 index (use Snapshot).
  virtual absl::StatusOr<TableSnapshot64> Snapshot64() const = 0;
  /// Snapshot() or Snapshot64() by key word.
  template <class K>
  absl::StatusOr<TableSnapshotOf<K>> SnapshotAs() const {
    static_assert(KeyWord<K>);
    if constexpr (std::is_same_v<K, uint32_t>) {
      return Snapshot();
    } else {
      return Snapshot64();
    }
  }

  /// Called by backends when a build finishes.
  void RecordBuild(const BuildStatistics& statistics, uint64_t rows,
                   std::vector<PayloadColumnInfo> payload = {}) {
    statistics_ = statistics;
    built_rows_ = rows;
    built_ = true;
    payload_ = std::move(payload);
  }

 protected:
  explicit HashIndex(const HashIndexSpec& spec) : spec_(spec) {}

 private:
  HashIndexSpec spec_;
  BuildStatistics statistics_;
  uint64_t built_rows_ = 0;
  bool built_ = false;
  std::vector<PayloadColumnInfo> payload_;
  std::shared_ptr<std::vector<PayloadDictionary>> dictionaries_;
};

}  // namespace gpujoin::engine
