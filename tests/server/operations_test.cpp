// Operations (decode -> engine graph -> encode) on the CPU backend, without gRPC.
// Results are compared with running the same engine directly.
#include "ops/operations.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "build_messages.hpp"
#include "gpujoin/engine/graph.hpp"
#include "test_util.hpp"

namespace gpujoin::server {
namespace {

using gpujoin::server::testing::WithVarint;

using ::testing::HasSubstr;

class OperationsTest : public testing::OperationsFixture {
 protected:
  void SetUp() override { MakeOperations(); }

  v1::BuildIndexRequest Spec(const std::string& name, uint32_t capacity, bool replace = false,
                             uint32_t max_probes = 0) {
    v1::BuildIndexRequest r;
    r.mutable_spec()->set_name(name);
    r.mutable_spec()->set_capacity(capacity);
    r.mutable_spec()->set_replace(replace);
    r.mutable_spec()->set_max_probe_count(max_probes);
    r.mutable_spec()->set_first_value(100);
    return r;
  }
  static v1::BuildIndexRequest Chunk(const std::vector<uint32_t>& keys) {
    v1::BuildIndexRequest r;
    *r.mutable_chunk()->mutable_keys()->mutable_packed() = PackColumn<uint32_t>(keys);
    return r;
  }
};

TEST_F(OperationsTest, BuildStatisticsMatchTheEngine) {
  // Duplicates across chunks, the reserved key, and overflow (probe bound 1 in 4 slots).
  const std::vector<uint32_t> a = {1, 2, 0xffffffffu, 2}, b = {5, 1, 9, 13, 17};
  auto built = Build({Spec("x", 4, false, 1), Chunk(a), Chunk(b)});
  ASSERT_TRUE(built.ok()) << built.status();

  engine::HashIndexSpec spec{4, 1};
  auto direct = backend_->CreateIndex(spec);
  ASSERT_TRUE(direct.ok());
  engine::CommandGraph g;
  engine::BuildStatistics expected;
  engine::BuildIndexNode node;
  node.index = direct->get();
  node.keys = {a, b};
  node.first_value = 100;
  node.statistics = &expected;
  g.Add(std::move(node));
  ASSERT_TRUE(backend_->Run(g).ok());
  EXPECT_EQ((*built)->index->build_statistics(), expected);
  EXPECT_GT(expected.duplicate_rows, 0u);
  EXPECT_EQ(expected.invalid_rows, 1u);
  EXPECT_GT(expected.overflow_rows, 0u);
  EXPECT_EQ((*built)->version, 1u);
  EXPECT_EQ(budget_->used_bytes(), (*built)->index->memory_bytes());  // peak reserved, then shrunk
}

// Reproduces a budget that held less than the index (found by fuzz_build_session):
// a batch build of a key schema with no chunks reserved nothing for its stored
// key columns (a batch's shape counts its non-empty chunks), yet the index
// keeps one offset per string or binary key column: 8 bytes outside the budget.
TEST_F(OperationsTest, KeySchemaBatchBuildOfNoRowsIsChargedItsKeyColumns) {
  for (const bool batch : {true, false}) {
    v1::BuildIndexRequest spec;
    spec.mutable_spec()->set_name("s");
    spec.mutable_spec()->set_replace(true);
    spec.mutable_spec()->set_batch_mode(batch);
    spec.mutable_spec()->set_key_type(v1::KEY_TYPE_COLUMNS);
    for (const auto& [name, type] :
         {std::pair{"sku", v1::COLUMN_TYPE_STRING}, std::pair{"blob", v1::COLUMN_TYPE_BINARY}}) {
      v1::KeyColumnSpec* c = spec.mutable_spec()->add_key_columns();
      c->set_name(name);
      c->set_type(type);
    }
    auto built = Build({spec});
    ASSERT_TRUE(built.ok()) << built.status();
    EXPECT_EQ((*built)->index->built_rows(), 0u);
    EXPECT_EQ(budget_->used_bytes(), (*built)->index->memory_bytes()) << "batch " << batch;
  }
}

TEST_F(OperationsTest, LookupMatchesTheEngine) {
  ASSERT_TRUE(Build({Spec("x", 16), Chunk({10, 20, 30, 20})}).ok());
  v1::LookupRequest req;
  req.set_index("x");
  req.set_want_probes(true);
  for (uint32_t k : {20u, 11u, 10u, 0xffffffffu, 30u})
    req.mutable_keys()->mutable_values()->add_v(k);
  v1::LookupResponse resp;
  ASSERT_TRUE(ops_->Lookup(req, &resp).ok());
  EXPECT_EQ(UnpackColumn<uint32_t>(resp.values()),
            (std::vector<uint32_t>{101, 0xffffffffu, 100, 0xffffffffu, 102}));
  EXPECT_EQ(resp.found(), std::string("\1\0\1\0\1", 5));
  EXPECT_EQ(resp.statistics().found(), 3u);
  EXPECT_EQ(resp.statistics().missing(), 2u);
  EXPECT_EQ(UnpackColumn<uint32_t>(resp.probes()).size(), 5u);
  EXPECT_EQ(resp.index_version(), 1u);
}

TEST_F(OperationsTest, JoinMatchesTheEngine) {
  ASSERT_TRUE(Build({Spec("x", 16), Chunk({10, 20, 30})}).ok());
  v1::JoinRequest req;
  req.set_index("x");
  auto* b0 = req.add_batches();
  for (uint32_t k : {30u, 5u, 10u, 30u}) b0->mutable_keys()->mutable_values()->add_v(k);
  b0->set_first_left_row(7);
  auto* b1 = req.add_batches();
  for (uint32_t k : {20u, 20u, 20u}) b1->mutable_keys()->mutable_values()->add_v(k);
  b1->set_capacity(2);
  v1::JoinResponse resp;
  ASSERT_TRUE(ops_->Join(req, &resp).ok());
  ASSERT_EQ(resp.results_size(), 2);
  EXPECT_EQ(UnpackColumn<uint32_t>(resp.results(0).left_rows()), (std::vector<uint32_t>{7, 9, 10}));
  EXPECT_EQ(UnpackColumn<uint32_t>(resp.results(0).right_rows()),
            (std::vector<uint32_t>{102, 100, 102}));
  EXPECT_EQ(resp.results(0).count(), 3u);
  EXPECT_FALSE(resp.results(0).overflow());
  EXPECT_EQ(resp.results(1).count(), 3u);
  EXPECT_EQ(resp.results(1).capacity(), 2u);
  EXPECT_TRUE(resp.results(1).overflow());
  EXPECT_EQ(UnpackColumn<uint32_t>(resp.results(1).left_rows()), (std::vector<uint32_t>{0, 1}));
}

// A few request bytes must not buy a large allocation: a
// group count over --max-aggregate-groups is RESOURCE_EXHAUSTED naming the flag,
// and a join's pair capacity far above its rows allocates only the rows.
TEST_F(OperationsTest, AggregateGroupsOverTheLimitAreRefused) {
  v1::AggregateRequest r;
  r.set_op(v1::AGGREGATE_OP_COUNT);
  r.set_groups(22'000'000);
  *r.mutable_keys()->mutable_packed() = PackColumn<uint32_t>(std::vector<uint32_t>{0});
  AggregateStream stream;
  const absl::Status s = stream.Admit(r, uint64_t{1} << 40, uint64_t{1} << 22);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(
      s.message(),
      HasSubstr("groups: 22000000 groups is over the limit --max-aggregate-groups=4194304"));
  r.set_groups(uint64_t{1} << 22);
  EXPECT_TRUE(AggregateStream().Admit(r, uint64_t{1} << 40, uint64_t{1} << 22).ok());
}

TEST_F(OperationsTest, JoinCapacityFarAboveTheRowsAllocatesOnlyTheRows) {
  ASSERT_TRUE(Build({Spec("x", 16), Chunk({10, 20, 30})}).ok());
  v1::JoinRequest req;
  req.set_index("x");
  auto* b = req.add_batches();
  for (uint32_t k : {30u, 5u, 10u}) b->mutable_keys()->mutable_values()->add_v(k);
  b->set_capacity(uint64_t{1} << 31);  // 16 GiB of pairs if it were allocated
  v1::JoinResponse resp;
  ASSERT_TRUE(ops_->Join(req, &resp).ok());
  ASSERT_EQ(resp.results_size(), 1);
  EXPECT_EQ(resp.results(0).count(), 2u);
  EXPECT_EQ(resp.results(0).capacity(), uint64_t{1} << 31);
  EXPECT_FALSE(resp.results(0).overflow());
  EXPECT_EQ(UnpackColumn<uint32_t>(resp.results(0).left_rows()), (std::vector<uint32_t>{0, 2}));
  // The response holds the pairs written, not the capacity.
  EXPECT_LT(resp.ByteSizeLong(), 200u);
}

// On a keep_all index a left row may yield a pair per row of its key's group:
// the pairs allocated are at most the left rows times the largest group (here
// 3 x 4), never the capacity (16 GiB of pairs) or what --max-result-bytes
// (4 GiB) would allow; semi and anti joins at most the left rows.
TEST_F(OperationsTest, KeepAllJoinAllocatesAtMostTheRowsTimesTheLargestGroup) {
  v1::BuildIndexRequest spec = Spec("x", 16);
  spec.mutable_spec()->set_duplicates(v1::DUPLICATE_POLICY_KEEP_ALL);
  ASSERT_TRUE(Build({spec, Chunk({10, 20, 10}), Chunk({10, 30, 10})}).ok());
  for (const v1::JoinKind kind : {v1::JOIN_KIND_INNER, v1::JOIN_KIND_LEFT_OUTER,
                                  v1::JOIN_KIND_LEFT_SEMI, v1::JOIN_KIND_LEFT_ANTI}) {
    SCOPED_TRACE(v1::JoinKind_Name(kind));
    v1::JoinRequest req;
    req.set_index("x");
    req.set_kind(kind);
    auto* b = req.add_batches();
    for (uint32_t k : {10u, 5u, 30u}) b->mutable_keys()->mutable_values()->add_v(k);
    b->set_capacity(uint64_t{1} << 31);
    v1::JoinResponse resp;
    ASSERT_TRUE(ops_->Join(req, &resp).ok());
    const v1::JoinBatchResult& r = resp.results(0);
    EXPECT_EQ(r.capacity(), uint64_t{1} << 31);
    EXPECT_FALSE(r.overflow());
    std::vector<uint32_t> left, right;
    switch (kind) {
      case v1::JOIN_KIND_INNER:
        left = {0, 0, 0, 0, 2};
        right = {100, 102, 103, 105, 104};
        break;
      case v1::JOIN_KIND_LEFT_OUTER:
        left = {0, 0, 0, 0, 1, 2};
        right = {100, 102, 103, 105, 0xffffffffu, 104};
        break;
      case v1::JOIN_KIND_LEFT_SEMI:
        left = {0, 2};
        right = {100, 104};
        break;
      default:
        left = {1};
        right = {0xffffffffu};
        break;
    }
    EXPECT_EQ(r.count(), left.size());
    EXPECT_EQ(UnpackColumn<uint32_t>(r.left_rows()), left);
    EXPECT_EQ(UnpackColumn<uint32_t>(r.right_rows()), right);
    EXPECT_LT(resp.ByteSizeLong(), 200u);
  }
}

TEST_F(OperationsTest, AggregateAccumulatesAcrossBatchesInOrder) {
  AggregateStream stream;
  auto batch = [](std::vector<uint32_t> keys, std::vector<float> values) {
    v1::AggregateRequest r;
    r.set_op(v1::AGGREGATE_OP_MEAN);
    r.set_groups(3);
    *r.mutable_keys()->mutable_packed() = PackColumn<uint32_t>(keys);
    *r.mutable_values()->mutable_packed() = PackColumn<float>(values);
    return r;
  };
  v1::AggregateRequest r1 = batch({0, 1, 1, 7}, {1.0f, 2.0f, 4.0f, 100.0f});
  v1::AggregateRequest r2 = batch({1, 0}, {6.0f, NAN});
  for (auto* r : {&r1, &r2}) ASSERT_TRUE(stream.Admit(*r, 1 << 20, 1 << 22).ok());
  v1::AggregateResponse o1, o2;
  AggregatePartial p1, p2;
  ASSERT_TRUE(ops_->Aggregate(r1, &o1, &p1).ok());
  ASSERT_TRUE(ops_->Aggregate(r2, &o2, &p2).ok());
  stream.Complete(r1, &o1, p1);
  stream.Complete(r2, &o2, p2);
  const auto batch1 = UnpackColumn<float>(o1.values());
  EXPECT_EQ(batch1[0], 1.0f);
  EXPECT_EQ(batch1[1], 3.0f);
  EXPECT_TRUE(std::isnan(batch1[2]));
  const auto totals = UnpackColumn<float>(o2.total_values());
  EXPECT_EQ(totals[0], 1.0f);  // NaN ignored
  EXPECT_EQ(totals[1], 4.0f);  // (2 + 4 + 6) / 3
  EXPECT_TRUE(std::isnan(totals[2]));
  EXPECT_EQ(UnpackColumn<uint32_t>(o1.contributing_rows()), (std::vector<uint32_t>{1, 2, 0}));

  v1::AggregateRequest other = r1;
  other.set_groups(4);
  EXPECT_THAT(stream.Admit(other, 1 << 20, 1 << 22).message(), HasSubstr("must stay the same"));
}

TEST_F(OperationsTest, BudgetRefusalKeepsTheOldVersion) {
  ASSERT_TRUE(Build({Spec("x", 16), Chunk({1, 2, 3})}).ok());
  const uint64_t used = budget_->used_bytes();
  auto refused = Build({Spec("x", 1u << 20, true), Chunk({4})});
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.status().message(), HasSubstr("index \"x\""));
  EXPECT_EQ(registry_.Get("x")->version, 1u);
  EXPECT_EQ(registry_.Get("x")->index->spec().capacity, 16u);
  EXPECT_EQ(budget_->used_bytes(), used);
}

TEST_F(OperationsTest, CancelledBuildInstallsNothing) {
  ASSERT_TRUE(Build({Spec("x", 16), Chunk({1})}).ok());
  BuildSession session(ops_.get());
  ASSERT_TRUE(session.Add(Spec("x", 16, true)).ok());
  ASSERT_TRUE(session.Add(Chunk({5, 6})).ok());
  std::atomic<bool> cancelled{true};
  EXPECT_EQ(session.Finish(cancelled).status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(registry_.Get("x")->version, 1u);
}

TEST_F(OperationsTest, SizedFromRowsWhenNoCapacityGiven) {
  v1::BuildIndexRequest spec;
  spec.mutable_spec()->set_name("auto");
  auto built = Build({spec, Chunk({1, 2, 3, 4, 5})});
  ASSERT_TRUE(built.ok()) << built.status();
  EXPECT_EQ((*built)->index->spec().capacity, 16u);  // 5 rows at load factor 0.5
}

TEST_F(OperationsTest, SizedFromExpectedRowsAndLoadFactor) {
  v1::BuildIndexRequest spec;
  spec.mutable_spec()->set_name("sized");
  spec.mutable_spec()->set_expected_rows(100);
  spec.mutable_spec()->set_target_load_factor(0.25);
  auto built = Build({spec, Chunk({1, 2})});
  ASSERT_TRUE(built.ok()) << built.status();
  EXPECT_EQ((*built)->index->spec().capacity, 512u);  // bit_ceil(100 / 0.25)

  spec.mutable_spec()->set_target_load_factor(1.5);
  EXPECT_THAT(Build({spec}).status().message(),
              HasSubstr("spec.target_load_factor: 1.5 is outside (0, 1]"));
  spec.mutable_spec()->set_target_load_factor(0.5);
  spec.mutable_spec()->set_capacity(64);
  EXPECT_THAT(Build({spec}).status().message(), HasSubstr("are both set"));
}

// Reproduces a refusal at chunks[0] ("spec: max_probe_count 4 exceeds capacity
// 2"): a table sized from the rows sent held the probe bound against the interim
// capacity of the first chunk's rows, not the capacity of the table it builds.
TEST_F(OperationsTest, ProbeBoundOfASelfSizedTableIsHeldAgainstItsFinalCapacity) {
  v1::BuildIndexRequest spec;
  spec.mutable_spec()->set_name("auto");
  spec.mutable_spec()->set_max_probe_count(4);
  // 7 rows over 3 chunks: capacity 2 after the first, 16 at the end.
  auto built = Build({spec, Chunk({1}), Chunk({2, 3, 4}), Chunk({5, 6, 7})});
  ASSERT_TRUE(built.ok()) << built.status();
  EXPECT_EQ((*built)->index->spec().capacity, 16u);
  EXPECT_EQ((*built)->index->spec().max_probe_count, 4u);
  EXPECT_EQ((*built)->index->build_statistics().unique_keys, 7u);

  // A bound above the final capacity is still refused, at Finish, naming the
  // field and that capacity; nothing is installed or held.
  const uint64_t used = budget_->used_bytes();
  spec.mutable_spec()->set_name("too_far");
  spec.mutable_spec()->set_max_probe_count(17);
  auto refused = Build({spec, Chunk({1}), Chunk({2, 3, 4}), Chunk({5, 6, 7})});
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << refused.status();
  EXPECT_THAT(refused.status().message(),
              HasSubstr("spec.max_probe_count: 17 exceeds capacity 16 (sized for the 7 rows "
                        "sent at load factor 0.5"));
  EXPECT_FALSE(registry_.Contains("too_far"));
  EXPECT_EQ(budget_->used_bytes(), used);

  // With the capacity known from the spec, the bound is refused with the spec.
  v1::BuildIndexRequest expected = spec;
  expected.mutable_spec()->set_expected_rows(7);
  EXPECT_THAT(Build({expected}).status().message(),
              HasSubstr("spec.max_probe_count: 17 exceeds capacity 16 (sized for "
                        "spec.expected_rows 7 at load factor 0.5)"));
  EXPECT_THAT(Build({Spec("fixed", 8, false, 9)}).status().message(),
              HasSubstr("spec.max_probe_count: 9 exceeds capacity 8 (spec.capacity)"));
  EXPECT_EQ(registry_.size(), 1u);
  EXPECT_EQ(budget_->used_bytes(), used);
}

TEST_F(OperationsTest, BuildInputErrorsNameTheField) {
  auto dup_spec = Build({Spec("x", 16), Spec("x", 16)});
  EXPECT_THAT(dup_spec.status().message(), HasSubstr("spec: sent twice"));
  auto no_spec = Build({Chunk({1})});
  EXPECT_THAT(no_spec.status().message(), HasSubstr("chunks[0]: arrived before the spec"));
  auto bad_cap = Build({Spec("x", 12)});
  EXPECT_EQ(bad_cap.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad_cap.status().message(), HasSubstr("capacity"));
  v1::BuildIndexRequest values_unasked = Chunk({1});
  values_unasked.mutable_chunk()->mutable_values()->mutable_values()->add_v(3);
  EXPECT_THAT(Build({Spec("x", 16), values_unasked}).status().message(),
              HasSubstr("chunks[0].values: 1 values sent but spec.explicit_values is false"));
  v1::BuildIndexRequest ev = Spec("x", 16);
  ev.mutable_spec()->set_explicit_values(true);
  v1::BuildIndexRequest c = Chunk({1, 2});
  c.mutable_chunk()->mutable_values()->mutable_values()->add_v(3);
  EXPECT_THAT(Build({ev, c}).status().message(),
              HasSubstr("values: 1 rows in total but keys has 2"));
  EXPECT_EQ(registry_.size(), 0u);
}

TEST_F(OperationsTest, UnknownIndexIsNotFound) {
  v1::LookupRequest req;
  req.set_index("nope");
  req.mutable_keys()->mutable_values();
  v1::LookupResponse resp;
  EXPECT_EQ(ops_->Lookup(req, &resp).code(), absl::StatusCode::kNotFound);
  v1::DropIndexRequest drop;
  drop.set_name("nope");
  v1::DropIndexResponse dr;
  EXPECT_EQ(ops_->DropIndex(drop, &dr).code(), absl::StatusCode::kNotFound);
}

// ------------------------------------------------ range checks

// Spec with generated values starting at `first_value` (no fixed capacity: sized
// from the rows).
v1::BuildIndexRequest FirstValueSpec(const std::string& name, uint64_t first_value) {
  v1::BuildIndexRequest r;
  r.mutable_spec()->set_name(name);
  r.mutable_spec()->set_first_value(first_value);
  return r;
}

// Regression: generated values first_value + row that reached 0xffffffff (or
// wrapped past 2^32) were accepted, so a found key returned the missing marker.
TEST_F(OperationsTest, FirstValueWhoseLastRowReachesTheMissingMarkerIsRejected) {
  // 0xfffffffb + 5 rows - 1 = 0xffffffff; refused at the chunk that gets there.
  auto built = Build({FirstValueSpec("x", 0xfffffffbu), Chunk({1, 2, 3}), Chunk({4, 5})});
  ASSERT_EQ(built.status().code(), absl::StatusCode::kInvalidArgument) << built.status();
  EXPECT_THAT(built.status().message(),
              HasSubstr("spec.first_value: 4294967291 + 5 rows - 1 = 4294967295"));
  EXPECT_THAT(built.status().message(), HasSubstr("in chunks[1]"));
  EXPECT_THAT(built.status().message(), HasSubstr("exceeds 4294967294"));
  EXPECT_THAT(built.status().message(), HasSubstr("at most 4 rows fit"));
  // Past 2^32 (the values would wrap to 0, 1, ...).
  auto wrapped = Build({FirstValueSpec("x", 0xfffffff0u), Chunk(std::vector<uint32_t>(40, 7))});
  ASSERT_EQ(wrapped.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(wrapped.status().message(),
              HasSubstr("spec.first_value: 4294967280 + 40 rows - 1 = 4294967319"));
  EXPECT_EQ(registry_.size(), 0u);
}

TEST_F(OperationsTest, FirstValueUpToTheLimitBuildsAndLooksUp) {
  ASSERT_TRUE(Build({FirstValueSpec("x", 0xfffffffbu), Chunk({1, 2, 3, 4})}).ok());
  v1::LookupRequest req;
  req.set_index("x");
  *req.mutable_keys()->mutable_packed() = PackColumn<uint32_t>(std::vector<uint32_t>{4, 1, 9});
  v1::LookupResponse resp;
  ASSERT_TRUE(ops_->Lookup(req, &resp).ok());
  EXPECT_EQ(UnpackColumn<uint32_t>(resp.values()),
            (std::vector<uint32_t>{0xfffffffeu, 0xfffffffbu, 0xffffffffu}));
  EXPECT_EQ(resp.found(), std::string("\x01\x01\x00", 3));
  // Explicit values are the caller's: first_value does not limit them.
  v1::BuildIndexRequest ev = FirstValueSpec("y", 0xffffffffu);
  ev.mutable_spec()->set_explicit_values(true);
  v1::BuildIndexRequest c = Chunk({1, 2});
  *c.mutable_chunk()->mutable_values()->mutable_packed() =
      PackColumn<uint32_t>(std::vector<uint32_t>{5, 6});
  EXPECT_TRUE(Build({ev, c}).ok());
}

TEST_F(OperationsTest, BatchRowBaseWhoseLastRowReachesTheMissingMarkerIsRejected) {
  v1::BuildIndexRequest spec = FirstValueSpec("x", 0);
  spec.mutable_spec()->set_batch_mode(true);
  auto chunk = [](uint64_t row_base, std::vector<uint32_t> keys) {
    v1::BuildIndexRequest r = Chunk(keys);
    r.mutable_chunk()->set_row_base(row_base);
    return r;
  };
  EXPECT_TRUE(Build({spec, chunk(0xfffffffcu, {1, 2, 3})}).ok());  // last value 0xfffffffe
  spec.mutable_spec()->set_replace(true);
  auto s = Build({spec, chunk(0, {1}), chunk(0xfffffffdu, {2, 3, 4})}).status();
  ASSERT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr("chunks[1].row_base: 4294967293 + 3 rows - 1 = 4294967295"));
  EXPECT_THAT(s.message(), HasSubstr("at most 2 rows fit"));
}

constexpr uint64_t k2To32 = uint64_t{1} << 32;

// Regression: request integers above 2^32-1 were truncated to their low 32 bits
// (capacity 2^32 + 16 built a table of 16 slots); they are INVALID_ARGUMENT
// naming the field and the value.
TEST_F(OperationsTest, BuildIntegersWiderThan32BitsAreRejectedNotTruncated) {
  struct Case {
    int field;
    uint64_t value;
    const char* message;
  };
  for (const Case& c : {Case{2, k2To32 + 16, "spec.capacity: 4294967312 does not fit in 32 bits"},
                        Case{5, k2To32 + 1, "spec.max_probe_count: 4294967297 does not fit"},
                        Case{6, k2To32 + 5, "spec.first_value: 4294967301 does not fit"}}) {
    v1::BuildIndexRequest spec = Spec("x", 16);
    *spec.mutable_spec() = WithVarint(spec.spec(), c.field, c.value);
    auto built = Build({spec, Chunk({1, 2})});
    EXPECT_EQ(built.status().code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_THAT(built.status().message(), HasSubstr(c.message));
  }
  v1::BuildIndexRequest spec = FirstValueSpec("x", 0);
  spec.mutable_spec()->set_batch_mode(true);
  v1::BuildIndexRequest chunk = Chunk({1});
  *chunk.mutable_chunk() = WithVarint(chunk.chunk(), 3, k2To32 + 2);
  EXPECT_THAT(Build({spec, chunk}).status().message(),
              HasSubstr("chunks[0].row_base: 4294967298 does not fit in 32 bits"));
  EXPECT_EQ(registry_.size(), 0u);
}

TEST_F(OperationsTest, QueryIntegersWiderThan32BitsAreRejectedNotTruncated) {
  ASSERT_TRUE(Build({Spec("x", 16), Chunk({10, 20})}).ok());
  v1::LookupRequest lookup;
  lookup.set_index("x");
  *lookup.mutable_keys()->mutable_packed() = PackColumn<uint32_t>(std::vector<uint32_t>{10});
  v1::LookupResponse lookup_resp;
  auto s = ops_->Lookup(WithVarint(lookup, 4, k2To32 + 1), &lookup_resp);  // max_probe_count
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("max_probe_count: 4294967297 exceeds the capacity 16"));

  v1::JoinRequest join;
  join.set_index("x");
  *join.add_batches()->mutable_keys()->mutable_packed() =
      PackColumn<uint32_t>(std::vector<uint32_t>{10});
  v1::JoinResponse join_resp;
  s = ops_->Join(WithVarint(join, 3, k2To32 + 2), &join_resp);  // max_probe_count
  EXPECT_THAT(s.message(), HasSubstr("max_probe_count: 4294967298 exceeds the capacity 16"));
  *join.mutable_batches(0) = WithVarint(join.batches(0), 3, k2To32 + 7);  // first_left_row
  s = ops_->Join(join, &join_resp);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("batches[0].first_left_row: 4294967303 does not fit"));

  v1::AggregateRequest agg;
  agg.set_op(v1::AGGREGATE_OP_COUNT);
  *agg.mutable_keys()->mutable_packed() = PackColumn<uint32_t>(std::vector<uint32_t>{0});
  AggregateStream stream;
  s = stream.Admit(WithVarint(agg, 2, k2To32 + 3), uint64_t{1} << 62, uint64_t{1} << 40);  // groups
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("groups: 4294967299 does not fit in 32 bits"));

  v1::HashRequest hash;
  auto* col = hash.add_columns();
  col->set_type(v1::COLUMN_TYPE_UINT32);
  col->set_data(PackColumn<uint32_t>(std::vector<uint32_t>{1}));
  col->set_length(1);
  v1::HashResponse hash_resp;
  s = ops_->Hash(WithVarint(hash, 2, k2To32 + 32), &hash_resp);  // bits
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("bits: 4294967328 is not 32 or 64"));
}

// A backend whose device "dies" on the first Run: the operations must report the
// fatal error (health turns NOT_SERVING) and fail only that request.
class DyingBackend : public engine::Backend {
 public:
  engine::BackendInfo Info() const override { return {}; }
  absl::StatusOr<std::unique_ptr<engine::HashIndex>> CreateIndex(
      const engine::HashIndexSpec&) override {
    return absl::UnimplementedError("not needed");
  }
  uint64_t IndexBytes(const engine::HashIndexSpec& spec) const override {
    return uint64_t{spec.capacity} * 8;
  }
  uint64_t BuildTransientBytes(const engine::HashIndexSpec&,
                               const engine::BuildShape&) const override {
    return 0;
  }
  uint64_t PayloadBytes(const engine::HashIndexSpec&, std::span<const engine::PayloadShape>,
                        uint64_t) const override {
    return 0;
  }
  absl::Status Run(const engine::CommandGraph&) override {
    healthy_ = false;
    return absl::InternalError("device lost");
  }
  bool Healthy() const override { return healthy_; }

 private:
  bool healthy_ = true;
};

TEST(OperationsFatal, FatalBackendErrorIsReportedOnce) {
  DyingBackend backend;
  IndexRegistry registry;
  MemoryBudget budget(1 << 20);
  Metrics metrics;
  int fatal_calls = 0;
  ServiceState s;
  s.backend = &backend;
  s.registry = &registry;
  s.budget = &budget;
  s.metrics = &metrics;
  s.on_backend_fatal = [&] { ++fatal_calls; };
  Operations ops(std::move(s));
  v1::AggregateRequest req;
  req.set_op(v1::AGGREGATE_OP_COUNT);
  req.set_groups(2);
  req.mutable_keys()->mutable_values()->add_v(1);
  v1::AggregateResponse resp;
  AggregatePartial partial;
  absl::Status st = ops.Aggregate(req, &resp, &partial);
  EXPECT_EQ(st.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(fatal_calls, 1);
}

}  // namespace
}  // namespace gpujoin::server
