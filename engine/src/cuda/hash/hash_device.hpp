// Internal (CUDA builds only): row hashing on the device, bit-identical to
// HashRowsHost. Uploads the node's columns, hashes, downloads hashes and validity,
// all on `stream`; returns when the outputs are written.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <span>

#include "absl/status/status.h"
#include "gpujoin/engine/hashing.hpp"
#include "hashing/row_hash.hpp"

namespace gpujoin::engine::detail {

/// Rows hashed per device pass by default: bounds the device memory of one
/// request (about rows_per_pass * (value bytes per row + 9) plus string bytes).
inline constexpr uint64_t kHashRowsPerPass = uint64_t{1} << 24;

/// The node must have passed ValidateHashNode. Flat columns, dictionaries of
/// flat values (hashed once, then gathered by index) and lists, large lists and
/// fixed-size lists of flat values are hashed on the device; a node with any
/// other nested column (struct, map, lists of nested or dictionary values) is
/// computed on the host (HashRowsHost) on the calling thread. Rows are processed in passes of
/// `rows_per_pass` (rounded down to a multiple of 32, at least 32), each an
/// upload, one kernel and a download on `stream`. RESOURCE_EXHAUSTED when device
/// memory for a pass cannot be allocated; INTERNAL on other CUDA errors.
absl::Status HashRowsDevice(const HashNode& node, cudaStream_t stream,
                            uint64_t rows_per_pass = kHashRowsPerPass);

/// Enqueues the row hash of `rows` rows of device-resident columns (`views`:
/// device memory holding a copy of `host_views`, views of device buffers) into
/// device `out` (one H per row) and `out_validity` (ceil(rows / 8) bytes); no
/// wait. One fixed-width column of up to 8 bytes, and one binary column, take
/// kernels of their own (the view passed by value, four rows per lane; a binary
/// step's bytes staged in shared memory); any other node the generic one.
/// Buffers read with unaligned loads (binary values, decimal128,
/// fixed_size_binary) must be readable to the end of the aligned 8-byte word
/// holding their last byte. HashRowsDevice runs it per pass; the benchmark times
/// it on resident data.
template <typename H>
cudaError_t LaunchHashRows(std::span<const HashView> host_views, const HashView* views,
                           uint64_t rows, H* out, uint8_t* out_validity, cudaStream_t stream);

}  // namespace gpujoin::engine::detail
