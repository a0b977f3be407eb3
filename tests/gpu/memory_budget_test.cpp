// The CUDA backend's memory figures, the numbers the server's budget reserves,
// against the device: IndexBytes against the drop of cudaMemGetInfo's free
// memory when CreateIndex allocates the table (and its return when the index
// goes); BuildTransientBytes against the high-water mark of the stream-ordered
// pool (cudaMemPoolAttrUsedMemHigh) during builds that take the tile path
// (2^22 and more rows into a 2^25-slot table: plain, explicit values, batch
// with validity; a capped buffer), during a small direct build and during
// builds that store payload columns. The
// estimate must cover what was used and exceed it by no more than the
// per-allocation rounding it adds. And the server's accounting (Operations,
// BuildSession) on the CUDA backend against a real near-full budget. Skips with
// a message without a CUDA device (fails with GPUJOIN_REQUIRE_GPU set).
#include "state/memory_budget.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gpujoin/engine/backend.hpp"
#include "gpujoin/engine/graph.hpp"
#include "wire/column_codec.hpp"
#include "state/index_registry.hpp"
#include "observe/metrics.hpp"
#include "ops/operations.hpp"
#include "gpujoin/testing/require_gpu.hpp"

#if defined(GPUJOIN_HAVE_CUDA)
#include <cuda_runtime.h>

#include "cuda/build_memory.hpp"
#include "cuda/index/build.hpp"
#endif

namespace gpujoin::engine {
namespace {

#if defined(GPUJOIN_HAVE_CUDA)

constexpr uint64_t kMiB = uint64_t{1} << 20;
// cudaMalloc maps device memory in pages of this size.
constexpr uint64_t kDevicePage = 2 * kMiB;

uint64_t FreeDeviceBytes() {
  size_t free_bytes = 0, total_bytes = 0;
  EXPECT_EQ(cudaMemGetInfo(&free_bytes, &total_bytes), cudaSuccess);
  return free_bytes;
}

uint64_t RoundUpToPage(uint64_t bytes) {
  return (bytes + detail::kPoolGranularityBytes - 1) / detail::kPoolGranularityBytes *
         detail::kPoolGranularityBytes;
}

// The device's default stream-ordered pool, where the backend's transient
// buffers come from.
class PoolWatch {
 public:
  PoolWatch() {
    EXPECT_EQ(cudaDeviceGetDefaultMemPool(&pool_, 0), cudaSuccess);
    // Every build's buffers are freed again: the pool's use starts where it was.
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    uint64_t zero = 0;  // cuuint64_t
    // Setting the high-water mark to 0 resets it to the current use.
    EXPECT_EQ(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrUsedMemHigh, &zero), cudaSuccess);
    start_ = Attribute(cudaMemPoolAttrUsedMemCurrent);
  }
  /// Peak bytes in use since construction, above the use at construction.
  uint64_t PeakAboveStart() {
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    return Attribute(cudaMemPoolAttrUsedMemHigh) - start_;
  }

 private:
  uint64_t Attribute(cudaMemPoolAttr attr) {
    uint64_t v = 0;  // cuuint64_t
    EXPECT_EQ(cudaMemPoolGetAttribute(pool_, attr, &v), cudaSuccess);
    return v;
  }
  cudaMemPool_t pool_ = nullptr;
  uint64_t start_ = 0;
};

class CudaMemoryBudgetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!CudaDeviceAvailable()) {
      return ::gpujoin::testing::SkipOrFailWithoutGpu(
          "no CUDA device (or no CUDA backend in this build): the CUDA memory figures are "
          "checked only on a GPU host");
    }
    Start(BackendOptions{});
  }

  void Start(const BackendOptions& options) {
    auto b = CreateBackend(BackendKind::kCuda, options);
    ASSERT_TRUE(b.ok()) << b.status();
    backend_ = std::move(*b);
    ASSERT_EQ(cudaSetDevice(options.cuda_device), cudaSuccess);
  }

  // Distinct random keys (a load of about rows / capacity), with a few repeats.
  static std::vector<uint32_t> Keys(uint64_t rows, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<uint32_t> keys(rows);
    for (auto& k : keys) k = rng() & 0x7fffffffu;
    return keys;
  }

  // Runs `node` on a fresh index of `spec` and returns the pool's peak use above
  // what it held before (the build's transient memory); `exact` receives the
  // bytes the build allocates by the layout (uploads plus the build's buffer,
  // unrounded), `estimate` the backend's BuildTransientBytes.
  template <typename Node>
  uint64_t MeasureBuild(const HashIndexSpec& spec, Node node, uint64_t* estimate) {
    auto index = backend_->CreateIndex(spec);
    EXPECT_TRUE(index.ok()) << index.status();
    if (!index.ok()) return 0;
    node.index = index->get();
    *estimate = backend_->BuildTransientBytes(spec, BuildShapeOf(node));
    CommandGraph graph;
    graph.Add(std::move(node));
    PoolWatch watch;
    const absl::Status s = backend_->Run(graph);
    EXPECT_TRUE(s.ok()) << s;
    return watch.PeakAboveStart();
  }

  std::unique_ptr<Backend> backend_;
};

TEST_F(CudaMemoryBudgetTest, IndexBytesIsWhatCreateIndexTakesFromTheDevice) {
  // Warm up: the first allocation may map driver structures too.
  ASSERT_TRUE(backend_->CreateIndex(HashIndexSpec{1u << 18, 0}).ok());
  for (uint32_t capacity : {1u << 18, 1u << 20, 1u << 22, 1u << 24, 1u << 25}) {
    const HashIndexSpec spec{capacity, 0};
    const uint64_t expected = backend_->IndexBytes(spec);
    EXPECT_EQ(expected, uint64_t{capacity} * 8);  // one 8-byte key:value word per slot
    const uint64_t before = FreeDeviceBytes();
    auto index = backend_->CreateIndex(spec);
    ASSERT_TRUE(index.ok()) << index.status();
    const uint64_t taken = before - FreeDeviceBytes();
    EXPECT_EQ((*index)->memory_bytes(), expected);
    // The driver maps whole pages (these tables are whole pages).
    EXPECT_GE(taken + kDevicePage, expected) << "capacity " << capacity << ": took " << taken;
    EXPECT_LE(taken, expected + kDevicePage) << "capacity " << capacity << ": took " << taken;
    index->reset();
    const uint64_t back = FreeDeviceBytes();
    EXPECT_GE(back + kDevicePage, before) << "capacity " << capacity;
  }
}

TEST_F(CudaMemoryBudgetTest, TileBuildsStayWithinBuildTransientBytes) {
  const HashIndexSpec spec{1u << 25, 0};  // 256 MiB of table: the tile path
  const uint64_t rows = (uint64_t{1} << 22) + 12345;
  ASSERT_EQ(detail::ChooseBuildPath(spec.capacity, rows, detail::BuildPath::kAuto),
            detail::BuildPath::kTiles);
  const uint64_t buffer =
      detail::BuildTransientBytes(spec.capacity, rows, detail::BuildPath::kAuto);
  // Two 4-byte tile numbers and two 8-byte words per row, plus per-tile arrays
  // (under 1 MiB for 2^14 tiles) and CUB's scratch (a few MiB).
  EXPECT_GE(buffer, rows * 24);
  EXPECT_LE(buffer, rows * 24 + 8 * kMiB);
  const std::vector<uint32_t> keys = Keys(rows, 1), values = Keys(rows, 2);
  const std::vector<uint32_t> validity(rows, 1);

  struct Case {
    std::string name;
    uint64_t exact;  // uploads + buffer, unrounded
    uint64_t allocations;
  };
  auto check = [&](const Case& c, uint64_t peak, uint64_t estimate) {
    std::cout << c.name << ": pool peak " << peak << " bytes, estimate " << estimate
              << ", exact layout " << c.exact << "\n";
    EXPECT_GE(estimate, peak) << c.name;
    EXPECT_GE(peak, c.exact) << c.name;
    EXPECT_LE(estimate, c.exact + c.allocations * detail::kPoolGranularityBytes) << c.name;
  };

  {
    BuildIndexNode node;
    node.keys = {std::span<const uint32_t>(keys)};
    uint64_t estimate = 0;
    const uint64_t peak = MeasureBuild(spec, std::move(node), &estimate);
    check({"generated values", rows * 4 + buffer, 2}, peak, estimate);
  }
  {
    BuildIndexNode node;
    node.keys = {std::span<const uint32_t>(keys)};
    node.values = ChunkedU32{std::span<const uint32_t>(values)};
    uint64_t estimate = 0;
    const uint64_t peak = MeasureBuild(spec, std::move(node), &estimate);
    check({"explicit values", rows * 8 + buffer, 3}, peak, estimate);
  }
  {
    BuildBatchIndexNode node;
    const uint64_t half = rows / 2;
    node.chunks.push_back(BatchChunk{std::span<const uint32_t>(keys.data(), half), 0,
                                     std::span<const uint32_t>(validity.data(), half)});
    node.chunks.push_back(
        BatchChunk{std::span<const uint32_t>(keys.data() + half, rows - half), 1000, {}});
    uint64_t estimate = 0;
    const uint64_t peak = MeasureBuild(spec, std::move(node), &estimate);
    check({"batch with validity", rows * 8 + 2 * 8 + 2 * 4 + buffer, 5}, peak, estimate);
  }
}

TEST_F(CudaMemoryBudgetTest, DirectBuildsCountOnlyTheirUploads) {
  const std::vector<uint32_t> keys = Keys(100000, 3);
  const HashIndexSpec spec{1u << 18, 0};
  ASSERT_EQ(detail::BuildTransientBytes(spec.capacity, keys.size(), detail::BuildPath::kAuto), 0u);
  BuildIndexNode node;
  node.keys = {std::span<const uint32_t>(keys)};
  uint64_t estimate = 0;
  const uint64_t peak = MeasureBuild(spec, std::move(node), &estimate);
  EXPECT_EQ(estimate, RoundUpToPage(keys.size() * 4));
  EXPECT_GE(estimate, peak);
  EXPECT_GE(peak, keys.size() * 4);
}

// Builds with payload columns: the uploads, winners and string
// scans stay within BuildTransientBytes (the stored columns are cudaMalloc'd
// index memory, outside the pool), and memory_bytes is the table plus exactly
// what the columns take, at most what PayloadBytes reserves. A direct build and
// a tile build, each with a fixed-width, a nullable bool and a nullable string
// column.
TEST_F(CudaMemoryBudgetTest, PayloadBuildsStayWithinBuildTransientBytes) {
  for (const auto& [capacity, rows] :
       {std::pair{1u << 19, uint64_t{200000}}, std::pair{1u << 25, (uint64_t{1} << 22) + 99}}) {
    SCOPED_TRACE("capacity " + std::to_string(capacity));
    const HashIndexSpec spec{capacity, 0};
    const std::vector<uint32_t> keys = Keys(rows, 6);
    std::mt19937_64 rng(7);
    std::vector<std::byte> i64(rows * 8), bits((rows + 7) / 8), text;
    std::vector<uint8_t> valid((rows + 7) / 8);
    std::vector<uint64_t> offsets{0};
    for (auto& b : i64) b = std::byte(rng());
    for (auto& b : bits) b = std::byte(rng());
    for (auto& b : valid) b = uint8_t(rng());
    for (uint64_t r = 0; r < rows; ++r) {
      for (uint64_t k = rng() % 16; k > 0; --k) text.push_back(std::byte('a' + rng() % 26));
      offsets.push_back(text.size());
    }
    BuildIndexNode node;
    node.keys = {std::span<const uint32_t>(keys)};
    node.payload = {ColumnView{ColumnType::kInt64, rows, i64, {}, {}},
                    ColumnView{ColumnType::kBool, rows, bits, {}, valid},
                    ColumnView{ColumnType::kString, rows, text, offsets, valid}};
    auto index = backend_->CreateIndex(spec);
    ASSERT_TRUE(index.ok()) << index.status();
    node.index = index->get();
    const BuildShape shape = BuildShapeOf(node);
    BuildShape plain = shape;
    plain.payload.clear();
    const uint64_t estimate = backend_->BuildTransientBytes(spec, shape);
    EXPECT_GT(estimate, backend_->BuildTransientBytes(spec, plain) + rows * 8 + text.size());
    CommandGraph graph;
    graph.Add(node);
    PoolWatch watch;
    const absl::Status s = backend_->Run(graph);
    ASSERT_TRUE(s.ok()) << s;
    const uint64_t peak = watch.PeakAboveStart();
    std::cout << "capacity " << capacity << " with payload: pool peak " << peak
              << " bytes, estimate " << estimate << "\n";
    EXPECT_GE(estimate, peak);
    uint64_t payload_bytes = 0;
    for (const PayloadColumnInfo& info : (*index)->payload()) payload_bytes += info.bytes;
    EXPECT_EQ((*index)->memory_bytes(), backend_->IndexBytes(spec) + payload_bytes);
    EXPECT_LE(payload_bytes, backend_->PayloadBytes(spec, shape.payload, shape.rows));
    EXPECT_EQ((*index)->payload()[0].bytes, uint64_t{capacity} * 8);
  }
}

// kKeepAll builds: the group pass's scratch (sort keys and rows,
// CUB's temporary storage) and the payload uploads stay within
// BuildTransientBytes (the groups and the payload per kept row are cudaMalloc'd
// index memory, outside the pool), and memory_bytes is the table, the groups
// (GroupStorageBytes of every row: no overflow here) and the payload, at most
// what PayloadBytes reserves for the build's rows. A direct and a tile build,
// three rows per key.
TEST_F(CudaMemoryBudgetTest, KeepAllBuildsStayWithinBuildTransientBytes) {
  for (const auto& [capacity, rows] :
       {std::pair{1u << 19, uint64_t{300000}}, std::pair{1u << 25, (uint64_t{1} << 22) + 99}}) {
    SCOPED_TRACE("capacity " + std::to_string(capacity));
    const HashIndexSpec spec{capacity, 0, KeyType::kUint32, DuplicatePolicy::kKeepAll};
    std::vector<uint32_t> keys = Keys(rows / 3 + 1, 8);
    while (keys.size() < rows) keys.push_back(keys[keys.size() % (rows / 3 + 1)]);
    std::mt19937_64 rng(9);
    std::vector<std::byte> i64(rows * 8), text;
    std::vector<uint64_t> offsets{0};
    for (auto& b : i64) b = std::byte(rng());
    for (uint64_t r = 0; r < rows; ++r) {
      for (uint64_t k = rng() % 16; k > 0; --k) text.push_back(std::byte('a' + rng() % 26));
      offsets.push_back(text.size());
    }
    BuildIndexNode node;
    node.keys = {std::span<const uint32_t>(keys)};
    node.payload = {ColumnView{ColumnType::kInt64, rows, i64, {}, {}},
                    ColumnView{ColumnType::kString, rows, text, offsets, {}}};
    BuildStatistics stats;
    node.statistics = &stats;
    auto index = backend_->CreateIndex(spec);
    ASSERT_TRUE(index.ok()) << index.status();
    node.index = index->get();
    const BuildShape shape = BuildShapeOf(node);
    HashIndexSpec lowest = spec;
    lowest.duplicates = DuplicatePolicy::kLowestRow;
    const uint64_t estimate = backend_->BuildTransientBytes(spec, shape);
    EXPECT_GE(estimate, backend_->BuildTransientBytes(lowest, shape) + rows * 16);
    CommandGraph graph;
    graph.Add(node);
    PoolWatch watch;
    const absl::Status s = backend_->Run(graph);
    ASSERT_TRUE(s.ok()) << s;
    const uint64_t peak = watch.PeakAboveStart();
    std::cout << "keep_all capacity " << capacity << ": pool peak " << peak << " bytes, estimate "
              << estimate << "\n";
    EXPECT_GE(estimate, peak);
    ASSERT_EQ(stats.overflow_rows, 0u);
    // Keys() may repeat a key, so the largest group is counted, not assumed.
    std::unordered_map<uint32_t, uint64_t> group_rows;
    uint64_t largest = 0;
    for (const uint32_t k : keys) largest = std::max(largest, ++group_rows[k]);
    EXPECT_EQ(stats.max_group_rows, largest);
    uint64_t payload_bytes = 0;
    for (const PayloadColumnInfo& info : (*index)->payload()) payload_bytes += info.bytes;
    EXPECT_EQ((*index)->memory_bytes(),
              backend_->IndexBytes(spec) + GroupStorageBytes(spec, capacity, rows) + payload_bytes);
    EXPECT_LE(payload_bytes, backend_->PayloadBytes(spec, shape.payload, shape.rows));
    EXPECT_EQ((*index)->payload()[0].bytes, rows * 8);
  }
}

TEST_F(CudaMemoryBudgetTest, CappedTransientMemoryIsChargedItsUploadsOnly) {
  BackendOptions options;
  options.cuda_build_transient_max_bytes = 16 * kMiB;  // far below the tile buffer
  Start(options);
  const HashIndexSpec spec{1u << 25, 0};
  const uint64_t rows = uint64_t{1} << 22;
  const std::vector<uint32_t> keys = Keys(rows, 4);
  BuildIndexNode node;
  node.keys = {std::span<const uint32_t>(keys)};
  uint64_t estimate = 0;
  const uint64_t peak = MeasureBuild(spec, std::move(node), &estimate);
  EXPECT_EQ(estimate, RoundUpToPage(rows * 4));  // the keys only
  EXPECT_GE(estimate, peak);
}

// The server's accounting on the CUDA backend with a real near-full budget: room
// for two 256 MiB tables and one tile build's transient memory, less one byte.
// The first build fits; a rebuild of the same size (old table + new table +
// its transient memory) is refused before anything is allocated, naming needed,
// used and budget bytes, and the old version keeps answering; a small rebuild
// (direct path: its uploads only) fits, and afterwards only its table is held.
TEST_F(CudaMemoryBudgetTest, NearFullBudgetRefusesARebuildWhoseTransientMemoryDoesNotFit) {
  const HashIndexSpec spec{1u << 25, 0};
  const uint32_t rows = 1u << 22;
  const std::vector<uint32_t> keys = Keys(rows, 5);
  BuildShape shape;
  shape.rows = rows;
  const uint64_t table = backend_->IndexBytes(spec);
  const uint64_t transient = backend_->BuildTransientBytes(spec, shape);
  ASSERT_GT(transient, uint64_t{rows} * 20);  // the tile path's buffer and the keys
  // The staged keys (16 MiB and the message) count too; the second table leaves
  // room for them in the first build.
  const uint64_t limit = 2 * table + transient - 1;

  server::IndexRegistry registry;
  server::MemoryBudget budget(limit);
  server::Metrics metrics;
  server::ServiceState state;
  state.backend = backend_.get();
  state.backend_info = backend_->Info();
  state.registry = &registry;
  state.budget = &budget;
  state.metrics = &metrics;
  server::Operations ops(std::move(state));
  uint64_t staged = 0;  // the last build's staged input, charged while it is held
  auto build = [&](const std::vector<uint32_t>& chunk, bool replace) {
    server::BuildSession session(&ops);
    v1::BuildIndexRequest spec_msg;
    spec_msg.mutable_spec()->set_name("k");
    spec_msg.mutable_spec()->set_capacity(spec.capacity);
    spec_msg.mutable_spec()->set_replace(replace);
    absl::Status s = session.Add(std::move(spec_msg));
    v1::BuildIndexRequest chunk_msg;
    *chunk_msg.mutable_chunk()->mutable_keys()->mutable_packed() =
        server::PackColumn<uint32_t>(chunk);
    if (s.ok()) s = session.Add(std::move(chunk_msg));
    staged = session.staged_bytes();
    std::atomic<bool> cancelled{false};
    return s.ok() ? session.Finish(cancelled).status() : s;
  };
  auto lookup = [&](uint32_t key) {
    v1::LookupRequest req;
    req.set_index("k");
    *req.mutable_keys()->mutable_packed() =
        server::PackColumn<uint32_t>(std::vector<uint32_t>{key});
    v1::LookupResponse resp;
    EXPECT_TRUE(ops.Lookup(req, &resp).ok());
    const auto values = server::UnpackColumn<uint32_t>(resp.values());
    return std::make_pair(values.empty() ? 0xdeadbeefu : values[0], resp.index_version());
  };

  ASSERT_TRUE(build(keys, false).ok());
  EXPECT_EQ(budget.used_bytes(), table);
  const absl::Status refused = build(keys, true);
  ASSERT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_THAT(
      std::string(refused.message()),
      ::testing::HasSubstr(absl::StrCat(" needs ", table + transient + staged, " bytes but ", table,
                                        " of the ", limit, " byte budget are in use")));
  EXPECT_GE(staged, uint64_t{rows} * 4);
  // Row 0 always wins its key: value first_value + 0 = 0.
  EXPECT_EQ(lookup(keys[0]), std::make_pair(0u, uint64_t{1}));
  EXPECT_EQ(budget.used_bytes(), table);

  const std::vector<uint32_t> few(keys.begin(), keys.begin() + 100000);
  ASSERT_TRUE(build(few, true).ok());
  EXPECT_EQ(lookup(few[0]), std::make_pair(0u, uint64_t{2}));
  EXPECT_EQ(budget.used_bytes(), table);
}

#else

TEST(CudaMemoryBudgetTest, NeedsTheCudaBackend) {
  ::gpujoin::testing::SkipOrFailWithoutGpu(
      "this build has no CUDA backend: the CUDA memory figures are checked only on a GPU host");
}

#endif

}  // namespace
}  // namespace gpujoin::engine
