// Lookups and joins on the CPU, parallel over query rows. Every row's outputs
// depend only on the row, and statistics are sums and maxima, so results do not
// depend on how rows are split between threads. Gathers take the slot every
// output row matched (the probe records it only when payload is gathered) and
// read the index's payload in slot order (cpu_payload.hpp).
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cpu/chunk_cursor.hpp"
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

// Probes rows [begin, end) of `keys`, writing values (kEmptyKey when missing),
// optional found flags and probe counts at the rows' positions, and with kSlots
// the matched slot (kNoRow when missing).
template <bool kSlots = false, KeyWord K>
QueryStatistics ProbeRange(const CpuHashIndex<K>& index, uint32_t bound, const Chunked<K>& keys,
                           size_t begin, size_t end, uint32_t* values, uint8_t* found,
                           uint32_t* probes, uint32_t* slots = nullptr) {
  QueryStatistics s;
  ChunkCursor<K> cursor(keys, begin);
  // Rows go in small blocks: prefetching a block's home slots first lets their
  // cache misses overlap instead of paying them one after another.
  K block[kPrefetchBlock];
  for (size_t first = begin; first < end; first += kPrefetchBlock) {
    const size_t n = std::min(kPrefetchBlock, end - first);
    for (size_t i = 0; i < n; ++i) {
      block[i] = cursor.Next();
      index.Prefetch(block[i]);
    }
    for (size_t i = 0; i < n; ++i) {
      const size_t r = first + i;
      uint32_t examined = 0;
      const uint32_t slot = index.FindSlot(block[i], bound, examined);
      const bool hit = slot != CpuHashIndex<K>::kNoSlot;
      const uint32_t value = hit ? index.ValueAt(slot) : kEmptyKey;
      if constexpr (kSlots) slots[r] = slot;  // kNoSlot is kNoRow
      if (hit) {
        ++s.found;
      } else {
        ++s.missing;
      }
      s.total_probes += examined;
      s.max_probes = std::max<uint64_t>(s.max_probes, examined);
      values[r] = value;
      if (found != nullptr) found[r] = hit ? 1 : 0;
      if (probes != nullptr) probes[r] = examined;
    }
  }
  return s;
}

}  // namespace

template <KeyWord K>
absl::Status RunLookup(const LookupNodeT<K>& node, const CpuHashIndex<K>& index, ThreadPool& pool,
                       size_t node_index) {
  const uint32_t bound = QueryBound(index, node.max_probe_count);
  const size_t rows = TotalRows(node.keys);
  const std::vector<size_t> bounds = SplitRows(rows, size_t{pool.size()} * 4, kMinRowsPerTask);
  const size_t parts = bounds.size() - 1;
  std::vector<QueryStatistics> partial(parts);
  uint8_t* found = node.found.empty() ? nullptr : node.found.data();
  uint32_t* probes = node.probes.empty() ? nullptr : node.probes.data();
  const bool gather = !node.gather.empty();
  HostArray<uint32_t> slots(gather ? rows : 0);
  pool.ParallelFor(parts, [&](size_t p) {
    if (gather) {
      partial[p] = ProbeRange<true>(index, bound, node.keys, bounds[p], bounds[p + 1],
                                    node.values.data(), found, probes, slots.data());
    } else {
      partial[p] = ProbeRange(index, bound, node.keys, bounds[p], bounds[p + 1], node.values.data(),
                              found, probes);
    }
  });
  if (node.statistics != nullptr) {
    QueryStatistics total;
    for (const auto& s : partial) Merge(total, s);
    *node.statistics = total;
  }
  if (!gather) return absl::OkStatus();
  return GatherColumns(index.stored_payload(), node.gather, slots.span(), pool,
                       absl::StrCat("node ", node_index, " (lookup)"));
}

template <KeyWord K>
absl::Status RunJoin(const JoinNodeT<K>& node, const CpuHashIndex<K>& index, ThreadPool& pool,
                     size_t node_index) {
  const uint32_t bound = QueryBound(index, node.max_probe_count);
  const bool build_overflowed = index.build_statistics().overflow_rows > 0;
  std::vector<uint32_t> right;
  std::vector<uint8_t> own_found;
  for (size_t b = 0; b < node.batches.size(); ++b) {
    const JoinBatchT<K>& batch = node.batches[b];
    const size_t rows = TotalRows(batch.keys);
    const size_t capacity = batch.out_left_rows.size();
    right.resize(rows);
    uint8_t* found = batch.found.data();
    if (batch.found.empty()) {
      own_found.resize(rows);
      found = own_found.data();
    }
    uint32_t* probes = batch.probes.empty() ? nullptr : batch.probes.data();
    // Gathers need the slot of every pair; count-only batches gather nothing.
    const bool gather = !batch.gather.empty() && capacity > 0;
    HostArray<uint32_t> left_slots(gather ? rows : 0);

    // Pass 1: probe every left row and count matches per part.
    const std::vector<size_t> bounds = SplitRows(rows, size_t{pool.size()} * 4, kMinRowsPerTask);
    const size_t parts = bounds.size() - 1;
    std::vector<QueryStatistics> partial(parts);
    pool.ParallelFor(parts, [&](size_t p) {
      if (gather) {
        partial[p] = ProbeRange<true>(index, bound, batch.keys, bounds[p], bounds[p + 1],
                                      right.data(), found, probes, left_slots.data());
      } else {
        partial[p] = ProbeRange(index, bound, batch.keys, bounds[p], bounds[p + 1], right.data(),
                                found, probes);
      }
    });

    // Exclusive scan of the per-part match counts gives each part its first pair.
    std::vector<uint64_t> first_pair(parts + 1, 0);
    QueryStatistics total;
    for (size_t p = 0; p < parts; ++p) {
      first_pair[p + 1] = first_pair[p] + partial[p].found;
      Merge(total, partial[p]);
    }
    const uint64_t count = first_pair[parts];
    const size_t written = static_cast<size_t>(std::min<uint64_t>(count, capacity));
    HostArray<uint32_t> pair_slots(gather ? written : 0);

    // Pass 2: scatter the stable prefix of pairs that fits the capacity.
    pool.ParallelFor(parts, [&](size_t p) {
      uint64_t out = first_pair[p];
      for (size_t r = bounds[p]; r < bounds[p + 1] && out < capacity; ++r) {
        if (!found[r]) continue;
        batch.out_left_rows[out] = batch.left_rows.empty()
                                       ? batch.first_left_row + static_cast<uint32_t>(r)
                                       : batch.left_rows[r];
        batch.out_right_rows[out] = right[r];
        if (gather) pair_slots.data()[out] = left_slots.data()[r];
        ++out;
      }
    });

    batch.result->count = count;
    batch.result->overflow = count > capacity || build_overflowed;
    batch.result->statistics = total;
    if (gather) {
      GPUJOIN_RETURN_IF_ERROR(
          GatherColumns(index.stored_payload(), batch.gather, pair_slots.span(), pool,
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

}  // namespace gpujoin::engine::cpu
