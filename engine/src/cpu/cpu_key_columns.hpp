// The CPU backend's key columns of a key-schema index (key_columns.hpp): the
// build's key columns copied in build-row order (StoredKeys), and the 64-bit
// fingerprints of rows, computed by the row hash of the Hash operation.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "cpu/cpu_payload.hpp"
#include "cpu/thread_pool.hpp"
#include "gpujoin/engine/index_image.hpp"
#include "gpujoin/engine/key_columns.hpp"
#include "hashing/hash_view.hpp"

namespace gpujoin::engine::cpu {

/// Key columns owned by an index: every build row, in global build-row order
/// (invalid rows included, so that a row's position is its row), strings and
/// binary with int64 offsets. view() reads them as KeyColumns.
class StoredKeys {
 public:
  StoredKeys() = default;
  /// Room for `rows` rows of `types`, `value_bytes[c]` bytes of values in column
  /// c (KeyValueBytes of every chunk; empty: reserve only offsets and fixed
  /// widths), validity bitmaps when `validity`; throws std::bad_alloc.
  StoredKeys(const std::vector<ColumnType>& types, uint64_t rows, bool validity,
             std::span<const uint64_t> value_bytes = {});
  StoredKeys(StoredKeys&&) = default;
  StoredKeys& operator=(StoredKeys&&) = default;

  /// Appends every row of `keys` (the same schema).
  void Append(const KeyColumns& keys);
  /// The stored rows as key columns (valid until the next Append or move).
  const KeyColumns& view() const { return view_; }
  /// The stored rows' columns as views (KeyViews(view())), how probes compare them.
  const std::vector<detail::HashView>& views() const { return views_; }
  uint64_t rows() const { return rows_; }
  /// Bytes held: values, int64 offsets and validity of the stored rows.
  uint64_t bytes() const;

  /// Hints the cache that row `r` will be compared soon: its offsets (string
  /// and binary columns) or its values (fixed width). Always inlined, like
  /// CpuHashIndex::Prefetch (an out-of-line call to it may be deleted).
  [[gnu::always_inline]] void PrefetchRow(uint64_t r) const {
    for (size_t c = 0; c < columns_.size(); ++c) {
      const Column& col = columns_[c];
      if (col.offsets.empty()) {
        __builtin_prefetch(col.data.data() + r * ColumnWidth(types_[c]));
      } else {
        __builtin_prefetch(&col.offsets[r]);
      }
    }
  }
  /// Hints the cache that row `r`'s string and binary bytes will be read soon
  /// (reads the row's offsets: call it a step after PrefetchRow).
  [[gnu::always_inline]] void PrefetchBytes(uint64_t r) const {
    for (const Column& col : columns_) {
      if (!col.offsets.empty()) __builtin_prefetch(col.data.data() + col.offsets[r]);
    }
  }

  /// The columns in an index image's layout (IndexImage::key_columns: uint64
  /// offsets, validity only when stored).
  std::vector<PayloadImage> ToImages() const;
  /// The key columns of an image (validated: IndexImage::Validate).
  static StoredKeys FromImages(const std::vector<ColumnType>& types, uint64_t rows,
                               const std::vector<PayloadImage>& images);

 private:
  struct Column {
    std::vector<uint8_t> data;
    std::vector<int64_t> offsets;   // variable width: rows + 1
    std::vector<uint8_t> validity;  // when any input had nulls
  };
  void RefreshView();

  std::vector<ColumnType> types_;
  std::vector<Column> columns_;
  uint64_t rows_ = 0;
  uint64_t capacity_ = 0;
  bool validity_ = false;
  KeyColumns view_;
  std::vector<detail::HashView> views_;
};

/// The fingerprints of every row of `keys`: fps[r] = hash64 of row r's key
/// columns (the Hash operation's row hash), kept to its low `bits` bits (64:
/// all; fewer only in tests, to force collisions), and valid[r] = 0 where a key
/// column is null. Parallel over ranges of rows on `pool`.
void KeyFingerprints(const KeyColumns& keys, uint32_t bits, std::span<uint64_t> fps,
                     std::span<uint8_t> valid, ThreadPool& pool);

}  // namespace gpujoin::engine::cpu
