#include "rpc/executor.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>

namespace gpujoin::server {
namespace {

TEST(Executor, RunsEveryTaskBeforeShutdownReturns) {
  std::atomic<int> done{0};
  Executor ex(3);
  EXPECT_EQ(ex.threads(), 3u);
  for (int i = 0; i < 100; ++i) ex.Submit([&] { done.fetch_add(1); });
  ex.Shutdown();
  EXPECT_EQ(done.load(), 100);
}

TEST(Executor, AcceptsMoveOnlyTasksAndRunsInlineAfterShutdown) {
  Executor ex(1);
  ex.Shutdown();
  auto p = std::make_unique<int>(5);
  int seen = 0;
  ex.Submit([&seen, p = std::move(p)] { seen = *p; });
  EXPECT_EQ(seen, 5);
}

TEST(InflightLimiter, BoundsAcquisitions) {
  InflightLimiter l(2);
  EXPECT_TRUE(l.TryAcquire());
  EXPECT_TRUE(l.TryAcquire());
  EXPECT_FALSE(l.TryAcquire());
  EXPECT_EQ(l.current(), 2);
  l.Release();
  EXPECT_TRUE(l.TryAcquire());
  EXPECT_EQ(l.max(), 2u);
}

}  // namespace
}  // namespace gpujoin::server
