// Row hashing on the device, the kernels: one kernel that evaluates the shared
// row hash (hashing/row_hash.hpp, the same inline functions the CPU backend
// runs) over any node, and kernels of their own for one fixed-width column and
// one binary column, launched by LaunchHashRows. The uploads, passes and
// downloads around them are host code (hash_rows_device.cpp).
#include <cuda_runtime.h>

#include <cstdint>
#include <span>

#include "cuda/hash/hash_device.hpp"
#include "hashing/row_hash.hpp"

namespace gpujoin::engine::detail {

namespace {

constexpr int kBlockSize = 256;  // a multiple of the warp size (the validity ballot needs it)
constexpr uint64_t kMaxBlocks = 8192;

// Views the generic kernel copies into shared memory (more are read from global).
constexpr uint32_t kSharedViews = 8;

// One warp hashes 32 consecutive rows per step, so that its validity ballot is
// exactly 4 output bytes that no other warp touches (no atomics).
template <typename H>
__global__ void __launch_bounds__(kBlockSize)
    HashRowsKernel(const HashView* __restrict__ views, uint32_t num_columns, uint64_t rows,
                   H* __restrict__ out, uint8_t* __restrict__ out_validity) {
  // The views are read for every row: a block keeps its own copy.
  __shared__ HashView s_views[kSharedViews];
  const HashView* columns = views;
  if (num_columns <= kSharedViews) {
    for (uint32_t i = threadIdx.x; i < num_columns; i += blockDim.x) s_views[i] = views[i];
    __syncthreads();
    columns = s_views;
  }
  const uint32_t lane = threadIdx.x % 32;
  const uint64_t warp = (uint64_t{blockIdx.x} * blockDim.x + threadIdx.x) / 32;
  const uint64_t warps = uint64_t{gridDim.x} * blockDim.x / 32;
  for (uint64_t base = warp * 32; base < rows; base += warps * 32) {
    const uint64_t row = base + lane;
    bool valid = false;
    if (row < rows) {
      H h;
      valid = HashRow<H>(columns, num_columns, row, &h);
      out[row] = h;
    }
    const uint32_t ballot = __ballot_sync(0xFFFFFFFFu, valid);
    if (lane < 4 && base + lane * 8 < rows) {
      out_validity[base / 8 + lane] = static_cast<uint8_t>(ballot >> (lane * 8));
    }
  }
}

// Values of one fixed-width column, 4 per lane (rows r0 .. r0 + 3), as bits.
template <uint32_t kWidth>
__device__ __forceinline__ void LoadFour(const uint8_t* p, uint64_t (&bits)[4]) {
  if constexpr (kWidth == 8) {
    const ulonglong2 a = __ldcs(reinterpret_cast<const ulonglong2*>(p));
    const ulonglong2 b = __ldcs(reinterpret_cast<const ulonglong2*>(p) + 1);
    bits[0] = a.x, bits[1] = a.y, bits[2] = b.x, bits[3] = b.y;
  } else if constexpr (kWidth == 4) {
    const uint4 a = __ldcs(reinterpret_cast<const uint4*>(p));
    bits[0] = a.x, bits[1] = a.y, bits[2] = a.z, bits[3] = a.w;
  } else if constexpr (kWidth == 2) {
    const uint2 a = __ldcs(reinterpret_cast<const uint2*>(p));
    bits[0] = a.x & 0xFFFFu, bits[1] = a.x >> 16, bits[2] = a.y & 0xFFFFu, bits[3] = a.y >> 16;
  } else {
    const uint32_t a = __ldcs(reinterpret_cast<const uint32_t*>(p));
    for (int j = 0; j < 4; ++j) bits[j] = (a >> (8 * j)) & 0xFFu;
  }
}

// Stores the hashes of rows r0 .. r0 + 3 (16-byte aligned).
template <typename H>
__device__ __forceinline__ void StoreFour(H* p, const H (&h)[4]) {
  if constexpr (sizeof(H) == 8) {
    __stcs(reinterpret_cast<ulonglong2*>(p), make_ulonglong2(h[0], h[1]));
    __stcs(reinterpret_cast<ulonglong2*>(p) + 1, make_ulonglong2(h[2], h[3]));
  } else {
    __stcs(reinterpret_cast<uint4*>(p), make_uint4(h[0], h[1], h[2], h[3]));
  }
}

// Whether row r (< rows) of the column is valid; false past the end.
__device__ __forceinline__ bool RowValid(const HashView& c, uint64_t r, uint64_t rows) {
  return r < rows && (c.validity == nullptr || BitmapBit(c.validity, c.validity_bit_offset + r));
}

// The end of a 128-row warp step of the kernels below, by every lane of the
// warp: the lane's four hashes of rows r0 .. r0 + 3 (one vector store when
// `vector` and all four rows exist, else one row at a time) and its four
// validity bits `valid`, which with lane + 1's make one byte of the bitmap.
template <typename H>
__device__ __forceinline__ void WriteStep(const H (&h)[4], uint32_t valid, uint64_t base,
                                          uint64_t r0, uint64_t rows, bool vector, uint32_t lane,
                                          H* __restrict__ out, uint8_t* __restrict__ out_validity) {
  if (vector && r0 + 3 < rows) {
    StoreFour<H>(out + r0, h);
  } else {
    for (int j = 0; j < 4 && r0 + j < rows; ++j) out[r0 + j] = h[j];
  }
  const uint32_t next = __shfl_down_sync(0xFFFFFFFFu, valid, 1);
  if ((lane & 1) == 0 && r0 < rows) {
    out_validity[base / 8 + lane / 2] = static_cast<uint8_t>(valid | (next << 4));
  }
}

// One fixed-width column of kWidth (1, 2, 4 or 8) bytes, the view passed by
// value: the generic kernel's row hash (FixedWidthHash, as FlatValueHash) with
// four rows per lane, so that each lane has 4 * kWidth bytes in flight, read and
// written with vector loads and stores when the values and the output are
// 16-byte aligned (else, and for the last rows, one row at a time). A warp step
// covers 128 rows: lane l's four validity bits and lane l + 1's make one byte.
template <typename H, uint32_t kWidth>
__global__ void __launch_bounds__(kBlockSize)
    HashFixedKernel(HashView c, uint64_t rows, H* __restrict__ out,
                    uint8_t* __restrict__ out_validity) {
  const uint32_t lane = threadIdx.x % 32;
  const uint64_t warp = (uint64_t{blockIdx.x} * blockDim.x + threadIdx.x) / 32;
  const uint64_t warps = uint64_t{gridDim.x} * blockDim.x / 32;
  const uint8_t* const data = c.data + c.value_offset * kWidth;
  const bool aligned =
      ((reinterpret_cast<uintptr_t>(data) | reinterpret_cast<uintptr_t>(out)) & 15u) == 0;
  for (uint64_t base = warp * 128; base < rows; base += warps * 128) {
    const uint64_t r0 = base + 4 * lane;
    uint64_t bits[4] = {0, 0, 0, 0};
    const bool whole = aligned && r0 + 3 < rows;
    if (whole) {
      LoadFour<kWidth>(data + r0 * kWidth, bits);
    } else {
      for (int j = 0; j < 4; ++j) {
        if (r0 + j >= rows) break;
        const uint8_t* p = data + (r0 + j) * kWidth;
        if constexpr (kWidth == 8) bits[j] = LoadWord64(p);
        if constexpr (kWidth == 4) bits[j] = LoadWord32(p);
        if constexpr (kWidth == 2) bits[j] = LoadUnaligned16(p);
        if constexpr (kWidth == 1) bits[j] = *p;
      }
    }
    H h[4];
    uint32_t valid = 0;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const bool v = RowValid(c, r0 + j, rows);
      h[j] = v ? FixedWidthHash<H>(c.type, bits[j]) : H{0};
      valid |= uint32_t{v} << j;
    }
    WriteStep<H>(h, valid, base, r0, rows, aligned, lane, out, out_validity);
  }
}

// The binary kernel's shared-memory window per warp (8-byte words): the bytes of
// a 128-row step when the strings average up to about 31 bytes.
constexpr uint32_t kStageWords = 512;

// One binary column with offsets of type O (int32_t: binary/string, int64_t:
// large), the view passed by value. A warp step covers 128 rows, lane l rows
// base + 4l .. + 3 (consecutive, so the warp's bytes are one range): the warp
// first copies the aligned 8-byte words holding those bytes into its window
// (every lane's loads in flight at once, where a row-per-thread kernel would
// wait for the offsets, then the bytes, of one row at a time), then each lane
// hashes its rows from the window with the same HashOfBytes; a step whose bytes
// do not fit reads them from global memory instead. Validity and output as
// HashFixedKernel.
// Five blocks per SM (48 registers, no spills; 58 without the bound) ran 16-byte
// strings 5 % faster on the H200 than four.
template <typename H, typename O>
__global__ void __launch_bounds__(kBlockSize, 5)
    HashBinaryKernel(HashView c, uint64_t rows, H* __restrict__ out,
                     uint8_t* __restrict__ out_validity) {
  __shared__ uint64_t s_stage[kBlockSize / 32][kStageWords];
  const uint32_t lane = threadIdx.x % 32;
  uint64_t* const stage = s_stage[threadIdx.x / 32];
  const uint64_t warp = (uint64_t{blockIdx.x} * blockDim.x + threadIdx.x) / 32;
  const uint64_t warps = uint64_t{gridDim.x} * blockDim.x / 32;
  const O* const offsets =
      reinterpret_cast<const O*>(sizeof(O) == 4 ? static_cast<const void*>(c.offsets)
                                                : static_cast<const void*>(c.large_offsets)) +
      c.value_offset;
  const bool aligned = (reinterpret_cast<uintptr_t>(out) & 15u) == 0;
  for (uint64_t base = warp * 128; base < rows; base += warps * 128) {
    const uint64_t r0 = base + 4 * lane;
    int64_t off[5];
#pragma unroll
    for (int j = 0; j < 5; ++j) {
      off[j] = static_cast<int64_t>(offsets[r0 + j < rows ? r0 + j : rows]) - c.data_base;
    }
    // The step's bytes [first, last): lane 0's first row to lane 31's end.
    const int64_t first = __shfl_sync(0xFFFFFFFFu, off[0], 0);
    const int64_t last = __shfl_sync(0xFFFFFFFFu, off[4], 31);
    const uintptr_t a0 = reinterpret_cast<uintptr_t>(c.data + first) & ~uintptr_t{7};
    const uintptr_t a1 =
        last > first ? (reinterpret_cast<uintptr_t>(c.data + last) + 7) & ~uintptr_t{7} : a0;
    const uint64_t words = (a1 - a0) / 8;
    const bool staged = words <= kStageWords;
    if (staged) {
      const uint64_t* src = reinterpret_cast<const uint64_t*>(a0);
      for (uint64_t i = lane; i < words; i += 32) stage[i] = __ldcs(src + i);
      __syncwarp();
    }
    H h[4];
    uint32_t valid = 0;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const bool v = RowValid(c, r0 + j, rows);
      h[j] = H{0};
      if (v) {
        const uint8_t* p = c.data + off[j];
        if (staged)
          p = reinterpret_cast<const uint8_t*>(stage) + (reinterpret_cast<uintptr_t>(p) - a0);
        h[j] = HashOfBytes<H>(p, static_cast<uint64_t>(off[j + 1] - off[j]));
      }
      valid |= uint32_t{v} << j;
    }
    WriteStep<H>(h, valid, base, r0, rows, aligned, lane, out, out_validity);
    __syncwarp();  // the window is rewritten by the next step
  }
}

}  // namespace

template <typename H>
cudaError_t LaunchHashRows(std::span<const HashView> host_views, const HashView* views,
                           uint64_t rows, H* out, uint8_t* out_validity, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  const uint32_t num_columns = static_cast<uint32_t>(host_views.size());
  const uint32_t width =
      num_columns == 1 && host_views[0].child == nullptr ? FixedWidth(host_views[0].type) : 0;
  if (width != 0 && width <= 8) {
    const uint64_t blocks_needed = (rows + 4 * kBlockSize - 1) / (4 * kBlockSize);
    const unsigned blocks =
        static_cast<unsigned>(blocks_needed < kMaxBlocks ? blocks_needed : kMaxBlocks);
    const HashView& c = host_views[0];
    switch (width) {
      case 1:
        HashFixedKernel<H, 1><<<blocks, kBlockSize, 0, stream>>>(c, rows, out, out_validity);
        break;
      case 2:
        HashFixedKernel<H, 2><<<blocks, kBlockSize, 0, stream>>>(c, rows, out, out_validity);
        break;
      case 4:
        HashFixedKernel<H, 4><<<blocks, kBlockSize, 0, stream>>>(c, rows, out, out_validity);
        break;
      default:
        HashFixedKernel<H, 8><<<blocks, kBlockSize, 0, stream>>>(c, rows, out, out_validity);
        break;
    }
    return cudaGetLastError();
  }
  if (num_columns == 1 && host_views[0].child == nullptr &&
      (IsBinaryType(host_views[0].type) || IsLargeBinaryType(host_views[0].type))) {
    const uint64_t blocks_needed = (rows + 4 * kBlockSize - 1) / (4 * kBlockSize);
    const unsigned blocks =
        static_cast<unsigned>(blocks_needed < kMaxBlocks ? blocks_needed : kMaxBlocks);
    if (IsBinaryType(host_views[0].type)) {
      HashBinaryKernel<H, int32_t>
          <<<blocks, kBlockSize, 0, stream>>>(host_views[0], rows, out, out_validity);
    } else {
      HashBinaryKernel<H, int64_t>
          <<<blocks, kBlockSize, 0, stream>>>(host_views[0], rows, out, out_validity);
    }
    return cudaGetLastError();
  }
  const uint64_t blocks_needed = (rows + kBlockSize - 1) / kBlockSize;
  const unsigned blocks =
      static_cast<unsigned>(blocks_needed < kMaxBlocks ? blocks_needed : kMaxBlocks);
  HashRowsKernel<H><<<blocks, kBlockSize, 0, stream>>>(views, num_columns, rows, out, out_validity);
  return cudaGetLastError();
}
template cudaError_t LaunchHashRows(std::span<const HashView>, const HashView*, uint64_t, uint32_t*,
                                    uint8_t*, cudaStream_t);
template cudaError_t LaunchHashRows(std::span<const HashView>, const HashView*, uint64_t, uint64_t*,
                                    uint8_t*, cudaStream_t);

}  // namespace gpujoin::engine::detail
