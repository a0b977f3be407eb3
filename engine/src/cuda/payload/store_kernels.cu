// Storing a build's payload columns in slot order (payload_ops.hpp): each
// slot's winner row (a pass over the source rows probing the finished table,
// keeping the lowest matching row by atomicMin), then per column a permutation into slot order
// (fixed width into its place in each slot's record, bitmaps by warp ballot) or, for strings, a
// scan of the retained lengths and a copy.
#include <cuda_runtime.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include <atomic>
#include <cstdint>
#include <cub/device/device_scan.cuh>

#include "cuda/index/insert.cuh"
#include "cuda/index/probe.cuh"
#include "cuda/kernel_utils.cuh"
#include "cuda/payload/payload_device.cuh"
#include "cuda/payload/payload_ops.hpp"

namespace gpujoin::engine::detail {
namespace {

// The winner of slot s (kNoWinner for s >= slots).
__device__ __forceinline__ uint32_t WinnerOf(const uint32_t* __restrict__ winners, uint64_t s,
                                             uint64_t slots) {
  return s < slots ? __ldg(winners + s) : kNoWinner;
}

// One thread per source row, grid-stride: a valid row whose key the table
// holds with the row's own value competes for its slot (lowest row wins).
template <KeyWord K>
__global__ void __launch_bounds__(kBlockThreads)
    WinnerKernel(DeviceTableT<K> table, const K* __restrict__ keys,
                 const uint32_t* __restrict__ validity, uint64_t rows, uint32_t bound,
                 FinalizeArgs f, uint32_t* __restrict__ winners) {
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  for (uint64_t i = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < rows; i += stride) {
    const K key = keys[i];
    if (key == kEmptyKeyOf<K> || (validity != nullptr && validity[i] == 0)) continue;
    const ProbeResult r = Probe<K>(table.slots, table.capacity, key, bound);
    if (!r.found) continue;  // dropped as an overflow
    const uint32_t row = uint32_t(i);
    const uint32_t value =
        FinalValue(row, f.values, f.first_value, f.chunk_starts, f.chunk_bases, f.chunk_count);
    if (value == r.value) atomicMin(winners + r.slot, row);
  }
}

// kWidth 4 or 8: fixed width (slot s's value at data + s * stride); 1: kBool;
// 0: only the validity (strings).
template <int kWidth>
__global__ void __launch_bounds__(kBlockThreads)
    PermuteKernel(SourceColumn source, const uint32_t* __restrict__ winners, uint64_t slots,
                  void* __restrict__ data, uint32_t stride, uint8_t* __restrict__ validity,
                  unsigned long long* null_count) {
  const uint32_t lane = threadIdx.x & 31u;
  const uint64_t bitmap_bytes = BitmapBytesOf(slots);
  unsigned long long nulls[1] = {0};
  ForEachWarpStep(slots, [&](uint64_t base) {
    const uint64_t s = base + lane;
    const uint32_t w = WinnerOf(winners, s, slots);
    const bool occ = w != kNoWinner;
    const bool present = occ && (source.validity == nullptr || BitOf(source.validity, w));
    uint8_t* at = static_cast<uint8_t*>(data) + s * stride;
    if constexpr (kWidth == 4) {
      if (s < slots)
        *reinterpret_cast<uint32_t*>(at) =
            present ? __ldg(static_cast<const uint32_t*>(source.data) + w) : 0u;
    } else if constexpr (kWidth == 8) {
      if (s < slots)
        *reinterpret_cast<unsigned long long*>(at) =
            present ? __ldg(static_cast<const unsigned long long*>(source.data) + w) : 0ull;
    } else if constexpr (kWidth == 1) {
      const bool bit = present && BitOf(static_cast<const uint8_t*>(source.data), w);
      const uint32_t bits = __ballot_sync(0xffffffffu, bit);
      if (lane == 0) StoreBitWord(static_cast<uint8_t*>(data), base, bits, bitmap_bytes);
    }
    if (validity != nullptr) {
      const uint32_t bits = __ballot_sync(0xffffffffu, present);
      if (lane == 0) StoreBitWord(validity, base, bits, bitmap_bytes);
    }
    nulls[0] += occ && !present ? 1u : 0u;
  });
  BlockFlushStats<1>(nulls, 0, null_count, nullptr);
}

// The retained length of slot s (0 for empty slots, nulls and s == slots).
struct StoredLength {
  SourceColumn source;
  const uint32_t* winners;
  uint64_t slots;
  __device__ uint64_t operator()(uint64_t s) const {
    const uint32_t w = WinnerOf(winners, s, slots);
    if (w == kNoWinner) return 0;
    if (source.validity != nullptr && !BitOf(source.validity, w)) return 0;
    return source.offsets[w + 1] - source.offsets[w];
  }
};
using StoredLengths = thrust::transform_iterator<StoredLength, thrust::counting_iterator<uint64_t>>;

__global__ void __launch_bounds__(kBlockThreads)
    CopyStoredKernel(SourceColumn source, const uint32_t* __restrict__ winners, uint64_t slots,
                     const uint64_t* __restrict__ offsets, uint8_t* __restrict__ bytes) {
  const uint32_t lane = threadIdx.x & 31u;
  const auto* in = static_cast<const uint8_t*>(source.data);
  const uint64_t first = source.offsets[0];
  ForEachWarpStep(slots, [&](uint64_t base) {
    const uint64_t s = base + lane;
    uint64_t len = 0;
    const uint8_t* from = nullptr;
    uint8_t* to = nullptr;
    const uint32_t w = WinnerOf(winners, s, slots);
    if (w != kNoWinner) {
      if (source.validity == nullptr || BitOf(source.validity, w)) {
        len = source.offsets[w + 1] - source.offsets[w];
        from = in + (source.offsets[w] - first);
        to = bytes + offsets[s];
      }
    }
    WarpCopyBytes(from, to, len);
  });
}

template <typename Kernel>
unsigned GridOf(Kernel kernel, std::atomic<int>& resident, uint64_t items) {
  return GridFor(items, CachedResident(kernel, resident));
}

}  // namespace

template <KeyWord K>
cudaError_t FindPayloadWinners(DeviceTableT<K> table, const BuildSourceT<K>& source, uint32_t bound,
                               uint32_t* winners, cudaStream_t stream) {
  cudaError_t e = cudaMemsetAsync(winners, 0xff,
                                  TableAllocationSlots(table.capacity) * sizeof(uint32_t), stream);
  if (e != cudaSuccess || source.rows == 0) return e;
  static std::atomic<int> resident{0};
  const FinalizeArgs f{source.values, source.first_value, source.chunk_starts, source.chunk_bases,
                       source.chunk_count};
  WinnerKernel<K><<<GridOf(WinnerKernel<K>, resident, source.rows), kBlockThreads, 0, stream>>>(
      table, source.keys, source.validity, source.rows, bound, f, winners);
  return cudaGetLastError();
}

cudaError_t PermuteColumn(const SourceColumn& source, const uint32_t* winners, uint64_t slots,
                          void* data, uint32_t stride, uint8_t* validity,
                          unsigned long long* null_count, cudaStream_t stream) {
  static std::atomic<int> resident[4];
  const auto launch = [&](auto kernel, std::atomic<int>& r) {
    kernel<<<GridOf(kernel, r, slots), kBlockThreads, 0, stream>>>(source, winners, slots, data,
                                                                   stride, validity, null_count);
    return cudaGetLastError();
  };
  if (IsVariableWidth(source.type)) {
    // Only a nullable string column has anything to permute here.
    return validity == nullptr ? cudaSuccess : launch(PermuteKernel<0>, resident[0]);
  }
  if (source.type == ColumnType::kBool) return launch(PermuteKernel<1>, resident[1]);
  if (ColumnWidth(source.type) == 4) return launch(PermuteKernel<4>, resident[2]);
  return launch(PermuteKernel<8>, resident[3]);
}

size_t StoredStringScanBytes(uint64_t slots) {
  size_t temp = 0;
  const StoredLengths in(thrust::counting_iterator<uint64_t>(0),
                         StoredLength{SourceColumn{}, nullptr, slots});
  (void)cub::DeviceScan::ExclusiveSum(nullptr, temp, in, static_cast<uint64_t*>(nullptr),
                                      static_cast<int64_t>(slots + 1));
  return temp == 0 ? 1 : temp;
}

cudaError_t ScanStoredStrings(const SourceColumn& source, const uint32_t* winners, uint64_t slots,
                              uint64_t* offsets, void* scratch, size_t scratch_bytes,
                              cudaStream_t stream) {
  const StoredLengths in(thrust::counting_iterator<uint64_t>(0),
                         StoredLength{source, winners, slots});
  return cub::DeviceScan::ExclusiveSum(scratch, scratch_bytes, in, offsets,
                                       static_cast<int64_t>(slots + 1), stream);
}

cudaError_t CopyStoredStrings(const SourceColumn& source, const uint32_t* winners, uint64_t slots,
                              const uint64_t* offsets, uint8_t* bytes, cudaStream_t stream) {
  static std::atomic<int> resident{0};
  CopyStoredKernel<<<GridOf(CopyStoredKernel, resident, slots), kBlockThreads, 0, stream>>>(
      source, winners, slots, offsets, bytes);
  return cudaGetLastError();
}

#define GPUJOIN_INSTANTIATE_PAYLOAD_STORE(K)                                                 \
  template cudaError_t FindPayloadWinners(DeviceTableT<K>, const BuildSourceT<K>&, uint32_t, \
                                          uint32_t*, cudaStream_t);
GPUJOIN_INSTANTIATE_PAYLOAD_STORE(uint32_t)
GPUJOIN_INSTANTIATE_PAYLOAD_STORE(uint64_t)
#undef GPUJOIN_INSTANTIATE_PAYLOAD_STORE

}  // namespace gpujoin::engine::detail
