#include "common/backend_registry.hpp"

#include "absl/strings/str_cat.h"
#include "gpujoin/engine/backend.hpp"
#include "gpujoin/engine/types.hpp"

namespace gpujoin::engine {

std::string_view BackendKindName(BackendKind kind) {
  switch (kind) {
    case BackendKind::kAuto: return "auto";
    case BackendKind::kCpu: return "cpu";
    case BackendKind::kCuda: return "cuda";
  }
  return "unknown";
}

absl::StatusOr<BackendKind> ParseBackendKind(std::string_view name) {
  if (name == "auto") return BackendKind::kAuto;
  if (name == "cpu") return BackendKind::kCpu;
  if (name == "cuda") return BackendKind::kCuda;
  return absl::InvalidArgumentError(
      absl::StrCat("backend: expected auto, cpu or cuda, got \"", std::string(name), "\""));
}

bool CudaDeviceAvailable() { return detail::CudaDeviceCount() > 0; }

int CudaDeviceCount() { return detail::CudaDeviceCount(); }

absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(BackendKind kind,
                                                       const BackendOptions& options) {
  switch (kind) {
    case BackendKind::kCpu:
      return detail::CreateCpuBackend(options);
    case BackendKind::kCuda:
      return detail::CreateCudaBackend(options);
    case BackendKind::kAuto:
      if (CudaDeviceAvailable()) return detail::CreateCudaBackend(options);
      return detail::CreateCpuBackend(options);
  }
  return absl::InvalidArgumentError("backend: unknown kind");
}

}  // namespace gpujoin::engine
