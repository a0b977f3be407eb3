// The CPU backend's thread pool: every task runs exactly once, concurrent callers
// do not interfere, and SplitRows covers the range exactly.
#include "cpu/thread_pool.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace gpujoin::engine::cpu {
namespace {

TEST(ThreadPoolTest, EveryTaskRunsExactlyOnce) {
  for (uint32_t threads : {1u, 2u, 4u}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.size(), threads);
    std::vector<std::atomic<int>> hits(1000);
    pool.ParallelFor(hits.size(), [&](size_t i) { hits[i].fetch_add(1); });
    for (auto& h : hits) ASSERT_EQ(h.load(), 1);
    pool.ParallelFor(0, [&](size_t) { FAIL() << "no task expected"; });
  }
}

TEST(ThreadPoolTest, ConcurrentCallersEachGetAllTheirTasks) {
  ThreadPool pool(3);
  std::vector<std::thread> callers;
  std::vector<uint64_t> sums(4, 0);
  for (size_t c = 0; c < sums.size(); ++c) {
    callers.emplace_back([&, c] {
      for (int round = 0; round < 50; ++round) {
        std::vector<uint64_t> part(64, 0);
        pool.ParallelFor(part.size(), [&](size_t i) { part[i] = i + 1; });
        for (uint64_t v : part) sums[c] += v;
      }
    });
  }
  for (auto& t : callers) t.join();
  for (uint64_t s : sums) EXPECT_EQ(s, 50u * 64u * 65u / 2u);
}

TEST(ThreadPoolTest, DefaultSizeIsAtLeastOne) { EXPECT_GE(ThreadPool(0).size(), 1u); }

TEST(SplitRowsTest, CoversTheRangeInOrder) {
  EXPECT_EQ(SplitRows(0, 8, 10), (std::vector<size_t>{0, 0}));
  EXPECT_EQ(SplitRows(15, 8, 10), (std::vector<size_t>{0, 15}));
  EXPECT_EQ(SplitRows(10, 3, 1), (std::vector<size_t>{0, 4, 7, 10}));
  const auto b = SplitRows(1000003, 16, 1000);
  EXPECT_EQ(b.size(), 17u);
  EXPECT_EQ(b.front(), 0u);
  EXPECT_EQ(b.back(), 1000003u);
  for (size_t i = 1; i < b.size(); ++i) EXPECT_GE(b[i] - b[i - 1], 1000u);
}

}  // namespace
}  // namespace gpujoin::engine::cpu

namespace gpujoin::engine::cpu {
namespace {

TEST(ThreadPoolTest, ATaskExceptionReachesTheCallerAfterAllTasksRan) {
  // Regression guard: an exception (e.g. std::bad_alloc) thrown on a worker must
  // not terminate the process; the backend maps it to RESOURCE_EXHAUSTED.
  ThreadPool pool(3);
  std::atomic<int> ran{0};
  EXPECT_THROW(pool.ParallelFor(100,
                                [&](size_t i) {
                                  ran.fetch_add(1);
                                  if (i % 10 == 3) throw std::bad_alloc();
                                }),
               std::bad_alloc);
  EXPECT_EQ(ran.load(), 100);
  // The pool stays usable.
  std::atomic<int> again{0};
  pool.ParallelFor(10, [&](size_t) { again.fetch_add(1); });
  EXPECT_EQ(again.load(), 10);
}

}  // namespace
}  // namespace gpujoin::engine::cpu
