// Internal (CUDA builds only): row hashing on the device, bit-identical to
// HashRowsHost. Uploads the node's columns, hashes, downloads hashes and validity,
// all on `stream`; returns when the outputs are written.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "absl/status/status.h"
#include "gpujoin/engine/hashing.hpp"

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

}  // namespace gpujoin::engine::detail
