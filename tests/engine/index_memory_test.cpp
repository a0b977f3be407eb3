// Backend::IndexBytes and BuildTransientBytes, the numbers the server's memory
// budget reserves: on every backend IndexBytes equals what the created index
// reports holding; on the CPU backend that is also what the host allocator
// hands out for it (mallinfo2 before and after), and it reports no transient
// memory for builds (they insert straight from the caller's chunks). BuildShapeOf reads a node the
// way the backends do. (The CUDA figures are checked against the device in
// tests/gpu/memory_budget_test.)
#include <gtest/gtest.h>
#include <malloc.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "gpujoin/engine/backend.hpp"
#include "gpujoin/engine/graph.hpp"
#include "test_backends.hpp"

namespace gpujoin::engine {
namespace {

using testing::AllBackends;
using testing::BackendName;
using testing::BackendTest;

class IndexMemoryTest : public BackendTest {};

TEST_P(IndexMemoryTest, IndexBytesIsWhatTheIndexHolds) {
  for (uint32_t capacity : {1u, 2u, 4u, 8u, 1024u, 1u << 16, 1u << 20}) {
    for (uint32_t max_probes : {0u, 1u}) {
      const HashIndexSpec spec{capacity, max_probes};
      auto index = backend_->CreateIndex(spec);
      ASSERT_TRUE(index.ok()) << index.status();
      EXPECT_EQ(backend_->IndexBytes(spec), (*index)->memory_bytes()) << "capacity " << capacity;
      // One 8-byte key:value word per slot on both backends (CUDA pads tables
      // below 4 slots to one 32-byte sector).
      EXPECT_EQ(backend_->IndexBytes(spec), uint64_t{std::max(capacity, IsCpu() ? 1u : 4u)} * 8)
          << "capacity " << capacity;
    }
  }
}

TEST_P(IndexMemoryTest, EmptyBuildNeedsNoTransientMemory) {
  const HashIndexSpec spec{1u << 10, 0};
  EXPECT_EQ(backend_->BuildTransientBytes(spec, BuildShape{}), 0u);
  BuildShape batch;
  batch.batch = true;
  EXPECT_EQ(backend_->BuildTransientBytes(spec, batch), 0u);
}

INSTANTIATE_TEST_SUITE_P(Backends, IndexMemoryTest, ::testing::ValuesIn(AllBackends()),
                         BackendName);

// Bytes the main arena and mmap hand out now (the test's thread only allocates
// from the main arena; large tables are mmapped).
uint64_t HostAllocatedBytes() {
  const struct mallinfo2 m = mallinfo2();
  return uint64_t{m.uordblks} + uint64_t{m.hblkhd};
}

TEST(CpuIndexMemory, IndexBytesIsWhatTheHostAllocates) {
  auto backend = CreateBackend(BackendKind::kCpu, BackendOptions{1});
  ASSERT_TRUE(backend.ok()) << backend.status();
  for (uint32_t capacity : {1u << 12, 1u << 16, 1u << 20, 1u << 22}) {
    const HashIndexSpec spec{capacity, 0};
    const uint64_t expected = (*backend)->IndexBytes(spec);
    const uint64_t before = HostAllocatedBytes();
    auto index = (*backend)->CreateIndex(spec);
    ASSERT_TRUE(index.ok()) << index.status();
    const uint64_t delta = HostAllocatedBytes() - before;
    // The table, plus the index object, allocator headers and page rounding.
    EXPECT_GE(delta, expected) << "capacity " << capacity;
    EXPECT_LE(delta, expected + 8192) << "capacity " << capacity;
    index->reset();
    EXPECT_LE(HostAllocatedBytes(), before + 4096) << "capacity " << capacity;
  }
}

TEST(CpuIndexMemory, BuildsNeedNoTransientMemory) {
  auto backend = CreateBackend(BackendKind::kCpu, BackendOptions{1});
  ASSERT_TRUE(backend.ok()) << backend.status();
  const HashIndexSpec spec{1u << 16, 0};
  BuildShape plain;
  plain.rows = 50000;
  EXPECT_EQ((*backend)->BuildTransientBytes(spec, plain), 0u);
  plain.explicit_values = true;
  EXPECT_EQ((*backend)->BuildTransientBytes(spec, plain), 0u);
  BuildShape batch;
  batch.rows = 50000;
  batch.batch = true;
  batch.batch_chunks = 3;
  batch.batch_validity = true;
  EXPECT_EQ((*backend)->BuildTransientBytes(spec, batch), 0u);
}

TEST(BuildShapeOfTest, PlainNodeCountsEveryChunk) {
  std::vector<uint32_t> a(5), b(0), c(7);
  BuildIndexNode node;
  node.keys = {std::span<const uint32_t>(a), std::span<const uint32_t>(b),
               std::span<const uint32_t>(c)};
  BuildShape shape = BuildShapeOf(node);
  EXPECT_EQ(shape.rows, 12u);
  EXPECT_FALSE(shape.explicit_values);
  EXPECT_FALSE(shape.batch);
  node.values = ChunkedU32{std::span<const uint32_t>(c), std::span<const uint32_t>(a)};
  shape = BuildShapeOf(node);
  EXPECT_TRUE(shape.explicit_values);
  EXPECT_EQ(shape.rows, 12u);
}

TEST(BuildShapeOfTest, BatchNodeSkipsEmptyChunksAndTheirMasks) {
  std::vector<uint32_t> a(5), empty, c(7), mask(7, 1);
  BuildBatchIndexNode node;
  node.chunks.push_back(BatchChunk{a, 100, {}});
  node.chunks.push_back(BatchChunk{empty, 0, {}});
  node.chunks.push_back(BatchChunk{c, 200, {}});
  BuildShape shape = BuildShapeOf(node);
  EXPECT_TRUE(shape.batch);
  EXPECT_EQ(shape.rows, 12u);
  EXPECT_EQ(shape.batch_chunks, 2u);
  EXPECT_FALSE(shape.batch_validity);
  node.chunks[2].validity = mask;
  EXPECT_TRUE(BuildShapeOf(node).batch_validity);
}

}  // namespace
}  // namespace gpujoin::engine
