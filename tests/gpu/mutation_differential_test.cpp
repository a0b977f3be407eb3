// Mutations on the CUDA backend against the CPU backend on fresh random
// inputs: random sequences of upsert and delete batches (keys repeating
// within a batch, deletes of absent and reserved keys, re-inserts of deleted
// keys, keep_all appends) on uint32, uint64 and (string, int64) key-schema
// indexes, lowest_row and keep_all, with an int64 and a string payload column
// (nulls in both), applied on each backend by the engine's MutationRebuild
// into a table of the capacity GrownCapacity gives (so the sequences grow the
// table). After every batch the counts must agree, and the two backends'
// index images exactly (a rebuilt table has no overflow, so both hold the
// same Robin Hood layout; total_probes aside, docs/engine.md). The semantics
// themselves are checked against a dictionary model on the CPU backend by
// tests/server/mutate_integration_test.cpp.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "backends.hpp"
#include "gpujoin/common/bitmap.hpp"
#include "gpujoin/engine/backend.hpp"
#include "gpujoin/engine/graph.hpp"
#include "gpujoin/engine/index_image.hpp"
#include "gpujoin/engine/mutation.hpp"
#include "key_table.hpp"

namespace gpujoin::engine {
namespace {

// Host columns of some rows: an int64 column and a string column, nulls here
// and there, as the build and the batches pass them.
struct PayloadRows {
  std::vector<int64_t> ints;
  std::vector<uint8_t> int_validity;
  std::string bytes;
  std::vector<uint64_t> offsets{0};
  std::vector<uint8_t> string_validity;
  size_t rows = 0;

  void Add(std::mt19937_64& rng) {
    const size_t r = rows++;
    int_validity.resize(BitmapBytes(rows), 0);
    string_validity.resize(BitmapBytes(rows), 0);
    ints.push_back(rng() % 5 == 0 ? 0 : int64_t(rng()));
    if (ints.back() != 0) SetBit(int_validity.data(), r, true);
    if (rng() % 6 != 0) {
      SetBit(string_validity.data(), r, true);
      bytes += std::string(rng() % 7, char('a' + rng() % 3));
    }
    offsets.push_back(bytes.size());
  }
  std::vector<ColumnView> Views() const {
    ColumnView i{ColumnType::kInt64, rows,
                 std::as_bytes(std::span(ints)), {}, int_validity};
    ColumnView s{ColumnType::kString, rows,
                 std::as_bytes(std::span(bytes.data(), bytes.size())), offsets, string_validity};
    return {i, s};
  }
};

// The keys of one kind and how a batch carries them.
template <class K>
struct Keys;

template <KeyWord K>
struct Keys<K> {
  std::vector<K> universe;
  explicit Keys(std::mt19937_64& rng) {
    for (size_t i = 0; i < 400; ++i) {
      // uint64: pairs equal in their low 32 bits.
      universe.push_back(sizeof(K) == 8 ? K((uint64_t(rng() % 200) << 32) | (i % 2 ? 5u : 9u))
                                        : K(rng() % 1000));
    }
    universe.push_back(kEmptyKeyOf<K>);  // deletes of it count as not found
  }
  struct Batch {
    std::vector<K> words;
    KeyChunks<K> View() { return {std::span<const K>(words)}; }
  };
  Batch Pick(std::mt19937_64& rng, size_t n, bool allow_reserved) const {
    Batch b;
    const size_t limit = universe.size() - (allow_reserved ? 0 : 1);
    const size_t window = 1 + rng() % limit, base = rng() % limit;
    for (size_t i = 0; i < n; ++i) b.words.push_back(universe[(base + rng() % window) % limit]);
    return b;
  }
  static std::string Name(const Batch& b, size_t r) { return std::to_string(uint64_t(b.words[r])); }
  static HashIndexSpec Spec(uint32_t capacity, DuplicatePolicy policy) {
    HashIndexSpec s;
    s.capacity = capacity;
    s.key_type = KeyTypeOf<K>();
    s.duplicates = policy;
    return s;
  }
};

template <>
struct Keys<ColumnKey> {
  std::vector<std::pair<std::string, int64_t>> universe;
  explicit Keys(std::mt19937_64& rng) {
    for (size_t i = 0; i < 300; ++i) {
      // Strings equal but for their last byte; the same string beside another int.
      universe.push_back({std::string(30, 'k') + char('a' + rng() % 10), int64_t(rng() % 15)});
    }
  }
  struct Batch {
    Table table;
    KeyColumns View() { return table.View(); }
  };
  Batch Pick(std::mt19937_64& rng, size_t n, bool) const {
    std::vector<std::string> s;
    std::vector<int64_t> v;
    const size_t window = 1 + rng() % universe.size(), base = rng() % universe.size();
    for (size_t i = 0; i < n; ++i) {
      const auto& k = universe[(base + rng() % window) % universe.size()];
      s.push_back(k.first);
      v.push_back(k.second);
    }
    Batch b;
    b.table.columns = {Strings(s), Ints(ColumnType::kInt64, v)};
    return b;
  }
  static HashIndexSpec Spec(uint32_t capacity, DuplicatePolicy policy) {
    HashIndexSpec s;
    s.capacity = capacity;
    s.key_type = KeyType::kColumns;
    s.duplicates = policy;
    s.key_columns = {ColumnType::kString, ColumnType::kInt64};
    return s;
  }
};

template <class K>
class MutationDifferentialTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CreateCudaAndCpuBackends(cuda_, cpu_, "mutations on the CUDA backend");
  }

  // One sequence: a build of `initial` rows, then `batches` batches.
  void Run(DuplicatePolicy policy, uint64_t seed) {
    std::mt19937_64 rng(seed);
    Keys<K> keys(rng);
    std::unique_ptr<HashIndex> on_cuda, on_cpu;
    {
      auto build = keys.Pick(rng, 60, false);
      PayloadRows payload;
      std::vector<uint32_t> values;
      for (size_t r = 0; r < 60; ++r) {
        payload.Add(rng);
        values.push_back(uint32_t(rng()));
      }
      for (auto* p : {&on_cuda, &on_cpu}) {
        Backend& b = p == &on_cuda ? *cuda_ : *cpu_;
        auto created = b.CreateIndex(Keys<K>::Spec(64, policy));
        ASSERT_TRUE(created.ok()) << created.status();
        *p = std::move(*created);
        BuildIndexNodeT<K> node;
        node.index = p->get();
        node.keys = build.View();
        node.values = ChunkedU32{std::span<const uint32_t>(values)};
        node.payload = payload.Views();
        CommandGraph g;
        g.Add(std::move(node));
        ASSERT_TRUE(b.Run(g).ok());
      }
    }
    for (int round = 0; round < 25; ++round) {
      SCOPED_TRACE(::testing::Message() << "round " << round);
      auto deletes = keys.Pick(rng, rng() % 15, true);
      auto upserts = keys.Pick(rng, rng() % 60, false);
      PayloadRows payload;
      std::vector<uint32_t> values;
      const size_t n = KeyRows(upserts.View());
      for (size_t r = 0; r < n; ++r) {
        payload.Add(rng);
        values.push_back(uint32_t(rng()));
      }
      MutationBatchT<K> batch;
      batch.delete_keys = deletes.View();
      batch.upsert_keys = upserts.View();
      batch.values = {std::span<const uint32_t>(values)};
      if (n != 0) batch.payload = payload.Views();
      MutationCounts counts[2];
      for (int side = 0; side < 2; ++side) {
        Backend& b = side == 0 ? *cuda_ : *cpu_;
        std::unique_ptr<HashIndex>& index = side == 0 ? on_cuda : on_cpu;
        auto merged = MutationRebuild::Prepare(b, *index, batch);
        ASSERT_TRUE(merged.ok()) << merged.status();
        auto capacity = GrownCapacity((*merged)->live_keys(), index->spec().capacity, 0.8);
        ASSERT_TRUE(capacity.ok());
        HashIndexSpec spec = index->spec();
        spec.capacity = *capacity;
        auto target = b.CreateIndex(spec);
        ASSERT_TRUE(target.ok()) << target.status();
        ASSERT_TRUE((*merged)->BuildInto(b, target->get(), nullptr).ok());
        index = std::move(*target);
        counts[side] = (*merged)->counts();
      }
      EXPECT_EQ(counts[0], counts[1]);
      auto a = cuda_->ExportIndex(*on_cuda);
      auto c = cpu_->ExportIndex(*on_cpu);
      ASSERT_TRUE(a.ok() && c.ok());
      EXPECT_EQ(ImageDifference(*a, *c, /*ignore_total_probes=*/true), "");
      EXPECT_EQ(a->statistics.overflow_rows, 0u);
      if (HasFailure()) return;
    }
  }

  std::unique_ptr<Backend> cuda_, cpu_;
};

using KeyKinds = ::testing::Types<uint32_t, uint64_t, ColumnKey>;
TYPED_TEST_SUITE(MutationDifferentialTest, KeyKinds);

TYPED_TEST(MutationDifferentialTest, LowestRowSequencesAgreeWithTheCpuBackend) {
  if (this->IsSkipped() || this->HasFatalFailure()) return;
  for (uint64_t seed : {1, 2, 3}) this->Run(DuplicatePolicy::kLowestRow, seed);
}

TYPED_TEST(MutationDifferentialTest, KeepAllSequencesAgreeWithTheCpuBackend) {
  if (this->IsSkipped() || this->HasFatalFailure()) return;
  for (uint64_t seed : {4, 5}) this->Run(DuplicatePolicy::kKeepAll, seed);
}

}  // namespace
}  // namespace gpujoin::engine
