#include "state/index_registry.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "test_util.hpp"

namespace gpujoin::server {
namespace {

using testing::CpuBackend;
using testing::MakeVersion;

TEST(IndexRegistry, InstallAssignsIncreasingVersions) {
  auto backend = CpuBackend();
  IndexRegistry reg;
  auto first = reg.Install(MakeVersion(*backend, "a", 8), false);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(*first, nullptr);
  EXPECT_EQ(reg.Get("a")->version, 1u);
  auto second = reg.Install(MakeVersion(*backend, "a", 16), true);
  ASSERT_TRUE(second.ok());
  ASSERT_NE(*second, nullptr);
  EXPECT_EQ((*second)->version, 1u);  // the replaced version is handed back
  EXPECT_EQ(reg.Get("a")->version, 2u);
  EXPECT_EQ(reg.Get("a")->index->spec().capacity, 16u);
}

TEST(IndexRegistry, CreateOnlyConflictChangesNothing) {
  auto backend = CpuBackend();
  IndexRegistry reg;
  ASSERT_TRUE(reg.Install(MakeVersion(*backend, "a", 8), false).ok());
  auto again = reg.Install(MakeVersion(*backend, "a", 16), false);
  EXPECT_EQ(again.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(reg.Get("a")->version, 1u);
  EXPECT_EQ(reg.Get("a")->index->spec().capacity, 8u);
}

TEST(IndexRegistry, VersionsKeepIncreasingAcrossDrops) {
  auto backend = CpuBackend();
  IndexRegistry reg;
  ASSERT_TRUE(reg.Install(MakeVersion(*backend, "a", 8), false).ok());
  auto removed = reg.Remove("a");
  ASSERT_TRUE(removed.ok());
  EXPECT_EQ((*removed)->version, 1u);
  EXPECT_EQ(reg.Get("a"), nullptr);
  EXPECT_EQ(reg.Remove("a").status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(reg.Install(MakeVersion(*backend, "a", 8), false).ok());
  EXPECT_EQ(reg.Get("a")->version, 2u);
}

TEST(IndexRegistry, ReadersKeepTheirVersionAcrossSwapAndDrop) {
  auto backend = CpuBackend();
  IndexRegistry reg;
  ASSERT_TRUE(reg.Install(MakeVersion(*backend, "a", 8), false).ok());
  std::shared_ptr<const IndexVersion> held = reg.Get("a");
  ASSERT_TRUE(reg.Install(MakeVersion(*backend, "a", 8), true).ok());
  ASSERT_TRUE(reg.Remove("a").ok());
  EXPECT_EQ(held->version, 1u);
  EXPECT_EQ(held->index->spec().capacity, 8u);
}

TEST(IndexRegistry, ListIsOrderedByName) {
  auto backend = CpuBackend();
  IndexRegistry reg;
  for (const char* n : {"c", "a", "b"}) ASSERT_TRUE(reg.Install(MakeVersion(*backend, n, 8), false).ok());
  auto list = reg.List();
  ASSERT_EQ(list.size(), 3u);
  EXPECT_EQ(list[0]->name, "a");
  EXPECT_EQ(list[2]->name, "c");
  EXPECT_EQ(reg.size(), 3u);
  EXPECT_TRUE(reg.Contains("b"));
}

TEST(IndexRegistry, ConcurrentSwapsAndReadsSeeWholeVersions) {
  auto backend = CpuBackend();
  IndexRegistry reg;
  ASSERT_TRUE(reg.Install(MakeVersion(*backend, "a", 8), false).ok());
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> reads{0};
  std::thread reader([&] {
    uint64_t last = 0;
    while (!stop.load()) {
      auto v = reg.Get("a");
      ASSERT_NE(v, nullptr);
      ASSERT_GE(v->version, last);  // versions never go backwards
      last = v->version;
      reads.fetch_add(1);
    }
  });
  // Start swapping only once the reader runs, so that the two really overlap.
  while (reads.load() == 0) std::this_thread::yield();
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(reg.Install(MakeVersion(*backend, "a", 8), true).ok());
  stop.store(true);
  reader.join();
  EXPECT_EQ(reg.Get("a")->version, 51u);
  EXPECT_GT(reads.load(), 0u);
}

}  // namespace
}  // namespace gpujoin::server
