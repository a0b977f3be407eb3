#include "wire/lookup_wire.hpp"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <utility>

namespace gpujoin::server {
namespace {

// Wire types of the protobuf encoding.
constexpr uint32_t kVarint = 0;
constexpr uint32_t kFixed64 = 1;
constexpr uint32_t kLengthDelimited = 2;
constexpr uint32_t kFixed32 = 5;

// Field numbers of LookupRequest / U32Column and U64Column / LookupResponse used here.
constexpr uint64_t kRequestKeys = 2;
constexpr uint64_t kRequestKeys64 = 6;
constexpr uint64_t kColumnPacked = 1;
constexpr uint32_t kResponseValues = 3;
constexpr uint32_t kResponseFound = 4;
constexpr uint32_t kResponseProbes = 5;
constexpr uint32_t kResponseColumns = 8;
constexpr uint32_t kResponseMatchCounts = 9;
// Field numbers of Column.
constexpr uint32_t kColumnData = 4;
constexpr uint32_t kColumnOffsets = 5;
constexpr uint32_t kColumnValidity = 6;

// Longest length-delimited field protobuf parses (2 GiB less its 16 slop bytes).
constexpr uint64_t kMaxLength = (uint64_t{1} << 31) - 16;

// Reads a byte sequence spread over slices.
class SliceCursor {
 public:
  explicit SliceCursor(const std::vector<grpc::Slice>& slices) : slices_(slices) {
    for (const grpc::Slice& s : slices_) total_ += s.size();
    SkipEmpty();
  }

  size_t position() const { return position_; }
  size_t remaining() const { return total_ - position_; }
  bool at_end() const { return position_ == total_; }

  bool ReadByte(uint8_t* out) {
    if (at_end()) return false;
    *out = slices_[slice_].begin()[offset_];
    Advance(1);
    return true;
  }

  // A base-128 varint of at most `max_bytes` bytes (10: any uint64).
  bool ReadVarint(uint64_t* out, int max_bytes = 10) {
    uint64_t value = 0;
    for (int shift = 0; shift < 7 * max_bytes; shift += 7) {
      uint8_t b = 0;
      if (!ReadByte(&b)) return false;
      if (shift == 63 && b > 1) return false;  // more than 64 bits
      value |= uint64_t(b & 0x7f) << shift;
      if ((b & 0x80) == 0) {
        *out = value;
        return true;
      }
    }
    return false;
  }

  // A tag or a length as protobuf reads them: at most 5 bytes, and a length below
  // 2^31 - 16 (protobuf's parser fails on a longer encoding, even of a small value,
  // so the scan must not accept one either).
  bool ReadTag(uint64_t* out) { return ReadVarint(out, 5); }
  bool ReadLength(uint64_t* out) { return ReadVarint(out, 5) && *out < kMaxLength; }

  bool Skip(size_t n) {
    if (n > remaining()) return false;
    Advance(n);
    return true;
  }

  // Appends the next n bytes to `out`.
  bool CopyTo(size_t n, std::string* out) {
    if (n > remaining()) return false;
    while (n > 0) {
      const size_t piece = std::min(n, slices_[slice_].size() - offset_);
      out->append(reinterpret_cast<const char*>(slices_[slice_].begin()) + offset_, piece);
      Advance(piece);
      n -= piece;
    }
    return true;
  }

 private:
  void Advance(size_t n) {
    position_ += n;
    while (n > 0) {
      const size_t piece = std::min(n, slices_[slice_].size() - offset_);
      offset_ += piece;
      n -= piece;
      if (offset_ == slices_[slice_].size()) {
        ++slice_;
        offset_ = 0;
      }
    }
    SkipEmpty();
  }
  void SkipEmpty() {
    while (slice_ < slices_.size() && slices_[slice_].size() == 0) ++slice_;
  }

  const std::vector<grpc::Slice>& slices_;
  size_t total_ = 0;
  size_t position_ = 0;
  size_t slice_ = 0;
  size_t offset_ = 0;
};

void AppendVarint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

// Tag and length of a length-delimited field.
void AppendBytesHeader(uint32_t field, uint64_t length, std::string* out) {
  AppendVarint((uint64_t{field} << 3) | kLengthDelimited, out);
  AppendVarint(length, out);
}

// The column slices share one holder of what they reference (the output buffer,
// the gathered columns); the last one to be released by gRPC frees it.
using SharedOwner = std::shared_ptr<const void>;

void ReleaseOwner(void* holder) { delete static_cast<SharedOwner*>(holder); }

grpc::Slice ColumnSlice(const SharedOwner& owner, const void* data, size_t bytes) {
  return grpc::Slice(const_cast<void*>(data), bytes, &ReleaseOwner, new SharedOwner(owner));
}

// Appends a gathered column as field `columns` of LookupResponse: its small fields
// serialised by protobuf, its data, offsets and validity as slices of `owner`'s
// strings, in protobuf's field order (so the bytes are protobuf's own).
void AppendColumn(const v1::Column& column, const SharedOwner& owner,
                  std::vector<grpc::Slice>* slices) {
  std::string head;
  AppendBytesHeader(kResponseColumns, column.ByteSizeLong(), &head);
  v1::Column fields;  // name, type, length: fields 1-3
  fields.set_name(column.name());
  fields.set_type(column.type());
  fields.set_length(column.length());
  head += fields.SerializeAsString();
  for (const auto& [field, bytes] :
       {std::pair<uint32_t, const std::string*>{kColumnData, &column.data()},
        {kColumnOffsets, &column.offsets()},
        {kColumnValidity, &column.validity()}}) {
    if (bytes->empty()) continue;  // proto3 leaves empty bytes fields out
    AppendBytesHeader(field, bytes->size(), &head);
    slices->emplace_back(head);
    head.clear();
    slices->push_back(ColumnSlice(owner, bytes->data(), bytes->size()));
  }
  v1::Column tail;  // null_count: field 7
  tail.set_null_count(column.null_count());
  head += tail.SerializeAsString();
  if (!head.empty()) slices->emplace_back(head);
}

}  // namespace

void LookupWire::CopyKeys(uint8_t* dst) const {
  size_t skip = keys_offset;
  size_t left = keys_bytes;
  for (const grpc::Slice& s : slices) {
    if (left == 0) break;
    if (skip >= s.size()) {
      skip -= s.size();
      continue;
    }
    const size_t piece = std::min(left, s.size() - skip);
    std::memcpy(dst, s.begin() + skip, piece);
    dst += piece;
    left -= piece;
    skip = 0;
  }
}

std::optional<LookupWire> ScanLookupRequest(std::vector<grpc::Slice> slices) {
  LookupWire wire;
  wire.slices = std::move(slices);
  SliceCursor in(wire.slices);
  std::string rest;  // every top-level field but keys, as they were on the wire
  bool seen_keys = false;
  while (!in.at_end()) {
    SliceCursor field_start = in;  // to copy the field from, once it is measured
    uint64_t tag = 0;
    if (!in.ReadTag(&tag)) return std::nullopt;
    const uint64_t field = tag >> 3;
    const uint32_t type = static_cast<uint32_t>(tag & 7);
    if (field == 0 || field > 0x1fffffff) return std::nullopt;
    if (field == kRequestKeys || field == kRequestKeys64) {
      // Exactly one keys field (of either width) holding exactly one non-empty
      // packed field of whole keys.
      if (type != kLengthDelimited || seen_keys) return std::nullopt;
      seen_keys = true;
      wire.key_type = field == kRequestKeys64 ? engine::KeyType::kUint64 : engine::KeyType::kUint32;
      uint64_t length = 0;
      if (!in.ReadLength(&length) || length > in.remaining()) return std::nullopt;
      const size_t end = in.position() + length;
      uint64_t inner_tag = 0, inner_length = 0;
      if (!in.ReadTag(&inner_tag) || inner_tag != ((kColumnPacked << 3) | kLengthDelimited) ||
          !in.ReadLength(&inner_length) || in.position() > end ||
          inner_length != end - in.position() || inner_length == 0 ||
          inner_length % wire.key_bytes() != 0) {
        return std::nullopt;
      }
      wire.keys_offset = in.position();
      wire.keys_bytes = inner_length;
      in.Skip(inner_length);
      continue;
    }
    bool ok = false;
    switch (type) {
      case kVarint: {
        uint64_t ignored = 0;
        ok = in.ReadVarint(&ignored);
        break;
      }
      case kFixed64:
        ok = in.Skip(8);
        break;
      case kFixed32:
        ok = in.Skip(4);
        break;
      case kLengthDelimited: {
        uint64_t length = 0;
        ok = in.ReadLength(&length) && in.Skip(length);
        break;
      }
      default:
        ok = false;  // groups and invalid wire types: leave to protobuf
    }
    if (!ok) return std::nullopt;
    // Copy the whole field (tag included) for protobuf; these fields are small.
    if (!field_start.CopyTo(in.position() - field_start.position(), &rest)) return std::nullopt;
  }
  if (!seen_keys || !wire.fields.ParseFromString(rest)) return std::nullopt;
  return wire;
}

std::optional<LookupWire> ScanLookupRequest(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  if (!buffer.Dump(&slices).ok()) return std::nullopt;
  return ScanLookupRequest(std::move(slices));
}

grpc::ByteBuffer SerializeLookupResponse(uint64_t batch_id, PackedLookupResult result) {
  v1::LookupResponse head;
  head.set_batch_id(batch_id);
  head.set_index_version(result.index_version);
  std::string before_values = head.SerializeAsString();
  const uint64_t rows = result.rows;
  v1::LookupResponse tail;
  auto* s = tail.mutable_statistics();
  s->set_found(result.statistics.found);
  s->set_missing(result.statistics.missing);
  s->set_total_probes(result.statistics.total_probes);
  s->set_max_probes(result.statistics.max_probes);
  const std::string statistics = tail.SerializeAsString();

  std::vector<grpc::Slice> slices;
  // The outputs' owner, shared by the slices of values, found, probes and match counts.
  SharedOwner outputs_owner;
  const uint8_t* outputs = nullptr;
  if (rows == 0) {
    // Proto3 leaves empty bytes fields out.
    slices.emplace_back(before_values + statistics);
  } else {
    const auto buffer = std::make_shared<const engine::HostBuffer>(std::move(result.outputs));
    outputs = buffer->data();
    outputs_owner = buffer;
    const SharedOwner& owner = outputs_owner;
    AppendBytesHeader(kResponseValues, rows * 4, &before_values);
    slices.emplace_back(before_values);
    slices.push_back(ColumnSlice(owner, outputs + result.values_offset(), rows * 4));
    std::string found_header;
    AppendBytesHeader(kResponseFound, rows, &found_header);
    slices.emplace_back(found_header);
    slices.push_back(ColumnSlice(owner, outputs + result.found_offset(), rows));
    if (result.probes) {
      std::string probes_header;
      AppendBytesHeader(kResponseProbes, rows * 4, &probes_header);
      slices.emplace_back(probes_header);
      slices.push_back(ColumnSlice(owner, outputs + result.probes_offset(), rows * 4));
    }
    slices.emplace_back(statistics);
  }
  if (!result.columns.empty()) {
    const auto columns = std::make_shared<const google::protobuf::RepeatedPtrField<v1::Column>>(
        std::move(result.columns));
    const SharedOwner owner = columns;
    for (const v1::Column& c : *columns) AppendColumn(c, owner, &slices);
  }
  // Field 9 follows the columns (protobuf writes fields in number order).
  if (result.match_counts && rows != 0) {
    std::string header;
    AppendBytesHeader(kResponseMatchCounts, rows * 4, &header);
    slices.emplace_back(header);
    slices.push_back(ColumnSlice(outputs_owner, outputs + result.match_counts_offset(), rows * 4));
  }
  // Field 10 last (proto3 leaves a zero out).
  if (result.mutation_sequence != 0) {
    v1::LookupResponse last;
    last.set_mutation_sequence(result.mutation_sequence);
    slices.emplace_back(last.SerializeAsString());
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

}  // namespace gpujoin::server
