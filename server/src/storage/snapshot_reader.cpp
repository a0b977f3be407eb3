#include "storage/snapshot_reader.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <new>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "gpujoin/common/status_macros.hpp"
#include "gpujoin/engine/key_columns.hpp"
#include "storage/snapshot_layout.hpp"

namespace gpujoin::server {
namespace {

using detail::BlockCount;
using detail::ColumnMeta;
using detail::CombineBlockHashes;
using detail::DecodeColumnMeta;
using detail::Decoder;
using detail::HeaderBytes;
using detail::kAlign;
using detail::kBlockBytes;
using detail::kBlockSeed;
using detail::kEndianMarker;
using detail::kEntryBytes;
using detail::kFixedHeaderBytes;
using detail::kMaxPayloadColumns;
using detail::kMaxSections;
using detail::Read32;
using detail::Read64;
using detail::SectionName;
using detail::XxHash64State;
using enum detail::SectionType;

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
    key_null_counts_ = std::move(other.key_null_counts_);
    identity_ = other.identity_;
  }
  return *this;
}
SnapshotReader::~SnapshotReader() {
  if (fd_ >= 0) ::close(fd_);
}

absl::Status SnapshotReader::Corrupt(std::string_view why) const {
  return absl::DataLossError(absl::StrCat("snapshot \"", path_, "\": ", std::string(why)));
}

absl::StatusOr<SnapshotReader> SnapshotReader::Open(const std::string& file_path,
                                                    const std::string& label) {
  SnapshotReader r;
  // Messages name `label` (the file name under --data-dir), never the directory.
  r.path_ = label.empty() ? file_path : label;
  GPUJOIN_RETURN_IF_ERROR(r.OpenRegularFile(file_path));
  GPUJOIN_RETURN_IF_ERROR(r.ReadSectionTable());
  // The metadata: small (names and counts), read and checked before any array.
  GPUJOIN_RETURN_IF_ERROR(r.ReadMeta());
  GPUJOIN_RETURN_IF_ERROR(r.CheckSectionSizes());
  return r;
}

absl::Status SnapshotReader::OpenRegularFile(const std::string& file_path) {
  const std::string& path = path_;
  // O_NONBLOCK: a FIFO (or a device) under the name must not block the opening
  // thread; O_NOFOLLOW: a symbolic link is refused, never followed out of the
  // directory. Anything but a regular file is refused below.
  fd_ = ::open(file_path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
  if (fd_ < 0) {
    if (errno == ELOOP) {
      return absl::FailedPreconditionError(absl::StrCat(
          "snapshot \"", path, "\" is a symbolic link; snapshots must be regular files"));
    }
    const std::string message =
        absl::StrCat("snapshot \"", path, "\": cannot open: ", std::strerror(errno));
    return errno == ENOENT ? absl::NotFoundError(message) : absl::InternalError(message);
  }
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    return absl::InternalError(absl::StrCat("snapshot \"", path, "\": ", std::strerror(errno)));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat("snapshot \"", path, "\" is not a regular file (",
                     std::string(FileKindName(st.st_mode)), "); snapshots must be regular files"));
  }
  identity_ = IdentityOf(st);
  return absl::OkStatus();
}

absl::Status SnapshotReader::ReadSectionTable() {
  const std::string& path = path_;
  const uint64_t actual = identity_.bytes;  // st_size when opened
  uint8_t fixed[kFixedHeaderBytes];
  if (actual < kFixedHeaderBytes) {
    return absl::OutOfRangeError(absl::StrCat("snapshot \"", path, "\": truncated: ", actual,
                                              " bytes, shorter than the ", kFixedHeaderBytes,
                                              "-byte header"));
  }
  GPUJOIN_RETURN_IF_ERROR(ReadAt(fd_, fixed, kFixedHeaderBytes, 0, path));
  if (std::memcmp(fixed, kSnapshotMagic, 8) != 0) return Corrupt("not a gpujoin snapshot (magic)");
  format_version_ = Read32(fixed + 8);
  if (format_version_ > kSnapshotFormatVersion || format_version_ == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "snapshot \"", path, "\": format version ", format_version_,
        " is not supported: this gpujoind reads format versions 1 to ", kSnapshotFormatVersion,
        " (newer files come from a newer gpujoind; load them there)"));
  }
  if (Read32(fixed + 12) != kEndianMarker) {
    return absl::FailedPreconditionError(
        absl::StrCat("snapshot \"", path, "\": written with another byte order (marker 0x",
                     absl::Hex(Read32(fixed + 12)), ", expected 0x01020304)"));
  }
  const uint32_t count = Read32(fixed + 16);
  const uint32_t header_bytes = Read32(fixed + 20);
  file_bytes_ = Read64(fixed + 24);
  if (count < 3 || count > kMaxSections || header_bytes != HeaderBytes(count)) {
    return Corrupt(absl::StrCat("header claims ", count, " sections in ", header_bytes, " bytes"));
  }
  if (actual < header_bytes) {
    return absl::OutOfRangeError(absl::StrCat("snapshot \"", path, "\": truncated: ", actual,
                                              " bytes, shorter than its ", header_bytes,
                                              "-byte header"));
  }
  std::string header(header_bytes, '\0');
  GPUJOIN_RETURN_IF_ERROR(ReadAt(fd_, header.data(), header_bytes, 0, path));
  const auto* h = reinterpret_cast<const uint8_t*>(header.data());
  if (XxHash64(h, header_bytes - 8) != Read64(h + header_bytes - 8)) {
    return Corrupt("header checksum mismatch");
  }
  if (actual != file_bytes_) {
    return absl::OutOfRangeError(absl::StrCat("snapshot \"", path,
                                              "\": truncated or torn: ", actual,
                                              " bytes on disk, its header says ", file_bytes_));
  }
  uint64_t end_of_previous = header_bytes;
  for (uint32_t i = 0; i < count; ++i) {
    const uint8_t* e = h + kFixedHeaderBytes + i * kEntryBytes;
    Section s{Read32(e), Read32(e + 4), Read64(e + 8), Read64(e + 16), Read64(e + 24)};
    if (s.offset < end_of_previous || s.offset % kAlign != 0 || s.length > file_bytes_ ||
        s.offset > file_bytes_ - s.length) {
      return Corrupt(absl::StrCat("section ", i, " (", SectionName(s.type, s.column), ") at ",
                                  s.offset, " + ", s.length, " does not fit the ", file_bytes_,
                                  "-byte file"));
    }
    end_of_previous = s.offset + s.length;
    sections_.push_back(s);
  }
  return absl::OkStatus();
}

absl::Status SnapshotReader::ReadMeta() {
  const Section& m = sections_[0];
  if (m.type != kMeta || m.length > (uint64_t{64} << 20)) {
    return Corrupt("the first section is not a metadata section of at most 64 MiB");
  }
  std::string meta(m.length, '\0');
  GPUJOIN_RETURN_IF_ERROR(ReadAt(fd_, meta.data(), m.length, m.offset, path_));
  if (SectionChecksum(meta.data(), meta.size()) != m.checksum) {
    return Corrupt("section 0 (metadata) checksum mismatch");
  }
  Decoder d(meta);
  SnapshotMeta& sm = meta_;
  engine::HashIndexSpec& spec = shape_.spec;
  uint8_t backend = 0, key_type = 0, duplicates = 0, built = 0, explicit_values = 0, batch = 0;
  uint64_t millis = 0;
  engine::BuildStatistics& s = statistics_;
  uint32_t columns = 0;
  bool ok = d.Str(sm.name) && d.U8(backend) && d.U8(key_type) && d.U8(duplicates) && d.U8(built) &&
            d.U32(spec.capacity) && d.U32(spec.max_probe_count) && d.U64(s.unique_keys) &&
            d.U64(s.duplicate_rows) && d.U64(s.overflow_rows) && d.U64(s.invalid_rows) &&
            d.U64(s.total_probes) && d.U64(s.max_probes) && d.U64(s.max_group_rows) &&
            d.U64(built_rows_) && d.U64(shape_.kept_rows) && d.U64(sm.version) &&
            d.U32(sm.first_value) && d.U8(explicit_values) && d.U8(batch) &&
            d.F64(sm.build_seconds) && d.U64(millis) && d.U32(columns);
  // Version 1 knows the key words only; version 2 adds the key schema.
  const uint8_t max_key_type =
      uint8_t(format_version_ >= 2 ? engine::KeyType::kColumns : engine::KeyType::kUint64);
  if (!ok || backend > 2 || key_type > max_key_type || duplicates > 1 ||
      columns > kMaxPayloadColumns) {
    return Corrupt("metadata does not parse");
  }
  sm.source_backend = engine::BackendKind(backend);
  spec.key_type = engine::KeyType(key_type);
  spec.duplicates = engine::DuplicatePolicy(duplicates);
  built_ = built != 0;
  sm.explicit_values = explicit_values != 0;
  sm.router_values = explicit_values > 1 ? explicit_values - 1 : 0;
  sm.batch_mode = batch != 0;
  sm.built_unix_millis = int64_t(millis);
  for (uint32_t c = 0; c < columns; ++c) {
    ColumnMeta column;
    if (!DecodeColumnMeta(d, column) || column.type > uint8_t(engine::ColumnType::kString)) {
      return Corrupt(absl::StrCat("metadata of payload column ", c, " does not parse"));
    }
    sm.payload_names.push_back(std::move(column.name));
    shape_.payload.push_back(column.shape());
    null_counts_.push_back(column.null_count);
  }
  if (format_version_ >= 2) GPUJOIN_RETURN_IF_ERROR(ReadKeySchema(d));
  if (format_version_ >= 3) {
    if (!(d.U64(sm.mutation_sequence) && d.U64(sm.base_id) && d.U64(sm.next_row_id) && d.U64(sm.rehashes) &&
          d.F64(sm.max_load_factor)) ||
        !(sm.max_load_factor > 0 && sm.max_load_factor <= 1)) {
      return Corrupt("the mutation state does not parse");
    }
  } else if (!sm.explicit_values && !sm.batch_mode) {
    sm.next_row_id = uint64_t{sm.first_value} + built_rows_;
  }
  if (format_version_ >= 4) GPUJOIN_RETURN_IF_ERROR(ReadDictionaries(d));
  if (format_version_ >= 5) {
    uint8_t placement = 0;
    if (!d.U8(placement) || placement > 1) return Corrupt("the placement does not parse");
    sm.replicated = placement == 1;
  }
  if (!d.done()) return Corrupt("metadata has trailing bytes");
  if (const absl::Status v = spec.Validate(); !v.ok()) {
    return Corrupt(absl::StrCat("spec: ", v.message()));
  }
  if (spec.duplicates != engine::DuplicatePolicy::kKeepAll && shape_.kept_rows != 0) {
    return Corrupt("a lowest_row index with group values");
  }
  if (shape_.kept_rows > built_rows_) {
    return Corrupt(absl::StrCat(shape_.kept_rows, " kept rows of a ", built_rows_, "-row build"));
  }
  // Every kept row and every key row has a 4-byte value in the file: a count
  // past that would only overflow the sizes computed from it.
  if (shape_.kept_rows > file_bytes_ / 4 || shape_.key_rows > file_bytes_ / 4) {
    return Corrupt(absl::StrCat(shape_.kept_rows, " kept rows and ", shape_.key_rows,
                                " key rows do not fit the ", file_bytes_, "-byte file"));
  }
  return absl::OkStatus();
}

absl::Status SnapshotReader::ReadDictionaries(Decoder& d) {
  SnapshotMeta& sm = meta_;
  uint32_t count = 0;
  if (!d.U32(count) || count > sm.payload_names.size()) {
    return Corrupt("the dictionaries do not parse");
  }
  // The codes columns are the last `count` payload columns, after the declared ones.
  const uint32_t declared = static_cast<uint32_t>(sm.payload_names.size()) - count;
  for (uint32_t k = 0; k < count; ++k) {
    engine::PayloadDictionary dict;
    uint8_t retired = 0;
    uint32_t values = 0;
    if (!(d.U32(dict.column) && d.U32(dict.codes_column) && d.U8(retired) && d.U32(values)) ||
        dict.column >= declared || dict.codes_column != declared + k || retired > 1 ||
        !engine::IsVariableWidth(shape_.payload[dict.column].type) ||
        shape_.payload[dict.codes_column].type != engine::ColumnType::kUint32 ||
        uint64_t{values} + 1 > file_bytes_ / 8) {
      return Corrupt(absl::StrCat("dictionary ", k, " does not parse"));
    }
    std::vector<uint64_t> offsets(uint64_t{values} + 1);
    uint64_t bytes = 0;
    std::string_view text;
    bool ok = true;
    for (uint64_t& o : offsets) ok = ok && d.U64(o);
    if (!(ok && d.U64(bytes) && d.Raw(bytes, text))) {
      return Corrupt(absl::StrCat("dictionary ", k, " does not parse"));
    }
    absl::StatusOr<engine::StringDictionary> parsed =
        engine::StringDictionary::FromValues(text, std::move(offsets));
    if (!parsed.ok()) return Corrupt(absl::StrCat("dictionary ", k, ": ", parsed.status().message()));
    dict.values = *std::move(parsed);
    dict.retired = retired != 0;
    sm.dictionaries.push_back(std::move(dict));
  }
  sm.payload_names.resize(declared);
  return absl::OkStatus();
}

absl::Status SnapshotReader::ReadKeySchema(Decoder& d) {
  engine::HashIndexSpec& spec = shape_.spec;
  uint32_t columns = 0;
  if (!(d.U64(shape_.key_rows) && d.U32(columns)) || columns > engine::kMaxKeyColumns) {
    return Corrupt("metadata of the key schema does not parse");
  }
  for (uint32_t c = 0; c < columns; ++c) {
    ColumnMeta column;
    if (!DecodeColumnMeta(d, column) || column.type > uint8_t(engine::ColumnType::kString) ||
        !engine::IsKeyColumnType(engine::ColumnType(column.type))) {
      return Corrupt(absl::StrCat("metadata of key column ", c, " does not parse"));
    }
    meta_.key_column_names.push_back(std::move(column.name));
    spec.key_columns.push_back(engine::ColumnType(column.type));
    shape_.key_columns.push_back(column.shape());
    key_null_counts_.push_back(column.null_count);
  }
  // A key word has no key schema; a key schema has key columns (spec.Validate).
  if (spec.key_type != engine::KeyType::kColumns && shape_.key_rows != 0) {
    return Corrupt(absl::StrCat(shape_.key_rows, " key rows in a ",
                                std::string(engine::KeyTypeName(spec.key_type)), " index"));
  }
  return absl::OkStatus();
}

namespace {

// The sections of one column of `positions` positions (payload or key column).
void WantColumn(detail::ColumnSections types, uint32_t c, const engine::PayloadShape& p,
                uint64_t positions,
                std::vector<std::pair<std::pair<uint32_t, uint32_t>, uint64_t>>& want) {
  const uint64_t data = engine::IsVariableWidth(p.type) ? p.string_bytes
                        : p.type == engine::ColumnType::kBool
                            ? engine::BitmapBytes(positions)
                            : positions * engine::ColumnWidth(p.type);
  want.push_back({{types.data, c}, data});
  if (engine::IsVariableWidth(p.type)) want.push_back({{types.offsets, c}, (positions + 1) * 8});
  if (p.nullable) want.push_back({{types.validity, c}, engine::BitmapBytes(positions)});
}

// A column's arrays in the order of its sections.
void ColumnTargets(engine::PayloadImage& p, std::vector<engine::ImageBuffer*>& targets) {
  targets.push_back(&p.data);
  if (engine::IsVariableWidth(p.type)) targets.push_back(&p.offsets);
  if (p.nullable) targets.push_back(&p.validity);
}

}  // namespace

absl::Status SnapshotReader::CheckSectionSizes() const {
  // AllocateImage would allocate: compute the sizes alone.
  const engine::HashIndexSpec& spec = shape_.spec;
  const uint64_t cap = spec.capacity;
  const uint64_t positions = shape_.positions();
  std::vector<std::pair<std::pair<uint32_t, uint32_t>, uint64_t>> want;
  want.push_back({{kKeys, 0}, cap * engine::KeyBytes(spec.key_type)});
  want.push_back({{kValues, 0}, cap * 4});
  if (spec.duplicates == engine::DuplicatePolicy::kKeepAll) {
    want.push_back({{kGroupRanges, 0}, cap * 8});
    want.push_back({{kGroupValues, 0}, shape_.kept_rows * 4});
  }
  for (uint32_t c = 0; c < shape_.payload.size(); ++c) {
    WantColumn(detail::kPayloadSections, c, shape_.payload[c], positions, want);
  }
  if (spec.key_type == engine::KeyType::kColumns) {
    for (uint32_t c = 0; c < shape_.key_columns.size(); ++c) {
      WantColumn(detail::kKeySections, c, shape_.key_columns[c], shape_.key_rows, want);
    }
    want.push_back({{kRowValues, 0}, shape_.key_rows * 4});
  }
  if (want.size() + 1 != sections_.size()) {
    return Corrupt(absl::StrCat("the metadata implies ", want.size() + 1,
                                " sections, the table has ", sections_.size()));
  }
  for (size_t i = 0; i < want.size(); ++i) {
    const Section& got = sections_[i + 1];
    if (got.type != want[i].first.first || got.column != want[i].first.second ||
        got.length != want[i].second) {
      return Corrupt(absl::StrCat("section ", i + 1, " is ", SectionName(got.type, got.column),
                                  " of ", got.length, " bytes; the metadata implies ",
                                  SectionName(want[i].first.first, want[i].first.second), " of ",
                                  want[i].second));
    }
  }
  return absl::OkStatus();
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
  for (size_t c = 0; c < image.payload.size(); ++c) image.payload[c].null_count = null_counts_[c];
  for (size_t c = 0; c < image.key_columns.size(); ++c) {
    image.key_columns[c].null_count = key_null_counts_[c];
  }
  GPUJOIN_RETURN_IF_ERROR(ReadSections(Targets(image), threads));
  GPUJOIN_RETURN_IF_ERROR(CheckPadding());
  if (const absl::Status v = image.Validate(); !v.ok()) {
    return absl::DataLossError(absl::StrCat("snapshot \"", path_, "\": ", v.message()));
  }
  return image;
}

std::vector<engine::ImageBuffer*> SnapshotReader::Targets(engine::IndexImage& image) const {
  std::vector<engine::ImageBuffer*> targets;
  targets.push_back(&image.keys);
  targets.push_back(&image.values);
  if (shape_.spec.duplicates == engine::DuplicatePolicy::kKeepAll) {
    targets.push_back(&image.group_ranges);
    targets.push_back(&image.group_values);
  }
  for (engine::PayloadImage& p : image.payload) ColumnTargets(p, targets);
  if (shape_.spec.key_type == engine::KeyType::kColumns) {
    for (engine::PayloadImage& k : image.key_columns) ColumnTargets(k, targets);
    targets.push_back(&image.row_values);
  }
  return targets;
}

absl::Status SnapshotReader::ReadSections(const std::vector<engine::ImageBuffer*>& targets,
                                          unsigned threads) const {
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
  return absl::OkStatus();
}

absl::Status SnapshotReader::CheckPadding() const {
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
  return absl::OkStatus();
}

}  // namespace gpujoin::server
