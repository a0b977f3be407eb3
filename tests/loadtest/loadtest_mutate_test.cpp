// Unit tests of the load tester's Mutate side (mutate_workload.hpp and the
// mutation parts of workload.hpp and runner.hpp): the upserts a pool holds
// (distinct counts, mapped values, never the reserved key, null payload), the
// check of a Mutate answer, lookups checked while mutations insert their
// misses, and mixed settings against the in-process echo service.
#include <gtest/gtest.h>

#include <set>
#include <unordered_map>

#include "echo_clients.hpp"
#include "mutate_workload.hpp"
#include "runner.hpp"
#include "workload.hpp"

namespace gpujoin::loadtest {
namespace {

// Upserts into the index LookupSpec-like workloads build: 5000 keys, 3 in 4
// rows hits, a small keyspace so that keys repeat within a batch.
WorkloadSpec MutateSpec() {
  WorkloadSpec s;
  s.rpc = Rpc::kMutate;
  s.build_keys = 5000;
  s.keyspace = 6000;
  s.hit_ratio = 0.75;
  s.seed = 42;
  return s;
}

TEST(MutatePool, UpsertsMappedValuesAndCountsDistinctKeys) {
  const WorkloadSpec spec = MutateSpec();
  const BuildData data = MakeBuildData(spec);
  std::unordered_map<uint32_t, uint32_t> index;
  for (size_t i = 0; i < data.keys.size(); ++i) index.emplace(data.keys[i], data.values[i]);

  const BatchPool pool = MakeBatchPool(spec, 2000, 3);
  ASSERT_TRUE(pool.known_mapping);
  EXPECT_TRUE(pool.explicit_values);
  EXPECT_TRUE(pool.null_payload.empty());
  for (const PoolBatch& b : pool.batches) {
    ASSERT_EQ(b.keys.size(), 2000u);
    ASSERT_EQ(b.mapped_values.size(), 2000u);
    std::set<uint32_t> distinct, hits;
    for (size_t r = 0; r < b.keys.size(); ++r) {
      EXPECT_NE(b.keys[r], kMissing) << "row " << r;
      auto it = index.find(b.keys[r]);
      // A hit upserts the value the build gave it.
      if (it != index.end()) {
        EXPECT_EQ(b.mapped_values[r], it->second) << "row " << r;
        hits.insert(b.keys[r]);
      }
      distinct.insert(b.keys[r]);
    }
    EXPECT_EQ(b.distinct_keys, distinct.size());
    EXPECT_EQ(b.distinct_hits, hits.size());
    EXPECT_LT(b.distinct_keys, 2000u) << "keys drawn from 6000 should repeat in 2000 rows";
  }
  // Mutations draw apart from the lookups of the same setting.
  WorkloadSpec lookups = spec;
  lookups.rpc = Rpc::kLookup;
  EXPECT_NE(MakeBatchPool(lookups, 2000, 1).batches[0].keys, pool.batches[0].keys);
  // Request bytes: a key and a value per row.
  EXPECT_EQ(pool.RequestBytes(spec), 2000u * 8);
}

TEST(MutatePool, AnExistingIndexGetsItsPayloadAsNullsAndRowIdsNoValues) {
  WorkloadSpec spec = MutateSpec();
  spec.build_keys = 0;  // an existing index: the mapping is unknown
  spec.keyspace = 1000;
  spec.explicit_values = false;
  spec.payload = {{"price", client::ColumnType::kFloat64}, {"name", client::ColumnType::kString}};
  const BatchPool pool = MakeBatchPool(spec, 300, 2);
  EXPECT_FALSE(pool.known_mapping);
  ASSERT_EQ(pool.null_payload.size(), 2u);
  for (const client::Column& c : pool.null_payload) {
    EXPECT_EQ(c.length, 300u);
    EXPECT_EQ(c.null_count, 300u);
  }
  const client::MutateBatch m = MutateBatchOf(pool, pool.batches[0]);
  EXPECT_EQ(m.upsert_keys.size(), 300u);
  EXPECT_TRUE(m.values.empty());
  ASSERT_EQ(m.payload.size(), 2u);
  EXPECT_EQ(m.payload[0].name, "price");
  EXPECT_EQ(m.payload[1].length, 300u);
  EXPECT_TRUE(m.delete_keys.empty());
  std::set<uint32_t> distinct(pool.batches[0].keys.begin(), pool.batches[0].keys.end());
  EXPECT_EQ(pool.batches[0].distinct_keys, distinct.size());
}

// What a server answers `b` on an index that holds every hit and none of the
// misses: the hits updated, the other keys inserted.
client::MutateResult RightMutate(const PoolBatch& b, uint64_t sequence) {
  client::MutateResult r;
  r.upsert_rows = b.rows();
  r.updated_keys = b.distinct_hits;
  r.inserted_keys = b.distinct_keys - b.distinct_hits;
  r.mutation_sequence = sequence;
  r.capacity = 16384;
  r.statistics.unique_keys = 6000;
  return r;
}

TEST(CheckMutate, AcceptsTheRightAnswerAndCatchesWrongOnes) {
  const BatchPool pool = MakeBatchPool(MutateSpec(), 500, 1);
  const PoolBatch& b = pool.batches[0];
  EXPECT_EQ(CheckMutate(pool, b, RightMutate(b, 7), 6), "");
  // A miss another stream inserted first is updated here: still right.
  client::MutateResult r = RightMutate(b, 7);
  r.updated_keys += 1;
  r.inserted_keys -= 1;
  EXPECT_EQ(CheckMutate(pool, b, r, 3), "");

  r = RightMutate(b, 7);
  r.upsert_rows -= 1;
  EXPECT_NE(CheckMutate(pool, b, r, 6).find("upsert rows"), std::string::npos);
  r = RightMutate(b, 7);
  r.inserted_keys += 1;
  EXPECT_NE(CheckMutate(pool, b, r, 6).find("distinct keys"), std::string::npos);
  r = RightMutate(b, 7);  // a hit counted as inserted: it was not in the index
  r.updated_keys -= 1;
  r.inserted_keys += 1;
  EXPECT_NE(CheckMutate(pool, b, r, 6).find("in the index"), std::string::npos);
  r = RightMutate(b, 7);
  r.not_found_keys = 1;
  EXPECT_NE(CheckMutate(pool, b, r, 6).find("without deletes"), std::string::npos);
  EXPECT_NE(CheckMutate(pool, b, RightMutate(b, 7), 7).find("sequence"), std::string::npos);
  r = RightMutate(b, 7);
  r.statistics.overflow_rows = 2;
  EXPECT_NE(CheckMutate(pool, b, r, 6), "");
}

client::LookupResult RightLookup(const PoolBatch& b) {
  client::LookupResult r;
  r.values = b.expected_values;
  r.found = b.expected_found;
  r.statistics.found = b.hits;
  r.statistics.missing = b.keys.size() - b.hits;
  return r;
}

// While mutations run, a miss may have been inserted: found with its mapped
// value, never another one, and a hit never goes missing.
TEST(CheckLookup, WhileMutationsRunAMissMayBeFoundWithItsMappedValue) {
  WorkloadSpec spec = MutateSpec();
  spec.rpc = Rpc::kLookup;
  BatchPool pool = MakeBatchPool(spec, 400, 1);
  const PoolBatch& b = pool.batches[0];
  size_t miss = 0;
  while (b.expected_found[miss]) ++miss;
  client::LookupResult r = RightLookup(b);
  r.found[miss] = 1;
  r.values[miss] = b.mapped_values[miss];
  r.statistics.found += 1;
  r.statistics.missing -= 1;
  EXPECT_NE(CheckLookup(pool, b, r, true), "") << "without mutations the miss must be missing";
  pool.mutated = true;
  EXPECT_EQ(CheckLookup(pool, b, r, true), "");
  EXPECT_EQ(CheckLookup(pool, b, RightLookup(b), true), "");

  client::LookupResult wrong = r;
  wrong.values[miss] ^= 1;
  EXPECT_NE(CheckLookup(pool, b, wrong, true).find("mapped value"), std::string::npos);
  wrong = r;  // the statistics must count the inserted row
  wrong.statistics.found -= 1;
  wrong.statistics.missing += 1;
  EXPECT_NE(CheckLookup(pool, b, wrong, true), "");
  wrong = RightLookup(b);  // a hit missing
  size_t hit = 0;
  while (!b.expected_found[hit]) ++hit;
  wrong.found[hit] = 0;
  wrong.values[hit] = kMissing;
  wrong.statistics.found -= 1;
  wrong.statistics.missing += 1;
  EXPECT_NE(CheckLookup(pool, b, wrong, false).find("at least"), std::string::npos);
}

TEST(WorkloadSpec, MutationsNeedALowestRowIndex) {
  WorkloadSpec spec = MutateSpec();
  EXPECT_TRUE(ValidateWorkloadSpec(spec).ok());
  spec.multiplicity = 3;
  EXPECT_FALSE(ValidateWorkloadSpec(spec).ok());
  spec.multiplicity = 1;
  spec.keep_all = true;
  EXPECT_FALSE(ValidateWorkloadSpec(spec).ok());
}

// Lookups with Mutate streams beside them against the in-process echo: one
// result per RPC, both clean, the Mutate streams not counted by --requests.
TEST(EchoRun, MixedSettingMeasuresLookupsAndMutationsApart) {
  EchoWithClients echo;
  ASSERT_NO_FATAL_FAILURE(StartEcho(1, /*own_connection=*/false, &echo));

  RunConfig cfg;
  cfg.workload = MutateSpec();
  cfg.workload.rpc = Rpc::kLookup;
  cfg.index = "echo";
  cfg.warmup_seconds = 0.05;
  cfg.duration_seconds = 0.3;
  BatchPool lookups = MakeBatchPool(cfg.workload, 256, 2);
  lookups.mutated = true;
  WorkloadSpec m = cfg.workload;
  m.rpc = Rpc::kMutate;
  const BatchPool mutations = MakeBatchPool(m, 64, 2);
  const std::vector<SettingResult> results =
      RunMixedSetting(Target::kEcho, echo.raw, lookups, 2, &mutations, 3, cfg);
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0].rpc, Rpc::kLookup);
  EXPECT_EQ(results[0].concurrency, 2);
  EXPECT_EQ(results[0].batch_rows, 256u);
  EXPECT_EQ(results[1].rpc, Rpc::kMutate);
  EXPECT_EQ(results[1].concurrency, 3);
  EXPECT_EQ(results[1].batch_rows, 64u);
  for (const SettingResult& r : results) {
    EXPECT_EQ(r.ErrorCount(), 0u) << RpcName(r.rpc) << ": " << r.first_error << r.first_wrong;
    EXPECT_GT(r.batches, 0u) << RpcName(r.rpc);
    EXPECT_EQ(r.keys, r.batches * r.batch_rows);
    EXPECT_EQ(r.latency.count, r.batches);
    EXPECT_EQ(r.seconds, results[0].seconds);
  }
  EXPECT_EQ(results[1].request_bytes, results[1].batches * 64 * 8);

  cfg.duration_seconds = 60;  // the lookups' request bound must end the run
  cfg.requests = 20;
  const std::vector<SettingResult> bounded =
      RunMixedSetting(Target::kEcho, echo.raw, lookups, 1, &mutations, 1, cfg);
  EXPECT_EQ(bounded[0].batches, 20u);
  EXPECT_LT(bounded[0].seconds, 60.0);
}

}  // namespace
}  // namespace gpujoin::loadtest
