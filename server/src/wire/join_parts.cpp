#include "wire/join_parts.hpp"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "gpujoin/engine/column.hpp"
#include "wire/column_codec.hpp"

namespace gpujoin::server {
namespace {

// Upper bounds of the protobuf encoding (every field number here is below 16, so
// tags are one byte; lengths stay below 2^35, so at most five varint bytes).
constexpr uint64_t kScalarField = 11;  // tag + a ten-byte varint
constexpr uint64_t kBytesHeader = 6;   // tag + a five-byte length
// JoinResponse: batch_id, index_version, more. Its mutation_sequence (at most
// kScalarField more) comes out of the framing room MessageRoom keeps.
constexpr uint64_t kMessageBytes = 2 * kScalarField + 2;
// One JoinBatchResult: its own header; count, capacity, batch, first_pair;
// overflow; statistics (four scalars); left_rows and right_rows headers.
constexpr uint64_t kPieceBytes =
    kBytesHeader + 4 * kScalarField + 2 + (kBytesHeader + 4 * kScalarField) + 2 * kBytesHeader;
// One Column of a piece: its header; name header; type; length; data, offsets and
// validity headers; null_count (plus the name's bytes).
constexpr uint64_t kColumnBytes =
    kBytesHeader + kBytesHeader + kScalarField + kScalarField + 3 * kBytesHeader + kScalarField;

uint32_t OffsetAt(const std::string& offsets, uint64_t i) {
  uint32_t v;
  std::memcpy(&v, offsets.data() + i * 4, 4);
  return v;
}

// Encoded bytes of the pairs [first, first + n) of `r` and their gathered values
// (an upper bound; the headers are counted in kPieceBytes and kColumnBytes).
uint64_t PairBytes(const v1::JoinBatchResult& r, uint64_t first, uint64_t n) {
  uint64_t bytes = 8 * n;
  for (const v1::Column& c : r.columns()) {
    switch (c.type()) {
      case v1::COLUMN_TYPE_BINARY:
      case v1::COLUMN_TYPE_STRING:
        bytes += 4 * (n + 1) + (OffsetAt(c.offsets(), first + n) - OffsetAt(c.offsets(), first));
        break;
      case v1::COLUMN_TYPE_BOOL:
        bytes += engine::BitmapBytes(n);
        break;
      default:
        bytes += n * (c.type() == v1::COLUMN_TYPE_UINT32 || c.type() == v1::COLUMN_TYPE_INT32 ||
                              c.type() == v1::COLUMN_TYPE_FLOAT32
                          ? 4
                          : 8);
        break;
    }
    if (!c.validity().empty()) bytes += engine::BitmapBytes(n);
  }
  return bytes;
}

// Bytes of a piece of `r` without its pairs: the result's fields, the head's
// found and probes, and every column's fields and name.
uint64_t PieceBytes(const v1::JoinBatchResult& r, bool head) {
  uint64_t bytes = kPieceBytes;
  if (head) bytes += 2 * kBytesHeader + r.found().size() + r.probes().size();
  for (const v1::Column& c : r.columns()) bytes += kColumnBytes + c.name().size();
  return bytes;
}

// Column `c` restricted to its rows [first, first + n).
void SliceColumn(const v1::Column& c, uint64_t first, uint64_t n, v1::Column* out) {
  out->set_name(c.name());
  out->set_type(c.type());
  out->set_length(n);
  switch (c.type()) {
    case v1::COLUMN_TYPE_BINARY:
    case v1::COLUMN_TYPE_STRING: {
      const uint32_t base = OffsetAt(c.offsets(), first);
      std::string* offsets = out->mutable_offsets();
      offsets->resize((n + 1) * 4);
      for (uint64_t i = 0; i <= n; ++i) {
        const uint32_t o = OffsetAt(c.offsets(), first + i) - base;
        std::memcpy(offsets->data() + i * 4, &o, 4);
      }
      out->set_data(c.data().substr(base, OffsetAt(c.offsets(), first + n) - base));
      break;
    }
    case v1::COLUMN_TYPE_BOOL:
      out->set_data(SliceBits(c.data(), first, n));
      break;
    default: {
      const uint64_t width = c.data().size() / std::max<uint64_t>(c.length(), 1);
      out->set_data(c.data().substr(first * width, n * width));
      break;
    }
  }
  if (!c.validity().empty()) {
    std::string validity = SliceBits(c.validity(), first, n);
    const uint64_t nulls = CountZeroBits(reinterpret_cast<const uint8_t*>(validity.data()), n);
    if (nulls != 0) {
      out->set_validity(std::move(validity));
      out->set_null_count(nulls);
    }
  }
}

}  // namespace

uint64_t JoinParts::FirstPartBytes(uint64_t found_and_probes, size_t columns, uint64_t name_bytes,
                                   size_t variable_width) {
  // As PieceBytes(head) + PairBytes(0 pairs) of a piece alone in a message.
  return kMessageBytes + kPieceBytes + 2 * kBytesHeader + found_and_probes +
         columns * kColumnBytes + name_bytes + 4 * variable_width;
}

uint64_t JoinParts::MessageRoom(uint64_t max_message_bytes) {
  // The same room for framing that Operations::CheckResponseSize keeps.
  return max_message_bytes - std::min<uint64_t>(4096, max_message_bytes / 2);
}

absl::StatusOr<JoinParts> JoinParts::Plan(v1::JoinResponse response, uint64_t max_message_bytes) {
  JoinParts plan;
  // Room for the batch_id the caller stamps (a ten-byte varint and its tag).
  if (response.ByteSizeLong() + kScalarField <= max_message_bytes) {
    plan.response_ = std::move(response);
    return plan;
  }
  const uint64_t limit = MessageRoom(max_message_bytes);
  std::vector<std::vector<Piece>> parts(1);
  uint64_t used = kMessageBytes;
  for (int b = 0; b < response.results_size(); ++b) {
    const v1::JoinBatchResult& r = response.results(b);
    const uint64_t kept = r.left_rows().size() / 4;
    uint64_t first = 0;
    bool head = true;
    while (true) {
      const uint64_t fixed = PieceBytes(r, head);
      const uint64_t left = kept - first;
      // The most pairs from `first` that fit beside what the message holds.
      uint64_t n = 0;
      const bool piece_fits = used + fixed + PairBytes(r, first, 0) <= limit;
      if (piece_fits) {
        uint64_t lo = 0, hi = left;
        while (lo < hi) {
          const uint64_t mid = lo + (hi - lo + 1) / 2;
          if (used + fixed + PairBytes(r, first, mid) <= limit) {
            lo = mid;
          } else {
            hi = mid - 1;
          }
        }
        n = lo;
      }
      if (!piece_fits || (n == 0 && left > 0 && !head)) {
        if (!parts.back().empty()) {
          parts.emplace_back();
          used = kMessageBytes;
          continue;
        }
        const uint64_t need = kMessageBytes + fixed + PairBytes(r, first, piece_fits ? 1 : 0);
        return absl::ResourceExhaustedError(absl::StrCat(
            "batches[", r.batch(), "]: ",
            piece_fits ? absl::StrCat("pair ", first, " with its gathered columns needs ")
            : head ? std::string("the batch's first part (found, probes, column headers) needs ")
                   : std::string("a part of the batch (its column headers) needs "),
            need, " bytes, more than one response message of --max-message-bytes=",
            max_message_bytes, " can carry (", limit, " bytes after framing)"));
      }
      if (n == 0 && left > 0 && !parts.back().empty()) {
        // Not one pair fits beside the head here: start the batch afresh.
        parts.emplace_back();
        used = kMessageBytes;
        continue;
      }
      parts.back().push_back(Piece{b, first, n, head});
      used += fixed + PairBytes(r, first, n);
      first += n;
      head = false;
      if (first == kept) break;
      parts.emplace_back();
      used = kMessageBytes;
    }
  }
  plan.response_ = std::move(response);
  plan.parts_ = std::move(parts);
  plan.room_ = limit;
  return plan;
}

uint64_t JoinParts::HeldBytes() const {
  const uint64_t whole = response_.ByteSizeLong();
  if (parts_.empty()) return 2 * whole;
  return whole + 2 * std::min(whole, room_);
}

v1::JoinResponse JoinParts::Message(size_t k) {
  if (parts_.empty()) return std::move(response_);
  v1::JoinResponse m;
  m.set_index_version(response_.index_version());
  m.set_mutation_sequence(response_.mutation_sequence());
  m.set_more(k + 1 < parts_.size());
  for (const Piece& p : parts_[k]) {
    const v1::JoinBatchResult& r = response_.results(p.batch);
    v1::JoinBatchResult* out = m.add_results();
    out->set_batch(r.batch());
    out->set_first_pair(p.first);
    if (p.head) {
      out->set_count(r.count());
      out->set_capacity(r.capacity());
      out->set_overflow(r.overflow());
      *out->mutable_statistics() = r.statistics();
      out->set_found(r.found());
      out->set_probes(r.probes());
    }
    out->set_left_rows(r.left_rows().substr(p.first * 4, p.pairs * 4));
    out->set_right_rows(r.right_rows().substr(p.first * 4, p.pairs * 4));
    for (const v1::Column& c : r.columns()) SliceColumn(c, p.first, p.pairs, out->add_columns());
  }
  return m;
}

}  // namespace gpujoin::server
