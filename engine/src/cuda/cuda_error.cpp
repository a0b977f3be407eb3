#include "cuda/cuda_error.hpp"

#include <string>

#include "absl/strings/str_cat.h"

namespace gpujoin::engine::detail {

bool IsStickyCudaError(cudaError_t error) {
  switch (error) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorHardwareStackError:
    case cudaErrorAssert:
    case cudaErrorECCUncorrectable:
    case cudaErrorLaunchTimeout:
    case cudaErrorContextIsDestroyed:
    case cudaErrorDevicesUnavailable:
    case cudaErrorUnknown:
      return true;
    default:
      return false;
  }
}

absl::Status CudaStatus(cudaError_t error, std::string_view what) {
  if (error == cudaSuccess) return absl::OkStatus();
  // Clear a non-sticky error so the calling thread's next request starts clean;
  // sticky errors cannot be cleared and are reported by every later call.
  if (!IsStickyCudaError(error)) (void)cudaGetLastError();
  const std::string message =
      absl::StrCat("cuda: ", std::string(what), ": ", cudaGetErrorName(error), " (",
                   cudaGetErrorString(error), ")");
  if (error == cudaErrorMemoryAllocation) return absl::ResourceExhaustedError(message);
  if (IsStickyCudaError(error)) return absl::InternalError(absl::StrCat("fatal ", message));
  return absl::InternalError(message);
}

absl::Status CudaLaunchStatus(std::string_view what) {
  return CudaStatus(cudaGetLastError(), what);
}

}  // namespace gpujoin::engine::detail
