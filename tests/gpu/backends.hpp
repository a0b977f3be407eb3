// Shared by the CUDA-vs-CPU tests in tests/gpu.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "gpujoin/engine/backend.hpp"
#include "gpujoin/testing/require_gpu.hpp"
#include "test_backends.hpp"  // tests/engine: Cut

namespace gpujoin::engine {

/// For a fixture's SetUp: creates the CUDA and the CPU backend, or skips the test
/// with "no CUDA device (or no CUDA backend in this build): <why>" when no CUDA
/// device is usable; with GPUJOIN_REQUIRE_GPU set (a GPU host) that is a fatal
/// failure instead (gpujoin/testing/require_gpu.hpp). The caller returns when
/// IsSkipped() or HasFatalFailure().
inline void CreateCudaAndCpuBackends(std::unique_ptr<Backend>& cuda, std::unique_ptr<Backend>& cpu,
                                     const std::string& why,
                                     const BackendOptions& cuda_options = {}) {
  if (!CudaDeviceAvailable()) {
    return ::gpujoin::testing::SkipOrFailWithoutGpu(
        "no CUDA device (or no CUDA backend in this build; " +
        CreateBackend(BackendKind::kCuda).status().ToString() + "): " + why);
  }
  auto c = CreateBackend(BackendKind::kCuda, cuda_options);
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

/// `n` distinct uint64 keys != kEmptyKey64, random-looking, in pairs that
/// differ only in their high 32 bits (keys 2j and 2j + 1 share their low half,
/// so a backend that truncated keys would merge them): key i is H(i) << 32 |
/// L(i / 2) with H a random bijection of uint32 (distinct high halves make the
/// keys distinct) and L random. One key is 0xffffffff (the uint32 reserved
/// value, an ordinary 64-bit key).
inline std::vector<uint64_t> DistinctKeys64(std::mt19937_64& rng, size_t n) {
  const uint32_t start = uint32_t(rng());
  const uint32_t m1 = uint32_t(rng()) | 1u, m2 = uint32_t(rng()) | 1u;
  const uint64_t low_seed = rng() | 1u;
  std::vector<uint64_t> keys(n);
  for (size_t i = 0; i < n; ++i) {
    uint32_t h = (start + uint32_t(i)) * m1;
    h ^= h >> 16;
    h *= m2;
    h ^= h >> 13;
    uint64_t l = (uint64_t(i / 2) + 1) * low_seed;
    l ^= l >> 29;
    const uint32_t low = uint32_t(l) == 0xffffffffu ? 0u : uint32_t(l);  // never all ones
    keys[i] = uint64_t(h) << 32 | low;
  }
  // The key whose high half is 0 (if any, else the first) becomes 0xffffffff.
  size_t zero = 0;
  for (size_t i = 0; i < n; ++i) {
    if (keys[i] >> 32 == 0) zero = i;
  }
  if (n > 0) keys[zero] = 0xffffffffull;
  return keys;
}

/// DistinctKeys of key word K.
template <KeyWord K>
std::vector<K> DistinctKeysOf(std::mt19937_64& rng, size_t n) {
  if constexpr (std::is_same_v<K, uint64_t>) {
    return DistinctKeys64(rng, n);
  } else {
    return DistinctKeys(rng, n);
  }
}

/// Calls f.template operator()<K>() with the key word of `type`.
template <class F>
void ForKeyType(KeyType type, F&& f) {
  if (type == KeyType::kUint64) {
    f.template operator()<uint64_t>();
  } else {
    f.template operator()<uint32_t>();
  }
}

/// "u32" / "u64", for test names.
inline std::string KeyTypeTag(KeyType type) { return type == KeyType::kUint64 ? "u64" : "u32"; }

/// Values outputs are filled with before a run, so that an output a backend
/// never writes shows.
inline constexpr uint32_t kPoison32 = 0xdeadbeefu;
inline constexpr uint8_t kPoison8 = 0xa5;
inline constexpr float kPoisonF = -12345.0f;

/// Base of the CUDA-vs-CPU fixtures: both backends (or a visible skip, which
/// names `skip_why`) and a freshly seeded generator, whose seed failure messages
/// name (Seed()).
class CudaVsCpuTest : public ::testing::Test {
 protected:
  explicit CudaVsCpuTest(std::string skip_why) : skip_why_(std::move(skip_why)) {}

  void SetUp() override {
    CreateCudaAndCpuBackends(cuda_, cpu_, skip_why_, cuda_options_);
    if (IsSkipped() || HasFatalFailure()) return;
    seed_ = std::random_device{}();
    rng_.seed(seed_);
  }

  std::string Seed() const { return "seed " + std::to_string(seed_); }

  /// Distinct keys != kEmptyKey (see DistinctKeys above).
  std::vector<uint32_t> DistinctKeys(size_t n) { return engine::DistinctKeys(rng_, n); }
  /// Distinct keys of key word K (DistinctKeysOf above).
  template <KeyWord K>
  std::vector<K> DistinctKeysOf(size_t n) {
    return engine::DistinctKeysOf<K>(rng_, n);
  }

  /// `v` cut at random boundaries into 1 to max_chunks chunks (some may be
  /// empty), to exercise chunked inputs.
  template <typename T>
  Chunked<T> RandomChunks(const std::vector<T>& v, int max_chunks = 5) {
    const int chunks = 1 + int(rng_() % uint64_t(max_chunks));
    std::vector<size_t> cuts;
    for (int c = 1; c < chunks; ++c) cuts.push_back(v.empty() ? 0 : rng_() % (v.size() + 1));
    std::sort(cuts.begin(), cuts.end());
    return testing::Cut(v, cuts);
  }

  std::unique_ptr<Backend> cuda_, cpu_;
  /// Options of the CUDA backend SetUp creates (a derived fixture sets them first).
  BackendOptions cuda_options_;
  uint64_t seed_ = 0;
  std::mt19937_64 rng_;

 private:
  std::string skip_why_;
};

/// Calls run(t * rounds + r) for the rounds r of `threads` threads at once.
inline void OnThreads(int threads, int rounds, const std::function<void(size_t)>& run) {
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&run, t, rounds] {
      for (int r = 0; r < rounds; ++r) run(size_t(t) * size_t(rounds) + size_t(r));
    });
  }
  for (auto& th : pool) th.join();
}

/// An aggregation value with the contract's edge cases: NaN (1 %), +inf and -inf
/// (1 % each), -0 (3 %), +0 (3 %), small integers in [-range, range] (41 %, or
/// all the rest when `exact`, so that sums are exact) and random floats with 10
/// fraction bits (50 %).
inline float EdgeCaseValue(std::mt19937_64& rng, int range, bool exact) {
  const uint32_t r = uint32_t(rng() % 100);
  if (r == 0) return std::numeric_limits<float>::quiet_NaN();
  if (r == 1) return std::numeric_limits<float>::infinity();
  if (r == 2) return -std::numeric_limits<float>::infinity();
  if (r < 6) return -0.0f;
  if (r < 9) return 0.0f;
  if (exact || r < 50) return float(int(rng() % uint64_t(2 * range + 1)) - range);
  return float(std::ldexp(double(int64_t(rng() % 2000001) - 1000000), -10));
}

}  // namespace gpujoin::engine
