// Inner join on the device: lookup, then stable compaction of the matches in left
// order with a tile-count / scan / scatter scheme (count -> offsets -> fill), so
// capacity truncation keeps exactly the stable prefix.
#include <cuda_runtime.h>

#include <cstdint>
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/device/device_scan.cuh>

#include "cuda/device_ops.hpp"
#include "cuda/join_ops.hpp"
#include "cuda/kernel_utils.cuh"

namespace gpujoin::engine::detail {
namespace {

constexpr int kItemsPerThread = 8;
constexpr uint64_t kTileRows = uint64_t(kBlockThreads) * kItemsPerThread;

size_t AlignUp(size_t v) { return (v + 255) & ~size_t(255); }

struct JoinScratch {
  uint32_t* values = nullptr;        // matched right value per left row
  uint8_t* flags = nullptr;          // found flag per left row
  uint32_t* tile_counts = nullptr;   // matches per tile, plus a trailing 0
  uint32_t* tile_offsets = nullptr;  // exclusive scan of tile_counts
  void* scan_temp = nullptr;
  size_t scan_temp_bytes = 0;
  size_t total_bytes = 0;
};

JoinScratch CarveScratch(uint64_t rows, void* base) {
  JoinScratch s;
  const uint64_t tiles = (rows + kTileRows - 1) / kTileRows;
  size_t temp = 0;
  cub::DeviceScan::ExclusiveSum(nullptr, temp, static_cast<uint32_t*>(nullptr),
                                static_cast<uint32_t*>(nullptr), static_cast<int64_t>(tiles + 1));
  s.scan_temp_bytes = temp;
  auto* p = static_cast<uint8_t*>(base);
  size_t off = 0;
  auto take = [&](size_t bytes) {
    uint8_t* q = p == nullptr ? nullptr : p + off;
    off += AlignUp(bytes);
    return q;
  };
  s.values = reinterpret_cast<uint32_t*>(take(rows * sizeof(uint32_t)));
  s.flags = take(rows);
  s.tile_counts = reinterpret_cast<uint32_t*>(take((tiles + 1) * sizeof(uint32_t)));
  s.tile_offsets = reinterpret_cast<uint32_t*>(take((tiles + 1) * sizeof(uint32_t)));
  s.scan_temp = take(temp == 0 ? 1 : temp);
  s.total_bytes = off;
  return s;
}

// Loads this thread's kItemsPerThread consecutive flags of the tile (blocked
// arrangement, so thread order is row order).
__device__ __forceinline__ void LoadFlags(const uint8_t* flags, uint64_t rows, uint64_t first,
                                          uint8_t (&f)[kItemsPerThread]) {
  if (first + kItemsPerThread <= rows && (reinterpret_cast<uintptr_t>(flags + first) & 7u) == 0) {
    const uint2 v = *reinterpret_cast<const uint2*>(flags + first);
#pragma unroll
    for (int j = 0; j < 4; ++j) f[j] = uint8_t(v.x >> (8 * j));
#pragma unroll
    for (int j = 0; j < 4; ++j) f[4 + j] = uint8_t(v.y >> (8 * j));
  } else {
#pragma unroll
    for (int j = 0; j < kItemsPerThread; ++j) f[j] = first + j < rows ? flags[first + j] : 0;
  }
}

__global__ void __launch_bounds__(kBlockThreads)
    TileCountKernel(const uint8_t* __restrict__ flags, uint64_t rows,
                    uint32_t* __restrict__ tile_counts) {
  using Reduce = cub::BlockReduce<uint32_t, kBlockThreads>;
  __shared__ typename Reduce::TempStorage temp;
  const uint64_t first = blockIdx.x * kTileRows + uint64_t(threadIdx.x) * kItemsPerThread;
  uint8_t f[kItemsPerThread];
  LoadFlags(flags, rows, first, f);
  uint32_t n = 0;
#pragma unroll
  for (int j = 0; j < kItemsPerThread; ++j) n += f[j] != 0;
  const uint32_t total = Reduce(temp).Sum(n);
  if (threadIdx.x == 0) tile_counts[blockIdx.x] = total;
}

__global__ void __launch_bounds__(kBlockThreads)
    ScatterKernel(const uint8_t* __restrict__ flags, const uint32_t* __restrict__ values,
                  uint64_t rows, const uint32_t* __restrict__ tile_offsets, uint64_t tiles,
                  const uint32_t* __restrict__ left_rows, uint32_t first_left_row,
                  const uint32_t* __restrict__ first_left_row_device,
                  uint32_t* __restrict__ out_left, uint32_t* __restrict__ out_right,
                  uint64_t capacity, unsigned long long* count) {
  using Scan = cub::BlockScan<uint32_t, kBlockThreads>;
  __shared__ typename Scan::TempStorage temp;
  const uint64_t first = blockIdx.x * kTileRows + uint64_t(threadIdx.x) * kItemsPerThread;
  uint8_t f[kItemsPerThread];
  LoadFlags(flags, rows, first, f);
  uint32_t n = 0;
#pragma unroll
  for (int j = 0; j < kItemsPerThread; ++j) n += f[j] != 0;
  uint32_t prefix = 0;
  Scan(temp).ExclusiveSum(n, prefix);
  uint64_t pos = uint64_t(tile_offsets[blockIdx.x]) + prefix;
  if (first_left_row_device != nullptr) first_left_row = *first_left_row_device;
  if (pos < capacity) {
#pragma unroll
    for (int j = 0; j < kItemsPerThread; ++j) {
      if (f[j] == 0) continue;
      if (pos < capacity) {
        const uint64_t i = first + j;
        out_left[pos] = left_rows != nullptr ? left_rows[i] : first_left_row + uint32_t(i);
        out_right[pos] = values[i];
      }
      ++pos;
    }
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) *count = tile_offsets[tiles];
}

// JoinKeys and JoinKeysGraphable: the left row base is `first_left_row`, or read
// on the device from `first_left_row_device` when that is non-null.
cudaError_t JoinKeysImpl(DeviceTable table, const uint32_t* keys, uint64_t rows, uint32_t bound,
                         const uint32_t* left_rows, uint32_t first_left_row,
                         const uint32_t* first_left_row_device, uint32_t* out_left,
                         uint32_t* out_right, uint64_t capacity, unsigned long long* count,
                         uint8_t* found, uint32_t* probes, DeviceQueryStats* stats, void* scratch,
                         cudaStream_t stream) {
  if (rows == 0) return cudaMemsetAsync(count, 0, sizeof(*count), stream);
  JoinScratch s = CarveScratch(rows, scratch);
  uint8_t* flags = found != nullptr ? found : s.flags;
  cudaError_t e = LookupKeys(table, keys, rows, bound, s.values, flags, probes, stats, stream);
  if (e != cudaSuccess) return e;
  const uint64_t tiles = (rows + kTileRows - 1) / kTileRows;
  e = cudaMemsetAsync(s.tile_counts + tiles, 0, sizeof(uint32_t), stream);
  if (e != cudaSuccess) return e;
  TileCountKernel<<<unsigned(tiles), kBlockThreads, 0, stream>>>(flags, rows, s.tile_counts);
  e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  e = cub::DeviceScan::ExclusiveSum(s.scan_temp, s.scan_temp_bytes, s.tile_counts, s.tile_offsets,
                                    static_cast<int64_t>(tiles + 1), stream);
  if (e != cudaSuccess) return e;
  ScatterKernel<<<unsigned(tiles), kBlockThreads, 0, stream>>>(
      flags, s.values, rows, s.tile_offsets, tiles, left_rows, first_left_row,
      first_left_row_device, out_left, out_right, capacity, count);
  return cudaGetLastError();
}

}  // namespace

size_t JoinScratchBytes(uint64_t rows) { return CarveScratch(rows, nullptr).total_bytes; }

cudaError_t JoinKeys(DeviceTable table, const uint32_t* keys, uint64_t rows, uint32_t bound,
                     const uint32_t* left_rows, uint32_t first_left_row, uint32_t* out_left,
                     uint32_t* out_right, uint64_t capacity, unsigned long long* count,
                     uint8_t* found, uint32_t* probes, DeviceQueryStats* stats, void* scratch,
                     cudaStream_t stream) {
  return JoinKeysImpl(table, keys, rows, bound, left_rows, first_left_row, nullptr, out_left,
                      out_right, capacity, count, found, probes, stats, scratch, stream);
}

cudaError_t JoinKeysGraphable(DeviceTable table, const uint32_t* keys, uint64_t rows,
                              uint32_t bound, const uint32_t* left_rows,
                              const uint32_t* first_left_row_device, uint32_t* out_left,
                              uint32_t* out_right, uint64_t capacity, unsigned long long* count,
                              uint8_t* found, uint32_t* probes, DeviceQueryStats* stats,
                              void* scratch, cudaStream_t stream) {
  return JoinKeysImpl(table, keys, rows, bound, left_rows, 0,
                      left_rows != nullptr ? nullptr : first_left_row_device, out_left, out_right,
                      capacity, count, found, probes, stats, scratch, stream);
}

}  // namespace gpujoin::engine::detail
