// Shared helpers of the engine tests: the list of backends every parameterised
// suite runs on, and short wrappers that build one-node graphs.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "gpujoin/engine/backend.hpp"
#include "gpujoin/engine/graph.hpp"

namespace gpujoin::engine::testing {

/// One backend configuration a suite runs on.
struct BackendParam {
  std::string name;  ///< test-name suffix: cpu, cpu1, cpu3, cuda
  BackendKind kind = BackendKind::kCpu;
  uint32_t cpu_threads = 0;
};

/// Prints the configuration's name in gtest messages.
inline void PrintTo(const BackendParam& p, std::ostream* os) { *os << p.name; }

/// Every configuration; CUDA is always listed and skipped at run time when absent.
std::vector<BackendParam> AllBackends();

/// gtest name generator for BackendParam.
std::string BackendName(const ::testing::TestParamInfo<BackendParam>& info);

/// Base fixture: creates the backend in SetUp or skips with a visible message.
class BackendTest : public ::testing::TestWithParam<BackendParam> {
 protected:
  void SetUp() override;

  /// True on the CPU reference backend, whose table layout and per-row probe
  /// counts follow the sequential insertion order exactly.
  bool IsCpu() const { return GetParam().kind == BackendKind::kCpu; }

  /// Creates an index or fails the test.
  std::unique_ptr<HashIndex> NewIndex(uint32_t capacity, uint32_t max_probe_count = 0);

  /// Builds `index` from chunked keys (and optional chunked values).
  BuildStatistics Build(HashIndex& index, const ChunkedU32& keys,
                        std::optional<ChunkedU32> values = std::nullopt, uint32_t first_value = 0);

  struct LookupOut {
    std::vector<uint32_t> values;
    std::vector<uint8_t> found;
    std::vector<uint32_t> probes;
    QueryStatistics statistics;
  };
  /// Looks up chunked keys, requesting every optional output.
  LookupOut Lookup(const HashIndex& index, const ChunkedU32& keys, uint32_t max_probe_count = 0);

  /// Runs a graph and expects OK.
  void RunOk(const CommandGraph& graph);

  std::unique_ptr<Backend> backend_;
};

/// One chunk view over a vector.
inline ChunkedU32 One(const std::vector<uint32_t>& v) { return ChunkedU32{std::span(v)}; }

/// Splits `v` into chunks at the given cut positions (ascending, may repeat to
/// produce empty chunks).
template <typename T>
Chunked<T> Cut(const std::vector<T>& v, const std::vector<size_t>& cuts) {
  Chunked<T> out;
  size_t begin = 0;
  for (size_t c : cuts) {
    out.push_back(std::span<const T>(v.data() + begin, c - begin));
    begin = c;
  }
  out.push_back(std::span<const T>(v.data() + begin, v.size() - begin));
  return out;
}

}  // namespace gpujoin::engine::testing
