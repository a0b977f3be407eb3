// The copy ceiling: a 2 GiB device-to-device copy (1/16 with --quick), bytes
// read + written. Every "of copy" figure in the table divides by this rate.
#include "families.hpp"

namespace gpujoin::bench {

void RunCopy(BenchContext& ctx) {
  cudaStream_t s = ctx.stream;
  const size_t bytes = (size_t{2} << 30) >> ctx.shift;
  DeviceAllocations mem;
  void* a = mem.Bytes(bytes);
  void* b = mem.Bytes(bytes);
  CHECK_CUDA(cudaMemsetAsync(a, 1, bytes, s));
  const double ms =
      ctx.MedianMs([&] { CHECK_CUDA(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, s)); });
  ctx.copy_bps = 2.0 * double(bytes) / (ms * 1e-3);
  ctx.rows.push_back(
      {"copy d2d (read+write)", double(bytes) / 4, ms, 2.0 * double(bytes), "", 0, 0});
}

}  // namespace gpujoin::bench
