// Internal (CUDA builds only): the device-level API of the CUDA backend. Every
// function takes device pointers, enqueues work on the given stream and returns
// without synchronising. The backend lowers command-graph nodes onto these; the
// kernel benchmark (bench/) calls them directly on device-resident data.
//
// Table layout: one uint64 per slot, key in the high 32 bits and the value (or,
// during a build, the winning source row) in the low 32 bits. An empty slot is
// all ones (its key is kEmptyKey). A 32-byte sector holds four slots, so one
// sector read tests four keys; the build needs one 64-bit atomic per insert.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "gpujoin/engine/types.hpp"

namespace gpujoin::engine::detail {

inline constexpr uint64_t kEmptySlot = ~uint64_t{0};

/// A table in device memory. `slots` holds max(capacity, 4) entries (the pad
/// keeps 4-slot sector reads in bounds for tiny tables).
struct DeviceTable {
  uint64_t* slots = nullptr;
  uint32_t capacity = 0;
};

/// Number of uint64 entries to allocate for a table of `capacity` slots.
inline size_t TableAllocationSlots(uint32_t capacity) { return capacity < 4 ? 4 : capacity; }

/// Build statistics accumulated on the device (same order as BuildStatistics).
struct DeviceBuildStats {
  unsigned long long unique_keys;
  unsigned long long duplicate_rows;
  unsigned long long overflow_rows;
  unsigned long long invalid_rows;
  unsigned long long total_probes;
  unsigned long long max_probes;
};

/// Query statistics accumulated on the device; missing = rows - found.
struct DeviceQueryStats {
  unsigned long long found;
  unsigned long long total_probes;
  unsigned long long max_probes;
  unsigned long long reserved;  // keeps the struct 32 bytes
};

/// How BuildTable inserts (the result is the same; see docs/PERFORMANCE.md).
enum class BuildPath : int {
  /// ChooseBuildPath decides (the GPUJOIN_CUDA_BUILD_PATH environment
  /// variable, "direct", "waves" or "tiles", overrides it; tests and the bench
  /// use it).
  kAuto = -1,
  /// One thread per row, 64-bit CAS straight into the table, finalisation by one
  /// pass over the table gathering the winners' values.
  kDirect = 0,
  /// Rows grouped by table region into a transient buffer (8 B per row, + 4 B
  /// with explicit values; allocated stream-ordered), inserted in region waves so
  /// that the table crosses DRAM once: each wave step clears a region two ahead
  /// and inserts one region first come first served (ClearAndBuildTable skips
  /// the full-table clear); one pass over the table then sorts every run into
  /// Robin Hood order and, for builds that need finalisation, writes the values
  /// (with explicit values and the stable partition, those carried in the
  /// buffer, in region order). A row whose run would reach a region not cleared
  /// yet, an overflow, or a run too long to sort (over 1024 slots past its
  /// 2048-slot tile) makes the build redo its insert on the direct path.
  kWaves = 2,
  /// Rows turned into key:value words, stably sorted by 2048-slot home tile
  /// (CUB radix sort of 16-bit tile numbers, 32-bit past 2^16 tiles; about 20 B
  /// per row of transient memory), each tile's keys ordered and placed in shared
  /// memory, the runs that cross tiles carried by a scan over the tiles: no
  /// per-row atomics and no finalisation pass. A tile of more than 2560 rows (hot
  /// keys) is first reduced to one word per key. A tile of more than 2560 keys,
  /// a full table or a key past the probe bound makes the build redo its insert
  /// on the direct path. Needs a table of at least 4096 slots and fewer than
  /// 2^31 rows (else kWaves).
  kTiles = 3,
};

/// kAuto takes a large-build path (kTiles, or kWaves where tiles do not fit) only
/// for tables of at least this many bytes...
inline constexpr uint64_t kPartitionMinTableBytes = uint64_t{128} << 20;
/// ... and builds of at least this many rows; smaller builds take kDirect.
inline constexpr uint64_t kPartitionMinRows = uint64_t{1} << 22;
/// The path kAuto takes for large builds that store their values as they insert
/// (generated values that do not wrap: no finalisation): kTiles. Measured on an
/// H200 (2^26 keys, capacity 2^27, the transient buffer recycled by the memory
/// pool as in the backend): 4.16 ms at load 0.5 and 5.74 ms at 0.8, against
/// 5.41 and 12.87 for kWaves and 6.10 and 17.35 for kDirect (docs/PERFORMANCE.md,
/// "Results (current code)"). When the transient buffer cannot be allocated, or
/// would exceed GPUJOIN_CUDA_PARTITION_MAX_BYTES (bytes, when set), the build
/// takes kWaves instead (less transient memory), and if that fails too kDirect
/// (none); the results are the same.
inline constexpr BuildPath kLargeBuildPath = BuildPath::kTiles;
/// The path kAuto takes for large builds that need finalisation (explicit values,
/// batch builds, wrapping generated values): kTiles too (the words carry the
/// final values). Measured on an H200 (same sizes): 4.25 ms at load 0.5 and
/// 5.90 ms at 0.8, against 6.00 and 13.72 for kWaves and 8.17 and 20.34 for kDirect.
inline constexpr BuildPath kLargeFinalizedBuildPath = BuildPath::kTiles;
/// Wave path: log2 of the slots per region for tables of >= 2^25 slots (2^22 =
/// 32 MiB of table, the fastest of 8/16/32 MiB measured; see RegionBits in
/// index_kernels.cu for smaller tables).
inline constexpr uint32_t kWaveRegionBits = 22;

/// Where the value of each retained key comes from.
struct BuildSource {
  const uint32_t* keys = nullptr;      ///< `rows` keys (global rows 0..rows-1)
  uint64_t rows = 0;                   ///< at most 2^32
  const uint32_t* values = nullptr;    ///< explicit values (rows), or null
  uint32_t first_value = 0;            ///< generated value = first_value + row when values is null
  const uint32_t* validity = nullptr;  ///< optional per-row validity (nonzero = valid)
  /// Batch builds: value = chunk_bases[c] + (row - chunk_starts[c]) for the chunk c
  /// holding the row. Null for plain builds. chunk_starts is ascending, starts at 0.
  const uint64_t* chunk_starts = nullptr;
  const uint32_t* chunk_bases = nullptr;
  uint32_t chunk_count = 0;
  /// Insert strategy: read a slot before trying to claim it with a CAS (true), or
  /// CAS straight away (false). The benchmark measures both.
  bool load_before_cas = true;
  /// Insert path (kAuto: ChooseBuildPath decides).
  BuildPath path = BuildPath::kAuto;
  /// Wave path: log2 of the slots per region (0 = automatic: kWaveRegionBits for
  /// large tables, 16 regions for small ones). Raised so that there are at most
  /// 2048 regions and at least 4 slots per region.
  uint32_t region_bits = 0;
  /// Wave path with at most 32 regions: group the rows by region
  /// with the stable warp-multisplit kernels (true: per-(region, segment) counts
  /// and their scan, ballot ranks, each region's run written in row order from a
  /// shared-memory staging tile; with explicit values the words are tagged with
  /// their buffer position and the values carried along, so that finalisation
  /// reads them in region order), or with one shared atomic per row and
  /// scattered stores (false; unstable, row tags; always used above 32
  /// regions). A CUB radix sort on the region was measured too and was slower
  /// (docs/PERFORMANCE.md, "Fifth round").
  bool multisplit_partition = true;
  /// Wave path with the stable (multisplit) partition and explicit values: tag
  /// the words with their buffer position and carry the values through the
  /// partition, so that finalisation reads them in region order (true), or tag
  /// them with the source row and gather values[row] at random when finalising
  /// (false; the benchmark compares both). Same results.
  bool position_tags = true;
  /// Tile path, tests only: sort 32-bit tile numbers even where 16 bits hold
  /// them (tables of at most 2^16 tiles, 2^27 slots, sort 16-bit numbers; larger
  /// ones need 32).
  bool wide_tile_numbers = false;
  /// Tests and benchmarks: device word set by a wave or tile build to 1 when it
  /// fell back to the direct insert (waves: a row spilled past its wave, or the
  /// runs could not be sorted into Robin Hood order; tiles: a tile of more than
  /// 2560 keys, a full table or a key past the bound), else 0. Untouched by the
  /// direct path.
  /// Null: not reported.
  unsigned int* fell_back = nullptr;
  /// Benchmarks only: three events recorded on the stream between the phases of
  /// the build (direct: after the clear, the insert, the finalisation;
  /// waves: after the partition, the wave steps, the rest: fallback launches and
  /// finalisation). Null: none.
  cudaEvent_t* phase_events = nullptr;
};

/// The path BuildTable takes for this table, row count, requested path and
/// whether the build needs finalisation (kAuto: the environment override
/// GPUJOIN_CUDA_BUILD_PATH = "direct" or "waves", else for large
/// tables and builds kLargeBuildPath or kLargeFinalizedBuildPath, else kDirect).
BuildPath ChooseBuildPath(uint32_t capacity, uint64_t rows, BuildPath path, bool finalize);

/// Makes `device`'s default stream-ordered memory pool keep freed memory up to a
/// quarter of the device memory (at least 1 GiB) instead of returning it to the
/// driver at every synchronisation: large builds take a transient buffer of up to
/// 20 bytes per row, and mapping it afresh for each build costs about as much as
/// a build phase. Memory kept by the pool is given back when an index
/// allocation (cudaMalloc) fails (CudaHashIndex::Create). The CUDA backend and
/// the benchmark both call this.
cudaError_t KeepTransientMemory(int device);

/// Clears the table (every slot empty) and zeroes `stats`.
cudaError_t ClearTable(DeviceTable table, DeviceBuildStats* stats, cudaStream_t stream);

/// Inserts every valid row, keeping the lowest source row per key, then writes the
/// retained values (finalisation). `bound` = most slots examined per row. The table
/// must have been cleared. Statistics are added to `stats`.
cudaError_t BuildTable(DeviceTable table, const BuildSource& source, uint32_t bound,
                       DeviceBuildStats* stats, cudaStream_t stream);

/// ClearTable followed by BuildTable, except that the large-build paths need no
/// clearing pass of their own (the tile path writes every slot; the wave path
/// clears region by region inside the build).
cudaError_t ClearAndBuildTable(DeviceTable table, const BuildSource& source, uint32_t bound,
                               DeviceBuildStats* stats, cudaStream_t stream);

/// How a lookup reads the table: every probe step reads one 32-byte sector;
/// the first and the later steps may ask L2 to fetch more bytes around it from
/// DRAM (PTX load prefetch size `.L2::64B/128B/256B`), so that the next sectors
/// of a long run are L2 hits. The results are the same; only the speed differs.
enum class ProbeFetch : int {
  kDefault = -1,       ///< kDefaultProbeFetch
  kPlain = 0,          ///< no prefetch hint
  kL2_64B = 1,         ///< every step 64 B
  kL2_128B = 2,        ///< every step 128 B
  kPlainThen128B = 4,  ///< first step no hint, later steps 128 B
  k64BThen128B = 5,    ///< first step 64 B, later steps 128 B
};
/// What kDefault means: 64 B for the first sector, 128 B for later ones. On an
/// H200 (docs/PERFORMANCE.md, "Fifth round"; three runs) it lifted all-hit lookups
/// at load 0.8 from 26.7-26.8 to 27.4 Gkeys/s, left load 0.5 unchanged and cost
/// 2 % on half-miss lookups at 0.8 (16.5 vs 16.8); 128 B on every step helps
/// those (17.3) but costs 4-11 % on hits; 256 B was slower everywhere (removed).
inline constexpr ProbeFetch kDefaultProbeFetch = ProbeFetch::k64BThen128B;

/// Looks up `rows` keys. Writes values[i] (kEmptyKey when missing); found[i]
/// (1/0) and probes[i] when non-null. Adds to `stats` (zero it first).
cudaError_t LookupKeys(DeviceTable table, const uint32_t* keys, uint64_t rows, uint32_t bound,
                       uint32_t* values, uint8_t* found, uint32_t* probes, DeviceQueryStats* stats,
                       cudaStream_t stream, ProbeFetch fetch = ProbeFetch::kDefault);

/// Scratch device memory a join of `rows` left rows needs (bytes).
size_t JoinScratchBytes(uint64_t rows);

/// Inner join of `rows` left keys (rows < 2^32): lookup, then stable compaction of
/// the matches in left order. Pair k is (left row, right value) of the k-th match;
/// only the first `capacity` pairs are written. The left row is left_rows[i] when
/// non-null, else first_left_row + i. `*count` receives the number of matches
/// (before truncation). found/probes are optional aligned outputs. `scratch` holds
/// JoinScratchBytes(rows) bytes.
cudaError_t JoinKeys(DeviceTable table, const uint32_t* keys, uint64_t rows, uint32_t bound,
                     const uint32_t* left_rows, uint32_t first_left_row, uint32_t* out_left,
                     uint32_t* out_right, uint64_t capacity, unsigned long long* count,
                     uint8_t* found, uint32_t* probes, DeviceQueryStats* stats, void* scratch,
                     cudaStream_t stream);

}  // namespace gpujoin::engine::detail
