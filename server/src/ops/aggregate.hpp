// The Aggregate stream's per-stream state: the operation, group count and value
// type fixed by its first admitted batch, and the running accumulation of the
// batches' partial results, merged in stream order. The per-batch work is
// Operations::Aggregate (aggregate.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "gpujoin/engine/aggregation.hpp"
#include "gpujoin/v1/gpujoin.pb.h"
#include "wire/aggregate_wire.hpp"

namespace gpujoin::server {

/// Per-stream state of an Aggregate call: the operation and group count fixed by
/// the first admitted batch, and the running accumulation over all batches.
class AggregateStream {
 public:
  /// Cheap checks run in arrival order: op set, groups in range and equal to the
  /// stream's, the value type (float32 `values` or typed_values' type) equal to
  /// the stream's. The first admitted batch fixes op, groups and value type.
  /// `max_groups`: --max-aggregate-groups (RESOURCE_EXHAUSTED above it).
  absl::Status Admit(const v1::AggregateRequest& request, uint64_t max_message_bytes,
                     uint64_t max_groups);
  /// Merges a successful batch's partial (in stream order) and writes the totals
  /// into `response` (dropping per-batch results when accumulate_only).
  void Complete(const v1::AggregateRequest& request, v1::AggregateResponse* response,
                AggregatePartial& partial);

 private:
  std::optional<engine::AggregationAccumulator> accumulator_;
};

}  // namespace gpujoin::server
