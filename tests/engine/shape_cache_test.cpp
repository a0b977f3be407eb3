// The graph caches' shared policy (common/shape_cache.hpp): capture on the second
// sight of a shape, hits move an entry to the front, the least recently used entry
// goes when full, a failed capture refuses the shape for good, and the shapes
// remembered as seen once are bounded.
#include "common/shape_cache.hpp"

#include <gtest/gtest.h>

#include <memory>

#include "absl/status/status.h"

namespace gpujoin::engine::detail {
namespace {

struct Entry {
  int key;
  int shape() const { return key; }
};

class ShapeCacheTest : public ::testing::Test {
 protected:
  // Get with a capture that succeeds (or fails when `fail`), counting the calls.
  absl::StatusOr<Entry*> Get(int shape, bool fail = false) {
    return cache_.Get(shape, [&]() -> absl::StatusOr<std::unique_ptr<Entry>> {
      ++capture_calls_;
      if (fail) return absl::InternalError("capture failed");
      return std::make_unique<Entry>(Entry{shape});
    });
  }

  ShapeCache<int, Entry> cache_{2, 3};
  int capture_calls_ = 0;
};

TEST_F(ShapeCacheTest, CapturesOnTheSecondSightAndHitsAfterwards) {
  auto first = Get(1);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(*first, nullptr);
  EXPECT_EQ(capture_calls_, 0);
  auto second = Get(1);
  ASSERT_TRUE(second.ok());
  ASSERT_NE(*second, nullptr);
  EXPECT_EQ((*second)->key, 1);
  auto third = Get(1);
  ASSERT_TRUE(third.ok());
  EXPECT_EQ(*third, *second);
  EXPECT_EQ(capture_calls_, 1);
  EXPECT_EQ(cache_.captures(), 1u);
  EXPECT_EQ(cache_.hits(), 1u);
}

TEST_F(ShapeCacheTest, EvictsTheLeastRecentlyUsedEntry) {
  for (int shape : {1, 1, 2, 2}) ASSERT_TRUE(Get(shape).ok());  // entries 2, 1
  ASSERT_TRUE(Get(1).ok());                                        // 1 is now the newest
  for (int shape : {3, 3}) ASSERT_TRUE(Get(shape).ok());           // full: 2 goes
  EXPECT_EQ(cache_.captures(), 3u);
  const uint64_t hits = cache_.hits();
  ASSERT_NE(*Get(1), nullptr);  // still cached
  EXPECT_EQ(cache_.hits(), hits + 1);
  EXPECT_EQ(*Get(2), nullptr);  // evicted: seen once again, not captured yet
  EXPECT_EQ(capture_calls_, 3);
}

TEST_F(ShapeCacheTest, AFailedCaptureRefusesTheShapeForGood) {
  ASSERT_TRUE(Get(7).ok());
  auto failed = Get(7, /*fail=*/true);
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kInternal);
  for (int i = 0; i < 3; ++i) {
    auto again = Get(7);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(*again, nullptr);
  }
  EXPECT_EQ(capture_calls_, 1);
  EXPECT_EQ(cache_.captures(), 0u);
}

TEST_F(ShapeCacheTest, RemembersABoundedNumberOfShapesSeenOnce) {
  for (int shape : {1, 2, 3, 4}) ASSERT_TRUE(Get(shape).ok());  // 1 is forgotten
  EXPECT_EQ(*Get(1), nullptr);                                    // first sight again
  EXPECT_NE(*Get(4), nullptr);                                    // second sight
  EXPECT_EQ(capture_calls_, 1);
}

TEST_F(ShapeCacheTest, ClearForgetsEntriesSeenAndRefusedShapes) {
  for (int shape : {1, 1, 5, 6}) ASSERT_TRUE(Get(shape).ok());
  ASSERT_FALSE(Get(6, /*fail=*/true).ok());  // 6 refused
  cache_.Clear();
  EXPECT_EQ(*Get(1), nullptr);  // the entry is gone: first sight again
  EXPECT_EQ(*Get(5), nullptr);  // forgotten: first sight again
  EXPECT_EQ(*Get(6), nullptr);
  EXPECT_NE(*Get(6), nullptr);  // no longer refused: captured on its second sight
  EXPECT_EQ(capture_calls_, 3);
}

}  // namespace
}  // namespace gpujoin::engine::detail
