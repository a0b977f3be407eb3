// Internal to engine/src/cuda/index: what the build paths (direct_build.cu,
// tile_sort.cu, tile_build.cu) and their dispatch (build.cpp) share.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "cuda/index/build.hpp"

namespace gpujoin::engine::detail {

/// Records phase event k of a build when the caller asked for them (bench only).
template <KeyWord K>
cudaError_t MarkPhase(const BuildSourceT<K>& source, int k, cudaStream_t stream) {
  if (source.phase_events == nullptr) return cudaSuccess;
  return cudaEventRecord(source.phase_events[k], stream);
}

/// Carves aligned pieces out of one allocation: Take returns each piece's offset.
struct Carver {
  size_t offset = 0;
  size_t Take(size_t bytes) {
    const size_t at = offset;
    offset = (offset + bytes + 255) & ~size_t{255};
    return at;
  }
};

/// A stream-ordered transient buffer of `bytes`; cudaErrorMemoryAllocation (not
/// sticky, nothing enqueued) when it cannot be had or exceeds `max_bytes` (0: no
/// cap).
cudaError_t AllocateTransient(size_t bytes, uint64_t max_bytes, void** buffer, cudaStream_t stream);

// The paths are templates on the key word K, instantiated for uint32_t and
// uint64_t in their .cu files.

/// The direct path (direct_build.cu): Robin Hood insert of every valid row with
/// tag `tag_offset + row`, then, when `finalize`, the pass that replaces each
/// slot's source row by its value. The table must be clear.
template <KeyWord K>
cudaError_t BuildDirect(DeviceTableT<K> table, const BuildSourceT<K>& source, uint32_t bound,
                        uint32_t tag_offset, bool finalize, DeviceBuildStats* stats,
                        cudaStream_t stream);

/// The fallback of a large-build path (direct_build.cu): when the device word
/// `*redo` is nonzero once the work before runs, clears the table and the
/// statistics and runs the direct path; else the enqueued kernels return at once.
template <KeyWord K>
cudaError_t RedoDirectIf(const unsigned int* redo, DeviceTableT<K> table,
                         const BuildSourceT<K>& source, uint32_t bound, uint32_t tag_offset,
                         bool finalize, DeviceBuildStats* stats, cudaStream_t stream);

/// The tile path (tile_build.cu). Clears nothing first (it writes every slot);
/// falls back to the direct insert itself. *no_buffer is set (and nothing is
/// enqueued) when its transient buffer cannot be had: the caller then inserts
/// directly; any other error is the build's.
template <KeyWord K>
cudaError_t BuildTiles(DeviceTableT<K> table, const BuildSourceT<K>& source, uint32_t bound,
                       uint32_t tag_offset, bool finalize, DeviceBuildStats* stats, bool* no_buffer,
                       cudaStream_t stream);

/// Whether the tile path can build this table (two tiles, a CUB item count).
bool TilesFit(uint32_t capacity, uint64_t rows);

/// The tile path's transient buffer for key word `key_type`: exact bytes
/// (tile_sort.cu).
uint64_t TileTransientBytes(uint32_t capacity, uint64_t rows, KeyType key_type);

}  // namespace gpujoin::engine::detail
