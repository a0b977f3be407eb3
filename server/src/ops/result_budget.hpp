// The host bytes of one Join request's results against --max-result-bytes:
// every batch's fixed objects, its found and probes, the pairs allocated with
// their fixed-width gathered values, and the share of what is left that each
// string output may fill. (The per-message limits, Operations::ResponseLimit and
// CheckResponseSize, and a lookup's, Operations::CheckLookup, are defined beside
// it in result_budget.cpp.)
#pragma once

#include <cstdint>
#include <span>

#include "absl/status/status.h"
#include "ops/gather.hpp"

namespace gpujoin::server {

/// Host bytes charged to --max-result-bytes for each batch of a join, whatever
/// its rows (its buffers, engine batch and response result; static_assert'ed in
/// join.cpp).
inline constexpr uint64_t kJoinBatchObjectBytes = 1024;
/// Host bytes charged in addition per key column of each batch on a key-schema
/// index (its decoded view and the engine batch's copy; static_assert'ed in join.cpp).
inline constexpr uint64_t kKeyColumnObjectBytes = 512;

class JoinResultBudget {
 public:
  /// `selected`: the gathered columns (borrowed; must outlive the budget);
  /// `limit`: --max-result-bytes; `batches`: the request's left batches;
  /// `key_columns`: the index's key columns (0 for a key word).
  JoinResultBudget(std::span<const SelectedColumn> selected, uint64_t limit, uint64_t batches,
                   uint64_t key_columns = 0);

  /// Host bytes of `n` pairs with their fixed-width gathered values.
  uint64_t PairBytes(uint64_t n) const;
  /// RESOURCE_EXHAUSTED when the batches' fixed objects alone exceed the limit
  /// (checked before any per-batch buffer is made).
  absl::Status CheckBatchObjects() const;
  /// Charges one batch: its objects, `head` bytes of found and probes, and
  /// `allocated` pairs (with one Column per selected column unless `count_only`).
  void AddBatch(bool count_only, uint64_t head, uint64_t allocated);
  /// RESOURCE_EXHAUSTED naming the bytes and the limit when the batches charged
  /// so far exceed it.
  absl::Status Check() const;
  /// Pairs beyond `allocated` (up to `wanted`), as far as what is left allows:
  /// charges them and returns the most pairs that fit (>= allocated).
  uint64_t Grow(uint64_t allocated, uint64_t wanted);
  /// The bytes each of `string_outputs` string outputs may fill: an equal share
  /// of what is left (0 when there are none).
  uint64_t StringShare(uint64_t string_outputs) const;

 private:
  absl::Status Refuse(uint64_t bytes) const;

  std::span<const SelectedColumn> selected_;
  uint64_t limit_;
  uint64_t batches_;
  uint64_t batch_objects_;   // host objects of one batch, whatever its rows
  uint64_t column_objects_;  // one Column per selected column, with its name
  uint64_t bytes_ = 0;       // charged so far
};

}  // namespace gpujoin::server
