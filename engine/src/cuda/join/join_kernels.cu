// Inner join on the device in three steps: a lookup that also writes each warp's
// found rows as a 32-bit mask (LookupKeysMasked), an exclusive scan of the masks'
// bit counts (the matches before each 32-row group), and a scatter in which the
// lanes of a group write its pairs to consecutive positions. Pairs come out in
// left order, so capacity truncation keeps exactly the stable prefix. The anti
// join is the same sequence over the masks of the missing rows: the lookup
// wrote kEmptyKey as their value and kNoSlot as their slot, which become the
// pairs' right rows and slots.
#include <cuda_runtime.h>
#include <thrust/iterator/transform_iterator.h>

#include <cstdint>
#include <cub/device/device_scan.cuh>

#include "cuda/device_ops.hpp"
#include "cuda/join/join_ops.hpp"
#include "cuda/kernel_utils.cuh"

namespace gpujoin::engine::detail {
namespace {

constexpr uint32_t kGroupRows = 32;     // rows per mask word (one warp's step)
constexpr uint32_t kGroupsPerWarp = 4;  // groups one warp scatters: 128 rows
constexpr uint32_t kScatterGroups = kGroupsPerWarp * (kBlockThreads / 32);  // per block

size_t AlignUp(size_t v) { return (v + 255) & ~size_t(255); }

struct BitCount {
  __host__ __device__ uint32_t operator()(uint32_t bits) const {
#ifdef __CUDA_ARCH__
    return uint32_t(__popc(bits));
#else
    return uint32_t(__builtin_popcount(bits));
#endif
  }
};

using MatchCounts = thrust::transform_iterator<BitCount, const uint32_t*>;

// Mask words the scratch holds: one per 32-row group, then zero words up to a
// multiple of kGroupsPerWarp with at least one, so the scan's last entry is the
// total and the scatter can read a warp's words as one uint4.
uint64_t MaskWords(uint64_t rows) {
  const uint64_t groups = (rows + kGroupRows - 1) / kGroupRows;
  return (groups + kGroupsPerWarp) / kGroupsPerWarp * kGroupsPerWarp;
}

struct JoinScratch {
  uint32_t* values = nullptr;   // matched right value per left row
  uint32_t* slots = nullptr;    // with pair slots: the matched slot per left row
  uint32_t* masks = nullptr;    // found bits per 32-row group (MaskWords)
  uint32_t* offsets = nullptr;  // exclusive scan of the masks' bit counts
  void* scan_temp = nullptr;
  size_t scan_temp_bytes = 0;
  size_t total_bytes = 0;
};

// `slots`: with the per-row slots region (JoinKeysWithSlots), carved last so
// the plain join's layout does not change.
JoinScratch CarveScratch(uint64_t rows, void* base, bool slots = false) {
  JoinScratch s;
  const uint64_t words = MaskWords(rows);
  size_t temp = 0;
  cub::DeviceScan::ExclusiveSum(nullptr, temp, MatchCounts(nullptr, BitCount{}),
                                static_cast<uint32_t*>(nullptr), static_cast<int64_t>(words));
  s.scan_temp_bytes = temp;
  auto* p = static_cast<uint8_t*>(base);
  size_t off = 0;
  auto take = [&](size_t bytes) {
    uint8_t* q = p == nullptr ? nullptr : p + off;
    off += AlignUp(bytes);
    return q;
  };
  s.values = reinterpret_cast<uint32_t*>(take(rows * sizeof(uint32_t)));
  s.masks = reinterpret_cast<uint32_t*>(take(words * sizeof(uint32_t)));
  s.offsets = reinterpret_cast<uint32_t*>(take(words * sizeof(uint32_t)));
  s.scan_temp = take(temp == 0 ? 1 : temp);
  if (slots) s.slots = reinterpret_cast<uint32_t*>(take(rows * sizeof(uint32_t)));
  s.total_bytes = off;
  return s;
}

// Each warp takes kGroupsPerWarp consecutive groups; a lane whose row was found
// writes its pair at the group's offset plus the found rows before it in the
// group, so a warp's stores land on consecutive addresses. Positions at or past
// `capacity` are dropped; `*count` gets the total. With kSlots each pair's slot
// (slots[row]) goes to out_slots[pos] as well; without it both are unused.
template <bool kSlots>
__global__ void __launch_bounds__(kBlockThreads)
    ScatterKernel(const uint32_t* __restrict__ masks, const uint32_t* __restrict__ values,
                  const uint32_t* __restrict__ offsets, uint64_t groups,
                  const uint32_t* __restrict__ left_rows, uint32_t first_left_row,
                  const uint32_t* __restrict__ first_left_row_device,
                  uint32_t* __restrict__ out_left, uint32_t* __restrict__ out_right,
                  uint64_t capacity, unsigned long long* count, const uint32_t* __restrict__ slots,
                  uint32_t* __restrict__ out_slots) {
  if (blockIdx.x == 0 && threadIdx.x == 0) *count = offsets[groups];
  const uint32_t lane = threadIdx.x & 31u;
  const uint64_t g0 =
      (uint64_t(blockIdx.x) * (kBlockThreads / 32) + threadIdx.x / 32) * kGroupsPerWarp;
  if (g0 >= groups) return;
  if (first_left_row_device != nullptr) first_left_row = *first_left_row_device;
  const uint4 m4 = __ldg(reinterpret_cast<const uint4*>(masks + g0));
  const uint4 o4 = __ldg(reinterpret_cast<const uint4*>(offsets + g0));
  const uint32_t m[kGroupsPerWarp] = {m4.x, m4.y, m4.z, m4.w};
  const uint32_t o[kGroupsPerWarp] = {o4.x, o4.y, o4.z, o4.w};
  const uint32_t below = (1u << lane) - 1u;  // lanes before this one
  uint32_t v[kGroupsPerWarp];
#pragma unroll
  for (uint32_t k = 0; k < kGroupsPerWarp; ++k)  // a found row is always < rows
    v[k] = (m[k] >> lane) & 1u ? __ldcs(values + (g0 + k) * kGroupRows + lane) : 0u;
#pragma unroll
  for (uint32_t k = 0; k < kGroupsPerWarp; ++k) {
    if (((m[k] >> lane) & 1u) == 0) continue;
    const uint64_t pos = uint64_t(o[k]) + uint32_t(__popc(m[k] & below));
    if (pos >= capacity) continue;
    const uint64_t i = (g0 + k) * kGroupRows + lane;
    out_left[pos] = left_rows != nullptr ? left_rows[i] : first_left_row + uint32_t(i);
    out_right[pos] = v[k];
    if constexpr (kSlots) out_slots[pos] = __ldcs(slots + i);
  }
}

// The joins of every key kind: `lookup(values, masks, slots)` enqueues the
// masked lookup of the left keys (slots only with kSlots); the left row base is
// `first_left_row`, or read on the device from `first_left_row_device` when that
// is non-null; with kSlots the pairs' slots go to `out_slots` (scratch carved
// with the slots region).
template <bool kSlots, class MaskedLookup>
cudaError_t JoinImpl(const MaskedLookup& lookup, uint64_t rows, const uint32_t* left_rows,
                     uint32_t first_left_row, const uint32_t* first_left_row_device,
                     uint32_t* out_left, uint32_t* out_right, uint64_t capacity,
                     unsigned long long* count, void* scratch, uint32_t* out_slots,
                     cudaStream_t stream) {
  if (rows == 0) return cudaMemsetAsync(count, 0, sizeof(*count), stream);
  JoinScratch s = CarveScratch(rows, scratch, kSlots);
  const uint64_t groups = (rows + kGroupRows - 1) / kGroupRows;
  const uint64_t words = MaskWords(rows);
  cudaError_t e = cudaMemsetAsync(s.masks + groups, 0, (words - groups) * sizeof(uint32_t), stream);
  if (e != cudaSuccess) return e;
  e = lookup(s.values, s.masks, kSlots ? s.slots : nullptr);
  if (e != cudaSuccess) return e;
  e = cub::DeviceScan::ExclusiveSum(s.scan_temp, s.scan_temp_bytes,
                                    MatchCounts(s.masks, BitCount{}), s.offsets,
                                    static_cast<int64_t>(words), stream);
  if (e != cudaSuccess) return e;
  const uint64_t blocks = (groups + kScatterGroups - 1) / kScatterGroups;
  ScatterKernel<kSlots><<<unsigned(blocks), kBlockThreads, 0, stream>>>(
      s.masks, s.values, s.offsets, groups, left_rows, first_left_row, first_left_row_device,
      out_left, out_right, capacity, count, s.slots, out_slots);
  return cudaGetLastError();
}

// JoinImpl over key words.
template <KeyWord K, bool kSlots>
cudaError_t JoinKeysImpl(DeviceTableT<K> table, const K* keys, uint64_t rows, uint32_t bound,
                         const uint32_t* left_rows, uint32_t first_left_row,
                         const uint32_t* first_left_row_device, uint32_t* out_left,
                         uint32_t* out_right, uint64_t capacity, unsigned long long* count,
                         uint8_t* found, uint32_t* probes, DeviceQueryStats* stats, void* scratch,
                         uint32_t* out_slots, MaskedRows masked, cudaStream_t stream) {
  const auto lookup = [&](uint32_t* values, uint32_t* masks, uint32_t* slots) {
    if constexpr (kSlots) {
      return LookupKeysMaskedSlots(table, keys, rows, bound, values, found, probes, masks, slots,
                                   stats, stream, masked);
    } else {
      return LookupKeysMasked(table, keys, rows, bound, values, found, probes, masks, stats, stream,
                              masked);
    }
  };
  return JoinImpl<kSlots>(lookup, rows, left_rows, first_left_row, first_left_row_device, out_left,
                          out_right, capacity, count, scratch, out_slots, stream);
}

}  // namespace

size_t JoinScratchBytes(uint64_t rows) { return CarveScratch(rows, nullptr).total_bytes; }

size_t JoinScratchBytesWithSlots(uint64_t rows) {
  return CarveScratch(rows, nullptr, true).total_bytes;
}

template <KeyWord K>
cudaError_t JoinKeys(DeviceTableT<K> table, const K* keys, uint64_t rows, uint32_t bound,
                     const uint32_t* left_rows, uint32_t first_left_row, uint32_t* out_left,
                     uint32_t* out_right, uint64_t capacity, unsigned long long* count,
                     uint8_t* found, uint32_t* probes, DeviceQueryStats* stats, void* scratch,
                     cudaStream_t stream, MaskedRows masked) {
  return JoinKeysImpl<K, false>(table, keys, rows, bound, left_rows, first_left_row, nullptr,
                                out_left, out_right, capacity, count, found, probes, stats, scratch,
                                nullptr, masked, stream);
}

template <KeyWord K>
cudaError_t JoinKeysWithSlots(DeviceTableT<K> table, const K* keys, uint64_t rows, uint32_t bound,
                              const uint32_t* left_rows, uint32_t first_left_row,
                              uint32_t* out_left, uint32_t* out_right, uint32_t* out_slots,
                              uint64_t capacity, unsigned long long* count, uint8_t* found,
                              uint32_t* probes, DeviceQueryStats* stats, void* scratch,
                              cudaStream_t stream, MaskedRows masked) {
  return JoinKeysImpl<K, true>(table, keys, rows, bound, left_rows, first_left_row, nullptr,
                               out_left, out_right, capacity, count, found, probes, stats, scratch,
                               out_slots, masked, stream);
}

template <KeyWord K>
cudaError_t JoinKeysGraphable(DeviceTableT<K> table, const K* keys, uint64_t rows, uint32_t bound,
                              const uint32_t* left_rows, const uint32_t* first_left_row_device,
                              uint32_t* out_left, uint32_t* out_right, uint64_t capacity,
                              unsigned long long* count, uint8_t* found, uint32_t* probes,
                              DeviceQueryStats* stats, void* scratch, cudaStream_t stream,
                              MaskedRows masked) {
  return JoinKeysImpl<K, false>(table, keys, rows, bound, left_rows, 0,
                                left_rows != nullptr ? nullptr : first_left_row_device, out_left,
                                out_right, capacity, count, found, probes, stats, scratch, nullptr,
                                masked, stream);
}

cudaError_t JoinKeyRows(DeviceTableT<ColumnKey> table, const StoredKeyRows& stored,
                        const DeviceKeyRows& query, uint32_t bound, const uint32_t* left_rows,
                        uint32_t first_left_row, uint32_t* out_left, uint32_t* out_right,
                        uint32_t* out_slots, uint64_t capacity, unsigned long long* count,
                        uint8_t* found, uint32_t* probes, DeviceQueryStats* stats, void* scratch,
                        cudaStream_t stream, MaskedRows masked) {
  const auto lookup = [&](uint32_t* values, uint32_t* masks, uint32_t* slots) {
    return LookupKeyRowsMasked(table, stored, query, bound, values, found, probes, masks, slots,
                               stats, stream, masked);
  };
  if (out_slots != nullptr) {
    return JoinImpl<true>(lookup, query.rows, left_rows, first_left_row, nullptr, out_left,
                          out_right, capacity, count, scratch, out_slots, stream);
  }
  return JoinImpl<false>(lookup, query.rows, left_rows, first_left_row, nullptr, out_left,
                         out_right, capacity, count, scratch, nullptr, stream);
}

#define GPUJOIN_INSTANTIATE_JOIN(K)                                                                \
  template cudaError_t JoinKeys(DeviceTableT<K>, const K*, uint64_t, uint32_t, const uint32_t*,    \
                                uint32_t, uint32_t*, uint32_t*, uint64_t, unsigned long long*,     \
                                uint8_t*, uint32_t*, DeviceQueryStats*, void*, cudaStream_t,       \
                                MaskedRows);                                                       \
  template cudaError_t JoinKeysGraphable(DeviceTableT<K>, const K*, uint64_t, uint32_t,            \
                                         const uint32_t*, const uint32_t*, uint32_t*, uint32_t*,   \
                                         uint64_t, unsigned long long*, uint8_t*, uint32_t*,       \
                                         DeviceQueryStats*, void*, cudaStream_t, MaskedRows);      \
  template cudaError_t JoinKeysWithSlots(                                                          \
      DeviceTableT<K>, const K*, uint64_t, uint32_t, const uint32_t*, uint32_t, uint32_t*,         \
      uint32_t*, uint32_t*, uint64_t, unsigned long long*, uint8_t*, uint32_t*, DeviceQueryStats*, \
      void*, cudaStream_t, MaskedRows);
GPUJOIN_INSTANTIATE_JOIN(uint32_t)
GPUJOIN_INSTANTIATE_JOIN(uint64_t)
#undef GPUJOIN_INSTANTIATE_JOIN

}  // namespace gpujoin::engine::detail
