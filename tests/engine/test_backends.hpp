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

/// The first `n` keys (from 1 upward) whose home slot in a table of `capacity` is
/// `home` (detail::HomeSlot): keys that collide, so they need many probes.
std::vector<uint32_t> KeysWithHome(uint32_t capacity, uint32_t home, size_t n);

/// A copy of `index`'s table, or a test failure (and an empty snapshot).
TableSnapshot SnapshotOf(const HashIndex& index);

/// What the contract (docs/engine.md, "Lookup") answers for one query row against
/// a table, computed on the host from a snapshot of it.
struct ContractRow {
  bool found = false;
  uint32_t value = kEmptyKey;
  uint32_t probes = 0;  ///< slots examined
};

/// Probes `table` for `key` the way the contract says, examining at most `bound`
/// slots: stops at its key (found), at an empty slot or a resident that comes
/// after it in Robin Hood order (missing; that slot counts), else missing after
/// `bound` slots; kEmptyKey examines none.
ContractRow ContractLookup(const TableSnapshot& table, uint32_t key, uint32_t bound);

/// Over the keys stored in a table: how many, the sum and the largest of their
/// displacement + 1 (displacement = slots from the key's home to its slot). Each
/// key adds exactly that to a build's total probes (docs/engine.md, "Build"), so
/// for a build of distinct keys without overflow `total` is its total_probes, and
/// `max` is its max_probes whenever nothing overflowed.
struct StoredKeyProbes {
  uint64_t keys = 0;
  uint64_t total = 0;
  uint64_t max = 0;
};
StoredKeyProbes StoredProbes(const TableSnapshot& table);

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
