// Count -> scan -> scatter joins (group_join.hpp): per-row pair counts, an
// inclusive scan of them, and a merge-path scatter over row ends and output
// positions.
#include <cuda_runtime.h>
#include <thrust/iterator/transform_iterator.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cub/device/device_scan.cuh>

#include "cuda/index/build_paths.hpp"
#include "cuda/index/lookup.hpp"
#include "cuda/index/query.cuh"
#include "cuda/join/group_join.hpp"
#include "cuda/kernel_utils.cuh"

namespace gpujoin::engine::detail {
namespace {

// Merge-path tiles of the scatter: kItems steps (a row end or a pair) per
// thread, kTile per block.
constexpr uint32_t kScatterThreads = 256;
constexpr uint32_t kItems = 8;
constexpr uint32_t kTile = kScatterThreads * kItems;

struct Widen {
  __host__ __device__ uint64_t operator()(uint32_t v) const { return v; }
};
using WideCounts = thrust::transform_iterator<Widen, const uint32_t*>;

// Per-row results of the count pass, carved from its scratch.
struct CountScratch {
  uint32_t* counts = nullptr;     // pairs of each left row
  uint32_t* positions = nullptr;  // value-list position of its first match, kNoSlot: none
  uint32_t* firsts = nullptr;     // its first match's value, kEmptyKey: none
  uint64_t* ends = nullptr;       // inclusive scan of counts
  void* temp = nullptr;
  size_t temp_bytes = 0;
  size_t total = 0;
};

CountScratch CarveCount(void* base, uint64_t rows) {
  CountScratch s;
  Carver c;
  const size_t counts = c.Take(rows * 4), positions = c.Take(rows * 4), firsts = c.Take(rows * 4);
  const size_t ends = c.Take(rows * 8);
  (void)cub::DeviceScan::InclusiveSum(nullptr, s.temp_bytes, WideCounts(nullptr, Widen{}),
                                      static_cast<uint64_t*>(nullptr), uint32_t(rows));
  if (s.temp_bytes == 0) s.temp_bytes = 1;
  const size_t temp = c.Take(s.temp_bytes);
  s.total = c.offset;
  if (base != nullptr) {
    auto* p = static_cast<uint8_t*>(base);
    s.counts = reinterpret_cast<uint32_t*>(p + counts);
    s.positions = reinterpret_cast<uint32_t*>(p + positions);
    s.firsts = reinterpret_cast<uint32_t*>(p + firsts);
    s.ends = reinterpret_cast<uint64_t*>(p + ends);
    s.temp = p + temp;
  }
  return s;
}

// Partitions of the scatter: one per kTile merge-path steps, plus the end.
uint64_t PartitionsOf(uint64_t rows, uint64_t written) {
  return (rows + written + kTile - 1) / kTile;
}

// The pairs join `kind` yields for a left row with `matches` matches.
__device__ __forceinline__ uint32_t PairsOf(JoinKind kind, uint32_t matches) {
  switch (kind) {
    case JoinKind::kInner:
      return matches;
    case JoinKind::kLeftOuter:
      return matches > 1u ? matches : 1u;
    case JoinKind::kLeftSemi:
      return matches != 0 ? 1u : 0u;
    case JoinKind::kLeftAnti:
      return matches == 0 ? 1u : 0u;
  }
  return 0;
}

// One thread per left row (Query: WordQuery or KeyRowQuery, query.cuh),
// grid-stride: the lookup's probe, then the row's pairs, first position and
// first value (none for anti joins, whose pairs carry no match).
template <class Query>
__global__ void __launch_bounds__(kBlockThreads)
    CountKernel(Query query, const GroupRange* __restrict__ ranges, JoinKind kind, uint64_t rows,
                uint8_t* __restrict__ found, uint32_t* __restrict__ probes,
                uint32_t* __restrict__ counts, uint32_t* __restrict__ positions,
                uint32_t* __restrict__ firsts, DeviceQueryStats* stats) {
  unsigned long long sums[2] = {0, 0};  // found, probes
  unsigned long long max_probes = 0;
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  for (uint64_t i = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < rows; i += stride) {
    const ProbeResult r = query(i);
    uint32_t matches = 0, position = kNoSlot;
    if (r.found) {
      if (ranges != nullptr) {
        const GroupRange g = ranges[r.slot];
        matches = g.size;
        position = g.start;
      } else {
        matches = 1;
        position = r.slot;
      }
    }
    const bool anti = kind == JoinKind::kLeftAnti;
    counts[i] = PairsOf(kind, matches);
    positions[i] = anti ? kNoSlot : position;
    firsts[i] = anti ? kEmptyKey : r.value;
    if (found != nullptr) found[i] = r.found ? 1 : 0;
    if (probes != nullptr) probes[i] = r.probes;
    sums[0] += r.found ? 1u : 0u;
    sums[1] += r.probes;
    if (r.probes > max_probes) max_probes = r.probes;
  }
  BlockFlushStats<2>(sums, max_probes, &stats->found, &stats->max_probes);
}

// Merge path over a = the row ends ends[0..n) and b = the outputs 0..t-1, where
// a row end comes first when ends[i] <= j (an output at a row's end belongs to
// a later row): the rows consumed by the first d steps.
__device__ __forceinline__ uint64_t RowsBefore(const uint64_t* __restrict__ ends, uint64_t n,
                                               uint64_t t, uint64_t d) {
  uint64_t lo = d > t ? d - t : 0, hi = d < n ? d : n;
  while (lo < hi) {
    const uint64_t mid = (lo + hi) / 2;
    if (__ldg(ends + mid) <= d - 1 - mid) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

// parts[p] = the rows consumed by the first min(p * kTile, rows + written)
// steps, p = 0 .. partitions.
__global__ void __launch_bounds__(kBlockThreads)
    PartitionKernel(const uint64_t* __restrict__ ends, uint64_t rows, uint64_t written,
                    uint64_t partitions, uint64_t* __restrict__ parts) {
  const uint64_t steps = rows + written;
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  for (uint64_t p = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; p <= partitions; p += stride) {
    const uint64_t d = p * kTile < steps ? p * kTile : steps;
    parts[p] = RowsBefore(ends, rows, written, d);
  }
}

// One partition per block iteration (grid-stride): its rows' starts into
// shared memory, each thread's kItems steps merged serially (which row every
// output of the partition belongs to), then the partition's pairs written to
// consecutive positions by the whole block.
__global__ void __launch_bounds__(kScatterThreads)
    ScatterKernel(const uint64_t* __restrict__ ends, const uint32_t* __restrict__ positions,
                  const uint32_t* __restrict__ firsts, uint64_t rows, uint64_t written,
                  const uint64_t* __restrict__ parts, uint64_t partitions,
                  const uint32_t* __restrict__ left_rows, uint32_t first_left_row,
                  const uint32_t* __restrict__ values, uint32_t* __restrict__ out_left,
                  uint32_t* __restrict__ out_right, uint32_t* __restrict__ out_positions,
                  const uint32_t* __restrict__ row_values) {
  // starts[x] = the first pair of row i0 + x (x <= rows ending in the partition).
  __shared__ uint64_t starts[kTile + 1];
  __shared__ uint16_t row_of[kTile];  // each output's row, relative to i0
  const uint64_t steps = rows + written;
  for (uint64_t p = blockIdx.x; p < partitions; p += gridDim.x) {
    const uint64_t d0 = p * kTile;
    const uint64_t d1 = d0 + kTile < steps ? d0 + kTile : steps;
    const uint64_t i0 = parts[p], i1 = parts[p + 1];
    const uint64_t j0 = d0 - i0;
    const uint32_t na = uint32_t(i1 - i0), nb = uint32_t((d1 - i1) - j0);
    for (uint32_t x = threadIdx.x; x <= na; x += kScatterThreads) {
      starts[x] = i0 + x == 0 ? 0 : __ldg(ends + i0 + x - 1);
    }
    __syncthreads();
    // This thread's steps [lo_d, hi_d) of the partition: a[x] = starts[x + 1]
    // (row ends, x < na), b[y] = j0 + y (outputs, y < nb).
    const uint32_t total = na + nb;
    const uint32_t lo_d = min(threadIdx.x * kItems, total);
    const uint32_t hi_d = min(lo_d + kItems, total);
    uint32_t lo = lo_d > nb ? lo_d - nb : 0, hi = min(lo_d, na);
    while (lo < hi) {
      const uint32_t mid = (lo + hi) / 2;
      if (starts[mid + 1] <= j0 + (lo_d - 1 - mid)) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    uint32_t a = lo, b = lo_d - lo;
    for (uint32_t k = lo_d; k < hi_d; ++k) {
      if (a < na && (b >= nb || starts[a + 1] <= j0 + b)) {
        ++a;
      } else {
        row_of[b++] = uint16_t(a);
      }
    }
    __syncthreads();
    for (uint32_t y = threadIdx.x; y < nb; y += kScatterThreads) {
      const uint32_t x = row_of[y];
      const uint64_t r = i0 + x, o = j0 + y;
      const uint32_t within = uint32_t(o - starts[x]);
      const uint32_t first = __ldg(positions + r);
      uint32_t right = kEmptyKey, position = kNoSlot;
      if (first != kNoSlot) {
        position = first + within;
        if (within == 0) {
          right = __ldg(firsts + r);
        } else {
          right = __ldg(values + position);
          if (row_values != nullptr) right = __ldg(row_values + right);
        }
      }
      out_left[o] = left_rows != nullptr ? __ldg(left_rows + r) : first_left_row + uint32_t(r);
      out_right[o] = right;
      if (out_positions != nullptr) out_positions[o] = position;
    }
    __syncthreads();
  }
}

template <typename Kernel>
unsigned GridOf(Kernel kernel, std::atomic<int>& resident, uint64_t items) {
  return GridFor(items, CachedResident(kernel, resident));
}

}  // namespace

size_t GroupJoinCountScratchBytes(uint64_t rows) { return CarveCount(nullptr, rows).total; }

namespace {

// CountGroupJoin of either key kind.
template <class Query>
cudaError_t CountJoin(const Query& query, const GroupRange* ranges, JoinKind kind, uint64_t rows,
                      uint8_t* found, uint32_t* probes, DeviceQueryStats* stats,
                      unsigned long long* count, void* scratch, cudaStream_t stream) {
  if (rows == 0) return cudaMemsetAsync(count, 0, sizeof(*count), stream);
  CountScratch s = CarveCount(scratch, rows);
  static std::atomic<int> resident{0};
  CountKernel<Query><<<GridOf(CountKernel<Query>, resident, rows), kBlockThreads, 0, stream>>>(
      query, ranges, kind, rows, found, probes, s.counts, s.positions, s.firsts, stats);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  e = cub::DeviceScan::InclusiveSum(s.temp, s.temp_bytes, WideCounts(s.counts, Widen{}), s.ends,
                                    uint32_t(rows), stream);
  if (e != cudaSuccess) return e;
  return cudaMemcpyAsync(count, s.ends + rows - 1, sizeof(*count), cudaMemcpyDeviceToDevice,
                         stream);
}

}  // namespace

template <KeyWord K>
cudaError_t CountGroupJoin(DeviceTableT<K> table, const GroupRange* ranges, JoinKind kind,
                           const K* keys, uint64_t rows, uint32_t bound, uint8_t* found,
                           uint32_t* probes, DeviceQueryStats* stats, unsigned long long* count,
                           void* scratch, cudaStream_t stream) {
  return CountJoin(WordQuery<K>{table, keys, bound}, ranges, kind, rows, found, probes, stats,
                   count, scratch, stream);
}

cudaError_t CountGroupJoinKeyRows(DeviceTableT<ColumnKey> table, const GroupRange* ranges,
                                  const StoredKeyRows& stored, const DeviceKeyRows& query,
                                  JoinKind kind, uint32_t bound, uint8_t* found, uint32_t* probes,
                                  DeviceQueryStats* stats, unsigned long long* count, void* scratch,
                                  cudaStream_t stream) {
  return CountJoin(KeyRowQuery{table, stored, query, bound}, ranges, kind, query.rows, found,
                   probes, stats, count, scratch, stream);
}

size_t GroupJoinScatterScratchBytes(uint64_t rows, uint64_t written) {
  return (PartitionsOf(rows, written) + 1) * sizeof(uint64_t);
}

cudaError_t ScatterGroupJoin(const void* count_scratch, uint64_t rows, uint64_t written,
                             const uint32_t* left_rows, uint32_t first_left_row,
                             const uint32_t* values, uint32_t* out_left, uint32_t* out_right,
                             uint32_t* out_positions, void* scratch, cudaStream_t stream,
                             const uint32_t* row_values) {
  if (rows == 0 || written == 0) return cudaSuccess;
  const CountScratch s = CarveCount(const_cast<void*>(count_scratch), rows);
  const uint64_t partitions = PartitionsOf(rows, written);
  auto* parts = static_cast<uint64_t*>(scratch);
  static std::atomic<int> resident[2];
  PartitionKernel<<<GridOf(PartitionKernel, resident[0], partitions + 1), kBlockThreads, 0,
                    stream>>>(s.ends, rows, written, partitions, parts);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  // Enough blocks to fill the device; each loops over partitions.
  int resident_blocks = resident[1].load(std::memory_order_relaxed);
  if (resident_blocks == 0) {
    int device = 0, sms = 0, per_sm = 0;
    if (cudaGetDevice(&device) == cudaSuccess &&
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) == cudaSuccess &&
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, ScatterKernel, kScatterThreads, 0) ==
            cudaSuccess) {
      resident_blocks = sms * std::max(per_sm, 1);
    } else {
      resident_blocks = 1024;
    }
    resident[1].store(resident_blocks, std::memory_order_relaxed);
  }
  const uint64_t blocks = std::min<uint64_t>(partitions, uint64_t(resident_blocks));
  ScatterKernel<<<unsigned(blocks), kScatterThreads, 0, stream>>>(
      s.ends, s.positions, s.firsts, rows, written, parts, partitions, left_rows, first_left_row,
      values, out_left, out_right, out_positions, row_values);
  return cudaGetLastError();
}

#define GPUJOIN_INSTANTIATE_GROUP_JOIN(K)                                                         \
  template cudaError_t CountGroupJoin(DeviceTableT<K>, const GroupRange*, JoinKind, const K*,     \
                                      uint64_t, uint32_t, uint8_t*, uint32_t*, DeviceQueryStats*, \
                                      unsigned long long*, void*, cudaStream_t);
GPUJOIN_INSTANTIATE_GROUP_JOIN(uint32_t)
GPUJOIN_INSTANTIATE_GROUP_JOIN(uint64_t)
#undef GPUJOIN_INSTANTIATE_GROUP_JOIN

}  // namespace gpujoin::engine::detail
