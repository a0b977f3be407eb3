// Lookups and joins on the CPU, parallel over query rows. Every row's outputs
// depend only on the row, and statistics are sums and maxima, so results do not
// depend on how rows are split between threads. A matched key's rows are a
// GroupRange of positions (kKeepAll: its group in the value list; kLowestRow:
// its slot), so one path serves both index kinds and every join kind. Gathers
// take the position of every output row (recorded only when payload is
// gathered) and read the index's payload, stored by position (cpu_payload.hpp).
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/key_columns.hpp"
#include "cpu/chunk_cursor.hpp"
#include "cpu/cpu_key_columns.hpp"
#include "cpu/cpu_ops.hpp"
#include "cpu/cpu_payload.hpp"
#include "gpujoin/common/status_macros.hpp"

namespace gpujoin::engine::cpu {
namespace {

// Rows per task below which splitting further costs more than it saves.
constexpr size_t kMinRowsPerTask = 16384;
// Rows whose home slots are prefetched together.
constexpr size_t kPrefetchBlock = 16;

void Merge(QueryStatistics& into, const QueryStatistics& part) {
  into.found += part.found;
  into.missing += part.missing;
  into.total_probes += part.total_probes;
  into.max_probes = std::max(into.max_probes, part.max_probes);
}

uint32_t QueryBound(const HashIndex& index, uint32_t override_bound) {
  return override_bound != 0 ? override_bound : index.spec().probe_bound();
}

// The query keys of a lookup or a join batch as ProbeRange reads them: key
// words through a chunk cursor, or a key schema's rows with their
// fingerprints (computed once, in parallel, before the probes).
template <IndexKey K>
struct QueryKeys {
  QueryKeys(const CpuHashIndex<K>&, const Chunked<K>& keys, ThreadPool&) : keys(keys) {}
  ChunkCursor<K> At(size_t begin) const { return ChunkCursor<K>(keys, begin); }
  const Chunked<K>& keys;
};
template <>
struct QueryKeys<ColumnKey> {
  QueryKeys(const CpuHashIndex<ColumnKey>& index, const KeyColumns& keys, ThreadPool& pool)
      : keys(keys), views(detail::KeyViews(keys)), fingerprints(keys.rows()), valid(keys.rows()) {
    KeyFingerprints(keys, index.fingerprint_bits(), fingerprints.span(), valid.span(), pool);
  }
  struct Cursor {
    const QueryKeys* q;
    size_t row;
    ColumnRowKey Next() {
      const size_t r = row++;
      return ColumnRowKey{q->fingerprints[r], q->views.data(), r, q->valid[r] == 0};
    }
  };
  Cursor At(size_t begin) const { return Cursor{this, begin}; }
  const KeyColumns& keys;
  std::vector<detail::HashView> views;
  HostArray<uint64_t> fingerprints;
  HostArray<uint8_t> valid;
};

// Probes rows [begin, end) of `keys`, writing the optional found flags and
// probe counts at the rows' positions, and calls on_row(r, slot) for every row
// (slot: where its key is stored, kNoSlot when missing).
template <IndexKey K, class OnRow>
QueryStatistics ProbeRange(const CpuHashIndex<K>& index, uint32_t bound, const QueryKeys<K>& keys,
                           size_t begin, size_t end, uint8_t* found, uint32_t* probes,
                           OnRow&& on_row) {
  QueryStatistics s;
  auto cursor = keys.At(begin);
  // Rows go in small blocks: prefetching a block's home slots first lets their
  // cache misses overlap instead of paying them one after another.
  typename CpuHashIndex<K>::RowKey block[kPrefetchBlock];
  for (size_t first = begin; first < end; first += kPrefetchBlock) {
    const size_t n = std::min(kPrefetchBlock, end - first);
    for (size_t i = 0; i < n; ++i) {
      block[i] = cursor.Next();
      index.Prefetch(block[i]);
    }
    if constexpr (CpuHashIndex<K>::kColumns) {
      // A hit compares the stored key row and reads its value: two more
      // dependent misses per row, staged over the block as well.
      uint32_t resident[kPrefetchBlock];
      for (size_t i = 0; i < n; ++i) resident[i] = index.PrefetchResident(block[i]);
      for (size_t i = 0; i < n; ++i) {
        if (resident[i] != kNoRow) index.PrefetchResidentBytes(resident[i]);
      }
    }
    for (size_t i = 0; i < n; ++i) {
      const size_t r = first + i;
      uint32_t examined = 0;
      const uint32_t slot = index.FindSlot(block[i], bound, examined);
      const bool hit = slot != CpuHashIndex<K>::kNoSlot;
      if (hit) {
        ++s.found;
      } else {
        ++s.missing;
      }
      s.total_probes += examined;
      s.max_probes = std::max<uint64_t>(s.max_probes, examined);
      if (found != nullptr) found[r] = hit ? 1 : 0;
      if (probes != nullptr) probes[r] = examined;
      on_row(r, slot);
    }
  }
  return s;
}

// The pairs a join of `kind` yields for a left row whose key has `matches`
// matches (its group size; 0 when missing). Where it yields any, a matched
// row's pairs are its first pairs-many matches in group order, a missing row's
// one pair is (left row, kEmptyKey) with null payload.
uint64_t PairsOf(JoinKind kind, uint32_t matches) {
  switch (kind) {
    case JoinKind::kInner:
      return matches;
    case JoinKind::kLeftOuter:
      return std::max<uint32_t>(matches, 1);
    case JoinKind::kLeftSemi:
      return matches != 0 ? 1 : 0;
    case JoinKind::kLeftAnti:
      return matches == 0 ? 1 : 0;
  }
  return 0;  // Validate admits only the kinds above
}

// Output pairs per scatter task below which splitting further costs more than it saves.
constexpr size_t kMinPairsPerTask = 16384;

// Left rows per block of a join's running pair counts (the scatter's search steps).
constexpr size_t kBlockRows = 32;

}  // namespace

template <IndexKey K>
absl::Status RunLookup(const LookupNodeT<K>& node, const CpuHashIndex<K>& index, ThreadPool& pool,
                       size_t node_index) {
  const uint32_t bound = QueryBound(index, node.max_probe_count);
  const size_t rows = KeyRows(node.keys);
  const QueryKeys<K> keys(index, node.keys, pool);
  const std::vector<size_t> bounds = SplitRows(rows, size_t{pool.size()} * 4, kMinRowsPerTask);
  const size_t parts = bounds.size() - 1;
  std::vector<QueryStatistics> partial(parts);
  uint8_t* found = node.found.empty() ? nullptr : node.found.data();
  uint32_t* probes = node.probes.empty() ? nullptr : node.probes.data();
  uint32_t* values = node.values.data();
  uint32_t* match_counts = node.match_counts.empty() ? nullptr : node.match_counts.data();
  const bool gather = !node.gather.empty();
  // Gathers read the payload at each row's first match (kNoRow: missing).
  HostArray<uint32_t> positions(gather ? rows : 0);
  uint32_t* position = positions.data();
  pool.ParallelFor(parts, [&](size_t p) {
    const auto probe = [&](auto&& on_row) {
      partial[p] = ProbeRange(index, bound, keys, bounds[p], bounds[p + 1], found, probes, on_row);
    };
    if (gather || match_counts != nullptr) {
      probe([&](size_t r, uint32_t slot) {
        const bool hit = slot != CpuHashIndex<K>::kNoSlot;
        values[r] = hit ? index.ValueAt(slot) : kEmptyKey;
        const GroupRange g = hit ? index.GroupOf(slot) : GroupRange{kNoRow, 0};
        if (gather) position[r] = g.first;
        if (match_counts != nullptr) match_counts[r] = g.size;
      });
    } else {  // the plain lookup: nothing beyond the slot's value
      probe([&](size_t r, uint32_t slot) {
        values[r] = slot != CpuHashIndex<K>::kNoSlot ? index.ValueAt(slot) : kEmptyKey;
      });
    }
  });
  if (node.statistics != nullptr) {
    QueryStatistics total;
    for (const auto& s : partial) Merge(total, s);
    *node.statistics = total;
  }
  if (!gather) return absl::OkStatus();
  return GatherColumns(index.stored_payload(), node.gather, positions.span(), pool,
                       absl::StrCat("node ", node_index, " (lookup)"));
}

// Each batch runs count -> scan -> scatter. The count pass probes every left
// row once (parallel over row ranges) and keeps, per row, its pairs and its
// first match (value, and position where needed), per block of rows the
// running pair count of its range; a scan of the ranges' totals gives each
// range its first pair. The scatter is split by output position, not by left
// row, so a row whose key holds most of the index costs no more than any
// other range of pairs; each task finds its first row by binary search (over
// the ranges, then their blocks). Per-row state is kept small (8 bytes, 12
// with positions), since writing it competes with the probe's cache misses.
template <IndexKey K>
absl::Status RunJoin(const JoinNodeT<K>& node, const CpuHashIndex<K>& index, ThreadPool& pool,
                     size_t node_index) {
  const uint32_t bound = QueryBound(index, node.max_probe_count);
  const bool build_overflowed = index.build_statistics().overflow_rows > 0;
  const JoinKind kind = node.kind;
  for (size_t b = 0; b < node.batches.size(); ++b) {
    const JoinBatchT<K>& batch = node.batches[b];
    const size_t rows = KeyRows(batch.keys);
    const QueryKeys<K> keys(index, batch.keys, pool);
    const size_t capacity = batch.out_left_rows.size();
    uint8_t* found = batch.found.empty() ? nullptr : batch.found.data();
    uint32_t* probes = batch.probes.empty() ? nullptr : batch.probes.data();
    // A count-only batch (capacity 0) keeps nothing per row and gathers nothing.
    const bool write = capacity > 0;
    const bool gather = !batch.gather.empty() && write;
    // Anti joins never read a group; the others need its size to count (semi:
    // only whether there is a match) and its first position to write.
    const bool read_group = kind != JoinKind::kLeftAnti && (write || kind != JoinKind::kLeftSemi);
    // Per left row, for the scatter: its pairs, its first match's value (read
    // while the slot is in cache; kEmptyKey when missing) and, where pairs need
    // their match's position (payload, or groups of more than one row), that
    // position (kNoRow when missing). Per block of kBlockRows rows: the pairs
    // of its range of rows through the block's end.
    const bool positions = write && (gather || index.keeps_all());
    HostArray<uint32_t> row_count(write ? rows : 0), row_value(write ? rows : 0);
    HostArray<uint32_t> row_first(positions ? rows : 0);
    HostArray<uint64_t> block_end(write ? (rows + kBlockRows - 1) / kBlockRows : 0);

    // Count: probe every left row and count its pairs, per range of whole blocks.
    std::vector<size_t> bounds = SplitRows(rows, size_t{pool.size()} * 4, kMinRowsPerTask);
    for (size_t p = 1; p + 1 < bounds.size(); ++p) bounds[p] = bounds[p] / kBlockRows * kBlockRows;
    const size_t parts = bounds.size() - 1;
    std::vector<QueryStatistics> partial(parts);
    std::vector<uint64_t> first_pair(parts + 1, 0);
    pool.ParallelFor(parts, [&](size_t p) {
      uint64_t pairs = 0;
      const size_t range_end = bounds[p + 1];
      partial[p] = ProbeRange(index, bound, keys, bounds[p], range_end, found, probes,
                              [&](size_t r, uint32_t slot) {
                                const bool hit = slot != CpuHashIndex<K>::kNoSlot;
                                GroupRange g{kNoRow, 0};
                                if (hit) g = read_group ? index.GroupOf(slot) : GroupRange{0, 1};
                                const auto n = static_cast<uint32_t>(PairsOf(kind, g.size));
                                pairs += n;
                                if (!write) return;
                                row_count[r] = n;
                                row_value[r] = hit ? index.ValueAt(slot) : kEmptyKey;
                                if (positions) row_first[r] = g.first;
                                if ((r + 1) % kBlockRows == 0 || r + 1 == range_end)
                                  block_end[r / kBlockRows] = pairs;
                              });
      first_pair[p + 1] = pairs;
    });

    // Scan: each range's first pair.
    QueryStatistics total;
    for (size_t p = 0; p < parts; ++p) {
      first_pair[p + 1] += first_pair[p];
      Merge(total, partial[p]);
    }
    const uint64_t count = first_pair[parts];
    const size_t written = static_cast<size_t>(std::min<uint64_t>(count, capacity));

    // Scatter the stable prefix of pairs that fits the capacity.
    HostArray<uint32_t> pair_positions(gather ? written : 0);
    const std::vector<size_t> out_bounds =
        SplitRows(written, size_t{pool.size()} * 4, kMinPairsPerTask);
    pool.ParallelFor(written == 0 ? 0 : out_bounds.size() - 1, [&](size_t t) {
      const uint64_t begin = out_bounds[t];
      // The range of pair `begin`, then its block: the first whose end passes it.
      const size_t p =
          std::upper_bound(first_pair.begin(), first_pair.end(), begin) - first_pair.begin() - 1;
      const uint64_t base = first_pair[p];
      const uint64_t* blocks = block_end.data();
      const size_t b0 = bounds[p] / kBlockRows;
      const size_t k =
          std::partition_point(blocks + b0, blocks + (bounds[p + 1] + kBlockRows - 1) / kBlockRows,
                               [&](uint64_t e) { return base + e <= begin; }) -
          blocks;
      uint64_t row_begin = base + (k == b0 ? 0 : blocks[k - 1]);  // pairs before row r
      size_t r = k * kBlockRows;
      for (size_t o = begin; o < out_bounds[t + 1]; ++o) {
        while (row_begin + row_count[r] <= o) row_begin += row_count[r++];  // rows done or empty
        const uint32_t j = static_cast<uint32_t>(o - row_begin);  // the pair's match in the group
        batch.out_left_rows[o] = batch.left_rows.empty()
                                     ? batch.first_left_row + static_cast<uint32_t>(r)
                                     : batch.left_rows[r];
        if (j == 0) {
          batch.out_right_rows[o] = row_value[r];
          if (gather) pair_positions[o] = row_first[r];
        } else {  // a later row of the group (kKeepAll): positions are kept
          batch.out_right_rows[o] = index.ValueAtPosition(row_first[r] + j);
          if (gather) pair_positions[o] = row_first[r] + j;
        }
      }
    });

    batch.result->count = count;
    batch.result->overflow = count > capacity || build_overflowed;
    batch.result->statistics = total;
    if (gather) {
      GPUJOIN_RETURN_IF_ERROR(
          GatherColumns(index.stored_payload(), batch.gather, pair_positions.span(), pool,
                        absl::StrCat("node ", node_index, " (join) batch ", b)));
    }
  }
  return absl::OkStatus();
}

template absl::Status RunLookup(const LookupNodeT<uint32_t>&, const CpuHashIndex<uint32_t>&,
                                ThreadPool&, size_t);
template absl::Status RunLookup(const LookupNodeT<uint64_t>&, const CpuHashIndex<uint64_t>&,
                                ThreadPool&, size_t);
template absl::Status RunJoin(const JoinNodeT<uint32_t>&, const CpuHashIndex<uint32_t>&,
                              ThreadPool&, size_t);
template absl::Status RunJoin(const JoinNodeT<uint64_t>&, const CpuHashIndex<uint64_t>&,
                              ThreadPool&, size_t);

template absl::Status RunLookup(const LookupNodeT<ColumnKey>&, const CpuHashIndex<ColumnKey>&,
                                ThreadPool&, size_t);
template absl::Status RunJoin(const JoinNodeT<ColumnKey>&, const CpuHashIndex<ColumnKey>&,
                              ThreadPool&, size_t);

}  // namespace gpujoin::engine::cpu
