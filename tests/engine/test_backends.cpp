#include "test_backends.hpp"

#include <algorithm>

#include "gpujoin/engine/detail/slot_hash.hpp"
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

std::vector<uint32_t> KeysWithHome(uint32_t capacity, uint32_t home, size_t n) {
  std::vector<uint32_t> keys;
  for (uint32_t k = 1; keys.size() < n; ++k) {
    if (detail::HomeSlot(k, capacity) == home) keys.push_back(k);
  }
  return keys;
}

TableSnapshot SnapshotOf(const HashIndex& index) {
  auto snap = index.Snapshot();
  EXPECT_TRUE(snap.ok()) << snap.status();
  return snap.ok() ? std::move(*snap) : TableSnapshot{};
}

ContractRow ContractLookup(const TableSnapshot& table, uint32_t key, uint32_t bound) {
  ContractRow row;
  if (key == kEmptyKey) return row;
  const uint32_t capacity = static_cast<uint32_t>(table.keys.size());
  const uint32_t home = detail::HomeSlot(key, capacity);
  for (uint32_t i = 0; i < bound; ++i) {
    const uint32_t slot = (home + i) & (capacity - 1u);
    const uint32_t resident = table.keys[slot];
    row.probes = i + 1;
    if (resident == key) {
      row.found = true;
      row.value = table.values[slot];
      return row;
    }
    if (resident == kEmptyKey || !detail::ResidentComesFirst(resident, key, i, slot, capacity)) {
      return row;
    }
  }
  row.probes = bound;
  return row;
}

StoredKeyProbes StoredProbes(const TableSnapshot& table) {
  StoredKeyProbes out;
  const uint32_t capacity = static_cast<uint32_t>(table.keys.size());
  for (uint32_t slot = 0; slot < capacity; ++slot) {
    const uint32_t key = table.keys[slot];
    if (key == kEmptyKey) continue;
    const uint64_t probes = ((slot - detail::HomeSlot(key, capacity)) & (capacity - 1u)) + 1u;
    ++out.keys;
    out.total += probes;
    out.max = std::max(out.max, probes);
  }
  return out;
}

void BackendTest::SetUp() {
  const BackendParam& p = GetParam();
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

std::unique_ptr<HashIndex> BackendTest::NewIndex(uint32_t capacity, uint32_t max_probe_count) {
  auto index = backend_->CreateIndex(HashIndexSpec{capacity, max_probe_count});
  EXPECT_TRUE(index.ok()) << index.status();
  return index.ok() ? std::move(*index) : nullptr;
}

BuildStatistics BackendTest::Build(HashIndex& index, const ChunkedU32& keys,
                                   std::optional<ChunkedU32> values, uint32_t first_value) {
  BuildStatistics stats;
  CommandGraph graph;
  graph.Add(BuildIndexNode{&index, keys, std::move(values), first_value, &stats});
  RunOk(graph);
  return stats;
}

BackendTest::LookupOut BackendTest::Lookup(const HashIndex& index, const ChunkedU32& keys,
                                           uint32_t max_probe_count) {
  LookupOut out;
  const size_t rows = TotalRows(keys);
  out.values.assign(rows, 12345);
  out.found.assign(rows, 7);
  out.probes.assign(rows, 999);
  CommandGraph graph;
  LookupNode node;
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

void BackendTest::RunOk(const CommandGraph& graph) {
  const absl::Status status = backend_->Run(graph);
  ASSERT_TRUE(status.ok()) << status;
}

}  // namespace gpujoin::engine::testing
