// The write-ahead log format: encoding a record, and reading a log back record
// by record through a buffered cursor, telling a torn tail from corruption.
#include "storage/mutation_log_format.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "gpujoin/common/status_macros.hpp"
#include "storage/snapshot_format.hpp"

namespace gpujoin::server {
namespace {

static_assert(std::endian::native == std::endian::little,
              "the write-ahead log is written with the host's byte order, which must be "
              "little-endian");

// The fields of a record header, at their offsets.
constexpr size_t kMagicAt = 0, kLengthAt = 4, kBaseAt = 8, kSequenceAt = 16, kHeaderChecksumAt = 24,
                 kRecordChecksumAt = 32;
// A read of the log fetches at least this much at a time.
constexpr uint64_t kReadChunkBytes = uint64_t{1} << 20;

template <typename T>
T Load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

template <typename T>
void Put(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof(T));
}

// The header checksum: XXH64 (seed 0) of the header's first 24 bytes (magic,
// length, base version, sequence).
uint64_t HeaderChecksum(const uint8_t* header) { return XxHash64(header, kHeaderChecksumAt); }

// The record checksum: XXH64 of the payload seeded with the header checksum, so
// that it covers the header fields and the payload.
uint64_t RecordChecksum(uint64_t header_checksum, const void* payload, size_t bytes) {
  return XxHash64(payload, bytes, header_checksum);
}

// A decoded record header.
struct RecordHeader {
  uint32_t length = 0;
  uint64_t base_version = 0;
  uint64_t sequence = 0;
  uint64_t header_checksum = 0;
  uint64_t record_checksum = 0;
};

// The header at `p` (kLogRecordHeaderBytes bytes) when its magic and header
// checksum hold, else nullopt: its length can then be trusted.
std::optional<RecordHeader> IntactHeader(const uint8_t* p) {
  if (Load<uint32_t>(p + kMagicAt) != kLogRecordMagic) return std::nullopt;
  RecordHeader h;
  h.header_checksum = Load<uint64_t>(p + kHeaderChecksumAt);
  if (HeaderChecksum(p) != h.header_checksum) return std::nullopt;
  h.length = Load<uint32_t>(p + kLengthAt);
  h.base_version = Load<uint64_t>(p + kBaseAt);
  h.sequence = Load<uint64_t>(p + kSequenceAt);
  h.record_checksum = Load<uint64_t>(p + kRecordChecksumAt);
  return h;
}

// Reads the log through a buffer: records are small and many, so one pread per
// chunk rather than two per record.
class LogCursor {
 public:
  LogCursor(int fd, uint64_t file_bytes, const std::string& file)
      : fd_(fd), file_bytes_(file_bytes), file_(file) {}

  // [offset, offset + n) of the file (inside it), valid until the next call.
  absl::StatusOr<const uint8_t*> Peek(uint64_t offset, uint64_t n) {
    if (offset < buffer_at_ || offset + n > buffer_at_ + buffered_) {
      const uint64_t want = std::min(std::max(n, kReadChunkBytes), file_bytes_ - offset);
      if (buffer_.size() < want) buffer_.resize(want);
      buffered_ = 0;
      GPUJOIN_RETURN_IF_ERROR(ReadAt(offset, want, buffer_.data()));
      buffer_at_ = offset;
      buffered_ = want;
    }
    return buffer_.data() + (offset - buffer_at_);
  }

  // Copies [offset, offset + n) of the file (inside it) to `out`; a large range
  // is read straight into `out` rather than through the buffer.
  absl::Status Copy(uint64_t offset, uint64_t n, char* out) {
    if (n >= kReadChunkBytes && (offset < buffer_at_ || offset + n > buffer_at_ + buffered_)) {
      return ReadAt(offset, n, reinterpret_cast<uint8_t*>(out));
    }
    GPUJOIN_ASSIGN_OR_RETURN(const uint8_t* p, Peek(offset, n));
    std::memcpy(out, p, n);
    return absl::OkStatus();
  }

 private:
  absl::Status ReadAt(uint64_t offset, uint64_t n, uint8_t* out) {
    while (n > 0) {
      const ssize_t r = ::pread(fd_, out, std::min<uint64_t>(n, uint64_t{1} << 30), off_t(offset));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) {
        return absl::InternalError(
            absl::StrCat("write-ahead log \"", file_, "\": read at offset ", offset,
                         " failed: ", r < 0 ? std::strerror(errno) : "the file ended early"));
      }
      out += r;
      n -= uint64_t(r);
      offset += uint64_t(r);
    }
    return absl::OkStatus();
  }

  int fd_;
  uint64_t file_bytes_;
  const std::string& file_;
  std::vector<uint8_t> buffer_;
  uint64_t buffer_at_ = 0;
  uint64_t buffered_ = 0;
};

// The offset of the first intact record header at or after `from`, if any.
absl::StatusOr<std::optional<uint64_t>> FindIntactHeader(LogCursor& cursor, uint64_t from,
                                                         uint64_t file_bytes) {
  for (uint64_t at = from; at + kLogRecordHeaderBytes <= file_bytes;) {
    const uint64_t span = std::min(kReadChunkBytes, file_bytes - at);
    GPUJOIN_ASSIGN_OR_RETURN(const uint8_t* p, cursor.Peek(at, span));
    const uint64_t starts = span - kLogRecordHeaderBytes + 1;
    for (uint64_t i = 0; i < starts; ++i) {
      if (IntactHeader(p + i)) return std::optional<uint64_t>(at + i);
    }
    at += starts;
  }
  return std::optional<uint64_t>();
}

// "sequence 17 of base version 3" for messages.
std::string SequenceName(uint64_t sequence, uint64_t base_version) {
  return absl::StrCat("sequence ", sequence, " of base version ", base_version);
}

absl::Status CheckFileHeader(LogCursor& cursor, uint64_t file_bytes, const std::string& file) {
  if (file_bytes < kLogFileHeaderBytes) {
    return absl::DataLossError(absl::StrCat("write-ahead log \"", file, "\": the file has ",
                                            file_bytes, " bytes, less than its ",
                                            kLogFileHeaderBytes, "-byte header"));
  }
  GPUJOIN_ASSIGN_OR_RETURN(const uint8_t* p, cursor.Peek(0, kLogFileHeaderBytes));
  if (std::memcmp(p, kMutationLogMagic, sizeof(kMutationLogMagic)) != 0) {
    return absl::DataLossError(absl::StrCat("write-ahead log \"", file,
                                            "\": bad file header (not a gpujoin write-ahead log)"));
  }
  const uint32_t version = Load<uint32_t>(p + 8);
  if (version > kMutationLogFormatVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        "write-ahead log \"", file, "\": format version ", version,
        " is not supported: this gpujoind reads format version ", kMutationLogFormatVersion));
  }
  if (version == 0 || Load<uint32_t>(p + 12) != 0) {
    return absl::DataLossError(absl::StrCat("write-ahead log \"", file,
                                            "\": bad file header (format version ", version,
                                            ", reserved ", Load<uint32_t>(p + 12), ")"));
  }
  return absl::OkStatus();
}

}  // namespace

std::string EncodeLogFileHeader() {
  std::string out(kMutationLogMagic, sizeof(kMutationLogMagic));
  Put<uint32_t>(out, kMutationLogFormatVersion);
  Put<uint32_t>(out, 0);
  return out;
}

void EncodeLogRecord(const LogRecord& record, std::string& out) {
  const size_t at = out.size();
  Put<uint32_t>(out, kLogRecordMagic);
  Put<uint32_t>(out, uint32_t(record.payload.size()));
  Put<uint64_t>(out, record.base_version);
  Put<uint64_t>(out, record.sequence);
  const uint64_t header_checksum = HeaderChecksum(reinterpret_cast<const uint8_t*>(&out[at]));
  Put<uint64_t>(out, header_checksum);
  Put<uint64_t>(out, RecordChecksum(header_checksum, record.payload.data(), record.payload.size()));
  out.append(record.payload);
}

namespace detail {

bool SequenceFollows(const std::map<uint64_t, uint64_t>& last_sequence, uint64_t base_version,
                     uint64_t sequence) {
  auto it = last_sequence.find(base_version);
  return it == last_sequence.end() || sequence > it->second;
}

absl::StatusOr<LogScan> ScanMutationLog(int fd, uint64_t file_bytes, const std::string& file,
                                        uint64_t max_record_bytes,
                                        const std::function<absl::Status(LogRecord&&)>& visit) {
  LogCursor cursor(fd, file_bytes, file);
  GPUJOIN_RETURN_IF_ERROR(CheckFileHeader(cursor, file_bytes, file));
  LogScan scan;
  // The last valid record, for messages about the one after it.
  std::optional<std::pair<uint64_t, uint64_t>> previous;  // (sequence, base version)
  uint64_t at = kLogFileHeaderBytes;
  while (at < file_bytes) {
    const uint64_t remaining = file_bytes - at;
    std::optional<RecordHeader> header;
    if (remaining >= kLogRecordHeaderBytes) {
      GPUJOIN_ASSIGN_OR_RETURN(const uint8_t* p, cursor.Peek(at, kLogRecordHeaderBytes));
      header = IntactHeader(p);
    }
    std::string damage;
    // Where an intact record after a damaged one would be looked for: right
    // after it when its header (and so its length) holds, else anywhere after
    // its first byte.
    uint64_t search_from = at + 1;
    if (!header) {
      damage = remaining < kLogRecordHeaderBytes ? "incomplete record header"
                                                 : "bad record header (magic or checksum)";
    } else if (kLogRecordHeaderBytes + header->length > remaining) {
      // An intact header whose payload the file does not hold: an append that
      // never finished, whatever follows (only its own partial payload can).
      search_from = file_bytes;
      damage = "record reaches past the end of the file";
    } else {
      if (header->length > max_record_bytes) {
        return absl::DataLossError(absl::StrCat(
            "write-ahead log \"", file, "\": the record at offset ", at, " (",
            SequenceName(header->sequence, header->base_version), ") declares a payload of ",
            header->length, " bytes, more than the limit of ", max_record_bytes, " bytes"));
      }
      LogRecord record{header->base_version, header->sequence, std::string(header->length, '\0')};
      GPUJOIN_RETURN_IF_ERROR(
          cursor.Copy(at + kLogRecordHeaderBytes, header->length, record.payload.data()));
      search_from = at + kLogRecordHeaderBytes + header->length;
      if (RecordChecksum(header->header_checksum, record.payload.data(), header->length) !=
          header->record_checksum) {
        damage = "record checksum mismatch";
      } else {
        if (!SequenceFollows(scan.last_sequence, record.base_version, record.sequence)) {
          return absl::DataLossError(
              absl::StrCat("write-ahead log \"", file, "\": the record at offset ", at, " has ",
                           SequenceName(record.sequence, record.base_version),
                           ", not above the sequence of an earlier record of that base version (",
                           scan.last_sequence[record.base_version], ")"));
        }
        scan.last_sequence[record.base_version] = record.sequence;
        previous.emplace(record.sequence, record.base_version);
        ++scan.records;
        if (visit) GPUJOIN_RETURN_IF_ERROR(visit(std::move(record)));
        at = search_from;
        continue;
      }
    }
    GPUJOIN_ASSIGN_OR_RETURN(std::optional<uint64_t> intact,
                             FindIntactHeader(cursor, search_from, file_bytes));
    if (intact) {
      const std::string which =
          header ? SequenceName(header->sequence, header->base_version)
          : previous
              ? absl::StrCat("the record after ", SequenceName(previous->first, previous->second))
              : std::string("the first record");
      return absl::DataLossError(
          absl::StrCat("write-ahead log \"", file, "\": the record at offset ", at, " (", which,
                       ") is damaged (", damage, ") and an intact record follows at offset ",
                       *intact, "; the file is left as it is for an operator"));
    }
    // Nothing intact after it: the tail of an append that never finished.
    scan.torn_tail_bytes = file_bytes - at;
    scan.torn_tail_records = 1;
    break;
  }
  scan.valid_bytes = at;
  return scan;
}

}  // namespace detail

absl::StatusOr<LogContents> ReadMutationLog(const std::string& path, uint64_t max_record_bytes) {
  const std::string file = std::filesystem::path(path).filename().string();
  // O_NONBLOCK: a FIFO must not block the open; O_NOFOLLOW: no link is followed.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) {
      return absl::NotFoundError(absl::StrCat("write-ahead log \"", file, "\" does not exist"));
    }
    if (err == ELOOP) {
      return absl::FailedPreconditionError(absl::StrCat(
          "write-ahead log \"", file, "\" is a symbolic link, not a file the server wrote"));
    }
    return absl::InternalError(
        absl::StrCat("write-ahead log \"", file, "\": open failed: ", std::strerror(err)));
  }
  struct stat st {};
  absl::StatusOr<LogContents> out;
  if (::fstat(fd, &st) != 0) {
    out = absl::InternalError(
        absl::StrCat("write-ahead log \"", file, "\": stat failed: ", std::strerror(errno)));
  } else if (!S_ISREG(st.st_mode)) {
    out = absl::FailedPreconditionError(absl::StrCat("write-ahead log \"", file, "\" is ",
                                                     std::string(FileKindName(st.st_mode)),
                                                     ", not a file the server wrote"));
  } else {
    LogContents contents;
    auto scan = detail::ScanMutationLog(fd, uint64_t(st.st_size), file, max_record_bytes,
                                        [&contents](LogRecord&& record) {
                                          contents.records.push_back(std::move(record));
                                          return absl::OkStatus();
                                        });
    if (scan.ok()) {
      contents.valid_bytes = scan->valid_bytes;
      contents.torn_tail_bytes = scan->torn_tail_bytes;
      contents.torn_tail_records = scan->torn_tail_records;
      out = std::move(contents);
    } else {
      out = scan.status();
    }
  }
  ::close(fd);
  return out;
}

}  // namespace gpujoin::server
