// The require-GPU switch of the test suites (README.md, "Tests"). Tests that
// need a CUDA device skip, with a message, where none is usable, so that CI
// without a GPU stays green. On a GPU host a skip would hide a broken driver
// (cudaGetDeviceCount failing makes every CUDA test skip), so there
// GPUJOIN_REQUIRE_GPU=1 turns each of those skips into a failure. ctest sets it for every test when the build is configured with
// -DGPUJOIN_REQUIRE_GPU=ON; the device scripts export it.
//
// Header only (gtest and the C library), so any test binary can include it
// without linking gpujoin_test_support.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>

namespace gpujoin::testing {

/// The environment variable that makes a missing GPU a test failure.
inline constexpr const char* kRequireGpuVariable = "GPUJOIN_REQUIRE_GPU";

/// True when GPUJOIN_REQUIRE_GPU is set to anything but "" or "0".
inline bool GpuRequired() {
  const char* v = std::getenv(kRequireGpuVariable);
  return v != nullptr && v[0] != '\0' && std::strcmp(v, "0") != 0;
}

/// For a test (or its SetUp) that finds no usable CUDA device or no CUDA backend
/// in this build: skips the test with `why`, or, when GpuRequired(), records a
/// fatal failure that says so and gives `why`. Either way the caller returns
/// right after it (a skip or fatal failure in SetUp also ends the test body).
inline void SkipOrFailWithoutGpu(const std::string& why) {
  if (GpuRequired()) {
    GTEST_FAIL() << kRequireGpuVariable
                 << " is set, so this host must run the CUDA tests, but: " << why;
  }
  GTEST_SKIP() << why;
}

}  // namespace gpujoin::testing
