// Key-schema indexes (string and composite keys): exact matches whatever the
// fingerprints do, against a std::map model of the contract. Every case runs
// with full 64-bit fingerprints and with fingerprints cut to a few bits (the
// test-only BackendOptions::key_fingerprint_bits), which puts many different
// keys on one fingerprint: every answer must stay the same.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "gpujoin/common/bitmap.hpp"
#include "gpujoin/engine/backend.hpp"
#include "gpujoin/engine/graph.hpp"
#include "gpujoin/engine/index_image.hpp"
#include "key_table.hpp"

namespace gpujoin::engine {
namespace {

using ::testing::HasSubstr;

class KeyColumnsTest : public ::testing::TestWithParam<uint32_t> {
 protected:
  void SetUp() override {
    BackendOptions options;
    options.cpu_threads = 3;
    options.key_fingerprint_bits = GetParam();
    auto b = CreateBackend(BackendKind::kCpu, options);
    ASSERT_TRUE(b.ok()) << b.status();
    backend_ = std::move(*b);
  }

  std::unique_ptr<HashIndex> NewIndex(const std::vector<ColumnType>& types, uint32_t capacity,
                                      DuplicatePolicy duplicates = DuplicatePolicy::kLowestRow,
                                      uint32_t max_probe_count = 0) {
    HashIndexSpec spec;
    spec.capacity = capacity;
    spec.max_probe_count = max_probe_count;
    spec.key_type = KeyType::kColumns;
    spec.key_columns = types;
    spec.duplicates = duplicates;
    auto index = backend_->CreateIndex(spec);
    EXPECT_TRUE(index.ok()) << index.status();
    return index.ok() ? std::move(*index) : nullptr;
  }

  BuildStatistics Build(HashIndex& index, Table& t) {
    BuildStatistics stats;
    CommandGraph g;
    BuildIndexNodeColumns node;
    node.index = &index;
    node.keys = t.View();
    node.statistics = &stats;
    g.Add(std::move(node));
    const absl::Status s = backend_->Run(g);
    EXPECT_TRUE(s.ok()) << s;
    return stats;
  }

  struct Lookup {
    std::vector<uint32_t> values, probes, matches;
    std::vector<uint8_t> found;
    QueryStatistics stats;
  };
  Lookup Probe(const HashIndex& index, Table& q) {
    const size_t n = q.rows();
    Lookup out;
    out.values.assign(n, 0xabababab);
    out.probes.assign(n, 0xabababab);
    out.matches.assign(n, 0xabababab);
    out.found.assign(n, 0xab);
    CommandGraph g;
    LookupNodeColumns node;
    node.index = &index;
    node.keys = q.View();
    node.values = out.values;
    node.found = out.found;
    node.probes = out.probes;
    node.match_counts = out.matches;
    node.statistics = &out.stats;
    g.Add(std::move(node));
    const absl::Status s = backend_->Run(g);
    EXPECT_TRUE(s.ok()) << s;
    return out;
  }

  // Checks a lookup of `q` against the model of the build table.
  void ExpectLookupLikeModel(const HashIndex& index, const Table& build, Table& q) {
    const auto model = Model(build);
    const Lookup got = Probe(index, q);
    for (size_t r = 0; r < q.rows(); ++r) {
      const auto it = q.Null(r) ? model.end() : model.find(q.Key(r));
      const bool hit = it != model.end();
      ASSERT_EQ(got.found[r], hit ? 1 : 0) << "row " << r;
      ASSERT_EQ(got.values[r], hit ? it->second.front() : kEmptyKey) << "row " << r;
      const uint32_t matches = !hit ? 0
                               : index.spec().duplicates == DuplicatePolicy::kKeepAll
                                   ? static_cast<uint32_t>(it->second.size())
                                   : 1;
      ASSERT_EQ(got.matches[r], matches) << "row " << r;
      if (q.Null(r)) ASSERT_EQ(got.probes[r], 0u) << "a null key probes nothing, row " << r;
    }
  }

  std::unique_ptr<Backend> backend_;
};

TEST_P(KeyColumnsTest, StringsThatASloppierKeyWouldConfuse) {
  const std::string big(70000, 'x');
  std::string big2 = big;
  big2.back() = 'y';
  const std::vector<std::string> keys = {"",
                                         "a",
                                         "A",
                                         "ab",
                                         "abc",
                                         "abd",
                                         std::string("a\0b", 3),
                                         std::string("a\0c", 3),
                                         "\xc3\xa9t\xc3\xa9",
                                         big,
                                         big2,
                                         "sku-0001",
                                         "sku-0002",
                                         "a"};  // "a" repeats: duplicate
  Table t{{Strings(keys)}};
  auto index = NewIndex({ColumnType::kString}, 64);
  const BuildStatistics s = Build(*index, t);
  EXPECT_EQ(s.unique_keys, keys.size() - 1);
  EXPECT_EQ(s.duplicate_rows, 1u);
  EXPECT_EQ(s.invalid_rows, 0u);
  Table q{
      {Strings({"", "a", "a ", "ab", "abe", std::string("a\0b", 3), std::string("a", 1),
                "\xc3\xa9t\xc3\xa9", big, big2, std::string(70000, 'z'), "SKU-0001", "sku-0001"})}};
  ExpectLookupLikeModel(*index, t, q);
  const Lookup got = Probe(*index, q);
  EXPECT_EQ(got.values[0], 0u);  // the empty string is an ordinary key
  EXPECT_EQ(got.values[1], 1u);  // the lowest row of "a"
}

TEST_P(KeyColumnsTest, NullsNeverMatchAndAreInvalidRows) {
  Table t{{Strings({"a", "b", "c", "d"}, {false, true, false, false}),
           Ints(ColumnType::kInt64, {1, 2, 3, 4}, {false, false, true, false})}};
  auto index = NewIndex(t.Types(), 16);
  const BuildStatistics s = Build(*index, t);
  EXPECT_EQ(s.unique_keys, 2u);
  EXPECT_EQ(s.invalid_rows, 2u);
  // A query row with the same cells as a null build row does not find it, and a
  // null query key is missing without probing.
  Table q{{Strings({"a", "b", "c", "d", "a"}, {false, false, false, false, true}),
           Ints(ColumnType::kInt64, {1, 2, 3, 4, 1})}};
  ExpectLookupLikeModel(*index, t, q);
  const Lookup got = Probe(*index, q);
  EXPECT_EQ(got.found, (std::vector<uint8_t>{1, 0, 0, 1, 0}));
  EXPECT_EQ(got.stats.found, 2u);
  EXPECT_EQ(got.stats.missing, 3u);
}

TEST_P(KeyColumnsTest, CompositeKeysWithSwappedPairsDiffer) {
  Table t{{Ints(ColumnType::kUint32, {1, 2, 7, 7}), Ints(ColumnType::kUint32, {2, 1, 7, 8})}};
  auto index = NewIndex(t.Types(), 8);
  Build(*index, t);
  Table q{{Ints(ColumnType::kUint32, {2, 1, 7, 8, 1}), Ints(ColumnType::kUint32, {1, 2, 8, 7, 1})}};
  ExpectLookupLikeModel(*index, t, q);
  // ("ab", "c") and ("a", "bc") are different keys.
  Table s{{Strings({"ab", "a"}), Strings({"c", "bc"})}};
  auto strings = NewIndex(s.Types(), 4);
  const BuildStatistics stats = Build(*strings, s);
  EXPECT_EQ(stats.unique_keys, 2u);
  Table sq{{Strings({"a", "ab", "abc"}), Strings({"bc", "c", ""})}};
  ExpectLookupLikeModel(*strings, s, sq);
}

TEST_P(KeyColumnsTest, EveryIntegerValueIsAnOrdinaryKey) {
  // The reserved key words of the integer indexes are ordinary values here.
  Table t{{Ints(ColumnType::kUint64, {-1, 0, 0xffffffff}), Ints(ColumnType::kInt32, {-1, -1, 0})}};
  auto index = NewIndex(t.Types(), 8);
  const BuildStatistics s = Build(*index, t);
  EXPECT_EQ(s.unique_keys, 3u);
  EXPECT_EQ(s.invalid_rows, 0u);
  Table q{{Ints(ColumnType::kUint64, {-1, 0xffffffff, 0}), Ints(ColumnType::kInt32, {-1, 0, 0})}};
  ExpectLookupLikeModel(*index, t, q);
}

// Random tables over a small alphabet (many duplicates, shared prefixes), with
// nulls, chunked batch builds, both duplicate policies, every join kind.
class KeyColumnsRandomTest : public KeyColumnsTest {
 protected:
  Table RandomTable(std::mt19937_64& rng, size_t rows) {
    Table t{{Strings({}), Ints(ColumnType::kInt64, {})}};
    for (size_t r = 0; r < rows; ++r) {
      std::string s = "key-";
      const size_t len = rng() % 4;
      for (size_t i = 0; i < len; ++i) s += static_cast<char>('a' + rng() % 3);
      t.columns[0].strings.push_back(s);
      t.columns[0].null.push_back(rng() % 23 == 0);
      t.columns[1].ints.push_back(static_cast<int64_t>(rng() % 4) - 2);
      t.columns[1].null.push_back(rng() % 29 == 0);
    }
    return t;
  }

  // Builds `index` from `t` with one int64 payload column and generated values.
  absl::Status BuildWithPayload(HashIndex& index, Table& t, const std::vector<int64_t>& payload,
                                uint32_t first_value) {
    CommandGraph g;
    BuildIndexNodeColumns node;
    node.index = &index;
    node.keys = t.View();
    node.first_value = first_value;
    ColumnView column;
    column.type = ColumnType::kInt64;
    column.rows = payload.size();
    column.data = std::as_bytes(std::span<const int64_t>(payload));
    node.payload.push_back(column);
    g.Add(std::move(node));
    return backend_->Run(g);
  }
};

TEST_P(KeyColumnsRandomTest, BatchBuildsLookupsAndJoinsLikeTheModel) {
  std::mt19937_64 rng(1234 + GetParam());
  for (DuplicatePolicy policy : {DuplicatePolicy::kLowestRow, DuplicatePolicy::kKeepAll}) {
    SCOPED_TRACE(std::string(DuplicatePolicyName(policy)));
    Table t = RandomTable(rng, 400);
    auto index = NewIndex(t.Types(), 256, policy);
    // Three chunks with arbitrary row bases: row IDs are row_base + position,
    // the winner the earliest row across chunks.
    BuildStatistics stats;
    CommandGraph g;
    BuildBatchIndexNodeColumns node;
    node.index = index.get();
    node.statistics = &stats;
    const size_t cuts[] = {0, 150, 151, 400};
    std::vector<uint32_t> row_ids(400);
    for (size_t c = 0; c < 3; ++c) {
      BatchChunkColumns chunk;
      chunk.keys = t.View(cuts[c], cuts[c + 1] - cuts[c]);
      chunk.row_base = static_cast<uint32_t>(cuts[c]);  // IDs stay the global rows
      node.chunks.push_back(std::move(chunk));
    }
    g.Add(std::move(node));
    ASSERT_TRUE(backend_->Run(g).ok());
    const auto model = Model(t);
    EXPECT_EQ(stats.unique_keys, model.size());
    Table q = RandomTable(rng, 300);
    ExpectLookupLikeModel(*index, t, q);

    for (JoinKind kind :
         {JoinKind::kInner, JoinKind::kLeftOuter, JoinKind::kLeftSemi, JoinKind::kLeftAnti}) {
      SCOPED_TRACE(std::string(JoinKindName(kind)));
      std::vector<uint32_t> want_left, want_right;
      for (size_t r = 0; r < q.rows(); ++r) {
        const auto it = q.Null(r) ? model.end() : model.find(q.Key(r));
        std::vector<uint32_t> rows;
        if (it != model.end()) {
          rows = policy == DuplicatePolicy::kKeepAll ? it->second
                                                     : std::vector<uint32_t>{it->second.front()};
        }
        if (kind == JoinKind::kLeftSemi) rows.resize(std::min<size_t>(rows.size(), 1));
        if (kind == JoinKind::kLeftAnti)
          rows = rows.empty() ? std::vector{kEmptyKey} : std::vector<uint32_t>{};
        if (kind == JoinKind::kLeftOuter && rows.empty()) rows = {kEmptyKey};
        for (uint32_t right : rows) {
          want_left.push_back(static_cast<uint32_t>(r));
          want_right.push_back(right);
        }
      }
      std::vector<uint32_t> left(want_left.size() + 3, 0xcdcdcdcd);
      std::vector<uint32_t> right(left.size(), 0xcdcdcdcd);
      JoinResult result;
      CommandGraph jg;
      JoinNodeColumns join;
      join.index = index.get();
      join.kind = kind;
      JoinBatchColumns batch;
      batch.keys = q.View();
      batch.out_left_rows = left;
      batch.out_right_rows = right;
      batch.result = &result;
      join.batches.push_back(std::move(batch));
      jg.Add(std::move(join));
      ASSERT_TRUE(backend_->Run(jg).ok());
      ASSERT_EQ(result.count, want_left.size());
      left.resize(want_left.size());
      right.resize(want_right.size());
      EXPECT_EQ(left, want_left);
      EXPECT_EQ(right, want_right);
    }
  }
}

TEST_P(KeyColumnsRandomTest, PayloadFollowsTheWinnerRow) {
  std::mt19937_64 rng(99 + GetParam());
  Table t = RandomTable(rng, 200);
  std::vector<int64_t> payload(200);
  for (size_t r = 0; r < payload.size(); ++r) payload[r] = static_cast<int64_t>(r) * 10;
  auto index = NewIndex(t.Types(), 256);
  ASSERT_TRUE(BuildWithPayload(*index, t, payload, 0).ok());
  Table q = RandomTable(rng, 100);
  std::vector<uint32_t> values(q.rows());
  std::vector<int64_t> gathered(q.rows(), -7);
  std::vector<uint8_t> gathered_valid(BitmapBytes(q.rows()));
  CommandGraph lg;
  LookupNodeColumns lookup;
  lookup.index = index.get();
  lookup.keys = q.View();
  lookup.values = values;
  GatherOutput out;
  out.column = 0;
  out.data = std::as_writable_bytes(std::span(gathered));
  out.validity = gathered_valid;
  lookup.gather.push_back(out);
  lg.Add(std::move(lookup));
  ASSERT_TRUE(backend_->Run(lg).ok());
  const auto model = Model(t);
  for (size_t r = 0; r < q.rows(); ++r) {
    const auto it = q.Null(r) ? model.end() : model.find(q.Key(r));
    ASSERT_EQ(BitAt(gathered_valid, r), it != model.end()) << r;
    if (it != model.end()) ASSERT_EQ(gathered[r], int64_t{it->second.front()} * 10) << r;
  }
}

TEST_P(KeyColumnsTest, OverflowAtTheProbeBoundKeepsLookupsConsistent) {
  std::vector<std::string> keys;
  for (int i = 0; i < 60; ++i) keys.push_back("k" + std::to_string(i));
  Table t{{Strings(keys)}};
  auto index = NewIndex(t.Types(), 64, DuplicatePolicy::kLowestRow, /*max_probe_count=*/2);
  const BuildStatistics s = Build(*index, t);
  EXPECT_EQ(s.unique_keys + s.overflow_rows, keys.size());
  EXPECT_LE(s.max_probes, 2u);
  const Lookup got = Probe(*index, t);
  EXPECT_EQ(got.stats.found, s.unique_keys);
  for (size_t r = 0; r < keys.size(); ++r) {
    if (got.found[r]) EXPECT_EQ(got.values[r], r);
    EXPECT_LE(got.probes[r], 2u);
  }
}

TEST_P(KeyColumnsTest, KeysMustMatchTheSchema) {
  Table t{{Strings({"a"}), Ints(ColumnType::kInt64, {1})}};
  auto index = NewIndex(t.Types(), 4);
  Build(*index, t);
  auto run = [&](KeyColumns keys) {
    std::vector<uint32_t> values(keys.rows());
    CommandGraph g;
    LookupNodeColumns node;
    node.index = index.get();
    node.keys = std::move(keys);
    node.values = values;
    g.Add(std::move(node));
    return backend_->Run(g);
  };
  KeyColumns one = t.View();
  one.columns.pop_back();
  absl::Status s = run(one);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("keys have 1 columns but the index's key has 2"));
  KeyColumns swapped = t.View();
  std::swap(swapped.columns[0], swapped.columns[1]);
  s = run(swapped);
  EXPECT_THAT(s.message(), HasSubstr("keys column 0 is int64 but the index's key column 0 is "
                                     "string"));
  KeyColumns short_data = t.View();
  short_data.columns[1].data = short_data.columns[1].data.first(4);
  s = run(short_data);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  // A word node on a key-schema index.
  std::vector<uint32_t> words = {1}, values(1);
  CommandGraph g;
  g.Add(LookupNode{index.get(), {std::span<const uint32_t>(words)}, values});
  s = backend_->Run(g);
  EXPECT_THAT(s.message(), HasSubstr("keys are uint32 but index has columns keys"));
}

TEST_P(KeyColumnsRandomTest, ImagesRoundTripAndAnswerAlike) {
  std::mt19937_64 rng(7 + GetParam());
  for (DuplicatePolicy policy : {DuplicatePolicy::kLowestRow, DuplicatePolicy::kKeepAll}) {
    Table t = RandomTable(rng, 300);
    std::vector<int64_t> payload(300, 5);
    auto index = NewIndex(t.Types(), 256, policy);
    ASSERT_TRUE(BuildWithPayload(*index, t, payload, 1000).ok());
    auto image = backend_->ExportIndex(*index);
    ASSERT_TRUE(image.ok()) << image.status();
    ASSERT_TRUE(image->Validate().ok()) << image->Validate();
    EXPECT_EQ(image->key_columns.size(), 2u);
    EXPECT_EQ(image->row_values.size(), 300u * 4);
    auto copy = backend_->ImportIndex(*image);
    ASSERT_TRUE(copy.ok()) << copy.status();
    auto again = backend_->ExportIndex(**copy);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(ImageDifference(*image, *again), "");
    EXPECT_EQ((*copy)->memory_bytes(), index->memory_bytes());
    Table q = RandomTable(rng, 200);
    const Lookup a = Probe(*index, q), b = Probe(**copy, q);
    EXPECT_EQ(a.values, b.values);
    EXPECT_EQ(a.found, b.found);
    EXPECT_EQ(a.probes, b.probes);
    EXPECT_EQ(a.matches, b.matches);
    // A slot naming a row past the stored keys is refused before anything is allocated.
    IndexImage bad = std::move(*image);
    for (uint32_t& row : bad.values.as<uint32_t>()) {
      if (row != kEmptySlotRow) {
        row = 300;
        break;
      }
    }
    EXPECT_THAT(bad.Validate().message(), HasSubstr("names row 300 of 300 key rows"));
  }
}

TEST(KeyColumnsSpecTest, SchemasAreChecked) {
  HashIndexSpec spec;
  spec.capacity = 8;
  spec.key_type = KeyType::kColumns;
  EXPECT_THAT(spec.Validate().message(), HasSubstr("key_columns: 0 columns"));
  spec.key_columns.assign(9, ColumnType::kString);
  EXPECT_THAT(spec.Validate().message(), HasSubstr("1 to 8"));
  spec.key_columns = {ColumnType::kFloat64};
  EXPECT_THAT(spec.Validate().message(), HasSubstr("key_columns[0]: float64 cannot be a key"));
  spec.key_columns = {ColumnType::kString, ColumnType::kBinary, ColumnType::kInt32};
  EXPECT_TRUE(spec.Validate().ok());
  spec.key_type = KeyType::kUint64;
  EXPECT_THAT(spec.Validate().message(), HasSubstr("key columns need key_type columns"));
}

INSTANTIATE_TEST_SUITE_P(FingerprintBits, KeyColumnsTest, ::testing::Values(64u, 3u, 0u),
                         [](const auto& info) { return "bits" + std::to_string(info.param); });
INSTANTIATE_TEST_SUITE_P(FingerprintBits, KeyColumnsRandomTest, ::testing::Values(64u, 2u),
                         [](const auto& info) { return "bits" + std::to_string(info.param); });

}  // namespace
}  // namespace gpujoin::engine
