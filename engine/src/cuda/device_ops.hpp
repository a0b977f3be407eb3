// Internal (CUDA builds only): the device-level API of the CUDA backend. Every
// function takes device pointers, enqueues work on the given stream and returns
// without synchronising. The backend lowers command-graph nodes onto these; the
// kernel benchmark (bench/) calls them directly on device-resident data.
//
// Table layout (blocked key/value): slots are grouped eight at a time into
// 64-byte blocks. Block b holds the keys of slots 8b..8b+7 in its first 32-byte
// sector and their values in its second, so one sector read tests eight keys
// and the value sector (same 64 bytes) is read only on a hit. An empty slot has
// key kEmptyKey. Builds keep, per key, the lowest tag (source row, or the final
// value when generated values grow with the row); see InsertStrategy.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "gpujoin/engine/types.hpp"

namespace gpujoin::engine::detail {

inline constexpr uint64_t kEmptySlot = ~uint64_t{0};

/// A table in device memory. `slots` is the allocation: max(capacity, 8) 8-byte
/// units (the pad keeps 64-byte block accesses in bounds for tiny tables), read
/// as 32-bit words through KeyWord/ValueWord.
struct DeviceTable {
  uint64_t* slots = nullptr;
  uint32_t capacity = 0;
  /// The allocation as 32-bit words.
  __host__ __device__ uint32_t* words() const { return reinterpret_cast<uint32_t*>(slots); }
};

/// Number of uint64 entries to allocate for a table of `capacity` slots.
inline size_t TableAllocationSlots(uint32_t capacity) { return capacity < 8 ? 8 : capacity; }

/// Index (in 32-bit words) of slot `slot`'s key in the blocked layout.
__host__ __device__ inline uint64_t KeyWord(uint32_t slot) {
  return uint64_t(slot >> 3) * 16u + (slot & 7u);
}

/// Index (in 32-bit words) of slot `slot`'s value in the blocked layout.
__host__ __device__ inline uint64_t ValueWord(uint32_t slot) { return KeyWord(slot) + 8u; }

/// Freed stream-ordered memory the device's default pool keeps instead of giving
/// it back to the driver at each synchronisation (the backend sets it; the
/// benchmark does the same). Region builds take about 12-16 bytes of scratch per
/// row, so this covers builds of ~2^28 rows without re-mapping memory.
inline constexpr uint64_t kPoolReleaseThresholdBytes = uint64_t{4} << 30;

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

/// How BuildTable inserts.
enum class InsertStrategy {
  /// Partition the rows by table region (8192 slots) with two passes, insert each
  /// region in shared memory and write it out whole; rows whose probe run leaves
  /// their region finish with global atomics. Needs scratch memory (about 12-16
  /// bytes per row, from the stream-ordered pool) and 2^14 <= capacity <= 2^28,
  /// rows < 2^32; otherwise (or when the scratch allocation fails) kSplit is used.
  kRegions,
  /// 32-bit CAS on the key word + 32-bit atomicMin on the value word, directly in
  /// the blocked layout.
  kSplit,
  /// One 64-bit CAS on packed key:tag words, then an in-place pass into the
  /// blocked layout (fused with finalisation).
  kPacked,
};

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
  /// Insert strategy (all give the same contents and statistics; the benchmark
  /// measures each).
  InsertStrategy strategy = InsertStrategy::kRegions;
};

/// Clears the table (every slot empty) and zeroes `stats`.
cudaError_t ClearTable(DeviceTable table, DeviceBuildStats* stats, cudaStream_t stream);

/// Inserts every valid row, keeping the lowest source row per key, then writes the
/// retained values (finalisation). `bound` = most slots examined per row. The table
/// must have been cleared. Statistics are added to `stats`.
cudaError_t BuildTable(DeviceTable table, const BuildSource& source, uint32_t bound,
                       DeviceBuildStats* stats, cudaStream_t stream);

/// Looks up `rows` keys. Writes values[i] (kEmptyKey when missing); found[i]
/// (1/0) and probes[i] when non-null. Adds to `stats` (zero it first).
cudaError_t LookupKeys(DeviceTable table, const uint32_t* keys, uint64_t rows, uint32_t bound,
                       uint32_t* values, uint8_t* found, uint32_t* probes, DeviceQueryStats* stats,
                       cudaStream_t stream);

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

/// Device inputs/outputs of one grouped aggregation.
struct AggregateArgs {
  AggregateOp op = AggregateOp::kCount;
  const uint32_t* keys = nullptr;
  const float* values = nullptr;   ///< required unless op == kCount
  const uint32_t* mask = nullptr;  ///< optional
  uint64_t rows = 0;
  uint32_t groups = 0;  ///< at least 1
  /// kCount: the output. Other ops: contributing rows per group (required for
  /// kMean; may be null for sum/min/max when not requested).
  uint32_t* counts = nullptr;
  float* output = nullptr;  ///< value ops: the output (groups floats)
  /// Benchmarks only: -1 = choose by group count; else the path of AggregatePath's
  /// numbering to use when it can hold the groups.
  int force_path = -1;
};

/// Initialises the outputs, accumulates all rows and finalises (min/max decoding,
/// mean division, NaN for empty groups), all on `stream`.
cudaError_t Aggregate(const AggregateArgs& args, cudaStream_t stream);

/// Which kernel path Aggregate takes for `groups` groups (for tests and the bench):
/// 3 = lane-private shared accumulators (<= 16 groups), 1 = block-private shared
/// accumulators (<= 256), 2 = global atomics; 0 = __match_any_sync warp combining
/// (<= 16 groups, only when forced).
int AggregatePath(uint32_t groups);

}  // namespace gpujoin::engine::detail
