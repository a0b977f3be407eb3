// Row hashing on the device, the host side (hash_device.hpp): uploads the rows
// a HashNode addresses, hashes each dictionary once, runs the passes through
// LaunchHashRows (hash_device.cu: the kernels) and downloads hashes and
// validity. Every step is stream-ordered on the caller's stream; device memory
// is stream-ordered (DeviceBuffer::Async) and released by RAII; CUDA errors are
// classified as everywhere in the backend (cuda_error.hpp: an allocation failure
// is RESOURCE_EXHAUSTED for this request, a sticky error INTERNAL). Plain C++.
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cuda/cuda_error.hpp"
#include "cuda/device_buffer.hpp"
#include "cuda/hash/hash_device.hpp"
#include "gpujoin/common/status_macros.hpp"
#include "hashing/hash_host.hpp"
#include "hashing/row_hash.hpp"

namespace gpujoin::engine::detail {

namespace {

// Stream-ordered device bytes (cuda/device_buffer.hpp).
using Bytes = DeviceBuffer<uint8_t>;

// Allocates `bytes` on `stream` (rounded up to 8: the device's unaligned loads
// read whole aligned words, row_hash.hpp) and copies them from `src` (host).
absl::StatusOr<Bytes> Upload(const void* src, uint64_t bytes, cudaStream_t stream,
                             const std::string& what) {
  const std::string label = "hash: " + what;
  GPUJOIN_ASSIGN_OR_RETURN(Bytes buf,
                           Bytes::Async((bytes + 7) & ~uint64_t{7}, stream, label.c_str()));
  if (bytes != 0) {
    GPUJOIN_CUDA_RETURN(cudaMemcpyAsync(buf.data(), src, bytes, cudaMemcpyHostToDevice, stream),
                        "hash: uploading " + what);
  }
  return buf;
}

// Device copies of one column's addressed rows, and the view the kernel reads.
// A dictionary also keeps its dictionary's hashes and validity (one per entry).
// A list keeps its values' DeviceColumn and a device copy of their view.
struct DeviceColumn {
  Bytes data;
  Bytes offsets;
  Bytes validity;
  Bytes dict_hashes;
  Bytes dict_validity;
  std::unique_ptr<DeviceColumn> child;
  Bytes child_view;
  HashView view;
};

bool IsDeviceList(const HashColumn& c) {
  return (c.type == ColumnType::kList || c.type == ColumnType::kLargeList ||
          c.type == ColumnType::kFixedSizeList) &&
         IsFlatHashType(c.children[0].type);
}

absl::Status UploadValidity(const HashColumn& c, const std::string& name, cudaStream_t stream,
                            DeviceColumn& out) {
  if (c.validity.empty() || c.type == ColumnType::kNull) return absl::OkStatus();
  const uint64_t first_byte = c.offset / 8;
  const uint64_t end_byte = (c.offset + c.length + 7) / 8;
  GPUJOIN_ASSIGN_OR_RETURN(out.validity, Upload(c.validity.data() + first_byte,
                                                end_byte - first_byte, stream, name + " validity"));
  out.view.validity = out.validity.data();
  out.view.validity_bit_offset = c.offset % 8;
  return absl::OkStatus();
}

// Binary values with int32 or int64 offsets: the addressed offsets, and the bytes
// they span (the view subtracts the first offset).
template <typename O>
absl::Status UploadBinary(const HashColumn& c, std::span<const O> offsets, const std::string& name,
                          cudaStream_t stream, DeviceColumn& out) {
  GPUJOIN_ASSIGN_OR_RETURN(
      out.offsets,
      Upload(offsets.data() + c.offset, (c.length + 1) * sizeof(O), stream, name + " offsets"));
  const O first = offsets[c.offset];
  const O last = offsets[c.offset + c.length];
  GPUJOIN_ASSIGN_OR_RETURN(
      out.data,
      Upload(c.data.data() + first, static_cast<uint64_t>(last - first), stream, name + " data"));
  out.view.data_base = static_cast<int64_t>(first);
  return absl::OkStatus();
}

absl::Status UploadColumn(const HashColumn& c, size_t index, cudaStream_t stream,
                          DeviceColumn& out);

// A dictionary: the whole dictionary is hashed once (HashRowsKernel over its
// rows) into per-entry hashes and validity; the kernel that hashes the node then
// gathers them by index.
template <typename H>
absl::Status PrepareDictionary(const HashColumn& c, size_t index, cudaStream_t stream,
                               DeviceColumn& out);

absl::Status UploadColumn(const HashColumn& c, size_t index, cudaStream_t stream,
                          DeviceColumn& out) {
  const std::string name = absl::StrCat("column ", index);
  out.view.type = c.type;
  out.view.byte_width = c.byte_width;
  out.view.index_type = c.index_type;
  out.view.value_offset = 0;
  if (c.length == 0) return absl::OkStatus();
  // Fixed-width values and dictionary indices: only the addressed rows travel; the
  // view then starts at row 0 of an aligned buffer, which the typed loads rely on.
  uint64_t width = FixedWidth(c.type);
  if (c.type == ColumnType::kFixedSizeBinary) width = c.byte_width;
  if (c.type == ColumnType::kDictionary) width = FixedWidth(c.index_type);
  if (IsBinaryType(c.type)) {
    GPUJOIN_RETURN_IF_ERROR(UploadBinary<int32_t>(c, c.offsets, name, stream, out));
    out.view.offsets = reinterpret_cast<const int32_t*>(out.offsets.data());
  } else if (IsLargeBinaryType(c.type)) {
    GPUJOIN_RETURN_IF_ERROR(UploadBinary<int64_t>(c, c.large_offsets, name, stream, out));
    out.view.large_offsets = reinterpret_cast<const int64_t*>(out.offsets.data());
  } else if (IsDeviceList(c)) {
    // The addressed rows' offsets and the values they span, as a slice of the child.
    uint64_t base = c.offset * c.byte_width;
    uint64_t values = c.length * c.byte_width;
    if (c.type == ColumnType::kList) {
      GPUJOIN_ASSIGN_OR_RETURN(
          out.offsets, Upload(c.offsets.data() + c.offset, (c.length + 1) * sizeof(int32_t), stream,
                              name + " offsets"));
      out.view.offsets = reinterpret_cast<const int32_t*>(out.offsets.data());
      base = static_cast<uint64_t>(c.offsets[c.offset]);
      values = static_cast<uint64_t>(c.offsets[c.offset + c.length]) - base;
    } else if (c.type == ColumnType::kLargeList) {
      GPUJOIN_ASSIGN_OR_RETURN(
          out.offsets, Upload(c.large_offsets.data() + c.offset, (c.length + 1) * sizeof(int64_t),
                              stream, name + " offsets"));
      out.view.large_offsets = reinterpret_cast<const int64_t*>(out.offsets.data());
      base = static_cast<uint64_t>(c.large_offsets[c.offset]);
      values = static_cast<uint64_t>(c.large_offsets[c.offset + c.length]) - base;
    }
    out.view.data_base = c.type == ColumnType::kFixedSizeList ? 0 : static_cast<int64_t>(base);
    HashColumn child = c.children[0];
    child.offset += base;
    child.length = values;
    out.child = std::make_unique<DeviceColumn>();
    GPUJOIN_RETURN_IF_ERROR(UploadColumn(child, index, stream, *out.child));
    GPUJOIN_ASSIGN_OR_RETURN(
        out.child_view, Upload(&out.child->view, sizeof(HashView), stream, name + " values view"));
    out.view.child = reinterpret_cast<const HashView*>(out.child_view.data());
  } else if (c.type == ColumnType::kBool) {
    // Value bits travel as whole bytes; the view keeps the bit offset within the first.
    const uint64_t first_byte = c.offset / 8;
    const uint64_t end_byte = (c.offset + c.length + 7) / 8;
    GPUJOIN_ASSIGN_OR_RETURN(out.data, Upload(c.data.data() + first_byte, end_byte - first_byte,
                                              stream, name + " data"));
    out.view.value_offset = c.offset % 8;
  } else if (c.type != ColumnType::kNull) {
    GPUJOIN_ASSIGN_OR_RETURN(out.data, Upload(c.data.data() + c.offset * width, c.length * width,
                                              stream, name + " data"));
  }
  out.view.data = out.data.data();
  return UploadValidity(c, name, stream, out);
}

template <typename H>
absl::Status PrepareDictionary(const HashColumn& c, size_t index, cudaStream_t stream,
                               DeviceColumn& out) {
  const HashColumn& dict = c.children[0];
  DeviceColumn values;
  GPUJOIN_RETURN_IF_ERROR(UploadColumn(dict, index, stream, values));
  GPUJOIN_ASSIGN_OR_RETURN(Bytes view, Upload(&values.view, sizeof(HashView), stream,
                                              absl::StrCat("column ", index, " dictionary view")));
  GPUJOIN_ASSIGN_OR_RETURN(out.dict_hashes,
                           Bytes::Async(dict.length * sizeof(H), stream, "dictionary hashes"));
  // Whole warps of 32 rows write 4 validity bytes each: round the bitmap up.
  GPUJOIN_ASSIGN_OR_RETURN(
      out.dict_validity, Bytes::Async((dict.length + 31) / 32 * 4, stream, "dictionary validity"));
  if (dict.length != 0) {
    GPUJOIN_CUDA_RETURN(
        LaunchHashRows<H>({&values.view, 1}, reinterpret_cast<const HashView*>(view.data()),
                          dict.length, reinterpret_cast<H*>(out.dict_hashes.data()),
                          out.dict_validity.data(), stream),
        "hash: launching the dictionary hash kernel");
  }
  // The dictionary's own buffers are freed stream-ordered after the kernel.
  out.view.dict_hashes = out.dict_hashes.data();
  out.view.dict_validity = out.dict_validity.data();
  return absl::OkStatus();
}

// Hashes rows [0, rows) described by `views` (device; `host_views` is their
// host copy) into host_out[0, rows) and host_validity[0, ceil(rows / 8)); the
// copies are enqueued on `stream`.
template <typename H>
absl::Status LaunchAndDownload(std::span<const HashView> host_views, const Bytes& views,
                               uint64_t rows, H* host_out, uint8_t* host_validity,
                               cudaStream_t stream) {
  const uint64_t validity_bytes = (rows + 7) / 8;
  GPUJOIN_ASSIGN_OR_RETURN(DeviceBuffer<H> out,
                           DeviceBuffer<H>::Async(rows, stream, "hash output"));
  GPUJOIN_ASSIGN_OR_RETURN(Bytes validity,
                           Bytes::Async(validity_bytes, stream, "hash validity output"));
  GPUJOIN_CUDA_RETURN(LaunchHashRows<H>(host_views, reinterpret_cast<const HashView*>(views.data()),
                                        rows, out.data(), validity.data(), stream),
                      "hash: launching the hash kernel");
  GPUJOIN_CUDA_RETURN(
      cudaMemcpyAsync(host_out, out.data(), rows * sizeof(H), cudaMemcpyDeviceToHost, stream),
      "hash: downloading hashes");
  GPUJOIN_CUDA_RETURN(cudaMemcpyAsync(host_validity, validity.data(), validity_bytes,
                                      cudaMemcpyDeviceToHost, stream),
                      "hash: downloading validity");
  return absl::OkStatus();
}

// One pass: rows [first, first + rows) of every column. `dictionaries[i]` holds
// column i's dictionary hashes when it is a dictionary.
absl::Status HashPass(const HashNode& node, const std::vector<DeviceColumn>& dictionaries,
                      uint64_t first, uint64_t rows, cudaStream_t stream) {
  std::vector<DeviceColumn> columns(node.columns.size());
  std::vector<HashView> views(node.columns.size());
  for (size_t i = 0; i < node.columns.size(); ++i) {
    // The slice property of the row hash: a pass hashes its rows as a slice.
    HashColumn slice = node.columns[i];
    slice.offset += first;
    slice.length = rows;
    GPUJOIN_RETURN_IF_ERROR(UploadColumn(slice, i, stream, columns[i]));
    views[i] = columns[i].view;
    views[i].dict_hashes = dictionaries[i].view.dict_hashes;
    views[i].dict_validity = dictionaries[i].view.dict_validity;
  }
  GPUJOIN_ASSIGN_OR_RETURN(Bytes device_views, Upload(views.data(), views.size() * sizeof(HashView),
                                                      stream, "column descriptors"));
  // `first` is a multiple of 8, so the pass owns whole output validity bytes.
  uint8_t* validity = node.out_validity.data() + first / 8;
  if (node.bits == HashBits::k32) {
    return LaunchAndDownload<uint32_t>(views, device_views, rows, node.out32.data() + first,
                                       validity, stream);
  }
  return LaunchAndDownload<uint64_t>(views, device_views, rows, node.out64.data() + first, validity,
                                     stream);
}

}  // namespace

bool IsDeviceHashNode(const HashNode& node) {
  for (const HashColumn& c : node.columns) {
    if (IsFlatHashType(c.type)) continue;
    if (c.type == ColumnType::kDictionary && IsFlatHashType(c.children[0].type)) continue;
    if (IsDeviceList(c)) continue;
    return false;
  }
  return true;
}

absl::Status HashRowsDevice(const HashNode& node, cudaStream_t stream, uint64_t rows_per_pass) {
  const uint64_t rows = node.columns.empty() ? 0 : node.columns[0].length;
  // Empty input: nothing to launch and no outputs to write.
  if (rows == 0) return absl::OkStatus();
  // Nested columns are hashed on the host (docs/hashing.md "Execution").
  if (!IsDeviceHashNode(node)) {
    HashRowsHost(node);
    return absl::OkStatus();
  }
  // Each dictionary is hashed once for all passes.
  std::vector<DeviceColumn> dictionaries(node.columns.size());
  for (size_t i = 0; i < node.columns.size(); ++i) {
    if (node.columns[i].type != ColumnType::kDictionary) continue;
    GPUJOIN_RETURN_IF_ERROR(
        node.bits == HashBits::k32
            ? PrepareDictionary<uint32_t>(node.columns[i], i, stream, dictionaries[i])
            : PrepareDictionary<uint64_t>(node.columns[i], i, stream, dictionaries[i]));
  }
  // Passes start on whole validity bytes (and whole warps).
  rows_per_pass = rows_per_pass < 32 ? 32 : rows_per_pass & ~uint64_t{31};
  for (uint64_t first = 0; first < rows; first += rows_per_pass) {
    const uint64_t n = rows - first < rows_per_pass ? rows - first : rows_per_pass;
    // A pass's buffers are freed (stream-ordered) when it returns, so the pool
    // reuses them for the next pass and device memory stays bounded by one pass.
    GPUJOIN_RETURN_IF_ERROR(HashPass(node, dictionaries, first, n, stream));
  }
  GPUJOIN_CUDA_RETURN(cudaStreamSynchronize(stream), "hash: running the hash kernel");
  return absl::OkStatus();
}

}  // namespace gpujoin::engine::detail
