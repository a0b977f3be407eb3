#include "test_backends.hpp"

#include <algorithm>

#include "gpujoin/engine/detail/slot_hash.hpp"
#include "gpujoin/testing/lookup_contract.hpp"
#include "gpujoin/testing/require_gpu.hpp"

namespace gpujoin::engine::testing {

std::vector<BackendParam> AllBackends() {
  return {
      {"cpu", BackendKind::kCpu, 0},
      {"cpu1", BackendKind::kCpu, 1},
      {"cpu3", BackendKind::kCpu, 3},
      {"cuda", BackendKind::kCuda, 0},
  };
}

std::string BackendName(const ::testing::TestParamInfo<BackendParam>& info) {
  return info.param.name;
}

template <KeyWord K>
std::vector<K> KeysWithHomeOf(uint32_t capacity, uint32_t home, size_t n) {
  std::vector<K> keys;
  const K first = std::is_same_v<K, uint32_t> ? K{1} : K((uint64_t{1} << 32) + 1);
  for (K k = first; keys.size() < n; ++k) {
    if (detail::HomeSlot(k, capacity) == home) keys.push_back(k);
  }
  return keys;
}

template <KeyWord K>
TableSnapshotOf<K> SnapshotAs(const HashIndex& index) {
  auto snap = index.SnapshotAs<K>();
  EXPECT_TRUE(snap.ok()) << snap.status();
  return snap.ok() ? std::move(*snap) : TableSnapshotOf<K>{};
}

template <KeyWord K>
ContractRow ContractLookup(const TableSnapshotOf<K>& table, K key, uint32_t bound) {
  const uint32_t capacity = static_cast<uint32_t>(table.keys.size());
  const ::gpujoin::testing::ContractProbe probe = ::gpujoin::testing::ProbeContract(
      capacity, [&](uint32_t slot) { return table.keys[slot]; }, key, bound);
  ContractRow row;
  row.probes = probe.probes;
  if (probe.slot) {
    row.found = true;
    row.value = table.values[*probe.slot];
  }
  return row;
}

template <KeyWord K>
StoredKeyProbes StoredProbes(const TableSnapshotOf<K>& table) {
  StoredKeyProbes out;
  const uint32_t capacity = static_cast<uint32_t>(table.keys.size());
  for (uint32_t slot = 0; slot < capacity; ++slot) {
    const K key = table.keys[slot];
    if (key == kEmptyKeyOf<K>) continue;
    const uint64_t probes = ((slot - detail::HomeSlot(key, capacity)) & (capacity - 1u)) + 1u;
    ++out.keys;
    out.total += probes;
    out.max = std::max(out.max, probes);
  }
  return out;
}

template std::vector<uint32_t> KeysWithHomeOf<uint32_t>(uint32_t, uint32_t, size_t);
template std::vector<uint64_t> KeysWithHomeOf<uint64_t>(uint32_t, uint32_t, size_t);
template TableSnapshotOf<uint32_t> SnapshotAs<uint32_t>(const HashIndex&);
template TableSnapshotOf<uint64_t> SnapshotAs<uint64_t>(const HashIndex&);
template ContractRow ContractLookup(const TableSnapshotOf<uint32_t>&, uint32_t, uint32_t);
template ContractRow ContractLookup(const TableSnapshotOf<uint64_t>&, uint64_t, uint32_t);
template StoredKeyProbes StoredProbes(const TableSnapshotOf<uint32_t>&);
template StoredKeyProbes StoredProbes(const TableSnapshotOf<uint64_t>&);

void BackendFixture::SetUpBackend(const BackendParam& p) {
  param_ = p;
  if (p.kind == BackendKind::kCuda && !CudaDeviceAvailable()) {
    // A skip in CI; a failure on a GPU host that sets GPUJOIN_REQUIRE_GPU.
    return ::gpujoin::testing::SkipOrFailWithoutGpu(
        "CUDA backend not available in this build or no CUDA device visible (" +
        CreateBackend(BackendKind::kCuda).status().ToString() +
        "); this case runs only on a GPU machine");
  }
  BackendOptions options;
  options.cpu_threads = p.cpu_threads;
  auto backend = CreateBackend(p.kind, options);
  ASSERT_TRUE(backend.ok()) << backend.status();
  backend_ = std::move(*backend);
}

std::unique_ptr<HashIndex> BackendFixture::NewIndexOf(KeyType key_type, uint32_t capacity,
                                                      uint32_t max_probe_count) {
  auto index = backend_->CreateIndex(HashIndexSpec{capacity, max_probe_count, key_type});
  EXPECT_TRUE(index.ok()) << index.status();
  return index.ok() ? std::move(*index) : nullptr;
}

void BackendFixture::RunOk(const CommandGraph& graph) {
  const absl::Status status = backend_->Run(graph);
  ASSERT_TRUE(status.ok()) << status;
}

}  // namespace gpujoin::engine::testing
