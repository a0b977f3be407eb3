#include "gpujoin/server/memory_budget.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gpujoin::server {
namespace {

using ::testing::HasSubstr;

TEST(MemoryBudget, ReserveAndReleaseOnDestruction) {
  MemoryBudget budget(1000);
  {
    auto r = budget.Reserve(600, "index \"a\"");
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->bytes(), 600u);
    EXPECT_EQ(budget.used_bytes(), 600u);
  }
  EXPECT_EQ(budget.used_bytes(), 0u);
}

TEST(MemoryBudget, RefusalChangesNothingAndSaysWhy) {
  MemoryBudget budget(1000);
  auto a = budget.Reserve(700, "index \"a\"");
  ASSERT_TRUE(a.ok());
  auto b = budget.Reserve(301, "index \"b\"");
  ASSERT_EQ(b.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(b.status().message(), HasSubstr("index \"b\" needs 301 bytes"));
  EXPECT_THAT(b.status().message(), HasSubstr("700 of the 1000 byte budget"));
  EXPECT_EQ(budget.used_bytes(), 700u);
  EXPECT_TRUE(budget.Reserve(300, "index \"c\"").ok());  // exactly fits (then released)
}

TEST(MemoryBudget, MoveTransfersOwnership) {
  MemoryBudget budget(100);
  auto r = budget.Reserve(40, "x");
  ASSERT_TRUE(r.ok());
  MemoryBudget::Reservation moved = std::move(*r);
  EXPECT_EQ(budget.used_bytes(), 40u);
  MemoryBudget::Reservation other;
  other = std::move(moved);
  EXPECT_EQ(budget.used_bytes(), 40u);
  other.Release();
  other.Release();  // idempotent
  EXPECT_EQ(budget.used_bytes(), 0u);
}

TEST(MemoryBudget, ShrinkGivesBackTheDifferenceOnly) {
  MemoryBudget budget(100);
  auto r = budget.Reserve(60, "x");
  ASSERT_TRUE(r.ok());
  r->ShrinkTo(80);  // larger: no change
  EXPECT_EQ(budget.used_bytes(), 60u);
  r->ShrinkTo(25);
  EXPECT_EQ(r->bytes(), 25u);
  EXPECT_EQ(budget.used_bytes(), 25u);
  r->Release();
  EXPECT_EQ(budget.used_bytes(), 0u);
}

TEST(MemoryBudget, ReservationMayOutliveTheBudgetObject) {
  MemoryBudget::Reservation r;
  {
    MemoryBudget budget(10);
    r = std::move(*budget.Reserve(5, "x"));
  }
  r.Release();  // the shared state is still alive: no crash
  EXPECT_EQ(r.bytes(), 0u);
}

}  // namespace
}  // namespace gpujoin::server
