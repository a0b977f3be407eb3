// Gathering stored payload columns for the rows of a lookup or a join
// (payload_ops.hpp): each output row reads its slot's value (fixed width by
// width, bitmaps by warp ballot); strings take two passes, a scan of the rows'
// lengths (whose total the caller checks against its limit) and a copy.
#include <cuda_runtime.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include <atomic>
#include <cstdint>
#include <cub/device/device_scan.cuh>

#include "cuda/kernel_utils.cuh"
#include "cuda/payload/payload_device.cuh"
#include "cuda/payload/payload_ops.hpp"

namespace gpujoin::engine::detail {
namespace {

// The positions that are rows: all, or the first *count of them.
__device__ __forceinline__ uint64_t RowsOf(const GatherRows& rows) {
  if (rows.count == nullptr) return rows.positions;
  const uint64_t c = *rows.count;
  return c < rows.positions ? c : rows.positions;
}

// The slot whose value position i takes: kNoSlot for a non-row position, a
// missing key or a null stored value.
__device__ __forceinline__ uint32_t PresentSlot(const StoredColumn& column, const GatherRows& rows,
                                                uint64_t i, uint64_t n) {
  if (i >= n) return kNoSlot;
  const uint32_t s = rows.slots[i];
  if (s == kNoSlot) return kNoSlot;
  if (column.validity != nullptr && !BitOf(column.validity, s)) return kNoSlot;
  return s;
}

// kWidth 4 or 8: fixed width; 1: kBool.
template <int kWidth>
__global__ void __launch_bounds__(kBlockThreads)
    GatherKernel(StoredColumn column, GatherRows rows, void* __restrict__ data,
                 uint8_t* __restrict__ validity, unsigned long long* null_count) {
  const uint32_t lane = threadIdx.x & 31u;
  const uint64_t n = RowsOf(rows);
  const uint64_t bitmap_bytes = BitmapBytesOf(rows.positions);
  unsigned long long nulls[1] = {0};
  ForEachWarpStep(rows.positions, [&](uint64_t base) {
    const uint64_t i = base + lane;
    const uint32_t s = PresentSlot(column, rows, i, n);
    const bool present = s != kNoSlot;
    if constexpr (kWidth == 4) {
      if (i < rows.positions)
        __stcs(static_cast<uint32_t*>(data) + i,
               present ? __ldg(static_cast<const uint32_t*>(column.data) + s) : 0u);
    } else if constexpr (kWidth == 8) {
      if (i < rows.positions)
        __stcs(static_cast<unsigned long long*>(data) + i,
               present ? __ldg(static_cast<const unsigned long long*>(column.data) + s) : 0ull);
    } else {
      const bool bit = present && BitOf(static_cast<const uint8_t*>(column.data), s);
      const uint32_t bits = __ballot_sync(0xffffffffu, bit);
      if (lane == 0) StoreBitWord(static_cast<uint8_t*>(data), base, bits, bitmap_bytes);
    }
    const uint32_t bits = __ballot_sync(0xffffffffu, present);
    if (lane == 0) StoreBitWord(validity, base, bits, bitmap_bytes);
    nulls[0] += i < n && !present ? 1u : 0u;
  });
  BlockFlushStats<1>(nulls, 0, null_count, nullptr);
}

// The gathered length of position i (0 past the positions, for the scan's
// last item).
struct GatheredLength {
  StoredColumn column;
  GatherRows rows;
  __device__ uint64_t operator()(uint64_t i) const {
    if (i >= rows.positions) return 0;
    const uint32_t s = PresentSlot(column, rows, i, RowsOf(rows));
    return s == kNoSlot ? 0 : column.offsets[s + 1] - column.offsets[s];
  }
};
using GatheredLengths =
    thrust::transform_iterator<GatheredLength, thrust::counting_iterator<uint64_t>>;

__global__ void __launch_bounds__(kBlockThreads)
    CopyGatheredKernel(StoredColumn column, GatherRows rows, const uint64_t* __restrict__ offsets,
                       uint32_t* __restrict__ out_offsets, uint8_t* __restrict__ bytes,
                       uint8_t* __restrict__ validity, unsigned long long* null_count) {
  const uint32_t lane = threadIdx.x & 31u;
  const uint64_t n = RowsOf(rows);
  const uint64_t bitmap_bytes = BitmapBytesOf(rows.positions);
  if (blockIdx.x == 0 && threadIdx.x == 0)
    out_offsets[rows.positions] = uint32_t(offsets[rows.positions]);
  const auto* in = static_cast<const uint8_t*>(column.data);
  unsigned long long nulls[1] = {0};
  ForEachWarpStep(rows.positions, [&](uint64_t base) {
    const uint64_t i = base + lane;
    const uint32_t s = PresentSlot(column, rows, i, n);
    const bool present = s != kNoSlot;
    uint64_t len = 0;
    const uint8_t* from = nullptr;
    uint8_t* to = nullptr;
    if (i < rows.positions) {
      const uint64_t at = offsets[i];
      out_offsets[i] = uint32_t(at);
      if (present) {
        len = column.offsets[s + 1] - column.offsets[s];
        from = in + column.offsets[s];
        to = bytes + at;
      }
    }
    const uint32_t bits = __ballot_sync(0xffffffffu, present);
    if (lane == 0) StoreBitWord(validity, base, bits, bitmap_bytes);
    nulls[0] += i < n && !present ? 1u : 0u;
    WarpCopyBytes(from, to, len);
  });
  BlockFlushStats<1>(nulls, 0, null_count, nullptr);
}

template <typename Kernel>
unsigned GridOf(Kernel kernel, std::atomic<int>& resident, uint64_t items) {
  return GridFor(items, CachedResident(kernel, resident));
}

}  // namespace

cudaError_t GatherColumn(const StoredColumn& column, const GatherRows& rows, void* data,
                         uint8_t* validity, unsigned long long* null_count, cudaStream_t stream) {
  if (rows.positions == 0) return cudaSuccess;
  static std::atomic<int> resident[3];
  const auto launch = [&](auto kernel, std::atomic<int>& r) {
    kernel<<<GridOf(kernel, r, rows.positions), kBlockThreads, 0, stream>>>(column, rows, data,
                                                                            validity, null_count);
    return cudaGetLastError();
  };
  if (column.type == ColumnType::kBool) return launch(GatherKernel<1>, resident[0]);
  if (ColumnWidth(column.type) == 4) return launch(GatherKernel<4>, resident[1]);
  return launch(GatherKernel<8>, resident[2]);
}

size_t GatheredStringScanBytes(uint64_t positions) {
  size_t temp = 0;
  const GatheredLengths in(thrust::counting_iterator<uint64_t>(0),
                           GatheredLength{StoredColumn{}, GatherRows{nullptr, positions, nullptr}});
  (void)cub::DeviceScan::ExclusiveSum(nullptr, temp, in, static_cast<uint64_t*>(nullptr),
                                      static_cast<int64_t>(positions + 1));
  return temp == 0 ? 1 : temp;
}

cudaError_t ScanGatheredStrings(const StoredColumn& column, const GatherRows& rows,
                                uint64_t* offsets, void* scratch, size_t scratch_bytes,
                                cudaStream_t stream) {
  const GatheredLengths in(thrust::counting_iterator<uint64_t>(0), GatheredLength{column, rows});
  return cub::DeviceScan::ExclusiveSum(scratch, scratch_bytes, in, offsets,
                                       static_cast<int64_t>(rows.positions + 1), stream);
}

cudaError_t CopyGatheredStrings(const StoredColumn& column, const GatherRows& rows,
                                const uint64_t* offsets, uint32_t* out_offsets, uint8_t* bytes,
                                uint8_t* validity, unsigned long long* null_count,
                                cudaStream_t stream) {
  static std::atomic<int> resident{0};
  CopyGatheredKernel<<<GridOf(CopyGatheredKernel, resident, rows.positions), kBlockThreads, 0,
                       stream>>>(column, rows, offsets, out_offsets, bytes, validity, null_count);
  return cudaGetLastError();
}

}  // namespace gpujoin::engine::detail
