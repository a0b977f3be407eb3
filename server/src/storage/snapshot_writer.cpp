// Writing a snapshot: the metadata encoded, the sections listed with their
// checksums in the header, then each section at a 64-byte boundary.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gpujoin/common/status_macros.hpp"
#include "storage/snapshot_format.hpp"
#include "storage/snapshot_layout.hpp"

namespace gpujoin::server {
namespace {

using detail::kEndianMarker;
using detail::kFixedHeaderBytes;
using detail::kEntryBytes;
using detail::kAlign;
using detail::SectionName;
using detail::AlignUp;
using detail::HeaderBytes;
using detail::Encoder;
using enum detail::SectionType;

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
  e.U8(m.explicit_values ? static_cast<uint8_t>(1 + m.router_values) : 0);
  e.U8(m.batch_mode ? 1 : 0);
  e.F64(m.build_seconds);
  e.U64(uint64_t(m.built_unix_millis));
  auto columns = [&e](const std::vector<engine::PayloadImage>& images,
                      const std::vector<std::string>& names) {
    e.U32(uint32_t(images.size()));
    for (size_t c = 0; c < images.size(); ++c) {
      detail::EncodeColumnMeta(e, c < names.size() ? names[c] : std::string(), images[c]);
    }
  };
  columns(image.payload, m.payload_names);
  // Format version 2: the key schema (no columns for a key word).
  e.U64(image.shape().key_rows);
  columns(image.key_columns, m.key_column_names);
  // Format version 3: the mutation state.
  e.U64(m.mutation_sequence);
  e.U64(m.base_id);
  e.U64(m.next_row_id);
  e.U64(m.rehashes);
  e.F64(m.max_load_factor);
  // Format version 4: the dictionaries.
  e.U32(uint32_t(m.dictionaries.size()));
  for (const engine::PayloadDictionary& d : m.dictionaries) {
    e.U32(d.column);
    e.U32(d.codes_column);
    e.U8(d.retired ? 1 : 0);
    e.U32(d.values.size());
    for (uint64_t o : d.values.offsets()) e.U64(o);
    e.U64(d.values.value_bytes().size());
    e.Raw(d.values.value_bytes());
  }
  // Format version 5: the placement.
  e.U8(m.replicated ? 1 : 0);
  return e.bytes();
}

// One section to write: its bytes and where they go.
struct OutSection {
  uint32_t type;
  uint32_t column;
  const void* data;
  uint64_t length;
};

// A column's sections (data, offsets, validity), of a payload or key column.
void AddColumnSections(detail::ColumnSections types, uint32_t c, const engine::PayloadImage& p,
                       std::vector<OutSection>& s) {
  s.push_back({types.data, c, p.data.data(), p.data.size()});
  if (engine::IsVariableWidth(p.type)) {
    s.push_back({types.offsets, c, p.offsets.data(), p.offsets.size()});
  }
  if (p.nullable) s.push_back({types.validity, c, p.validity.data(), p.validity.size()});
}

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
    AddColumnSections(detail::kPayloadSections, c, image.payload[c], s);
  }
  if (image.spec.key_type == engine::KeyType::kColumns) {
    for (uint32_t c = 0; c < image.key_columns.size(); ++c) {
      AddColumnSections(detail::kKeySections, c, image.key_columns[c], s);
    }
    s.push_back({kRowValues, 0, image.row_values.data(), image.row_values.size()});
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

}  // namespace

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

}  // namespace gpujoin::server
