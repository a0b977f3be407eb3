#include "storage/snapshot_format.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <new>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "gpujoin/common/status_macros.hpp"
#include "gpujoin/common/xxhash64.hpp"

namespace gpujoin::server {
namespace {

static_assert(std::endian::native == std::endian::little,
              "snapshots are written little-endian by little-endian hosts");

// ---------------------------------------------------------------- layout
constexpr uint32_t kEndianMarker = 0x01020304u;
constexpr size_t kFixedHeaderBytes = 64;
constexpr size_t kEntryBytes = 40;  // type, column, offset, length, checksum, reserved
constexpr size_t kAlign = 64;
constexpr size_t kBlockBytes = size_t{4} << 20;  // SectionChecksum's blocks
// Most sections a header may list (a bound on what Open reads before checking).
constexpr uint32_t kMaxSections = 4 + 3 * 4096;

enum SectionType : uint32_t {
  kMeta = 1,
  kKeys = 2,
  kValues = 3,
  kGroupRanges = 4,
  kGroupValues = 5,
  kPayloadData = 6,
  kPayloadOffsets = 7,
  kPayloadValidity = 8,
};

std::string SectionName(uint32_t type, uint32_t column) {
  switch (type) {
    case kMeta:
      return "metadata";
    case kKeys:
      return "keys";
    case kValues:
      return "values";
    case kGroupRanges:
      return "group ranges";
    case kGroupValues:
      return "group values";
    case kPayloadData:
      return absl::StrCat("payload ", column, " data");
    case kPayloadOffsets:
      return absl::StrCat("payload ", column, " offsets");
    case kPayloadValidity:
      return absl::StrCat("payload ", column, " validity");
  }
  return absl::StrCat("type ", type);
}

uint64_t AlignUp(uint64_t x) { return (x + kAlign - 1) / kAlign * kAlign; }
uint64_t HeaderBytes(size_t sections) { return kFixedHeaderBytes + kEntryBytes * sections + 8; }

// ---------------------------------------------------------------- xxHash64
// XXH64's steps are gpujoin/common/xxhash64.hpp's, the row hash's too.

inline uint64_t Read64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
inline uint32_t Read32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// xxHash64 of bytes given in pieces, so that a block can be hashed while it is
// still in cache from its read. Every piece but the last must be a multiple of
// 32 bytes (the stripe), and the last piece's memory must live until Digest.
class XxHash64State {
 public:
  explicit XxHash64State(uint64_t seed) : seed_(seed) { xxh64::InitLanes(seed, v_); }

  void Update(const void* data, size_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    const uint8_t* const end = p + n;
    total_ += n;
    if (n >= 32) {
      uint64_t v1 = v_[0], v2 = v_[1], v3 = v_[2], v4 = v_[3];
      const uint8_t* const limit = end - 32;
      do {
        v1 = xxh64::Round(v1, Read64(p));
        v2 = xxh64::Round(v2, Read64(p + 8));
        v3 = xxh64::Round(v3, Read64(p + 16));
        v4 = xxh64::Round(v4, Read64(p + 24));
        p += 32;
      } while (p <= limit);
      v_[0] = v1, v_[1] = v2, v_[2] = v3, v_[3] = v4;
    }
    tail_ = p;
    tail_bytes_ = size_t(end - p);
  }

  uint64_t Digest() const {
    uint64_t h = total_ >= 32 ? xxh64::Converge(v_) : xxh64::ShortStart(seed_);
    h += total_;
    const uint8_t* p = tail_;
    const uint8_t* const end = tail_ + tail_bytes_;
    for (; end - p >= 8; p += 8) h = xxh64::Tail8(h, Read64(p));
    if (end - p >= 4) {
      h = xxh64::Tail4(h, Read32(p));
      p += 4;
    }
    for (; p < end; ++p) h = xxh64::TailByte(h, *p);
    return xxh64::Avalanche(h);
  }

 private:
  uint64_t seed_;
  uint64_t v_[4];
  uint64_t total_ = 0;
  const uint8_t* tail_ = nullptr;
  size_t tail_bytes_ = 0;
};

// A section's checksum (the file format): the XXH64 (seed 0) of each
// kBlockBytes block, then the XXH64, seeded with the section's length, of
// those hashes as little-endian words. The writer (SectionChecksum) and the
// reader (ReadImage, block by block on many threads) both combine here.
constexpr uint64_t kBlockSeed = 0;
size_t BlockCount(uint64_t section_bytes) {
  return size_t((section_bytes + kBlockBytes - 1) / kBlockBytes);
}
uint64_t CombineBlockHashes(const uint64_t* hashes, size_t blocks, uint64_t section_bytes) {
  return XxHash64(hashes, blocks * 8, section_bytes);
}

// ---------------------------------------------------------------- encoding
class Encoder {
 public:
  void U8(uint8_t v) { out_.push_back(char(v)); }
  void U32(uint32_t v) { out_.append(reinterpret_cast<const char*>(&v), 4); }
  void U64(uint64_t v) { out_.append(reinterpret_cast<const char*>(&v), 8); }
  void F64(double v) { U64(std::bit_cast<uint64_t>(v)); }
  void Str(std::string_view s) {
    U32(uint32_t(s.size()));
    out_.append(s);
  }
  const std::string& bytes() const { return out_; }

 private:
  std::string out_;
};

class Decoder {
 public:
  explicit Decoder(std::string_view in) : in_(in) {}
  bool U8(uint8_t& v) { return Take(&v, 1); }
  bool U32(uint32_t& v) { return Take(&v, 4); }
  bool U64(uint64_t& v) { return Take(&v, 8); }
  bool F64(double& v) {
    uint64_t u;
    if (!U64(u)) return false;
    v = std::bit_cast<double>(u);
    return true;
  }
  bool Str(std::string& s) {
    uint32_t n;
    if (!U32(n) || n > in_.size() - at_) return false;
    s.assign(in_.substr(at_, n));
    at_ += n;
    return true;
  }
  bool done() const { return at_ == in_.size(); }

 private:
  bool Take(void* dst, size_t n) {
    if (in_.size() - at_ < n) return false;
    std::memcpy(dst, in_.data() + at_, n);
    at_ += n;
    return true;
  }
  std::string_view in_;
  size_t at_ = 0;
};

std::string EncodeMeta(const SnapshotMeta& m, const engine::IndexImage& image) {
  Encoder e;
  e.Str(m.name);
  e.U8(uint8_t(m.source_backend));
  e.U8(uint8_t(image.spec.key_type));
  e.U8(uint8_t(image.spec.duplicates));
  e.U8(image.built ? 1 : 0);
  e.U32(image.spec.capacity);
  e.U32(image.spec.max_probe_count);
  const engine::BuildStatistics& s = image.statistics;
  for (uint64_t v : {s.unique_keys, s.duplicate_rows, s.overflow_rows, s.invalid_rows,
                     s.total_probes, s.max_probes, s.max_group_rows}) {
    e.U64(v);
  }
  e.U64(image.built_rows);
  e.U64(image.shape().kept_rows);
  e.U64(m.version);
  e.U32(m.first_value);
  e.U8(m.explicit_values ? 1 : 0);
  e.U8(m.batch_mode ? 1 : 0);
  e.F64(m.build_seconds);
  e.U64(uint64_t(m.built_unix_millis));
  e.U32(uint32_t(image.payload.size()));
  for (size_t c = 0; c < image.payload.size(); ++c) {
    const engine::PayloadImage& p = image.payload[c];
    e.Str(c < m.payload_names.size() ? m.payload_names[c] : std::string());
    e.U8(uint8_t(p.type));
    e.U8(p.nullable ? 1 : 0);
    e.U64(p.null_count);
    e.U64(engine::IsVariableWidth(p.type) ? p.data.size() : 0);
  }
  return e.bytes();
}

// One section to write: its bytes and where they go.
struct OutSection {
  uint32_t type;
  uint32_t column;
  const void* data;
  uint64_t length;
};

std::vector<OutSection> SectionsOf(const std::string& meta, const engine::IndexImage& image) {
  std::vector<OutSection> s;
  s.push_back({kMeta, 0, meta.data(), meta.size()});
  s.push_back({kKeys, 0, image.keys.data(), image.keys.size()});
  s.push_back({kValues, 0, image.values.data(), image.values.size()});
  if (image.spec.duplicates == engine::DuplicatePolicy::kKeepAll) {
    s.push_back({kGroupRanges, 0, image.group_ranges.data(), image.group_ranges.size()});
    s.push_back({kGroupValues, 0, image.group_values.data(), image.group_values.size()});
  }
  for (uint32_t c = 0; c < image.payload.size(); ++c) {
    const engine::PayloadImage& p = image.payload[c];
    s.push_back({kPayloadData, c, p.data.data(), p.data.size()});
    if (engine::IsVariableWidth(p.type)) {
      s.push_back({kPayloadOffsets, c, p.offsets.data(), p.offsets.size()});
    }
    if (p.nullable) s.push_back({kPayloadValidity, c, p.validity.data(), p.validity.size()});
  }
  return s;
}

absl::Status WriteError(int err, std::string_view what) {
  const std::string message =
      absl::StrCat("snapshot write (", std::string(what), "): ", std::strerror(err));
  return err == ENOSPC || err == EDQUOT ? absl::ResourceExhaustedError(message)
                                        : absl::InternalError(message);
}

// Writes all of [data, data + n), asking the hooks every chunk.
absl::Status WriteAll(int fd, const void* data, uint64_t n, const SnapshotWriteOptions& options,
                      std::string_view what) {
  constexpr uint64_t kChunk = uint64_t{1} << 20;
  const auto* p = static_cast<const uint8_t*>(data);
  uint64_t since_check = 0;
  while (n > 0) {
    const uint64_t step = std::min(n, kChunk);
    const ssize_t w = ::write(fd, p, step);
    if (w < 0) {
      if (errno == EINTR) continue;
      return WriteError(errno, what);
    }
    p += w;
    n -= uint64_t(w);
    since_check += uint64_t(w);
    if (options.after_chunk) options.after_chunk();
    if (since_check >= (uint64_t{8} << 20) || n == 0) {
      since_check = 0;
      if (options.cancelled && options.cancelled()) {
        return absl::CancelledError("snapshot write superseded");
      }
    }
  }
  return absl::OkStatus();
}

absl::Status ReadAt(int fd, void* data, uint64_t n, uint64_t offset, const std::string& path) {
  auto* p = static_cast<uint8_t*>(data);
  while (n > 0) {
    const ssize_t r = ::pread(fd, p, std::min<uint64_t>(n, uint64_t{1} << 30), off_t(offset));
    if (r < 0) {
      if (errno == EINTR) continue;
      return absl::InternalError(absl::StrCat("snapshot \"", path, "\": read at ", offset,
                                              " failed: ", std::strerror(errno)));
    }
    if (r == 0) {
      return absl::OutOfRangeError(
          absl::StrCat("snapshot \"", path, "\": truncated (no bytes at offset ", offset, ")"));
    }
    p += r;
    n -= uint64_t(r);
    offset += uint64_t(r);
  }
  return absl::OkStatus();
}

}  // namespace

uint64_t XxHash64(const void* data, size_t len, uint64_t seed) {
  XxHash64State state(seed);
  state.Update(data, len);
  return state.Digest();
}

uint64_t SectionChecksum(const void* data, size_t bytes, unsigned threads) {
  const auto* p = static_cast<const uint8_t*>(data);
  const size_t blocks = BlockCount(bytes);
  std::vector<uint64_t> hashes(blocks);
  auto hash_block = [&](size_t b) {
    hashes[b] =
        XxHash64(p + b * kBlockBytes, std::min(kBlockBytes, bytes - b * kBlockBytes), kBlockSeed);
  };
  threads = std::max(1u, std::min<unsigned>(threads, unsigned(blocks)));
  if (threads <= 1) {
    for (size_t b = 0; b < blocks; ++b) hash_block(b);
  } else {
    std::atomic<size_t> next{0};
    std::vector<std::thread> pool;
    for (unsigned t = 0; t < threads; ++t) {
      pool.emplace_back([&] {
        for (size_t b; (b = next.fetch_add(1)) < blocks;) hash_block(b);
      });
    }
    for (auto& t : pool) t.join();
  }
  return CombineBlockHashes(hashes.data(), blocks, bytes);
}

uint64_t SnapshotFileBytes(const SnapshotMeta& meta, const engine::IndexImage& image) {
  const std::string encoded = EncodeMeta(meta, image);
  const std::vector<OutSection> sections = SectionsOf(encoded, image);
  uint64_t at = AlignUp(HeaderBytes(sections.size()));
  for (const OutSection& s : sections) at = AlignUp(at + s.length);
  return at;
}

absl::Status WriteSnapshot(int fd, const SnapshotMeta& meta, const engine::IndexImage& image,
                           const SnapshotWriteOptions& options) {
  const std::string encoded = EncodeMeta(meta, image);
  const std::vector<OutSection> sections = SectionsOf(encoded, image);
  // The header first (its table holds every section's place and checksum).
  const uint64_t header_bytes = HeaderBytes(sections.size());
  std::vector<uint64_t> offsets;
  uint64_t at = AlignUp(header_bytes);
  for (const OutSection& s : sections) {
    offsets.push_back(at);
    at = AlignUp(at + s.length);
  }
  const uint64_t file_bytes = at;
  std::string header(AlignUp(header_bytes), '\0');
  auto put32 = [&](size_t pos, uint32_t v) { std::memcpy(header.data() + pos, &v, 4); };
  auto put64 = [&](size_t pos, uint64_t v) { std::memcpy(header.data() + pos, &v, 8); };
  std::memcpy(header.data(), kSnapshotMagic, 8);
  put32(8, kSnapshotFormatVersion);
  put32(12, kEndianMarker);
  put32(16, uint32_t(sections.size()));
  put32(20, uint32_t(header_bytes));
  put64(24, file_bytes);
  for (size_t i = 0; i < sections.size(); ++i) {
    const size_t e = kFixedHeaderBytes + i * kEntryBytes;
    put32(e, sections[i].type);
    put32(e + 4, sections[i].column);
    put64(e + 8, offsets[i]);
    put64(e + 16, sections[i].length);
    put64(e + 24, SectionChecksum(sections[i].data, sections[i].length, 2));
  }
  put64(header_bytes - 8, XxHash64(header.data(), header_bytes - 8));
  GPUJOIN_RETURN_IF_ERROR(WriteAll(fd, header.data(), header.size(), options, "header"));
  static const char kZeros[kAlign] = {};
  for (size_t i = 0; i < sections.size(); ++i) {
    const OutSection& s = sections[i];
    const std::string what = SectionName(s.type, s.column);
    GPUJOIN_RETURN_IF_ERROR(WriteAll(fd, s.data, s.length, options, what));
    const uint64_t pad = AlignUp(offsets[i] + s.length) - (offsets[i] + s.length);
    if (pad > 0) GPUJOIN_RETURN_IF_ERROR(WriteAll(fd, kZeros, pad, options, what));
  }
  return absl::OkStatus();
}

std::string_view FileKindName(unsigned mode) {
  switch (mode & S_IFMT) {
    case S_IFREG:
      return "a regular file";
    case S_IFDIR:
      return "a directory";
    case S_IFIFO:
      return "a FIFO";
    case S_IFLNK:
      return "a symbolic link";
    case S_IFSOCK:
      return "a socket";
    case S_IFCHR:
      return "a character device";
    case S_IFBLK:
      return "a block device";
    default:
      return "not a regular file";
  }
}

FileIdentity IdentityOf(const struct stat& st) {
  return FileIdentity{uint64_t(st.st_dev), uint64_t(st.st_ino), uint64_t(st.st_size),
                      int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
}

// ---------------------------------------------------------------- reading

SnapshotReader::SnapshotReader(SnapshotReader&& other) noexcept { *this = std::move(other); }
SnapshotReader& SnapshotReader::operator=(SnapshotReader&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
    file_bytes_ = other.file_bytes_;
    format_version_ = other.format_version_;
    sections_ = std::move(other.sections_);
    meta_ = std::move(other.meta_);
    shape_ = std::move(other.shape_);
    statistics_ = other.statistics_;
    built_rows_ = other.built_rows_;
    built_ = other.built_;
    null_counts_ = std::move(other.null_counts_);
    identity_ = other.identity_;
  }
  return *this;
}
SnapshotReader::~SnapshotReader() {
  if (fd_ >= 0) ::close(fd_);
}

absl::StatusOr<SnapshotReader> SnapshotReader::Open(const std::string& file_path,
                                                    const std::string& label) {
  // Messages name `label` (the file name under --data-dir), never the directory.
  const std::string& path = label.empty() ? file_path : label;
  SnapshotReader r;
  r.path_ = path;
  auto corrupt = [&](std::string_view why) {
    return absl::DataLossError(absl::StrCat("snapshot \"", path, "\": ", std::string(why)));
  };
  // O_NONBLOCK: a FIFO (or a device) under the name must not block the opening
  // thread; O_NOFOLLOW: a symbolic link is refused, never followed out of the
  // directory. Anything but a regular file is refused below.
  r.fd_ = ::open(file_path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
  if (r.fd_ < 0) {
    if (errno == ELOOP) {
      return absl::FailedPreconditionError(absl::StrCat(
          "snapshot \"", path, "\" is a symbolic link; snapshots must be regular files"));
    }
    const std::string message =
        absl::StrCat("snapshot \"", path, "\": cannot open: ", std::strerror(errno));
    return errno == ENOENT ? absl::NotFoundError(message) : absl::InternalError(message);
  }
  struct stat st {};
  if (::fstat(r.fd_, &st) != 0) {
    return absl::InternalError(absl::StrCat("snapshot \"", path, "\": ", std::strerror(errno)));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat("snapshot \"", path, "\" is not a regular file (", std::string(FileKindName(st.st_mode)),
                     "); snapshots must be regular files"));
  }
  r.identity_ = IdentityOf(st);
  const uint64_t actual = uint64_t(st.st_size);
  uint8_t fixed[kFixedHeaderBytes];
  if (actual < kFixedHeaderBytes) {
    return absl::OutOfRangeError(absl::StrCat("snapshot \"", path, "\": truncated: ", actual,
                                              " bytes, shorter than the ", kFixedHeaderBytes,
                                              "-byte header"));
  }
  GPUJOIN_RETURN_IF_ERROR(ReadAt(r.fd_, fixed, kFixedHeaderBytes, 0, path));
  if (std::memcmp(fixed, kSnapshotMagic, 8) != 0) return corrupt("not a gpujoin snapshot (magic)");
  r.format_version_ = Read32(fixed + 8);
  if (r.format_version_ > kSnapshotFormatVersion || r.format_version_ == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "snapshot \"", path, "\": format version ", r.format_version_,
        " is not supported: this gpujoind reads format version ", kSnapshotFormatVersion,
        " (newer files come from a newer gpujoind; load them there)"));
  }
  if (Read32(fixed + 12) != kEndianMarker) {
    return absl::FailedPreconditionError(
        absl::StrCat("snapshot \"", path, "\": written with another byte order (marker 0x",
                     absl::Hex(Read32(fixed + 12)), ", expected 0x01020304)"));
  }
  const uint32_t count = Read32(fixed + 16);
  const uint32_t header_bytes = Read32(fixed + 20);
  r.file_bytes_ = Read64(fixed + 24);
  if (count < 3 || count > kMaxSections || header_bytes != HeaderBytes(count)) {
    return corrupt(absl::StrCat("header claims ", count, " sections in ", header_bytes, " bytes"));
  }
  if (actual < header_bytes) {
    return absl::OutOfRangeError(absl::StrCat("snapshot \"", path, "\": truncated: ", actual,
                                              " bytes, shorter than its ", header_bytes,
                                              "-byte header"));
  }
  std::string header(header_bytes, '\0');
  GPUJOIN_RETURN_IF_ERROR(ReadAt(r.fd_, header.data(), header_bytes, 0, path));
  const auto* h = reinterpret_cast<const uint8_t*>(header.data());
  if (XxHash64(h, header_bytes - 8) != Read64(h + header_bytes - 8)) {
    return corrupt("header checksum mismatch");
  }
  if (actual != r.file_bytes_) {
    return absl::OutOfRangeError(absl::StrCat("snapshot \"", path,
                                              "\": truncated or torn: ", actual,
                                              " bytes on disk, its header says ", r.file_bytes_));
  }
  uint64_t end_of_previous = header_bytes;
  for (uint32_t i = 0; i < count; ++i) {
    const uint8_t* e = h + kFixedHeaderBytes + i * kEntryBytes;
    Section s{Read32(e), Read32(e + 4), Read64(e + 8), Read64(e + 16), Read64(e + 24)};
    if (s.offset < end_of_previous || s.offset % kAlign != 0 || s.length > r.file_bytes_ ||
        s.offset > r.file_bytes_ - s.length) {
      return corrupt(absl::StrCat("section ", i, " (", SectionName(s.type, s.column), ") at ",
                                  s.offset, " + ", s.length, " does not fit the ", r.file_bytes_,
                                  "-byte file"));
    }
    end_of_previous = s.offset + s.length;
    r.sections_.push_back(s);
  }
  // The metadata: small (names and counts), read and checked before any array.
  const Section& m = r.sections_[0];
  if (m.type != kMeta || m.length > (uint64_t{64} << 20)) {
    return corrupt("the first section is not a metadata section of at most 64 MiB");
  }
  std::string meta(m.length, '\0');
  GPUJOIN_RETURN_IF_ERROR(ReadAt(r.fd_, meta.data(), m.length, m.offset, path));
  if (SectionChecksum(meta.data(), meta.size()) != m.checksum) {
    return corrupt("section 0 (metadata) checksum mismatch");
  }
  Decoder d(meta);
  SnapshotMeta& sm = r.meta_;
  engine::HashIndexSpec& spec = r.shape_.spec;
  uint8_t backend = 0, key_type = 0, duplicates = 0, built = 0, explicit_values = 0, batch = 0;
  uint64_t millis = 0;
  engine::BuildStatistics& s = r.statistics_;
  uint32_t columns = 0;
  bool ok = d.Str(sm.name) && d.U8(backend) && d.U8(key_type) && d.U8(duplicates) && d.U8(built) &&
            d.U32(spec.capacity) && d.U32(spec.max_probe_count) && d.U64(s.unique_keys) &&
            d.U64(s.duplicate_rows) && d.U64(s.overflow_rows) && d.U64(s.invalid_rows) &&
            d.U64(s.total_probes) && d.U64(s.max_probes) && d.U64(s.max_group_rows) &&
            d.U64(r.built_rows_) && d.U64(r.shape_.kept_rows) && d.U64(sm.version) &&
            d.U32(sm.first_value) && d.U8(explicit_values) && d.U8(batch) &&
            d.F64(sm.build_seconds) && d.U64(millis) && d.U32(columns);
  if (!ok || backend > 2 || key_type > 1 || duplicates > 1 || columns > 4096) {
    return corrupt("metadata does not parse");
  }
  sm.source_backend = engine::BackendKind(backend);
  spec.key_type = engine::KeyType(key_type);
  spec.duplicates = engine::DuplicatePolicy(duplicates);
  r.built_ = built != 0;
  sm.explicit_values = explicit_values != 0;
  sm.batch_mode = batch != 0;
  sm.built_unix_millis = int64_t(millis);
  for (uint32_t c = 0; c < columns; ++c) {
    std::string name;
    uint8_t type = 0, nullable = 0;
    uint64_t nulls = 0, string_bytes = 0;
    if (!(d.Str(name) && d.U8(type) && d.U8(nullable) && d.U64(nulls) && d.U64(string_bytes)) ||
        type > uint8_t(engine::ColumnType::kString)) {
      return corrupt(absl::StrCat("metadata of payload column ", c, " does not parse"));
    }
    sm.payload_names.push_back(std::move(name));
    r.shape_.payload.push_back(
        engine::PayloadShape{engine::ColumnType(type), nullable != 0, string_bytes});
    r.null_counts_.push_back(nulls);
  }
  if (!d.done()) return corrupt("metadata has trailing bytes");
  if (const absl::Status v = spec.Validate(); !v.ok()) {
    return corrupt(absl::StrCat("spec: ", v.message()));
  }
  if (spec.duplicates != engine::DuplicatePolicy::kKeepAll && r.shape_.kept_rows != 0) {
    return corrupt("a lowest_row index with group values");
  }
  if (r.shape_.kept_rows > r.built_rows_) {
    return corrupt(
        absl::StrCat(r.shape_.kept_rows, " kept rows of a ", r.built_rows_, "-row build"));
  }
  // Every other section must be exactly the array the metadata implies.
  {
    // AllocateImage would allocate: compute the sizes alone.
    const uint64_t cap = spec.capacity;
    const uint64_t positions = r.shape_.positions();
    std::vector<std::pair<std::pair<uint32_t, uint32_t>, uint64_t>> want;
    want.push_back({{kKeys, 0}, cap * engine::KeyBytes(spec.key_type)});
    want.push_back({{kValues, 0}, cap * 4});
    if (spec.duplicates == engine::DuplicatePolicy::kKeepAll) {
      want.push_back({{kGroupRanges, 0}, cap * 8});
      want.push_back({{kGroupValues, 0}, r.shape_.kept_rows * 4});
    }
    for (uint32_t c = 0; c < columns; ++c) {
      const engine::PayloadShape& p = r.shape_.payload[c];
      const uint64_t data = engine::IsVariableWidth(p.type) ? p.string_bytes
                            : p.type == engine::ColumnType::kBool
                                ? engine::BitmapBytes(positions)
                                : positions * engine::ColumnWidth(p.type);
      want.push_back({{kPayloadData, c}, data});
      if (engine::IsVariableWidth(p.type))
        want.push_back({{kPayloadOffsets, c}, (positions + 1) * 8});
      if (p.nullable) want.push_back({{kPayloadValidity, c}, engine::BitmapBytes(positions)});
    }
    if (want.size() + 1 != r.sections_.size()) {
      return corrupt(absl::StrCat("the metadata implies ", want.size() + 1,
                                  " sections, the table has ", r.sections_.size()));
    }
    for (size_t i = 0; i < want.size(); ++i) {
      const Section& got = r.sections_[i + 1];
      if (got.type != want[i].first.first || got.column != want[i].first.second ||
          got.length != want[i].second) {
        return corrupt(absl::StrCat("section ", i + 1, " is ", SectionName(got.type, got.column),
                                    " of ", got.length, " bytes; the metadata implies ",
                                    SectionName(want[i].first.first, want[i].first.second), " of ",
                                    want[i].second));
      }
    }
  }
  return r;
}

absl::StatusOr<engine::IndexImage> SnapshotReader::ReadImage(unsigned threads) {
  engine::IndexImage image;
  try {
    image = engine::AllocateImage(shape_);
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(
        absl::StrCat("snapshot \"", path_, "\": host memory for its image is short"));
  }
  image.statistics = statistics_;
  image.built_rows = built_rows_;
  image.built = built_;
  std::vector<engine::ImageBuffer*> targets;
  targets.push_back(&image.keys);
  targets.push_back(&image.values);
  if (shape_.spec.duplicates == engine::DuplicatePolicy::kKeepAll) {
    targets.push_back(&image.group_ranges);
    targets.push_back(&image.group_values);
  }
  for (size_t c = 0; c < image.payload.size(); ++c) {
    engine::PayloadImage& p = image.payload[c];
    p.null_count = null_counts_[c];
    targets.push_back(&p.data);
    if (engine::IsVariableWidth(p.type)) targets.push_back(&p.offsets);
    if (p.nullable) targets.push_back(&p.validity);
  }
  // The work items are the checksum's blocks of every section, in file order,
  // in one queue: a worker reads a block into its place in the image and hashes
  // it (in pieces, while each piece is still in cache), so that an index of a
  // few large sections still keeps every thread busy. The blocks' hashes are
  // combined per section once all are read.
  struct Block {
    uint32_t target;  // into targets; its section is sections_[target + 1]
    uint64_t offset;  // within the section
  };
  std::vector<Block> blocks;
  std::vector<size_t> first_block(targets.size());
  for (size_t i = 0; i < targets.size(); ++i) {
    first_block[i] = blocks.size();
    for (size_t b = 0; b < BlockCount(sections_[i + 1].length); ++b) {
      blocks.push_back({uint32_t(i), uint64_t(b) * kBlockBytes});
    }
  }
  constexpr uint64_t kPieceBytes = uint64_t{1} << 20;  // a multiple of XXH64's stripe
  static_assert(kBlockBytes % kPieceBytes == 0 && kPieceBytes % 32 == 0);
  std::vector<uint64_t> hashes(blocks.size());
  std::vector<absl::Status> read_errors(targets.size());
  std::mutex errors_mu;
  std::atomic<bool> failed{false};
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t k;
         !failed.load(std::memory_order_relaxed) && (k = next.fetch_add(1)) < blocks.size();) {
      const Block& block = blocks[k];
      const Section& s = sections_[block.target + 1];
      const uint64_t n = std::min<uint64_t>(kBlockBytes, s.length - block.offset);
      auto* dst = reinterpret_cast<uint8_t*>(targets[block.target]->data()) + block.offset;
      XxHash64State hash(kBlockSeed);
      for (uint64_t at = 0; at < n; at += kPieceBytes) {
        const uint64_t m = std::min(kPieceBytes, n - at);
        absl::Status st = ReadAt(fd_, dst + at, m, s.offset + block.offset + at, path_);
        if (!st.ok()) {
          std::lock_guard<std::mutex> lock(errors_mu);
          if (read_errors[block.target].ok()) read_errors[block.target] = std::move(st);
          failed.store(true, std::memory_order_relaxed);
          return;
        }
        hash.Update(dst + at, m);
      }
      hashes[k] = hash.Digest();
    }
  };
  if (threads == 0) threads = std::thread::hardware_concurrency();
  threads = std::max(1u, std::min<unsigned>(threads, unsigned(blocks.size())));
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  for (const absl::Status& st : read_errors) GPUJOIN_RETURN_IF_ERROR(st);
  for (size_t i = 0; i < targets.size(); ++i) {
    const Section& s = sections_[i + 1];
    if (CombineBlockHashes(hashes.data() + first_block[i], BlockCount(s.length), s.length) !=
        s.checksum) {
      return absl::DataLossError(absl::StrCat("snapshot \"", path_, "\": section ", i + 1, " (",
                                              SectionName(s.type, s.column),
                                              ") checksum mismatch"));
    }
  }
  // The padding between sections carries no checksum: it must be zero, so that
  // no byte of the file can change unnoticed.
  uint64_t gap_start = HeaderBytes(sections_.size());
  for (size_t i = 0; i <= sections_.size(); ++i) {
    const uint64_t gap_end = i < sections_.size() ? sections_[i].offset : file_bytes_;
    if (gap_end > gap_start) {
      char gap[kAlign];
      const uint64_t n = gap_end - gap_start;
      if (n > kAlign) {
        return absl::DataLossError(
            absl::StrCat("snapshot \"", path_, "\": a ", n, "-byte gap at ", gap_start));
      }
      GPUJOIN_RETURN_IF_ERROR(ReadAt(fd_, gap, n, gap_start, path_));
      if (std::any_of(gap, gap + n, [](char c) { return c != 0; })) {
        return absl::DataLossError(
            absl::StrCat("snapshot \"", path_, "\": non-zero padding at ", gap_start));
      }
    }
    if (i < sections_.size()) gap_start = sections_[i].offset + sections_[i].length;
  }
  if (const absl::Status v = image.Validate(); !v.ok()) {
    return absl::DataLossError(absl::StrCat("snapshot \"", path_, "\": ", v.message()));
  }
  return image;
}

std::string_view SnapshotLoadFailureReason(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kFailedPrecondition:
      return "version";
    case absl::StatusCode::kOutOfRange:
      return "truncated";
    case absl::StatusCode::kDataLoss:
      return "corrupt";
    case absl::StatusCode::kResourceExhausted:
      return "budget";
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kAlreadyExists:
      return "invalid";
    default:
      return "io_error";
  }
}

}  // namespace gpujoin::server
