// A real sticky CUDA error (an illegal address in a kernel) poisons the device
// context of the process: the CUDA backend must report it as INTERNAL ("fatal"),
// mark itself unhealthy (Healthy() false: the server then answers NOT_SERVING) and
// refuse every later call with a message naming the error, instead of crashing or
// returning wrong results. The scenario runs in a child process (a death test in
// the "threadsafe" style re-executes this binary), because a sticky error cannot
// be cleared for the rest of a process. Skips with a message when no CUDA device
// is usable.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "gpujoin/engine/backend.hpp"
#include "gpujoin/engine/graph.hpp"
#include "gpujoin/testing/require_gpu.hpp"

#if defined(GPUJOIN_HAVE_CUDA)
#include <cuda_runtime.h>

#include "cuda/device_ops.hpp"
#endif

namespace gpujoin::engine {
namespace {

#if defined(GPUJOIN_HAVE_CUDA)

// Returns 0 when every check holds; otherwise prints what failed and returns its
// number. Runs in the child process only.
int StickyErrorScenario() {
  auto fail = [](int code, const std::string& what) {
    std::fprintf(stderr, "sticky scenario: check %d failed: %s\n", code, what.c_str());
    return code;
  };
  auto backend = CreateBackend(BackendKind::kCuda);
  if (!backend.ok()) return fail(1, backend.status().ToString());
  HashIndexSpec spec;
  spec.capacity = 1024;
  auto index = (*backend)->CreateIndex(spec);
  if (!index.ok()) return fail(2, index.status().ToString());
  std::vector<uint32_t> keys(100);
  for (uint32_t i = 0; i < keys.size(); ++i) keys[i] = 1000 + 7 * i;
  {
    CommandGraph g;
    BuildIndexNode node;
    node.index = index->get();
    node.keys = {keys};
    g.Add(std::move(node));
    if (absl::Status s = (*backend)->Run(g); !s.ok()) return fail(3, s.ToString());
  }
  std::vector<uint32_t> values(keys.size());
  auto lookup = [&]() {
    CommandGraph g;
    LookupNode node;
    node.index = index->get();
    node.keys = {keys};
    node.values = values;
    g.Add(std::move(node));
    return (*backend)->Run(g);
  };
  if (absl::Status s = lookup(); !s.ok()) return fail(4, s.ToString());
  for (uint32_t i = 0; i < keys.size(); ++i)
    if (values[i] != i) return fail(5, "value of row " + std::to_string(i));
  if (!(*backend)->Healthy()) return fail(6, "unhealthy before the fault");

  // The fault: a lookup kernel on a table whose slots point at unmapped device
  // memory (a 64 TiB address, 8-byte aligned), on the same device and context.
  uint32_t* keys_d = nullptr;
  uint32_t* values_d = nullptr;
  detail::DeviceQueryStats* stats_d = nullptr;
  if (cudaMalloc(&keys_d, 256 * sizeof(uint32_t)) != cudaSuccess ||
      cudaMalloc(&values_d, 256 * sizeof(uint32_t)) != cudaSuccess ||
      cudaMalloc(&stats_d, sizeof(detail::DeviceQueryStats)) != cudaSuccess)
    return fail(7, "device scratch");
  if (cudaMemset(keys_d, 0x11, 256 * sizeof(uint32_t)) != cudaSuccess) return fail(8, "memset");
  const detail::DeviceTable bogus{reinterpret_cast<uint64_t*>(uintptr_t{1} << 46), 1u << 20};
  if (detail::LookupKeys(bogus, keys_d, 256, 1u << 20, values_d, nullptr, nullptr, stats_d,
                         nullptr) != cudaSuccess)
    return fail(9, "launch");
  const cudaError_t fault = cudaDeviceSynchronize();
  if (fault != cudaErrorIllegalAddress && fault != cudaErrorLaunchFailure)
    return fail(10, std::string("expected an illegal address, got ") + cudaGetErrorName(fault));

  // The backend's next request sees the sticky error: INTERNAL, "fatal", unhealthy.
  const absl::Status first = lookup();
  if (first.code() != absl::StatusCode::kInternal) return fail(11, first.ToString());
  if (first.message().find("fatal") == absl::string_view::npos)
    return fail(12, "message does not say fatal: " + first.ToString());
  if ((*backend)->Healthy()) return fail(13, "still healthy after a sticky error");
  // Every later call is refused with the recorded error, without touching the device.
  const absl::Status second = lookup();
  if (second.code() != absl::StatusCode::kInternal ||
      second.message().find("not serving") == absl::string_view::npos ||
      second.message().find(cudaGetErrorName(fault)) == absl::string_view::npos)
    return fail(14, second.ToString());
  auto another = (*backend)->CreateIndex(spec);
  if (another.ok() || another.status().code() != absl::StatusCode::kInternal)
    return fail(15, "CreateIndex after the fault: " + another.status().ToString());
  std::fprintf(stderr, "sticky scenario: ok (%s)\n", cudaGetErrorName(fault));
  return 0;
}

TEST(StickyCudaError, MarksTheBackendUnhealthyAndRefusesLaterCalls) {
  if (!CudaDeviceAvailable()) {
    return ::gpujoin::testing::SkipOrFailWithoutGpu(
        "no CUDA device: the sticky-error scenario needs a GPU; run on a GPU host");
  }
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(std::exit(StickyErrorScenario()), ::testing::ExitedWithCode(0),
              "sticky scenario: ok");
}

#else

TEST(StickyCudaError, MarksTheBackendUnhealthyAndRefusesLaterCalls) {
  ::gpujoin::testing::SkipOrFailWithoutGpu(
      "built without the CUDA backend: no sticky CUDA errors to test");
}

#endif

}  // namespace
}  // namespace gpujoin::engine
