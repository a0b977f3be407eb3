// Tile path, second part: every tile's carry, the placement of each tile's
// keys and the build's probe statistics, then the direct insert when the build
// must fall back (see tile_path.cuh).
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cuda/functional>

#include "cuda/index/tile_path.cuh"
#include "cuda/kernel_utils.cuh"

namespace gpujoin::engine::detail {
namespace {

struct ThenMap {
  __device__ CarryMap operator()(const CarryMap& f, const CarryMap& g) const {
    return ThenCarry(f, g);
  }
};

// One block: every tile's carry, and the build's key, duplicate and invalid counts.
constexpr int kCarryThreads = 1024;
template <KeyWord K>
__global__ void __launch_bounds__(kCarryThreads)
    TileCarryKernel(TileArgs<K> a, uint32_t capacity, DeviceBuildStats* stats) {
  using MapScan = cub::BlockScan<CarryMap, kCarryThreads>;
  using Sum = cub::BlockReduce<unsigned long long, kCarryThreads>;
  __shared__ typename MapScan::TempStorage s_scan;
  __shared__ typename Sum::TempStorage s_sum;
  if (*a.fall_back != 0) return;
  const uint32_t per = (a.tiles + kCarryThreads - 1) / kCarryThreads;
  const uint32_t begin = min(a.tiles, threadIdx.x * per), end = min(a.tiles, begin + per);
  auto map_of = [&](uint32_t t) {
    const int4 s = a.shape[t];
    return TileCarryMap(uint32_t(s.x), s.y);
  };
  CarryMap mine{kNoCarry, 0};
  unsigned long long keys = 0, valid = 0, rows = 0;
  for (uint32_t t = begin; t < end; ++t) {
    mine = ThenMap()(mine, map_of(t));
    const int4 s = a.shape[t];
    keys += uint32_t(s.x);
    valid += uint32_t(s.z);
    rows += uint32_t(s.w);
  }
  CarryMap before, all;
  MapScan(s_scan).ExclusiveScan(mine, before, CarryMap{kNoCarry, 0}, ThenMap(), all);
  // Runs that wrap past the end of the table: the carry into tile 0 is the
  // fixed point of the whole table's map, all.a (all.b < 0 unless it is full).
  const long long c0 = all.a;
  const bool full = all.b >= 0 || c0 >= (long long)capacity;
  long long c = ApplyCarry(before, c0);
  for (uint32_t t = begin; t < end; ++t) {
    a.carry[t] = uint32_t(c);
    c = ApplyCarry(map_of(t), c);
  }
  keys = Sum(s_sum).Sum(keys);
  __syncthreads();
  valid = Sum(s_sum).Sum(valid);
  __syncthreads();
  rows = Sum(s_sum).Sum(rows);
  if (threadIdx.x == 0) {
    if (full) atomicExch(a.fall_back, 1u);
    atomicAdd(&stats->unique_keys, keys);
    atomicAdd(&stats->duplicate_rows, valid - keys);
    atomicAdd(&stats->invalid_rows, rows - valid);
  }
}

// Places a tile's keys (in rank order from TileSortKernel) in a shared image
// of its 2048 slots and writes the slots it owns, [min(carry, 2048), 2048), in
// coalesced stores; a key placed past the tile (its run goes on into the next
// tiles, whose carry counts it) is written directly. The rank-order loads and
// the multiplicities are read striped (coalesced); the running maximum of home
// minus rank is scanned blocked through shared memory.
template <KeyWord K>
__global__ void __launch_bounds__(kTileThreads)
    TilePlaceKernel(DeviceTableT<K> table, TileArgs<K> a) {
  using S = Slots<K>;
  using MaxScan = cub::BlockScan<int, kTileThreads>;
  __shared__ typename MaxScan::TempStorage s_scan;
  __shared__ SlotWord<K> s_tile[kTileSlots];
  __shared__ int s_q[kTileMaxRows];  // home - rank, then its running maximum
  __shared__ unsigned long long s_probes;
  __shared__ uint32_t s_max;
  if (*a.fall_back != 0) return;
  const uint32_t t = blockIdx.x;
  const uint32_t base = a.starts[t];
  const int keys = a.shape[t].x;
  const uint32_t c = a.carry[t];
  const uint32_t tile_start = t * kTileSlots;
  const uint32_t mask = table.capacity - 1u;
  for (uint32_t k = threadIdx.x; k < kTileSlots; k += kTileThreads) s_tile[k] = S::Empty();
  if (threadIdx.x == 0) {
    s_probes = 0;
    s_max = 0;
  }
  SlotWord<K> w[kTileItems];
  uint32_t home[kTileItems];
#pragma unroll
  for (int j = 0; j < kTileItems; ++j) {
    const int r = j * int(kTileThreads) + int(threadIdx.x);
    w[j] = r < keys ? a.words[base + r] : S::Empty();
    home[j] = r < keys ? TileHome<K>(w[j], table.capacity) : 0u;
    if (r < keys) s_q[r] = int(home[j]) - r;
  }
  __syncthreads();
  int q[kTileItems];
#pragma unroll
  for (int j = 0; j < kTileItems; ++j) {
    const int r = int(threadIdx.x) * kTileItems + j;
    q[j] = r < keys ? s_q[r] : INT_MIN;
  }
  MaxScan(s_scan).InclusiveScan(q, q, ::cuda::maximum<>{});
#pragma unroll
  for (int j = 0; j < kTileItems; ++j) {  // the thread's own entries: no barrier needed before
    const int r = int(threadIdx.x) * kTileItems + j;
    if (r < keys) s_q[r] = q[j];
  }
  __syncthreads();
  unsigned long long probes = 0;
  uint32_t max_probes = 0;
  bool too_far = false;
#pragma unroll
  for (int j = 0; j < kTileItems; ++j) {
    const int r = j * int(kTileThreads) + int(threadIdx.x);
    if (r < keys) {
      const long long place = TilePlace(uint32_t(r), c, s_q[r]);
      const uint32_t p = uint32_t(place - home[j] + 1);
      if (place < kTileSlots)
        s_tile[place] = w[j];
      else
        table.slots[(tile_start + uint32_t(place)) & mask] = w[j];
      too_far |= p > a.bound;
      probes += (unsigned long long)p * a.multiplicity[base + r];
      max_probes = max(max_probes, p);
    }
  }
  if (too_far) atomicExch(a.fall_back, 1u);
  probes = WarpSum(probes);
  max_probes = __reduce_max_sync(0xffffffffu, max_probes);
  if ((threadIdx.x & 31u) == 0) {
    atomicAdd(&s_probes, probes);
    atomicMax(&s_max, max_probes);
  }
  __syncthreads();
  for (uint32_t k = min(c, kTileSlots) + threadIdx.x; k < kTileSlots; k += kTileThreads)
    table.slots[tile_start + k] = s_tile[k];
  if (threadIdx.x == 0) {
    a.probes[t] = s_probes;
    a.max_probes[t] = s_max;
  }
}

// One block: the build's total and maximum probes.
template <KeyWord K>
__global__ void __launch_bounds__(kCarryThreads)
    TileProbesKernel(TileArgs<K> a, DeviceBuildStats* stats) {
  using Sum = cub::BlockReduce<unsigned long long, kCarryThreads>;
  __shared__ typename Sum::TempStorage s_sum;
  if (*a.fall_back != 0) return;
  unsigned long long total = 0, most = 0;
  for (uint32_t t = threadIdx.x; t < a.tiles; t += kCarryThreads) {
    total += a.probes[t];
    most = max(most, (unsigned long long)a.max_probes[t]);
  }
  total = Sum(s_sum).Sum(total);
  __syncthreads();
  most = Sum(s_sum).Reduce(most, ::cuda::maximum<>{});
  if (threadIdx.x == 0) {
    atomicAdd(&stats->total_probes, total);
    atomicMax(&stats->max_probes, most);
  }
}

}  // namespace

bool TilesFit(uint32_t capacity, uint64_t rows) {
  return capacity >= 2 * kTileSlots && rows < (uint64_t{1} << 31);
}

template <KeyWord K>
cudaError_t BuildTiles(DeviceTableT<K> table, const BuildSourceT<K>& source, uint32_t bound,
                       uint32_t tag_offset, bool finalize, DeviceBuildStats* stats, bool* no_buffer,
                       cudaStream_t stream) {
  *no_buffer = false;
  TileLayout layout;
  cudaError_t e = MakeTileLayout<K>(table.capacity, source.rows, &layout);
  if (e != cudaSuccess) return e;
  void* buffer = nullptr;
  e = AllocateTransient(layout.bytes, source.transient_max_bytes, &buffer, stream);
  if (e != cudaSuccess) {
    *no_buffer = e == cudaErrorMemoryAllocation;
    return e;
  }
  TileArgs<K> ta{};
  e = SortAndOrderTiles(table, source, finalize, layout, static_cast<unsigned char*>(buffer), bound,
                        &ta, stream);
  if (e == cudaSuccess) {
    TileCarryKernel<K><<<1, kCarryThreads, 0, stream>>>(ta, table.capacity, stats);
    TilePlaceKernel<K><<<layout.tiles, kTileThreads, 0, stream>>>(table, ta);
    TileProbesKernel<K><<<1, kCarryThreads, 0, stream>>>(ta, stats);
    e = cudaGetLastError();
  }
  if (e == cudaSuccess) e = MarkPhase(source, 1, stream);
  // The direct insert (with its finalisation), run only when a tile kernel set
  // the flag.
  if (e == cudaSuccess)
    e = RedoDirectIf(ta.fall_back, table, source, bound, tag_offset, finalize, stats, stream);
  if (e == cudaSuccess && source.fell_back != nullptr)
    e = cudaMemcpyAsync(source.fell_back, ta.fall_back, sizeof(unsigned int),
                        cudaMemcpyDeviceToDevice, stream);
  const cudaError_t f = cudaFreeAsync(buffer, stream);
  if (e == cudaSuccess) e = MarkPhase(source, 2, stream);
  return e != cudaSuccess ? e : f;
}

template cudaError_t BuildTiles(DeviceTableT<uint32_t>, const BuildSourceT<uint32_t>&, uint32_t,
                                uint32_t, bool, DeviceBuildStats*, bool*, cudaStream_t);
template cudaError_t BuildTiles(DeviceTableT<uint64_t>, const BuildSourceT<uint64_t>&, uint32_t,
                                uint32_t, bool, DeviceBuildStats*, bool*, cudaStream_t);

}  // namespace gpujoin::engine::detail
