// Lookups and joins on the CPU, parallel over query rows. Every row's outputs
// depend only on the row, and statistics are sums and maxima, so results do not
// depend on how rows are split between threads.
#include <algorithm>
#include <vector>

#include "cpu/chunk_cursor.hpp"
#include "cpu/cpu_ops.hpp"

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
// optional found flags and probe counts at the rows' positions.
template <KeyWord K>
QueryStatistics ProbeRange(const CpuHashIndex<K>& index, uint32_t bound, const Chunked<K>& keys,
                           size_t begin, size_t end, uint32_t* values, uint8_t* found,
                           uint32_t* probes) {
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
      uint32_t value = kEmptyKey;
      uint32_t examined = 0;
      const bool hit = index.Find(block[i], bound, value, examined);
      if (hit) {
        ++s.found;
      } else {
        ++s.missing;
        value = kEmptyKey;
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
void RunLookup(const LookupNodeT<K>& node, const CpuHashIndex<K>& index, ThreadPool& pool) {
  const uint32_t bound = QueryBound(index, node.max_probe_count);
  const size_t rows = TotalRows(node.keys);
  const std::vector<size_t> bounds = SplitRows(rows, size_t{pool.size()} * 4, kMinRowsPerTask);
  const size_t parts = bounds.size() - 1;
  std::vector<QueryStatistics> partial(parts);
  uint8_t* found = node.found.empty() ? nullptr : node.found.data();
  uint32_t* probes = node.probes.empty() ? nullptr : node.probes.data();
  pool.ParallelFor(parts, [&](size_t p) {
    partial[p] = ProbeRange(index, bound, node.keys, bounds[p], bounds[p + 1], node.values.data(),
                            found, probes);
  });
  if (node.statistics != nullptr) {
    QueryStatistics total;
    for (const auto& s : partial) Merge(total, s);
    *node.statistics = total;
  }
}

template <KeyWord K>
void RunJoin(const JoinNodeT<K>& node, const CpuHashIndex<K>& index, ThreadPool& pool) {
  const uint32_t bound = QueryBound(index, node.max_probe_count);
  const bool build_overflowed = index.build_statistics().overflow_rows > 0;
  std::vector<uint32_t> right;
  std::vector<uint8_t> own_found;
  for (const JoinBatchT<K>& batch : node.batches) {
    const size_t rows = TotalRows(batch.keys);
    const size_t capacity = batch.out_left_rows.size();
    right.resize(rows);
    uint8_t* found = batch.found.data();
    if (batch.found.empty()) {
      own_found.resize(rows);
      found = own_found.data();
    }
    uint32_t* probes = batch.probes.empty() ? nullptr : batch.probes.data();

    // Pass 1: probe every left row and count matches per part.
    const std::vector<size_t> bounds = SplitRows(rows, size_t{pool.size()} * 4, kMinRowsPerTask);
    const size_t parts = bounds.size() - 1;
    std::vector<QueryStatistics> partial(parts);
    pool.ParallelFor(parts, [&](size_t p) {
      partial[p] = ProbeRange(index, bound, batch.keys, bounds[p], bounds[p + 1], right.data(),
                              found, probes);
    });

    // Exclusive scan of the per-part match counts gives each part its first pair.
    std::vector<uint64_t> first_pair(parts + 1, 0);
    QueryStatistics total;
    for (size_t p = 0; p < parts; ++p) {
      first_pair[p + 1] = first_pair[p] + partial[p].found;
      Merge(total, partial[p]);
    }
    const uint64_t count = first_pair[parts];

    // Pass 2: scatter the stable prefix of pairs that fits the capacity.
    pool.ParallelFor(parts, [&](size_t p) {
      uint64_t out = first_pair[p];
      for (size_t r = bounds[p]; r < bounds[p + 1] && out < capacity; ++r) {
        if (!found[r]) continue;
        batch.out_left_rows[out] = batch.left_rows.empty()
                                       ? batch.first_left_row + static_cast<uint32_t>(r)
                                       : batch.left_rows[r];
        batch.out_right_rows[out] = right[r];
        ++out;
      }
    });

    batch.result->count = count;
    batch.result->overflow = count > capacity || build_overflowed;
    batch.result->statistics = total;
  }
}

template void RunLookup(const LookupNodeT<uint32_t>&, const CpuHashIndex<uint32_t>&, ThreadPool&);
template void RunLookup(const LookupNodeT<uint64_t>&, const CpuHashIndex<uint64_t>&, ThreadPool&);
template void RunJoin(const JoinNodeT<uint32_t>&, const CpuHashIndex<uint32_t>&, ThreadPool&);
template void RunJoin(const JoinNodeT<uint64_t>&, const CpuHashIndex<uint64_t>&, ThreadPool&);

}  // namespace gpujoin::engine::cpu
