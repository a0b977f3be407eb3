// The state every benchmark family of gpujoin-bench shares: the options from the
// command line, the stream, the timers, the rows of the output table and the
// count of failed output checks. main owns one BenchContext and passes it to
// each family; nothing here is global.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "cuda/index/build.hpp"

namespace gpujoin::bench {

namespace gj = gpujoin::engine;
namespace gd = gpujoin::engine::detail;

// Exits with status 2 when a CUDA call fails: a benchmark whose setup failed
// has nothing to report.
#define CHECK_CUDA(call)                                                                          \
  do {                                                                                            \
    cudaError_t e_ = (call);                                                                      \
    if (e_ != cudaSuccess) {                                                                      \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      std::exit(2);                                                                               \
    }                                                                                             \
  } while (0)

/// What every output is filled with before a timed variant: a kernel that
/// leaves a row unwritten leaves this byte pattern and fails its check.
inline constexpr uint8_t kPoison = 0xab;

/// Command-line options (see Usage in main.cpp).
struct BenchOptions {
  int reps = 7;             // timed repetitions per row (>= 5; 1 with --profile)
  bool quick = false;       // --quick: every size divided by 16
  bool profile = false;     // --profile: one repetition of a few rows, for Nsight Compute
  uint32_t agg_groups = 0;  // --groups=N: only the aggregation rows of N groups (0: all)
};

/// One row of the output table. Its rate is n / ms; its bandwidth bytes / ms,
/// shown as a fraction of the copy row's.
struct Row {
  std::string name;
  double n;
  double ms;
  double bytes;
  std::string target;   // "" or e.g. ">= 32 Gkeys/s"
  double target_value;  // rate (keys/s) or fraction of copy, per target_kind
  int target_kind;      // 0 none, 1 rate, 2 fraction of copy, 3 fraction of a reference row's rate
  double reference_rate = 0;
};

/// One build timed per phase (milliseconds): the total and each of its three
/// phases (BuildSource::phase_events).
struct PhaseTimes {
  std::string name;
  double total = 0;
  double phase[3] = {0, 0, 0};
};

/// Device allocations that live as long as this object: one family's buffers,
/// freed together when it returns. Each allocation has 16 spare bytes.
class DeviceAllocations {
 public:
  DeviceAllocations() = default;
  DeviceAllocations(const DeviceAllocations&) = delete;
  DeviceAllocations& operator=(const DeviceAllocations&) = delete;
  ~DeviceAllocations();

  /// `bytes` bytes of device memory (exits on failure).
  void* Bytes(size_t bytes);
  /// `n` elements of T (plus 16 bytes).
  template <typename T>
  T* Array(size_t n) {
    return static_cast<T*>(Bytes(n * sizeof(T) + 16));
  }

 private:
  std::vector<void*> pointers_;
};

/// Copies one T from device memory (synchronous).
template <typename T>
T Fetch(const T* d) {
  T h;
  CHECK_CUDA(cudaMemcpy(&h, d, sizeof(T), cudaMemcpyDeviceToHost));
  return h;
}

/// Copies `n` elements from device memory into a new host vector (synchronous).
template <typename T>
std::vector<T> FetchAll(const T* d, size_t n) {
  std::vector<T> h(n);
  CHECK_CUDA(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost));
  return h;
}

/// What the families share: options, the stream they enqueue on, the copy
/// bandwidth (bytes/s) the table divides by, and what they report.
struct BenchContext {
  BenchOptions options;
  int shift = 0;  // sizes are shifted right by this (4 with --quick)
  cudaStream_t stream = nullptr;
  double copy_bps = 0;
  std::vector<Row> rows;
  std::vector<PhaseTimes> phases;
  int failures = 0;

  /// Counts and reports a failed output check; returns `ok`.
  bool Check(bool ok, const std::string& what);
  /// Median milliseconds of `fn` over options.reps runs after two warm-ups,
  /// timed with events on `stream`.
  double MedianMs(const std::function<void()>& fn);
  /// MedianMs of one build, also per phase: events before the build, between
  /// its phases (src.phase_events, cleared again on return) and after it.
  PhaseTimes MedianBuildMs(gd::BuildSource& src, const std::function<void()>& fn);
};

}  // namespace gpujoin::bench
