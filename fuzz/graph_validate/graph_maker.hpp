// fuzz_graph_validate: GraphMaker, which turns fuzz bytes into the spans,
// lengths and output objects of command-graph nodes, all inside one arena.
#pragma once

#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <span>
#include <vector>

#include "gpujoin/engine/graph.hpp"

namespace gpujoin::fuzz::graph_validate {

using namespace gpujoin::engine;

constexpr size_t kArenaBytes = 2048;
constexpr size_t kHugeRows = (size_t{1} << 32) + 3;

class GraphMaker {
 public:
  GraphMaker(FuzzedDataProvider& in, uint8_t* arena) : in_(in), arena_(arena) {}

  // A length: mostly `want` (so that most nodes are well formed and reach the
  // aliasing checks and the run), sometimes any small length.
  size_t Length(size_t want) {
    if (in_.ConsumeIntegralInRange<int>(0, 7) != 0) return want;
    return in_.ConsumeIntegralInRange<size_t>(0, 72);
  }

  // A span of about `want` elements of T at any place in the arena (or, rarely,
  // a default-constructed empty span).
  template <typename T>
  std::span<T> Span(size_t want) {
    constexpr size_t n = kArenaBytes / sizeof(T);
    if (in_.ConsumeIntegralInRange<int>(0, 15) == 0) return {};
    const size_t len = std::min(Length(want), n);
    const size_t begin = in_.ConsumeIntegralInRange<size_t>(0, n - len);
    return std::span<T>(reinterpret_cast<T*>(arena_) + begin, len);
  }

  // An optional column of about `want` elements: mostly either absent or present.
  template <typename T>
  std::span<T> Optional(size_t want) {
    return in_.ConsumeBool() ? std::span<T>() : Span<T>(want);
  }

  // A span that is rarely oversized (kHugeRows elements at the arena's start:
  // only ever validated, never backed by memory).
  template <typename T>
  std::span<T> MaybeHuge(size_t want) {
    if (in_.ConsumeIntegralInRange<int>(0, 31) == 0) {
      huge_ = true;
      return std::span<T>(reinterpret_cast<T*>(arena_), kHugeRows);
    }
    return Span<T>(want);
  }

  // `rows` rows in 1 to 3 chunks (0 to 3 when empty), cut anywhere.
  template <typename T>
  Chunked<T> Chunks(size_t rows, bool may_be_huge = false) {
    Chunked<T> chunks;
    const int n = in_.ConsumeIntegralInRange<int>(rows == 0 ? 0 : 1, 3);
    size_t left = rows;
    for (int i = 0; i < n; ++i) {
      const size_t part = i == n - 1 ? left : in_.ConsumeIntegralInRange<size_t>(0, left);
      left -= part;
      chunks.push_back(may_be_huge ? MaybeHuge<const T>(part) : Span<const T>(part));
    }
    return chunks;
  }

  size_t Rows() { return in_.ConsumeIntegralInRange<size_t>(0, 40); }

  // Key columns of about `rows` rows in the arena: mostly the schema
  // (string, int64), sometimes one column or another type; string offsets
  // mostly valid (Offsets), lengths mostly `rows`, validity sometimes.
  KeyColumns KeyCols(size_t rows) {
    KeyColumns keys;
    const int columns = in_.ConsumeIntegralInRange<int>(0, 7) == 0 ? 1 : 2;
    for (int c = 0; c < columns; ++c) {
      HashColumn col;
      col.type = c == 0 ? ColumnType::kString : ColumnType::kInt64;
      if (in_.ConsumeIntegralInRange<int>(0, 15) == 0) col.type = ColumnType::kUint32;
      col.length = Length(rows);
      if (IsVariableWidth(col.type)) {
        col.data = Span<const uint8_t>(col.length * 3);
        col.offsets = Span<const int32_t>(col.length + 1);
        Offsets(col.offsets, col.data.size());
      } else {
        col.data = Span<const uint8_t>(col.length * ColumnWidth(col.type));
      }
      col.validity = Optional<const uint8_t>(BitmapBytes(col.length));
      keys.columns.push_back(col);
    }
    return keys;
  }

  // The keys of one input of key kind K: chunked words, or key columns.
  template <IndexKey K>
  KeyChunks<K> Keys(size_t rows, bool may_be_huge = false) {
    if constexpr (std::is_same_v<K, ColumnKey>) {
      return KeyCols(rows);
    } else {
      return Chunks<K>(rows, may_be_huge);
    }
  }
  // The keys of one batch chunk of key kind K.
  template <IndexKey K>
  KeyChunk<K> ChunkKeys(size_t rows) {
    if constexpr (std::is_same_v<K, ColumnKey>) {
      return KeyCols(rows);
    } else {
      return Span<const K>(rows);
    }
  }

  // Writes non-decreasing int32 offsets into `offsets` (the arena is the harness's
  // until the graph runs) ending at most at `data_bytes`, so that binary columns
  // are valid often enough; sometimes leaves the fuzz input's bytes.
  void Offsets(std::span<const int32_t> offsets, size_t data_bytes) {
    if (offsets.empty() || in_.ConsumeIntegralInRange<int>(0, 7) == 0) return;
    int32_t at = 0;
    for (size_t i = 0; i < offsets.size(); ++i) {
      const int32_t room = static_cast<int32_t>(data_bytes) - at;
      at += i == 0 ? 0 : in_.ConsumeIntegralInRange<int32_t>(0, std::max(0, std::min(room, 9)));
      const int32_t v = at;
      std::memcpy(const_cast<int32_t*>(offsets.data()) + i, &v, sizeof v);
    }
  }

  // A host output object: none, a separate object, or one placed in the arena
  // (aligned for T) where it may overlap the spans.
  template <typename T>
  T* Object(std::vector<std::unique_ptr<T>>& own, bool required = false) {
    switch (in_.ConsumeIntegralInRange<int>(required ? 1 : 0, 3)) {
      case 0:
        return nullptr;
      case 1:
      case 2:
        own.push_back(std::make_unique<T>());
        return own.back().get();
      default: {
        const size_t slots = kArenaBytes / alignof(T) - sizeof(T) / alignof(T);
        const size_t at = in_.ConsumeIntegralInRange<size_t>(0, slots) * alignof(T);
        return new (arena_ + at) T();  // trivially destructible: never destroyed
      }
    }
  }

  template <typename T>
  T* Pick(const std::vector<T*>& options) {
    return options[in_.ConsumeIntegralInRange<size_t>(0, options.size() - 1)];
  }

  uint32_t ProbeCount(uint32_t capacity) {
    switch (in_.ConsumeIntegralInRange<int>(0, 3)) {
      case 0:
      case 1:
        return 0;
      case 2:
        return in_.ConsumeIntegralInRange<uint32_t>(0, capacity + 1);
      default:
        return in_.ConsumeIntegral<uint32_t>();
    }
  }

  // A hash column offset or length: mostly small, sometimes any value.
  uint64_t RowCount(uint64_t small) {
    return in_.ConsumeIntegralInRange<int>(0, 15) != 0 ? small : in_.ConsumeIntegral<uint64_t>();
  }

  bool huge() const { return huge_; }
  FuzzedDataProvider& in() { return in_; }

 private:
  FuzzedDataProvider& in_;
  uint8_t* arena_;
  bool huge_ = false;
};

}  // namespace gpujoin::fuzz::graph_validate
