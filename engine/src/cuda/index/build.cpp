// Build dispatch: which path a build takes, the transient memory it may take,
// and the shared entry points (build.hpp). No kernels here.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "cuda/index/build_paths.hpp"

namespace gpujoin::engine::detail {
namespace {

// Whether a build stores generated values directly and skips finalisation:
// generated values that do not wrap grow with the row.
template <KeyWord K>
bool StoresFinalValues(const BuildSourceT<K>& source) {
  return source.values == nullptr && source.chunk_starts == nullptr &&
         uint64_t(source.first_value) + source.rows - 1 <= 0xffffffffull;
}

// Shared by BuildTable and ClearAndBuildTable; `cleared`: the caller cleared
// the table and statistics already.
template <KeyWord K>
cudaError_t Build(DeviceTableT<K> table, const BuildSourceT<K>& source, uint32_t bound,
                  DeviceBuildStats* stats, bool cleared, cudaStream_t stream) {
  if (source.rows == 0) return cleared ? cudaSuccess : ClearTable(table, stats, stream);
  const bool direct = StoresFinalValues(source);
  const uint32_t tag_offset = direct ? source.first_value : 0u;
  if (ChooseBuildPath(table.capacity, source.rows, source.path, KeyTypeOf<K>()) ==
      BuildPath::kTiles) {
    // The tile path writes every slot: only the statistics need zeroing.
    cudaError_t e = cleared ? cudaSuccess : cudaMemsetAsync(stats, 0, sizeof(*stats), stream);
    bool no_buffer = false;
    if (e == cudaSuccess)
      e = BuildTiles(table, source, bound, tag_offset, !direct, stats, &no_buffer, stream);
    // Only a missing transient buffer (nothing enqueued after the statistics
    // reset) sends the build to the direct path, which needs none.
    if (!no_buffer) return e;
  }
  if (!cleared) {
    const cudaError_t e = ClearTable(table, stats, stream);
    if (e != cudaSuccess) return e;
  }
  return BuildDirect(table, source, bound, tag_offset, !direct, stats, stream);
}

}  // namespace

BuildPath ChooseBuildPath(uint32_t capacity, uint64_t rows, BuildPath path, KeyType key_type) {
  if (!TilesFit(capacity, rows)) return BuildPath::kDirect;
  if (path != BuildPath::kAuto) return path;
  // On an H200 (2^26 rows at load 0.5, 0.8 x 2^27 at 0.8) tiles take 4.3 / 5.9 ms
  // against 6.0 / 17.1 direct; below 128 MiB of table the direct insert runs in L2.
  const bool large =
      TableAllocationBytes(capacity, key_type) >= kTilesMinTableBytes && rows >= kTilesMinRows;
  return large ? BuildPath::kTiles : BuildPath::kDirect;
}

uint64_t BuildTransientBytes(uint32_t capacity, uint64_t rows, BuildPath path, KeyType key_type) {
  if (ChooseBuildPath(capacity, rows, path, key_type) != BuildPath::kTiles) return 0;
  return TileTransientBytes(capacity, rows, key_type);
}

cudaError_t AllocateTransient(size_t bytes, uint64_t max_bytes, void** buffer,
                              cudaStream_t stream) {
  if (max_bytes != 0 && bytes > max_bytes) return cudaErrorMemoryAllocation;
  const cudaError_t e = cudaMallocAsync(buffer, bytes, stream);
  if (e != cudaSuccess) (void)cudaGetLastError();  // not sticky; the caller reports it
  return e;
}

cudaError_t KeepTransientMemory(int device) {
  size_t free_bytes = 0, total_bytes = 0;
  cudaError_t e = cudaSetDevice(device);
  if (e == cudaSuccess) e = cudaMemGetInfo(&free_bytes, &total_bytes);
  cudaMemPool_t pool = nullptr;
  if (e == cudaSuccess) e = cudaDeviceGetDefaultMemPool(&pool, device);
  if (e != cudaSuccess) return e;
  uint64_t threshold = std::max<uint64_t>(uint64_t{1} << 30, total_bytes / 4);
  return cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold);
}

template <KeyWord K>
cudaError_t ClearTable(DeviceTableT<K> table, DeviceBuildStats* stats, cudaStream_t stream) {
  const cudaError_t e = cudaMemsetAsync(
      table.slots, 0xff, TableAllocationBytes(table.capacity, KeyTypeOf<K>()), stream);
  if (e != cudaSuccess) return e;
  return cudaMemsetAsync(stats, 0, sizeof(DeviceBuildStats), stream);
}

template <KeyWord K>
cudaError_t BuildTable(DeviceTableT<K> table, const BuildSourceT<K>& source, uint32_t bound,
                       DeviceBuildStats* stats, cudaStream_t stream) {
  return Build(table, source, bound, stats, /*cleared=*/true, stream);
}

template <KeyWord K>
cudaError_t ClearAndBuildTable(DeviceTableT<K> table, const BuildSourceT<K>& source, uint32_t bound,
                               DeviceBuildStats* stats, cudaStream_t stream) {
  return Build(table, source, bound, stats, /*cleared=*/false, stream);
}

template cudaError_t ClearTable(DeviceTableT<uint32_t>, DeviceBuildStats*, cudaStream_t);
template cudaError_t ClearTable(DeviceTableT<uint64_t>, DeviceBuildStats*, cudaStream_t);
template cudaError_t BuildTable(DeviceTableT<uint32_t>, const BuildSourceT<uint32_t>&, uint32_t,
                                DeviceBuildStats*, cudaStream_t);
template cudaError_t BuildTable(DeviceTableT<uint64_t>, const BuildSourceT<uint64_t>&, uint32_t,
                                DeviceBuildStats*, cudaStream_t);
template cudaError_t ClearAndBuildTable(DeviceTableT<uint32_t>, const BuildSourceT<uint32_t>&,
                                        uint32_t, DeviceBuildStats*, cudaStream_t);
template cudaError_t ClearAndBuildTable(DeviceTableT<uint64_t>, const BuildSourceT<uint64_t>&,
                                        uint32_t, DeviceBuildStats*, cudaStream_t);

}  // namespace gpujoin::engine::detail
