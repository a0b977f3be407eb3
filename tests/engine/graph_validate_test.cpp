// CommandGraph::Validate: every error names the node, its kind, the field and the
// sizes; aliasing between written ranges and any other range is rejected across
// the whole graph. Backends run Validate first, so a rejected graph has no effect.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "test_backends.hpp"

namespace gpujoin::engine::testing {
namespace {

using ::testing::HasSubstr;

class GraphValidateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto backend = CreateBackend(BackendKind::kCpu);
    ASSERT_TRUE(backend.ok());
    backend_ = std::move(*backend);
    index_ = std::move(*backend_->CreateIndex(HashIndexSpec{16, 0}));
    unbuilt_ = std::move(*backend_->CreateIndex(HashIndexSpec{16, 0}));
    CommandGraph build;
    build.Add(BuildIndexNode{index_.get(), One(right_), std::nullopt, 0, nullptr});
    ASSERT_TRUE(backend_->Run(build).ok());
  }

  // Validates and expects INVALID_ARGUMENT whose message contains every fragment.
  void ExpectInvalid(const CommandGraph& graph, const std::vector<std::string>& fragments) {
    const absl::Status status = graph.Validate();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    for (const auto& f : fragments) EXPECT_THAT(std::string(status.message()), HasSubstr(f));
    // Run reports the same error.
    EXPECT_EQ(backend_->Run(graph), status);
  }

  LookupNode Lookup(std::span<const uint32_t> keys, std::span<uint32_t> values) {
    LookupNode n;
    n.index = index_.get();
    n.keys = ChunkedU32{keys};
    n.values = values;
    return n;
  }

  std::unique_ptr<Backend> backend_;
  std::unique_ptr<HashIndex> index_;
  std::unique_ptr<HashIndex> unbuilt_;
  std::vector<uint32_t> right_ = {1, 2, 3};
};

TEST_F(GraphValidateTest, EmptyGraphIsValid) { EXPECT_TRUE(CommandGraph().Validate().ok()); }

TEST_F(GraphValidateTest, BuildValueAndKeyTotalsMustMatch) {
  const std::vector<uint32_t> keys = {1, 2, 3}, values = {1, 2};
  CommandGraph g;
  g.Add(BuildIndexNode{index_.get(), One(keys), One(values), 0, nullptr});
  ExpectInvalid(g, {"node 0 (build)", "values have 2 rows but keys have 3"});
}

TEST_F(GraphValidateTest, NullIndex) {
  const std::vector<uint32_t> keys = {1};
  CommandGraph g;
  g.Add(BuildIndexNode{nullptr, One(keys), std::nullopt, 0, nullptr});
  ExpectInvalid(g, {"node 0 (build)", "index is null"});
  std::vector<uint32_t> out(1);
  CommandGraph g2;
  LookupNode n = Lookup(keys, out);
  n.index = nullptr;
  g2.Add(n);
  ExpectInvalid(g2, {"node 0 (lookup)", "index is null"});
}

TEST_F(GraphValidateTest, UnbuiltIndexIsAFailedPrecondition) {
  const std::vector<uint32_t> keys = {1};
  std::vector<uint32_t> out(1);
  CommandGraph g;
  LookupNode n = Lookup(keys, out);
  n.index = unbuilt_.get();
  g.Add(n);
  const absl::Status status = g.Validate();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("node 0 (lookup): index has not been built"));
  // A build earlier in the same graph satisfies the precondition.
  CommandGraph g2;
  g2.Add(BuildIndexNode{unbuilt_.get(), One(right_), std::nullopt, 0, nullptr});
  g2.Add(n);
  EXPECT_TRUE(g2.Validate().ok());
}

TEST_F(GraphValidateTest, LookupOutputsMustBeAlignedWithKeys) {
  const std::vector<uint32_t> keys(12, 1);
  std::vector<uint32_t> values(10), values12(12), probes(11);
  std::vector<uint8_t> found(13);
  CommandGraph g;
  g.Add(Lookup(keys, values));
  ExpectInvalid(g, {"node 0 (lookup): values has 10 rows but keys have 12"});
  CommandGraph g2;
  LookupNode n = Lookup(keys, values12);
  n.found = found;
  g2.Add(n);
  ExpectInvalid(g2, {"node 0 (lookup): found has 13 rows but keys have 12"});
  CommandGraph g3;
  n.found = {};
  n.probes = probes;
  g3.Add(n);
  ExpectInvalid(g3, {"node 0 (lookup): probes has 11 rows but keys have 12"});
}

TEST_F(GraphValidateTest, QueryProbeBoundMayNotExceedCapacity) {
  const std::vector<uint32_t> keys = {1};
  std::vector<uint32_t> out(1);
  CommandGraph g;
  LookupNode n = Lookup(keys, out);
  n.max_probe_count = 17;
  g.Add(n);
  ExpectInvalid(g, {"node 0 (lookup)", "max_probe_count 17 exceeds the index capacity 16"});
  JoinResult result;
  CommandGraph g2;
  JoinNode join;
  join.index = index_.get();
  join.max_probe_count = 32;
  join.batches.push_back(JoinBatch{One(keys), {}, 0, {}, {}, &result, {}, {}});
  g2.Add(join);
  ExpectInvalid(g2, {"node 0 (join)", "max_probe_count 32"});
}

TEST_F(GraphValidateTest, JoinShapeErrors) {
  const std::vector<uint32_t> keys = {1, 2, 3}, left_rows = {0, 1};
  std::vector<uint32_t> l(4), r(3);
  JoinResult result;
  {
    CommandGraph g;
    JoinNode join;
    join.index = index_.get();
    g.Add(join);
    ExpectInvalid(g, {"node 0 (join)", "batches is empty"});
  }
  {
    CommandGraph g;
    JoinNode join;
    join.index = index_.get();
    join.batches.push_back(JoinBatch{One(keys), {}, 0, l, r, &result, {}, {}});
    g.Add(join);
    ExpectInvalid(g,
                  {"node 0 (join) batch 0", "out_left_rows has 4 rows but out_right_rows has 3"});
  }
  {
    CommandGraph g;
    JoinNode join;
    join.index = index_.get();
    join.batches.push_back(JoinBatch{One(keys), {}, 0, {}, {}, &result, {}, {}});
    join.batches.push_back(JoinBatch{One(keys), left_rows, 0, {}, {}, &result, {}, {}});
    g.Add(join);
    ExpectInvalid(g, {"node 0 (join) batch 1", "left_rows has 2 rows but keys have 3"});
  }
  {
    CommandGraph g;
    JoinNode join;
    join.index = index_.get();
    join.batches.push_back(JoinBatch{One(keys), {}, 0, {}, {}, nullptr, {}, {}});
    g.Add(join);
    ExpectInvalid(g, {"node 0 (join) batch 0", "result is null"});
  }
}

TEST_F(GraphValidateTest, BatchChunkValiditySize) {
  const std::vector<uint32_t> keys = {1, 2, 3}, validity = {1, 1};
  CommandGraph g;
  BuildBatchIndexNode n;
  n.index = index_.get();
  n.chunks = {BatchChunk{keys, 0, {}}, BatchChunk{keys, 3, validity}};
  g.Add(n);
  ExpectInvalid(g, {"node 0 (batch build)", "chunk 1 validity has 2 rows but its keys have 3"});
}

TEST_F(GraphValidateTest, AggregateShapeErrors) {
  const std::vector<uint32_t> keys = {0, 1, 2}, mask = {1};
  const std::vector<float> values = {1, 2, 3}, short_values = {1, 2};
  std::vector<uint32_t> contributing(2);
  std::vector<uint64_t> out(3);
  auto expect = [&](const AggregateNode& n, const std::vector<std::string>& fragments) {
    CommandGraph g;
    g.Add(n);
    ExpectInvalid(g, fragments);
  };
  AggregateNode count;
  count.op = AggregateOp::kCount;
  count.keys = One(keys);
  expect(count, {"node 0 (aggregate count)", "output is empty"});
  count.output = out;
  count.values = ChunkedF32{std::span(values)};
  expect(count, {"values must be unset for count, got 3 rows of float32"});
  count.values = {};
  count.mask = One(mask);
  expect(count, {"mask has 1 rows but keys have 3"});
  count.mask.reset();
  std::vector<uint8_t> flags(3);
  count.overflow = flags;
  expect(count, {"overflow must be empty for count", "got 3"});
  count.overflow = {};
  count.contributing_rows = contributing;
  expect(count, {"contributing_rows has 2 rows but outputs have 3"});

  AggregateNode sum;
  sum.op = AggregateOp::kSum;
  sum.keys = One(keys);
  expect(sum, {"node 0 (aggregate sum)", "values are unset"});
  sum.values = ChunkedF32{std::span(values)};
  expect(sum, {"node 0 (aggregate sum)", "output is empty"});
  sum.output = out;
  sum.values = ChunkedF32{std::span(short_values)};
  expect(sum, {"values have 2 rows but keys have 3"});
  sum.values = ChunkedF32{std::span(values)};
  sum.overflow = flags;
  expect(sum, {"overflow must be empty for sum over float32"});
  sum.overflow = {};
  CommandGraph ok;
  ok.Add(sum);
  EXPECT_TRUE(ok.Validate().ok());
}

TEST_F(GraphValidateTest, WrittenRangeMayNotOverlapItsOwnInput) {
  std::vector<uint32_t> buf(8, 1);
  CommandGraph g;
  // values written over the keys being read.
  g.Add(Lookup(std::span<const uint32_t>(buf.data(), 4), std::span<uint32_t>(buf.data() + 2, 4)));
  ExpectInvalid(g, {"node 0 (lookup) keys", "node 0 (lookup) values", "overlaps"});
}

TEST_F(GraphValidateTest, WrittenRangesMayNotOverlapAcrossNodes) {
  const std::vector<uint32_t> keys = {1, 2, 3, 4};
  std::vector<uint32_t> out(6);
  CommandGraph g;
  g.Add(Lookup(keys, std::span<uint32_t>(out.data(), 4)));
  g.Add(Lookup(keys, std::span<uint32_t>(out.data() + 2, 4)));
  ExpectInvalid(g, {"node 0 (lookup) values", "node 1 (lookup) values"});
}

TEST_F(GraphValidateTest, LaterWriteOverAnEarlierReadIsRejected) {
  std::vector<uint32_t> keys = {0, 1, 1, 0};
  const std::vector<uint32_t> group_keys = {0, 1};
  std::vector<uint32_t> values(4);
  CommandGraph g;
  g.Add(Lookup(keys, values));
  AggregateNode agg;
  agg.op = AggregateOp::kCount;
  agg.keys = One(group_keys);
  // Overwrites node 0's keys (validation rejects the graph before anything runs).
  agg.output = std::span<uint64_t>(reinterpret_cast<uint64_t*>(keys.data()), 2);
  g.Add(agg);
  ExpectInvalid(g, {"node 0 (lookup) keys", "node 1 (aggregate count) output"});
}

TEST_F(GraphValidateTest, ReadingAnEarlierNodesOutputIsRejectedToo) {
  // The aliasing rule covers the whole graph: a node may not read a range that any
  // node writes, so chained steps use separate graphs (or copies).
  const std::vector<uint32_t> keys = {1, 2, 3, 4};
  std::vector<uint32_t> values(4);
  std::vector<uint64_t> counts(8);
  CommandGraph g;
  g.Add(Lookup(keys, values));
  AggregateNode agg;
  agg.op = AggregateOp::kCount;
  agg.keys = One(values);
  agg.output = counts;
  g.Add(agg);
  ExpectInvalid(g, {"node 0 (lookup) values (written", "node 1 (aggregate count) keys (read"});
}

TEST_F(GraphValidateTest, HashOutputOverlappingItsInputIsRejected) {
  // Four uint32 rows; the 64-bit output is placed over the column's own bytes.
  std::vector<uint64_t> storage(4, 0);
  std::vector<uint8_t> validity(1);
  HashNode hash;
  HashColumn col;
  col.type = ColumnType::kUint32;
  col.data = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(storage.data()), 16);
  col.length = 4;
  hash.columns = {col};
  hash.bits = HashBits::k64;
  hash.out64 = storage;
  hash.out_validity = validity;
  CommandGraph g;
  g.Add(hash);
  ExpectInvalid(g, {"node 0 (hash) column 0 data (read", "node 0 (hash) out64 (written"});
  // The unused 32-bit output is ignored, even where it overlaps.
  std::vector<uint64_t> out(4);
  hash.out64 = out;
  hash.out32 = std::span<uint32_t>(reinterpret_cast<uint32_t*>(storage.data()), 4);
  CommandGraph g2;
  g2.Add(hash);
  EXPECT_TRUE(g2.Validate().ok()) << g2.Validate();
}

TEST_F(GraphValidateTest, ReadingTheSameBufferTwiceIsAllowed) {
  const std::vector<uint32_t> keys = {1, 2};
  std::vector<uint32_t> a(2), b(2);
  CommandGraph g;
  g.Add(Lookup(keys, a));
  g.Add(Lookup(keys, b));
  EXPECT_TRUE(g.Validate().ok());
}

TEST_F(GraphValidateTest, SharedStatisticsAndResultStructsAlias) {
  const std::vector<uint32_t> keys = {1};
  std::vector<uint32_t> a(1), b(1);
  QueryStatistics stats;
  CommandGraph g;
  LookupNode n0 = Lookup(keys, a), n1 = Lookup(keys, b);
  n0.statistics = &stats;
  n1.statistics = &stats;
  g.Add(n0);
  g.Add(n1);
  ExpectInvalid(g, {"node 0 (lookup) statistics", "node 1 (lookup) statistics"});

  JoinResult result;
  CommandGraph g2;
  JoinNode join;
  join.index = index_.get();
  join.batches.push_back(JoinBatch{One(keys), {}, 0, {}, {}, &result, {}, {}});
  join.batches.push_back(JoinBatch{One(keys), {}, 0, {}, {}, &result, {}, {}});
  g2.Add(join);
  ExpectInvalid(g2, {"batch 0 result", "batch 1 result"});
}

TEST_F(GraphValidateTest, RejectedGraphHasNoEffect) {
  std::vector<uint32_t> keys = {1, 2};
  std::vector<uint32_t> a = {7, 7};
  std::vector<uint32_t> bad(3);
  CommandGraph g;
  g.Add(Lookup(keys, a));
  g.Add(Lookup(keys, bad));  // invalid: 3 values for 2 keys
  EXPECT_FALSE(backend_->Run(g).ok());
  EXPECT_EQ(a, (std::vector<uint32_t>{7, 7})) << "node 0 must not run when node 1 is invalid";
}

TEST_F(GraphValidateTest, ForeignIndexIsRejectedByTheCpuBackend) {
  // An index type the CPU backend did not create.
  class OtherIndex final : public HashIndex {
   public:
    OtherIndex() : HashIndex(HashIndexSpec{4, 0}) { RecordBuild({}, 0); }
    BackendKind backend() const override { return BackendKind::kCuda; }
    uint64_t memory_bytes() const override { return 0; }
    absl::StatusOr<TableSnapshot> Snapshot() const override { return TableSnapshot{}; }
    absl::StatusOr<TableSnapshot64> Snapshot64() const override {
      return SnapshotKeyTypeMismatch(KeyType::kUint32, KeyType::kUint64);
    }
  } other;
  const std::vector<uint32_t> keys = {1};
  std::vector<uint32_t> out(1);
  CommandGraph g;
  LookupNode n = Lookup(keys, out);
  n.index = &other;
  g.Add(n);
  EXPECT_TRUE(g.Validate().ok());
  const absl::Status status = backend_->Run(g);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("belongs to the cuda backend"));
}

}  // namespace
}  // namespace gpujoin::engine::testing
