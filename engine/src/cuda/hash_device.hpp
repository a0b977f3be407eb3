// Internal (CUDA builds only): row hashing on the device, bit-identical to
// HashRowsHost. Uploads the node's columns, hashes, downloads hashes and validity,
// all on `stream`; returns when the outputs are written.
#pragma once

#include <cuda_runtime.h>

#include "absl/status/status.h"
#include "gpujoin/engine/hashing.hpp"

namespace gpujoin::engine::detail {

/// The node must have passed ValidateHashNode. RESOURCE_EXHAUSTED when device
/// memory for the columns cannot be allocated; INTERNAL on other CUDA errors.
absl::Status HashRowsDevice(const HashNode& node, cudaStream_t stream);

}  // namespace gpujoin::engine::detail
