// The Query RPC's per-stream state and answers (ops/query.cpp): the plan
// compiled from the stream's first message, its engine run, and what each
// message's answer holds until it is written.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "gpujoin/engine/plan.hpp"
#include "gpujoin/v1/gpujoin.pb.h"
#include "plan/plan_compile.hpp"

namespace gpujoin::server {

/// One Query stream's plan and state. Its messages are processed one at a
/// time, in stream order (QueryTraits::kSerial).
struct QueryStream {
  /// Set by the first message: the compiled plan and its run, or the plan's
  /// error, which answers every later message too.
  bool started = false;
  std::optional<CompiledPlan> compiled;
  std::unique_ptr<engine::PlanRun> run;
  absl::Status plan_error;
  /// QueryRequest.replicated of the first message: indexes that must be replicated.
  std::set<std::string> replicated;
  /// The stream's last batch_id (the end-of-stream answer's is one more).
  uint64_t last_batch_id = 0;
  /// The plan aggregates: the end of the stream is answered (read by the
  /// reactor thread, written by the executor before that).
  std::atomic<bool> answers_end{false};
};

/// One message's answer: step statistics and flags in `message`, result rows
/// in `table` (named `names`), sent as `parts` (row ranges) one message each.
struct QueryAnswer {
  v1::QueryResponse message;
  engine::PlanTable table;
  std::vector<std::string> names;
  bool has_rows = false;
  std::vector<std::pair<uint64_t, uint64_t>> parts;
  size_t next = 0;
};

}  // namespace gpujoin::server
