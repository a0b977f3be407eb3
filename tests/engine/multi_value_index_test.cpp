// Multi-value indexes (DuplicatePolicy::kKeepAll, docs/engine.md "Multi-value
// indexes and join kinds"): the table and statistics of the kLowestRow build
// of the same rows plus max_group_rows; groups of every valid row in source
// order from plain builds (generated and explicit values, chunked), batch
// builds (masks, row bases) and builds past the probe bound; lookups with the
// first match's value and payload and the match counts; payload per kept row;
// memory_bytes; rebuilds and empty builds; and the validation of join kinds,
// policies and match counts. Typed over key word x backend, so the CUDA
// backend runs the same cases where a device exists; outputs poisoned first.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "multi_value_model.hpp"
#include "test_backends.hpp"

namespace gpujoin::engine::testing {
namespace {

using ::testing::HasSubstr;

template <class Config>
class MultiValueIndexTest : public MultiValueTest<Config> {
 protected:
  using K = typename Config::K;

  // Checks a lookup of `keys` on `index` against the model: the first match's
  // value, found and probes as the contract's probe of the table, the match
  // counts (kKeepAll: the group size; kLowestRow: 1), the first match's payload.
  void ExpectLookup(const HashIndex& index, const std::vector<K>& keys,
                    const std::vector<size_t>& cuts, const GroupModel<K>& model,
                    const std::vector<const OwnedColumn*>& payload) {
    const auto out = this->LookupAll(index, Cut(keys, cuts));
    const bool keep_all = index.spec().duplicates == DuplicatePolicy::kKeepAll;
    QueryStatistics expect;
    std::vector<std::vector<std::optional<std::string>>> cells(payload.size());
    for (size_t i = 0; i < keys.size(); ++i) {
      const auto* group = model.Find(keys[i]);
      const ContractRow row = ContractLookup(model.table, keys[i], index.spec().probe_bound());
      ASSERT_EQ(row.found, group != nullptr) << "query row " << i;
      ASSERT_EQ(out.values[i], group ? (*group)[0].value : kEmptyKey) << "query row " << i;
      ASSERT_EQ(out.found[i], group ? 1 : 0) << "query row " << i;
      ASSERT_EQ(out.probes[i], row.probes) << "query row " << i;
      ASSERT_EQ(out.match_counts[i], group ? (keep_all ? group->size() : 1) : 0)
          << "query row " << i;
      for (size_t c = 0; c < payload.size(); ++c) {
        cells[c].push_back(group ? payload[c]->At((*group)[0].row) : std::nullopt);
      }
      ++(row.found ? expect.found : expect.missing);
      expect.total_probes += row.probes;
      expect.max_probes = std::max<uint64_t>(expect.max_probes, row.probes);
    }
    EXPECT_EQ(out.statistics, expect);
    ASSERT_EQ(out.gathered.size(), payload.size());
    for (size_t c = 0; c < payload.size(); ++c) ExpectGatheredColumn(out.gathered[c], cells[c]);
  }

  // Checks every group of `index` through an inner join of each stored key
  // once: its rows' values and payload in source order.
  void ExpectGroups(const HashIndex& index, const GroupModel<K>& model,
                    const std::vector<const OwnedColumn*>& payload) {
    std::vector<typename MultiValueTest<Config>::Batch> batches(1);
    for (const auto& [key, group] : model.groups) batches[0].keys.push_back(key);
    const std::vector<ExpectedPair> expected =
        ModelJoin<K>(JoinKind::kInner, model, batches[0].keys, batches[0].Ids());
    batches[0].capacity = expected.size();
    this->Join(index, JoinKind::kInner, batches);
    this->ExpectBatch(batches[0], expected, payload, index.build_statistics().overflow_rows > 0);
  }

  // What memory_bytes() must be after a build of `index` whose payload columns
  // `payload` kept `model`'s rows: the table, GroupStorageBytes of its slots
  // and kept rows, and per column PayloadStorageBytes of the kept rows (with
  // the kept rows' string bytes); each column's info too (null count: kept rows
  // whose value is null).
  void ExpectMemory(const HashIndex& index, const GroupModel<K>& model,
                    const std::vector<const OwnedColumn*>& payload) {
    const uint64_t kept = model.kept();
    uint64_t expected = this->backend_->IndexBytes(index.spec()) +
                        GroupStorageBytes(index.spec(), index.spec().capacity, kept);
    ASSERT_EQ(index.payload().size(), payload.size());
    for (size_t c = 0; c < payload.size(); ++c) {
      PayloadShape shape = PayloadShapeOf(payload[c]->View());
      shape.string_bytes = 0;
      uint64_t nulls = 0;
      for (const auto& [key, group] : model.groups) {
        for (const auto& r : group) {
          const auto cell = payload[c]->At(r.row);
          nulls += !cell.has_value();
          if (IsVariableWidth(shape.type) && cell) shape.string_bytes += cell->size();
        }
      }
      const PayloadColumnInfo& info = index.payload()[c];
      EXPECT_EQ(info.type, payload[c]->type);
      EXPECT_EQ(info.null_count, nulls) << "column " << c;
      EXPECT_EQ(info.bytes, PayloadStorageBytes(kept, shape)) << "column " << c;
      expected += info.bytes;
    }
    EXPECT_EQ(index.memory_bytes(), expected);
  }
};
TYPED_TEST_SUITE(MultiValueIndexTest, KeyedBackends, KeyedBackendNames);

// For every group shape, a kKeepAll build has the kLowestRow build's table
// (same snapshot) and statistics, plus max_group_rows (0 on kLowestRow); its
// groups hold every valid row of their key in source order, with payload.
TYPED_TEST(MultiValueIndexTest, KeepAllHasTheLowestRowTableAndEveryRow) {
  using K = typename TestFixture::K;
  constexpr size_t kRows = 600;
  for (const GroupShape shape : kAllGroupShapes) {
    SCOPED_TRACE(GroupShapeName(shape));
    std::mt19937 rng(2110 + int(shape));
    std::vector<uint32_t> domain = ShapeDomain(shape, kRows, rng);
    for (size_t r = 5; r < kRows; r += 101) domain[r] = kEmptyKey;
    const std::vector<K> keys = this->KeysOf(domain);
    const OwnedColumn amount = Int64Column(kRows), name = StringColumn(kRows);
    const std::vector<const OwnedColumn*> payload = {&amount, &name};
    auto lowest = this->NewIndexWith(DuplicatePolicy::kLowestRow, 2048);
    auto all = this->NewIndexWith(DuplicatePolicy::kKeepAll, 2048);
    ASSERT_NE(lowest, nullptr);
    ASSERT_NE(all, nullptr);
    EXPECT_EQ(all->memory_bytes(), this->backend_->IndexBytes(all->spec())) << "before a build";
    const BuildStatistics s1 = this->BuildWith(*lowest, Cut(keys, {0, 250, 251}), payload, {}, 9);
    const BuildStatistics s2 = this->BuildWith(*all, Cut(keys, {3, 400}), payload, {}, 9);
    const auto source = PlainRowsOf<K>(keys, std::nullopt, 9);
    const GroupModel<K> model = GroupModelOf<K>(*all, source);
    EXPECT_EQ(SnapshotAs<K>(*all).keys, SnapshotAs<K>(*lowest).keys);
    EXPECT_EQ(SnapshotAs<K>(*all).values, SnapshotAs<K>(*lowest).values);
    EXPECT_EQ(s1.max_group_rows, 0u);
    EXPECT_EQ(s2.max_group_rows, model.largest());
    if (shape == GroupShape::kOneKey) EXPECT_EQ(s2.max_group_rows, kRows - 6);
    if (shape == GroupShape::kSingles) EXPECT_EQ(s2.max_group_rows, 1u);
    EXPECT_EQ(all->build_statistics(), s2);
    BuildStatistics same = s1;
    same.max_group_rows = s2.max_group_rows;
    // A parallel insert counts a duplicate row's probes by when it arrived.
    if (!this->IsCpu()) same.total_probes = s2.total_probes;
    EXPECT_EQ(s2, same);
    EXPECT_EQ(s2.invalid_rows, 6u);
    EXPECT_EQ(model.kept(), kRows - 6) << "every valid row is kept";
    EXPECT_EQ(all->built_rows(), kRows);
    this->ExpectGroups(*all, model, payload);
    this->ExpectMemory(*all, model, payload);
    // Lookups: every stored key, missing keys and reserved keys.
    std::vector<K> query;
    for (size_t i = 0; i < 300; ++i) {
      query.push_back(i % 7 == 0    ? this->Key(1u << 22)
                      : i % 11 == 0 ? TestFixture::kEmpty
                                    : keys[rng() % kRows]);
    }
    this->ExpectLookup(*all, query, {100}, model, payload);
    this->ExpectLookup(*lowest, query, {}, GroupModelOf<K>(*lowest, source), payload);
  }
}

// Explicit values: each kept row carries its own value, in row order (rows
// of a key with equal values stay apart); the table keeps the first's.
TYPED_TEST(MultiValueIndexTest, ExplicitValuesKeepEveryRowsValue) {
  using K = typename TestFixture::K;
  const std::vector<K> keys = this->KeysOf({4, 3, 4, 4, 3, kEmptyKey, 4});
  const std::vector<uint32_t> values = {40, 30, 41, 40, 31, 99, 7};
  const OwnedColumn amount = Int64Column(keys.size());
  const std::vector<const OwnedColumn*> payload = {&amount};
  auto index = this->NewIndexWith(DuplicatePolicy::kKeepAll, 16);
  ASSERT_NE(index, nullptr);
  const BuildStatistics stats =
      this->BuildWith(*index, Cut(keys, {2}), payload, Cut(values, {1, 5}));
  EXPECT_EQ(stats.unique_keys, 2u);
  EXPECT_EQ(stats.duplicate_rows, 4u);
  EXPECT_EQ(stats.invalid_rows, 1u);
  EXPECT_EQ(stats.max_group_rows, 4u);
  std::vector<typename TestFixture::Batch> batches(1);
  batches[0].keys = this->KeysOf({3, 4});
  batches[0].capacity = 7;
  this->Join(*index, JoinKind::kInner, batches);
  EXPECT_EQ(batches[0].result.count, 6u);
  EXPECT_EQ(std::vector<uint32_t>(batches[0].out_right.begin(), batches[0].out_right.begin() + 6),
            (std::vector<uint32_t>{30, 31, 40, 41, 40, 7}));
  const auto looked = this->LookupAll(*index, One(batches[0].keys));
  EXPECT_EQ(looked.values, (std::vector<uint32_t>{30, 40}));
  EXPECT_EQ(looked.match_counts, (std::vector<uint32_t>{2, 4}));
  const GroupModel<K> model = GroupModelOf<K>(*index, PlainRowsOf<K>(keys, values));
  this->ExpectGroups(*index, model, payload);
  this->ExpectMemory(*index, model, payload);
}

// Batch builds: masked-out and reserved rows are not kept, values are
// row_base + position, groups run in chunk order then position whatever the
// row bases; payload is aligned with every row of the chunks.
TYPED_TEST(MultiValueIndexTest, BatchBuildKeepsValidRowsInChunkOrder) {
  using K = typename TestFixture::K;
  const std::vector<K> a = this->KeysOf({1, 2, 1}), b = this->KeysOf({2, kEmptyKey, 1, 3}),
                       c = this->KeysOf({1, 1});
  const std::vector<uint32_t> mask_b = {1, 1, 0, 1}, mask_c = {0, 1};
  const std::vector<BatchChunkT<K>> chunks = {
      {a, 500, {}}, {{}, 7, {}}, {b, 100, mask_b}, {c, 0, mask_c}};
  const OwnedColumn name = StringColumn(9);
  const std::vector<const OwnedColumn*> payload = {&name};
  auto index = this->NewIndexWith(DuplicatePolicy::kKeepAll, 8);
  ASSERT_NE(index, nullptr);
  const BuildStatistics stats = this->BatchBuildWith(*index, chunks, payload);
  EXPECT_EQ(stats.invalid_rows, 3u);
  EXPECT_EQ(stats.unique_keys, 3u);
  EXPECT_EQ(stats.duplicate_rows, 3u);
  EXPECT_EQ(stats.max_group_rows, 3u);  // key 1: rows 0, 2 and 8
  auto lowest = this->NewIndexWith(DuplicatePolicy::kLowestRow, 8);
  ASSERT_NE(lowest, nullptr);
  BuildStatistics same = this->BatchBuildWith(*lowest, chunks, payload);
  same.max_group_rows = 3;
  if (!this->IsCpu()) same.total_probes = stats.total_probes;  // arrival order
  EXPECT_EQ(stats, same);
  EXPECT_EQ(SnapshotAs<K>(*index).keys, SnapshotAs<K>(*lowest).keys);
  EXPECT_EQ(SnapshotAs<K>(*index).values, SnapshotAs<K>(*lowest).values);
  const auto source = BatchRowsOf<K>(chunks);
  const GroupModel<K> model = GroupModelOf<K>(*index, source);
  std::vector<typename TestFixture::Batch> batches(1);
  batches[0].keys = this->KeysOf({1, 2, 3});
  batches[0].capacity = 8;
  this->Join(*index, JoinKind::kInner, batches);
  const std::vector<ExpectedPair> expected = NestedLoopJoin<K>(
      JoinKind::kInner, DuplicatePolicy::kKeepAll, batches[0].keys, batches[0].Ids(), source);
  this->ExpectBatch(batches[0], expected, payload, false);
  EXPECT_EQ(std::vector<uint32_t>(batches[0].out_right.begin(), batches[0].out_right.begin() + 6),
            (std::vector<uint32_t>{500, 502, 1, 501, 100, 103}));
  this->ExpectMemory(*index, model, payload);
}

// A small probe bound drops keys: overflow rows are not kept, the statistics
// are the kLowestRow build's, and each group follows the rule (the winner
// row, the lowest valid row with the slot's key and value, and every later
// valid row of its key).
TYPED_TEST(MultiValueIndexTest, OverflowKeepsTheGroupsOfTheRetainedKeys) {
  using K = typename TestFixture::K;
  constexpr uint32_t kCapacity = 16;
  std::vector<K> keys;
  const std::vector<K> colliding = KeysWithHomeOf<K>(kCapacity, 9, 5);
  for (int round = 0; round < 3; ++round) {
    for (K k : colliding) keys.push_back(k);
    keys.push_back(this->Key(1000 + round));
  }
  const OwnedColumn amount = Int64Column(keys.size());
  const std::vector<const OwnedColumn*> payload = {&amount};
  auto lowest = this->NewIndexWith(DuplicatePolicy::kLowestRow, kCapacity, 2);
  auto all = this->NewIndexWith(DuplicatePolicy::kKeepAll, kCapacity, 2);
  ASSERT_NE(all, nullptr);
  const BuildStatistics s1 = this->BuildWith(*lowest, One(keys), payload);
  const BuildStatistics s2 = this->BuildWith(*all, One(keys), payload);
  ASSERT_GT(s2.overflow_rows, 0u);
  EXPECT_EQ(s2.unique_keys + s2.duplicate_rows + s2.overflow_rows + s2.invalid_rows, keys.size());
  const GroupModel<K> model = GroupModelOf<K>(*all, PlainRowsOf<K>(keys));
  EXPECT_EQ(s2.max_group_rows, model.largest());
  EXPECT_LT(model.kept(), keys.size());
  if (this->IsCpu()) {
    BuildStatistics same = s1;
    same.max_group_rows = s2.max_group_rows;
    EXPECT_EQ(s2, same);
    EXPECT_EQ(model.kept(), s2.unique_keys + s2.duplicate_rows)
        << "sequentially, a dropped key never returns: its rows are the overflow rows";
  }
  this->ExpectGroups(*all, model, payload);
  this->ExpectLookup(*all, keys, {4}, model, payload);
  this->ExpectMemory(*all, model, payload);
}

// Rebuilds replace the groups and payload; a build without payload drops it;
// an empty build leaves empty groups (every key missing, max_group_rows 0) and
// the groups' per-slot ranges in memory_bytes.
TYPED_TEST(MultiValueIndexTest, RebuildsReplaceTheGroups) {
  using K = typename TestFixture::K;
  auto index = this->NewIndexWith(DuplicatePolicy::kKeepAll, 64);
  ASSERT_NE(index, nullptr);
  const std::vector<K> first = this->KeysOf({1, 1, 1, 2, 2, 3});
  const OwnedColumn amount = Int64Column(first.size());
  this->BuildWith(*index, One(first), {&amount});
  ASSERT_EQ(index->payload().size(), 1u);
  const std::vector<K> second = this->KeysOf({2, 4, 2});
  const BuildStatistics stats = this->BuildWith(*index, One(second), {}, std::nullopt, 50);
  EXPECT_EQ(stats.max_group_rows, 2u);
  EXPECT_TRUE(index->payload().empty());
  const GroupModel<K> model = GroupModelOf<K>(*index, PlainRowsOf<K>(second, std::nullopt, 50));
  this->ExpectGroups(*index, model, {});
  this->ExpectMemory(*index, model, {});
  const auto looked = this->LookupAll(*index, One(this->KeysOf({1, 2, 4})));
  EXPECT_EQ(looked.match_counts, (std::vector<uint32_t>{0, 2, 1}));
  EXPECT_EQ(looked.values, (std::vector<uint32_t>{kEmptyKey, 50, 51}));

  const OwnedColumn none = Int64Column(0);
  const BuildStatistics empty = this->BuildWith(*index, {}, {&none});
  EXPECT_EQ(empty, BuildStatistics{});
  EXPECT_EQ(index->memory_bytes(), this->backend_->IndexBytes(index->spec()) +
                                       GroupStorageBytes(index->spec(), index->spec().capacity, 0) +
                                       PayloadStorageBytes(0, PayloadShapeOf(none.View())));
  const auto after = this->LookupAll(*index, One(this->KeysOf({2, 4})));
  EXPECT_EQ(after.match_counts, (std::vector<uint32_t>{0, 0}));
  EXPECT_EQ(after.found, (std::vector<uint8_t>{0, 0}));
  std::vector<typename TestFixture::Batch> batches(1);
  batches[0].keys = this->KeysOf({2, 4});
  batches[0].capacity = 3;
  this->Join(*index, JoinKind::kLeftOuter, batches);
  this->ExpectBatch(batches[0], {{0, kEmptyKey, {}}, {1, kEmptyKey, {}}}, {&none}, false);
}

// Many rows with a hot key on a large table, so that every backend splits its
// work (cpu3: several parts per pass): lookups and groups match the model.
TYPED_TEST(MultiValueIndexTest, LargeSkewedBuildMatchesTheModel) {
  using K = typename TestFixture::K;
  constexpr size_t kRows = 100000;
  std::mt19937 rng(2111);
  std::vector<uint32_t> domain = ShapeDomain(GroupShape::kSkewed, kRows, rng);
  for (size_t r = 0; r < kRows; r += 997) domain[r] = kEmptyKey;
  const std::vector<K> keys = this->KeysOf(domain);
  const OwnedColumn amount = Int64Column(kRows);
  const std::vector<const OwnedColumn*> payload = {&amount};
  auto index = this->NewIndexWith(DuplicatePolicy::kKeepAll, 1u << 17);
  ASSERT_NE(index, nullptr);
  const BuildStatistics stats =
      this->BuildWith(*index, Cut(keys, {40000, 40000, 77777}), payload, std::nullopt, 3);
  const GroupModel<K> model = GroupModelOf<K>(*index, PlainRowsOf<K>(keys, std::nullopt, 3));
  EXPECT_EQ(stats.max_group_rows, model.largest());
  EXPECT_GT(stats.max_group_rows, kRows / 2 - kRows / 900);
  std::vector<K> query(50000);
  for (K& k : query) k = rng() % 5 == 0 ? this->Key(1u << 23) : keys[rng() % kRows];
  this->ExpectLookup(*index, query, {20000}, model, payload);
  this->ExpectGroups(*index, model, payload);
  this->ExpectMemory(*index, model, payload);
}

// On a kLowestRow index match_counts are 1 found / 0 missing.
TYPED_TEST(MultiValueIndexTest, LowestRowMatchCountsAreOneOrZero) {
  using K = typename TestFixture::K;
  auto index = this->NewIndexWith(DuplicatePolicy::kLowestRow, 16);
  ASSERT_NE(index, nullptr);
  const BuildStatistics stats = this->BuildWith(*index, One(this->KeysOf({7, 7, 8})));
  EXPECT_EQ(stats.max_group_rows, 0u);
  const auto out = this->LookupAll(*index, One(this->KeysOf({8, 9, 7, kEmptyKey})));
  EXPECT_EQ(out.match_counts, (std::vector<uint32_t>{1, 0, 1, 0}));
  EXPECT_EQ(out.values, (std::vector<uint32_t>{2, kEmptyKey, 0, kEmptyKey}));
}

// Validation: unknown join kinds and duplicate policies, misaligned or
// overlapping match_counts are INVALID_ARGUMENT naming the field; Run reports
// the same error and writes nothing.
class MultiValueValidateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto backend = CreateBackend(BackendKind::kCpu);
    ASSERT_TRUE(backend.ok());
    backend_ = std::move(*backend);
    auto index =
        backend_->CreateIndex(HashIndexSpec{16, 0, KeyType::kUint32, DuplicatePolicy::kKeepAll});
    ASSERT_TRUE(index.ok()) << index.status();
    index_ = std::move(*index);
    CommandGraph build;
    build.Add(BuildIndexNode{index_.get(), One(keys_), std::nullopt, 0, nullptr});
    ASSERT_TRUE(backend_->Run(build).ok());
  }

  void ExpectInvalid(const CommandGraph& graph, const std::vector<std::string>& fragments) {
    const absl::Status status = graph.Validate();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    for (const auto& f : fragments) EXPECT_THAT(std::string(status.message()), HasSubstr(f));
    EXPECT_EQ(backend_->Run(graph), status);
  }

  LookupNode Lookup() {
    LookupNode n;
    n.index = index_.get();
    n.keys = One(query_);
    n.values = values_;
    return n;
  }

  std::unique_ptr<Backend> backend_;
  std::unique_ptr<HashIndex> index_;
  std::vector<uint32_t> keys_ = {1, 2, 2, 3};
  std::vector<uint32_t> query_ = {1, 2, 9};
  std::vector<uint32_t> values_ = std::vector<uint32_t>(3, kPoison32);
};

TEST_F(MultiValueValidateTest, UnknownJoinKindNamesTheField) {
  std::vector<uint32_t> l(4, kPoison32), r(4, kPoison32);
  JoinResult result;
  JoinNode join;
  join.index = index_.get();
  join.kind = static_cast<JoinKind>(4);
  join.batches.push_back(JoinBatch{One(query_), {}, 0, l, r, &result, {}, {}});
  CommandGraph g;
  g.Add(join);
  ExpectInvalid(g, {"node 0 (join)", "kind 4 is not a join kind"});
  EXPECT_EQ(l, std::vector<uint32_t>(4, kPoison32));
  for (const JoinKind kind : kAllJoinKinds) {
    join.kind = kind;
    CommandGraph ok;
    ok.Add(join);
    EXPECT_TRUE(ok.Validate().ok()) << JoinKindName(kind);
  }
  EXPECT_EQ(JoinKindName(static_cast<JoinKind>(9)), "unknown");
}

TEST_F(MultiValueValidateTest, UnknownDuplicatePolicyNamesTheField) {
  HashIndexSpec spec{16, 0, KeyType::kUint32, static_cast<DuplicatePolicy>(2)};
  const auto index = backend_->CreateIndex(spec);
  EXPECT_EQ(index.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(index.status().message()), HasSubstr("duplicates 2"));
  EXPECT_EQ(DuplicatePolicyName(DuplicatePolicy::kKeepAll), "keep_all");
  EXPECT_EQ(DuplicatePolicyName(DuplicatePolicy::kLowestRow), "lowest_row");
}

TEST_F(MultiValueValidateTest, MatchCountsMustAlignWithTheQueryRows) {
  std::vector<uint32_t> counts(2, kPoison32);
  LookupNode n = Lookup();
  n.match_counts = counts;
  CommandGraph g;
  g.Add(n);
  ExpectInvalid(g, {"node 0 (lookup)", "match_counts has 2 rows but keys have 3"});
  EXPECT_EQ(values_, std::vector<uint32_t>(3, kPoison32));
  // Written, so it may not overlap anything else of the graph.
  LookupNode over = Lookup();
  over.match_counts = values_;
  CommandGraph g2;
  g2.Add(over);
  ExpectInvalid(g2, {"node 0 (lookup) values", "node 0 (lookup) match_counts"});
  std::vector<uint32_t> ok_counts(3, kPoison32);
  LookupNode ok = Lookup();
  ok.match_counts = ok_counts;
  CommandGraph g3;
  g3.Add(ok);
  ASSERT_TRUE(backend_->Run(g3).ok());
  EXPECT_EQ(ok_counts, (std::vector<uint32_t>{1, 2, 0}));
}

// The CPU build's transient memory: a kKeepAll build takes the winner of
// every slot and the slot of every row while it lays out its groups, and the
// source row of every kept row (at most every row) while it stores payload.
TEST(MultiValueMemoryTest, CpuBuildTransientBytesAndGroupStorage) {
  auto backend = CreateBackend(BackendKind::kCpu);
  ASSERT_TRUE(backend.ok());
  const HashIndexSpec lowest{64, 0};
  const HashIndexSpec all{64, 0, KeyType::kUint32, DuplicatePolicy::kKeepAll};
  BuildShape shape;
  shape.rows = 1000;
  EXPECT_EQ((*backend)->BuildTransientBytes(lowest, shape), 0u);
  EXPECT_EQ((*backend)->BuildTransientBytes(all, shape), 64u * 4 + 1000u * 4);
  shape.payload = {PayloadShape{ColumnType::kInt64, false, 0}};
  EXPECT_EQ((*backend)->BuildTransientBytes(lowest, shape), 64u * 4);
  EXPECT_EQ((*backend)->BuildTransientBytes(all, shape), 64u * 4 + 2000u * 4);
  EXPECT_EQ((*backend)->IndexBytes(all), (*backend)->IndexBytes(lowest));
  EXPECT_EQ(GroupStorageBytes(all, 64, 1000), 64u * 8 + 1000u * 4);
  EXPECT_EQ(GroupStorageBytes(lowest, 64, 1000), 0u);
}

}  // namespace
}  // namespace gpujoin::engine::testing
