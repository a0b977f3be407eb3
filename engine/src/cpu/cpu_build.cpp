// Index builds on the CPU. Builds run sequentially in global source order: the
// first row of each key stores it, which is exactly the lowest-row winner that
// the contract requires (the CUDA backend reaches the same winner with an atomic
// minimum over source rows). Keys are kept in Robin Hood order
// (CpuHashIndex::Insert), so without overflow the layout equals the CUDA one.
#include <algorithm>
#include <optional>

#include "cpu/chunk_cursor.hpp"
#include "cpu/cpu_ops.hpp"

namespace gpujoin::engine::cpu {
namespace {

// Rows whose home slots are prefetched together.
constexpr size_t kPrefetchBlock = 16;

// Folds one valid row into the statistics.
template <KeyWord K>
void InsertRow(CpuHashIndex<K>& index, K key, uint32_t value, uint32_t bound, BuildStatistics& s) {
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

void Finish(HashIndex& index, const BuildStatistics& s, uint64_t rows, BuildStatistics* out) {
  index.RecordBuild(s, rows);
  if (out != nullptr) *out = s;
}

}  // namespace

template <KeyWord K>
void RunBuild(const BuildIndexNodeT<K>& node, CpuHashIndex<K>& index) {
  index.Clear();
  const uint32_t bound = index.spec().probe_bound();
  const size_t rows = TotalRows(node.keys);
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
  Finish(index, s, rows, node.statistics);
}

template <KeyWord K>
void RunBatchBuild(const BuildBatchIndexNodeT<K>& node, CpuHashIndex<K>& index) {
  index.Clear();
  const uint32_t bound = index.spec().probe_bound();
  BuildStatistics s;
  uint64_t rows = 0;
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
    rows += chunk.keys.size();
  }
  Finish(index, s, rows, node.statistics);
}

template void RunBuild(const BuildIndexNodeT<uint32_t>&, CpuHashIndex<uint32_t>&);
template void RunBuild(const BuildIndexNodeT<uint64_t>&, CpuHashIndex<uint64_t>&);
template void RunBatchBuild(const BuildBatchIndexNodeT<uint32_t>&, CpuHashIndex<uint32_t>&);
template void RunBatchBuild(const BuildBatchIndexNodeT<uint64_t>&, CpuHashIndex<uint64_t>&);

}  // namespace gpujoin::engine::cpu
