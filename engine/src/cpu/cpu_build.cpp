// Index builds on the CPU. Builds run sequentially in global source order: the
// first row of each key claims its slot, which is exactly the lowest-row winner
// that the contract requires (the CUDA backend reaches the same winner with an
// atomic minimum over source rows).
#include <algorithm>

#include "cpu/chunk_cursor.hpp"
#include "cpu/cpu_ops.hpp"

namespace gpujoin::engine::cpu {
namespace {

// Folds one valid row into the statistics.
void InsertRow(CpuHashIndex& index, uint32_t key, uint32_t value, uint32_t bound,
               BuildStatistics& s) {
  uint32_t probes = 0;
  switch (index.Insert(key, value, bound, probes)) {
    case InsertOutcome::kUnique: ++s.unique_keys; break;
    case InsertOutcome::kDuplicate: ++s.duplicate_rows; break;
    case InsertOutcome::kOverflow: ++s.overflow_rows; break;
  }
  s.total_probes += probes;
  s.max_probes = std::max<uint64_t>(s.max_probes, probes);
}

void Finish(CpuHashIndex& index, const BuildStatistics& s, uint64_t rows,
            BuildStatistics* out) {
  index.RecordBuild(s, rows);
  if (out != nullptr) *out = s;
}

}  // namespace

void RunBuild(const BuildIndexNode& node, CpuHashIndex& index) {
  index.Clear();
  const uint32_t bound = index.spec().probe_bound();
  const size_t rows = TotalRows(node.keys);
  BuildStatistics s;
  ChunkCursor<uint32_t> keys(node.keys, 0);
  if (node.values.has_value()) {
    ChunkCursor<uint32_t> values(*node.values, 0);
    for (size_t r = 0; r < rows; ++r) {
      const uint32_t key = keys.Next();
      const uint32_t value = values.Next();
      if (key == kEmptyKey) {
        ++s.invalid_rows;
        continue;
      }
      InsertRow(index, key, value, bound, s);
    }
  } else {
    for (size_t r = 0; r < rows; ++r) {
      const uint32_t key = keys.Next();
      if (key == kEmptyKey) {
        ++s.invalid_rows;
        continue;
      }
      // Generated values wrap modulo 2^32.
      InsertRow(index, key, node.first_value + static_cast<uint32_t>(r), bound, s);
    }
  }
  Finish(index, s, rows, node.statistics);
}

void RunBatchBuild(const BuildBatchIndexNode& node, CpuHashIndex& index) {
  index.Clear();
  const uint32_t bound = index.spec().probe_bound();
  BuildStatistics s;
  uint64_t rows = 0;
  for (const BatchChunk& chunk : node.chunks) {
    const bool masked = !chunk.validity.empty();
    for (size_t i = 0; i < chunk.keys.size(); ++i) {
      const uint32_t key = chunk.keys[i];
      if (key == kEmptyKey || (masked && chunk.validity[i] == 0)) {
        ++s.invalid_rows;
        continue;
      }
      InsertRow(index, key, chunk.row_base + static_cast<uint32_t>(i), bound, s);
    }
    rows += chunk.keys.size();
  }
  Finish(index, s, rows, node.statistics);
}

}  // namespace gpujoin::engine::cpu
