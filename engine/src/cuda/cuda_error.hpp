// Internal (CUDA builds only): turning CUDA error codes into absl::Status with the
// engine's error classes. An allocation failure is RESOURCE_EXHAUSTED for the one
// request that hit it; a sticky error (the context is corrupted: illegal address,
// launch failure, ...) is INTERNAL and marks the backend unhealthy; anything else
// is INTERNAL for that request only.
#pragma once

#include <cuda_runtime.h>

#include <string_view>

#include "absl/status/status.h"

namespace gpujoin::engine::detail {

/// True for errors after which the CUDA context is unusable for the life of the
/// process (every later call fails the same way).
bool IsStickyCudaError(cudaError_t error);

/// OK for cudaSuccess; otherwise a status whose message names `what` and the CUDA
/// error (RESOURCE_EXHAUSTED for cudaErrorMemoryAllocation, INTERNAL otherwise).
/// A non-sticky launch error is cleared from the thread's last-error slot so the
/// next request does not see it.
absl::Status CudaStatus(cudaError_t error, std::string_view what);

/// CudaStatus(cudaGetLastError(), what): call right after a kernel launch.
absl::Status CudaLaunchStatus(std::string_view what);

}  // namespace gpujoin::engine::detail

/// Evaluates a CUDA runtime call and returns a classified status from the
/// enclosing function when it fails. `what` names the operation for the message.
#define GPUJOIN_CUDA_RETURN(call, what)                                          \
  do {                                                                           \
    cudaError_t gpujoin_cuda_error_ = (call);                                    \
    if (gpujoin_cuda_error_ != cudaSuccess)                                      \
      return ::gpujoin::engine::detail::CudaStatus(gpujoin_cuda_error_, (what)); \
  } while (0)
