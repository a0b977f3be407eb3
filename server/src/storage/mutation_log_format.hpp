// The write-ahead log file of one mutable index (`<name>.gjwal` under
// --data-dir; the format is documented in docs/operations.md, "Write-ahead log
// format"): a 16-byte file header, then records appended one after another.
// Each record is a 40-byte header (magic, payload length, the index's base
// version, the mutation sequence, a checksum of those fields, a checksum of the
// fields and the payload) and its payload, opaque here (the server puts a
// serialized MutateRequest there). All integers little-endian.
//
// Reading tells a torn tail from damage: a record that cannot be complete (its
// header or payload reaches past the end of the file) or that fails its
// checksums with no intact record header after it is the tail of a write that
// never finished (never acknowledged): dropped and counted, not an error. A
// damaged record with an intact record header after it is corruption in the
// middle of the log: DATA_LOSS naming the file, the offset and the sequence,
// and the file is left as it is. The header checksum is verified before a
// record's length is trusted, so a damaged length cannot make a reader
// allocate, and the caller's max_record_bytes bounds what an intact header may
// claim.
//
// This header declares the format's constants, the record type, the encoder
// and the reader; mutation_log.hpp declares the writer.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace gpujoin::server {

/// The format version this gpujoind writes and the newest it reads.
inline constexpr uint32_t kMutationLogFormatVersion = 1;
/// The file name suffix of write-ahead logs (`<index name>.gjwal`).
inline constexpr std::string_view kMutationLogSuffix = ".gjwal";
/// The first 8 bytes of every write-ahead log.
inline constexpr char kMutationLogMagic[8] = {'G', 'J', 'W', 'A', 'L', '\r', '\n', '\0'};
/// The first 4 bytes of every record ("GJWR" little-endian).
inline constexpr uint32_t kLogRecordMagic = 0x52574A47;
/// Bytes of the file header: magic, format version, reserved (0).
inline constexpr uint64_t kLogFileHeaderBytes = 16;
/// Bytes of a record's header, before its payload.
inline constexpr uint64_t kLogRecordHeaderBytes = 40;
/// The largest payload a record can hold (its length is a uint32).
inline constexpr uint64_t kMaxLogPayloadBytes = 0xffffffffull;

/// One mutation batch as the log keeps it.
struct LogRecord {
  /// The build version of the index the record applies to.
  uint64_t base_version = 0;
  /// The mutation sequence of the batch: increasing within one base version.
  uint64_t sequence = 0;
  /// The batch itself, opaque to the log.
  std::string payload;
  bool operator==(const LogRecord&) const = default;
};

/// What a read of a log found.
struct LogContents {
  /// The valid records, in file order.
  std::vector<LogRecord> records;
  /// Where the valid part ends: the file header and the valid records' bytes.
  uint64_t valid_bytes = 0;
  /// Bytes after the valid part that belong to a write that never finished.
  uint64_t torn_tail_bytes = 0;
  /// 1 when there was such a torn tail (one unfinished append), else 0.
  uint64_t torn_tail_records = 0;
};

/// The file header of a new log (kLogFileHeaderBytes bytes).
std::string EncodeLogFileHeader();

/// Appends the bytes of `record` (header and payload) to `out`. The payload
/// must be at most kMaxLogPayloadBytes (the writer checks it).
void EncodeLogRecord(const LogRecord& record, std::string& out);

/// Reads the write-ahead log at `path` (its messages name only the file name,
/// never the directory). Never follows a symbolic link or blocks on a FIFO.
/// Errors: NOT_FOUND (no such file), FAILED_PRECONDITION (not a regular file,
/// or a newer format version, naming both), DATA_LOSS (a bad file header;
/// a damaged record with an intact one after it, naming the offset and the
/// record's sequence; sequences not increasing within a base version; an
/// intact record declaring a payload of more than `max_record_bytes`, naming
/// the limit), INTERNAL (an I/O error). A torn tail is dropped and counted in
/// the result, not an error: ReadMutationLog leaves the file as it is (the
/// writer's Open truncates it).
absl::StatusOr<LogContents> ReadMutationLog(const std::string& path, uint64_t max_record_bytes);

namespace detail {

/// What a scan of a log found, besides the records it visited.
struct LogScan {
  uint64_t valid_bytes = 0;
  uint64_t torn_tail_bytes = 0;
  uint64_t torn_tail_records = 0;
  uint64_t records = 0;
  /// The highest sequence of each base version among the valid records.
  std::map<uint64_t, uint64_t> last_sequence;
};

/// Scans the log open at `fd` (`file_bytes` long; `file` is the name messages
/// use), calling `visit` with each valid record in order (its error ends the
/// scan). The rules and errors of ReadMutationLog.
absl::StatusOr<LogScan> ScanMutationLog(int fd, uint64_t file_bytes, const std::string& file,
                                        uint64_t max_record_bytes,
                                        const std::function<absl::Status(LogRecord&&)>& visit);

/// Whether `sequence` may follow the records of `last_sequence` (the highest
/// sequence of each base version so far): sequences increase within one base
/// version.
bool SequenceFollows(const std::map<uint64_t, uint64_t>& last_sequence, uint64_t base_version,
                     uint64_t sequence);

}  // namespace detail
}  // namespace gpujoin::server
