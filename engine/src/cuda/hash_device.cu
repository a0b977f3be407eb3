// Row hashing on the device: uploads the rows a HashNode addresses, runs one
// kernel that evaluates the shared row hash (hashing/row_hash.hpp, the same
// inline functions the CPU backend runs) and downloads hashes and validity. Every
// step is stream-ordered on the caller's stream; device memory is stream-ordered
// (DeviceBuffer::Async) and released by RAII; CUDA errors are classified as
// everywhere in the backend (cuda_error.hpp: an allocation failure is
// RESOURCE_EXHAUSTED for this request, a sticky error INTERNAL).
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cuda/cuda_error.hpp"
#include "cuda/device_buffer.hpp"
#include "cuda/hash_device.hpp"
#include "gpujoin/common/status_macros.hpp"
#include "hashing/row_hash.hpp"

namespace gpujoin::engine::detail {

namespace {

constexpr int kBlockSize = 256;  // a multiple of the warp size (the validity ballot needs it)
constexpr uint64_t kMaxBlocks = 8192;

// Stream-ordered device bytes (cuda/device_buffer.hpp).
using Bytes = DeviceBuffer<uint8_t>;

// Allocates `bytes` on `stream` and copies them from `src` (host).
absl::StatusOr<Bytes> Upload(const void* src, uint64_t bytes, cudaStream_t stream,
                             const std::string& what) {
  const std::string label = "hash: " + what;
  GPUJOIN_ASSIGN_OR_RETURN(Bytes buf, Bytes::Async(bytes, stream, label.c_str()));
  if (bytes != 0) {
    GPUJOIN_CUDA_RETURN(cudaMemcpyAsync(buf.data(), src, bytes, cudaMemcpyHostToDevice, stream),
                        "hash: uploading " + what);
  }
  return buf;
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
  Bytes data;
  Bytes offsets;
  Bytes validity;
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
    GPUJOIN_ASSIGN_OR_RETURN(out.data, Upload(c.data.data() + c.offset * width, c.length * width,
                                              stream, name + " data"));
    out.view.data = out.data.data();
    out.view.value_offset = 0;
  } else {
    GPUJOIN_ASSIGN_OR_RETURN(
        out.offsets, Upload(c.offsets.data() + c.offset, (c.length + 1) * sizeof(int32_t), stream,
                            name + " offsets"));
    const int32_t first = c.offsets[c.offset];
    const int32_t last = c.offsets[c.offset + c.length];
    GPUJOIN_ASSIGN_OR_RETURN(
        out.data,
        Upload(c.data.data() + first, static_cast<uint64_t>(last - first), stream, name + " data"));
    out.view.data = out.data.data();
    out.view.offsets = reinterpret_cast<const int32_t*>(out.offsets.data());
    out.view.value_offset = 0;
    out.view.data_base = first;
  }
  if (!c.validity.empty()) {
    const uint64_t first_byte = c.offset / 8;
    const uint64_t end_byte = (c.offset + c.length + 7) / 8;
    GPUJOIN_ASSIGN_OR_RETURN(
        out.validity,
        Upload(c.validity.data() + first_byte, end_byte - first_byte, stream, name + " validity"));
    out.view.validity = out.validity.data();
    out.view.validity_bit_offset = c.offset % 8;
  }
  return absl::OkStatus();
}

// Hashes rows [0, rows) described by `views` (device) into host_out[0, rows) and
// host_validity[0, ceil(rows / 8)); the copies are enqueued on `stream`.
template <typename H>
absl::Status LaunchAndDownload(const Bytes& views, uint32_t num_columns, uint64_t rows, H* host_out,
                               uint8_t* host_validity, cudaStream_t stream) {
  const uint64_t validity_bytes = (rows + 7) / 8;
  GPUJOIN_ASSIGN_OR_RETURN(DeviceBuffer<H> out,
                           DeviceBuffer<H>::Async(rows, stream, "hash output"));
  GPUJOIN_ASSIGN_OR_RETURN(Bytes validity,
                           Bytes::Async(validity_bytes, stream, "hash validity output"));
  const uint64_t blocks_needed = (rows + kBlockSize - 1) / kBlockSize;
  const unsigned blocks =
      static_cast<unsigned>(blocks_needed < kMaxBlocks ? blocks_needed : kMaxBlocks);
  HashRowsKernel<H>
      <<<blocks, kBlockSize, 0, stream>>>(reinterpret_cast<const ColumnView*>(views.data()),
                                          num_columns, rows, out.data(), validity.data());
  GPUJOIN_RETURN_IF_ERROR(CudaLaunchStatus("hash: launching the hash kernel"));
  GPUJOIN_CUDA_RETURN(
      cudaMemcpyAsync(host_out, out.data(), rows * sizeof(H), cudaMemcpyDeviceToHost, stream),
      "hash: downloading hashes");
  GPUJOIN_CUDA_RETURN(cudaMemcpyAsync(host_validity, validity.data(), validity_bytes,
                                      cudaMemcpyDeviceToHost, stream),
                      "hash: downloading validity");
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
  GPUJOIN_ASSIGN_OR_RETURN(
      Bytes device_views,
      Upload(views.data(), views.size() * sizeof(ColumnView), stream, "column descriptors"));
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
  GPUJOIN_CUDA_RETURN(cudaStreamSynchronize(stream), "hash: running the hash kernel");
  return absl::OkStatus();
}

}  // namespace gpujoin::engine::detail
