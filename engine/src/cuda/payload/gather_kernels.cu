// Gathering stored payload columns for the rows of a lookup or a join
// (payload_ops.hpp): each output row reads its slot's value (the fixed-width
// columns of one record together, bitmaps by warp ballot); strings take two
// passes, a scan of the rows' lengths (whose total the caller checks against its
// limit) and a copy.
#include <cuda_runtime.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include <algorithm>
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

// kBool: one bit per row, 32 rows per ballot.
__global__ void __launch_bounds__(kBlockThreads)
    GatherBitsKernel(StoredColumn column, GatherRows rows, uint8_t* __restrict__ data,
                     uint8_t* __restrict__ validity, unsigned long long* null_count) {
  const uint32_t lane = threadIdx.x & 31u;
  const uint64_t n = RowsOf(rows);
  const uint64_t bitmap_bytes = BitmapBytesOf(rows.positions);
  unsigned long long nulls[1] = {0};
  ForEachWarpStep(rows.positions, [&](uint64_t base) {
    const uint64_t i = base + lane;
    const uint32_t s = PresentSlot(column, rows, i, n);
    const bool present = s != kNoSlot;
    const bool bit = present && BitOf(static_cast<const uint8_t*>(column.data), s);
    const uint32_t bits = __ballot_sync(0xffffffffu, bit);
    if (lane == 0) StoreBitWord(data, base, bits, bitmap_bytes);
    const uint32_t valid = __ballot_sync(0xffffffffu, present);
    if (lane == 0) StoreBitWord(validity, base, valid, bitmap_bytes);
    nulls[0] += i < n && !present ? 1u : 0u;
  });
  BlockFlushStats<1>(nulls, 0, null_count, nullptr);
}

// One column of a fused gather (kernel parameter, by value).
struct FusedColumn {
  const uint8_t* validity;  // the stored validity, or null
  void* data;
  uint8_t* out_validity;
  unsigned long long* null_count;
  uint32_t offset;  // of the value in the record
  uint32_t width;   // 4 or 8
};

// Up to kFusedGatherColumns columns of the same records.
struct FusedGather {
  const uint8_t* records;
  uint64_t stride;
  uint32_t window;  // the loaded window's byte offset in the record
  uint32_t count;
  FusedColumn columns[kFusedGatherColumns];
};

// Loads the kBytes (4 to 64, aligned to kBytes) at p as 4-byte words, in 16-byte
// loads where the window has them.
template <int kBytes>
__device__ __forceinline__ void LoadWindow(const uint8_t* p, uint32_t (&w)[kBytes / 4]) {
  if constexpr (kBytes == 4) {
    w[0] = __ldg(reinterpret_cast<const uint32_t*>(p));
  } else if constexpr (kBytes == 8) {
    const uint2 v = __ldg(reinterpret_cast<const uint2*>(p));
    w[0] = v.x;
    w[1] = v.y;
  } else {
#pragma unroll
    for (int k = 0; k < kBytes / 16; ++k) {
      const uint4 v = __ldg(reinterpret_cast<const uint4*>(p) + k);
      w[4 * k] = v.x;
      w[4 * k + 1] = v.y;
      w[4 * k + 2] = v.z;
      w[4 * k + 3] = v.w;
    }
  }
}

// Word `at` of the window (a warp-uniform index: selects, no local memory).
template <int kWords>
__device__ __forceinline__ uint32_t WordAt(const uint32_t (&w)[kWords], uint32_t at) {
  uint32_t v = 0;
#pragma unroll
  for (int j = 0; j < kWords; ++j) v = uint32_t(j) == at ? w[j] : v;
  return v;
}

// The blocks per SM FusedGatherKernel<kWindowBytes> is built for: full
// occupancy (at most 32 registers) for windows of up to 32 bytes, as random
// reads need every warp in flight; half for the widest window and for loads of
// each value apart, whose values take more registers.
constexpr int FusedBlocksPerSm(int window_bytes) {
  return window_bytes > 0 && window_bytes <= 32 ? 2048 / kBlockThreads : 1024 / kBlockThreads;
}

// kWindowBytes 4 to 64: each row loads that window of its record once (all of
// the columns' values lie in it); 0: each value apart (columns spread over more
// than 64 bytes). Every position writes each column's value (zero when missing,
// past the rows or null) and validity bit, 32 rows per ballot; null counts go
// through shared memory, one atomic per block and column at the end.
template <int kWindowBytes>
__global__ void __launch_bounds__(kBlockThreads, FusedBlocksPerSm(kWindowBytes))
    FusedGatherKernel(FusedGather g, GatherRows rows) {
  constexpr uint32_t kColumns = kFusedGatherColumns;
  __shared__ unsigned long long block_nulls[kColumns];
  if (threadIdx.x < kColumns) block_nulls[threadIdx.x] = 0;
  __syncthreads();
  const uint32_t lane = threadIdx.x & 31u;
  const uint64_t n = RowsOf(rows);
  const uint64_t bitmap_bytes = BitmapBytesOf(rows.positions);
  // Writes column c's value and validity of position i, and counts the warp's nulls.
  const auto put = [&](uint32_t c, uint64_t base, uint64_t i, bool present, uint64_t value,
                       uint32_t row_bits) {
    const FusedColumn& col = g.columns[c];
    if (i < rows.positions) {
      if (col.width == 8) {
        __stcs(static_cast<unsigned long long*>(col.data) + i, value);
      } else {
        __stcs(static_cast<uint32_t*>(col.data) + i, uint32_t(value));
      }
    }
    const uint32_t bits = __ballot_sync(0xffffffffu, present);
    if (lane == 0) {
      StoreBitWord(col.out_validity, base, bits, bitmap_bytes);
      const uint32_t nulls = __popc(row_bits & ~bits);
      if (nulls != 0) atomicAdd(&block_nulls[c], (unsigned long long)nulls);
    }
  };
  ForEachWarpStep(rows.positions, [&](uint64_t base) {
    const uint64_t i = base + lane;
    const uint32_t s = i < n ? rows.slots[i] : kNoSlot;
    const bool found = s != kNoSlot;
    const uint32_t row_bits = __ballot_sync(0xffffffffu, i < n);
    const uint8_t* record = g.records + uint64_t(found ? s : 0) * g.stride;
    if constexpr (kWindowBytes > 0) {
      constexpr int kWords = kWindowBytes / 4;
      uint32_t w[kWords] = {};
      if (found) LoadWindow<kWindowBytes>(record + g.window, w);
#pragma unroll
      for (uint32_t c = 0; c < kColumns; ++c) {
        if (c >= g.count) continue;
        const FusedColumn& col = g.columns[c];
        const bool present = found && (col.validity == nullptr || BitOf(col.validity, s));
        const uint32_t at = (col.offset - g.window) / 4;
        const unsigned long long lo = WordAt(w, at);
        const unsigned long long hi = col.width == 8 ? WordAt(w, at + 1) : 0u;
        put(c, base, i, present, present ? lo | hi << 32 : 0ull, row_bits);
      }
    } else {
      // Every load first, then the stores.
      unsigned long long value[kColumns];
      bool present[kColumns];
#pragma unroll
      for (uint32_t c = 0; c < kColumns; ++c) {
        value[c] = 0;
        present[c] = false;
        if (c >= g.count) continue;
        const FusedColumn& col = g.columns[c];
        present[c] = found && (col.validity == nullptr || BitOf(col.validity, s));
        if (present[c]) {
          value[c] = col.width == 8
                         ? __ldg(reinterpret_cast<const unsigned long long*>(record + col.offset))
                         : __ldg(reinterpret_cast<const uint32_t*>(record + col.offset));
        }
      }
#pragma unroll
      for (uint32_t c = 0; c < kColumns; ++c) {
        if (c < g.count) put(c, base, i, present[c], value[c], row_bits);
      }
    }
  });
  __syncthreads();
#pragma unroll
  for (uint32_t c = 0; c < kColumns; ++c) {
    if (threadIdx.x == c && c < g.count && block_nulls[c] != 0)
      atomicAdd(g.columns[c].null_count, block_nulls[c]);
  }
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
  if (column.type != ColumnType::kBool) {
    const FixedGather one{column, data, validity, null_count};
    return GatherFixedColumns(std::span(&one, 1), rows, stream);
  }
  if (rows.positions == 0) return cudaSuccess;
  static std::atomic<int> resident{0};
  GatherBitsKernel<<<GridOf(GatherBitsKernel, resident, rows.positions), kBlockThreads, 0,
                     stream>>>(column, rows, static_cast<uint8_t*>(data), validity, null_count);
  return cudaGetLastError();
}

namespace {

// Launches FusedGatherKernel for `g`, loading the smallest aligned window of at
// most 64 bytes that holds every column's value (records of at most 64 bytes
// are aligned to their stride, wider ones to 64 bytes, so the window is aligned
// to its size), or each value apart when there is none.
cudaError_t LaunchFused(FusedGather g, const GatherRows& rows, cudaStream_t stream) {
  uint32_t lo = 0xffffffffu, hi = 0;
  for (uint32_t c = 0; c < g.count; ++c) {
    lo = std::min(lo, g.columns[c].offset);
    hi = std::max(hi, g.columns[c].offset + g.columns[c].width);
  }
  static std::atomic<int> resident[6];
  const auto launch = [&](auto kernel, std::atomic<int>& r) {
    kernel<<<GridOf(kernel, r, rows.positions), kBlockThreads, 0, stream>>>(g, rows);
    return cudaGetLastError();
  };
  for (uint32_t bytes = 4; bytes <= 64; bytes *= 2) {
    const uint32_t start = lo / bytes * bytes;
    if (hi > start + bytes) continue;
    g.window = start;
    switch (bytes) {
      case 4:
        return launch(FusedGatherKernel<4>, resident[0]);
      case 8:
        return launch(FusedGatherKernel<8>, resident[1]);
      case 16:
        return launch(FusedGatherKernel<16>, resident[2]);
      case 32:
        return launch(FusedGatherKernel<32>, resident[3]);
      default:
        return launch(FusedGatherKernel<64>, resident[4]);
    }
  }
  g.window = 0;
  return launch(FusedGatherKernel<0>, resident[5]);
}

}  // namespace

cudaError_t GatherFixedColumns(std::span<const FixedGather> columns, const GatherRows& rows,
                               cudaStream_t stream) {
  if (rows.positions == 0 || columns.empty()) return cudaSuccess;
  FusedGather g{};
  for (const FixedGather& f : columns) {
    const auto* records = static_cast<const uint8_t*>(f.column.data);
    if (g.count == kFusedGatherColumns ||
        (g.count > 0 && (records != g.records || f.column.stride != g.stride))) {
      if (const cudaError_t e = LaunchFused(g, rows, stream); e != cudaSuccess) return e;
      g.count = 0;
    }
    g.records = records;
    g.stride = f.column.stride;
    g.columns[g.count++] =
        FusedColumn{f.column.validity, f.data,          f.validity,
                    f.null_count,      f.column.offset, uint32_t(ColumnWidth(f.column.type))};
  }
  return LaunchFused(g, rows, stream);
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
