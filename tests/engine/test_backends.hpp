// Shared helpers of the engine tests: the list of backends every parameterised
// suite runs on, the key words typed suites run on, and short wrappers that
// build one-node graphs.
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

/// The backend and helpers of a fixture, independent of how gtest parameterises
/// it: BackendTest (TEST_P over AllBackends, uint32 keys) and KeyedBackendTest
/// (typed over key word x backend) both derive from it.
class BackendFixture {
 protected:
  /// Creates the backend of `param`, or skips (fails where GPUJOIN_REQUIRE_GPU
  /// is set) with a visible message when it is CUDA and no device is usable.
  void SetUpBackend(const BackendParam& param);

  /// True on the CPU reference backend, whose table layout and per-row probe
  /// counts follow the sequential insertion order exactly.
  bool IsCpu() const { return param_.kind == BackendKind::kCpu; }
  const BackendParam& Param() const { return param_; }

  /// Creates an index of `key_type` or fails the test.
  std::unique_ptr<HashIndex> NewIndexOf(KeyType key_type, uint32_t capacity,
                                        uint32_t max_probe_count = 0);

  /// Builds `index` from chunked keys (and optional chunked values).
  template <KeyWord K>
  BuildStatistics Build(HashIndex& index, const Chunked<K>& keys,
                        std::optional<ChunkedU32> values = std::nullopt, uint32_t first_value = 0) {
    BuildStatistics stats;
    CommandGraph graph;
    graph.Add(BuildIndexNodeT<K>{&index, keys, std::move(values), first_value, &stats});
    RunOk(graph);
    return stats;
  }

  struct LookupOut {
    std::vector<uint32_t> values;
    std::vector<uint8_t> found;
    std::vector<uint32_t> probes;
    QueryStatistics statistics;
  };
  /// Looks up chunked keys, requesting every optional output (poisoned first).
  template <KeyWord K>
  LookupOut Lookup(const HashIndex& index, const Chunked<K>& keys, uint32_t max_probe_count = 0) {
    LookupOut out;
    const size_t rows = TotalRows(keys);
    out.values.assign(rows, 12345);
    out.found.assign(rows, 7);
    out.probes.assign(rows, 999);
    CommandGraph graph;
    LookupNodeT<K> node;
    node.index = &index;
    node.keys = keys;
    node.values = out.values;
    node.found = out.found;
    node.probes = out.probes;
    node.statistics = &out.statistics;
    node.max_probe_count = max_probe_count;
    graph.Add(node);
    RunOk(graph);
    return out;
  }

  /// Runs a graph and expects OK.
  void RunOk(const CommandGraph& graph);

  std::unique_ptr<Backend> backend_;

 private:
  BackendParam param_;
};

/// Base fixture of the uint32 suites: TEST_P over AllBackends().
class BackendTest : public ::testing::TestWithParam<BackendParam>, public BackendFixture {
 protected:
  void SetUp() override { SetUpBackend(GetParam()); }

  /// Creates a uint32 index or fails the test.
  std::unique_ptr<HashIndex> NewIndex(uint32_t capacity, uint32_t max_probe_count = 0) {
    return NewIndexOf(KeyType::kUint32, capacity, max_probe_count);
  }
};

/// One configuration of a typed suite: key word K on AllBackends()[kBackend].
template <KeyWord K_, int kBackend>
struct KeyedBackend {
  using K = K_;
  static constexpr int backend = kBackend;
};

/// Every key word on every backend.
using KeyedBackends = ::testing::Types<KeyedBackend<uint32_t, 0>, KeyedBackend<uint32_t, 1>,
                                       KeyedBackend<uint32_t, 2>, KeyedBackend<uint32_t, 3>,
                                       KeyedBackend<uint64_t, 0>, KeyedBackend<uint64_t, 1>,
                                       KeyedBackend<uint64_t, 2>, KeyedBackend<uint64_t, 3>>;

/// Typed-test names: u32_cpu, ..., u64_cuda.
struct KeyedBackendNames {
  template <class Config>
  static std::string GetName(int) {
    return std::string(KeyTypeOf<typename Config::K>() == KeyType::kUint64 ? "u64_" : "u32_") +
           AllBackends()[Config::backend].name;
  }
};

/// Base fixture of the typed suites (TYPED_TEST_SUITE(..., KeyedBackends,
/// KeyedBackendNames)): the key word is K = typename TestFixture::K.
template <class Config>
class KeyedBackendTest : public ::testing::Test, public BackendFixture {
 public:
  using K = typename Config::K;
  /// The reserved key of K.
  static constexpr K kEmpty = kEmptyKeyOf<K>;

  /// Key `x` of a small test domain as a K: x itself for uint32; for uint64
  /// x with 0xa5a5a5a5 in the high 32 bits, so every key lies above 2^32 and a
  /// backend that truncates keys to 32 bits fails. x must not be kEmptyKey.
  static K Key(uint32_t x) {
    if constexpr (std::is_same_v<K, uint32_t>) {
      return x;
    } else {
      return (uint64_t{0xa5a5a5a5u} << 32) | x;
    }
  }
  static std::vector<K> Keys(std::initializer_list<uint32_t> xs) {
    std::vector<K> out;
    for (uint32_t x : xs) out.push_back(Key(x));
    return out;
  }

 protected:
  void SetUp() override { SetUpBackend(AllBackends()[Config::backend]); }

  /// Creates an index of key word K or fails the test.
  std::unique_ptr<HashIndex> NewIndex(uint32_t capacity, uint32_t max_probe_count = 0) {
    return NewIndexOf(KeyTypeOf<K>(), capacity, max_probe_count);
  }
};

/// The first `n` keys whose home slot in a table of `capacity` is `home`
/// (detail::HomeSlot): keys that collide, so they need many probes. Ascending;
/// uint32 keys from 1 upward, uint64 keys from 2^32 + 1 upward.
template <KeyWord K>
std::vector<K> KeysWithHomeOf(uint32_t capacity, uint32_t home, size_t n);
inline std::vector<uint32_t> KeysWithHome(uint32_t capacity, uint32_t home, size_t n) {
  return KeysWithHomeOf<uint32_t>(capacity, home, n);
}

/// A copy of `index`'s table of key word K, or a test failure (and an empty snapshot).
template <KeyWord K>
TableSnapshotOf<K> SnapshotAs(const HashIndex& index);
inline TableSnapshot SnapshotOf(const HashIndex& index) { return SnapshotAs<uint32_t>(index); }

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
/// `bound` slots; the reserved key examines none.
template <KeyWord K>
ContractRow ContractLookup(const TableSnapshotOf<K>& table, K key, uint32_t bound);

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
template <KeyWord K>
StoredKeyProbes StoredProbes(const TableSnapshotOf<K>& table);

/// One chunk view over a vector.
template <class T>
Chunked<T> One(const std::vector<T>& v) {
  return Chunked<T>{std::span<const T>(v)};
}

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
