// Linked instead of src/cuda/ when the build has no CUDA compiler: the CUDA
// backend is absent, and asking for it explicitly says so.
#include "common/backend_registry.hpp"

namespace gpujoin::engine::detail {

absl::StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(const BackendOptions&) {
  return absl::FailedPreconditionError(
      "backend cuda: this build of gpujoin has no CUDA backend (configured without nvcc)");
}

int CudaDeviceCount() { return 0; }

}  // namespace gpujoin::engine::detail
