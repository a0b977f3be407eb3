// Unit tests of the load tester's pieces: option parsing, the generated workload
// and its expected answers, the answer checks (a wrong answer must be caught),
// latency percentiles, the report formats, and whole settings run against the
// in-process echo service (no gpujoind needed).
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <set>
#include <unordered_map>

#include "echo_clients.hpp"
#include "echo_service.hpp"
#include "options.hpp"
#include "report.hpp"
#include "runner.hpp"
#include "workload.hpp"

namespace gpujoin::loadtest {
namespace {

TEST(ParseCount, AcceptsSuffixesAndRejectsJunk) {
  EXPECT_EQ(*ParseCount("1000", "--x"), 1000u);
  EXPECT_EQ(*ParseCount("64K", "--x"), 65536u);
  EXPECT_EQ(*ParseCount("1M", "--x"), 1048576u);
  EXPECT_EQ(*ParseCount("2g", "--x"), uint64_t{2} << 30);
  for (const char* bad : {"", "0", "K", "12Q", "-3", "1.5M", "99999999999999999999"}) {
    auto r = ParseCount(bad, "--batch-rows");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(std::string(r.status().message()).find("--batch-rows"), std::string::npos);
  }
}

TEST(ParseCountList, SplitsOnCommas) {
  auto v = ParseCountList("1K,64K,1M", "--batch-rows");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, (std::vector<uint64_t>{1024, 65536, 1048576}));
  EXPECT_FALSE(ParseCountList("1K,,2", "--batch-rows").ok());
}

TEST(ParseRange, IsInclusiveWithStep) {
  EXPECT_EQ(*ParseRange("1:16:5", "--c"), (std::vector<uint64_t>{1, 6, 11, 16}));
  EXPECT_EQ(*ParseRange("2:4", "--c"), (std::vector<uint64_t>{2, 3, 4}));
  EXPECT_EQ(*ParseRange("3", "--c"), (std::vector<uint64_t>{3}));
  EXPECT_FALSE(ParseRange("4:2", "--c").ok());
  EXPECT_FALSE(ParseRange("1:2:3:4", "--c").ok());
  EXPECT_FALSE(ParseRange("1:100000", "--c").ok());
}

TEST(Mix, IsInjectiveOnASample) {
  std::set<uint32_t> seen;
  for (uint32_t i = 0; i < 100000; ++i) seen.insert(Mix(i, 7));
  EXPECT_EQ(seen.size(), 100000u);
  EXPECT_NE(Mix(5, 1), Mix(5, 2));
}

TEST(WorkloadSpec, RejectsImpossibleSettings) {
  WorkloadSpec s;
  s.build_keys = 1000;
  s.hit_ratio = 1.5;
  EXPECT_FALSE(ValidateWorkloadSpec(s).ok());
  s.hit_ratio = 0.5;
  s.keyspace = 1000;  // no room for misses
  auto st = ValidateWorkloadSpec(s);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(std::string(st.message()).find("--keyspace"), std::string::npos);
  s.keyspace = uint64_t{1} << 32;
  EXPECT_TRUE(ValidateWorkloadSpec(s).ok());
  s.rpc = Rpc::kAggregate;
  s.groups = 0;
  EXPECT_FALSE(ValidateWorkloadSpec(s).ok());
}

WorkloadSpec LookupSpec() {
  WorkloadSpec s;
  s.build_keys = 5000;
  s.hit_ratio = 0.75;
  s.seed = 42;
  return s;
}

TEST(BatchPool, HasExactHitCountAndConsistentExpectations) {
  const WorkloadSpec spec = LookupSpec();
  const BuildData data = MakeBuildData(spec);
  std::unordered_map<uint32_t, uint32_t> index;
  for (size_t i = 0; i < data.keys.size(); ++i) index.emplace(data.keys[i], data.values[i]);
  ASSERT_EQ(index.size(), data.keys.size()) << "build keys must be distinct";

  const BatchPool pool = MakeBatchPool(spec, 1000, 3);
  ASSERT_TRUE(pool.known_mapping);
  ASSERT_EQ(pool.batches.size(), 3u);
  for (const PoolBatch& b : pool.batches) {
    ASSERT_EQ(b.keys.size(), 1000u);
    EXPECT_EQ(b.hits, 750u);
    EXPECT_EQ(b.expected_left.size(), 750u);
    uint64_t found = 0;
    for (size_t r = 0; r < b.keys.size(); ++r) {
      auto it = index.find(b.keys[r]);
      const bool hit = it != index.end();
      EXPECT_EQ(b.expected_found[r], hit ? 1 : 0) << "row " << r;
      EXPECT_EQ(b.expected_values[r], hit ? it->second : kMissing) << "row " << r;
      found += hit;
    }
    EXPECT_EQ(found, 750u);
    for (size_t k = 1; k < b.expected_left.size(); ++k) {
      EXPECT_LT(b.expected_left[k - 1], b.expected_left[k]);
    }
  }
  EXPECT_NE(pool.batches[0].keys, pool.batches[1].keys);
}

TEST(Mix64, IsInjectiveOnASampleAndSpansTheHighWord) {
  std::set<uint64_t> seen;
  uint64_t high = 0;
  for (uint64_t i = 0; i < 100000; ++i) {
    const uint64_t k = Mix64(i, 7);
    seen.insert(k);
    high += k >> 32 != 0;
  }
  EXPECT_EQ(seen.size(), 100000u);
  EXPECT_GT(high, 99000u);  // keys over the full 64-bit range, not below 2^32
  EXPECT_NE(Mix64(5, 1), Mix64(5, 2));
}

// --key-type u64: the built index and the query batches carry uint64
// keys from Mix64, with the same exact hits and expected answers.
TEST(BatchPool, Uint64KeysHaveExactHitsAndExpectations) {
  WorkloadSpec spec = LookupSpec();
  spec.key_kind = KeyKind::kUint64;
  ASSERT_TRUE(ValidateWorkloadSpec(spec).ok());
  const BuildData data = MakeBuildData(spec);
  EXPECT_TRUE(data.keys.empty());
  ASSERT_EQ(data.keys64.size(), spec.build_keys);
  EXPECT_EQ(data.Keys().type(), client::KeyType::kUint64);
  std::unordered_map<uint64_t, uint32_t> index;
  for (size_t i = 0; i < data.keys64.size(); ++i) index.emplace(data.keys64[i], data.values[i]);
  ASSERT_EQ(index.size(), data.keys64.size());
  const BatchPool pool = MakeBatchPool(spec, 1000, 2);
  EXPECT_EQ(pool.RequestBytes(spec), 8000u);
  for (const PoolBatch& b : pool.batches) {
    ASSERT_EQ(b.rows(), 1000u);
    EXPECT_TRUE(b.keys.empty());
    EXPECT_EQ(b.QueryKeys().type(), client::KeyType::kUint64);
    uint64_t found = 0;
    for (size_t r = 0; r < b.rows(); ++r) {
      auto it = index.find(b.keys64[r]);
      const bool hit = it != index.end();
      EXPECT_EQ(b.expected_values[r], hit ? it->second : kMissing) << "row " << r;
      found += hit;
    }
    EXPECT_EQ(found, b.hits);
    EXPECT_EQ(b.hits, 750u);
  }
  // Without a known mapping the keys are drawn over the full range too.
  spec.build_keys = 0;
  const BatchPool unknown = MakeBatchPool(spec, 1000, 1);
  uint64_t high = 0;
  for (uint64_t k : unknown.batches[0].keys64) high += k >> 32 != 0;
  EXPECT_GT(high, 990u);
  // Aggregates keep dense uint32 group keys.
  spec.rpc = Rpc::kAggregate;
  EXPECT_FALSE(ValidateWorkloadSpec(spec).ok());
}

// A key of key columns as one string (the columns' row values joined), for
// reference maps.
std::string RowKey(const KeyColumnData& k, size_t r) { return k.RowText(r); }

// --key-type str16, str32, uuid, pair: the key columns of the built index are
// distinct, of the kind's shape, and the query batches have the same exact
// hits and expected answers as integer keys; a copy of a batch sends its own
// buffers.
TEST(BatchPool, KeyColumnKindsHaveExactHitsAndExpectations) {
  for (KeyKind kind : {KeyKind::kStr16, KeyKind::kStr32, KeyKind::kUuid, KeyKind::kPair}) {
    SCOPED_TRACE(KeyKindName(kind));
    EXPECT_EQ(*ParseKeyKind(KeyKindName(kind)), kind);
    WorkloadSpec spec = LookupSpec();
    spec.key_kind = kind;
    ASSERT_TRUE(ValidateWorkloadSpec(spec).ok());
    const BuildData data = MakeBuildData(spec);
    EXPECT_TRUE(data.keys.empty() && data.keys64.empty());
    const client::Keys keys = data.Keys();
    ASSERT_EQ(keys.type(), client::KeyType::kColumns);
    ASSERT_EQ(keys.size(), spec.build_keys);
    ASSERT_EQ(keys.column_count(), KeyColumnsOf(kind).size());
    ASSERT_TRUE(client::CheckKeys(keys, "keys").ok());
    std::unordered_map<std::string, uint32_t> index;
    for (size_t i = 0; i < keys.size(); ++i)
      index.emplace(RowKey(data.key_columns, i), data.values[i]);
    ASSERT_EQ(index.size(), keys.size()) << "build keys must be distinct";
    if (kind == KeyKind::kPair) {
      std::set<uint32_t> a;  // neither column alone is the key
      for (size_t i = 0; i < keys.size(); ++i)
        a.insert(data.key_columns.column(0).Value<uint32_t>(i));
      EXPECT_LT(a.size(), keys.size());
    } else {
      const size_t width = kind == KeyKind::kStr16 ? 16 : kind == KeyKind::kStr32 ? 32 : 36;
      const std::string_view k0 = data.key_columns.column(0).String(0);
      EXPECT_EQ(k0.size(), width);
      if (kind == KeyKind::kUuid) {
        EXPECT_EQ(k0[8], '-');
        EXPECT_EQ(k0[14], '4') << k0;  // version 4
        EXPECT_NE(std::string_view("89ab").find(k0[19]), std::string_view::npos) << k0;
      }
    }
    const BatchPool pool = MakeBatchPool(spec, 1000, 2);
    EXPECT_EQ(pool.RequestBytes(spec), 1000u * KeyWireBytes(kind));
    for (const PoolBatch& b : pool.batches) {
      ASSERT_EQ(b.rows(), 1000u);
      ASSERT_EQ(b.QueryKeys().type(), client::KeyType::kColumns);
      uint64_t found = 0;
      for (size_t r = 0; r < b.rows(); ++r) {
        auto it = index.find(RowKey(b.key_columns, r));
        const bool hit = it != index.end();
        EXPECT_EQ(b.expected_found[r], hit ? 1 : 0) << "row " << r;
        EXPECT_EQ(b.expected_values[r], hit ? it->second : kMissing) << "row " << r;
        found += hit;
      }
      EXPECT_EQ(found, 750u);
      EXPECT_EQ(b.hits, 750u);
    }
    const PoolBatch copy = pool.batches[0];
    ASSERT_EQ(copy.QueryKeys().size(), 1000u);
    EXPECT_NE(copy.QueryKeys().column(0).data.data(),
              pool.batches[0].QueryKeys().column(0).data.data());
    EXPECT_EQ(RowKey(copy.key_columns, 999), RowKey(pool.batches[0].key_columns, 999));
    // An existing index: keys of the same shape, drawn from the keyspace.
    spec.build_keys = 0;
    const BatchPool unknown = MakeBatchPool(spec, 100, 1);
    EXPECT_EQ(unknown.batches[0].rows(), 100u);
    spec.rpc = Rpc::kAggregate;
    EXPECT_FALSE(ValidateWorkloadSpec(spec).ok());
  }
  EXPECT_FALSE(ParseKeyKind("u16").ok());
}

client::LookupResult RightLookup(const PoolBatch& b) {
  client::LookupResult r;
  r.values = b.expected_values;
  r.found = b.expected_found;
  r.statistics.found = b.hits;
  r.statistics.missing = b.keys.size() - b.hits;
  return r;
}

TEST(CheckLookup, AcceptsTheRightAnswerAndCatchesWrongOnes) {
  const BatchPool pool = MakeBatchPool(LookupSpec(), 200, 2);
  const PoolBatch& b = pool.batches[0];
  EXPECT_EQ(CheckLookup(pool, b, RightLookup(b), true), "");

  // One wrong value of a found row: caught by the full check only.
  client::LookupResult r = RightLookup(b);
  const size_t hit_row = b.expected_left[0];
  r.values[hit_row] ^= 1;
  EXPECT_EQ(CheckLookup(pool, b, r, false), "");
  EXPECT_NE(CheckLookup(pool, b, r, true).find("row " + std::to_string(hit_row)),
            std::string::npos);

  r = RightLookup(b);
  r.values.pop_back();
  EXPECT_NE(CheckLookup(pool, b, r, false), "");

  r = RightLookup(b);  // statistics that disagree with the mask
  r.statistics.found += 1;
  EXPECT_NE(CheckLookup(pool, b, r, false), "");

  r = RightLookup(b);  // a missing row with a value
  for (size_t i = 0; i < b.keys.size(); ++i) {
    if (!b.expected_found[i]) {
      r.values[i] = 7;
      break;
    }
  }
  EXPECT_NE(CheckLookup(pool, b, r, true), "");
}

// With an unknown mapping (an existing index) only the structure can be checked.
TEST(CheckLookup, ChecksStructureWithoutAMapping) {
  WorkloadSpec spec;
  spec.keyspace = 1000;
  const BatchPool pool = MakeBatchPool(spec, 50, 1);
  ASSERT_FALSE(pool.known_mapping);
  const PoolBatch& b = pool.batches[0];
  client::LookupResult r;
  r.values.assign(50, kMissing);
  r.found.assign(50, 0);
  r.values[3] = 99;
  r.found[3] = 1;
  r.statistics.found = 1;
  r.statistics.missing = 49;
  EXPECT_EQ(CheckLookup(pool, b, r, true), "");
  r.found[3] = 2;
  EXPECT_NE(CheckLookup(pool, b, r, true).find("row 3"), std::string::npos);
  r.found[3] = 0;  // missing, yet a value
  EXPECT_NE(CheckLookup(pool, b, r, true).find("row 3"), std::string::npos);
}

TEST(CheckJoin, AcceptsTheRightAnswerAndCatchesWrongOnes) {
  WorkloadSpec spec = LookupSpec();
  spec.rpc = Rpc::kJoin;
  const BatchPool pool = MakeBatchPool(spec, 300, 2);
  const PoolBatch& b = pool.batches[1];
  client::JoinResult r;
  r.results.resize(1);
  auto& p = r.results[0];
  p.left_rows = b.expected_left;
  p.right_rows = b.expected_right;
  p.count = b.hits;
  p.capacity = b.hits;
  p.statistics.found = b.hits;
  p.statistics.missing = b.keys.size() - b.hits;
  EXPECT_EQ(CheckJoin(pool, b, r, true), "");

  client::JoinResult wrong = r;
  wrong.results[0].right_rows[3] += 1;
  EXPECT_NE(CheckJoin(pool, b, wrong, true).find("pair 3"), std::string::npos);
  wrong = r;
  std::swap(wrong.results[0].left_rows[0], wrong.results[0].left_rows[1]);
  EXPECT_EQ(CheckJoin(pool, b, wrong, false), "");  // only sampled answers are compared pairwise
  EXPECT_NE(CheckJoin(pool, b, wrong, true).find("pair 0"), std::string::npos);
  wrong = r;
  wrong.results[0].overflow = true;
  EXPECT_NE(CheckJoin(pool, b, wrong, false), "");
}

TEST(CheckAggregate, ComputesExactSumsAndCatchesWrongOnes) {
  WorkloadSpec spec;
  spec.rpc = Rpc::kAggregate;
  spec.groups = 10;
  spec.aggregate_op = client::AggregateOp::kSum;
  const BatchPool pool = MakeBatchPool(spec, 500, 2);
  const PoolBatch& b = pool.batches[0];
  std::vector<float> sums(10, 0.0f);
  std::vector<uint32_t> counts(10, 0);
  for (size_t r = 0; r < b.keys.size(); ++r) {
    sums[b.keys[r]] += b.agg_values[r];
    ++counts[b.keys[r]];
  }
  client::AggregateResult r;
  r.values = sums;
  r.contributing_rows = counts;
  r.rows = b.keys.size();
  EXPECT_EQ(CheckAggregate(spec, pool, b, r, true), "");
  r.values[4] += 1;
  EXPECT_NE(CheckAggregate(spec, pool, b, r, true).find("group 4"), std::string::npos);
}

// ---------------------------------------------------------------- multiplicity and join kinds

constexpr client::JoinKind kKinds[] = {client::JoinKind::kInner, client::JoinKind::kLeftOuter,
                                       client::JoinKind::kLeftSemi, client::JoinKind::kLeftAnti};

WorkloadSpec MultiSpec(client::JoinKind kind, uint32_t multiplicity) {
  WorkloadSpec s = LookupSpec();
  s.rpc = Rpc::kJoin;
  s.build_keys = 700;
  s.multiplicity = multiplicity;
  s.keep_all = true;
  s.join_kind = kind;
  return s;
}

TEST(WorkloadSpec, RejectsImpossibleMultiplicityAndJoinKinds) {
  WorkloadSpec s = MultiSpec(client::JoinKind::kInner, 4);
  EXPECT_TRUE(ValidateWorkloadSpec(s).ok());
  EXPECT_EQ(BuildRows(s), 2800u);
  s.multiplicity = 0;
  EXPECT_NE(std::string(ValidateWorkloadSpec(s).message()).find("--multiplicity"),
            std::string::npos);
  s.multiplicity = 2;
  s.build_keys = 0;  // an existing index: its groups are unknown
  EXPECT_FALSE(ValidateWorkloadSpec(s).ok());
  s.build_keys = uint64_t{1} << 31;  // 2^32 rows do not fit an index
  EXPECT_NE(std::string(ValidateWorkloadSpec(s).message()).find("2^32"), std::string::npos);
  s = MultiSpec(client::JoinKind::kLeftSemi, 1);
  s.rpc = Rpc::kLookup;
  EXPECT_NE(std::string(ValidateWorkloadSpec(s).message()).find("--join-kind"), std::string::npos);
}

// The build rows of key i are i, i + build_keys, ... (duplicates across
// chunks); the expected pairs of every kind equal a nested-loop join of the
// batch against those rows, in left then right-row order.
TEST(BatchPool, MultiplicityGivesTheNestedLoopPairsOfEveryKind) {
  for (client::JoinKind kind : kKinds) {
    SCOPED_TRACE(std::string(client::JoinKindName(kind)));
    const WorkloadSpec spec = MultiSpec(kind, 3);
    const BuildData data = MakeBuildData(spec);
    ASSERT_EQ(data.keys.size(), 2100u);
    EXPECT_EQ(data.keys[5], data.keys[705]);
    EXPECT_EQ(data.keys[5], data.keys[1405]);
    std::unordered_map<uint32_t, std::vector<uint32_t>> rows_of;  // key -> values in row order
    for (size_t r = 0; r < data.keys.size(); ++r) rows_of[data.keys[r]].push_back(data.values[r]);
    ASSERT_EQ(rows_of.size(), 700u);
    const BatchPool pool = MakeBatchPool(spec, 400, 2);
    EXPECT_TRUE(pool.keep_all);
    EXPECT_EQ(pool.multiplicity, 3u);
    for (const PoolBatch& b : pool.batches) {
      std::vector<uint32_t> left, right;
      for (uint32_t r = 0; r < b.keys.size(); ++r) {
        const auto it = rows_of.find(b.keys[r]);
        const bool hit = it != rows_of.end();
        EXPECT_EQ(b.expected_found[r], hit ? 1 : 0);
        EXPECT_EQ(b.expected_values[r], hit ? it->second[0] : kMissing);
        const bool all = kind == client::JoinKind::kInner || kind == client::JoinKind::kLeftOuter;
        if (hit && kind != client::JoinKind::kLeftAnti) {
          for (size_t t = 0; t < (all ? it->second.size() : 1); ++t) {
            left.push_back(r);
            right.push_back(it->second[t]);
          }
        }
        if (!hit && (kind == client::JoinKind::kLeftOuter || kind == client::JoinKind::kLeftAnti)) {
          left.push_back(r);
          right.push_back(kMissing);
        }
      }
      EXPECT_EQ(b.hits, 300u);
      EXPECT_EQ(b.expected_left, left);
      EXPECT_EQ(b.expected_right, right);
    }
  }
  // Inner at multiplicity 3 and hit ratio 0.75: 3 pairs per hit.
  EXPECT_EQ(
      MakeBatchPool(MultiSpec(client::JoinKind::kInner, 3), 400, 1).batches[0].expected_left.size(),
      900u);
}

client::JoinResult RightJoin(const PoolBatch& b) {
  client::JoinResult r;
  r.results.resize(1);
  auto& p = r.results[0];
  p.left_rows = b.expected_left;
  p.right_rows = b.expected_right;
  p.count = b.expected_left.size();
  p.capacity = p.count;
  p.statistics.found = b.hits;
  p.statistics.missing = b.rows() - b.hits;
  return r;
}

TEST(CheckJoin, EveryKindAtMultiplicityAcceptsTheRightAnswerAndCatchesWrongOnes) {
  for (client::JoinKind kind : kKinds) {
    SCOPED_TRACE(std::string(client::JoinKindName(kind)));
    const BatchPool pool = MakeBatchPool(MultiSpec(kind, 4), 300, 1);
    const PoolBatch& b = pool.batches[0];
    const client::JoinResult right = RightJoin(b);
    EXPECT_EQ(CheckJoin(pool, b, right, true), "");
    // One pair fewer: the count no longer matches.
    client::JoinResult wrong = right;
    wrong.results[0].left_rows.pop_back();
    wrong.results[0].right_rows.pop_back();
    wrong.results[0].count -= 1;
    EXPECT_NE(CheckJoin(pool, b, wrong, false), "");
    // A right row of the wrong group member: only the full check sees it.
    wrong = right;
    const size_t k = wrong.results[0].right_rows.size() / 2;
    wrong.results[0].right_rows[k] ^= 1;
    EXPECT_EQ(CheckJoin(pool, b, wrong, false), "");
    EXPECT_NE(CheckJoin(pool, b, wrong, true).find("pair " + std::to_string(k)), std::string::npos);
  }
}

// Without a known mapping only the structure is checked: on a keep_all index
// inner and left outer joins may repeat a left row, semi and anti may not.
TEST(CheckJoin, StructureOfAnUnknownKeepAllIndex) {
  WorkloadSpec spec;
  spec.rpc = Rpc::kJoin;
  spec.keyspace = 1000;
  spec.keep_all = true;
  const BatchPool inner = MakeBatchPool(spec, 4, 1);
  ASSERT_FALSE(inner.known_mapping);
  client::JoinResult r;
  r.results.resize(1);
  auto& p = r.results[0];
  p.left_rows = {0, 0, 0, 2};
  p.right_rows = {5, 6, 7, 1};
  p.count = 4;
  p.capacity = 4;
  p.statistics.found = 2;
  p.statistics.missing = 2;
  EXPECT_EQ(CheckJoin(inner, inner.batches[0], r, true), "");
  spec.join_kind = client::JoinKind::kLeftSemi;
  const BatchPool semi = MakeBatchPool(spec, 4, 1);
  EXPECT_NE(CheckJoin(semi, semi.batches[0], r, false), "");  // 4 pairs for 2 found rows
  p.left_rows = {0, 2};
  p.right_rows = {5, 1};
  p.count = p.capacity = 2;
  EXPECT_EQ(CheckJoin(semi, semi.batches[0], r, true), "");
  spec.join_kind = client::JoinKind::kLeftAnti;
  const BatchPool anti = MakeBatchPool(spec, 4, 1);
  p.left_rows = {1, 3};
  p.right_rows = {kMissing, 9};  // an anti pair with a right row
  EXPECT_NE(CheckJoin(anti, anti.batches[0], r, true).find("pair 1"), std::string::npos);
}

TEST(CheckLookup, KeepAllAnswersCarryTheGroupSize) {
  WorkloadSpec spec = MultiSpec(client::JoinKind::kInner, 5);
  spec.rpc = Rpc::kLookup;
  const BatchPool pool = MakeBatchPool(spec, 200, 1);
  const PoolBatch& b = pool.batches[0];
  client::LookupResult r = RightLookup(b);
  EXPECT_NE(CheckLookup(pool, b, r, false).find("match counts"), std::string::npos);
  for (uint8_t f : b.expected_found) r.match_counts.push_back(f ? 5 : 0);
  EXPECT_EQ(CheckLookup(pool, b, r, true), "");
  r.match_counts[b.expected_left[0]] = 4;
  EXPECT_NE(CheckLookup(pool, b, r, true).find("4 matches"), std::string::npos);
}

TEST(Summarize, UsesNearestRankPercentiles) {
  std::vector<int64_t> ns;
  for (int i = 100; i >= 1; --i) ns.push_back(i * 1000000);  // 1..100 ms, unordered
  const LatencySummary s = Summarize(ns);
  EXPECT_EQ(s.count, 100u);
  EXPECT_DOUBLE_EQ(s.p50_ms, 50);
  EXPECT_DOUBLE_EQ(s.p90_ms, 90);
  EXPECT_DOUBLE_EQ(s.p99_ms, 99);
  EXPECT_DOUBLE_EQ(s.p999_ms, 100);  // rank ceil(99.9) = 100
  EXPECT_DOUBLE_EQ(s.max_ms, 100);
  EXPECT_DOUBLE_EQ(s.mean_ms, 50.5);
  std::vector<int64_t> none;
  EXPECT_EQ(Summarize(none).count, 0u);
  // 2000 samples: p99.9 is the 1998th smallest, below the maximum.
  std::vector<int64_t> many;
  for (int i = 1; i <= 2000; ++i) many.push_back(i * 1000000);
  EXPECT_DOUBLE_EQ(Summarize(many).p999_ms, 1998);
}

// A setting measured against the server, the echo and Redis: the server row
// carries its ratios to both in JSON, and the table ends with one comparison
// line per setting naming only the pairs that exist.
TEST(Report, ComparesTheServerWithEchoAndRedis) {
  auto row = [](Target t, uint64_t rows, double p50, uint64_t keys) {
    SettingResult r;
    r.target = t;
    r.batch_rows = rows;
    r.concurrency = 1;
    r.channels = t == Target::kRedis ? 1 : 2;  // channels are no part of a setting
    r.in_flight = 2;
    r.seconds = 1;
    r.keys = keys;
    r.latency.p50_ms = p50;
    r.latency.p999_ms = 3 * p50;
    return r;
  };
  const std::vector<SettingResult> results = {
      row(Target::kServer, 100, 1.31, 2400), row(Target::kEcho, 100, 1.0, 4000),
      row(Target::kRedis, 100, 1.0 / 0.92 * 1.31, 1000), row(Target::kServer, 1024, 2.0, 5000),
      row(Target::kEcho, 1024, 1.0, 9000)};
  RunHeader h;
  h.server = "127.0.0.1:1";
  h.redis = "127.0.0.1:2";
  const auto doc = nlohmann::json::parse(FormatJson(h, results));
  const auto& s = doc["results"][0];
  EXPECT_NEAR(s["p50_over_echo"].get<double>(), 1.31, 1e-9);
  EXPECT_NEAR(s["p50_over_redis"].get<double>(), 0.92, 1e-9);
  EXPECT_NEAR(s["keys_per_second_over_redis"].get<double>(), 2.4, 1e-9);
  EXPECT_DOUBLE_EQ(s["latency_ms"]["p999"].get<double>(), 3 * 1.31);
  EXPECT_EQ(doc["header"]["redis"], "127.0.0.1:2");
  for (int i : {1, 2}) {
    EXPECT_FALSE(doc["results"][i].contains("p50_over_echo")) << doc["results"][i].dump(2);
  }
  EXPECT_TRUE(doc["results"][3].contains("p50_over_echo"));
  EXPECT_FALSE(doc["results"][3].contains("p50_over_redis"));
  EXPECT_FALSE(doc["results"][3].contains("keys_per_second_over_redis"));

  const std::string table = FormatTable(h, results);
  EXPECT_NE(table.find("p99.9ms"), std::string::npos) << table;
  EXPECT_NE(table.find("# rows=100 conc=1: p50 server/echo 1.31x, server/redis 0.92x; keys/s "
                       "server/redis 2.40x\n"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("# rows=1K conc=1: p50 server/echo 2.00x\n"), std::string::npos) << table;
}

TEST(Report, JsonCarriesTheEchoFraction) {
  SettingResult server, echo;
  server.batch_rows = echo.batch_rows = 1024;
  server.concurrency = echo.concurrency = 4;
  server.channels = echo.channels = 1;
  server.in_flight = echo.in_flight = 2;
  echo.target = Target::kEcho;
  server.seconds = echo.seconds = 2;
  server.keys = 1000;
  echo.keys = 4000;
  server.errors["UNAVAILABLE"] = 2;
  RunHeader h;
  h.server = "127.0.0.1:1";
  const auto doc = nlohmann::json::parse(FormatJson(h, {server, echo}));
  ASSERT_EQ(doc["results"].size(), 2u);
  EXPECT_DOUBLE_EQ(doc["results"][0]["fraction_of_echo"].get<double>(), 0.25);
  EXPECT_FALSE(doc["results"][1].contains("fraction_of_echo"));
  EXPECT_EQ(doc["total_errors"].get<uint64_t>(), 2u);
  EXPECT_EQ(doc["results"][0]["errors"]["UNAVAILABLE"].get<uint64_t>(), 2u);
  const std::string table = FormatTable(h, {server, echo});
  EXPECT_NE(table.find("25%"), std::string::npos) << table;
}

// A whole setting against the in-process echo: it must run, count batches and
// report no errors (the echo answers every RPC with the right sizes).
class EchoRun : public ::testing::TestWithParam<Rpc> {};

// A run of `rpc` against the echo's index with the LookupSpec() workload (an
// aggregate builds no index).
RunConfig EchoConfig(Rpc rpc) {
  RunConfig cfg;
  cfg.workload = LookupSpec();
  cfg.workload.rpc = rpc;
  if (rpc == Rpc::kAggregate) cfg.workload.build_keys = 0;
  cfg.index = "echo";
  return cfg;
}

TEST_P(EchoRun, MeasuresWithoutErrors) {
  EchoWithClients echo;
  ASSERT_NO_FATAL_FAILURE(StartEcho(2, /*own_connection=*/true, &echo));
  RunConfig cfg = EchoConfig(GetParam());
  cfg.in_flight = 3;
  cfg.warmup_seconds = 0.05;
  cfg.duration_seconds = 0.3;
  cfg.verify_every = 1;
  const BatchPool pool = MakeBatchPool(cfg.workload, 512, 4);
  const SettingResult r = RunSetting(Target::kEcho, echo.raw, pool, 3, cfg);
  EXPECT_EQ(r.ErrorCount(), 0u) << r.first_error;
  EXPECT_EQ(r.wrong_answers, 0u) << r.first_wrong;
  EXPECT_GT(r.batches, 0u);
  EXPECT_EQ(r.keys, r.batches * 512);
  EXPECT_EQ(r.latency.count, r.batches);
  EXPECT_EQ(r.channels, 2);
  EXPECT_GT(r.seconds, 0.0);
}

TEST_P(EchoRun, StopsAfterTheRequestedBatches) {
  EchoWithClients echo;
  ASSERT_NO_FATAL_FAILURE(StartEcho(1, /*own_connection=*/false, &echo));
  RunConfig cfg = EchoConfig(GetParam());
  cfg.warmup_seconds = 0;
  cfg.duration_seconds = 60;  // the request bound must end the run long before this
  cfg.requests = 25;
  const BatchPool pool = MakeBatchPool(cfg.workload, 64, 2);
  const SettingResult r = RunSetting(Target::kEcho, echo.raw, pool, 2, cfg);
  EXPECT_EQ(r.batches, 25u);
  EXPECT_EQ(r.ErrorCount(), 0u) << r.first_error;
  EXPECT_LT(r.seconds, 60.0);
}

// Regression guard for "a wrong answer is an error": the echo answers with the keys
// as values, so checking its answers as if they came from the real server must
// report every sampled answer as wrong, under WRONG_ANSWER in the errors.
TEST(RunSetting, CountsWrongAnswersAsErrors) {
  EchoWithClients echo;
  ASSERT_NO_FATAL_FAILURE(StartEcho(1, /*own_connection=*/false, &echo));
  RunConfig cfg = EchoConfig(Rpc::kLookup);
  cfg.warmup_seconds = 0;
  cfg.duration_seconds = 0.2;  // wrong answers never count as measured batches
  const BatchPool pool = MakeBatchPool(cfg.workload, 256, 2);
  const SettingResult r = RunSetting(Target::kServer, echo.raw, pool, 1, cfg);
  EXPECT_GT(r.wrong_answers, 0u);
  EXPECT_EQ(r.errors.count("WRONG_ANSWER"), 1u);
  EXPECT_EQ(r.ErrorCount(), r.wrong_answers);
  EXPECT_FALSE(r.first_wrong.empty());
}

}  // namespace

// Readable parameter values in test output.
void PrintTo(Rpc rpc, std::ostream* os) { *os << RpcName(rpc); }

namespace {

TEST(EchoRun, Uint64KeysEchoTheirLowWords) {
  EchoWithClients echo;
  ASSERT_NO_FATAL_FAILURE(StartEcho(1, /*own_connection=*/false, &echo));
  for (Rpc rpc : {Rpc::kLookup, Rpc::kJoin}) {
    RunConfig cfg = EchoConfig(rpc);
    cfg.workload.key_kind = KeyKind::kUint64;
    cfg.warmup_seconds = 0;
    cfg.requests = 10;
    cfg.verify_every = 1;
    const BatchPool pool = MakeBatchPool(cfg.workload, 256, 2);
    const SettingResult r = RunSetting(Target::kEcho, echo.raw, pool, 1, cfg);
    EXPECT_EQ(r.batches, 10u) << RpcName(rpc);
    EXPECT_EQ(r.ErrorCount(), 0u) << RpcName(rpc) << ": " << r.first_error;
    EXPECT_EQ(r.wrong_answers, 0u) << RpcName(rpc) << ": " << r.first_wrong;
  }
}

// Key columns travel to the echo, which answers their row numbers.
TEST(EchoRun, KeyColumnsEchoTheirRowNumbers) {
  EchoWithClients echo;
  ASSERT_NO_FATAL_FAILURE(StartEcho(1, /*own_connection=*/false, &echo));
  for (KeyKind kind : {KeyKind::kUuid, KeyKind::kPair}) {
    for (Rpc rpc : {Rpc::kLookup, Rpc::kJoin}) {
      RunConfig cfg = EchoConfig(rpc);
      cfg.workload.key_kind = kind;
      cfg.warmup_seconds = 0;
      cfg.requests = 10;
      cfg.verify_every = 1;
      const BatchPool pool = MakeBatchPool(cfg.workload, 256, 2);
      const SettingResult r = RunSetting(Target::kEcho, echo.raw, pool, 1, cfg);
      EXPECT_EQ(r.batches, 10u) << RpcName(rpc) << " " << KeyKindName(kind);
      EXPECT_EQ(r.ErrorCount(), 0u)
          << RpcName(rpc) << " " << KeyKindName(kind) << ": " << r.first_error << r.first_wrong;
      EXPECT_EQ(r.request_bytes, 10u * 256 * KeyWireBytes(kind));
    }
  }
}

// The echo answers as many pairs as a one-to-many join asks for (more than its
// rows), so a setting at multiplicity 4 runs clean against it and counts pairs.
TEST(EchoRun, JoinsAtMultiplicityAnswerEveryPair) {
  EchoWithClients echo;
  ASSERT_NO_FATAL_FAILURE(StartEcho(1, /*own_connection=*/false, &echo));
  for (client::JoinKind kind : kKinds) {
    RunConfig cfg;
    cfg.workload = MultiSpec(kind, 4);
    cfg.index = "echo";
    cfg.warmup_seconds = 0;
    cfg.requests = 8;
    cfg.verify_every = 1;
    const BatchPool pool = MakeBatchPool(cfg.workload, 256, 2);
    const SettingResult r = RunSetting(Target::kEcho, echo.raw, pool, 1, cfg);
    EXPECT_EQ(r.batches, 8u) << client::JoinKindName(kind);
    EXPECT_EQ(r.ErrorCount(), 0u) << client::JoinKindName(kind) << ": " << r.first_error;
    uint64_t pairs = 0;  // the batches alternate over the pool
    for (int i = 0; i < 8; ++i) pairs += pool.batches[i % 2].expected_left.size();
    EXPECT_EQ(r.pairs, pairs) << client::JoinKindName(kind);
  }
}

INSTANTIATE_TEST_SUITE_P(Rpcs, EchoRun,
                         ::testing::Values(Rpc::kLookup, Rpc::kJoin, Rpc::kAggregate,
                                           Rpc::kMutate),
                         [](const auto& info) { return std::string(RpcName(info.param)); });

}  // namespace
}  // namespace gpujoin::loadtest
