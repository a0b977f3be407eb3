// Internal (CUDA builds only): building a device table. Every function takes
// device pointers, enqueues work on the given stream and returns without
// synchronising. The backend lowers build nodes onto these; the kernel benchmark
// (bench/) and the device-level tests call them directly.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/index/table.hpp"

namespace gpujoin::engine::detail {

/// How a build inserts. Both paths give the same table and statistics, except
/// total_probes with duplicate keys: the tile path counts a duplicate row at its
/// key's final place, the direct insert where the row met its key (docs/engine.md).
enum class BuildPath : int {
  /// ChooseBuildPath decides by size.
  kAuto = -1,
  /// One thread per row, 64-bit CAS straight into the table in Robin Hood
  /// order; then, for builds whose slots hold source rows, one pass over the
  /// table gathering the winners' values (finalisation).
  kDirect = 0,
  /// No per-row atomics: every valid row becomes a word key:final value, the
  /// words are stably sorted by the 2048-slot tile of their home slot into a
  /// transient buffer (TileTransientBytes), each tile's keys are ordered,
  /// reduced to their first row and placed in shared memory, and a scan over
  /// the tiles carries the runs that cross tile boundaries. A tile of more than
  /// 2560 rows (hot keys) is first reduced to one word per key. A tile of more
  /// than 2560 keys, a full table or a key past the probe bound makes the build
  /// redo its insert on the direct path (same result). Needs a table of at least
  /// 4096 slots and fewer than 2^31 rows (else kDirect).
  kTiles = 1,
};

/// kAuto takes kTiles for tables of at least this many bytes and builds of at
/// least kTilesMinRows rows, kDirect for the rest.
inline constexpr uint64_t kTilesMinTableBytes = uint64_t{128} << 20;
inline constexpr uint64_t kTilesMinRows = uint64_t{1} << 22;

/// Where the keys (of key word K) and the value of each retained key come from,
/// and how to build.
template <KeyWord K>
struct BuildSourceT {
  const K* keys = nullptr;             ///< `rows` keys (global rows 0..rows-1)
  uint64_t rows = 0;                   ///< at most 2^32
  const uint32_t* values = nullptr;    ///< explicit values (rows), or null
  uint32_t first_value = 0;            ///< generated value = first_value + row when values is null
  const uint32_t* validity = nullptr;  ///< optional per-row validity (nonzero = valid)
  /// Batch builds: value = chunk_bases[c] + (row - chunk_starts[c]) for the chunk c
  /// holding the row. Null for plain builds. chunk_starts is ascending, starts at 0.
  const uint64_t* chunk_starts = nullptr;
  const uint32_t* chunk_bases = nullptr;
  uint32_t chunk_count = 0;
  /// Insert path (kAuto: ChooseBuildPath decides; BackendOptions may force one).
  BuildPath path = BuildPath::kAuto;
  /// Most bytes of transient device memory the build may take (0: no cap). A
  /// tile build that would need more takes the direct path instead.
  uint64_t transient_max_bytes = 0;
  /// Tests and benchmarks: device word set by a tile build to 1 when it fell
  /// back to the direct insert (a tile of more than 2560 keys, a full table or a
  /// key past the bound), else 0. Untouched by the direct path. Null: not
  /// reported.
  unsigned int* fell_back = nullptr;
  /// Benchmarks only: three events recorded on the stream between the phases of
  /// the build (direct: after the clear, the insert, the finalisation; tiles:
  /// after the words and their sort, the tile kernels, the fallback launches).
  /// Null: none.
  cudaEvent_t* phase_events = nullptr;
};
using BuildSource = BuildSourceT<uint32_t>;
using BuildSource64 = BuildSourceT<uint64_t>;

/// The path a build of `rows` rows into a table of `capacity` slots of
/// `key_type` takes for the requested `path` (kAuto: by size, see
/// kTilesMinTableBytes).
BuildPath ChooseBuildPath(uint32_t capacity, uint64_t rows, BuildPath path,
                          KeyType key_type = KeyType::kUint32);

/// Peak transient device memory (bytes) of a build of `rows` rows into a table
/// of `capacity` slots of `key_type` on `path` (0 for the direct path). The
/// tile path allocates exactly this.
uint64_t BuildTransientBytes(uint32_t capacity, uint64_t rows, BuildPath path,
                             KeyType key_type = KeyType::kUint32);

/// Makes `device`'s default stream-ordered memory pool keep freed memory up to a
/// quarter of the device memory (at least 1 GiB) instead of returning it to the
/// driver at every synchronisation: tile builds take a transient buffer of about
/// 24 bytes per row, and mapping it afresh for each build costs about as much as
/// a build phase. Memory kept by the pool is given back when an index
/// allocation (cudaMalloc) fails (CudaHashIndex::Create). The CUDA backend and
/// the benchmark both call this.
cudaError_t KeepTransientMemory(int device);

// The entry points below are templates on the key word K (uint32_t or
// uint64_t, instantiated in build.cpp).

/// Clears the table (every slot empty) and zeroes `stats`.
template <KeyWord K>
cudaError_t ClearTable(DeviceTableT<K> table, DeviceBuildStats* stats, cudaStream_t stream);

/// Inserts every valid row, keeping the lowest source row per key, and writes
/// the retained values. `bound` = most slots examined per row. The table must
/// have been cleared (ClearTable). Statistics are added to `stats`.
template <KeyWord K>
cudaError_t BuildTable(DeviceTableT<K> table, const BuildSourceT<K>& source, uint32_t bound,
                       DeviceBuildStats* stats, cudaStream_t stream);

/// ClearTable followed by BuildTable, except that the tile path needs no
/// clearing pass (it writes every slot).
template <KeyWord K>
cudaError_t ClearAndBuildTable(DeviceTableT<K> table, const BuildSourceT<K>& source, uint32_t bound,
                               DeviceBuildStats* stats, cudaStream_t stream);

}  // namespace gpujoin::engine::detail
