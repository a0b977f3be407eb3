// The snapshot file's layout, shared by its writer (snapshot_writer.cpp), its
// reader (snapshot_reader.cpp) and the checksums (snapshot_format.cpp): the
// header's fixed fields and section table, the section types, the 64-byte
// alignment, the checksum blocks, and the metadata's little-endian encoding.
// The format itself is documented in docs/operations.md, "Snapshot format".
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "gpujoin/common/xxhash64.hpp"
#include "gpujoin/engine/index_image.hpp"

namespace gpujoin::server::detail {

static_assert(std::endian::native == std::endian::little,
              "snapshots are written little-endian by little-endian hosts");

constexpr uint32_t kEndianMarker = 0x01020304u;
constexpr size_t kFixedHeaderBytes = 64;
constexpr size_t kEntryBytes = 40;  // type, column, offset, length, checksum, reserved
constexpr size_t kAlign = 64;
constexpr size_t kBlockBytes = size_t{4} << 20;  // SectionChecksum's blocks
// Most payload columns the metadata may list.
constexpr uint32_t kMaxPayloadColumns = 4096;
// Most sections a header may list (a bound on what Open reads before checking):
// metadata, keys, values, two group sections, three per payload and key column,
// row values.
constexpr uint32_t kMaxSections = 6 + 3 * (kMaxPayloadColumns + 8);

enum SectionType : uint32_t {
  kMeta = 1,
  kKeys = 2,
  kValues = 3,
  kGroupRanges = 4,
  kGroupValues = 5,
  kPayloadData = 6,
  kPayloadOffsets = 7,
  kPayloadValidity = 8,
  // Format version 2: a key schema's key columns (every build row) and row values.
  kKeyData = 9,
  kKeyOffsets = 10,
  kKeyValidity = 11,
  kRowValues = 12,
};

/// The section types of one column's arrays, in file order (data, then offsets
/// for strings and binary, then validity when nullable): a payload column's or
/// a key column's, written and read by one implementation.
struct ColumnSections {
  SectionType data;
  SectionType offsets;
  SectionType validity;
};
inline constexpr ColumnSections kPayloadSections{kPayloadData, kPayloadOffsets, kPayloadValidity};
inline constexpr ColumnSections kKeySections{kKeyData, kKeyOffsets, kKeyValidity};

/// "metadata", "keys", "payload 2 offsets", "key column 0 data", ...: a section
/// in messages.
std::string SectionName(uint32_t type, uint32_t column);

inline uint64_t AlignUp(uint64_t x) { return (x + kAlign - 1) / kAlign * kAlign; }
inline uint64_t HeaderBytes(size_t sections) {
  return kFixedHeaderBytes + kEntryBytes * sections + 8;
}

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
inline size_t BlockCount(uint64_t section_bytes) {
  return size_t((section_bytes + kBlockBytes - 1) / kBlockBytes);
}
/// The section checksum of `blocks` block hashes of a `section_bytes`-byte section.
uint64_t CombineBlockHashes(const uint64_t* hashes, size_t blocks, uint64_t section_bytes);

// The metadata section's encoding: little-endian integers, IEEE doubles,
// length-prefixed strings.
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
  /// Bytes whose length the caller wrote before them (a U64).
  void Raw(std::string_view s) { out_.append(s); }
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
  /// `n` bytes (Encoder::Raw).
  bool Raw(uint64_t n, std::string_view& s) {
    if (n > in_.size() - at_) return false;
    s = in_.substr(at_, n);
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

// One column's entry in the metadata: a payload column's, and from format
// version 2 a key column's too (one encoding for both).
struct ColumnMeta {
  std::string name;
  uint8_t type = 0;
  bool nullable = false;
  uint64_t null_count = 0;
  /// A variable-width column's stored bytes (its data section); else 0.
  uint64_t stored_bytes = 0;

  engine::PayloadShape shape() const {
    return engine::PayloadShape{engine::ColumnType(type), nullable, stored_bytes};
  }
};

/// Encodes column `p` named `name`: name, type (u8), nullable (u8), null
/// count (u64), stored bytes (u64).
inline void EncodeColumnMeta(Encoder& e, std::string_view name, const engine::PayloadImage& p) {
  e.Str(name);
  e.U8(uint8_t(p.type));
  e.U8(p.nullable ? 1 : 0);
  e.U64(p.null_count);
  e.U64(engine::IsVariableWidth(p.type) ? p.data.size() : 0);
}

/// Decodes what EncodeColumnMeta wrote; false when the bytes run out.
inline bool DecodeColumnMeta(Decoder& d, ColumnMeta& m) {
  uint8_t nullable = 0;
  const bool ok = d.Str(m.name) && d.U8(m.type) && d.U8(nullable) && d.U64(m.null_count) &&
                  d.U64(m.stored_bytes);
  m.nullable = nullable != 0;
  return ok;
}

}  // namespace gpujoin::server::detail
