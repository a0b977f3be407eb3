// gpujoin-bench: throughput of the CUDA backend's kernels on device-resident data.
//
// Prints one table: the device-to-device copy bandwidth (the ceiling, bytes read +
// written) measured in this run, then build / lookup / join / group aggregation
// with keys (rows) per second and the fraction of the copy bandwidth their bytes
// represent. Every figure is the median of --reps repetitions timed with CUDA
// events after a warm-up. Every output is poisoned before each timed variant and
// checked afterwards (statistics, the whole table, every lookup row and join
// pair, grouped results against a host reference); a failed check prints FAIL in
// its row and makes the exit status nonzero.
//
// Byte model (what "fraction of copy" counts):
//  - lookup: key read 4 B + one 32-byte table sector + value written 4 B + found 1 B
//            (uint64 keys: key 8 B, the same sector, value and found: 45 B)
//  - build:  key 4 B (+ value 4 B) read + one 32-byte sector + the table written
//            (8 B/slot); the tile path's sort passes are not counted
//  - join:   its lookup without the found byte (40 B) + values re-read 4 B and pairs
//            written 8 B per match (the per-32-row masks and offsets, < 1 B/row, left out)
//  - group:  bytes read (keys 4 B, mask 4 B, values 4 B), the issue's definition.
//  - payload (issue 20), gathering an int64 and a float32 column stored in slot
//            order in one 16-byte record per slot: lookup: the plain lookup's 41 B +
//            the slot written and read 8 B, one 32-byte sector of the record, the
//            values written 12 B and their validity bits (93.25 B); join: the plain
//            join's bytes + the slots written by the lookup 4 B per row, and per
//            pair the slot written and read 8 B plus the record's sector, the values
//            and bits 44.25 B.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cuda/aggregate_ops.hpp"
#include "cuda/device_ops.hpp"
#include "cuda/group_join.hpp"
#include "cuda/hash_device.hpp"
#include "cuda/index/groups.hpp"
#include "cuda/payload/payload_ops.hpp"
#include "hashing/hash_host.hpp"
#include "hashing/row_hash.hpp"

namespace gj = gpujoin::engine;
namespace gd = gpujoin::engine::detail;

namespace {

#define CHECK_CUDA(call)                                                                          \
  do {                                                                                            \
    cudaError_t e_ = (call);                                                                      \
    if (e_ != cudaSuccess) {                                                                      \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      std::exit(2);                                                                               \
    }                                                                                             \
  } while (0)

int g_reps = 7;
int g_failures = 0;
// --profile: one timed repetition of a few rows (for Nsight Compute); MedianMs then
// runs each operation three times (two warm-ups).
bool g_profile = false;
// --only=SECTION: the copy row and that section's rows only (core: builds,
// lookups, joins and payload; u64; multi_value; aggregate; hash).
std::string g_only;
bool Runs(const char* section) { return g_only.empty() || g_only == section; }
// --groups=N: the group aggregation rows of N groups only (0: all group counts).
uint32_t g_agg_groups = 0;

// A bijection on uint32 unrelated to the slot hash: distinct inputs give
// distinct keys, so keys [0, n) are distinct and keys [n, 2n) are all misses.
__host__ __device__ uint32_t KeyOf(uint32_t i) {
  uint32_t x = i * 0x9e3779b1u + 0x7f4a7c15u;
  x ^= x >> 15;
  x *= 0x2c1b3c6du;
  x ^= x >> 12;
  x *= 0x297a2d39u;
  x ^= x >> 15;
  return x;
}

// Build keys: KeyOf(i), except the one i that maps to the reserved key, which
// takes KeyOf(0xffffffff) (outside every range used here, so still distinct).
__global__ void MakeKeys(uint32_t* keys, uint64_t n, uint32_t offset) {
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n;
       i += uint64_t(gridDim.x) * blockDim.x) {
    uint32_t k = KeyOf(uint32_t(i) + offset);
    if (k == gj::kEmptyKey) k = KeyOf(0xffffffffu);
    keys[i] = k;
  }
}

// Queries: even rows hit (build key of a scattered row), odd rows miss when
// `half_miss`, else all rows hit.
__global__ void MakeQueries(uint32_t* q, uint64_t n, uint64_t build_n, bool half_miss) {
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n;
       i += uint64_t(gridDim.x) * blockDim.x) {
    const uint32_t hit_row = uint32_t((i * 2654435761ull) % build_n);
    uint32_t k = (half_miss && (i & 1)) ? KeyOf(uint32_t(build_n + i)) : KeyOf(hit_row);
    if (k == gj::kEmptyKey) k = KeyOf(0xffffffffu);
    q[i] = k;
  }
}

// Build keys with hot duplicates: every fourth row holds one of 16 hot keys
// (KeyOf(n + h), outside the other rows' keys), the others KeyOf(row).
__global__ void MakeHotKeys(uint32_t* keys, uint64_t n) {
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n;
       i += uint64_t(gridDim.x) * blockDim.x) {
    uint32_t k = (i & 3) == 3 ? KeyOf(uint32_t(n + ((i >> 2) & 15))) : KeyOf(uint32_t(i));
    if (k == gj::kEmptyKey) k = KeyOf(0xffffffffu);
    keys[i] = k;
  }
}

// 64-bit keys: a bijection on uint64 unrelated to the slot hash (odd multiplies
// and xor-shifts), so keys [0, n) are distinct and keys [n, 2n) all misses; the
// one i that maps to the reserved key takes Key64Of(~0) instead. Every key lies
// far above 2^32.
__host__ __device__ uint64_t Mix64(uint64_t i) {
  uint64_t x = i * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull;
  x ^= x >> 31;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 29;
  return x;
}
__host__ __device__ uint64_t Key64Of(uint64_t i) {
  const uint64_t x = Mix64(i);
  return x == gj::kEmptyKey64 ? Mix64(~0ull) : x;
}

// Build keys Key64Of(i); queries as MakeQueries (hits of scattered rows, odd
// rows missing when `half_miss`).
__global__ void MakeKeys64(uint64_t* keys, uint64_t n) {
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n;
       i += uint64_t(gridDim.x) * blockDim.x)
    keys[i] = Key64Of(i);
}
__global__ void MakeQueries64(uint64_t* q, uint64_t n, uint64_t build_n, bool half_miss) {
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n;
       i += uint64_t(gridDim.x) * blockDim.x) {
    const uint64_t hit_row = (i * 2654435761ull) % build_n;
    q[i] = (half_miss && (i & 1)) ? Key64Of(build_n + i) : Key64Of(hit_row);
  }
}

// Multi-value build keys: row i holds KeyOf(i % keys), so each of `keys` keys
// has n / keys rows, spread keys rows apart (the reserved key as in MakeKeys).
// Hash inputs: int64 row i = Key64Of(i); string row i = 16 bytes (Key64Of(2i),
// Key64Of(2i + 1)) at offset 16 i.
__global__ void MakeHashInputs(int64_t* ints, uint64_t* chars, int32_t* offsets, uint64_t n) {
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i <= n;
       i += uint64_t(gridDim.x) * blockDim.x) {
    offsets[i] = int32_t(16 * i);
    if (i == n) continue;
    ints[i] = int64_t(Key64Of(i));
    chars[2 * i] = Key64Of(2 * i);
    chars[2 * i + 1] = Key64Of(2 * i + 1);
  }
}

__global__ void MakeMultiKeys(uint32_t* out, uint64_t n, uint64_t keys) {
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n;
       i += uint64_t(gridDim.x) * blockDim.x) {
    uint32_t k = KeyOf(uint32_t(i % keys));
    if (k == gj::kEmptyKey) k = KeyOf(0xffffffffu);
    out[i] = k;
  }
}

__global__ void Iota(uint32_t* v, uint64_t n, uint32_t base) {
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n;
       i += uint64_t(gridDim.x) * blockDim.x)
    v[i] = base + uint32_t(i) * 3u;
}

// The payload columns of the payload rows: row i holds Mix64(i) (int64) and
// i / 2 (float32).
__host__ __device__ float PayloadF32(uint64_t i) { return float(i) * 0.5f; }
__global__ void MakePayload(uint64_t* i64, float* f32, uint64_t n) {
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n;
       i += uint64_t(gridDim.x) * blockDim.x) {
    i64[i] = Mix64(i);
    f32[i] = PayloadF32(i);
  }
}

__global__ void MakeGroups(uint32_t* keys, uint32_t* mask, float* values, uint64_t n,
                           uint32_t groups) {
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n;
       i += uint64_t(gridDim.x) * blockDim.x) {
    const uint32_t h = KeyOf(uint32_t(i) ^ 0x5bd1e995u);
    keys[i] = h % groups;
    mask[i] = (h >> 20) & 1u;
    values[i] = float(int(h & 0xffff) - 32768) * 0.25f;
  }
}

// Rows of the int64 grouped sum: MakeGroups' keys and mask, and a signed 40-bit
// value per row (a 2^26-row group sum stays far inside int64: no overflow).
__host__ __device__ int64_t Int64ValueOf(uint64_t i) {
  uint64_t x = (i + 1) * 0x9e3779b97f4a7c15ull;
  x ^= x >> 31;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 29;
  return int64_t(x) >> 24;
}

__global__ void MakeGroupsI64(uint32_t* keys, uint32_t* mask, int64_t* values, uint64_t n,
                              uint32_t groups) {
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n;
       i += uint64_t(gridDim.x) * blockDim.x) {
    const uint32_t h = KeyOf(uint32_t(i) ^ 0x5bd1e995u);
    keys[i] = h % groups;
    mask[i] = (h >> 20) & 1u;
    values[i] = Int64ValueOf(i);
  }
}

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

// Median milliseconds of `fn` over g_reps runs after two warm-ups.
double MedianMs(cudaStream_t s, const std::function<void()>& fn) {
  Timer t;
  for (int w = 0; w < 2; ++w) fn();
  CHECK_CUDA(cudaStreamSynchronize(s));
  std::vector<float> ms;
  for (int r = 0; r < g_reps; ++r) {
    CHECK_CUDA(cudaEventRecord(t.a, s));
    fn();
    CHECK_CUDA(cudaEventRecord(t.b, s));
    CHECK_CUDA(cudaEventSynchronize(t.b));
    float x = 0;
    CHECK_CUDA(cudaEventElapsedTime(&x, t.a, t.b));
    ms.push_back(x);
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// One build timed per phase: events before the build, between its phases
// (BuildSource::phase_events) and after it. Medians over g_reps runs after two
// warm-ups: total and each of the three phases.
struct PhaseTimes {
  std::string name;
  double total = 0;
  double phase[3] = {0, 0, 0};
};

PhaseTimes MedianBuildMs(cudaStream_t s, gd::BuildSource& src, const std::function<void()>& fn) {
  cudaEvent_t ev[5];
  for (cudaEvent_t& e : ev) CHECK_CUDA(cudaEventCreate(&e));
  src.phase_events = ev + 1;
  for (int w = 0; w < 2; ++w) fn();
  CHECK_CUDA(cudaStreamSynchronize(s));
  std::vector<float> total, ph[3];
  for (int r = 0; r < g_reps; ++r) {
    CHECK_CUDA(cudaEventRecord(ev[0], s));
    fn();
    CHECK_CUDA(cudaEventRecord(ev[4], s));
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
  auto median = [](std::vector<float>& v) {
    std::sort(v.begin(), v.end());
    return double(v[v.size() / 2]);
  };
  PhaseTimes t;
  t.total = median(total);
  for (int k = 0; k < 3; ++k) t.phase[k] = median(ph[k]);
  return t;
}

std::vector<PhaseTimes> g_phases;

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

std::vector<Row> g_rows;
double g_copy_bps = 0;

// Counts and reports a failed output check; returns `ok`.
bool Check(bool ok, const std::string& what) {
  if (!ok) {
    std::fprintf(stderr, "CHECK FAILED: %s\n", what.c_str());
    ++g_failures;
  }
  return ok;
}

template <typename T>
T* DeviceAlloc(size_t n) {
  void* p = nullptr;
  CHECK_CUDA(cudaMalloc(&p, n * sizeof(T) + 16));
  return static_cast<T*>(p);
}

template <typename T>
T Fetch(const T* d) {
  T h;
  CHECK_CUDA(cudaMemcpy(&h, d, sizeof(T), cudaMemcpyDeviceToHost));
  return h;
}

void Grid(uint64_t n, unsigned& blocks) {
  blocks = unsigned(std::min<uint64_t>((n + 255) / 256, 65535u * 16));
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0)
      quick = true;
    else if (std::strcmp(argv[i], "--profile") == 0)
      g_profile = true;
    else if (std::strncmp(argv[i], "--only=", 7) == 0 &&
             std::strstr(" core u64 multi_value aggregate hash ",
                         (" " + std::string(argv[i] + 7) + " ").c_str()) != nullptr)
      g_only = argv[i] + 7;
    else if (std::strncmp(argv[i], "--groups=", 9) == 0)
      g_agg_groups = uint32_t(std::strtoul(argv[i] + 9, nullptr, 10));
    else if (std::strncmp(argv[i], "--reps=", 7) == 0)
      g_reps = std::max(5, std::atoi(argv[i] + 7));
    else {
      std::printf(
          "usage: gpujoin-bench [--reps=N (>=5, default 7)] [--quick (1/16 sizes)] [--profile]\n"
          "  [--only=core|u64|multi_value|aggregate|hash (the copy row and that section's\n"
          "  rows only; core = builds, lookups, joins and payload gathers)]\n"
          "  [--groups=N (group aggregation: only the rows of N groups, one of 16, 256,\n"
          "  4097, 65536, 200000)]\n"
          "  --profile: for Nsight Compute; one repetition, only the direct and tile builds\n"
          "  and the lookups, no joins or aggregation\n");
      return 2;
    }
  }
  if (g_profile) g_reps = 1;
  int device = 0;
  CHECK_CUDA(cudaSetDevice(device));
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, device));
  cudaStream_t s;
  CHECK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const int shift = quick ? 4 : 0;
  // The memory pool keeps freed transient buffers as in the CUDA backend
  // (cuda_backend.cpp): a build's buffer is recycled instead of being mapped
  // again on every repetition.
  CHECK_CUDA(gd::KeepTransientMemory(device));

  // 1. Copy ceiling: 2 GiB device-to-device, bytes read + written.
  {
    const size_t bytes = (size_t{2} << 30) >> shift;
    void *a = nullptr, *b = nullptr;
    CHECK_CUDA(cudaMalloc(&a, bytes));
    CHECK_CUDA(cudaMalloc(&b, bytes));
    CHECK_CUDA(cudaMemsetAsync(a, 1, bytes, s));
    const double ms =
        MedianMs(s, [&] { CHECK_CUDA(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, s)); });
    g_copy_bps = 2.0 * double(bytes) / (ms * 1e-3);
    g_rows.push_back(
        {"copy d2d (read+write)", double(bytes) / 4, ms, 2.0 * double(bytes), "", 0, 0});
    CHECK_CUDA(cudaFree(a));
    CHECK_CUDA(cudaFree(b));
  }

  // Index rows. Every output is poisoned before every timed variant and checked
  // in full on the host afterwards: the table (every slot written, one word per
  // key, no poison left), the lookup values and found flags of every row, every
  // join pair. A failed check adds FAIL to its row.
  constexpr uint8_t kPoison = 0xab;
  const uint32_t capacity = (1u << 27) >> shift;
  uint64_t* slots = DeviceAlloc<uint64_t>(gd::TableAllocationSlots(capacity));
  auto* bstats = DeviceAlloc<gd::DeviceBuildStats>(1);
  auto* qstats = DeviceAlloc<gd::DeviceQueryStats>(1);
  auto* fell_back = DeviceAlloc<unsigned int>(1);
  const uint64_t max_n = uint64_t(0.8 * capacity);
  uint32_t* keys = DeviceAlloc<uint32_t>(max_n);
  uint32_t* values = DeviceAlloc<uint32_t>(max_n);
  uint32_t* queries = DeviceAlloc<uint32_t>(max_n);
  uint32_t* out_values = DeviceAlloc<uint32_t>(max_n);
  uint8_t* found = DeviceAlloc<uint8_t>(max_n);
  uint32_t* out_left = DeviceAlloc<uint32_t>(max_n);
  uint32_t* out_right = DeviceAlloc<uint32_t>(max_n);
  auto* count = DeviceAlloc<unsigned long long>(1);
  void* join_scratch = nullptr;
  CHECK_CUDA(cudaMalloc(&join_scratch, gd::JoinScratchBytes(max_n)));
  unsigned blocks = 0;
  // Payload rows (issue 20), at load 0.5 of the full table only: the two
  // columns in source order and stored in slot order, the winners, the slots the
  // probe writes, the gathered outputs and null counts, the join's scratch.
  struct PayloadBuffers {
    uint64_t* src64 = nullptr;
    float* src32 = nullptr;
    uint32_t* winners = nullptr;
    uint8_t* records = nullptr;   // per slot: the int64 at 0, the float32 at 8 (16 bytes)
    uint32_t* slot_of = nullptr;  // per query row, then per pair
    uint64_t* out64 = nullptr;
    float* out32 = nullptr;
    uint8_t* valid64 = nullptr;
    uint8_t* valid32 = nullptr;
    unsigned long long* nulls = nullptr;  // [store, store, gather64, gather32]
    void* join_scratch = nullptr;
  } pay;

  // Sizes: load 0.5 and 0.8 of a 1 GiB table (the targets), and a 64 MiB table at
  // load 0.5, below the size where kAuto switches from the direct path to tiles.
  struct Size {
    uint32_t capacity;
    uint64_t rows;
    std::string load;
  };
  std::vector<Size> sizes = {{capacity, capacity / 2, "0.5"}, {capacity, max_n, "0.8"}};
  if (!g_profile) sizes.push_back({capacity / 16, capacity / 32, "0.5, 64 MiB table"});
  for (const Size& size : !Runs("core") ? std::vector<Size>{} : sizes) {
    const uint64_t n = size.rows;
    const uint32_t cap = size.capacity;
    const gd::DeviceTable table{slots, cap};
    const std::string lf = size.load;
    const bool full_size = cap == capacity;
    Grid(n, blocks);
    MakeKeys<<<blocks, 256, 0, s>>>(keys, n, 0);
    Iota<<<blocks, 256, 0, s>>>(values, n, 12345);
    CHECK_CUDA(cudaGetLastError());

    gd::BuildSource src;
    src.keys = keys;
    src.rows = n;
    src.fell_back = fell_back;
    auto build = [&] { CHECK_CUDA(gd::ClearAndBuildTable(table, src, cap, bstats, s)); };
    // The table after a build of keys KeyOf(row) (hot: `hot_keys`): every slot
    // empty or holding a build key, `unique` of them, and the value of each
    // retained key that of its lowest row (explicit: 12345 + 3 * row, else row).
    auto table_ok = [&](bool explicit_values, bool hot, uint64_t unique) {
      std::vector<uint64_t> t(gd::TableAllocationSlots(cap));
      CHECK_CUDA(cudaMemcpy(t.data(), slots, t.size() * 8, cudaMemcpyDeviceToHost));
      std::vector<uint32_t> hkeys(n);
      CHECK_CUDA(cudaMemcpy(hkeys.data(), keys, n * 4, cudaMemcpyDeviceToHost));
      std::unordered_map<uint32_t, uint32_t> first_row;  // hot keys: their first row
      if (hot)
        for (uint64_t r = n; r-- > 0;)
          if ((r & 3) == 3) first_row[hkeys[r]] = uint32_t(r);
      // Distinct keys KeyOf(row) are found by inverting nothing: the table's
      // value says which row it claims, and that row's key must match.
      uint64_t occupied = 0;
      for (size_t i = 0; i < cap; ++i) {
        const uint64_t w = t[i];
        if (w == gd::kEmptySlot) continue;
        ++occupied;
        const uint32_t key = uint32_t(w >> 32), value = uint32_t(w);
        const uint32_t row = explicit_values ? (value - 12345u) / 3u : value;
        if (row >= n || hkeys[row] != key) return false;
        if (explicit_values && value != 12345u + 3u * row) return false;
        if (hot) {
          const auto it = first_row.find(key);
          if (it != first_row.end() && it->second != row) return false;
        }
      }
      return occupied == unique;
    };
    // Generated row ids (first_value + row, no finalisation) and explicit values
    // (12345 + 3 * row, finalised), for each live path: the default (what the
    // backend runs for this size), each path forced, then hot keys.
    struct Variant {
      std::string name;
      gd::BuildPath path;
    };
    std::vector<Variant> variants = {{"default", gd::BuildPath::kAuto},
                                     {"direct", gd::BuildPath::kDirect},
                                     {"tiles", gd::BuildPath::kTiles}};
    if (g_profile) variants.erase(variants.begin());
    std::optional<gd::DeviceBuildStats> reference;  // every path's statistics must agree
    for (const Variant& v : variants) {
      for (const bool explicit_values : {false, true}) {
        src.path = v.path;
        src.values = explicit_values ? values : nullptr;
        src.first_value = 0;
        const std::string how =
            v.name + (explicit_values ? ", explicit values" : ", generated row ids");
        CHECK_CUDA(cudaMemsetAsync(slots, kPoison, gd::TableAllocationBytes(cap), s));
        CHECK_CUDA(cudaMemsetAsync(bstats, kPoison, sizeof(gd::DeviceBuildStats), s));
        CHECK_CUDA(cudaMemsetAsync(fell_back, kPoison, sizeof(unsigned int), s));
        PhaseTimes pt = MedianBuildMs(s, src, build);
        pt.name = how + ", load " + lf;
        g_phases.push_back(pt);
        CHECK_CUDA(cudaStreamSynchronize(s));
        const gd::DeviceBuildStats st = Fetch(bstats);
        const bool tiles = gd::ChooseBuildPath(cap, n, v.path) == gd::BuildPath::kTiles;
        bool ok = Check(st.unique_keys == n && st.duplicate_rows == 0 && st.overflow_rows == 0 &&
                            st.invalid_rows == 0 && st.max_probes >= 1,
                        "build statistics (" + how + "), load " + lf);
        if (!reference) reference = st;
        ok &= Check(
            st.total_probes == reference->total_probes && st.max_probes == reference->max_probes,
            "build probes equal on every path (" + how + "), load " + lf);
        ok &= Check(!tiles || Fetch(fell_back) == 0, "no fallback (" + how + "), load " + lf);
        ok &= Check(table_ok(explicit_values, false, n), "table (" + how + "), load " + lf);
        std::string target;
        double tv = 0;
        if (v.path == gd::BuildPath::kAuto && lf == "0.5") {
          tv = explicit_values ? 11.1e9 : 12.3e9;
          target = explicit_values ? ">= 11.1 Gkeys/s" : ">= 12.3 Gkeys/s";
        }
        if (v.path == gd::BuildPath::kAuto && lf == "0.8" && !explicit_values) {
          tv = 11e9;
          target = ">= 11 Gkeys/s";
        }
        // Bytes: key (+ value) read, one sector per key, and the table written.
        const double bytes = double(n) * (explicit_values ? 40 : 36) + double(cap) * 8;
        g_rows.push_back({"build " + how + ", load " + lf + (ok ? "" : " FAIL"), double(n),
                          pt.total, bytes, target, tv, tv > 0 ? 1 : 0});
      }
    }
    // Hot keys: a quarter of the rows on 16 keys (tiles of about a million rows,
    // reduced to one word per key on the tile path). Explicit values.
    if (full_size && lf == "0.5" && !g_profile) {
      MakeHotKeys<<<blocks, 256, 0, s>>>(keys, n);
      CHECK_CUDA(cudaGetLastError());
      const uint64_t hot_unique = n - n / 4 + 16;
      for (const Variant& v : variants) {
        if (v.path == gd::BuildPath::kTiles) continue;  // the default for this size
        src.path = v.path;
        src.values = values;
        const std::string how = v.name + ", hot keys, explicit values";
        CHECK_CUDA(cudaMemsetAsync(slots, kPoison, gd::TableAllocationBytes(cap), s));
        CHECK_CUDA(cudaMemsetAsync(bstats, kPoison, sizeof(gd::DeviceBuildStats), s));
        CHECK_CUDA(cudaMemsetAsync(fell_back, kPoison, sizeof(unsigned int), s));
        PhaseTimes pt = MedianBuildMs(s, src, build);
        pt.name = how + ", load " + lf;
        g_phases.push_back(pt);
        const gd::DeviceBuildStats st = Fetch(bstats);
        bool ok = Check(st.unique_keys == hot_unique && st.duplicate_rows == n - hot_unique &&
                            st.overflow_rows == 0,
                        "build statistics (" + how + ")");
        ok &= Check(v.path != gd::BuildPath::kAuto || Fetch(fell_back) == 0,
                    "no fallback (" + how + ")");
        ok &= Check(table_ok(true, true, hot_unique), "table (" + how + ")");
        g_rows.push_back(
            {"build " + how + ", 1/4 of rows on 16 keys, load " + lf + (ok ? "" : " FAIL"),
             double(n), pt.total, double(n) * 40 + double(cap) * 8, "", 0, 0});
      }
      MakeKeys<<<blocks, 256, 0, s>>>(keys, n, 0);
      CHECK_CUDA(cudaGetLastError());
    }
    if (!full_size) continue;
    // Lookups and joins into the default build with explicit values.
    src.path = gd::BuildPath::kAuto;
    src.values = values;
    build();
    const bool payload_rows = lf == "0.5" && !g_profile;
    const uint64_t pslots = gd::TableAllocationSlots(cap);
    if (payload_rows) {
      // Both columns stored beside the table as a build stores them.
      pay.src64 = DeviceAlloc<uint64_t>(n);
      pay.src32 = DeviceAlloc<float>(n);
      pay.winners = DeviceAlloc<uint32_t>(pslots);
      pay.records = DeviceAlloc<uint8_t>(pslots * 16);
      pay.slot_of = DeviceAlloc<uint32_t>(n);
      pay.out64 = DeviceAlloc<uint64_t>(n);
      pay.out32 = DeviceAlloc<float>(n);
      pay.valid64 = DeviceAlloc<uint8_t>(n / 8 + 1);
      pay.valid32 = DeviceAlloc<uint8_t>(n / 8 + 1);
      pay.nulls = DeviceAlloc<unsigned long long>(4);
      CHECK_CUDA(cudaMalloc(&pay.join_scratch, gd::JoinScratchBytesWithSlots(n)));
      MakePayload<<<blocks, 256, 0, s>>>(pay.src64, pay.src32, n);
      CHECK_CUDA(cudaGetLastError());
      CHECK_CUDA(cudaMemsetAsync(pay.nulls, 0, 4 * sizeof(unsigned long long), s));
      CHECK_CUDA(gd::FindPayloadWinners(table, src, cap, pay.winners, s));
      gd::SourceColumn c64{gj::ColumnType::kInt64, pay.src64, nullptr, nullptr};
      gd::SourceColumn c32{gj::ColumnType::kFloat32, pay.src32, nullptr, nullptr};
      CHECK_CUDA(cudaMemsetAsync(pay.records, 0, pslots * 16, s));
      CHECK_CUDA(
          gd::PermuteColumn(c64, pay.winners, pslots, pay.records, 16, nullptr, pay.nulls, s));
      CHECK_CUDA(
          gd::PermuteColumn(c32, pay.winners, pslots, pay.records + 8, 16, nullptr, pay.nulls, s));
      CHECK_CUDA(cudaStreamSynchronize(s));
    }
    const gd::StoredColumn stored64{gj::ColumnType::kInt64, pay.records, 16, 0, nullptr, nullptr};
    const gd::StoredColumn stored32{gj::ColumnType::kFloat32, pay.records, 16, 8, nullptr, nullptr};
    // Both columns in one gather (what a node gathering them runs).
    const auto gather_both = [&](const gd::GatherRows& rows) {
      const gd::FixedGather both[2] = {{stored64, pay.out64, pay.valid64, pay.nulls + 2},
                                       {stored32, pay.out32, pay.valid32, pay.nulls + 3}};
      CHECK_CUDA(gd::GatherFixedColumns(both, rows, s));
    };
    // Checks the gathered outputs of `rows` output rows, where output row k
    // holds build row row_of(k) (or none: null), and the null counts.
    auto gathered_ok = [&](uint64_t rows, const std::function<int64_t(uint64_t)>& row_of) {
      std::vector<uint64_t> g64(rows);
      std::vector<float> g32(rows);
      std::vector<uint8_t> v64(gj::BitmapBytes(rows)), v32(gj::BitmapBytes(rows));
      unsigned long long nulls[4];
      CHECK_CUDA(cudaMemcpy(g64.data(), pay.out64, rows * 8, cudaMemcpyDeviceToHost));
      CHECK_CUDA(cudaMemcpy(g32.data(), pay.out32, rows * 4, cudaMemcpyDeviceToHost));
      CHECK_CUDA(cudaMemcpy(v64.data(), pay.valid64, v64.size(), cudaMemcpyDeviceToHost));
      CHECK_CUDA(cudaMemcpy(v32.data(), pay.valid32, v32.size(), cudaMemcpyDeviceToHost));
      CHECK_CUDA(cudaMemcpy(nulls, pay.nulls, sizeof(nulls), cudaMemcpyDeviceToHost));
      uint64_t wrong = 0, missing = 0;
      for (uint64_t k = 0; k < rows; ++k) {
        const int64_t r = row_of(k);
        const bool a = gj::BitAt(v64, k), b = gj::BitAt(v32, k);
        if (r < 0) {
          ++missing;
          wrong += a || b || g64[k] != 0 || g32[k] != 0.0f;
        } else {
          wrong += !a || !b || g64[k] != Mix64(uint64_t(r)) || g32[k] != PayloadF32(uint64_t(r));
        }
      }
      return wrong == 0 && nulls[0] == 0 && nulls[2] == missing && nulls[3] == missing;
    };
    for (bool half_miss : {false, true}) {
      MakeQueries<<<blocks, 256, 0, s>>>(queries, n, n, half_miss);
      CHECK_CUDA(cudaGetLastError());
      // Row i hits build row (i * 2654435761) % n (value 12345 + 3 * row), or
      // misses (odd rows with half_miss).
      auto expected = [&](uint64_t i) {
        return (half_miss && (i & 1)) ? gj::kEmptyKey
                                      : 12345u + uint32_t((i * 2654435761ull) % n) * 3u;
      };
      const uint64_t expect_found = half_miss ? (n + 1) / 2 : n;
      CHECK_CUDA(cudaMemsetAsync(out_values, kPoison, n * 4, s));
      CHECK_CUDA(cudaMemsetAsync(found, kPoison, n, s));
      const double ms = MedianMs(s, [&] {
        CHECK_CUDA(cudaMemsetAsync(qstats, 0, sizeof(gd::DeviceQueryStats), s));
        CHECK_CUDA(gd::LookupKeys(table, queries, n, cap, out_values, found, nullptr, qstats, s));
      });
      CHECK_CUDA(cudaStreamSynchronize(s));
      const std::string what = std::string(half_miss ? "50% miss" : "all hits") + ", load " + lf;
      bool ok = Check(Fetch(qstats).found == expect_found, "lookup found count, " + what);
      {
        std::vector<uint32_t> got(n);
        std::vector<uint8_t> got_found(n);
        CHECK_CUDA(cudaMemcpy(got.data(), out_values, n * 4, cudaMemcpyDeviceToHost));
        CHECK_CUDA(cudaMemcpy(got_found.data(), found, n, cudaMemcpyDeviceToHost));
        uint64_t wrong = 0;
        for (uint64_t i = 0; i < n; ++i)
          wrong += got[i] != expected(i) || got_found[i] != uint8_t(expected(i) != gj::kEmptyKey);
        ok &= Check(wrong == 0, "lookup values and found flags of every row, " + what);
      }
      std::string target;
      double tv = 0;
      if (!half_miss) {
        tv = lf == "0.5" ? 32.2e9 : 27.0e9;
        target = lf == "0.5" ? ">= 32.2 Gkeys/s" : ">= 27.0 Gkeys/s";
      } else if (lf == "0.8") {
        tv = 20e9;
        target = ">= 20 Gkeys/s";
      }
      g_rows.push_back({"lookup+found+stats, " + what + (ok ? "" : " FAIL"), double(n), ms,
                        double(n) * 41, target, tv, tv > 0 ? 1 : 0});
      const double lookup_rate = double(n) / (ms * 1e-3);
      if (payload_rows) {
        // The same lookup gathering both columns: the probe writes each row's
        // slot, one gather kernel reads it and both columns from its record (what
        // a LookupNode with `gather` runs, without the transfers).
        const gd::GatherRows rows{pay.slot_of, n, nullptr};
        CHECK_CUDA(cudaMemsetAsync(pay.out64, kPoison, n * 8, s));
        CHECK_CUDA(cudaMemsetAsync(pay.out32, kPoison, n * 4, s));
        CHECK_CUDA(cudaMemsetAsync(pay.valid64, kPoison, n / 8 + 1, s));
        CHECK_CUDA(cudaMemsetAsync(pay.valid32, kPoison, n / 8 + 1, s));
        const double pms = MedianMs(s, [&] {
          CHECK_CUDA(cudaMemsetAsync(qstats, 0, sizeof(gd::DeviceQueryStats), s));
          CHECK_CUDA(cudaMemsetAsync(pay.nulls + 2, 0, 2 * sizeof(unsigned long long), s));
          CHECK_CUDA(gd::LookupKeysSlots(table, queries, n, cap, out_values, found, nullptr,
                                         pay.slot_of, qstats, s));
          gather_both(rows);
        });
        CHECK_CUDA(cudaStreamSynchronize(s));
        bool pok =
            Check(Fetch(qstats).found == expect_found, "payload lookup found count, " + what);
        pok &= Check(gathered_ok(n,
                                 [&](uint64_t i) -> int64_t {
                                   if (half_miss && (i & 1)) return -1;
                                   return int64_t((i * 2654435761ull) % n);
                                 }),
                     "payload lookup: both gathered columns of every row, " + what);
        const double ratio = (double(n) / (pms * 1e-3)) / lookup_rate;
        char name[160];
        std::snprintf(name, sizeof(name), "lookup+found+stats+gather i64,f32 (%.2f x plain), %s%s",
                      ratio, what.c_str(), pok ? "" : " FAIL");
        Row pr{name,
               double(n),
               pms,
               double(n) * 93.25,
               half_miss ? "" : ">= 0.6 x lookup",
               half_miss ? 0.0 : 0.6,
               half_miss ? 0 : 3};
        pr.reference_rate = lookup_rate;
        g_rows.push_back(pr);
      }
      if (lf != "0.5" || g_profile) continue;
      // Inner join of the same left keys: lookup + stable compaction.
      CHECK_CUDA(cudaMemsetAsync(out_left, kPoison, n * 4, s));
      CHECK_CUDA(cudaMemsetAsync(out_right, kPoison, n * 4, s));
      CHECK_CUDA(cudaMemsetAsync(count, kPoison, sizeof(unsigned long long), s));
      const double jms = MedianMs(s, [&] {
        CHECK_CUDA(cudaMemsetAsync(qstats, 0, sizeof(gd::DeviceQueryStats), s));
        CHECK_CUDA(gd::JoinKeys(table, queries, n, cap, nullptr, 0, out_left, out_right, n, count,
                                nullptr, nullptr, qstats, join_scratch, s));
      });
      CHECK_CUDA(cudaStreamSynchronize(s));
      const unsigned long long matches = Fetch(count);
      bool jok = Check(matches == expect_found, "join count, " + what);
      {
        std::vector<uint32_t> l(matches), r(matches);
        CHECK_CUDA(cudaMemcpy(l.data(), out_left, matches * 4, cudaMemcpyDeviceToHost));
        CHECK_CUDA(cudaMemcpy(r.data(), out_right, matches * 4, cudaMemcpyDeviceToHost));
        uint64_t wrong = 0;
        for (uint64_t k = 0; k < matches; ++k) {
          const uint64_t i = half_miss ? 2 * k : k;  // stable: pairs in left order
          wrong += l[k] != i || r[k] != expected(i);
        }
        jok &= Check(wrong == 0, "join pairs in left order, " + what);
      }
      Row jr{"join (pairs), " + what + (jok ? "" : " FAIL"),
             double(n),
             jms,
             double(n) * 40 + double(matches) * 12,
             ">= 0.6 x lookup",
             0.6,
             3};
      jr.reference_rate = lookup_rate;
      g_rows.push_back(jr);
      if (payload_rows) {
        // The same join gathering both columns per pair: the scatter writes each
        // pair's slot, the gather reads the first min(count, capacity) of them.
        const double join_rate = double(n) / (jms * 1e-3);
        const gd::GatherRows rows{pay.slot_of, n, count};
        CHECK_CUDA(cudaMemsetAsync(out_left, kPoison, n * 4, s));
        CHECK_CUDA(cudaMemsetAsync(out_right, kPoison, n * 4, s));
        CHECK_CUDA(cudaMemsetAsync(pay.out64, kPoison, n * 8, s));
        CHECK_CUDA(cudaMemsetAsync(pay.out32, kPoison, n * 4, s));
        const double pjms = MedianMs(s, [&] {
          CHECK_CUDA(cudaMemsetAsync(qstats, 0, sizeof(gd::DeviceQueryStats), s));
          CHECK_CUDA(cudaMemsetAsync(pay.nulls + 2, 0, 2 * sizeof(unsigned long long), s));
          CHECK_CUDA(gd::JoinKeysWithSlots(table, queries, n, cap, nullptr, 0, out_left, out_right,
                                           pay.slot_of, n, count, nullptr, nullptr, qstats,
                                           pay.join_scratch, s));
          gather_both(rows);
        });
        CHECK_CUDA(cudaStreamSynchronize(s));
        const unsigned long long pmatches = Fetch(count);
        bool pok = Check(pmatches == expect_found, "payload join count, " + what);
        {
          std::vector<uint32_t> l(pmatches), r(pmatches);
          CHECK_CUDA(cudaMemcpy(l.data(), out_left, pmatches * 4, cudaMemcpyDeviceToHost));
          CHECK_CUDA(cudaMemcpy(r.data(), out_right, pmatches * 4, cudaMemcpyDeviceToHost));
          uint64_t wrong = 0;
          for (uint64_t k = 0; k < pmatches; ++k) {
            const uint64_t i = half_miss ? 2 * k : k;
            wrong += l[k] != i || r[k] != expected(i);
          }
          pok &= Check(wrong == 0, "payload join pairs in left order, " + what);
        }
        pok &= Check(gathered_ok(pmatches,
                                 [&](uint64_t k) -> int64_t {
                                   const uint64_t i = half_miss ? 2 * k : k;
                                   return int64_t((i * 2654435761ull) % n);
                                 }),
                     "payload join: both gathered columns of every pair, " + what);
        const double ratio = (double(n) / (pjms * 1e-3)) / join_rate;
        char name[160];
        std::snprintf(name, sizeof(name), "join+gather i64,f32 (%.2f x plain join), %s%s", ratio,
                      what.c_str(), pok ? "" : " FAIL");
        Row pr{name,
               double(n),
               pjms,
               double(n) * 44 + double(pmatches) * (12 + 8 + 44.25),
               half_miss ? "" : ">= 0.6 x join",
               half_miss ? 0.0 : 0.6,
               half_miss ? 0 : 3};
        pr.reference_rate = join_rate;
        g_rows.push_back(pr);
      }
    }
  }
  for (void* p :
       std::initializer_list<void*>{slots, bstats, qstats, fell_back, keys, values, queries,
                                    out_values, found, out_left, out_right, count, join_scratch})
    CHECK_CUDA(cudaFree(p));
  for (void* p : std::initializer_list<void*>{pay.src64, pay.src32, pay.winners, pay.records,
                                              pay.slot_of, pay.out64, pay.out32, pay.valid64,
                                              pay.valid32, pay.nulls, pay.join_scratch})
    CHECK_CUDA(cudaFree(p));

  // Multi-value indexes and join kinds (issue 21), uint32 keys, generated row
  // ids (value = row). Multiplicity 4: 2^26 build rows on 2^24 keys (row i holds
  // key i mod 2^24) in 2^25 slots (load 0.5), the issue's cuCollections
  // comparison (static_multimap count + retrieve of 2^26 probe keys, 2^28
  // pairs: 10.2 Gpairs/s; insert 11.1 Gkeys/s); multiplicity 1: 2^26 distinct
  // keys in 2^27 slots. Every output is poisoned and checked in full: the
  // table's statistics, every group (its rows in order), every pair.
  // Byte model: keep_all build = the lowest_row build's (key 4 B + one sector +
  // the table written) + the group pass (probe sector 32 B, sort keys and rows
  // 8 B written, the sort's four passes 4 x 16 B, bounds 4 B, value 4 B, ranges
  // 8 B per slot twice); count+scatter join = per left row key 4 B + a table
  // sector + a ranges sector 32 B + counts, positions, firsts 12 B + scan 12 B
  // + their re-read 16 B, per pair 8 B written (+ 4 B value list read).
  if (Runs("multi_value") && !g_profile) {
    const uint64_t mkeys = (uint64_t{1} << 24) >> shift;
    const uint64_t mrows = 4 * mkeys;
    const uint64_t mq = mrows;                     // probe keys
    const uint64_t mpairs = 4 * mq;                // all hits at multiplicity 4
    const uint32_t big_cap = (1u << 27) >> shift;  // multiplicity 1: 2^26 keys
    const uint32_t x4_cap = (1u << 25) >> shift;
    uint64_t* mslots = DeviceAlloc<uint64_t>(gd::TableAllocationSlots(big_cap));
    uint32_t* mkeys_d = DeviceAlloc<uint32_t>(mrows);
    uint32_t* mq_d = DeviceAlloc<uint32_t>(mq);
    auto* ranges = DeviceAlloc<gd::GroupRange>(big_cap);
    uint32_t* gvalues = DeviceAlloc<uint32_t>(mrows);
    auto* gstats = DeviceAlloc<gd::DeviceGroupStats>(1);
    auto* bst = DeviceAlloc<gd::DeviceBuildStats>(1);
    auto* qst = DeviceAlloc<gd::DeviceQueryStats>(1);
    auto* mcount = DeviceAlloc<unsigned long long>(1);
    uint32_t* ml = DeviceAlloc<uint32_t>(mpairs);
    uint32_t* mr = DeviceAlloc<uint32_t>(mpairs);
    uint32_t* lv = DeviceAlloc<uint32_t>(mq);
    uint8_t* lf = DeviceAlloc<uint8_t>(mq);
    const size_t gscratch_bytes = std::max(gd::GroupScratchBytes(big_cap, mrows, false),
                                           gd::GroupScratchBytes(x4_cap, mrows, false));
    const size_t cscratch_bytes = gd::GroupJoinCountScratchBytes(mq);
    const size_t sscratch_bytes = gd::GroupJoinScatterScratchBytes(mq, mpairs);
    void *gscratch = nullptr, *cscratch = nullptr, *sscratch = nullptr, *jscratch = nullptr;
    CHECK_CUDA(cudaMalloc(&gscratch, gscratch_bytes));
    CHECK_CUDA(cudaMalloc(&cscratch, cscratch_bytes));
    CHECK_CUDA(cudaMalloc(&sscratch, sscratch_bytes));
    CHECK_CUDA(cudaMalloc(&jscratch, gd::JoinScratchBytes(mq)));
    for (const uint64_t multiplicity : {uint64_t{4}, uint64_t{1}}) {
      const uint64_t nkeys = mrows / multiplicity;
      const uint32_t cap = multiplicity == 4 ? x4_cap : big_cap;
      const gd::DeviceTable table{mslots, cap};
      const std::string mult = "x" + std::to_string(multiplicity);
      Grid(mrows, blocks);
      MakeMultiKeys<<<blocks, 256, 0, s>>>(mkeys_d, mrows, nkeys);
      CHECK_CUDA(cudaGetLastError());
      gd::BuildSource src;
      src.keys = mkeys_d;
      src.rows = mrows;
      const uint32_t* grouped_rows = nullptr;
      auto lowest_build = [&] { CHECK_CUDA(gd::ClearAndBuildTable(table, src, cap, bst, s)); };
      auto keep_all_build = [&] {
        lowest_build();
        CHECK_CUDA(gd::SortGroupRows(table, src, cap, false, ranges, gstats, gscratch,
                                     gscratch_bytes, &grouped_rows, s));
        CHECK_CUDA(gd::WriteGroupValues(src, grouped_rows, mrows, gvalues, s));
      };
      const double lms = MedianMs(s, lowest_build);
      CHECK_CUDA(cudaMemsetAsync(ranges, kPoison, uint64_t{cap} * sizeof(gd::GroupRange), s));
      CHECK_CUDA(cudaMemsetAsync(gvalues, kPoison, mrows * 4, s));
      const double kms = MedianMs(s, keep_all_build);
      CHECK_CUDA(cudaStreamSynchronize(s));
      bool bok = false;
      {
        const gd::DeviceBuildStats st = Fetch(bst);
        const gd::DeviceGroupStats gs = Fetch(gstats);
        bok = Check(st.unique_keys == nkeys && st.duplicate_rows == mrows - nkeys &&
                        st.overflow_rows == 0 && st.invalid_rows == 0 &&
                        gs.max_group_rows == multiplicity,
                    "keep_all build statistics, " + mult);
        // Every stored key's group: its `multiplicity` rows in order, the first
        // the key's own row r < nkeys, then r + nkeys, r + 2 nkeys, ...
        std::vector<uint64_t> t(cap);
        std::vector<gd::GroupRange> rg(cap);
        std::vector<uint32_t> vals(mrows);
        CHECK_CUDA(cudaMemcpy(t.data(), mslots, uint64_t{cap} * 8, cudaMemcpyDeviceToHost));
        CHECK_CUDA(cudaMemcpy(rg.data(), ranges, uint64_t{cap} * 8, cudaMemcpyDeviceToHost));
        CHECK_CUDA(cudaMemcpy(vals.data(), gvalues, mrows * 4, cudaMemcpyDeviceToHost));
        uint64_t wrong = 0, covered = 0;
        for (uint32_t i = 0; i < cap; ++i) {
          if (t[i] == gd::kEmptySlot) {
            wrong += rg[i].size != 0;
            continue;
          }
          const uint32_t key = uint32_t(t[i] >> 32), first = uint32_t(t[i]);
          const gd::GroupRange g = rg[i];
          if (g.size != multiplicity || uint64_t(g.start) + g.size > mrows || first >= nkeys) {
            ++wrong;
            continue;
          }
          uint32_t k = KeyOf(first);
          if (k == gj::kEmptyKey) k = KeyOf(0xffffffffu);
          wrong += k != key;
          for (uint32_t j = 0; j < g.size; ++j) wrong += vals[g.start + j] != first + j * nkeys;
          covered += g.size;
        }
        bok &= Check(wrong == 0 && covered == mrows, "keep_all groups in row order, " + mult);
      }
      g_rows.push_back({"build lowest_row, " + mult + " rows per key (reference)", double(mrows),
                        lms, double(mrows) * 36 + double(cap) * 8, "", 0, 0});
      {
        const bool x4 = multiplicity == 4;
        Row br{"build keep_all (table + groups), " + mult + " rows per key" + (bok ? "" : " FAIL"),
               double(mrows),
               kms,
               double(mrows) * (36 + 32 + 8 + 64 + 8) + double(cap) * 24,
               x4 ? ">= 10 Gkeys/s" : "",
               x4 ? 10e9 : 0,
               x4 ? 1 : 0};
        g_rows.push_back(br);
      }
      // Count -> scan -> scatter (what a keep_all inner join with groups of
      // more than one row runs): all hits, every left row pairs with its key's
      // `multiplicity` rows. The count is downloaded before the scatter, as
      // the lowering does.
      MakeQueries<<<blocks, 256, 0, s>>>(mq_d, mq, nkeys, false);
      CHECK_CUDA(cudaGetLastError());
      const uint64_t want_pairs = mq * multiplicity;
      CHECK_CUDA(cudaMemsetAsync(ml, kPoison, want_pairs * 4, s));
      CHECK_CUDA(cudaMemsetAsync(mr, kPoison, want_pairs * 4, s));
      unsigned long long got_pairs = 0;
      const double gms = MedianMs(s, [&] {
        CHECK_CUDA(cudaMemsetAsync(qst, 0, sizeof(gd::DeviceQueryStats), s));
        CHECK_CUDA(gd::CountGroupJoin(table, ranges, gj::JoinKind::kInner, mq_d, mq, cap, nullptr,
                                      nullptr, qst, mcount, cscratch, s));
        CHECK_CUDA(cudaMemcpyAsync(&got_pairs, mcount, 8, cudaMemcpyDeviceToHost, s));
        CHECK_CUDA(cudaStreamSynchronize(s));
        const uint64_t written = std::min<uint64_t>(got_pairs, want_pairs);
        CHECK_CUDA(gd::ScatterGroupJoin(cscratch, mq, written, nullptr, 0, gvalues, ml, mr, nullptr,
                                        sscratch, s));
      });
      CHECK_CUDA(cudaStreamSynchronize(s));
      bool jok = Check(got_pairs == want_pairs, "keep_all join count, " + mult);
      {
        std::vector<uint32_t> l(want_pairs), r(want_pairs);
        CHECK_CUDA(cudaMemcpy(l.data(), ml, want_pairs * 4, cudaMemcpyDeviceToHost));
        CHECK_CUDA(cudaMemcpy(r.data(), mr, want_pairs * 4, cudaMemcpyDeviceToHost));
        uint64_t wrong = 0;
        for (uint64_t o = 0; o < want_pairs; ++o) {
          const uint64_t i = o / multiplicity, j = o % multiplicity;
          const uint64_t first = (i * 2654435761ull) % nkeys;
          wrong += l[o] != uint32_t(i) || r[o] != uint32_t(first + j * nkeys);
        }
        jok &= Check(wrong == 0, "keep_all join pairs in left then group order, " + mult);
      }
      const double gbytes = double(mq) * (4 + 32 + 32 + 12 + 12 + 16) + double(want_pairs) * 12;
      if (multiplicity == 4) {
        Row r{
            "join keep_all x4 inner, count+scan+scatter (pairs)" + std::string(jok ? "" : " FAIL"),
            double(want_pairs),
            gms,
            gbytes,
            ">= 15 Gpairs/s",
            15e9,
            1};
        g_rows.push_back(r);
      }
      if (multiplicity == 1) {
        // The many-to-one compaction on the same table and left keys (all hits):
        // the backend's keep_all inner join when every group has one row
        // (max_group_rows 1, JoinPathOf in cuda_lower_query.cpp).
        CHECK_CUDA(cudaMemsetAsync(ml, kPoison, mq * 4, s));
        CHECK_CUDA(cudaMemsetAsync(mr, kPoison, mq * 4, s));
        const double mms = MedianMs(s, [&] {
          CHECK_CUDA(cudaMemsetAsync(qst, 0, sizeof(gd::DeviceQueryStats), s));
          CHECK_CUDA(gd::JoinKeys(table, mq_d, mq, cap, nullptr, 0, ml, mr, mq, mcount, nullptr,
                                  nullptr, qst, jscratch, s));
        });
        CHECK_CUDA(cudaStreamSynchronize(s));
        bool mok = Check(Fetch(mcount) == mq, "many-to-one join count, " + mult);
        {
          std::vector<uint32_t> l(mq), r(mq);
          CHECK_CUDA(cudaMemcpy(l.data(), ml, mq * 4, cudaMemcpyDeviceToHost));
          CHECK_CUDA(cudaMemcpy(r.data(), mr, mq * 4, cudaMemcpyDeviceToHost));
          uint64_t wrong = 0;
          for (uint64_t i = 0; i < mq; ++i) {
            wrong += l[i] != uint32_t(i) || r[i] != uint32_t((i * 2654435761ull) % nkeys);
          }
          mok &= Check(wrong == 0, "many-to-one join pairs (first matches), " + mult);
        }
        const double many_rate = double(mq) / (mms * 1e-3);
        g_rows.push_back(
            {"join many-to-one (pairs), x1 (reference)" + std::string(mok ? "" : " FAIL"),
             double(mq), mms, double(mq) * 52, "", 0, 0});
        // What the backend runs for a keep_all inner join whose groups all
        // have one row (JoinPathOf): the same kernels, so the same rate.
        Row b{"join keep_all x1 inner, backend's path (x many-to-one)" +
                  std::string(mok ? "" : " FAIL"),
              double(mq),
              mms,
              double(mq) * 52,
              ">= 0.9 x many-to-one",
              0.9,
              3};
        b.reference_rate = many_rate;
        g_rows.push_back(b);
        char name[160];
        std::snprintf(name, sizeof(name),
                      "join keep_all x1 inner, count+scan+scatter (%.2f x m-to-1)%s",
                      (double(mq) / (gms * 1e-3)) / many_rate, jok ? "" : " FAIL");
        g_rows.push_back({name, double(mq), gms, gbytes, "", 0, 0});
        continue;
      }
      // Semi and anti joins at multiplicity 4 with half the left keys missing,
      // against a lookup of the same keys: both take the compaction (semi:
      // found rows with their first match; anti: missing rows).
      MakeQueries<<<blocks, 256, 0, s>>>(mq_d, mq, nkeys, true);
      CHECK_CUDA(cudaGetLastError());
      const double lkms = MedianMs(s, [&] {
        CHECK_CUDA(cudaMemsetAsync(qst, 0, sizeof(gd::DeviceQueryStats), s));
        CHECK_CUDA(gd::LookupKeys(table, mq_d, mq, cap, lv, lf, nullptr, qst, s));
      });
      CHECK_CUDA(cudaStreamSynchronize(s));
      const bool lok = Check(Fetch(qst).found == (mq + 1) / 2, "x4 lookup found count");
      g_rows.push_back({"lookup+found+stats, keep_all x4, 50% miss (reference)" +
                            std::string(lok ? "" : " FAIL"),
                        double(mq), lkms, double(mq) * 41, "", 0, 0});
      const double lookup_rate = double(mq) / (lkms * 1e-3);
      for (const gd::MaskedRows masked : {gd::MaskedRows::kFound, gd::MaskedRows::kMissing}) {
        const bool anti = masked == gd::MaskedRows::kMissing;
        CHECK_CUDA(cudaMemsetAsync(ml, kPoison, mq * 4, s));
        CHECK_CUDA(cudaMemsetAsync(mr, kPoison, mq * 4, s));
        const double sms = MedianMs(s, [&] {
          CHECK_CUDA(cudaMemsetAsync(qst, 0, sizeof(gd::DeviceQueryStats), s));
          CHECK_CUDA(gd::JoinKeys(table, mq_d, mq, cap, nullptr, 0, ml, mr, mq, mcount, nullptr,
                                  nullptr, qst, jscratch, s, masked));
        });
        CHECK_CUDA(cudaStreamSynchronize(s));
        const uint64_t want = anti ? mq / 2 : (mq + 1) / 2;
        bool sok = Check(Fetch(mcount) == want, std::string(anti ? "anti" : "semi") + " count");
        {
          std::vector<uint32_t> l(want), r(want);
          CHECK_CUDA(cudaMemcpy(l.data(), ml, want * 4, cudaMemcpyDeviceToHost));
          CHECK_CUDA(cudaMemcpy(r.data(), mr, want * 4, cudaMemcpyDeviceToHost));
          uint64_t wrong = 0;
          for (uint64_t k = 0; k < want; ++k) {
            const uint64_t i = 2 * k + (anti ? 1 : 0);
            const uint32_t right = anti ? gj::kEmptyKey : uint32_t((i * 2654435761ull) % nkeys);
            wrong += l[k] != uint32_t(i) || r[k] != right;
          }
          sok &= Check(wrong == 0, std::string(anti ? "anti" : "semi") + " pairs in left order");
        }
        Row r{std::string(anti ? "anti" : "semi") + " join, keep_all x4, 50% miss (x lookup)" +
                  (sok ? "" : " FAIL"),
              double(mq),
              sms,
              double(mq) * 40 + double(want) * 12,
              ">= 0.8 x lookup",
              0.8,
              3};
        r.reference_rate = lookup_rate;
        g_rows.push_back(r);
      }
    }
    for (void* p : std::initializer_list<void*>{mslots, mkeys_d, mq_d, ranges, gvalues, gstats, bst,
                                                qst, mcount, ml, mr, lv, lf, gscratch, cscratch,
                                                sscratch, jscratch})
      CHECK_CUDA(cudaFree(p));
  }

  // 64-bit keys (issue 19): the same 2^27 slots, 16 bytes each (a 2 GiB table).
  // Builds with generated ids (value = row) at loads 0.5 and 0.8 on the default
  // path; lookups with found flags and statistics, all hits at 0.5 and half
  // misses at 0.8. Byte model: build key 8 B + a 32-byte sector + 16 B/slot
  // written; lookup key 8 B + a sector + value 4 B + found 1 B.
  if (Runs("u64")) {
    const uint32_t cap = (1u << 27) >> shift;
    const uint64_t max_n = uint64_t(0.8 * cap);
    auto* slots64 = DeviceAlloc<gd::Slot64>(gd::TableAllocationSlots(cap));
    auto* keys64 = DeviceAlloc<uint64_t>(max_n);
    auto* queries64 = DeviceAlloc<uint64_t>(max_n);
    auto* values64 = DeviceAlloc<uint32_t>(max_n);
    auto* found64 = DeviceAlloc<uint8_t>(max_n);
    auto* bstats64 = DeviceAlloc<gd::DeviceBuildStats>(1);
    auto* qstats64 = DeviceAlloc<gd::DeviceQueryStats>(1);
    const gd::DeviceTable64 table{slots64, cap};
    for (const double load : {0.5, 0.8}) {
      const uint64_t n = uint64_t(load * cap);
      const std::string lf = load == 0.5 ? "0.5" : "0.8";
      Grid(n, blocks);
      MakeKeys64<<<blocks, 256, 0, s>>>(keys64, n);
      CHECK_CUDA(cudaGetLastError());
      gd::BuildSource64 src;
      src.keys = keys64;
      src.rows = n;
      const double bms =
          MedianMs(s, [&] { CHECK_CUDA(gd::ClearAndBuildTable(table, src, cap, bstats64, s)); });
      const gd::DeviceBuildStats st = Fetch(bstats64);
      bool ok = Check(st.unique_keys == n && st.duplicate_rows == 0 && st.overflow_rows == 0 &&
                          st.invalid_rows == 0,
                      "64-bit build statistics, load " + lf);
      {
        // Every occupied slot holds the key of the row its value names.
        std::vector<gd::Slot64> t(gd::TableAllocationSlots(cap));
        CHECK_CUDA(cudaMemcpy(t.data(), slots64, t.size() * 16, cudaMemcpyDeviceToHost));
        uint64_t occupied = 0, wrong = 0;
        for (const gd::Slot64& w : t) {
          if (w.key == gj::kEmptyKey64) continue;
          ++occupied;
          wrong += w.tag >= n || Key64Of(w.tag) != w.key;
        }
        ok &= Check(occupied == n && wrong == 0, "64-bit table, load " + lf);
      }
      const bool gen = load == 0.5;
      g_rows.push_back({"build u64 generated ids, load " + lf + (ok ? "" : " FAIL"), double(n), bms,
                        double(n) * 40 + double(cap) * 16, gen ? ">= 11 Gkeys/s" : "",
                        gen ? 11e9 : 0, gen ? 1 : 0});
      const bool half_miss = load == 0.8;
      MakeQueries64<<<blocks, 256, 0, s>>>(queries64, n, n, half_miss);
      CHECK_CUDA(cudaGetLastError());
      CHECK_CUDA(cudaMemsetAsync(values64, kPoison, n * 4, s));
      CHECK_CUDA(cudaMemsetAsync(found64, kPoison, n, s));
      const double ms = MedianMs(s, [&] {
        CHECK_CUDA(cudaMemsetAsync(qstats64, 0, sizeof(gd::DeviceQueryStats), s));
        CHECK_CUDA(
            gd::LookupKeys(table, queries64, n, cap, values64, found64, nullptr, qstats64, s));
      });
      CHECK_CUDA(cudaStreamSynchronize(s));
      const std::string what = std::string(half_miss ? "50% miss" : "all hits") + ", load " + lf;
      const uint64_t expect_found = half_miss ? (n + 1) / 2 : n;
      bool lok = Check(Fetch(qstats64).found == expect_found, "64-bit lookup found count, " + what);
      {
        std::vector<uint32_t> got(n);
        std::vector<uint8_t> got_found(n);
        CHECK_CUDA(cudaMemcpy(got.data(), values64, n * 4, cudaMemcpyDeviceToHost));
        CHECK_CUDA(cudaMemcpy(got_found.data(), found64, n, cudaMemcpyDeviceToHost));
        uint64_t wrong = 0;
        for (uint64_t i = 0; i < n; ++i) {
          const bool miss = half_miss && (i & 1);
          const uint32_t expect = miss ? gj::kEmptyKey : uint32_t((i * 2654435761ull) % n);
          wrong += got[i] != expect || got_found[i] != uint8_t(!miss);
        }
        lok &= Check(wrong == 0, "64-bit lookup values and found flags of every row, " + what);
      }
      const double tv = half_miss ? 20e9 : 25e9;
      g_rows.push_back({"lookup u64+found+stats, " + what + (lok ? "" : " FAIL"), double(n), ms,
                        double(n) * 45, half_miss ? ">= 20 Gkeys/s" : ">= 25 Gkeys/s", tv, 1});
    }
    for (void* p : std::initializer_list<void*>{slots64, keys64, queries64, values64, found64,
                                                bstats64, qstats64})
      CHECK_CUDA(cudaFree(p));
  }

  // Grouped aggregation over 2^28 rows: the default path of each group count and,
  // from 4097 groups, the other paths that hold the groups, for comparison.
  if (!g_profile && Runs("aggregate")) {
    const uint64_t n = (uint64_t{1} << 28) >> shift;
    constexpr uint32_t kMaxGroups = 200000;
    uint32_t* gkeys = DeviceAlloc<uint32_t>(n);
    uint32_t* gmask = DeviceAlloc<uint32_t>(n);
    float* gvalues = DeviceAlloc<float>(n);
    uint32_t* counts = DeviceAlloc<uint32_t>(kMaxGroups);
    float* out = DeviceAlloc<float>(kMaxGroups);
    unsigned gblocks = 0;
    Grid(n, gblocks);
    for (uint32_t groups : {16u, 256u, 4097u, 65536u, kMaxGroups}) {
      if (g_agg_groups != 0 && groups != g_agg_groups) continue;
      MakeGroups<<<gblocks, 256, 0, s>>>(gkeys, gmask, gvalues, n, groups);
      CHECK_CUDA(cudaGetLastError());
      // The host reference: MakeGroups' rows recomputed here give every group's
      // exact count and its sum (in double) and sum of magnitudes, unmasked [0]
      // and masked [1].
      std::vector<uint32_t> ref_count[2];
      std::vector<double> ref_sum[2], ref_abs[2];
      for (int m = 0; m < 2; ++m) {
        ref_count[m].assign(groups, 0);
        ref_sum[m].assign(groups, 0.0);
        ref_abs[m].assign(groups, 0.0);
      }
      for (uint64_t i = 0; i < n; ++i) {
        const uint32_t h = KeyOf(uint32_t(i) ^ 0x5bd1e995u);
        const uint32_t k = h % groups;
        const double v = double(float(int(h & 0xffff) - 32768) * 0.25f);
        for (int m = 0; m < (((h >> 20) & 1u) != 0 ? 2 : 1); ++m) {
          ++ref_count[m][k];
          ref_sum[m][k] += v;
          ref_abs[m][k] += std::fabs(v);
        }
      }
      for (bool masked : {false, true}) {
        for (gj::AggregateOp op : {gj::AggregateOp::kCount, gj::AggregateOp::kMean}) {
          const bool is_count = op == gj::AggregateOp::kCount;
          gd::AggregateArgs a;
          a.op = op;
          a.keys = gkeys;
          a.values = is_count ? nullptr : gvalues;
          a.mask = masked ? gmask : nullptr;
          a.rows = n;
          a.groups = groups;
          a.counts = counts;
          a.output = is_count ? nullptr : out;
          const gd::AggregatePath chosen = gd::ChosenAggregatePath(a);
          std::vector<gd::AggregatePath> paths{chosen};
          if (groups > 256) {
            for (gd::AggregatePath p :
                 {gd::AggregatePath::kSharedRange, gd::AggregatePath::kGlobal}) {
              if (p != chosen && gd::AggregatePathFits(a, p)) paths.push_back(p);
            }
          }
          for (gd::AggregatePath path : paths) {
            a.force_path = path;
            // Poisoned before the timed runs: a path that wrote nothing fails.
            CHECK_CUDA(cudaMemsetAsync(counts, 0xa5, groups * 4, s));
            CHECK_CUDA(cudaMemsetAsync(out, 0xa5, groups * 4, s));
            const double ms = MedianMs(s, [&] { CHECK_CUDA(gd::Aggregate(a, s)); });
            CHECK_CUDA(cudaStreamSynchronize(s));
            std::vector<uint32_t> hc(groups);
            std::vector<float> ho(groups);
            CHECK_CUDA(cudaMemcpy(hc.data(), counts, groups * 4, cudaMemcpyDeviceToHost));
            CHECK_CUDA(cudaMemcpy(ho.data(), out, groups * 4, cudaMemcpyDeviceToHost));
            // Counts exactly for every group; means to a float tolerance.
            bool ok = hc == ref_count[masked];
            if (!is_count) {
              for (uint32_t g = 0; g < groups && ok; ++g) {
                const uint32_t c = ref_count[masked][g];
                if (c == 0) {
                  ok = ho[g] != ho[g];
                  continue;
                }
                const double tol = 1e-3 * ref_abs[masked][g] / c + 1e-3;
                ok = std::fabs(double(ho[g]) - ref_sum[masked][g] / c) <= tol;
              }
            }
            const std::string name = std::string("group ") + (is_count ? "count" : "mean") + ", " +
                                     std::to_string(groups) + " groups" +
                                     (masked ? ", masked" : "") + " [" +
                                     std::string(gd::AggregatePathName(path)) + "]";
            Check(ok, name + ": counts or means differ from the host reference");
            const double bytes = double(n) * (4 + (masked ? 4 : 0) + (is_count ? 0 : 4));
            std::string target;
            double tv = 0;
            if (path == chosen && groups <= 256 && is_count) {
              target = ">= 90% copy";
              tv = 0.90;
            }
            if (path == chosen && groups <= 256 && !is_count && masked) {
              target = ">= 75% copy";
              tv = 0.75;
            }
            if (path == chosen && groups == 65536) {
              target = is_count ? ">= 50% copy" : ">= 35% copy";
              tv = is_count ? 0.50 : 0.35;
            }
            g_rows.push_back(
                {name + (ok ? "" : " FAIL"), double(n), ms, bytes, target, tv, tv > 0 ? 2 : 0});
          }
        }
      }
    }
    CHECK_CUDA(cudaFree(gkeys));
    CHECK_CUDA(cudaFree(gmask));
    CHECK_CUDA(cudaFree(gvalues));
    CHECK_CUDA(cudaFree(counts));
    CHECK_CUDA(cudaFree(out));
  }

  // Typed aggregation (issue 22): the exact int64 grouped sum over 2^26 rows, 16
  // and 256 groups, unmasked and masked; every group's sum and count checked
  // exactly against the host. Bytes: 4 (key) + 8 (value) + 4 (mask) per row.
  if (!g_profile && Runs("aggregate")) {
    const uint64_t n = (uint64_t{1} << 26) >> shift;
    uint32_t* gkeys = DeviceAlloc<uint32_t>(n);
    uint32_t* gmask = DeviceAlloc<uint32_t>(n);
    int64_t* gvalues = DeviceAlloc<int64_t>(n);
    uint32_t* counts = DeviceAlloc<uint32_t>(256);
    uint64_t* out = DeviceAlloc<uint64_t>(2 * 256);
    uint8_t* overflow = DeviceAlloc<uint8_t>(256);
    unsigned gblocks = 0;
    Grid(n, gblocks);
    for (uint32_t groups : {16u, 256u}) {
      if (g_agg_groups != 0 && groups != g_agg_groups) continue;
      MakeGroupsI64<<<gblocks, 256, 0, s>>>(gkeys, gmask, gvalues, n, groups);
      CHECK_CUDA(cudaGetLastError());
      std::vector<uint32_t> ref_count[2];
      std::vector<int64_t> ref_sum[2];
      for (int m = 0; m < 2; ++m) {
        ref_count[m].assign(groups, 0);
        ref_sum[m].assign(groups, 0);
      }
      for (uint64_t i = 0; i < n; ++i) {
        const uint32_t h = KeyOf(uint32_t(i) ^ 0x5bd1e995u);
        const uint32_t k = h % groups;
        for (int m = 0; m < (((h >> 20) & 1u) != 0 ? 2 : 1); ++m) {
          ++ref_count[m][k];
          ref_sum[m][k] += Int64ValueOf(i);
        }
      }
      for (bool masked : {false, true}) {
        gd::AggregateArgs a;
        a.op = gj::AggregateOp::kSum;
        a.keys = gkeys;
        a.mask = masked ? gmask : nullptr;
        a.rows = n;
        a.groups = groups;
        a.counts = counts;
        a.value_type = gj::ColumnType::kInt64;
        a.typed_values = gvalues;
        a.typed_output = out;
        a.overflow = overflow;
        // The chosen path with contributing rows (what gpujoind runs), and for
        // comparison without them and on the other paths that hold the groups.
        const gd::AggregatePath chosen = gd::ChosenAggregatePath(a);
        struct Variant {
          gd::AggregatePath path;
          bool counts;
        };
        std::vector<Variant> variants{{chosen, true}, {chosen, false}};
        for (gd::AggregatePath p : {gd::AggregatePath::kSharedRange, gd::AggregatePath::kGlobal}) {
          if (p != chosen && gd::AggregatePathFits(a, p)) variants.push_back({p, true});
        }
        for (const Variant& variant : variants) {
          a.force_path = variant.path;
          a.counts = variant.counts ? counts : nullptr;
          CHECK_CUDA(cudaMemsetAsync(counts, 0xa5, groups * 4, s));
          CHECK_CUDA(cudaMemsetAsync(out, 0xa5, groups * 16, s));
          CHECK_CUDA(cudaMemsetAsync(overflow, 0xa5, groups, s));
          const double ms = MedianMs(s, [&] { CHECK_CUDA(gd::Aggregate(a, s)); });
          CHECK_CUDA(cudaStreamSynchronize(s));
          std::vector<uint32_t> hc(groups);
          std::vector<int64_t> ho(groups);
          std::vector<uint8_t> hf(groups);
          CHECK_CUDA(cudaMemcpy(hc.data(), counts, groups * 4, cudaMemcpyDeviceToHost));
          CHECK_CUDA(cudaMemcpy(ho.data(), out, groups * 8, cudaMemcpyDeviceToHost));
          CHECK_CUDA(cudaMemcpy(hf.data(), overflow, groups, cudaMemcpyDeviceToHost));
          const bool ok = (!variant.counts || hc == ref_count[masked]) && ho == ref_sum[masked] &&
                          hf == std::vector<uint8_t>(groups, 0);
          const std::string name = "group sum int64, " + std::to_string(groups) + " groups" +
                                   (masked ? ", masked" : "") +
                                   (variant.counts ? "" : ", no counts") + " [" +
                                   std::string(gd::AggregatePathName(variant.path)) + "]";
          Check(ok, name + ": sums, counts or overflow flags differ from the host reference");
          const double bytes = double(n) * (4 + 8 + (masked ? 4 : 0));
          // Issue 22: an int64 grouped sum of 256 groups at >= 75 % of copy.
          const double tv =
              groups == 256 && !masked && variant.path == chosen && variant.counts ? 0.75 : 0;
          g_rows.push_back({name + (ok ? "" : " FAIL"), double(n), ms, bytes,
                            tv > 0 ? ">= 75% copy" : "", tv, tv > 0 ? 2 : 0});
        }
      }
    }
    CHECK_CUDA(cudaFree(gkeys));
    CHECK_CUDA(cudaFree(gmask));
    CHECK_CUDA(cudaFree(gvalues));
    CHECK_CUDA(cudaFree(counts));
    CHECK_CUDA(cudaFree(out));
    CHECK_CUDA(cudaFree(overflow));
  }

  // Row hashing (issue 22) on device-resident columns, 2^26 rows: int64 (hash64
  // and hash32) and 16-byte strings (hash64). The target counts bytes read
  // (int64: 8 B; string: 16 B + a 4-byte offset; "GB/s" counts them alone)
  // against the copy's read + written rate.
  // Rows at 64 places (1024 rows each) are checked against the host hash.
  if (!g_profile && Runs("hash")) {
    const uint64_t n = (uint64_t{1} << 26) >> shift;
    auto* ints = DeviceAlloc<int64_t>(n);
    auto* chars = DeviceAlloc<uint64_t>(2 * n);
    auto* offsets = DeviceAlloc<int32_t>(n + 1);
    auto* out = DeviceAlloc<uint64_t>(n);
    auto* validity = DeviceAlloc<uint8_t>((n + 7) / 8);
    auto* views = DeviceAlloc<gd::ColumnView>(1);
    unsigned hblocks = 0;
    Grid(n + 1, hblocks);
    MakeHashInputs<<<hblocks, 256, 0, s>>>(ints, chars, offsets, n);
    CHECK_CUDA(cudaGetLastError());
    struct Case {
      const char* name;
      gj::ColumnType type;
      bool wide;
      double read;  // bytes per row
    };
    const Case cases[] = {{"hash64 int64", gj::ColumnType::kInt64, true, 8},
                          {"hash32 int64", gj::ColumnType::kInt64, false, 8},
                          {"hash64 string (16 bytes)", gj::ColumnType::kBinary, true, 20}};
    for (const Case& c : cases) {
      gd::ColumnView v;
      v.type = c.type;
      if (c.type == gj::ColumnType::kBinary) {
        v.data = reinterpret_cast<const uint8_t*>(chars);
        v.offsets = offsets;
      } else {
        v.data = reinterpret_cast<const uint8_t*>(ints);
      }
      CHECK_CUDA(cudaMemcpyAsync(views, &v, sizeof(v), cudaMemcpyHostToDevice, s));
      CHECK_CUDA(cudaMemsetAsync(out, kPoison, n * 8, s));
      CHECK_CUDA(cudaMemsetAsync(validity, kPoison, (n + 7) / 8, s));
      const double ms = MedianMs(s, [&] {
        if (c.wide) {
          CHECK_CUDA(gd::LaunchHashRows<uint64_t>({&v, 1}, views, n, out, validity, s));
        } else {
          CHECK_CUDA(gd::LaunchHashRows<uint32_t>({&v, 1}, views, n,
                                                  reinterpret_cast<uint32_t*>(out), validity, s));
        }
      });
      CHECK_CUDA(cudaStreamSynchronize(s));
      uint64_t wrong = 0;
      for (uint64_t k = 0; k < 64; ++k) {
        const uint64_t first = (n - 1024) / 63 * k & ~uint64_t{7}, m = 1024;
        std::vector<int64_t> hi(m);
        std::vector<uint8_t> hc(m * 16);
        std::vector<int32_t> ho(m + 1);
        std::vector<uint64_t> got64(m), want64(m);
        std::vector<uint32_t> got32(m), want32(m);
        std::vector<uint8_t> gotv(m / 8), wantv(m / 8);
        CHECK_CUDA(cudaMemcpy(hi.data(), ints + first, m * 8, cudaMemcpyDeviceToHost));
        CHECK_CUDA(cudaMemcpy(hc.data(), chars + 2 * first, m * 16, cudaMemcpyDeviceToHost));
        for (uint64_t r = 0; r <= m; ++r) ho[r] = int32_t(16 * r);
        if (c.wide) {
          CHECK_CUDA(cudaMemcpy(got64.data(), out + first, m * 8, cudaMemcpyDeviceToHost));
        } else {
          CHECK_CUDA(cudaMemcpy(got32.data(), reinterpret_cast<uint32_t*>(out) + first, m * 4,
                                cudaMemcpyDeviceToHost));
        }
        CHECK_CUDA(cudaMemcpy(gotv.data(), validity + first / 8, m / 8, cudaMemcpyDeviceToHost));
        gj::HashColumn h;
        h.type = c.type;
        h.length = m;
        if (c.type == gj::ColumnType::kBinary) {
          h.data = hc;
          h.offsets = ho;
        } else {
          h.data = {reinterpret_cast<const uint8_t*>(hi.data()), m * 8};
        }
        gj::HashNode node;
        node.columns.push_back(h);
        node.bits = c.wide ? gj::HashBits::k64 : gj::HashBits::k32;
        node.out64 = want64;
        node.out32 = want32;
        node.out_validity = wantv;
        gd::HashRowsHost(node);
        wrong += c.wide ? got64 != want64 : got32 != want32;
        wrong += gotv != wantv;
      }
      const bool ok = Check(wrong == 0, std::string(c.name) + " equals the host hash");
      const bool target = c.wide;
      g_rows.push_back({std::string(c.name) + ", bytes read" + (ok ? "" : " FAIL"), double(n), ms,
                        double(n) * c.read, target ? ">= 50% copy" : "", target ? 0.5 : 0,
                        target ? 2 : 0});
    }
    for (void* p : std::initializer_list<void*>{ints, chars, offsets, out, validity, views})
      CHECK_CUDA(cudaFree(p));
  }

  std::printf("\ngpujoin-bench on %s (%d SMs), median of %d reps after warm-up%s\n", prop.name,
              prop.multiProcessorCount, g_reps, quick ? " [--quick sizes]" : "");
  std::printf("%-52s %12s %10s %12s %9s %8s  %-18s %s\n", "operation", "rows", "ms", "Grows/s",
              "GB/s", "of copy", "target", "met");
  int met = 0, missed = 0;
  for (const Row& r : g_rows) {
    const double rate = r.n / (r.ms * 1e-3);
    const double bps = r.bytes / (r.ms * 1e-3);
    const double frac = bps / g_copy_bps;
    std::string verdict;
    if (r.target_kind != 0) {
      bool ok = false;
      if (r.target_kind == 1) ok = rate >= r.target_value;
      if (r.target_kind == 2) ok = frac >= r.target_value;
      if (r.target_kind == 3) ok = rate >= r.target_value * r.reference_rate;
      verdict = ok ? "yes" : "NO";
      (ok ? met : missed)++;
    }
    std::printf("%-52s %12.0f %10.3f %12.2f %9.0f %7.0f%%  %-18s %s\n", r.name.c_str(), r.n, r.ms,
                rate / 1e9, bps / 1e9, frac * 100, r.target.c_str(), verdict.c_str());
  }
  std::printf(
      "\nbuild phases, ms (median of %d; direct: clear | insert | finalise; "
      "tiles: words and their sort by tile | starts, reduction of large tiles, tile sort, "
      "carries, placement | fallback launches, idle unless the build fell back)\n",
      g_reps);
  std::printf("%-44s %9s %9s %9s %9s\n", "build", "phase 1", "phase 2", "phase 3", "total");
  for (const PhaseTimes& p : g_phases)
    std::printf("%-44s %9.3f %9.3f %9.3f %9.3f\n", p.name.c_str(), p.phase[0], p.phase[1],
                p.phase[2], p.total);
  std::printf("targets met: %d, missed: %d; output checks failed: %d\n", met, missed, g_failures);
  CHECK_CUDA(cudaStreamDestroy(s));
  return g_failures == 0 ? 0 : 1;
}
