// Shared by the CUDA-vs-CPU tests in tests/gpu.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

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

/// `n` distinct keys != kEmptyKey, random-looking: a random bijection of uint32
/// (odd multipliers and xor-shifts) applied to consecutive integers from a random
/// start, so no set is needed to keep them distinct.
inline std::vector<uint32_t> DistinctKeys(std::mt19937_64& rng, size_t n) {
  const uint32_t start = uint32_t(rng());
  const uint32_t m1 = uint32_t(rng()) | 1u, m2 = uint32_t(rng()) | 1u;
  std::vector<uint32_t> keys;
  keys.reserve(n);
  for (uint32_t i = 0; keys.size() < n; ++i) {
    uint32_t x = (start + i) * m1;
    x ^= x >> 16;
    x *= m2;
    x ^= x >> 13;
    if (x != kEmptyKey) keys.push_back(x);
  }
  return keys;
}

}  // namespace gpujoin::engine
