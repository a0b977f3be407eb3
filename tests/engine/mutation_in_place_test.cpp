// In-place mutations on the CPU backend (Backend::MutateInPlace): after every
// random batch (keys repeating within it, deletes of absent and reserved keys,
// re-inserts of deleted keys) the index holds exactly the image a rebuild of
// the same content gives (MutationRebuild into the same capacity): the same
// Robin Hood layout, values and payload (int64 with nulls, bool), counts and
// key statistics; Undo restores the image before the batch; a batch past
// max_load_factor or the probe bound is left to the rebuild and changes
// nothing; kinds the CPU backend does not change in place say so.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gpujoin/common/bitmap.hpp"
#include "gpujoin/engine/backend.hpp"
#include "gpujoin/engine/graph.hpp"
#include "gpujoin/engine/index_image.hpp"
#include "gpujoin/engine/mutation.hpp"

namespace gpujoin::engine {
namespace {

// Rows of an int64 (nulls) and a bool payload column.
struct Payload {
  std::vector<int64_t> ints;
  std::vector<uint8_t> int_validity, bools;
  size_t rows = 0;
  void Add(std::mt19937_64& rng) {
    const size_t r = rows++;
    int_validity.resize(BitmapBytes(rows), 0);
    bools.resize(BitmapBytes(rows), 0);
    ints.push_back(int64_t(rng()));
    SetBit(int_validity.data(), r, rng() % 4 != 0);
    SetBit(bools.data(), r, rng() % 2 != 0);
  }
  std::vector<ColumnView> Views() const {
    return {ColumnView{ColumnType::kInt64, rows, std::as_bytes(std::span(ints)), {}, int_validity},
            ColumnView{ColumnType::kBool, rows, std::as_bytes(std::span(bools)), {}, {}}};
  }
};

template <class K>
class MutationInPlaceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto b = CreateBackend(BackendKind::kCpu, BackendOptions{.cpu_threads = 2});
    ASSERT_TRUE(b.ok());
    backend_ = std::move(*b);
  }

  std::unique_ptr<HashIndex> Built(uint32_t capacity, uint32_t bound, std::mt19937_64& rng,
                                   DuplicatePolicy policy = DuplicatePolicy::kLowestRow) {
    HashIndexSpec spec;
    spec.capacity = capacity;
    spec.max_probe_count = bound;
    spec.key_type = KeyTypeOf<K>();
    spec.duplicates = policy;
    auto index = backend_->CreateIndex(spec);
    EXPECT_TRUE(index.ok());
    std::vector<K> keys;
    std::vector<uint32_t> values;
    Payload p;
    for (int i = 0; i < 20; ++i) {
      keys.push_back(Key(rng));
      values.push_back(uint32_t(rng()));
      p.Add(rng);
    }
    BuildIndexNodeT<K> node;
    node.index = index->get();
    node.keys = {std::span<const K>(keys)};
    node.values = ChunkedU32{std::span<const uint32_t>(values)};
    node.payload = p.Views();
    CommandGraph g;
    g.Add(std::move(node));
    EXPECT_TRUE(backend_->Run(g).ok());
    return std::move(*index);
  }

  static K Key(std::mt19937_64& rng) {
    // A narrow range, so keys repeat and runs form; uint64 pairs share low bits.
    const uint64_t k = rng() % 300;
    return sizeof(K) == 8 ? K((k / 2) << 32 | (k % 2 ? 3 : 7)) : K(k);
  }

  IndexImage Image(const HashIndex& index) {
    auto image = backend_->ExportIndex(index);
    EXPECT_TRUE(image.ok());
    return std::move(*image);
  }

  std::unique_ptr<Backend> backend_;
};

using Words = ::testing::Types<uint32_t, uint64_t>;
TYPED_TEST_SUITE(MutationInPlaceTest, Words);

TYPED_TEST(MutationInPlaceTest, EveryBatchLeavesTheImageARebuildGives) {
  using K = TypeParam;
  std::mt19937_64 rng(7);
  auto index = this->Built(512, 0, rng);
  int applied = 0;
  for (int round = 0; round < 200; ++round) {
    SCOPED_TRACE(::testing::Message() << "round " << round);
    std::vector<K> deletes, upserts;
    std::vector<uint32_t> values;
    Payload p;
    for (size_t i = rng() % 10; i > 0; --i) deletes.push_back(rng() % 20 == 0 ? kEmptyKeyOf<K> : this->Key(rng));
    for (size_t i = rng() % 30; i > 0; --i) {
      upserts.push_back(this->Key(rng));
      values.push_back(uint32_t(rng()));
      p.Add(rng);
    }
    MutationBatchT<K> batch;
    batch.delete_keys = {std::span<const K>(deletes)};
    batch.upsert_keys = {std::span<const K>(upserts)};
    batch.values = {std::span<const uint32_t>(values)};
    if (!upserts.empty()) batch.payload = p.Views();

    // The rebuild of the same content, into the same capacity.
    auto merged = MutationRebuild::Prepare(*this->backend_, *index, batch);
    ASSERT_TRUE(merged.ok()) << merged.status();
    auto rebuilt = this->backend_->CreateIndex(index->spec());
    ASSERT_TRUE(rebuilt.ok());
    ASSERT_TRUE((*merged)->BuildInto(*this->backend_, rebuilt->get(), nullptr).ok());
    const IndexImage want = this->Image(**rebuilt);
    const IndexImage before = this->Image(*index);

    auto in_place = this->backend_->MutateInPlace(*index, batch, 0.8);
    ASSERT_TRUE(in_place.ok()) << in_place.status();
    ASSERT_TRUE(in_place->applied) << "the load stays below 0.8";
    ++applied;
    EXPECT_EQ(in_place->counts, (*merged)->counts());
    IndexImage got = this->Image(*index);
    EXPECT_EQ(got.statistics.unique_keys, want.statistics.unique_keys);
    EXPECT_EQ(got.statistics.duplicate_rows, 0u);
    EXPECT_EQ(got.statistics.overflow_rows, 0u);
    got.statistics = want.statistics;  // probe totals count the inserts since the build
    got.built_rows = want.built_rows;
    EXPECT_EQ(ImageDifference(got, want), "");
    if (round % 7 == 0) {
      in_place->undo->Undo();
      EXPECT_EQ(ImageDifference(this->Image(*index), before), "") << "undo";
      in_place = this->backend_->MutateInPlace(*index, batch, 0.8);
      ASSERT_TRUE(in_place.ok() && in_place->applied);
    }
    if (this->HasFailure()) return;
  }
  EXPECT_EQ(applied, 200);
}

TYPED_TEST(MutationInPlaceTest, BatchesPastTheLoadOrTheProbeBoundChangeNothing) {
  using K = TypeParam;
  std::mt19937_64 rng(3);
  // Load: 20 build rows in 32 slots, then 30 new keys would pass 0.8.
  auto index = this->Built(32, 0, rng);
  const IndexImage before = this->Image(*index);
  std::vector<K> upserts;
  for (uint64_t k = 1000; k < 1030; ++k) upserts.push_back(K(k));
  std::vector<uint32_t> values(upserts.size(), 5);
  Payload p;
  for (size_t i = 0; i < upserts.size(); ++i) p.Add(rng);
  MutationBatchT<K> batch;
  batch.upsert_keys = {std::span<const K>(upserts)};
  batch.values = {std::span<const uint32_t>(values)};
  batch.payload = p.Views();
  auto out = this->backend_->MutateInPlace(*index, batch, 0.8);
  ASSERT_TRUE(out.ok());
  EXPECT_FALSE(out->applied);
  EXPECT_EQ(ImageDifference(this->Image(*index), before), "");
  // Probe bound 1: a second key of a taken home cannot be placed.
  auto tight = this->Built(4096, 1, rng);
  const IndexImage tight_before = this->Image(*tight);
  out = this->backend_->MutateInPlace(*tight, batch, 1.0);
  ASSERT_TRUE(out.ok());
  if (!out->applied) EXPECT_EQ(ImageDifference(this->Image(*tight), tight_before), "");
  // A reserved upsert key is refused naming its row, and changes nothing.
  upserts[3] = kEmptyKeyOf<K>;
  out = this->backend_->MutateInPlace(*index, batch, 1.0);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(out.status().message()).find("upsert key row 3"), std::string::npos)
      << out.status();
  EXPECT_EQ(ImageDifference(this->Image(*index), before), "");
}

TYPED_TEST(MutationInPlaceTest, KeepAllIsLeftToTheRebuild) {
  using K = TypeParam;
  std::mt19937_64 rng(5);
  auto index = this->Built(64, 0, rng, DuplicatePolicy::kKeepAll);
  std::vector<K> deletes = {this->Key(rng)};
  MutationBatchT<K> batch;
  batch.delete_keys = {std::span<const K>(deletes)};
  auto out = this->backend_->MutateInPlace(*index, batch, 0.8);
  ASSERT_TRUE(out.ok());
  EXPECT_FALSE(out->applied);
}

}  // namespace
}  // namespace gpujoin::engine
