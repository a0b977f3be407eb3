// One uint32 index over every GPU of the host (issue: gpujoind --devices),
// device-resident keys: K = capacity / 2 build rows (2^26; a 2^27-slot table
// at load 0.5 on one GPU) and K all-hit lookups, timed on the host from the
// first launch to the last device's synchronize.
//
// - one device: device 0 holds all K rows and answers all K lookups;
// - partitioned over N: device d holds its K / N rows (in a table of
//   capacity / N slots, the same load) and answers the K / N lookups of its
//   rows (the batch already split, as gpujoind --devices splits it);
// - replicated over N: every device holds all K rows and answers K / N of the
//   lookups.
// Each part's values and found flags are checked in full. With one device
// only the first row runs (the others need two or more).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cuda/device_ops.hpp"
#include "families.hpp"
#include "inputs.hpp"

namespace gpujoin::bench {
namespace {

// One device's part: its table, rows and lookups.
struct Part {
  int device = 0;
  cudaStream_t stream = nullptr;
  DeviceAllocations mem;
  uint32_t capacity = 0;
  uint64_t rows = 0;         // build rows BuildKeyOf(first_row + i)
  uint32_t first_row = 0;
  uint64_t lookups = 0;      // queries: the keys of build rows lookup_first + i
  uint32_t lookup_first = 0;
  uint64_t* slots = nullptr;
  uint32_t* keys = nullptr;
  uint32_t* values = nullptr;
  uint32_t* queries = nullptr;
  uint32_t* out = nullptr;
  uint8_t* found = nullptr;
  gd::DeviceBuildStats* bstats = nullptr;
  gd::DeviceQueryStats* qstats = nullptr;
  unsigned int* fell_back = nullptr;

  ~Part() {
    cudaSetDevice(device);
    if (stream != nullptr) cudaStreamDestroy(stream);
  }

  void Setup() {
    CHECK_CUDA(cudaSetDevice(device));
    CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    slots = mem.Array<uint64_t>(gd::TableAllocationSlots(capacity));
    keys = mem.Array<uint32_t>(rows);
    values = mem.Array<uint32_t>(rows);
    queries = mem.Array<uint32_t>(lookups);
    out = mem.Array<uint32_t>(lookups);
    found = mem.Array<uint8_t>(lookups);
    bstats = mem.Array<gd::DeviceBuildStats>(1);
    qstats = mem.Array<gd::DeviceQueryStats>(1);
    fell_back = mem.Array<unsigned int>(1);
    CHECK_CUDA(LaunchMakeKeys(keys, rows, first_row, stream));
    CHECK_CUDA(LaunchIota(values, rows, 12345 + 3 * first_row, stream));
    CHECK_CUDA(LaunchMakeKeys(queries, lookups, lookup_first, stream));
    gd::BuildSource src;
    src.keys = keys;
    src.rows = rows;
    src.values = values;
    src.fell_back = fell_back;
    src.path = gd::BuildPath::kAuto;
    CHECK_CUDA(gd::ClearAndBuildTable(gd::DeviceTable{slots, capacity}, src, capacity, bstats,
                                      stream));
    CHECK_CUDA(cudaMemsetAsync(out, kPoison, lookups * 4, stream));
    CHECK_CUDA(cudaMemsetAsync(found, kPoison, lookups, stream));
    CHECK_CUDA(cudaStreamSynchronize(stream));
  }

  void Launch() {
    CHECK_CUDA(cudaSetDevice(device));
    CHECK_CUDA(cudaMemsetAsync(qstats, 0, sizeof(gd::DeviceQueryStats), stream));
    CHECK_CUDA(gd::LookupKeys(gd::DeviceTable{slots, capacity}, queries, lookups, capacity, out,
                              found, nullptr, qstats, stream));
  }

  void Wait() {
    CHECK_CUDA(cudaSetDevice(device));
    CHECK_CUDA(cudaStreamSynchronize(stream));
  }

  // Every lookup found its row's value.
  bool Correct() {
    CHECK_CUDA(cudaSetDevice(device));
    const std::vector<uint32_t> got = FetchAll(out, lookups);
    const std::vector<uint8_t> got_found = FetchAll(found, lookups);
    uint64_t wrong = 0;
    for (uint64_t i = 0; i < lookups; ++i) {
      wrong += got[i] != 12345u + 3u * uint32_t(lookup_first + i) || got_found[i] != 1;
    }
    return wrong == 0 && Fetch(qstats).found == lookups;
  }
};

// The median seconds of one round: every part launched, then every part waited for.
double MedianSeconds(BenchContext& ctx, std::vector<std::unique_ptr<Part>>& parts) {
  std::vector<double> times;
  for (int r = 0; r < ctx.options.reps + 2; ++r) {
    const auto start = std::chrono::steady_clock::now();
    for (auto& p : parts) p->Launch();
    for (auto& p : parts) p->Wait();
    const auto end = std::chrono::steady_clock::now();
    const double s = std::chrono::duration<double>(end - start).count();
    if (r >= 2) times.push_back(s);
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// Rows over `devices` devices (partitioned, else replicated); the rate.
double RunPlacement(BenchContext& ctx, int devices, bool partitioned, uint32_t capacity,
                    uint64_t k, double reference, const std::string& target,
                    double target_value) {
  std::vector<std::unique_ptr<Part>> parts;
  const uint64_t share = k / devices;
  for (int d = 0; d < devices; ++d) {
    auto p = std::make_unique<Part>();
    p->device = d;
    p->capacity = partitioned ? capacity / devices : capacity;
    p->first_row = partitioned ? uint32_t(d * share) : 0;
    p->rows = partitioned ? share : k;
    p->lookup_first = uint32_t(d * share);
    p->lookups = share;
    p->Setup();
    parts.push_back(std::move(p));
  }
  const double s = MedianSeconds(ctx, parts);
  bool ok = true;
  for (auto& p : parts) ok &= p->Correct();
  const std::string what =
      devices == 1 ? std::string("lookup, 1 device (all rows)")
                   : std::string("lookup, ") + std::to_string(devices) + " devices, " +
                         (partitioned ? "partitioned" : "replicated");
  ok = ctx.Check(ok, what + ": values and found flags of every lookup");
  const double n = double(share) * devices;
  Row row{what + (ok ? "" : " FAIL"), n, s * 1e3, n * 41, target, target_value,
          target_value > 0 ? 3 : 0};
  row.reference_rate = reference;
  ctx.rows.push_back(row);
  for (auto& p : parts) p.reset();
  CHECK_CUDA(cudaSetDevice(0));
  return n / s;
}

}  // namespace

void RunDevices(BenchContext& ctx) {
  int devices = 0;
  CHECK_CUDA(cudaGetDeviceCount(&devices));
  const uint32_t capacity = (1u << 27) >> ctx.shift;
  const uint64_t k = capacity / 2;
  const double one = RunPlacement(ctx, 1, true, capacity, k, 0, "", 0);
  if (devices < 2) {
    std::fprintf(stderr, "gpujoin-bench devices: 1 device: the partitioned and replicated rows "
                         "need 2 or more\n");
    return;
  }
  // Targets on two devices: 1.8x (partitioned) and 1.9x (replicated) one
  // device's rate; on N, the same fractions of N.
  char partitioned[48], replicated[48];
  std::snprintf(partitioned, sizeof(partitioned), ">= %.2f x 1 device", 0.9 * devices);
  std::snprintf(replicated, sizeof(replicated), ">= %.2f x 1 device", 0.95 * devices);
  RunPlacement(ctx, devices, true, capacity, k, one, partitioned, 0.9 * devices);
  RunPlacement(ctx, devices, false, capacity, k, one, replicated, 0.95 * devices);
  CHECK_CUDA(cudaSetDevice(0));
}

}  // namespace gpujoin::bench
