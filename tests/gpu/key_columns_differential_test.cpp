// Key-schema indexes (string and composite keys) on the CUDA backend against
// the CPU backend on fresh random inputs, outputs poisoned first: builds
// (plain and batch, with payload) and lookups (values, found flags, probes,
// match counts, gathered payload, statistics) must agree exactly wherever the
// table has no overflow (both backends then hold the same Robin Hood layout),
// for every schema, with full fingerprints and with fingerprints cut to a few
// bits (BackendOptions::key_fingerprint_bits), which puts many keys on one
// fingerprint; joins of every kind; index images exported by either backend. Build statistics agree
// except total_probes, which the CUDA backend counts for a duplicate row at its key's final place
// (cuda/index/key_rows.hpp). Under overflow each backend is checked against
// the model instead.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backends.hpp"
#include "gpujoin/common/bitmap.hpp"
#include "gpujoin/engine/backend.hpp"
#include "gpujoin/engine/graph.hpp"
#include "gpujoin/engine/index_image.hpp"
#include "key_table.hpp"

namespace gpujoin::engine {
namespace {

// A schema to test: the types of its key columns.
struct Schema {
  const char* name;
  std::vector<ColumnType> types;
};

const std::vector<Schema>& Schemas() {
  static const std::vector<Schema> schemas = {
      {"string", {ColumnType::kString}},
      {"binary", {ColumnType::kBinary}},
      {"string_int64", {ColumnType::kString, ColumnType::kInt64}},
      {"uint32_uint32", {ColumnType::kUint32, ColumnType::kUint32}},
      {"int32_string_uint64", {ColumnType::kInt32, ColumnType::kString, ColumnType::kUint64}},
  };
  return schemas;
}

// A string a sloppier key would confuse with its neighbours: shared long
// prefixes, a last byte or the case changed, the empty string, embedded NUL,
// non-ASCII UTF-8, and now and then one longer than 64 KiB.
std::string RandomString(std::mt19937_64& rng) {
  static const std::string prefix(40, 'p');
  switch (rng() % 8) {
    case 0:
      return "";
    case 1:
      return prefix + static_cast<char>('a' + rng() % 3);
    case 2:
      return std::string(1, static_cast<char>(rng() % 2 ? 'K' : 'k')) + "ey";
    case 3:
      return std::string("a\0b", 3) + static_cast<char>('0' + rng() % 2);
    case 4:
      return rng() % 2 ? "gr\xc3\xbc\xc3\x9f" : "gru\xc3\x9f";
    case 5:
      return rng() % 64 == 0 ? std::string(70000, static_cast<char>('x' + rng() % 2)) : "long";
    default:
      return "k" + std::to_string(rng() % 40);
  }
}

// `rows` rows of `schema` over small domains (many duplicates, pairs swapped
// between columns of one type), nulls in each column now and then.
Table RandomTable(std::mt19937_64& rng, const Schema& schema, size_t rows) {
  Table t;
  for (ColumnType type : schema.types) {
    TestColumn c;
    c.type = type;
    t.columns.push_back(c);
  }
  for (size_t r = 0; r < rows; ++r) {
    for (TestColumn& c : t.columns) {
      if (IsVariableWidth(c.type)) {
        c.strings.push_back(RandomString(rng));
      } else {
        const int64_t small = static_cast<int64_t>(rng() % 6);
        c.ints.push_back(c.type == ColumnType::kInt32 || c.type == ColumnType::kInt64 ? small - 3
                                                                                      : small);
      }
      c.null.push_back(rng() % 31 == 0);
    }
  }
  return t;
}

class KeyColumnsDifferentialTest : public ::testing::TestWithParam<uint32_t> {
 protected:
  void SetUp() override {
    BackendOptions options;
    options.key_fingerprint_bits = GetParam();
    CreateCudaAndCpuBackends(cuda_, cpu_, "key-schema differential tests", options);
    if (IsSkipped() || HasFatalFailure()) return;
    auto cpu = CreateBackend(BackendKind::kCpu, options);
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    cpu_ = std::move(*cpu);
  }

  struct Built {
    std::unique_ptr<HashIndex> index;
    BuildStatistics stats;
  };

  // Builds an index of `types` on `backend` from `t` in `chunks` batch chunks
  // (1: a plain build with generated values from 7), with an int64 and a
  // string payload column, keeping the lowest row or (kKeepAll) every row.
  Built Build(Backend& backend, const std::vector<ColumnType>& types, uint32_t capacity,
              uint32_t max_probe_count, Table& t, size_t chunks, std::vector<uint32_t>& masks,
              DuplicatePolicy duplicates = DuplicatePolicy::kLowestRow) {
    HashIndexSpec spec;
    spec.capacity = capacity;
    spec.max_probe_count = max_probe_count;
    spec.duplicates = duplicates;
    spec.key_type = KeyType::kColumns;
    spec.key_columns = types;
    auto index = backend.CreateIndex(spec);
    EXPECT_TRUE(index.ok()) << index.status();
    Built b{std::move(*index), {}};
    const size_t rows = t.rows();
    payload_ints_.resize(rows);
    payload_strings_.clear();
    payload_offsets_.assign(1, 0);
    for (size_t r = 0; r < rows; ++r) {
      payload_ints_[r] = static_cast<int64_t>(r) * 3 - 5;
      payload_strings_ += "v" + std::to_string(r);
      payload_offsets_.push_back(payload_strings_.size());
    }
    std::vector<ColumnView> payload(2);
    payload[0].type = ColumnType::kInt64;
    payload[0].rows = rows;
    payload[0].data = std::as_bytes(std::span<const int64_t>(payload_ints_));
    payload[1].type = ColumnType::kString;
    payload[1].rows = rows;
    payload[1].data = std::as_bytes(std::span(payload_strings_.data(), payload_strings_.size()));
    payload[1].offsets = payload_offsets_;
    CommandGraph g;
    if (chunks <= 1) {
      BuildIndexNodeColumns node;
      node.index = b.index.get();
      node.keys = t.View();
      node.first_value = 7;
      node.payload = payload;
      node.statistics = &b.stats;
      g.Add(std::move(node));
    } else {
      // Views of each chunk's rows (TestColumn::View rebuilds the buffers, so
      // every chunk views the same buffers at its own offset).
      BuildBatchIndexNodeColumns node;
      node.index = b.index.get();
      const KeyColumns all = t.View();
      masks.assign(rows, 1);
      size_t first = 0;
      for (size_t k = 0; k < chunks; ++k) {
        const size_t n = k + 1 == chunks ? rows - first : rows / chunks;
        BatchChunkColumns c;
        c.keys = all;
        for (HashColumn& col : c.keys.columns) {
          col.offset = first;
          col.length = n;
        }
        c.row_base = static_cast<uint32_t>(1000 * (chunks - k) + first);
        if (k % 2 == 1) {
          for (size_t r = first; r < first + n; ++r) masks[r] = r % 5 == 0 ? 0 : 1;
          c.validity = std::span<const uint32_t>(masks).subspan(first, n);
        }
        node.chunks.push_back(c);
        first += n;
      }
      node.payload = payload;
      node.statistics = &b.stats;
      g.Add(std::move(node));
    }
    const absl::Status s = backend.Run(g);
    EXPECT_TRUE(s.ok()) << s;
    return b;
  }

  struct Answers {
    std::vector<uint32_t> values, probes, matches;
    std::vector<uint8_t> found;
    std::vector<int64_t> ints;
    std::vector<uint8_t> ints_valid;
    std::vector<uint32_t> string_offsets;
    std::vector<uint8_t> strings_valid;
    std::string strings;
    QueryStatistics stats;
  };

  // A lookup of `q`, gathering both payload columns unless `gather` is false.
  Answers Lookup(Backend& backend, const HashIndex& index, Table& q, bool gather = true) {
    const size_t n = q.rows();
    Answers a;
    a.values.assign(n, 0xabababab);
    a.probes.assign(n, 0xabababab);
    a.matches.assign(n, 0xabababab);
    a.found.assign(n, 0xab);
    a.ints.assign(n, -77);
    a.ints_valid.assign(BitmapBytes(n), 0xab);
    a.string_offsets.assign(n + 1, 0xabababab);
    a.strings_valid.assign(BitmapBytes(n), 0xab);
    CommandGraph g;
    LookupNodeColumns node;
    node.index = &index;
    node.keys = q.View();
    node.values = a.values;
    node.found = a.found;
    node.probes = a.probes;
    node.match_counts = a.matches;
    node.statistics = &a.stats;
    GatherOutput ints;
    ints.column = 0;
    ints.data = std::as_writable_bytes(std::span(a.ints));
    ints.validity = a.ints_valid;
    GatherOutput strings;
    strings.column = 1;
    strings.offsets = a.string_offsets;
    strings.string_bytes = &a.strings;
    strings.validity = a.strings_valid;
    if (gather) {
      node.gather.push_back(ints);
      node.gather.push_back(strings);
    }
    g.Add(std::move(node));
    const absl::Status s = backend.Run(g);
    EXPECT_TRUE(s.ok()) << s;
    return a;
  }

  // A join of `kind` of `q` (left row IDs from 100, capacity `capacity`),
  // gathering the int64 payload column.
  struct Joined {
    std::vector<uint32_t> left, right, probes;
    std::vector<uint8_t> found;
    std::vector<int64_t> ints;
    std::vector<uint8_t> ints_valid;
    JoinResult result;
  };
  Joined Join(Backend& backend, const HashIndex& index, JoinKind kind, Table& q, size_t capacity) {
    const size_t n = q.rows();
    Joined j;
    j.left.assign(capacity, 0xabababab);
    j.right.assign(capacity, 0xabababab);
    j.probes.assign(n, 0xabababab);
    j.found.assign(n, 0xab);
    j.ints.assign(capacity, -77);
    j.ints_valid.assign(BitmapBytes(capacity), 0xab);
    CommandGraph g;
    JoinNodeColumns node;
    node.index = &index;
    node.kind = kind;
    JoinBatchColumns batch;
    batch.keys = q.View();
    batch.first_left_row = 100;
    batch.out_left_rows = j.left;
    batch.out_right_rows = j.right;
    batch.found = j.found;
    batch.probes = j.probes;
    batch.result = &j.result;
    if (capacity > 0) {
      GatherOutput ints;
      ints.column = 0;
      ints.data = std::as_writable_bytes(std::span(j.ints));
      ints.validity = j.ints_valid;
      batch.gather.push_back(ints);
    }
    node.batches.push_back(std::move(batch));
    g.Add(std::move(node));
    const absl::Status s = backend.Run(g);
    EXPECT_TRUE(s.ok()) << s;
    return j;
  }

  std::unique_ptr<Backend> cuda_, cpu_;
  std::vector<int64_t> payload_ints_;
  std::string payload_strings_;
  std::vector<uint64_t> payload_offsets_;
};

TEST_P(KeyColumnsDifferentialTest, BuildsAndLookupsAgreeWithTheCpuBackend) {
  std::mt19937_64 rng(std::random_device{}());
  for (const Schema& schema : Schemas()) {
    for (size_t chunks : {size_t{1}, size_t{3}}) {
      for (DuplicatePolicy policy : {DuplicatePolicy::kLowestRow, DuplicatePolicy::kKeepAll}) {
        SCOPED_TRACE(std::string(schema.name) + ", chunks " + std::to_string(chunks) + ", " +
                     std::string(DuplicatePolicyName(policy)));
        const size_t rows = 1 + rng() % 3000;
        Table t = RandomTable(rng, schema, rows);
        // At most half full: no key reaches the default probe bound.
        const uint32_t capacity = 8192;
        std::vector<uint32_t> cpu_masks, cuda_masks;
        Built on_cpu = Build(*cpu_, schema.types, capacity, 0, t, chunks, cpu_masks, policy);
        Built on_cuda = Build(*cuda_, schema.types, capacity, 0, t, chunks, cuda_masks, policy);
        ASSERT_EQ(on_cuda.stats.overflow_rows, 0u);
        EXPECT_EQ(on_cuda.stats.max_group_rows, on_cpu.stats.max_group_rows);
        EXPECT_EQ(on_cuda.stats.unique_keys, on_cpu.stats.unique_keys);
        EXPECT_EQ(on_cuda.stats.duplicate_rows, on_cpu.stats.duplicate_rows);
        EXPECT_EQ(on_cuda.stats.invalid_rows, on_cpu.stats.invalid_rows);
        EXPECT_EQ(on_cuda.stats.max_probes, on_cpu.stats.max_probes);
        if (on_cpu.stats.duplicate_rows == 0) {
          EXPECT_EQ(on_cuda.stats.total_probes, on_cpu.stats.total_probes);
        }
        // Queries: the build's own rows (every key, nulls) and fresh ones.
        for (int round = 0; round < 2; ++round) {
          Table q = round == 0 ? t : RandomTable(rng, schema, 1 + rng() % 2000);
          const Answers want = Lookup(*cpu_, *on_cpu.index, q);
          const Answers got = Lookup(*cuda_, *on_cuda.index, q);
          ASSERT_EQ(got.values, want.values);
          ASSERT_EQ(got.found, want.found);
          ASSERT_EQ(got.probes, want.probes);
          ASSERT_EQ(got.matches, want.matches);
          ASSERT_EQ(got.ints_valid, want.ints_valid);
          for (size_t r = 0; r < q.rows(); ++r) {
            if (BitAt(want.ints_valid, r)) ASSERT_EQ(got.ints[r], want.ints[r]) << r;
          }
          ASSERT_EQ(got.string_offsets, want.string_offsets);
          ASSERT_EQ(got.strings, want.strings);
          ASSERT_EQ(got.strings_valid, want.strings_valid);
          EXPECT_EQ(got.stats.found, want.stats.found);
          EXPECT_EQ(got.stats.missing, want.stats.missing);
          EXPECT_EQ(got.stats.total_probes, want.stats.total_probes);
          EXPECT_EQ(got.stats.max_probes, want.stats.max_probes);
        }
      }
    }
  }
}

TEST_P(KeyColumnsDifferentialTest, EveryJoinKindAgreesWithTheCpuBackend) {
  std::mt19937_64 rng(std::random_device{}());
  for (const Schema& schema : Schemas()) {
    for (DuplicatePolicy policy : {DuplicatePolicy::kLowestRow, DuplicatePolicy::kKeepAll}) {
      SCOPED_TRACE(std::string(schema.name) + ", " + std::string(DuplicatePolicyName(policy)));
      Table t = RandomTable(rng, schema, 1 + rng() % 2000);
      std::vector<uint32_t> masks;
      Built on_cpu = Build(*cpu_, schema.types, 8192, 0, t, 1, masks, policy);
      Built on_cuda = Build(*cuda_, schema.types, 8192, 0, t, 1, masks, policy);
      Table q = RandomTable(rng, schema, 1 + rng() % 1500);
      for (JoinKind kind :
           {JoinKind::kInner, JoinKind::kLeftOuter, JoinKind::kLeftSemi, JoinKind::kLeftAnti}) {
        // Room for every pair, a truncated prefix, and count only.
        for (size_t capacity : {q.rows(), q.rows() / 3, size_t{0}}) {
          SCOPED_TRACE(std::string(JoinKindName(kind)) + ", capacity " + std::to_string(capacity));
          const Joined want = Join(*cpu_, *on_cpu.index, kind, q, capacity);
          const Joined got = Join(*cuda_, *on_cuda.index, kind, q, capacity);
          ASSERT_EQ(got.result.count, want.result.count);
          ASSERT_EQ(got.result.overflow, want.result.overflow);
          const size_t written = std::min<size_t>(want.result.count, capacity);
          for (size_t k = 0; k < written; ++k) {
            ASSERT_EQ(got.left[k], want.left[k]) << k;
            ASSERT_EQ(got.right[k], want.right[k]) << k;
            ASSERT_EQ(BitAt(got.ints_valid, k), BitAt(want.ints_valid, k)) << k;
            if (BitAt(want.ints_valid, k)) ASSERT_EQ(got.ints[k], want.ints[k]) << k;
          }
          ASSERT_EQ(got.found, want.found);
          ASSERT_EQ(got.probes, want.probes);
          EXPECT_EQ(got.result.statistics.found, want.result.statistics.found);
          EXPECT_EQ(got.result.statistics.total_probes, want.result.statistics.total_probes);
        }
      }
    }
  }
}

// Index images: the CUDA backend exports what the CPU backend exports for the
// same build (table, groups, payload, key columns, row values), and an image
// imported into either backend answers like the index it came from.
TEST_P(KeyColumnsDifferentialTest, ImagesMatchAndRoundTripBetweenBackends) {
  std::mt19937_64 rng(std::random_device{}());
  for (const Schema& schema : Schemas()) {
    for (DuplicatePolicy policy : {DuplicatePolicy::kLowestRow, DuplicatePolicy::kKeepAll}) {
      SCOPED_TRACE(std::string(schema.name) + ", " + std::string(DuplicatePolicyName(policy)));
      Table t = RandomTable(rng, schema, 1 + rng() % 1500);
      std::vector<uint32_t> masks;
      Built on_cpu = Build(*cpu_, schema.types, 4096, 0, t, 1, masks, policy);
      Built on_cuda = Build(*cuda_, schema.types, 4096, 0, t, 1, masks, policy);
      auto from_cpu = cpu_->ExportIndex(*on_cpu.index);
      auto from_cuda = cuda_->ExportIndex(*on_cuda.index);
      ASSERT_TRUE(from_cpu.ok()) << from_cpu.status();
      ASSERT_TRUE(from_cuda.ok()) << from_cuda.status();
      const IndexImage& a = *from_cuda;
      const IndexImage& b = *from_cpu;
      EXPECT_TRUE(a.keys == b.keys);
      EXPECT_TRUE(a.values == b.values);
      EXPECT_TRUE(a.group_ranges == b.group_ranges);
      EXPECT_TRUE(a.group_values == b.group_values);
      EXPECT_TRUE(a.row_values == b.row_values);
      ASSERT_EQ(a.key_columns.size(), b.key_columns.size());
      for (size_t c = 0; c < a.key_columns.size(); ++c) {
        SCOPED_TRACE("key column " + std::to_string(c));
        EXPECT_EQ(a.key_columns[c].nullable, b.key_columns[c].nullable);
        EXPECT_EQ(a.key_columns[c].null_count, b.key_columns[c].null_count);
        EXPECT_TRUE(a.key_columns[c].data == b.key_columns[c].data);
        EXPECT_TRUE(a.key_columns[c].offsets == b.key_columns[c].offsets);
        EXPECT_TRUE(a.key_columns[c].validity == b.key_columns[c].validity);
      }
      ASSERT_EQ(a.payload.size(), b.payload.size());
      for (size_t c = 0; c < a.payload.size(); ++c) {
        EXPECT_TRUE(a.payload[c].data == b.payload[c].data) << "payload " << c;
        EXPECT_TRUE(a.payload[c].offsets == b.payload[c].offsets) << "payload " << c;
      }
      auto cuda_from_cpu = cuda_->ImportIndex(b);
      auto cpu_from_cuda = cpu_->ImportIndex(a);
      ASSERT_TRUE(cuda_from_cpu.ok()) << cuda_from_cpu.status();
      ASSERT_TRUE(cpu_from_cuda.ok()) << cpu_from_cuda.status();
      Table q = RandomTable(rng, schema, 1 + rng() % 1000);
      const Answers want = Lookup(*cpu_, *on_cpu.index, q);
      for (const auto& [backend, index] : {std::pair{cuda_.get(), cuda_from_cpu->get()},
                                           std::pair{cpu_.get(), cpu_from_cuda->get()}}) {
        const Answers got = Lookup(*backend, *index, q);
        ASSERT_EQ(got.values, want.values);
        ASSERT_EQ(got.found, want.found);
        ASSERT_EQ(got.probes, want.probes);
        ASSERT_EQ(got.matches, want.matches);
        ASSERT_EQ(got.string_offsets, want.string_offsets);
        ASSERT_EQ(got.strings, want.strings);
      }
      for (JoinKind kind : {JoinKind::kInner, JoinKind::kLeftOuter}) {
        const Joined want_join = Join(*cpu_, *on_cpu.index, kind, q, 4 * q.rows());
        const Joined got_join = Join(*cuda_, **cuda_from_cpu, kind, q, 4 * q.rows());
        ASSERT_EQ(got_join.result.count, want_join.result.count);
        const size_t written = std::min<size_t>(want_join.result.count, 4 * q.rows());
        for (size_t k = 0; k < written; ++k) {
          ASSERT_EQ(got_join.left[k], want_join.left[k]) << k;
          ASSERT_EQ(got_join.right[k], want_join.right[k]) << k;
        }
      }
    }
  }
}

// Many threads on few keys and long runs: up to 2^16 rows of which half repeat ten
// hot keys, distinct keys filling 90 % of the table, the probe bound the
// whole table (runs wrap past the last slot; no overflow); then the same index
// built again with explicit values. Tiny tables (1, 2 and 4 slots) too.
TEST_P(KeyColumnsDifferentialTest, HotKeysHighLoadRebuildsAndTinyTables) {
  std::mt19937_64 rng(std::random_device{}());
  const Schema& schema = Schemas()[0];  // one string column
  // Cut fingerprints put every key of a run on few fingerprints (quadratic
  // comparisons): a smaller table then.
  const uint32_t capacity = GetParam() == 64 ? 1u << 15 : 1u << 11;
  const size_t distinct = capacity * 9 / 10;
  std::vector<std::string> keys;
  for (size_t r = 0; r < 2 * distinct; ++r) {
    keys.push_back(r % 2 == 0 ? "hot-" + std::to_string(rng() % 10)
                              : "key-" + std::to_string(r / 2));
  }
  Table t{{Strings(keys)}};
  std::vector<uint32_t> masks;
  Built on_cpu = Build(*cpu_, schema.types, capacity, capacity, t, 1, masks);
  Built on_cuda = Build(*cuda_, schema.types, capacity, capacity, t, 1, masks);
  ASSERT_EQ(on_cuda.stats.overflow_rows, 0u);
  EXPECT_EQ(on_cuda.stats.unique_keys, on_cpu.stats.unique_keys);
  EXPECT_EQ(on_cuda.stats.duplicate_rows, on_cpu.stats.duplicate_rows);
  EXPECT_EQ(on_cuda.stats.max_probes, on_cpu.stats.max_probes);
  const Answers want = Lookup(*cpu_, *on_cpu.index, t);
  const Answers got = Lookup(*cuda_, *on_cuda.index, t);
  ASSERT_EQ(got.values, want.values);
  ASSERT_EQ(got.probes, want.probes);
  ASSERT_EQ(got.strings, want.strings);

  // The same indexes built again from other rows, with explicit values.
  Table t2 = RandomTable(rng, schema, 3000);
  std::vector<uint32_t> values(t2.rows());
  for (size_t r = 0; r < values.size(); ++r) values[r] = uint32_t(rng());
  for (auto& [backend, built] :
       {std::pair{cpu_.get(), &on_cpu}, std::pair{cuda_.get(), &on_cuda}}) {
    CommandGraph g;
    BuildIndexNodeColumns node;
    node.index = built->index.get();
    node.keys = t2.View();
    node.values = ChunkedU32{std::span<const uint32_t>(values)};
    node.statistics = &built->stats;
    g.Add(std::move(node));
    const absl::Status s = backend->Run(g);
    ASSERT_TRUE(s.ok()) << s;
  }
  EXPECT_EQ(on_cuda.stats.unique_keys, on_cpu.stats.unique_keys);
  Table q = RandomTable(rng, schema, 2000);
  const Answers want2 = Lookup(*cpu_, *on_cpu.index, q, false);
  const Answers got2 = Lookup(*cuda_, *on_cuda.index, q, false);
  ASSERT_EQ(got2.values, want2.values);
  ASSERT_EQ(got2.probes, want2.probes);
  ASSERT_EQ(got2.found, want2.found);

  // Tiny tables overflow: which keys stay may differ between the backends
  // (the CUDA build inserts concurrently), so each answers like the model.
  for (uint32_t tiny : {1u, 2u, 4u}) {
    SCOPED_TRACE("capacity " + std::to_string(tiny));
    Table small{{Strings({"a", "", "a", "b", "c"})}};
    const auto model = Model(small);
    Built g = Build(*cuda_, schema.types, tiny, 0, small, 1, masks);
    const BuildStatistics& st = g.stats;
    EXPECT_EQ(st.unique_keys + st.duplicate_rows + st.overflow_rows + st.invalid_rows, 5u);
    Table probe{{Strings({"a", "", "b", "c", "d"})}};
    const Answers a = Lookup(*cuda_, *g.index, probe);
    EXPECT_EQ(a.stats.found, st.unique_keys);
    for (size_t r = 0; r < probe.rows(); ++r) {
      const auto it = model.find(probe.Key(r));
      if (a.found[r]) {
        ASSERT_NE(it, model.end()) << r;
        ASSERT_EQ(a.values[r], 7 + it->second.front()) << r;
      }
    }
  }
}

TEST_P(KeyColumnsDifferentialTest, OverflowAtTheProbeBoundAnswersLikeTheModel) {
  std::mt19937_64 rng(std::random_device{}());
  const Schema& schema = Schemas()[2];  // (string, int64)
  Table t = RandomTable(rng, schema, 900);
  std::vector<uint32_t> masks;
  Built on_cuda = Build(*cuda_, schema.types, 1024, 2, t, 1, masks);
  const BuildStatistics& s = on_cuda.stats;
  EXPECT_EQ(s.unique_keys + s.duplicate_rows + s.overflow_rows + s.invalid_rows, t.rows());
  EXPECT_LE(s.max_probes, 2u);
  const auto model = Model(t);
  const Answers got = Lookup(*cuda_, *on_cuda.index, t);
  EXPECT_EQ(got.stats.found + got.stats.missing, t.rows());
  for (size_t r = 0; r < t.rows(); ++r) {
    ASSERT_LE(got.probes[r], 2u) << r;
    if (t.Null(r)) {
      ASSERT_EQ(got.found[r], 0) << r;
      continue;
    }
    if (!got.found[r]) continue;  // its key overflowed
    const uint32_t lowest = model.at(t.Key(r)).front();
    ASSERT_EQ(got.values[r], 7 + lowest) << r;
    ASSERT_EQ(got.ints[r], static_cast<int64_t>(lowest) * 3 - 5) << r;
  }
}

TEST_P(KeyColumnsDifferentialTest, EmptyBuildsAndEmptyLookups) {
  const Schema& schema = Schemas()[0];
  std::mt19937_64 rng(1);
  Table empty = RandomTable(rng, schema, 0);
  std::vector<uint32_t> masks;
  Built on_cuda = Build(*cuda_, schema.types, 16, 0, empty, 1, masks);
  EXPECT_EQ(on_cuda.stats.unique_keys, 0u);
  Table q{{Strings({"", "a"}, {false, true})}};
  const Answers got = Lookup(*cuda_, *on_cuda.index, q);
  EXPECT_EQ(got.found, (std::vector<uint8_t>{0, 0}));
  EXPECT_EQ(got.values, (std::vector<uint32_t>{kEmptyKey, kEmptyKey}));
  EXPECT_EQ(got.probes[1], 0u) << "a null key probes nothing";
  const Answers none = Lookup(*cuda_, *on_cuda.index, empty);
  EXPECT_EQ(none.stats.found, 0u);
}

INSTANTIATE_TEST_SUITE_P(FingerprintBits, KeyColumnsDifferentialTest,
                         ::testing::Values(64u, 3u, 0u),
                         [](const auto& info) { return "bits" + std::to_string(info.param); });

}  // namespace
}  // namespace gpujoin::engine
