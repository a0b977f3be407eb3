// Server identity and memory as GetServerInfo reports them.
#pragma once

#include <cstdint>
#include <string>

namespace gpujoin::client {

/// Server identity and memory (GetServerInfoResponse).
struct ServerInfo {
  std::string version;
  std::string backend;  ///< "cuda" or "cpu"
  std::string device_name;
  uint64_t device_memory_total_bytes = 0;
  uint64_t device_memory_used_bytes = 0;  ///< by gpujoin's indexes
  uint64_t device_memory_budget_bytes = 0;
  uint64_t max_message_bytes = 0;
  uint32_t max_inflight_batches_per_stream = 0;
  uint32_t max_inflight_batches = 0;
  uint32_t index_count = 0;
  bool serving = false;
  /// --max-result-bytes: host bytes one Lookup batch or Join request's results may take.
  uint64_t max_result_bytes = 0;
  /// --max-pending-response-bytes: stream responses all clients have yet to
  /// read may hold this much; pending_response_bytes is what they hold now.
  uint64_t max_pending_response_bytes = 0;
  uint64_t pending_response_bytes = 0;
  /// --max-mutation-rows: upsert plus delete rows one Mutate batch may carry (0 = not reported).
  uint64_t max_mutation_rows = 0;
  /// --wal-sync: "always", "batch-ms:N" or "off"; "" without --data-dir.
  std::string wal_sync;
};

}  // namespace gpujoin::client
