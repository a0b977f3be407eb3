// Randomised property tests with fixed seeds (each failure prints its seed via
// SCOPED_TRACE). Every result is checked against plain models: an
// std::unordered_map with the lowest-row rule for build/lookup/join, and a
// direct per-group loop for aggregation. Probe statistics are checked against
// the stored layout (exact where the contract makes them exact, else bounded),
// and the sum of probes over the distinct present keys is checked to be
// independent of insertion order (a property of the Robin Hood layout).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <unordered_map>
#include <unordered_set>

#include "gpujoin/engine/aggregation.hpp"
#include "test_backends.hpp"

namespace gpujoin::engine::testing {
namespace {

constexpr uint32_t kSeeds[] = {1,   2,   3,   5,   8,   13,   21,   34,   55,   89,
                               144, 233, 377, 610, 987, 1597, 2584, 4181, 6765, 10946};

class PropertyTest : public BackendTest {};

// Random cut positions splitting `n` rows into up to `max_chunks` chunks (some empty).
std::vector<size_t> RandomCuts(std::mt19937& rng, size_t n, size_t max_chunks) {
  std::vector<size_t> cuts(rng() % max_chunks);
  for (auto& c : cuts) c = n == 0 ? 0 : rng() % (n + 1);
  std::sort(cuts.begin(), cuts.end());
  return cuts;
}

// A random workload: a key domain small enough for many duplicates, plus
// occasional reserved keys.
struct Workload {
  uint32_t capacity;
  uint32_t max_probe_count;
  std::vector<uint32_t> keys;
  std::vector<uint32_t> values;  // empty = generated from first_value
  uint32_t first_value;
};

Workload RandomWorkload(std::mt19937& rng) {
  Workload w;
  w.capacity = 1u << (rng() % 11);  // 1 .. 1024
  w.max_probe_count = rng() % 3 == 0 ? 1 + rng() % w.capacity : 0;
  const size_t rows = rng() % (2 * w.capacity + 8);
  const uint32_t domain = 1 + rng() % (2 * w.capacity + 4);
  const uint32_t key_base = rng();
  w.keys.resize(rows);
  for (auto& k : w.keys) k = rng() % 23 == 0 ? kEmptyKey : key_base + rng() % domain;
  w.first_value = rng() % 2 ? rng() : 0xfffffff0u;  // sometimes wraps
  if (rng() % 2) {
    w.values.resize(rows);
    for (auto& v : w.values) v = rng();
  }
  return w;
}

// Model: key -> value of its lowest valid row.
std::unordered_map<uint32_t, uint32_t> LowestRowModel(const Workload& w) {
  std::unordered_map<uint32_t, uint32_t> model;
  for (size_t r = 0; r < w.keys.size(); ++r) {
    if (w.keys[r] == kEmptyKey) continue;
    const uint32_t v = w.values.empty() ? w.first_value + static_cast<uint32_t>(r) : w.values[r];
    model.emplace(w.keys[r], v);  // keeps the first insertion
  }
  return model;
}

TEST_P(PropertyTest, BuildAndLookupMatchTheLowestRowModel) {
  for (uint32_t seed : kSeeds) {
    SCOPED_TRACE(::testing::Message() << "seed=" << seed);
    std::mt19937 rng(seed);
    const Workload w = RandomWorkload(rng);
    auto index = NewIndex(w.capacity, w.max_probe_count);
    ASSERT_NE(index, nullptr);
    std::optional<ChunkedU32> values;
    if (!w.values.empty()) values = Cut(w.values, RandomCuts(rng, w.values.size(), 5));
    const BuildStatistics s =
        Build(*index, Cut(w.keys, RandomCuts(rng, w.keys.size(), 5)), values, w.first_value);
    const auto model = LowestRowModel(w);
    const uint32_t bound = index->spec().probe_bound();
    const uint64_t invalid = std::count(w.keys.begin(), w.keys.end(), kEmptyKey);
    const uint64_t valid = w.keys.size() - invalid;

    // Build statistics invariants.
    EXPECT_EQ(s.unique_keys + s.duplicate_rows + s.overflow_rows + s.invalid_rows, w.keys.size());
    EXPECT_EQ(s.invalid_rows, invalid);
    EXPECT_LE(s.unique_keys, std::min<uint64_t>(w.capacity, model.size()));
    EXPECT_EQ(index->build_statistics(), s);
    // Probe statistics from the stored layout (docs/engine.md, "Build"): the
    // maximum is the largest displacement + 1 of a stored key, or the bound after
    // an overflow. Each stored key adds its displacement + 1 to the total, and
    // each duplicate row 1 .. its key's displacement + 1 (when it arrived), so
    // without duplicates and overflow the total is exact.
    const TableSnapshot table = SnapshotOf(*index);
    const StoredKeyProbes stored = StoredProbes(table);
    EXPECT_EQ(stored.keys, s.unique_keys);
    EXPECT_EQ(s.max_probes, s.overflow_rows == 0 ? stored.max : bound);
    if (s.overflow_rows == 0) {
      std::unordered_map<uint32_t, uint64_t> rows_of_key;
      for (uint32_t k : w.keys) {
        if (k != kEmptyKey) ++rows_of_key[k];
      }
      uint64_t most = 0;  // every row of a key examining as many slots as its last move
      for (uint32_t slot = 0; slot < table.keys.size(); ++slot) {
        const uint32_t k = table.keys[slot];
        if (k == kEmptyKey) continue;
        most += rows_of_key[k] * ContractLookup(table, k, bound).probes;
      }
      if (s.duplicate_rows == 0) {
        EXPECT_EQ(s.total_probes, stored.total);
      } else {
        EXPECT_GE(s.total_probes, stored.total + s.duplicate_rows);
        EXPECT_LE(s.total_probes, most);
      }
    } else {
      EXPECT_GE(s.total_probes, valid);
      EXPECT_LE(s.total_probes, valid * bound);
    }
    if (s.overflow_rows == 0) {
      EXPECT_EQ(s.unique_keys, model.size());
      EXPECT_EQ(s.duplicate_rows, valid - model.size());
    }
    if (bound == w.capacity) {
      // Without a tighter bound a key only overflows when the table is full.
      EXPECT_EQ(s.unique_keys, std::min<uint64_t>(w.capacity, model.size()));
    }

    // Query: every model key, some absent keys and reserved keys.
    std::vector<uint32_t> q;
    for (const auto& [k, v] : model) q.push_back(k);
    for (int i = 0; i < 50; ++i) q.push_back(rng() % 5 == 0 ? kEmptyKey : rng());
    std::shuffle(q.begin(), q.end(), rng);
    const uint32_t query_bound = rng() % 4 == 0 ? 1 + rng() % w.capacity : 0;
    const auto out = Lookup(*index, Cut(q, RandomCuts(rng, q.size(), 4)), query_bound);
    const uint32_t qb = query_bound != 0 ? query_bound : bound;
    QueryStatistics expect_stats;
    for (size_t i = 0; i < q.size(); ++i) {
      const auto it = model.find(q[i]);
      ASSERT_LE(out.probes[i], qb);
      if (q[i] == kEmptyKey) {
        ASSERT_EQ(out.probes[i], 0u);
      } else {
        ASSERT_GE(out.probes[i], 1u);
      }
      if (out.found[i]) {
        ASSERT_NE(it, model.end()) << "found a key that was never built: " << q[i];
        ASSERT_EQ(out.values[i], it->second) << "key " << q[i];
        ++expect_stats.found;
      } else {
        ASSERT_EQ(out.values[i], kEmptyKey);
        // Without overflow and with the build's own bound, every built key is found.
        if (s.overflow_rows == 0 && query_bound == 0) ASSERT_EQ(it, model.end()) << q[i];
        ++expect_stats.missing;
      }
      expect_stats.total_probes += out.probes[i];
      expect_stats.max_probes = std::max<uint64_t>(expect_stats.max_probes, out.probes[i]);
    }
    EXPECT_EQ(out.statistics, expect_stats);
    if (s.overflow_rows == 0 && query_bound == 0) EXPECT_EQ(expect_stats.found, model.size());
  }
}

TEST_P(PropertyTest, ProbeSumOverPresentKeysIsInsertionOrderIndependent) {
  for (uint32_t seed : kSeeds) {
    SCOPED_TRACE(::testing::Message() << "seed=" << seed);
    std::mt19937 rng(seed);
    const uint32_t capacity = 1u << (1 + rng() % 10);
    // Distinct keys, at most capacity of them, so nothing overflows at bound = capacity.
    std::unordered_set<uint32_t> distinct;
    const size_t n = 1 + rng() % capacity;
    while (distinct.size() < n) {
      const uint32_t k = rng() % (4 * capacity);
      if (k != kEmptyKey) distinct.insert(k);
    }
    std::vector<uint32_t> keys(distinct.begin(), distinct.end());
    std::sort(keys.begin(), keys.end());
    std::vector<uint32_t> shuffled = keys;
    std::shuffle(shuffled.begin(), shuffled.end(), rng);
    std::vector<uint32_t> absent;
    for (uint32_t k = 4 * capacity; absent.size() < 64; ++k) absent.push_back(k);

    uint64_t present_sum[2], absent_sum[2], build_total[2];
    for (int order = 0; order < 2; ++order) {
      auto index = NewIndex(capacity);
      const BuildStatistics s = Build(*index, One(order == 0 ? keys : shuffled));
      ASSERT_EQ(s.overflow_rows, 0u);
      ASSERT_EQ(s.unique_keys, n);
      const auto present = Lookup(*index, One(keys));
      const auto missing = Lookup(*index, One(absent));
      ASSERT_EQ(present.statistics.found, n);
      ASSERT_EQ(missing.statistics.found, 0u);
      present_sum[order] = present.statistics.total_probes;
      absent_sum[order] = missing.statistics.total_probes;
      build_total[order] = s.total_probes;
    }
    EXPECT_EQ(present_sum[0], present_sum[1]);
    // The set of occupied slots is order independent too, so misses cost the same.
    EXPECT_EQ(absent_sum[0], absent_sum[1]);
    // With distinct keys each row's build probes equal its later lookup probes.
    EXPECT_EQ(build_total[0], present_sum[0]);
    EXPECT_EQ(build_total[1], present_sum[1]);
  }
}

TEST_P(PropertyTest, BatchBuildMatchesTheEarliestRowModel) {
  for (uint32_t seed : kSeeds) {
    SCOPED_TRACE(::testing::Message() << "seed=" << seed);
    std::mt19937 rng(seed);
    const uint32_t capacity = 1u << (3 + rng() % 8);
    const size_t chunks = rng() % 6;
    std::vector<std::vector<uint32_t>> keys(chunks), validity(chunks);
    std::vector<uint32_t> bases(chunks);
    std::unordered_map<uint32_t, uint32_t> model;
    uint64_t invalid = 0;
    BuildBatchIndexNode node;
    for (size_t c = 0; c < chunks; ++c) {
      keys[c].resize(rng() % (capacity / 2 + 1));
      for (auto& k : keys[c]) k = rng() % 31 == 0 ? kEmptyKey : rng() % capacity;
      if (rng() % 2) {
        validity[c].resize(keys[c].size());
        for (auto& v : validity[c]) v = rng() % 4 == 0 ? 0 : rng() % 3 + 1;
      }
      bases[c] = rng();
      for (size_t i = 0; i < keys[c].size(); ++i) {
        if (keys[c][i] == kEmptyKey || (!validity[c].empty() && validity[c][i] == 0)) {
          ++invalid;
          continue;
        }
        model.emplace(keys[c][i], bases[c] + static_cast<uint32_t>(i));
      }
      node.chunks.push_back(BatchChunk{keys[c], bases[c], validity[c]});
    }
    auto index = NewIndex(capacity);
    BuildStatistics s;
    node.index = index.get();
    node.statistics = &s;
    CommandGraph g;
    g.Add(node);
    RunOk(g);
    EXPECT_EQ(s.invalid_rows, invalid);
    EXPECT_EQ(s.overflow_rows, 0u) << "at most capacity distinct keys";
    EXPECT_EQ(s.unique_keys, model.size());
    std::vector<uint32_t> q;
    for (const auto& [k, v] : model) q.push_back(k);
    const auto out = Lookup(*index, One(q));
    for (size_t i = 0; i < q.size(); ++i) {
      ASSERT_TRUE(out.found[i]);
      ASSERT_EQ(out.values[i], model.at(q[i])) << "key " << q[i];
    }
  }
}

TEST_P(PropertyTest, JoinMatchesTheModel) {
  for (uint32_t seed : kSeeds) {
    SCOPED_TRACE(::testing::Message() << "seed=" << seed);
    std::mt19937 rng(seed);
    const uint32_t capacity = 1u << (4 + rng() % 8);
    std::vector<uint32_t> right(rng() % capacity);
    for (auto& k : right) k = rng() % (2 * capacity);
    auto index = NewIndex(capacity);
    Build(*index, One(right));
    std::unordered_map<uint32_t, uint32_t> model;
    for (size_t r = 0; r < right.size(); ++r) model.emplace(right[r], static_cast<uint32_t>(r));

    const size_t batches = 1 + rng() % 4;
    std::vector<std::vector<uint32_t>> left(batches), left_rows(batches), out_l(batches),
        out_r(batches);
    std::vector<JoinResult> results(batches);
    std::vector<uint32_t> first(batches);
    JoinNode join;
    join.index = index.get();
    for (size_t b = 0; b < batches; ++b) {
      left[b].resize(rng() % (3 * capacity));
      for (auto& k : left[b]) k = rng() % 17 == 0 ? kEmptyKey : rng() % (3 * capacity);
      if (rng() % 2) {
        left_rows[b].resize(left[b].size());
        for (auto& r : left_rows[b]) r = rng();
      }
      first[b] = rng();
      const size_t cap = rng() % 3 == 0 ? rng() % (left[b].size() + 1) : left[b].size();
      out_l[b].assign(cap, 0);
      out_r[b].assign(cap, 0);
      join.batches.push_back(JoinBatch{Cut(left[b], RandomCuts(rng, left[b].size(), 4)),
                                       left_rows[b],
                                       first[b],
                                       out_l[b],
                                       out_r[b],
                                       &results[b],
                                       {},
                                       {}});
    }
    CommandGraph g;
    g.Add(join);
    RunOk(g);
    for (size_t b = 0; b < batches; ++b) {
      SCOPED_TRACE(::testing::Message() << "batch " << b);
      std::vector<std::pair<uint32_t, uint32_t>> pairs;
      for (size_t i = 0; i < left[b].size(); ++i) {
        const auto it = model.find(left[b][i]);
        if (it == model.end()) continue;
        const uint32_t lr =
            left_rows[b].empty() ? first[b] + static_cast<uint32_t>(i) : left_rows[b][i];
        pairs.emplace_back(lr, it->second);
      }
      EXPECT_EQ(results[b].count, pairs.size());
      EXPECT_EQ(results[b].overflow, pairs.size() > out_l[b].size());
      EXPECT_EQ(results[b].statistics.found, pairs.size());
      EXPECT_EQ(results[b].statistics.missing, left[b].size() - pairs.size());
      const size_t written = std::min(pairs.size(), out_l[b].size());
      for (size_t p = 0; p < written; ++p) {
        ASSERT_EQ(out_l[b][p], pairs[p].first) << "pair " << p;
        ASSERT_EQ(out_r[b][p], pairs[p].second) << "pair " << p;
      }
    }
  }
}

// Grouped aggregation against a per-group model, twice over the same keys and
// mask: with integer values (|v| <= 100, at most 50000 rows, so every partial sum
// is an integer below 2^24 and float32 sums are exact in any order) sum and mean
// must equal the model bit for bit; with fractional values (multiples of 2^-10,
// whose double sums are exact) they must lie within the float32 summation bound
// of the exact sums. Reproduces a tolerance of about 100 that hid a row counted
// in the wrong group.
TEST_P(PropertyTest, AggregationMatchesThePerGroupModel) {
  const float special[] = {std::numeric_limits<float>::quiet_NaN(),
                           std::numeric_limits<float>::infinity(),
                           -std::numeric_limits<float>::infinity(), -0.0f, 0.0f};
  constexpr double kUnit = 0x1p-24;  // float32 unit roundoff
  for (uint32_t seed : kSeeds) {
    SCOPED_TRACE(::testing::Message() << "seed=" << seed);
    std::mt19937 rng(seed);
    const size_t groups = 1 + rng() % (rng() % 2 ? 20 : 6000);
    const size_t rows = rng() % 50000;
    std::vector<uint32_t> keys(rows), mask(rows);
    std::vector<float> integers(rows), fractions(rows);
    for (size_t r = 0; r < rows; ++r) {
      keys[r] = rng() % 10 == 0 ? rng() : rng() % groups;
      mask[r] = rng() % 3;
      if (rng() % 20 == 0) {
        integers[r] = fractions[r] = special[rng() % 5];
      } else {
        integers[r] = static_cast<float>(static_cast<int>(rng() % 201) - 100);
        fractions[r] = std::ldexp(static_cast<float>(static_cast<int>(rng() % 204801) - 102400),
                                  -10);  // (-100, 100), 18 significant bits
      }
    }
    const bool use_mask = rng() % 2;
    // Per group: rows regardless of value finiteness, contributing (finite) rows,
    // exact sums (double) of both value sets, sum of |fraction|, min and max.
    std::vector<uint32_t> row_count(groups, 0), count(groups, 0);
    std::vector<double> int_sum(groups, 0.0), frac_sum(groups, 0.0), frac_abs(groups, 0.0);
    std::vector<float> mn(groups, std::numeric_limits<float>::quiet_NaN()), mx = mn;
    auto less = [](float a, float b) {
      return a < b || (a == b && std::signbit(a) && !std::signbit(b));
    };
    for (size_t r = 0; r < rows; ++r) {
      if ((use_mask && mask[r] == 0) || keys[r] >= groups) continue;
      const uint32_t k = keys[r];
      ++row_count[k];
      if (!std::isfinite(fractions[r])) continue;
      ++count[k];
      int_sum[k] += integers[r];
      frac_sum[k] += fractions[r];
      frac_abs[k] += std::fabs(fractions[r]);
      const float v = fractions[r];
      if (std::isnan(mn[k]) || less(v, mn[k])) mn[k] = v;
      if (std::isnan(mx[k]) || less(mx[k], v)) mx[k] = v;
    }
    const auto key_chunks = Cut(keys, RandomCuts(rng, rows, 5));
    const std::vector<size_t> value_cuts = RandomCuts(rng, rows, 5);
    const auto mask_chunks = Cut(mask, RandomCuts(rng, rows, 5));
    auto run = [&](AggregateOp op, const std::vector<float>& values, std::vector<uint32_t>& counts,
                   std::vector<float>& out, std::vector<uint32_t>& contributing) {
      AggregateNode node;
      node.op = op;
      node.keys = key_chunks;
      if (use_mask) node.mask = mask_chunks;
      contributing.assign(groups, 0xdeadbeefu);
      node.contributing_rows = contributing;
      std::vector<uint64_t> words(groups, 0xdeadbeefdeadbeefull);
      node.output = words;
      if (op != AggregateOp::kCount) node.values = Cut(values, value_cuts);
      CommandGraph g;
      g.Add(node);
      RunOk(g);
      if (op == AggregateOp::kCount) {
        counts.assign(words.begin(), words.end());
      } else {
        out = Float32sOfWords(words);
      }
    };
    std::vector<uint32_t> counts, contributing;
    std::vector<float> out;
    run(AggregateOp::kCount, {}, counts, out, contributing);
    EXPECT_EQ(counts, row_count);
    EXPECT_EQ(contributing, row_count);
    for (AggregateOp op : {AggregateOp::kMin, AggregateOp::kMax}) {
      run(op, fractions, counts, out, contributing);
      EXPECT_EQ(contributing, count);
      const auto& model = op == AggregateOp::kMin ? mn : mx;
      for (size_t g = 0; g < groups; ++g) {
        ASSERT_EQ(std::bit_cast<uint32_t>(out[g]), std::bit_cast<uint32_t>(model[g]))
            << AggregateOpName(op) << " group " << g;
      }
    }
    for (AggregateOp op : {AggregateOp::kSum, AggregateOp::kMean}) {
      const bool sum = op == AggregateOp::kSum;
      // Integer values: exact. An empty sum is +0 (so is a sum of only zeros, which
      // starts from +0), an empty mean NaN; a mean is the float sum over the float count.
      run(op, integers, counts, out, contributing);
      EXPECT_EQ(contributing, count);
      for (size_t g = 0; g < groups; ++g) {
        const float total = static_cast<float>(int_sum[g]);
        const float expect = sum ? total
                                 : (count[g] == 0 ? std::numeric_limits<float>::quiet_NaN()
                                                  : total / static_cast<float>(count[g]));
        if (std::isnan(expect)) {
          ASSERT_TRUE(std::isnan(out[g])) << "empty mean is NaN, group " << g;
        } else {
          ASSERT_EQ(std::bit_cast<uint32_t>(out[g]), std::bit_cast<uint32_t>(expect))
              << AggregateOpName(op) << " of integers, group " << g << ": " << out[g]
              << ", expected " << expect << " (" << count[g] << " rows)";
        }
      }
      // Fractional values: a float32 sum of n values in any order or tree is within
      // n x 2^-24 x sum|v| of the exact sum; a mean adds at most two roundings.
      run(op, fractions, counts, out, contributing);
      EXPECT_EQ(contributing, count);
      for (size_t g = 0; g < groups; ++g) {
        if (count[g] == 0) {
          if (sum) {
            ASSERT_EQ(std::bit_cast<uint32_t>(out[g]), 0u) << "empty sum is +0, group " << g;
          } else {
            ASSERT_TRUE(std::isnan(out[g])) << "empty mean is NaN, group " << g;
          }
          continue;
        }
        const double n = count[g];
        const double sum_tol = n * kUnit * frac_abs[g];
        const double expect = sum ? frac_sum[g] : frac_sum[g] / n;
        const double tol =
            sum ? sum_tol : (sum_tol + 2 * kUnit * (std::fabs(frac_sum[g]) + sum_tol)) / n;
        ASSERT_NEAR(out[g], expect, tol)
            << AggregateOpName(op) << " group " << g << " (" << count[g] << " rows)";
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, PropertyTest, ::testing::ValuesIn(AllBackends()), BackendName);

}  // namespace
}  // namespace gpujoin::engine::testing
