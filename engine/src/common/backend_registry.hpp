// Internal: the constructors of each backend, called by CreateBackend.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "gpujoin/engine/backend.hpp"

namespace gpujoin::engine::detail {

/// Defined in src/cpu/.
absl::StatusOr<std::unique_ptr<Backend>> CreateCpuBackend(const BackendOptions& options);

/// Defined in src/cuda/ (or src/nocuda/ when the build has no CUDA backend).
absl::StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(const BackendOptions& options);

/// Number of usable CUDA devices; 0 when the build has no CUDA backend, the driver
/// is missing, or no device is visible. Never throws and never aborts.
int CudaDeviceCount();

}  // namespace gpujoin::engine::detail
