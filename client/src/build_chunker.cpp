#include "build_chunker.hpp"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "wire.hpp"

namespace gpujoin::client::detail {
namespace {

// The most rows from `pos` (at most `max_rows`) of `column` whose encoding
// fits in `budget` bytes (the encoded size grows with the rows).
uint64_t FitRows(const ColumnView& column, uint64_t pos, uint64_t max_rows, uint64_t budget) {
  uint64_t lo = 0, hi = max_rows;
  if (EncodedColumnBytes(column.Slice(pos, 0)) > budget) return 0;
  while (lo < hi) {
    const uint64_t mid = lo + (hi - lo + 1) / 2;
    if (EncodedColumnBytes(column.Slice(pos, mid)) <= budget) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

}  // namespace

// The most key rows from `pos` (at most `max_rows`) whose keys and values fit
// in `budget` bytes (the encoded size grows with the rows).
uint64_t FitKeyRows(const Keys& keys, bool values, uint64_t pos, uint64_t max_rows,
                    uint64_t budget) {
  uint64_t lo = 0, hi = max_rows;
  while (lo < hi) {
    const uint64_t mid = lo + (hi - lo + 1) / 2;
    if (KeyChunkBytes(keys.subspan(pos, mid), values) <= budget) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

// The row of `keys` whose key is the widest when encoded (row 0 for integer
// keys, whose rows are all as wide).
uint64_t WidestKeyRow(const Keys& keys) {
  if (keys.type() != KeyType::kColumns) return 0;
  uint64_t widest = 0, widest_bytes = 0;
  for (uint64_t r = 0; r < keys.size(); ++r) {
    uint64_t bytes = 0;
    for (size_t i = 0; i < keys.column_count(); ++i) {
      const ColumnView v = keys.column(i);
      if (IsVariableWidth(v.type)) {
        bytes += static_cast<uint64_t>(v.offsets[v.offset + r + 1] - v.offsets[v.offset + r]);
      }
    }
    if (bytes > widest_bytes) {
      widest = r;
      widest_bytes = bytes;
    }
  }
  return widest;
}

uint64_t KeyChunkBytes(const Keys& keys, bool values) {
  // The chunk's own header and those of the keys and values columns.
  constexpr uint64_t kHeaders = 6 * 11;
  return kHeaders + EncodedKeyBytes(keys) + (values ? 4 * keys.size() : 0);
}

absl::StatusOr<BuildChunker> BuildChunker::Make(Keys keys, std::span<const uint32_t> values,
                                                std::span<const ColumnView> payload,
                                                size_t chunk_rows, uint64_t max_chunk_bytes) {
  if (chunk_rows == 0) return absl::InvalidArgumentError("chunk_rows must be positive");
  BuildChunker c;
  c.keys_ = keys;
  c.values_ = values;
  c.payload_.assign(payload.begin(), payload.end());
  c.chunk_rows_ = chunk_rows;
  c.max_bytes_ = max_chunk_bytes;
  c.pos_.assign(payload.size(), 0);
  // The widest key row must fit on its own (every integer row is as wide).
  const uint64_t one_row = keys.empty() ? KeyChunkBytes(keys, !values.empty())
                                        : KeyChunkBytes(keys.subspan(WidestKeyRow(keys), 1),
                                                        !values.empty());
  if (one_row > max_chunk_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("a build chunk of at most ", max_chunk_bytes,
                                                   " bytes cannot hold one key row (", one_row,
                                                   " bytes)"));
  }
  for (const ColumnView& p : c.payload_) {
    // The widest row: any row of a fixed-width column, the longest string.
    uint64_t widest = 0, widest_bytes = 0;
    if (IsVariableWidth(p.type)) {
      for (uint64_t r = 0; r < p.length; ++r) {
        const uint64_t bytes =
            static_cast<uint64_t>(p.offsets[p.offset + r + 1] - p.offsets[p.offset + r]);
        if (bytes > widest_bytes) {
          widest = r;
          widest_bytes = bytes;
        }
      }
    }
    if (p.length > 0 && EncodedColumnBytes(p.Slice(widest, 1)) > max_chunk_bytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "payload column '", std::string(p.name), "' row ", widest, " needs ",
          EncodedColumnBytes(p.Slice(widest, 1)), " bytes, more than a build chunk holds (",
          max_chunk_bytes, ", from ConnectOptions::max_message_bytes)"));
    }
  }
  return c;
}

std::optional<BuildChunk> BuildChunker::Next() {
  const uint64_t rows = keys_.size();
  const bool caught_up =
      std::all_of(pos_.begin(), pos_.end(), [&](uint64_t p) { return p >= key_pos_; });
  BuildChunk chunk;
  uint64_t budget = max_bytes_;
  if (caught_up) {
    if (sent_any_ && key_pos_ >= rows) return std::nullopt;
    const uint64_t n = FitKeyRows(keys_, !values_.empty(), key_pos_,
                                  std::min<uint64_t>(chunk_rows_, rows - key_pos_), max_bytes_);
    chunk.keys = keys_.subspan(key_pos_, n);
    if (!values_.empty()) chunk.values = values_.subspan(key_pos_, n);
    budget -= KeyChunkBytes(chunk.keys, !values_.empty());
    key_pos_ += n;
    sent_any_ = true;
  }
  bool any_payload = false;
  for (size_t i = 0; i < payload_.size(); ++i) {
    if (pos_[i] >= key_pos_) continue;
    uint64_t m = FitRows(payload_[i], pos_[i], key_pos_ - pos_[i], budget);
    // A payload-only chunk carries a row at least (Make checked that one fits).
    if (m == 0 && !caught_up && !any_payload) m = 1;
    if (m == 0) continue;
    const ColumnView slice = payload_[i].Slice(pos_[i], m);
    budget -= std::min(budget, EncodedColumnBytes(slice));
    chunk.payload.push_back(slice);
    pos_[i] += m;
    any_payload = true;
  }
  return chunk;
}

}  // namespace gpujoin::client::detail
