// Row hashing on the device: uploads the rows a HashNode addresses, runs one
// kernel that evaluates the shared row hash (hashing/row_hash.hpp, the same
// inline functions the CPU backend runs) and downloads hashes and validity. Every
// step is stream-ordered on the caller's stream; device memory is stream-ordered
// (cudaMallocAsync) and released by RAII.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cuda/hash_device.hpp"
#include "gpujoin/common/status_macros.hpp"
#include "hashing/row_hash.hpp"

namespace gpujoin::engine::detail {

namespace {

constexpr int kBlockSize = 256;  // a multiple of the warp size (the validity ballot needs it)
constexpr uint64_t kMaxBlocks = 8192;

absl::Status CudaError(cudaError_t err, std::string_view what) {
  const std::string msg =
      absl::StrCat("hash (cuda): ", std::string(what), ": ", cudaGetErrorString(err));
  if (err == cudaErrorMemoryAllocation) return absl::ResourceExhaustedError(msg);
  return absl::InternalError(msg);
}

#define GPUJOIN_HASH_CUDA_CHECK(expr, what)                                \
  do {                                                                     \
    const cudaError_t gpujoin_err_ = (expr);                               \
    if (gpujoin_err_ != cudaSuccess) return CudaError(gpujoin_err_, what); \
  } while (0)

// Move-only stream-ordered device allocation; freed on its stream, never throws.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept
      : ptr_(std::exchange(o.ptr_, nullptr)), stream_(o.stream_) {}
  DeviceBuffer& operator=(DeviceBuffer&&) = delete;
  ~DeviceBuffer() { Release(); }

  // Allocates `bytes` on `stream`; zero bytes allocates nothing (null pointer).
  absl::Status Allocate(uint64_t bytes, cudaStream_t stream, std::string_view what) {
    Release();
    stream_ = stream;
    if (bytes == 0) return absl::OkStatus();
    void* p = nullptr;
    const cudaError_t err = cudaMallocAsync(&p, bytes, stream);
    if (err != cudaSuccess) {
      // An allocation failure is not sticky; clear it so that a later
      // cudaGetLastError (ours or another request's) does not report it again.
      (void)cudaGetLastError();
      return CudaError(err, absl::StrCat("allocating ", bytes, " bytes for ", std::string(what)));
    }
    ptr_ = p;
    return absl::OkStatus();
  }

  template <typename T>
  T* get() const {
    return static_cast<T*>(ptr_);
  }

 private:
  void Release() noexcept {
    if (ptr_ != nullptr) {
      // Errors here can only repeat an earlier (already reported) failure.
      (void)cudaFreeAsync(ptr_, stream_);
      ptr_ = nullptr;
    }
  }

  void* ptr_ = nullptr;
  cudaStream_t stream_ = nullptr;
};

// Allocates `bytes` and copies them from `src` (host) on `stream`.
absl::Status Upload(DeviceBuffer& buf, const void* src, uint64_t bytes, cudaStream_t stream,
                    const std::string& what) {
  GPUJOIN_RETURN_IF_ERROR(buf.Allocate(bytes, stream, what));
  if (bytes == 0) return absl::OkStatus();
  GPUJOIN_HASH_CUDA_CHECK(
      cudaMemcpyAsync(buf.get<void>(), src, bytes, cudaMemcpyHostToDevice, stream),
      absl::StrCat("uploading ", what));
  return absl::OkStatus();
}

// One warp hashes 32 consecutive rows per step, so that its validity ballot is
// exactly 4 output bytes that no other warp touches (no atomics).
template <typename H>
__global__ void __launch_bounds__(kBlockSize)
    HashRowsKernel(const ColumnView* __restrict__ columns, uint32_t num_columns, uint64_t rows,
                   H* __restrict__ out, uint8_t* __restrict__ out_validity) {
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

// Device copies of one column's addressed rows, and the view the kernel reads.
struct DeviceColumn {
  DeviceBuffer data;
  DeviceBuffer offsets;
  DeviceBuffer validity;
  ColumnView view;
};

absl::Status UploadColumn(const HashColumn& c, size_t index, cudaStream_t stream,
                          DeviceColumn& out) {
  const std::string name = absl::StrCat("column ", index);
  out.view.type = c.type;
  const uint32_t width = FixedWidth(c.type);
  if (width != 0) {
    // Only the addressed rows travel; the view then starts at row 0 of an aligned
    // buffer, which the kernel's typed loads rely on.
    GPUJOIN_RETURN_IF_ERROR(Upload(out.data, c.data.data() + c.offset * width, c.length * width,
                                   stream, name + " data"));
    out.view.data = out.data.get<uint8_t>();
    out.view.value_offset = 0;
  } else {
    GPUJOIN_RETURN_IF_ERROR(Upload(out.offsets, c.offsets.data() + c.offset,
                                   (c.length + 1) * sizeof(int32_t), stream, name + " offsets"));
    const int32_t first = c.offsets[c.offset];
    const int32_t last = c.offsets[c.offset + c.length];
    GPUJOIN_RETURN_IF_ERROR(Upload(out.data, c.data.data() + first,
                                   static_cast<uint64_t>(last - first), stream, name + " data"));
    out.view.data = out.data.get<uint8_t>();
    out.view.offsets = out.offsets.get<int32_t>();
    out.view.value_offset = 0;
    out.view.data_base = first;
  }
  if (!c.validity.empty()) {
    const uint64_t first_byte = c.offset / 8;
    const uint64_t end_byte = (c.offset + c.length + 7) / 8;
    GPUJOIN_RETURN_IF_ERROR(Upload(out.validity, c.validity.data() + first_byte,
                                   end_byte - first_byte, stream, name + " validity"));
    out.view.validity = out.validity.get<uint8_t>();
    out.view.validity_bit_offset = c.offset % 8;
  }
  return absl::OkStatus();
}

// Hashes rows [0, rows) described by `views` (device) into host_out[0, rows) and
// host_validity[0, ceil(rows / 8)); the copies are enqueued on `stream`.
template <typename H>
absl::Status LaunchAndDownload(const DeviceBuffer& views, uint32_t num_columns, uint64_t rows,
                               H* host_out, uint8_t* host_validity, cudaStream_t stream) {
  DeviceBuffer out;
  DeviceBuffer validity;
  const uint64_t validity_bytes = (rows + 7) / 8;
  GPUJOIN_RETURN_IF_ERROR(out.Allocate(rows * sizeof(H), stream, "hash output"));
  GPUJOIN_RETURN_IF_ERROR(validity.Allocate(validity_bytes, stream, "validity output"));
  const uint64_t blocks_needed = (rows + kBlockSize - 1) / kBlockSize;
  const unsigned blocks =
      static_cast<unsigned>(blocks_needed < kMaxBlocks ? blocks_needed : kMaxBlocks);
  HashRowsKernel<H><<<blocks, kBlockSize, 0, stream>>>(views.get<ColumnView>(), num_columns, rows,
                                                       out.get<H>(), validity.get<uint8_t>());
  GPUJOIN_HASH_CUDA_CHECK(cudaGetLastError(), "launching the hash kernel");
  GPUJOIN_HASH_CUDA_CHECK(
      cudaMemcpyAsync(host_out, out.get<H>(), rows * sizeof(H), cudaMemcpyDeviceToHost, stream),
      "downloading hashes");
  GPUJOIN_HASH_CUDA_CHECK(cudaMemcpyAsync(host_validity, validity.get<uint8_t>(), validity_bytes,
                                          cudaMemcpyDeviceToHost, stream),
                          "downloading validity");
  return absl::OkStatus();
}

// One pass: rows [first, first + rows) of every column.
absl::Status HashPass(const HashNode& node, uint64_t first, uint64_t rows, cudaStream_t stream) {
  std::vector<DeviceColumn> columns(node.columns.size());
  std::vector<ColumnView> views(node.columns.size());
  for (size_t i = 0; i < node.columns.size(); ++i) {
    // The slice property of the row hash: a pass hashes its rows as a slice.
    HashColumn slice = node.columns[i];
    slice.offset += first;
    slice.length = rows;
    GPUJOIN_RETURN_IF_ERROR(UploadColumn(slice, i, stream, columns[i]));
    views[i] = columns[i].view;
  }
  DeviceBuffer device_views;
  GPUJOIN_RETURN_IF_ERROR(Upload(device_views, views.data(), views.size() * sizeof(ColumnView),
                                 stream, "column descriptors"));
  const uint32_t num_columns = static_cast<uint32_t>(views.size());
  // `first` is a multiple of 8, so the pass owns whole output validity bytes.
  uint8_t* validity = node.out_validity.data() + first / 8;
  if (node.bits == HashBits::k32) {
    return LaunchAndDownload<uint32_t>(device_views, num_columns, rows, node.out32.data() + first,
                                       validity, stream);
  }
  return LaunchAndDownload<uint64_t>(device_views, num_columns, rows, node.out64.data() + first,
                                     validity, stream);
}

}  // namespace

absl::Status HashRowsDevice(const HashNode& node, cudaStream_t stream, uint64_t rows_per_pass) {
  const uint64_t rows = node.columns.empty() ? 0 : node.columns[0].length;
  // Empty input: nothing to launch and no outputs to write.
  if (rows == 0) return absl::OkStatus();
  // Passes start on whole validity bytes (and whole warps).
  rows_per_pass = rows_per_pass < 32 ? 32 : rows_per_pass & ~uint64_t{31};
  for (uint64_t first = 0; first < rows; first += rows_per_pass) {
    const uint64_t n = rows - first < rows_per_pass ? rows - first : rows_per_pass;
    // A pass's buffers are freed (stream-ordered) when it returns, so the pool
    // reuses them for the next pass and device memory stays bounded by one pass.
    GPUJOIN_RETURN_IF_ERROR(HashPass(node, first, n, stream));
  }
  GPUJOIN_HASH_CUDA_CHECK(cudaStreamSynchronize(stream), "running the hash kernel");
  return absl::OkStatus();
}

}  // namespace gpujoin::engine::detail
