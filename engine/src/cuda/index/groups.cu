// The group pass of a multi-value build and the group lookups of queries
// (groups.hpp): rows probed into sort keys, a stable radix sort by slot, group
// boundaries, ranges and the value list.
#include <cuda_runtime.h>

#include <atomic>
#include <bit>
#include <cstdint>
#include <cub/device/device_radix_sort.cuh>

#include "cuda/index/build_paths.hpp"
#include "cuda/index/groups.hpp"
#include "cuda/index/insert.cuh"
#include "cuda/index/lookup.hpp"
#include "cuda/index/query.cuh"
#include "cuda/kernel_utils.cuh"

namespace gpujoin::engine::detail {
namespace {

// Bits of the sort keys: slots [0, capacity) and the sentinel `capacity`.
int SortBits(uint32_t capacity) { return std::bit_width(capacity); }

// The pieces of the scratch (Carver offsets): sort keys and rows, double
// buffered, the winners (overflow only) and CUB's temporary storage.
struct GroupScratch {
  size_t keys[2], rows[2], winners, temp, temp_bytes, total;
};

GroupScratch LayoutOf(uint32_t capacity, uint64_t rows, bool overflow) {
  GroupScratch g;
  Carver c;
  for (int b = 0; b < 2; ++b) g.keys[b] = c.Take(rows * sizeof(uint32_t));
  for (int b = 0; b < 2; ++b) g.rows[b] = c.Take(rows * sizeof(uint32_t));
  g.winners = c.Take(overflow ? uint64_t{capacity} * sizeof(uint32_t) : 0);
  cub::DoubleBuffer<uint32_t> keys(nullptr, nullptr), values(nullptr, nullptr);
  g.temp_bytes = 0;
  (void)cub::DeviceRadixSort::SortPairs(nullptr, g.temp_bytes, keys, values, uint32_t(rows), 0,
                                        SortBits(capacity));
  if (g.temp_bytes == 0) g.temp_bytes = 1;
  g.temp = c.Take(g.temp_bytes);
  g.total = c.offset;
  return g;
}

// One thread per source row (Query: the probe of the build's own rows,
// query.cuh), grid-stride: row i's sort key is the slot holding its key (found
// by the probe of a lookup), or `capacity` when the row is invalid or its key
// was dropped; its sort value is i. With `winners` (builds with overflow) a row
// whose value is its slot's competes for the slot's winner (lowest row), as the
// payload winner pass does.
template <class Query>
__global__ void __launch_bounds__(kBlockThreads)
    RowSlotsKernel(Query query, const uint32_t* __restrict__ validity, uint64_t rows,
                   uint32_t capacity, FinalizeArgs f, uint32_t* __restrict__ winners,
                   uint32_t* __restrict__ sort_keys, uint32_t* __restrict__ sort_rows) {
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  for (uint64_t i = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < rows; i += stride) {
    uint32_t s = capacity;
    if (validity == nullptr || validity[i] != 0) {
      const ProbeResult r = query(i);
      if (r.found) {
        s = r.slot;
        if (winners != nullptr) {
          const uint32_t row = uint32_t(i);
          const uint32_t value = FinalValue(row, f.values, f.first_value, f.chunk_starts,
                                            f.chunk_bases, f.chunk_count);
          if (value == r.value) atomicMin(winners + s, row);
        }
      }
    }
    sort_keys[i] = s;
    sort_rows[i] = uint32_t(i);
  }
}

// Builds with overflow: a row before its slot's winner belongs to a dropped
// generation of the key and is not kept; counts the kept rows.
__global__ void __launch_bounds__(kBlockThreads)
    DropEarlierRowsKernel(const uint32_t* __restrict__ winners, uint32_t* __restrict__ sort_keys,
                          uint64_t rows, uint32_t capacity, DeviceGroupStats* stats) {
  unsigned long long kept[1] = {0};
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  for (uint64_t i = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < rows; i += stride) {
    const uint32_t s = sort_keys[i];
    if (s == capacity) continue;
    if (i < __ldg(winners + s)) {
      sort_keys[i] = capacity;
    } else {
      ++kept[0];
    }
  }
  BlockFlushStats<1>(kept, 0, &stats->kept, nullptr);
}

// Over the sorted keys: the first position of each group becomes its range's
// start, one past its last the range's size field (turned into the size by
// SizesKernel). Sentinel keys sort last and are skipped.
__global__ void __launch_bounds__(kBlockThreads)
    GroupBoundsKernel(const uint32_t* __restrict__ keys, uint64_t rows, uint32_t capacity,
                      GroupRange* __restrict__ ranges) {
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  for (uint64_t k = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; k < rows; k += stride) {
    const uint32_t s = keys[k];
    if (s == capacity) continue;
    if (k == 0 || keys[k - 1] != s) ranges[s].start = uint32_t(k);
    if (k + 1 == rows || keys[k + 1] != s) ranges[s].size = uint32_t(k + 1);
  }
}

// Per slot: size = end - start (0 for a slot without rows: both stay 0), and
// the largest group.
__global__ void __launch_bounds__(kBlockThreads)
    GroupSizesKernel(GroupRange* __restrict__ ranges, uint32_t capacity, DeviceGroupStats* stats) {
  unsigned long long largest = 0;
  const unsigned long long none[1] = {0};
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  for (uint64_t s = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; s < capacity; s += stride) {
    GroupRange r = ranges[s];
    r.size -= r.start;
    ranges[s] = r;
    if (r.size > largest) largest = r.size;
  }
  BlockFlushStats<1>(none, largest, &stats->kept, &stats->max_group_rows);
}

__global__ void __launch_bounds__(kBlockThreads)
    GroupValuesKernel(const uint32_t* __restrict__ grouped_rows, uint64_t kept, FinalizeArgs f,
                      uint32_t* __restrict__ values) {
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  for (uint64_t p = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; p < kept; p += stride) {
    values[p] = FinalValue(__ldcs(grouped_rows + p), f.values, f.first_value, f.chunk_starts,
                           f.chunk_bases, f.chunk_count);
  }
}

__global__ void __launch_bounds__(kBlockThreads)
    GroupsOfSlotsKernel(const uint32_t* slots, uint64_t positions, const unsigned long long* count,
                        const GroupRange* __restrict__ ranges, uint32_t* __restrict__ match_counts,
                        uint32_t* first_positions) {  // first_positions may be slots
  uint64_t n = positions;
  if (count != nullptr && *count < n) n = *count;
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  for (uint64_t i = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const uint32_t s = slots[i];
    uint32_t matches = 0, first = kNoSlot;
    if (s != kNoSlot) {
      if (ranges != nullptr) {
        const GroupRange r = ranges[s];
        matches = r.size;
        first = r.start;
      } else {
        matches = 1;
        first = s;
      }
    }
    if (match_counts != nullptr) match_counts[i] = matches;
    if (first_positions != nullptr) first_positions[i] = first;
  }
}

template <typename Kernel>
unsigned GridOf(Kernel kernel, std::atomic<int>& resident, uint64_t items) {
  return GridFor(items, CachedResident(kernel, resident));
}

template <KeyWord K>
FinalizeArgs FinalizeOf(const BuildSourceT<K>& s) {
  return FinalizeArgs{s.values, s.first_value, s.chunk_starts, s.chunk_bases, s.chunk_count};
}

}  // namespace

size_t GroupScratchBytes(uint32_t capacity, uint64_t rows, bool overflow) {
  return LayoutOf(capacity, rows, overflow).total;
}

namespace {

// SortGroupRows of either key kind: `query` probes source row i, `validity`
// (optional) masks rows out, `f` gives each row's value.
template <class Query>
cudaError_t SortGroupRowsWith(const Query& query, const uint32_t* validity, uint64_t rows,
                              uint32_t capacity, FinalizeArgs f, bool overflow, GroupRange* ranges,
                              DeviceGroupStats* group_stats, void* scratch, size_t scratch_bytes,
                              const uint32_t** grouped_rows, cudaStream_t stream) {
  const GroupScratch g = LayoutOf(capacity, rows, overflow);
  if (scratch_bytes < g.total) return cudaErrorInvalidValue;
  auto* base = static_cast<uint8_t*>(scratch);
  auto* keys0 = reinterpret_cast<uint32_t*>(base + g.keys[0]);
  auto* rows0 = reinterpret_cast<uint32_t*>(base + g.rows[0]);
  uint32_t* winners = overflow ? reinterpret_cast<uint32_t*>(base + g.winners) : nullptr;
  cudaError_t e = cudaMemsetAsync(group_stats, 0, sizeof(*group_stats), stream);
  if (e == cudaSuccess)
    e = cudaMemsetAsync(ranges, 0, uint64_t{capacity} * sizeof(*ranges), stream);
  if (e == cudaSuccess && winners != nullptr)
    e = cudaMemsetAsync(winners, 0xff, uint64_t{capacity} * sizeof(uint32_t), stream);
  if (e != cudaSuccess) return e;
  static std::atomic<int> resident[4];
  RowSlotsKernel<Query>
      <<<GridOf(RowSlotsKernel<Query>, resident[0], rows), kBlockThreads, 0, stream>>>(
          query, validity, rows, capacity, f, winners, keys0, rows0);
  if ((e = cudaGetLastError()) != cudaSuccess) return e;
  if (winners != nullptr) {
    DropEarlierRowsKernel<<<GridOf(DropEarlierRowsKernel, resident[1], rows), kBlockThreads, 0,
                            stream>>>(winners, keys0, rows, capacity, group_stats);
    if ((e = cudaGetLastError()) != cudaSuccess) return e;
  }
  cub::DoubleBuffer<uint32_t> keys(keys0, reinterpret_cast<uint32_t*>(base + g.keys[1]));
  cub::DoubleBuffer<uint32_t> values(rows0, reinterpret_cast<uint32_t*>(base + g.rows[1]));
  size_t temp_bytes = g.temp_bytes;
  e = cub::DeviceRadixSort::SortPairs(base + g.temp, temp_bytes, keys, values, uint32_t(rows), 0,
                                      SortBits(capacity), stream);
  if (e != cudaSuccess) return e;
  GroupBoundsKernel<<<GridOf(GroupBoundsKernel, resident[2], rows), kBlockThreads, 0, stream>>>(
      keys.Current(), rows, capacity, ranges);
  if ((e = cudaGetLastError()) != cudaSuccess) return e;
  GroupSizesKernel<<<GridOf(GroupSizesKernel, resident[3], capacity), kBlockThreads, 0, stream>>>(
      ranges, capacity, group_stats);
  if ((e = cudaGetLastError()) != cudaSuccess) return e;
  *grouped_rows = values.Current();
  return cudaSuccess;
}

cudaError_t WriteValues(FinalizeArgs f, const uint32_t* grouped_rows, uint64_t kept,
                        uint32_t* values, cudaStream_t stream) {
  if (kept == 0) return cudaSuccess;
  static std::atomic<int> resident{0};
  GroupValuesKernel<<<GridOf(GroupValuesKernel, resident, kept), kBlockThreads, 0, stream>>>(
      grouped_rows, kept, f, values);
  return cudaGetLastError();
}

}  // namespace

template <KeyWord K>
cudaError_t SortGroupRows(DeviceTableT<K> table, const BuildSourceT<K>& source, uint32_t bound,
                          bool overflow, GroupRange* ranges, DeviceGroupStats* group_stats,
                          void* scratch, size_t scratch_bytes, const uint32_t** grouped_rows,
                          cudaStream_t stream) {
  return SortGroupRowsWith(WordQuery<K>{table, source.keys, bound}, source.validity, source.rows,
                           table.capacity, FinalizeOf(source), overflow, ranges, group_stats,
                           scratch, scratch_bytes, grouped_rows, stream);
}

cudaError_t SortGroupRowsKeyRows(DeviceTableT<ColumnKey> table, const StoredKeyRows& stored,
                                 const DeviceKeyRows& build_rows, uint32_t bound, bool overflow,
                                 GroupRange* ranges, DeviceGroupStats* group_stats, void* scratch,
                                 size_t scratch_bytes, const uint32_t** grouped_rows,
                                 cudaStream_t stream) {
  const FinalizeArgs f{stored.row_values, 0, nullptr, nullptr, 0};
  return SortGroupRowsWith(KeyRowQuery{table, stored, build_rows, bound}, nullptr, build_rows.rows,
                           table.capacity, f, overflow, ranges, group_stats, scratch, scratch_bytes,
                           grouped_rows, stream);
}

cudaError_t WriteGroupRows(const uint32_t* grouped_rows, uint64_t kept, uint32_t* values,
                           cudaStream_t stream) {
  return WriteValues(FinalizeArgs{nullptr, 0, nullptr, nullptr, 0}, grouped_rows, kept, values,
                     stream);
}

template <KeyWord K>
cudaError_t WriteGroupValues(const BuildSourceT<K>& source, const uint32_t* grouped_rows,
                             uint64_t kept, uint32_t* values, cudaStream_t stream) {
  return WriteValues(FinalizeOf(source), grouped_rows, kept, values, stream);
}

cudaError_t GroupsOfSlots(const uint32_t* slots, uint64_t positions,
                          const unsigned long long* count, const GroupRange* ranges,
                          uint32_t* match_counts, uint32_t* first_positions, cudaStream_t stream) {
  if (positions == 0) return cudaSuccess;
  static std::atomic<int> resident{0};
  GroupsOfSlotsKernel<<<GridOf(GroupsOfSlotsKernel, resident, positions), kBlockThreads, 0,
                        stream>>>(slots, positions, count, ranges, match_counts, first_positions);
  return cudaGetLastError();
}

#define GPUJOIN_INSTANTIATE_GROUPS(K)                                                         \
  template cudaError_t SortGroupRows(DeviceTableT<K>, const BuildSourceT<K>&, uint32_t, bool, \
                                     GroupRange*, DeviceGroupStats*, void*, size_t,           \
                                     const uint32_t**, cudaStream_t);                         \
  template cudaError_t WriteGroupValues(const BuildSourceT<K>&, const uint32_t*, uint64_t,    \
                                        uint32_t*, cudaStream_t);
GPUJOIN_INSTANTIATE_GROUPS(uint32_t)
GPUJOIN_INSTANTIATE_GROUPS(uint64_t)
#undef GPUJOIN_INSTANTIATE_GROUPS

}  // namespace gpujoin::engine::detail
