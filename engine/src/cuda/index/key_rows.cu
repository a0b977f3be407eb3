// Kernels of key-schema tables (key_rows.hpp).
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>

#include "cuda/index/build.hpp"
#include "cuda/index/key_rows.hpp"
#include "cuda/index/probe.cuh"
#include "cuda/kernel_utils.cuh"
#include "cuda/payload/payload_ops.hpp"
#include "hashing/key_compare.hpp"

namespace gpujoin::engine::detail {
namespace {

// Launches `kernel` over `items` on a grid sized by its occupancy.
template <typename Kernel, typename... Args>
cudaError_t Launch(Kernel kernel, std::atomic<int>& resident, uint64_t items, cudaStream_t stream,
                   Args... args) {
  if (items == 0) return cudaSuccess;
  kernel<<<GridFor(items, CachedResident(kernel, resident)), kBlockThreads, 0, stream>>>(args...);
  return cudaGetLastError();
}

__global__ void __launch_bounds__(kBlockThreads)
    FinishFingerprintsKernel(uint64_t* __restrict__ hashes,
                             const uint8_t* __restrict__ hash_validity,
                             const uint32_t* __restrict__ row_validity, uint64_t rows,
                             uint64_t mask, uint8_t* __restrict__ valid) {
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  for (uint64_t r = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; r < rows; r += stride) {
    hashes[r] &= mask;
    const bool ok =
        BitmapBit(hash_validity, r) && (row_validity == nullptr || row_validity[r] != 0);
    valid[r] = ok ? 1 : 0;
  }
}

// The transient grouping table of a build: `capacity` (a power of two, at
// least twice the rows) words of (fingerprint, row), all ones when empty.
struct GroupTable {
  Slot64* slots;
  uint64_t capacity;
};

// Pass 1: each valid row finds its key's word (claiming an empty one), lowers
// the word's row to its own when smaller, and records where: at[r]. Linear
// probing without order; every thread of one key walks the same slots from the
// same home, so the first of them to claim a slot is the one all meet.
__global__ void __launch_bounds__(kBlockThreads)
    GroupRowsKernel(DeviceKeyRows keys, GroupTable g, uint32_t* __restrict__ at) {
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  const uint64_t mask = g.capacity - 1;
  using S = Slots<ColumnKey>;
  for (uint64_t r = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; r < keys.rows; r += stride) {
    if (keys.valid[r] == 0) continue;
    const uint64_t fp = keys.fingerprints[r];
    const Slot64 mine{fp, r};
    uint64_t pos = SlotHash(fp) & mask;
    while (true) {
      Slot64* slot = g.slots + pos;
      Slot64 cur = S::LoadL2(slot);
      bool placed = false;
      while (true) {
        if (S::IsEmpty(cur)) {
          const Slot64 prev = S::Cas(slot, S::Empty(), mine);
          if (S::Same(prev, S::Empty())) {
            placed = true;
            break;
          }
          cur = prev;
          continue;
        }
        if (cur.key != fp || !KeyViewsEqual(keys.views, cur.tag, keys.views, r, keys.columns)) {
          break;  // another key: on to the next slot
        }
        // The key's word: keep the lower row (the word's row only ever falls,
        // and every row it takes holds the same key).
        if (cur.tag > r) {
          const Slot64 prev = S::Cas(slot, cur, mine);
          if (!S::Same(prev, cur)) {
            cur = prev;
            continue;
          }
        }
        placed = true;
        break;
      }
      if (placed) {
        at[r] = uint32_t(pos);
        break;
      }
      pos = (pos + 1) & mask;
    }
  }
}

// Pass 2: each representative (the lowest row of its key) is inserted in
// Robin Hood order of (fingerprint, row). Counts unique keys, overflow rows
// (the representative's; its key's other rows count in pass 3), probes and
// carried keys dropped at the bound, as InsertStep does.
__global__ void __launch_bounds__(kBlockThreads)
    InsertRepresentativesKernel(DeviceTableT<ColumnKey> table, DeviceKeyRows keys, GroupTable g,
                                const uint32_t* __restrict__ at, uint32_t bound,
                                DeviceBuildStats* stats) {
  unsigned long long sums[5] = {0, 0, 0, 0, 0};  // unique, duplicate, overflow, invalid, probes
  unsigned long long max_probes = 0;
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  for (uint64_t r = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; r < keys.rows; r += stride) {
    if (keys.valid[r] == 0) {
      ++sums[3];
      continue;
    }
    if (g.slots[at[r]].tag != r) continue;  // not its key's lowest row
    const uint64_t fp = keys.fingerprints[r];
    InsertWord(table, FpRow{fp, uint32_t(r)}, Slot64{fp, r}, bound, sums, max_probes);
  }
  BlockFlushStats<5>(sums, max_probes, &stats->unique_keys, &stats->max_probes);
}

// Pass 3: every other valid row probes the finished table for its key's
// representative: a duplicate at the key's final place, or (its key did not
// fit within the bound) an overflow row that examined `bound` slots.
__global__ void __launch_bounds__(kBlockThreads)
    CountFollowersKernel(DeviceTableT<ColumnKey> table, DeviceKeyRows keys, GroupTable g,
                         const uint32_t* __restrict__ at, uint32_t bound, DeviceBuildStats* stats) {
  unsigned long long sums[5] = {0, 0, 0, 0, 0};
  unsigned long long max_probes = 0;
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  for (uint64_t r = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; r < keys.rows; r += stride) {
    if (keys.valid[r] == 0) continue;
    const uint32_t representative = uint32_t(g.slots[at[r]].tag);
    if (representative == r) continue;
    const ProbeResult p =
        ProbeWhere<ColumnKey>(table.slots, table.capacity, keys.fingerprints[r], bound,
                              [&](uint32_t row) { return row == representative; });
    if (p.found) {
      ++sums[1];
      sums[4] += p.probes;
      if (p.probes > max_probes) max_probes = p.probes;
    } else {
      ++sums[2];
      sums[4] += bound;
      if (bound > max_probes) max_probes = bound;
    }
  }
  BlockFlushStats<5>(sums, max_probes, &stats->unique_keys, &stats->max_probes);
}

__global__ void __launch_bounds__(kBlockThreads)
    RowValuesKernel(uint64_t rows, FinalizeArgs f, uint32_t* __restrict__ row_values) {
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  for (uint64_t r = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; r < rows; r += stride) {
    row_values[r] = FinalValue(uint32_t(r), f.values, f.first_value, f.chunk_starts, f.chunk_bases,
                               f.chunk_count);
  }
}

__global__ void __launch_bounds__(kBlockThreads)
    WinnersKernel(DeviceTableT<ColumnKey> table, uint64_t slots, uint32_t* __restrict__ winners) {
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  for (uint64_t s = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; s < slots; s += stride) {
    const Slot64 w = table.slots[s];
    winners[s] = Slots<ColumnKey>::IsEmpty(w) ? kNoWinner : uint32_t(w.tag);
  }
}

uint64_t GroupCapacity(uint64_t rows) {
  uint64_t c = 4;
  while (c < 2 * rows) c <<= 1;
  return c;
}

}  // namespace

cudaError_t FinishFingerprints(uint64_t* hashes, const uint8_t* hash_validity,
                               const uint32_t* row_validity, uint64_t rows, uint32_t bits,
                               uint8_t* valid, cudaStream_t stream) {
  static std::atomic<int> resident{0};
  const uint64_t mask = bits >= 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
  return Launch(FinishFingerprintsKernel, resident, rows, stream, hashes, hash_validity,
                row_validity, rows, mask, valid);
}

uint64_t KeyBuildScratchBytes(uint64_t rows) {
  return GroupCapacity(rows) * sizeof(Slot64) + rows * sizeof(uint32_t);
}

cudaError_t BuildKeyTable(DeviceTableT<ColumnKey> table, const DeviceKeyRows& keys, uint32_t bound,
                          void* scratch, uint64_t scratch_bytes, DeviceBuildStats* stats,
                          cudaStream_t stream) {
  const DeviceTableT<uint64_t> words{reinterpret_cast<Slot64*>(table.slots), table.capacity};
  cudaError_t e = ClearTable(words, stats, stream);
  if (e != cudaSuccess || keys.rows == 0) return e;
  if (keys.rows > kMaxKeyBuildRows || scratch_bytes < KeyBuildScratchBytes(keys.rows)) {
    return cudaErrorInvalidValue;
  }
  const GroupTable g{static_cast<Slot64*>(scratch), GroupCapacity(keys.rows)};
  auto* at = reinterpret_cast<uint32_t*>(g.slots + g.capacity);
  e = cudaMemsetAsync(g.slots, 0xff, g.capacity * sizeof(Slot64), stream);
  if (e != cudaSuccess) return e;
  static std::atomic<int> group_resident{0}, insert_resident{0}, follow_resident{0};
  e = Launch(GroupRowsKernel, group_resident, keys.rows, stream, keys, g, at);
  if (e != cudaSuccess) return e;
  e = Launch(InsertRepresentativesKernel, insert_resident, keys.rows, stream, table, keys, g,
             static_cast<const uint32_t*>(at), bound, stats);
  if (e != cudaSuccess) return e;
  return Launch(CountFollowersKernel, follow_resident, keys.rows, stream, table, keys, g,
                static_cast<const uint32_t*>(at), bound, stats);
}

cudaError_t WriteRowValues(uint64_t rows, const uint32_t* values, uint32_t first_value,
                           const uint64_t* chunk_starts, const uint32_t* chunk_bases,
                           uint32_t chunk_count, uint32_t* row_values, cudaStream_t stream) {
  static std::atomic<int> resident{0};
  const FinalizeArgs f{values, first_value, chunk_starts, chunk_bases, chunk_count};
  return Launch(RowValuesKernel, resident, rows, stream, rows, f, row_values);
}

cudaError_t KeyTableWinners(DeviceTableT<ColumnKey> table, uint32_t* winners, cudaStream_t stream) {
  static std::atomic<int> resident{0};
  const uint64_t slots = TableAllocationSlots(table.capacity);
  return Launch(WinnersKernel, resident, slots, stream, table, slots, winners);
}

}  // namespace gpujoin::engine::detail
