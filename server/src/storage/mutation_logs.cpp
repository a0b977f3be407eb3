#include "storage/mutation_logs.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "gpujoin/common/status_macros.hpp"
#include "gpujoin/server/logging.hpp"
#include "storage/mutation_log_format.hpp"

namespace gpujoin::server {

MutationLogs::MutationLogs(Options options, prometheus::Registry& registry)
    : options_(std::move(options)), metrics_(registry) {}

std::string MutationLogs::PathOf(const std::string& name) const {
  return absl::StrCat(options_.data_dir, "/", name, std::string(kMutationLogSuffix));
}

std::shared_ptr<MutationLogs::Entry> MutationLogs::EntryOf(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  std::shared_ptr<Entry>& e = entries_[name];
  if (e == nullptr) e = std::make_shared<Entry>();
  return e;
}

absl::StatusOr<uint64_t> MutationLogs::Append(const IndexVersion& v, uint64_t sequence,
                                              const v1::MutateRequest& request,
                                              bool* rewrite_snapshot) {
  const std::shared_ptr<Entry> e = EntryOf(v.name);
  // e->log is touched only in the name's mutation lane (the caller's).
  if (e->log == nullptr) {
    GPUJOIN_ASSIGN_OR_RETURN(e->log,
                             MutationLog::Open(PathOf(v.name), options_.policy, &metrics_, v.name));
  }
  bool compact = false;
  uint64_t written_base = 0, written_sequence = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    compact = e->compact;
    written_base = e->written_base;
    written_sequence = e->written_sequence;
  }
  if (compact) {
    // v's base is durable: records of other bases are obsolete, and so are
    // those a written snapshot of this base holds.
    const uint64_t base = v.base_id;
    const uint64_t covered = written_base == base ? written_sequence : 0;
    const absl::Status s = e->log->Rewrite(
        [&](const LogRecord& r) { return r.base_version == base && r.sequence > covered; });
    if (s.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      // A snapshot written meanwhile asks for another compaction.
      if (e->written_base == written_base && e->written_sequence == written_sequence) {
        e->compact = false;
      }
      e->asked_at_bytes = 0;
    } else {
      // The log is as it was (or failed, which the append below reports).
      LogWarning(absl::StrCat("compacting the write-ahead log of index \"", v.name,
                              "\" failed; it keeps growing until the next try: ", s.message()));
    }
  }
  LogRecord record;
  record.base_version = v.base_id;
  record.sequence = sequence;
  record.payload = request.SerializeAsString();
  GPUJOIN_ASSIGN_OR_RETURN(const uint64_t ticket, e->log->Append(record));
  const uint64_t bytes = e->log->bytes();
  if (bytes > options_.compact_bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    if (e->asked_at_bytes == 0 || bytes >= e->asked_at_bytes + options_.compact_bytes) {
      e->asked_at_bytes = bytes;
      *rewrite_snapshot = true;
    }
  }
  return ticket;
}

absl::StatusOr<bool> MutationLogs::Sync(const std::string& name, uint64_t ticket) {
  const std::shared_ptr<Entry> e = EntryOf(name);
  // Appended by this batch in its lane, so the log exists; Forget may have
  // removed it since (its Sync then fails FAILED_PRECONDITION).
  if (e->log == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("the write-ahead log of index \"", name, "\" is gone (dropped)"));
  }
  return e->log->Sync(ticket);
}

void MutationLogs::SnapshotWritten(const IndexVersion& v, uint64_t sequence) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = entries_.find(v.name);
  if (it == entries_.end()) return;  // no log: nothing to compact
  Entry& e = *it->second;
  e.written_base = v.base_id;
  e.written_sequence = sequence;
  e.compact = true;
}

absl::Status MutationLogs::Replay(
    const IndexVersion& v, const std::function<absl::Status(const v1::MutateRequest&)>& apply) {
  const std::string path = PathOf(v.name);
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return absl::OkStatus();  // never mutated
  const std::string file = absl::StrCat(v.name, std::string(kMutationLogSuffix));
  absl::StatusOr<LogContents> contents = ReadMutationLog(path, options_.max_record_bytes);
  if (!contents.ok()) {
    metrics_.Failed(MutationLogFailureReason(contents.status()));
    return contents.status();
  }
  uint64_t replayed = 0;
  for (const LogRecord& r : contents->records) {
    if (r.base_version != v.base_id || r.sequence <= v.mutation.sequence) continue;
    if (r.sequence != v.mutation.sequence + 1) {
      return absl::DataLossError(
          absl::StrCat("write-ahead log \"", file, "\": record of mutation sequence ", r.sequence,
                       " follows sequence ", v.mutation.sequence,
                       " of the snapshot and the records before it; ", "a record is missing"));
    }
    v1::MutateRequest request;
    if (!request.ParseFromString(r.payload)) {
      return absl::DataLossError(absl::StrCat("write-ahead log \"", file,
                                              "\": the record of mutation sequence ", r.sequence,
                                              " does not parse as a MutateRequest"));
    }
    const absl::Status s = apply(request);
    if (!s.ok()) {
      return absl::Status(s.code(), absl::StrCat("write-ahead log \"", file,
                                                 "\": replaying the record of mutation sequence ",
                                                 r.sequence, " failed: ", s.message()));
    }
    ++replayed;
  }
  metrics_.Replayed(replayed);
  const std::shared_ptr<Entry> e = EntryOf(v.name);
  // Opening truncates a torn tail (counted) and continues after the last record.
  GPUJOIN_ASSIGN_OR_RETURN(e->log, MutationLog::Open(path, options_.policy, &metrics_, v.name));
  if (replayed != 0 || contents->torn_tail_records != 0) {
    LogInfo(absl::StrCat("index \"", v.name, "\": replayed ", replayed,
                         " write-ahead log records to mutation sequence ", v.mutation.sequence,
                         contents->torn_tail_records != 0
                             ? absl::StrCat("; dropped a torn tail of ", contents->torn_tail_bytes,
                                            " bytes (a batch never acknowledged)")
                             : std::string()));
  }
  return absl::OkStatus();
}

void MutationLogs::Forget(const std::string& name) {
  std::shared_ptr<Entry> e;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto it = entries_.find(name);
    if (it != entries_.end()) {
      e = it->second;
      entries_.erase(it);
    }
  }
  if (e != nullptr && e->log != nullptr) {
    const absl::Status s = e->log->Remove();
    if (!s.ok())
      LogWarning(absl::StrCat("removing the write-ahead log of dropped index \"", name,
                              "\": ", s.message()));
    return;
  }
  // Never opened by this process (a log left by an earlier one).
  const std::string path = PathOf(name);
  if (::unlink(path.c_str()) == 0) {
    LogInfo(absl::StrCat("deleted the write-ahead log of dropped index \"", name, "\""));
  }
}

}  // namespace gpujoin::server
