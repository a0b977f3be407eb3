// Backend host buffers (Backend::AllocateHostBuffer) and the block cache behind
// them (engine/src/common/host_pool): sizes, alignment, recycling, the idle bound,
// the page-locked allocator with its fallback, and the range check the CUDA
// backend uses to decide whether a column can be copied to the device directly.
#include "common/host_pool.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <set>
#include <vector>

#include "gpujoin/engine/backend.hpp"

namespace gpujoin::engine {
namespace {

using detail::HostPool;

TEST(HostBufferTest, DefaultBackendBuffersAreAlignedAndRecycled) {
  auto backend = CreateBackend(BackendKind::kCpu);
  ASSERT_TRUE(backend.ok());
  auto empty = (*backend)->AllocateHostBuffer(0);
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
  EXPECT_EQ(empty->data(), nullptr);
  auto a = (*backend)->AllocateHostBuffer(1000);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->size(), 1000u);
  EXPECT_FALSE(a->pinned());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a->data()) % 64, 0u);
  std::memset(a->data(), 7, a->size());
  const uint8_t* first = a->data();
  a->Reset();
  EXPECT_TRUE(a->empty());
  // The freed block is of the same size class (4 KiB), so it comes back.
  auto b = (*backend)->AllocateHostBuffer(3000);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->data(), first);
  HostBuffer moved = std::move(*b);
  EXPECT_EQ(moved.size(), 3000u);
  EXPECT_EQ(moved.data(), first);
  EXPECT_TRUE(b->empty());
  EXPECT_EQ(moved.Span<uint32_t>(8, 10).data(), reinterpret_cast<uint32_t*>(moved.data() + 8));
}

// A stand-in for cudaHostAlloc: ordinary memory, recorded, refusing on demand.
struct FakePinned {
  static inline std::set<void*> live;
  static inline bool refuse = false;
  static void* Allocate(size_t bytes) {
    if (refuse) return nullptr;
    void* p = detail::AllocateAlignedHost(bytes);
    live.insert(p);
    return p;
  }
  static void Free(void* p) {
    live.erase(p);
    detail::FreeAlignedHost(p);
  }
};

TEST(HostPoolTest, PinnedRangesFallbackAndIdleBound) {
  FakePinned::live.clear();
  FakePinned::refuse = false;
  {
    // Keeps at most 16 KiB of idle blocks.
    auto pool = HostPool::Pinned(&FakePinned::Allocate, &FakePinned::Free, 16 << 10);
    auto a = pool->Get(10000);  // a 16 KiB block
    ASSERT_TRUE(a.ok());
    EXPECT_TRUE(a->pinned());
    EXPECT_EQ(FakePinned::live.size(), 1u);
    const uint8_t* p = a->data();
    EXPECT_TRUE(pool->ContainsPinned(p, 10000));
    EXPECT_TRUE(pool->ContainsPinned(p + 4000, 4000));
    EXPECT_TRUE(pool->ContainsPinned(p, 16 << 10));         // the whole block
    EXPECT_FALSE(pool->ContainsPinned(p, (16 << 10) + 1));  // past its end
    EXPECT_FALSE(pool->ContainsPinned(p - 1, 8));           // before its start
    EXPECT_FALSE(pool->ContainsPinned(p, 0));               // empty ranges never
    std::vector<uint8_t> elsewhere(64);
    EXPECT_FALSE(pool->ContainsPinned(elsewhere.data(), elsewhere.size()));

    // The driver refuses: ordinary memory, not pinned, not inside.
    FakePinned::refuse = true;
    auto b = pool->Get(100);
    ASSERT_TRUE(b.ok());
    EXPECT_FALSE(b->pinned());
    EXPECT_FALSE(pool->ContainsPinned(b->data(), 100));
    FakePinned::refuse = false;

    // Idle blocks are kept up to the bound, and are still pinned ranges.
    a->Reset();
    EXPECT_EQ(pool->idle_bytes(), size_t{16} << 10);
    EXPECT_EQ(FakePinned::live.size(), 1u);
    auto again = pool->Get(16 << 10);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(again->data(), p);
    EXPECT_TRUE(again->pinned());
    EXPECT_EQ(pool->idle_bytes(), 0u);
    // Beyond the bound a returned block is freed (and no longer a pinned range).
    auto big = pool->Get(64 << 10);
    ASSERT_TRUE(big.ok());
    const uint8_t* big_data = big->data();
    EXPECT_EQ(FakePinned::live.size(), 2u);
    big->Reset();
    EXPECT_EQ(FakePinned::live.size(), 1u);
    EXPECT_FALSE(pool->ContainsPinned(big_data, 1));
    b->Reset();
    again->Reset();
  }
  // The pool frees its idle blocks when the last reference goes.
  EXPECT_TRUE(FakePinned::live.empty());
}

TEST(HostPoolTest, BuffersOutliveTheirPoolHandle) {
  FakePinned::live.clear();
  FakePinned::refuse = false;
  HostBuffer kept;
  {
    auto pool = HostPool::Pinned(&FakePinned::Allocate, &FakePinned::Free, 1 << 20);
    auto a = pool->Get(5000);
    ASSERT_TRUE(a.ok());
    kept = std::move(*a);
  }
  // The buffer holds the pool: still usable, given back (and freed) on reset.
  std::memset(kept.data(), 1, kept.size());
  EXPECT_EQ(FakePinned::live.size(), 1u);
  kept.Reset();
  EXPECT_TRUE(FakePinned::live.empty());
}

}  // namespace
}  // namespace gpujoin::engine
