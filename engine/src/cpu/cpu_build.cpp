// Index builds on the CPU. Builds run sequentially in global source order: the
// first row of each key stores it, which is exactly the lowest-row winner that
// the contract requires (the CUDA backend reaches the same winner with an atomic
// minimum over source rows). Keys are kept in Robin Hood order
// (CpuHashIndex::Insert), so without overflow the layout equals the CUDA one.
// Payload columns are stored after the table is complete: every slot's winner
// row is found by probing the rows again (FindWinners), then each column is
// gathered into slot order (cpu_payload.hpp). A kKeepAll build has the same
// table; the same pass also records every row's slot, from which its groups
// are laid out (BuildGroups) and its payload gathered per kept row.
#include <algorithm>
#include <atomic>
#include <optional>
#include <utility>
#include <vector>

#include "cpu/chunk_cursor.hpp"
#include "cpu/cpu_ops.hpp"
#include "cpu/cpu_payload.hpp"

namespace gpujoin::engine::cpu {
namespace {

// Rows whose home slots are prefetched together.
constexpr size_t kPrefetchBlock = 16;

// Folds one valid row into the statistics.
template <IndexKey K>
void InsertRow(CpuHashIndex<K>& index, const typename CpuHashIndex<K>::RowKey& key,
               uint32_t value, uint32_t bound, BuildStatistics& s) {
  const InsertResult r = index.Insert(key, value, bound);
  switch (r.outcome) {
    case InsertOutcome::kUnique:
      ++s.unique_keys;
      break;
    case InsertOutcome::kDuplicate:
      ++s.duplicate_rows;
      break;
    case InsertOutcome::kOverflow:
      ++s.overflow_rows;
      break;
  }
  if (r.dropped) {  // a key stored earlier was pushed past the bound: its row overflows now
    --s.unique_keys;
    ++s.overflow_rows;
  }
  s.total_probes += r.probes;
  s.max_probes = std::max<uint64_t>(s.max_probes, r.max_probes);
}

// Inserts a plain build's rows into the cleared table, in global row order.
template <KeyWord K>
BuildStatistics InsertRows(const BuildIndexNodeT<K>& node, CpuHashIndex<K>& index, size_t rows) {
  const uint32_t bound = index.spec().probe_bound();
  BuildStatistics s;
  ChunkCursor<K> keys(node.keys, 0);
  std::optional<ChunkCursor<uint32_t>> values;
  if (node.values.has_value()) values.emplace(*node.values, 0);
  // Rows stay in source order; reading a small block ahead only lets the block's
  // home-slot cache misses overlap (prefetch), it does not reorder insertion.
  K block_keys[kPrefetchBlock];
  uint32_t block_values[kPrefetchBlock];
  for (size_t first = 0; first < rows; first += kPrefetchBlock) {
    const size_t n = std::min(kPrefetchBlock, rows - first);
    for (size_t i = 0; i < n; ++i) {
      block_keys[i] = keys.Next();
      // Generated values wrap modulo 2^32.
      block_values[i] =
          values ? values->Next() : node.first_value + static_cast<uint32_t>(first + i);
      index.Prefetch(block_keys[i]);
    }
    for (size_t i = 0; i < n; ++i) {
      if (block_keys[i] == kEmptyKeyOf<K>) {
        ++s.invalid_rows;
        continue;
      }
      InsertRow(index, block_keys[i], block_values[i], bound, s);
    }
  }
  return s;
}

// Inserts a batch build's rows into the cleared table, chunk by chunk.
template <KeyWord K>
BuildStatistics InsertRows(const BuildBatchIndexNodeT<K>& node, CpuHashIndex<K>& index) {
  const uint32_t bound = index.spec().probe_bound();
  BuildStatistics s;
  for (const BatchChunkT<K>& chunk : node.chunks) {
    const bool masked = !chunk.validity.empty();
    for (size_t i = 0; i < chunk.keys.size(); ++i) {
      const K key = chunk.keys[i];
      if (key == kEmptyKeyOf<K> || (masked && chunk.validity[i] == 0)) {
        ++s.invalid_rows;
        continue;
      }
      InsertRow(index, key, chunk.row_base + static_cast<uint32_t>(i), bound, s);
    }
  }
  return s;
}

// Rows per task of the winner search below which splitting further costs more
// than it saves.
constexpr size_t kMinRowsPerTask = 16384;

// The valid rows of a build node in global order, as (global row, key, value):
// for_each(begin, end, fn) calls fn for the valid rows among [begin, end).
template <KeyWord K>
struct PlainRows {
  const BuildIndexNodeT<K>& node;
  template <class Fn>
  void operator()(size_t begin, size_t end, Fn&& fn) const {
    ChunkCursor<K> keys(node.keys, begin);
    std::optional<ChunkCursor<uint32_t>> values;
    if (node.values.has_value()) values.emplace(*node.values, begin);
    for (size_t r = begin; r < end; ++r) {
      const K key = keys.Next();
      const uint32_t value = values ? values->Next() : node.first_value + static_cast<uint32_t>(r);
      if (key != kEmptyKeyOf<K>) fn(r, key, value);
    }
  }
};

template <KeyWord K>
struct BatchRows {
  const BuildBatchIndexNodeT<K>& node;
  template <class Fn>
  void operator()(size_t begin, size_t end, Fn&& fn) const {
    size_t first = 0;  // global row of the chunk's first row
    for (const BatchChunkT<K>& chunk : node.chunks) {
      if (first >= end) break;
      const size_t from = std::max(begin, first), to = std::min(end, first + chunk.keys.size());
      for (size_t r = from; r < to; ++r) {
        const size_t i = r - first;
        const K key = chunk.keys[i];
        if (key == kEmptyKeyOf<K> || (!chunk.validity.empty() && chunk.validity[i] == 0)) continue;
        fn(r, key, chunk.row_base + static_cast<uint32_t>(i));
      }
      first += chunk.keys.size();
    }
  }
};

// The valid rows of a key-schema build in global order, as (global row, key,
// row): keys are the index's stored key columns, so a row's value inside the
// table is its row (the index maps it to the row's value on output).
struct ColumnRows {
  const StoredKeys& keys;
  std::span<const uint64_t> fingerprints;
  std::span<const uint8_t> valid;
  ColumnRowKey KeyOf(size_t r) const {
    return ColumnRowKey{fingerprints[r], keys.views().data(), r, valid[r] == 0};
  }
  template <class Fn>
  void operator()(size_t begin, size_t end, Fn&& fn) const {
    for (size_t r = begin; r < end; ++r) {
      if (valid[r] != 0) fn(r, KeyOf(r), static_cast<uint32_t>(r));
    }
  }
};

// Inserts a key-schema build's rows into the cleared table, in global row order.
BuildStatistics InsertColumnRows(const ColumnRows& rows, CpuHashIndex<ColumnKey>& index) {
  const uint32_t bound = index.spec().probe_bound();
  BuildStatistics s;
  const size_t n = rows.fingerprints.size();
  for (size_t first = 0; first < n; first += kPrefetchBlock) {
    const size_t end = std::min(n, first + kPrefetchBlock);
    for (size_t r = first; r < end; ++r) index.Prefetch(rows.KeyOf(r));
    for (size_t r = first; r < end; ++r) {
      const ColumnRowKey key = rows.KeyOf(r);
      if (key.null) {
        ++s.invalid_rows;
        continue;
      }
      InsertRow(index, key, static_cast<uint32_t>(r), bound, s);
    }
  }
  return s;
}

// A key-schema build's inputs as the index keeps them: every row's key columns
// (`chunks` in order), value and fingerprint.
struct ColumnBuildInput {
  StoredKeys keys;
  HostArray<uint32_t> values;
  HostArray<uint64_t> fingerprints;
  HostArray<uint8_t> valid;
};

ColumnBuildInput PrepareColumnBuild(const CpuHashIndex<ColumnKey>& index,
                                    std::span<const KeyColumns* const> chunks, uint64_t rows,
                                    ThreadPool& pool) {
  bool nulls = false;
  std::vector<uint64_t> value_bytes(index.spec().key_columns.size(), 0);
  for (const KeyColumns* chunk : chunks) {
    for (size_t c = 0; c < chunk->columns.size(); ++c) {
      nulls = nulls || !chunk->columns[c].validity.empty();
      value_bytes[c] += detail::KeyValueBytes(chunk->columns[c]);
    }
  }
  ColumnBuildInput in{StoredKeys(index.spec().key_columns, rows, nulls, value_bytes),
                      HostArray<uint32_t>(rows), HostArray<uint64_t>(rows),
                      HostArray<uint8_t>(rows)};
  uint64_t first = 0;
  for (const KeyColumns* chunk : chunks) {
    const uint64_t n = chunk->rows();
    in.keys.Append(*chunk);
    KeyFingerprints(*chunk, index.fingerprint_bits(), in.fingerprints.span().subspan(first, n),
                    in.valid.span().subspan(first, n), pool);
    first += n;
  }
  return in;
}

// winners[s] = the lowest valid row whose key and value are slot s's (the row
// whose payload the slot keeps: docs/engine.md "Payload"), kNoRow for an empty
// slot. Without overflow that is the key's first row; the value test keeps
// payload and table consistent when the bound dropped a key that came back
// later with another row. With `row_slots` (one per row) also row_slots[r] =
// the slot holding row r's key, kNoRow for an invalid row or a key that is not
// stored. Parallel over rows; a minimum, so independent of the split.
template <IndexKey K, class Rows>
void FindWinners(const CpuHashIndex<K>& index, size_t rows, const Rows& for_each,
                 std::span<uint32_t> winners, std::span<uint32_t> row_slots, ThreadPool& pool) {
  std::fill(winners.begin(), winners.end(), kNoRow);
  const bool record = !row_slots.empty();
  const uint32_t bound = index.spec().probe_bound();  // every stored key lies within it
  const std::vector<size_t> bounds = SplitRows(rows, size_t{pool.size()} * 4, kMinRowsPerTask);
  pool.ParallelFor(bounds.size() - 1, [&](size_t p) {
    if (record) std::fill(row_slots.begin() + bounds[p], row_slots.begin() + bounds[p + 1], kNoRow);
    for_each(bounds[p], bounds[p + 1], [&](size_t r, const auto& key, uint32_t value) {
      uint32_t probes = 0;
      const uint32_t slot = index.FindSlot(key, bound, probes);
      if (slot == CpuHashIndex<K>::kNoSlot) return;
      if (record) row_slots[r] = slot;
      if (index.SlotValue(slot) != value) return;
      std::atomic_ref<uint32_t> winner(winners[slot]);
      uint32_t current = winner.load(std::memory_order_relaxed);
      const auto row = static_cast<uint32_t>(r);  // Validate: rows < 2^32 - 1
      while (row < current &&
             !winner.compare_exchange_weak(current, row, std::memory_order_relaxed)) {
      }
    });
  });
}

// Lays out the groups of a kKeepAll build (docs/engine.md, "Multi-value
// indexes"): slot s's group is its winner row winners[s] and every later valid
// row of its key, in source-row order; earlier rows of the key (a generation
// the probe bound dropped) are not kept. `row_slots` (from FindWinners) is
// consumed: rows left out are set to kNoRow. Writes one range per slot into
// `groups`, allocates `values` (and `kept_rows`, the source row of every
// position, when given) for the kept rows and fills them. Returns the largest
// group. Sequential in row order, as the insert is: a parallel count would
// serialise on a key holding most rows, and a stable parallel scatter needs
// per-part counts of every slot.
template <IndexKey K, class Rows>
uint64_t BuildGroups(size_t rows, const Rows& for_each, std::span<const uint32_t> winners,
                     std::span<uint32_t> row_slots, std::span<GroupRange> groups,
                     HostArray<uint32_t>& values, HostArray<uint32_t>* kept_rows) {
  std::fill(groups.begin(), groups.end(), GroupRange{0, 0});
  for (size_t r = 0; r < rows; ++r) {
    const uint32_t s = row_slots[r];
    if (s == kNoRow) continue;
    if (r < winners[s]) {
      row_slots[r] = kNoRow;
      continue;
    }
    ++groups[s].size;
  }
  uint32_t kept = 0;  // at most the rows: < 2^32
  uint64_t largest = 0;
  for (GroupRange& g : groups) {
    g.first = kept;
    kept += g.size;
    largest = std::max<uint64_t>(largest, g.size);
  }
  values = HostArray<uint32_t>(kept);
  if (kept_rows != nullptr) *kept_rows = HostArray<uint32_t>(kept);
  // In row order; each group's `first` serves as its cursor, then is restored.
  for_each(0, rows, [&](size_t r, const auto&, uint32_t value) {
    const uint32_t s = row_slots[r];
    if (s == kNoRow) return;
    const uint32_t position = groups[s].first++;
    values[position] = value;
    if (kept_rows != nullptr) (*kept_rows)[position] = static_cast<uint32_t>(r);
  });
  // An empty group's range is {0, 0}, as on the CUDA backend, so that both
  // export the same image.
  for (GroupRange& g : groups) g.first = g.size == 0 ? 0 : g.first - g.size;
  return largest;
}

// Rebuilds `index`: `insert` (run on the cleared table) inserts the rows and
// returns the statistics, then (kKeepAll) the groups are laid out and `payload`
// is stored beside the table: per slot, or per kept row of a kKeepAll index.
template <IndexKey K, class Rows, class Insert>
void Rebuild(CpuHashIndex<K>& index, const std::vector<ColumnView>& payload, uint64_t rows,
             const Rows& for_each, Insert&& insert, BuildStatistics* out, ThreadPool& pool) {
  const bool keep_all = index.keeps_all();
  // Everything whose size the node fixes, before the table is touched.
  const uint64_t slots = index.spec().capacity;
  HostArray<uint32_t> winners;
  HostArray<uint32_t> row_slots;
  HostArray<GroupRange> groups;
  std::vector<StoredColumn> stored;
  if (!payload.empty() || keep_all) winners = HostArray<uint32_t>(slots);
  if (keep_all) {
    row_slots = HostArray<uint32_t>(rows);
    groups = HostArray<GroupRange>(slots);
  } else {
    stored.reserve(payload.size());
    for (const ColumnView& column : payload) stored.push_back(AllocateStored(column, slots));
  }
  index.Clear();
  BuildStatistics s = insert();
  std::vector<PayloadColumnInfo> infos;
  HostArray<uint32_t> values;
  try {
    if (winners.size() != 0)
      FindWinners(index, rows, for_each, winners.span(), row_slots.span(), pool);
    // Payload position -> source row: a slot's winner, or a kept row.
    std::span<const uint32_t> payload_rows = winners.span();
    HostArray<uint32_t> kept_rows;
    if (keep_all) {
      s.max_group_rows =
          BuildGroups<K>(rows, for_each, winners.span(), row_slots.span(), groups.span(), values,
                         payload.empty() ? nullptr : &kept_rows);
      payload_rows = kept_rows.span();
      stored.reserve(payload.size());
      for (const ColumnView& column : payload) {
        stored.push_back(AllocateStored(column, kept_rows.size()));
      }
    }
    for (size_t c = 0; c < payload.size(); ++c) {
      StoreColumn(payload[c], payload_rows, stored[c], pool);
      infos.push_back(stored[c].Info());
    }
  } catch (...) {
    // The table is new, its groups or payload could not be stored: leave no
    // half build, but what an empty build leaves (kKeepAll: empty groups).
    index.Clear();
    if (keep_all) {
      std::fill(groups.span().begin(), groups.span().end(), GroupRange{0, 0});
      index.SetGroups(std::move(groups), {});
    }
    index.SetPayload({});
    index.RecordBuild(BuildStatistics{}, 0);
    throw;
  }
  if (keep_all) index.SetGroups(std::move(groups), std::move(values));
  index.SetPayload(std::move(stored));
  index.RecordBuild(s, rows, std::move(infos));
  if (out != nullptr) *out = s;
}

// Rebuilds a key-schema index from its prepared input.
void RunColumnBuild(CpuHashIndex<ColumnKey>& index, const std::vector<ColumnView>& payload,
                    ColumnBuildInput in, BuildStatistics* out, ThreadPool& pool) {
  const uint64_t rows = in.fingerprints.size();
  HostArray<uint64_t> fingerprints = std::move(in.fingerprints);
  HostArray<uint8_t> valid = std::move(in.valid);
  StoredKeys keys = std::move(in.keys);
  HostArray<uint32_t> values = std::move(in.values);
  Rebuild(
      index, payload, rows, ColumnRows{index.stored_keys(), fingerprints.span(), valid.span()},
      [&] {
        index.SetKeys(std::move(keys), std::move(values));
        return InsertColumnRows(
            ColumnRows{index.stored_keys(), fingerprints.span(), valid.span()}, index);
      },
      out, pool);
}

}  // namespace

template <KeyWord K>
void RunBuild(const BuildIndexNodeT<K>& node, CpuHashIndex<K>& index, ThreadPool& pool) {
  const size_t rows = TotalRows(node.keys);
  Rebuild(
      index, node.payload, rows, PlainRows<K>{node}, [&] { return InsertRows(node, index, rows); },
      node.statistics, pool);
}

template <KeyWord K>
void RunBatchBuild(const BuildBatchIndexNodeT<K>& node, CpuHashIndex<K>& index, ThreadPool& pool) {
  uint64_t rows = 0;
  for (const BatchChunkT<K>& chunk : node.chunks) rows += chunk.keys.size();
  Rebuild(
      index, node.payload, rows, BatchRows<K>{node}, [&] { return InsertRows(node, index); },
      node.statistics, pool);
}

// Key schemas: the rows' key columns, values and fingerprints are prepared
// first, handed to the index once its table is cleared, then inserted.
void RunBuild(const BuildIndexNodeT<ColumnKey>& node, CpuHashIndex<ColumnKey>& index,
              ThreadPool& pool) {
  const uint64_t rows = node.keys.rows();
  const KeyColumns* chunks[] = {&node.keys};
  ColumnBuildInput in = PrepareColumnBuild(index, chunks, rows, pool);
  if (node.values.has_value()) {
    ChunkCursor<uint32_t> values(*node.values, 0);
    for (uint64_t r = 0; r < rows; ++r) in.values[r] = values.Next();
  } else {
    for (uint64_t r = 0; r < rows; ++r) in.values[r] = node.first_value + static_cast<uint32_t>(r);
  }
  RunColumnBuild(index, node.payload, std::move(in), node.statistics, pool);
}

void RunBatchBuild(const BuildBatchIndexNodeT<ColumnKey>& node, CpuHashIndex<ColumnKey>& index,
                   ThreadPool& pool) {
  uint64_t rows = 0;
  std::vector<const KeyColumns*> chunks;
  for (const BatchChunkT<ColumnKey>& chunk : node.chunks) {
    rows += chunk.keys.rows();
    chunks.push_back(&chunk.keys);
  }
  ColumnBuildInput in = PrepareColumnBuild(index, chunks, rows, pool);
  uint64_t first = 0;
  for (const BatchChunkT<ColumnKey>& chunk : node.chunks) {
    const uint64_t n = chunk.keys.rows();
    for (uint64_t i = 0; i < n; ++i) {
      in.values[first + i] = chunk.row_base + static_cast<uint32_t>(i);
      if (!chunk.validity.empty() && chunk.validity[i] == 0) in.valid[first + i] = 0;
    }
    first += n;
  }
  RunColumnBuild(index, node.payload, std::move(in), node.statistics, pool);
}

template void RunBuild(const BuildIndexNodeT<uint32_t>&, CpuHashIndex<uint32_t>&, ThreadPool&);
template void RunBuild(const BuildIndexNodeT<uint64_t>&, CpuHashIndex<uint64_t>&, ThreadPool&);
template void RunBatchBuild(const BuildBatchIndexNodeT<uint32_t>&, CpuHashIndex<uint32_t>&,
                            ThreadPool&);
template void RunBatchBuild(const BuildBatchIndexNodeT<uint64_t>&, CpuHashIndex<uint64_t>&,
                            ThreadPool&);

}  // namespace gpujoin::engine::cpu
