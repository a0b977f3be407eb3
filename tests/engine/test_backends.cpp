#include "test_backends.hpp"

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

void BackendTest::SetUp() {
  const BackendParam& p = GetParam();
  if (p.kind == BackendKind::kCuda && !CudaDeviceAvailable()) {
    GTEST_SKIP() << "CUDA backend not available in this build or no CUDA device visible; "
                    "this case runs only on a GPU machine";
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
