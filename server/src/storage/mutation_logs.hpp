// The write-ahead logs of the live indexes (--data-dir; docs/operations.md
// "Mutations and the write-ahead log"): one MutationLog per index name,
// `<name>.gjwal`, opened on the index's first Mutate batch or at start.
//
// What a restart serves is the index's snapshot and then the log's records
// of the same base (IndexVersion::base_id) past the snapshot's mutation
// sequence, in order. So:
//  - a batch is appended (before its table is swapped in) only once the
//    snapshot of its version's base is durable (Operations::Mutate waits), and
//    acknowledged once Sync says it is durable;
//  - records of another base are obsolete once the live version's base is
//    durable, and records of the live base up to a written snapshot's sequence
//    are too: compaction drops both. It runs on the index's next batch, in the
//    index's mutation lane (Rewrite is serialized with Append), after the
//    snapshot store wrote a snapshot (SnapshotWritten); a log past
//    --wal-compact-bytes asks for that snapshot (Append's `rewrite_snapshot`).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpujoin/server/config.hpp"
#include "gpujoin/v1/gpujoin.pb.h"
#include "prometheus/registry.h"
#include "state/index_registry.hpp"
#include "storage/mutation_log.hpp"
#include "storage/mutation_log_metrics.hpp"

namespace gpujoin::server {

class MutationLogs {
 public:
  struct Options {
    std::string data_dir;
    WalSyncPolicy policy;
    /// The largest record a log may hold (--max-message-bytes: a record is one
    /// request).
    uint64_t max_record_bytes = 0;
    /// --wal-compact-bytes.
    uint64_t compact_bytes = 0;
  };
  MutationLogs(Options options, prometheus::Registry& registry);

  /// Appends the batch `request` that makes `v`'s mutation sequence
  /// `sequence` (v's mutate_mu held; v's base durable). Opens the log first
  /// and applies a compaction a written snapshot made possible. Returns the
  /// ticket for Sync. `rewrite_snapshot` is set when the log passed
  /// --wal-compact-bytes and no snapshot was asked for since its last
  /// compaction (or a compact_bytes of growth ago). Errors name the file (MutationLog's); nothing
  /// is appended.
  absl::StatusOr<uint64_t> Append(const IndexVersion& v, uint64_t sequence,
                                  const v1::MutateRequest& request, bool* rewrite_snapshot);
  /// MutationLog::Sync of `name`'s log.
  absl::StatusOr<bool> Sync(const std::string& name, uint64_t ticket);

  /// The snapshot store wrote `v` holding mutation sequence `sequence`: the
  /// next Append of the name compacts its log.
  void SnapshotWritten(const IndexVersion& v, uint64_t sequence);

  /// Start-up: replays the records of `v`'s log of v's base past v's mutation
  /// sequence through `apply` (which applies one batch, advancing the
  /// sequence by one), then opens the log for appending. OK when there is no
  /// log. A damaged log (DATA_LOSS naming the file, the offset and the
  /// sequence), a record that does not parse or fails to apply: that error;
  /// the file is left as it is.
  absl::Status Replay(const IndexVersion& v,
                      const std::function<absl::Status(const v1::MutateRequest&)>& apply);

  /// `name` was dropped: deletes its log.
  void Forget(const std::string& name);

  MutationLogMetrics& metrics() { return metrics_; }
  const WalSyncPolicy& policy() const { return options_.policy; }

 private:
  struct Entry {
    std::unique_ptr<MutationLog> log;
    // The newest snapshot written: its base and mutation sequence; `compact`
    // when the log has not been compacted since.
    uint64_t written_base = 0;
    uint64_t written_sequence = 0;
    bool compact = false;
    // The log's bytes when a snapshot was last asked for (0: none since the
    // last compaction); a write that failed is asked for again once the log
    // has grown by another --wal-compact-bytes.
    uint64_t asked_at_bytes = 0;
  };
  std::string PathOf(const std::string& name) const;
  /// The name's entry, created empty on first use.
  std::shared_ptr<Entry> EntryOf(const std::string& name);

  Options options_;
  MutationLogMetrics metrics_;
  std::mutex mu_;  // guards entries_ and each entry's snapshot fields
  std::map<std::string, std::shared_ptr<Entry>> entries_;
};

}  // namespace gpujoin::server
