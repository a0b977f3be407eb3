// Shared by the CUDA-vs-CPU tests in tests/gpu.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "gpujoin/engine/backend.hpp"

namespace gpujoin::engine {

/// For a fixture's SetUp: creates the CUDA and the CPU backend, or skips the test
/// with "no CUDA device (or no CUDA backend in this build): <why>" when no CUDA
/// device is usable. The caller returns when IsSkipped() or HasFatalFailure().
inline void CreateCudaAndCpuBackends(std::unique_ptr<Backend>& cuda,
                                     std::unique_ptr<Backend>& cpu, const std::string& why) {
  if (!CudaDeviceAvailable()) {
    GTEST_SKIP() << "no CUDA device (or no CUDA backend in this build): " << why;
  }
  auto c = CreateBackend(BackendKind::kCuda);
  ASSERT_TRUE(c.ok()) << c.status();
  cuda = std::move(*c);
  auto p = CreateBackend(BackendKind::kCpu);
  ASSERT_TRUE(p.ok()) << p.status();
  cpu = std::move(*p);
}

}  // namespace gpujoin::engine
