#include "context.hpp"

#include <algorithm>

namespace gpujoin::bench {
namespace {

struct Timer {
  cudaEvent_t a, b;
  Timer() {
    CHECK_CUDA(cudaEventCreate(&a));
    CHECK_CUDA(cudaEventCreate(&b));
  }
  ~Timer() {
    cudaEventDestroy(a);
    cudaEventDestroy(b);
  }
};

double Median(std::vector<float>& v) {
  std::sort(v.begin(), v.end());
  return double(v[v.size() / 2]);
}

}  // namespace

DeviceAllocations::~DeviceAllocations() {
  for (void* p : pointers_) cudaFree(p);
}

void* DeviceAllocations::Bytes(size_t bytes) {
  void* p = nullptr;
  CHECK_CUDA(cudaMalloc(&p, bytes));
  pointers_.push_back(p);
  return p;
}

bool BenchContext::Check(bool ok, const std::string& what) {
  if (!ok) {
    std::fprintf(stderr, "CHECK FAILED: %s\n", what.c_str());
    ++failures;
  }
  return ok;
}

double BenchContext::MedianMs(const std::function<void()>& fn) {
  Timer t;
  for (int w = 0; w < 2; ++w) fn();
  CHECK_CUDA(cudaStreamSynchronize(stream));
  std::vector<float> ms;
  for (int r = 0; r < options.reps; ++r) {
    CHECK_CUDA(cudaEventRecord(t.a, stream));
    fn();
    CHECK_CUDA(cudaEventRecord(t.b, stream));
    CHECK_CUDA(cudaEventSynchronize(t.b));
    float x = 0;
    CHECK_CUDA(cudaEventElapsedTime(&x, t.a, t.b));
    ms.push_back(x);
  }
  return Median(ms);
}

PhaseTimes BenchContext::MedianBuildMs(gd::BuildSource& src, const std::function<void()>& fn) {
  cudaEvent_t ev[5];
  for (cudaEvent_t& e : ev) CHECK_CUDA(cudaEventCreate(&e));
  src.phase_events = ev + 1;
  for (int w = 0; w < 2; ++w) fn();
  CHECK_CUDA(cudaStreamSynchronize(stream));
  std::vector<float> total, ph[3];
  for (int r = 0; r < options.reps; ++r) {
    CHECK_CUDA(cudaEventRecord(ev[0], stream));
    fn();
    CHECK_CUDA(cudaEventRecord(ev[4], stream));
    CHECK_CUDA(cudaEventSynchronize(ev[4]));
    float x = 0;
    CHECK_CUDA(cudaEventElapsedTime(&x, ev[0], ev[4]));
    total.push_back(x);
    for (int k = 0; k < 3; ++k) {
      CHECK_CUDA(cudaEventElapsedTime(&x, ev[k], ev[k + 1]));
      ph[k].push_back(x);
    }
  }
  src.phase_events = nullptr;
  for (cudaEvent_t& e : ev) cudaEventDestroy(e);
  PhaseTimes t;
  t.total = Median(total);
  for (int k = 0; k < 3; ++k) t.phase[k] = Median(ph[k]);
  return t;
}

}  // namespace gpujoin::bench
