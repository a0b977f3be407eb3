// Join kinds (inner, left outer, left semi, left anti) on both index kinds
// (kLowestRow, kKeepAll): pairs in left row order, then right source-row
// order, exactly equal to a plain nested-loop join on small inputs of every
// group shape; exact counts; truncation at every capacity; count-only; batch
// joins; payload gathered per pair (null for a left row without a match);
// reserved left keys; overflow by the group rule; a large skewed join whose
// scatter is split inside one group. Typed over key word x backend, so the
// CUDA backend runs the same cases where a device exists. Every output is
// poisoned first.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "multi_value_model.hpp"
#include "test_backends.hpp"

namespace gpujoin::engine::testing {
namespace {

constexpr DuplicatePolicy kPolicies[] = {DuplicatePolicy::kLowestRow, DuplicatePolicy::kKeepAll};

template <class Config>
class JoinKindTest : public MultiValueTest<Config> {};
TYPED_TEST_SUITE(JoinKindTest, KeyedBackends, KeyedBackendNames);

// Every kind on both index kinds, for each group shape: the pairs, their
// payload, the count and the probes of a nested-loop join. The left side
// holds stored keys (the hot one a few times), missing keys and reserved keys,
// chunked; the capacity leaves room, so the positions past the pairs show.
TYPED_TEST(JoinKindTest, EveryKindEqualsTheNestedLoopOnEveryGroupShape) {
  using K = typename TestFixture::K;
  constexpr size_t kRight = 500, kLeft = 300;
  for (const GroupShape shape : kAllGroupShapes) {
    SCOPED_TRACE(GroupShapeName(shape));
    std::mt19937 rng(21 + int(shape));
    std::vector<uint32_t> right = ShapeDomain(shape, kRight, rng);
    for (size_t r = 13; r < kRight; r += 97) right[r] = kEmptyKey;  // invalid build rows
    std::vector<uint32_t> left;
    for (size_t i = 0; i < kLeft; ++i) {
      const uint32_t pick = rng() % 10;
      left.push_back(pick < 6   ? right[rng() % kRight]                // stored (or reserved)
                     : pick < 9 ? (1u << 20) + uint32_t(rng() % 1000)  // missing
                                : kEmptyKey);
    }
    const std::vector<K> right_keys = this->KeysOf(right);
    const std::vector<K> left_keys = this->KeysOf(left);
    const OwnedColumn amount = Int64Column(kRight), name = StringColumn(kRight);
    const std::vector<const OwnedColumn*> payload = {&amount, &name};
    const auto source = PlainRowsOf<K>(right_keys, std::nullopt, 40);
    for (const DuplicatePolicy policy : kPolicies) {
      SCOPED_TRACE(std::string(DuplicatePolicyName(policy)));
      auto index = this->NewIndexWith(policy, 1024);
      ASSERT_NE(index, nullptr);
      const BuildStatistics stats =
          this->BuildWith(*index, Cut(right_keys, {100, 100, 333}), payload, std::nullopt, 40);
      ASSERT_EQ(stats.overflow_rows, 0u);
      const GroupModel<K> model = GroupModelOf<K>(*index, source);
      for (const JoinKind kind : kAllJoinKinds) {
        SCOPED_TRACE(std::string(JoinKindName(kind)));
        const std::vector<uint32_t> ids = [&] {
          std::vector<uint32_t> v(kLeft);
          for (size_t i = 0; i < kLeft; ++i) v[i] = 7 + uint32_t(i) * 3;
          return v;
        }();
        const std::vector<ExpectedPair> expected =
            NestedLoopJoin<K>(kind, policy, left_keys, ids, source);
        EXPECT_EQ(expected, ModelJoin<K>(kind, model, left_keys, ids))
            << "the model and the nested loop disagree";
        std::vector<typename TestFixture::Batch> batches(1);
        batches[0].keys = left_keys;
        batches[0].cuts = {1, 150, 150};
        batches[0].left_rows = ids;
        batches[0].capacity = expected.size() + 3;
        this->Join(*index, kind, batches);
        this->ExpectBatch(batches[0], expected, payload, false);
        this->ExpectProbes(*index, batches[0], model);
      }
    }
  }
}

// A small case at every capacity from 0 to count + 1, for every kind on both
// index kinds: the stable prefix, the exact count, overflow exactly when the
// capacity is short, and nothing written (pairs or gathers) at capacity 0.
TYPED_TEST(JoinKindTest, TruncationKeepsTheStablePrefixAtEveryCapacity) {
  using K = typename TestFixture::K;
  // rows:                                  0  1  2  3  4  5  6
  const std::vector<K> right = this->KeysOf({1, 3, 1, 2, 3, 3, 4});
  const std::vector<K> left = this->KeysOf({3, 9, 1, kEmptyKey, 2, 3, 4, 9});
  const OwnedColumn amount = Int64Column(right.size()), name = StringColumn(right.size());
  const std::vector<const OwnedColumn*> payload = {&amount, &name};
  const auto source = PlainRowsOf<K>(right);
  for (const DuplicatePolicy policy : kPolicies) {
    SCOPED_TRACE(std::string(DuplicatePolicyName(policy)));
    auto index = this->NewIndexWith(policy, 16);
    ASSERT_NE(index, nullptr);
    this->BuildWith(*index, Cut(right, {3}), payload);
    for (const JoinKind kind : kAllJoinKinds) {
      SCOPED_TRACE(std::string(JoinKindName(kind)));
      typename TestFixture::Batch batch;
      batch.keys = left;
      batch.cuts = {4};
      batch.first_left_row = 100;
      const std::vector<ExpectedPair> expected =
          NestedLoopJoin<K>(kind, policy, left, batch.Ids(), source);
      for (size_t capacity = 0; capacity <= expected.size() + 1; ++capacity) {
        SCOPED_TRACE(::testing::Message() << "capacity " << capacity);
        std::vector<typename TestFixture::Batch> batches = {batch};
        batches[0].capacity = capacity;
        this->Join(*index, kind, batches);
        this->ExpectBatch(batches[0], expected, payload, false);
      }
    }
  }
  // The counts themselves, by hand: 3 matches 3 rows, 1 two, 2 and 4 one each.
  auto index = this->NewIndexWith(DuplicatePolicy::kKeepAll, 16);
  ASSERT_NE(index, nullptr);
  this->BuildWith(*index, One(right));
  const uint64_t counts[] = {3 + 2 + 1 + 3 + 1, 3 + 1 + 2 + 1 + 1 + 3 + 1 + 1, 5, 3};
  for (size_t k = 0; k < 4; ++k) {
    std::vector<typename TestFixture::Batch> batches(1);
    batches[0].keys = left;
    this->Join(*index, kAllJoinKinds[k], batches);
    EXPECT_EQ(batches[0].result.count, counts[k]) << JoinKindName(kAllJoinKinds[k]);
    EXPECT_TRUE(batches[0].result.overflow);
  }
}

// Several batches in one node: each has its own pairs, count, capacity,
// overflow, statistics and gathers (explicit and generated left rows, one
// truncated, one empty, one count-only).
TYPED_TEST(JoinKindTest, BatchJoinGivesEachBatchItsOwnPairs) {
  using K = typename TestFixture::K;
  std::mt19937 rng(2101);
  std::vector<uint32_t> domain = ShapeDomain(GroupShape::kSmallGroups, 200, rng);
  const std::vector<K> right = this->KeysOf(domain);
  const OwnedColumn name = StringColumn(right.size());
  const std::vector<const OwnedColumn*> payload = {&name};
  const auto source = PlainRowsOf<K>(right);
  for (const DuplicatePolicy policy : kPolicies) {
    SCOPED_TRACE(std::string(DuplicatePolicyName(policy)));
    auto index = this->NewIndexWith(policy, 256);
    ASSERT_NE(index, nullptr);
    this->BuildWith(*index, One(right), payload);
    const GroupModel<K> model = GroupModelOf<K>(*index, source);
    for (const JoinKind kind : kAllJoinKinds) {
      SCOPED_TRACE(std::string(JoinKindName(kind)));
      std::vector<typename TestFixture::Batch> batches(4);
      for (size_t b = 0; b < batches.size(); ++b) {
        if (b == 2) continue;  // empty
        for (size_t i = 0; i < 40; ++i) {
          batches[b].keys.push_back(i % 5 == 0 ? this->Key(999999) : right[rng() % right.size()]);
        }
      }
      batches[0].left_rows.resize(40);
      for (size_t i = 0; i < 40; ++i) batches[0].left_rows[i] = 5000 - uint32_t(i) * 7;
      batches[1].first_left_row = 0xfffffff0u;  // generated IDs wrap past 2^32
      batches[3].first_left_row = 300;
      batches[0].cuts = {10, 10};
      // Capacities: room to spare, short by 5, none needed, count only.
      batches[0].capacity = ModelJoin<K>(kind, model, batches[0].keys, batches[0].Ids()).size() + 2;
      const size_t second = ModelJoin<K>(kind, model, batches[1].keys, batches[1].Ids()).size();
      batches[1].capacity = second >= 5 ? second - 5 : 0;
      batches[2].capacity = 4;
      batches[3].capacity = 0;
      this->Join(*index, kind, batches);
      for (size_t b = 0; b < batches.size(); ++b) {
        SCOPED_TRACE(::testing::Message() << "batch " << b);
        const std::vector<ExpectedPair> expected =
            NestedLoopJoin<K>(kind, policy, batches[b].keys, batches[b].Ids(), source);
        this->ExpectBatch(batches[b], expected, payload, false);
        this->ExpectProbes(*index, batches[b], model);
      }
      EXPECT_EQ(batches[2].result.count, 0u);
      EXPECT_EQ(batches[2].result.statistics, QueryStatistics{});
    }
  }
}

// Reserved left keys are missing rows that examine no slot: inner and semi
// drop them, outer and anti yield (left row, kEmptyKey) with null payload.
TYPED_TEST(JoinKindTest, ReservedLeftKeysAreMissingRows) {
  using K = typename TestFixture::K;
  const std::vector<K> right = this->KeysOf({1, 1, 2});
  const OwnedColumn amount = Int64Column(right.size());
  const std::vector<const OwnedColumn*> payload = {&amount};
  for (const DuplicatePolicy policy : kPolicies) {
    auto index = this->NewIndexWith(policy, 8);
    ASSERT_NE(index, nullptr);
    this->BuildWith(*index, One(right), payload);
    const std::vector<K> left = {TestFixture::kEmpty, this->Key(1), TestFixture::kEmpty};
    for (const JoinKind kind : kAllJoinKinds) {
      SCOPED_TRACE(std::string(JoinKindName(kind)) + " on " +
                   std::string(DuplicatePolicyName(policy)));
      std::vector<typename TestFixture::Batch> batches(1);
      batches[0].keys = left;
      batches[0].first_left_row = 10;
      batches[0].capacity = 8;
      this->Join(*index, kind, batches);
      const std::vector<ExpectedPair> expected =
          NestedLoopJoin<K>(kind, policy, left, batches[0].Ids(), PlainRowsOf<K>(right));
      this->ExpectBatch(batches[0], expected, payload, false);
      EXPECT_EQ(batches[0].probes[0], 0u);
      EXPECT_EQ(batches[0].probes[2], 0u);
      EXPECT_EQ(batches[0].found[0], 0u);
      EXPECT_EQ(batches[0].result.statistics.missing, 2u);
      if (kind == JoinKind::kLeftOuter || kind == JoinKind::kLeftAnti) {
        EXPECT_EQ(batches[0].out_left[0], 10u);
        EXPECT_EQ(batches[0].out_right[0], kEmptyKey);
      }
    }
  }
}

// A build past a small probe bound: the join follows the group rule of the
// table the build kept (groups from the model, whichever keys a backend
// retained), and every batch reports overflow, also when every pair fits.
TYPED_TEST(JoinKindTest, OverflowFollowsTheGroupRule) {
  using K = typename TestFixture::K;
  constexpr uint32_t kCapacity = 32;
  // Keys colliding at home 3 beyond the bound, and others, each 1-4 times.
  std::vector<K> distinct = KeysWithHomeOf<K>(kCapacity, 3, 6);
  for (uint32_t x = 1; distinct.size() < 30; ++x) distinct.push_back(this->Key(x));
  std::mt19937 rng(2102);
  std::vector<K> right;
  for (K k : distinct) right.insert(right.end(), 1 + rng() % 4, k);
  std::shuffle(right.begin(), right.end(), rng);
  std::vector<uint32_t> values(right.size());
  for (uint32_t& v : values) v = rng() % 16;  // explicit values that repeat
  const OwnedColumn amount = Int64Column(right.size());
  const std::vector<const OwnedColumn*> payload = {&amount};
  const auto source = PlainRowsOf<K>(right, values);
  for (const DuplicatePolicy policy : kPolicies) {
    SCOPED_TRACE(std::string(DuplicatePolicyName(policy)));
    auto index = this->NewIndexWith(policy, kCapacity, 2);
    ASSERT_NE(index, nullptr);
    const BuildStatistics stats = this->BuildWith(*index, Cut(right, {17}), payload, One(values));
    ASSERT_GT(stats.overflow_rows, 0u);
    const GroupModel<K> model = GroupModelOf<K>(*index, source);
    EXPECT_EQ(stats.unique_keys, model.groups.size());
    for (const JoinKind kind : kAllJoinKinds) {
      SCOPED_TRACE(std::string(JoinKindName(kind)));
      std::vector<typename TestFixture::Batch> batches(2);
      batches[0].keys = distinct;
      batches[0].keys.push_back(TestFixture::kEmpty);
      batches[1].keys = right;
      for (auto& b : batches) {
        b.capacity = ModelJoin<K>(kind, model, b.keys, b.Ids()).size() + 1;
      }
      this->Join(*index, kind, batches);
      for (auto& b : batches) {
        this->ExpectBatch(b, ModelJoin<K>(kind, model, b.keys, b.Ids()), payload, true);
        this->ExpectProbes(*index, b, model);
      }
    }
  }
}

// One key holding most of a large build: the scatter's work is split by output
// pair (cpu3: several tasks start inside the hot key's group), truncated in the
// middle of a group; on both index kinds the pairs equal the model's.
TYPED_TEST(JoinKindTest, LargeSkewedJoinSplitsInsideOneGroup) {
  using K = typename TestFixture::K;
  constexpr size_t kRight = 40000, kLeft = 70000;  // cpu3: several count parts too
  std::mt19937 rng(2103);
  const std::vector<K> right = this->KeysOf(ShapeDomain(GroupShape::kSkewed, kRight, rng));
  std::vector<K> cold;  // the other keys' rows
  for (K k : right) {
    if (k != this->Key(kHotKey)) cold.push_back(k);
  }
  std::vector<K> left;
  for (size_t i = 0; i < kLeft; ++i) {
    left.push_back(i % 10000 == 17 ? this->Key(kHotKey)
                   : i % 3 == 0    ? this->Key(1u << 21)
                                   : cold[rng() % cold.size()]);
  }
  const OwnedColumn amount = Int64Column(kRight);
  const std::vector<const OwnedColumn*> payload = {&amount};
  const auto source = PlainRowsOf<K>(right);
  for (const DuplicatePolicy policy : kPolicies) {
    SCOPED_TRACE(std::string(DuplicatePolicyName(policy)));
    auto index = this->NewIndexWith(policy, 1u << 16);
    ASSERT_NE(index, nullptr);
    this->BuildWith(*index, Cut(right, {12345}), payload);
    const GroupModel<K> model = GroupModelOf<K>(*index, source);
    for (const JoinKind kind : kAllJoinKinds) {
      SCOPED_TRACE(std::string(JoinKindName(kind)));
      std::vector<typename TestFixture::Batch> batches(1);
      batches[0].keys = left;
      batches[0].cuts = {9999};
      const std::vector<ExpectedPair> expected = ModelJoin<K>(kind, model, left, batches[0].Ids());
      batches[0].capacity = expected.size() - expected.size() / 7;
      this->Join(*index, kind, batches);
      this->ExpectBatch(batches[0], expected, payload, false);
      if (policy == DuplicatePolicy::kKeepAll && kind == JoinKind::kInner) {
        EXPECT_GE(expected.size(), 7 * kRight / 2) << "seven left rows match the hot key";
      }
    }
  }
}

}  // namespace
}  // namespace gpujoin::engine::testing
