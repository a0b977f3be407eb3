// Multi-value indexes and join kinds through a real gpujoind on
// $GPUJOIN_TEST_BACKEND (cpu unless set), with the generated stub: keep_all
// builds with duplicates across chunks (groups in source order, the table and
// statistics of lowest_row, max_group_rows; also in batch mode and with uint64
// keys), lookup match counts on both paths,
// every join kind on both index kinds against a nested-loop model
// (multi_value_model.hpp) with payload gathered per pair and null for outer and
// anti rows, truncation to the stable prefix, count-only then a sized second
// request, --max-result-bytes capping the pairs of a keep_all join (reported,
// never silent), continuation of large results, the memory budget charging the
// value list at the spec and per chunk, bad kind and policy errors, and rebuilds
// between keep_all and lowest_row under checking streams.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "build_messages.hpp"
#include "wire/column_codec.hpp"
#include "gpujoin/testing/server_process.hpp"
#include "raw_stub_test.hpp"
#include "gpujoin/v1/gpujoin.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "multi_value_model.hpp"
#include "payload_model.hpp"

namespace gpujoin::server {
namespace {

using gpujoin::server::testing::CellsAt;
using gpujoin::server::testing::kEveryKind;
using gpujoin::server::testing::kHotKey;
using gpujoin::server::testing::KindName;
using gpujoin::server::testing::kNoRow;
using gpujoin::server::testing::kReservedKey;
using gpujoin::server::testing::ModelJoin;
using gpujoin::server::testing::ModelLookupOf;
using gpujoin::server::testing::ModelPairs;
using gpujoin::server::testing::MultiSource;
using gpujoin::server::testing::RandomLeftKeys;
using gpujoin::server::testing::RandomMultiSource;
using gpujoin::server::testing::ReadColumn;
using gpujoin::server::testing::Reassemble;
using gpujoin::server::testing::WireChunk;
using gpujoin::testing::ServerOptions;
using gpujoin::testing::ServerProcess;
using ::testing::HasSubstr;
using ::testing::Not;

// The spec of a build of `s` into `name`.
v1::BuildIndexRequest SpecOf(const std::string& name, const MultiSource& s, bool keep_all,
                             uint64_t capacity, bool replace = false) {
  v1::BuildIndexRequest r;
  v1::IndexSpec* spec = r.mutable_spec();
  spec->set_name(name);
  spec->set_capacity(capacity);
  spec->set_replace(replace);
  spec->set_first_value(s.first_value);
  spec->set_duplicates(keep_all ? v1::DUPLICATE_POLICY_KEEP_ALL : v1::DUPLICATE_POLICY_LOWEST_ROW);
  auto* p = spec->add_payload();
  p->set_name(s.payload.name);
  p->set_type(s.payload.type);
  return r;
}

// The spec, then the rows of `s` in chunks of 1 to 2 * `chunk` rows (random
// boundaries, so each key's rows spread over several chunks), each chunk
// carrying its rows' payload.
std::vector<v1::BuildIndexRequest> BuildOf(const std::string& name, const MultiSource& s,
                                           bool keep_all, uint64_t capacity, std::mt19937_64& rng,
                                           size_t chunk = 100, bool replace = false) {
  std::vector<v1::BuildIndexRequest> m = {SpecOf(name, s, keep_all, capacity, replace)};
  for (size_t first = 0; first < s.keys.size();) {
    const size_t n = std::min<size_t>(1 + rng() % (2 * chunk), s.keys.size() - first);
    v1::BuildIndexRequest c = testing::ChunkMsg(std::vector<uint32_t>(
        s.keys.begin() + static_cast<long>(first), s.keys.begin() + static_cast<long>(first + n)));
    *c.mutable_chunk()->add_payload() = WireChunk(s.payload, first, n);
    m.push_back(std::move(c));
    first += n;
  }
  return m;
}

// A left batch: `keys` packed (left rows first_left_row + i) or, with
// `explicit_ids`, as typed values with those left row IDs.
struct Left {
  std::vector<uint32_t> keys;
  uint32_t first_left_row = 0;
  std::vector<uint32_t> explicit_ids;

  std::vector<uint32_t> Ids() const {
    if (!explicit_ids.empty()) return explicit_ids;
    return testing::Iota(static_cast<uint32_t>(keys.size()), first_left_row);
  }
  void Fill(v1::LeftBatch* b) const {
    if (explicit_ids.empty()) {
      *b->mutable_keys()->mutable_packed() = PackColumn<uint32_t>(keys);
      b->set_first_left_row(first_left_row);
    } else {
      for (uint32_t k : keys) b->mutable_keys()->mutable_values()->add_v(k);
      *b->mutable_left_rows()->mutable_packed() = PackColumn<uint32_t>(explicit_ids);
    }
  }
};

v1::JoinRequest JoinOf(const std::string& index, v1::JoinKind kind, const std::vector<Left>& left,
                       bool select, uint64_t id = 0) {
  v1::JoinRequest j;
  j.set_index(index);
  j.set_kind(kind);
  j.set_batch_id(id);
  if (select) j.add_select("p");
  for (const Left& l : left) l.Fill(j.add_batches());
  return j;
}

// Checks one batch's result against the model: the exact count, the stable
// prefix of min(count, capacity) pairs, their payload (null for rows without a
// match), and overflow exactly when pairs were cut.
void ExpectBatch(const v1::JoinBatchResult& r, const ModelPairs& want, const MultiSource& s,
                 bool select, const std::string& what) {
  SCOPED_TRACE(what);
  const uint64_t count = want.left.size();
  EXPECT_EQ(r.count(), count);
  const uint64_t kept = std::min<uint64_t>(count, r.capacity());
  const auto left = UnpackColumn<uint32_t>(r.left_rows());
  const auto right = UnpackColumn<uint32_t>(r.right_rows());
  ASSERT_EQ(left.size(), kept);
  ASSERT_EQ(right.size(), kept);
  EXPECT_EQ(left, std::vector<uint32_t>(want.left.begin(), want.left.begin() + kept));
  EXPECT_EQ(right, std::vector<uint32_t>(want.right.begin(), want.right.begin() + kept));
  EXPECT_EQ(r.overflow(), count > r.capacity());
  if (select) {
    ASSERT_EQ(r.columns_size(), 1);
    EXPECT_EQ(ReadColumn(r.columns(0), kept),
              CellsAt(s.payload, std::vector<uint32_t>(want.payload_rows.begin(),
                                                       want.payload_rows.begin() + kept)));
  } else {
    EXPECT_EQ(r.columns_size(), 0);
  }
}

class MultiValueIntegrationTest : public RawStubTest {
 protected:
  void Start(std::vector<std::string> extra = {}) { StartServer(std::move(extra), false); }
};

v1::LookupRequest LookupOf(const std::string& index, const std::vector<uint32_t>& keys, bool packed,
                           bool counts, bool select, uint64_t id) {
  v1::LookupRequest r;
  r.set_index(index);
  r.set_batch_id(id);
  r.set_want_match_counts(counts);
  if (select) r.add_select("p");
  if (packed) {
    *r.mutable_keys()->mutable_packed() = PackColumn<uint32_t>(keys);
  } else {
    for (uint32_t k : keys) r.mutable_keys()->mutable_values()->add_v(k);
  }
  return r;
}

// A keep_all build of rows whose keys repeat across chunks: the table and the
// six statistics are those of the lowest_row build of the same rows; IndexInfo
// says keep_all and the largest group (0 for lowest_row); a lookup answers the
// first match's value and payload with the group's size as its match count
// (1/0 on lowest_row), on the bytes path and the protobuf path; an inner join
// pairs each left row with every row of its key's group, in source order.
TEST_F(MultiValueIntegrationTest, KeepAllBuildKeepsEveryRowOfEachKeyInSourceOrder) {
  Start();
  std::mt19937_64 rng(21);
  const MultiSource s = RandomMultiSource(rng, 300, 120, 150);
  v1::BuildIndexResponse lowest, all;
  ASSERT_TRUE(Build(BuildOf("lr", s, false, 2048, rng), &lowest).ok());
  const grpc::Status built = Build(BuildOf("ka", s, true, 2048, rng), &all);
  ASSERT_TRUE(built.ok()) << built.error_message();

  EXPECT_EQ(lowest.index().duplicates(), v1::DUPLICATE_POLICY_LOWEST_ROW);
  EXPECT_EQ(all.index().duplicates(), v1::DUPLICATE_POLICY_KEEP_ALL);
  EXPECT_EQ(Describe("ka").duplicates(), v1::DUPLICATE_POLICY_KEEP_ALL);
  const v1::BuildStatistics& a = all.index().statistics();
  const v1::BuildStatistics& l = lowest.index().statistics();
  EXPECT_EQ(a.unique_keys(), s.Rows().size());
  EXPECT_EQ(a.unique_keys(), l.unique_keys());
  EXPECT_EQ(a.duplicate_rows(), l.duplicate_rows());
  EXPECT_EQ(a.overflow_rows(), 0u);
  EXPECT_EQ(a.invalid_rows(), 3u);
  EXPECT_EQ(a.invalid_rows(), l.invalid_rows());
  // With repeated keys a parallel (CUDA) insert may count a duplicate row's
  // probes where it met its key, which differs from build to build
  // (docs/engine.md); the CPU counts them identically.
  if (gpujoin::testing::TestBackend() == "cpu") EXPECT_EQ(a.total_probes(), l.total_probes());
  EXPECT_EQ(a.max_probes(), l.max_probes());
  EXPECT_EQ(a.max_group_rows(), 150u);
  EXPECT_EQ(a.max_group_rows(), s.MaxGroupRows());
  EXPECT_EQ(l.max_group_rows(), 0u);
  EXPECT_EQ(all.index().rows(), s.keys.size());
  // The value list and the payload per kept row are index memory.
  EXPECT_GT(all.index().device_bytes(), lowest.index().device_bytes());
  EXPECT_EQ(Info().device_memory_used_bytes(),
            all.index().device_bytes() + lowest.index().device_bytes());

  std::vector<uint32_t> q = RandomLeftKeys(s, 600, rng);
  std::vector<v1::LookupRequest> requests;
  for (const bool packed : {true, false}) {
    for (const std::string index : {"ka", "lr"}) {
      requests.push_back(LookupOf(index, q, packed, true, true, requests.size()));
    }
  }
  requests.push_back(LookupOf("ka", q, true, false, false, requests.size()));  // counts not asked
  const auto answers = Lookups(requests);
  ASSERT_EQ(answers.size(), requests.size());
  for (size_t i = 0; i + 1 < answers.size(); ++i) {
    const v1::LookupResponse& r = answers[i];
    ASSERT_FALSE(r.has_error()) << r.error().message();
    const bool keep_all = requests[i].index() == "ka";
    const auto want = ModelLookupOf(s, keep_all, q);
    SCOPED_TRACE(absl::StrCat("answer ", i, keep_all ? " keep_all" : " lowest_row"));
    EXPECT_EQ(UnpackColumn<uint32_t>(r.values()), want.values);
    EXPECT_EQ(UnpackColumn<uint8_t>(r.found()), want.found);
    EXPECT_EQ(UnpackColumn<uint32_t>(r.match_counts()), want.match_counts);
    ASSERT_EQ(r.columns_size(), 1);
    EXPECT_EQ(ReadColumn(r.columns(0), q.size()), CellsAt(s.payload, want.payload_rows));
  }
  EXPECT_TRUE(answers.back().match_counts().empty());

  // Inner join: every row of each group, in source order.
  const Left left{q, 5, {}};
  v1::JoinRequest j = JoinOf("ka", v1::JOIN_KIND_INNER, {left}, true);
  const ModelPairs want = ModelJoin(s, true, v1::JOIN_KIND_INNER, q, left.Ids());
  ASSERT_GT(want.left.size(), q.size());  // more pairs than left rows
  j.mutable_batches(0)->set_capacity(want.left.size());
  const auto joined = Joins({j});
  ASSERT_EQ(joined.size(), 1u);
  ASSERT_FALSE(joined[0].has_error()) << joined[0].error().message();
  ExpectBatch(joined[0].results(0), want, s, true, "inner on keep_all");
  EXPECT_EQ(joined[0].results(0).statistics().found() + joined[0].results(0).statistics().missing(),
            q.size());
}

// Every join kind on both index kinds against the nested-loop model, for
// sources with groups of 1, 2-8 rows and one hot key: batches of packed keys
// with a first left row and typed keys with explicit left row IDs, payload
// gathered per pair (null for the outer and anti rows without a match), found
// per left row. A count-only request first gives each batch's exact count, for
// every kind; a second request sized from it gets every pair, no overflow.
TEST_F(MultiValueIntegrationTest, EveryJoinKindOnBothIndexKindsMatchesANestedLoopModel) {
  Start();
  for (const uint64_t seed : {1, 2, 3}) {
    std::mt19937_64 rng(seed);
    const MultiSource s = RandomMultiSource(rng, 40 * seed, 30, 60 + 40 * seed);
    for (const bool keep_all : {false, true}) {
      const std::string name = keep_all ? "ka" : "lr";
      const grpc::Status built = Build(BuildOf(name, s, keep_all, 1024, rng, 50, true));
      ASSERT_TRUE(built.ok()) << built.error_message();
      std::vector<Left> left;
      left.push_back(Left{RandomLeftKeys(s, 200, rng), 1000, {}});
      left.push_back(Left{RandomLeftKeys(s, 1, rng), 0, {}});
      Left typed{RandomLeftKeys(s, 150, rng), 0, {}};
      for (size_t i = 0; i < typed.keys.size(); ++i) {
        typed.explicit_ids.push_back(static_cast<uint32_t>(rng() % 100000));
      }
      left.push_back(typed);
      for (const v1::JoinKind kind : kEveryKind) {
        const std::string what = absl::StrCat("seed ", seed, " ", name, " ", KindName(kind));
        SCOPED_TRACE(what);
        std::vector<ModelPairs> want;
        for (const Left& l : left) want.push_back(ModelJoin(s, keep_all, kind, l.keys, l.Ids()));

        v1::JoinRequest counting = JoinOf(name, kind, left, true, 1);
        for (auto& b : *counting.mutable_batches()) {
          b.set_count_only(true);
          b.set_want_found(true);
        }
        const auto counted = Joins({counting});
        ASSERT_EQ(counted.size(), 1u);
        ASSERT_FALSE(counted[0].has_error()) << counted[0].error().message();
        ASSERT_EQ(counted[0].results_size(), 3);
        v1::JoinRequest sized = JoinOf(name, kind, left, true, 2);
        for (int b = 0; b < 3; ++b) {
          const v1::JoinBatchResult& r = counted[0].results(b);
          EXPECT_EQ(r.count(), want[b].left.size()) << "batch " << b;
          EXPECT_FALSE(r.overflow());
          EXPECT_TRUE(r.left_rows().empty());
          EXPECT_EQ(r.columns_size(), 0);
          EXPECT_EQ(UnpackColumn<uint8_t>(r.found()), want[b].found) << "batch " << b;
          // The count sizes the second request (at least 1: capacity 0 means the rows).
          sized.mutable_batches(b)->set_capacity(std::max<uint64_t>(1, r.count()));
        }
        const auto joined = Joins({sized});
        ASSERT_EQ(joined.size(), 1u);
        ASSERT_FALSE(joined[0].has_error()) << joined[0].error().message();
        ASSERT_EQ(joined[0].results_size(), 3);
        for (int b = 0; b < 3; ++b) {
          ExpectBatch(joined[0].results(b), want[b], s, true, absl::StrCat(what, " batch ", b));
          EXPECT_FALSE(joined[0].results(b).overflow());
        }
      }
    }
  }
}

// Capacity keeps the stable prefix of every kind and sets overflow; capacity 0
// still means the number of left rows, so a keep_all inner or outer join whose
// pairs outnumber its left rows is cut there (overflow set, count exact).
TEST_F(MultiValueIntegrationTest, CapacityKeepsTheStablePrefixOfEveryKind) {
  Start();
  std::mt19937_64 rng(7);
  const MultiSource s = RandomMultiSource(rng, 50, 40, 90);
  ASSERT_TRUE(Build(BuildOf("ka", s, true, 1024, rng)).ok());
  const Left left{RandomLeftKeys(s, 300, rng), 0, {}};
  for (const v1::JoinKind kind : kEveryKind) {
    SCOPED_TRACE(KindName(kind));
    const ModelPairs want = ModelJoin(s, true, kind, left.keys, left.Ids());
    ASSERT_GT(want.left.size(), 10u);
    std::vector<v1::JoinRequest> requests;
    for (const uint64_t capacity : {uint64_t{1}, uint64_t{7}, want.left.size() - 1, uint64_t{0}}) {
      requests.push_back(JoinOf("ka", kind, {left}, true, capacity));
      requests.back().mutable_batches(0)->set_capacity(capacity);
    }
    const auto joined = Joins(requests);
    ASSERT_EQ(joined.size(), requests.size());
    for (size_t i = 0; i < joined.size(); ++i) {
      ASSERT_FALSE(joined[i].has_error()) << joined[i].error().message();
      const v1::JoinBatchResult& r = joined[i].results(0);
      const uint64_t capacity = requests[i].batches(0).capacity();
      EXPECT_EQ(r.capacity(), capacity == 0 ? left.keys.size() : capacity);
      ExpectBatch(r, want, s, true, absl::StrCat("capacity ", capacity));
    }
    // Capacity 0 on an inner or outer keep_all join: cut at the left rows.
    const v1::JoinBatchResult& zero = joined.back().results(0);
    if (kind == v1::JOIN_KIND_INNER || kind == v1::JOIN_KIND_LEFT_OUTER) {
      EXPECT_GT(want.left.size(), left.keys.size());
      EXPECT_TRUE(zero.overflow());
      EXPECT_EQ(zero.left_rows().size() / 4, left.keys.size());
    } else {
      EXPECT_FALSE(zero.overflow());
    }
  }
}

// --max-result-bytes caps the pairs of a keep_all join: a capacity (sized from a
// count-only request) whose pairs do not fit gets what fits, reported as the
// batch's capacity with overflow set; the prefix is exact. Without the cap the
// same request is answered whole.
TEST_F(MultiValueIntegrationTest, MaxResultBytesCapsTheAllocationAndReportsIt) {
  Start({"--max-result-bytes=64K"});
  std::mt19937_64 rng(64);
  const MultiSource s = RandomMultiSource(rng, 10, 10, 400);
  ASSERT_TRUE(Build(BuildOf("ka", s, true, 1024, rng)).ok());
  // 100 rows of the hot key: 40000 pairs, 320000 bytes.
  const Left left{std::vector<uint32_t>(100, kHotKey), 0, {}};
  const ModelPairs want = ModelJoin(s, true, v1::JOIN_KIND_INNER, left.keys, left.Ids());
  ASSERT_EQ(want.left.size(), 40000u);
  v1::JoinRequest j = JoinOf("ka", v1::JOIN_KIND_INNER, {left}, false);
  j.mutable_batches(0)->set_capacity(want.left.size());
  v1::JoinRequest small = j;  // a capacity that fits is kept as asked
  small.mutable_batches(0)->set_capacity(5000);
  const auto joined = Joins({j, small});
  ASSERT_EQ(joined.size(), 2u);
  ASSERT_FALSE(joined[0].has_error()) << joined[0].error().message();
  const v1::JoinBatchResult& r = joined[0].results(0);
  // Pairs of 8 bytes in 64 KiB less the 1024 bytes every batch is charged.
  EXPECT_EQ(r.capacity(), (65536u - 1024) / 8);
  EXPECT_TRUE(r.overflow());
  ExpectBatch(r, want, s, false, "capped");
  ASSERT_FALSE(joined[1].has_error()) << joined[1].error().message();
  EXPECT_EQ(joined[1].results(0).capacity(), 5000u);
  ExpectBatch(joined[1].results(0), want, s, false, "small");

  // Found and probes come first: they shrink what is left for pairs.
  v1::JoinRequest with_found = j;
  with_found.mutable_batches(0)->set_want_found(true);
  with_found.mutable_batches(0)->set_want_probes(true);
  const auto found = Joins({with_found});
  ASSERT_EQ(found.size(), 1u);
  ASSERT_FALSE(found[0].has_error()) << found[0].error().message();
  EXPECT_EQ(found[0].results(0).capacity(), (65536u - 1024 - 500) / 8);
  ExpectBatch(found[0].results(0), want, s, false, "capped beside found and probes");
}

// A keep_all join result larger than one message continues in further
// messages; reassembled, it is the model's whole answer (payload included).
TEST_F(MultiValueIntegrationTest, LargeResultsContinueInFurtherMessages) {
  Start({"--max-message-bytes=64K"});
  std::mt19937_64 rng(99);
  const MultiSource s = RandomMultiSource(rng, 100, 50, 500);
  ASSERT_TRUE(Build(BuildOf("ka", s, true, 1024, rng)).ok());
  Left left{RandomLeftKeys(s, 400, rng), 0, {}};
  for (int i = 0; i < 40; ++i) left.keys[i * 10] = kHotKey;
  std::vector<v1::JoinRequest> requests;
  std::vector<ModelPairs> want;
  for (const v1::JoinKind kind : kEveryKind) {
    want.push_back(ModelJoin(s, true, kind, left.keys, left.Ids()));
    requests.push_back(JoinOf("ka", kind, {left}, true, requests.size()));
    requests.back().mutable_batches(0)->set_capacity(want.back().left.size());
  }
  ASSERT_GT(want[0].left.size() * 17, 65536u * 2);  // inner: several messages
  size_t parts = 0;
  const auto whole = Reassemble(Joins(requests), 65536, &parts);
  EXPECT_GT(parts, requests.size());
  ASSERT_EQ(whole.size(), requests.size());
  for (size_t i = 0; i < whole.size(); ++i) {
    ASSERT_FALSE(whole[i].has_error()) << whole[i].error().message();
    ExpectBatch(whole[i].results(0), want[i], s, true, KindName(kEveryKind[i]));
    EXPECT_FALSE(whole[i].results(0).overflow());
  }
}

// The memory budget charges a keep_all build its value list and groups: a spec
// with expected_rows whose groups do not fit is refused at the spec (the
// lowest_row spec of the same rows fits), one sized from its chunks at the
// chunk that crosses the budget, before anything is allocated; the budget's use
// is unchanged and the lowest_row build of the same rows fits. The sizes are the
// CPU backend's (8 bytes a slot; groups 8 a slot and 4 a row; a keep_all
// build's transient memory 4 a slot and 4 a row).
TEST_F(MultiValueIntegrationTest, TheBudgetRefusesAKeepAllBuildWhoseValueListDoesNotFit) {
  if (gpujoin::testing::TestBackend() != "cpu") GTEST_SKIP() << "sizes of the CPU backend";
  Start({"--device-memory-limit=40000"});

  // expected_rows 2000 at load factor 1: 2048 slots. lowest_row: a 16 KiB table;
  // keep_all: 16384 + 16384 + 8000 groups + 8192 + 8000 transient bytes.
  for (const bool keep_all : {false, true}) {
    v1::BuildIndexRequest spec;
    spec.mutable_spec()->set_name(keep_all ? "ka" : "lr");
    spec.mutable_spec()->set_expected_rows(2000);
    spec.mutable_spec()->set_target_load_factor(1.0);
    if (keep_all) spec.mutable_spec()->set_duplicates(v1::DUPLICATE_POLICY_KEEP_ALL);
    const grpc::Status s = Build({spec});
    if (!keep_all) {
      EXPECT_TRUE(s.ok()) << s.error_message();
      continue;
    }
    ASSERT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
    EXPECT_THAT(s.error_message(),
                HasSubstr("16384 table bytes + 24384 bytes of keep_all groups for 2000 rows + "
                          "16192 transient bytes"));
    EXPECT_THAT(s.error_message(), HasSubstr("needs 56960 bytes but 16384 of the 40000"));
    EXPECT_THAT(s.error_message(), Not(HasSubstr("chunks[")));
  }
  // With a payload column, kept per row: 2000 x 8 bytes (not 2048 slots x 8).
  v1::BuildIndexRequest with_payload;
  with_payload.mutable_spec()->set_name("kp");
  with_payload.mutable_spec()->set_expected_rows(2000);
  with_payload.mutable_spec()->set_target_load_factor(1.0);
  with_payload.mutable_spec()->set_duplicates(v1::DUPLICATE_POLICY_KEEP_ALL);
  auto* column = with_payload.mutable_spec()->add_payload();
  column->set_name("p");
  column->set_type(v1::COLUMN_TYPE_INT64);
  const grpc::Status per_row = Build({with_payload});
  ASSERT_EQ(per_row.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << per_row.error_message();
  EXPECT_THAT(per_row.error_message(),
              HasSubstr("24384 bytes of keep_all groups for 2000 rows + 16000 bytes for 1 payload "
                        "columns (per row)"));
  EXPECT_EQ(Info().device_memory_used_bytes(), 16384u);
  grpc::ClientContext ctx;
  v1::DropIndexRequest drop;
  drop.set_name("lr");
  v1::DropIndexResponse dropped;
  ASSERT_TRUE(stub_->DropIndex(&ctx, drop, &dropped).ok());
  EXPECT_EQ(Info().device_memory_used_bytes(), 0u);

  // Capacity 1024, two chunks of 1000 rows of 10 keys. keep_all: the first chunk
  // needs 8192 + 12192 + 8096 bytes and its staged rows, the second 8192 +
  // 16192 + 12096 and both chunks' staged rows: over the budget.
  MultiSource s;
  for (uint32_t r = 0; r < 2000; ++r) s.keys.push_back(1 + r % 10);
  for (const bool keep_all : {true, false}) {
    std::vector<v1::BuildIndexRequest> m = {SpecOf("rows", s, keep_all, 1024)};
    m[0].mutable_spec()->clear_payload();
    for (uint32_t first = 0; first < s.keys.size(); first += 1000) {
      m.push_back(testing::ChunkMsg(
          std::vector<uint32_t>(s.keys.begin() + first, s.keys.begin() + first + 1000)));
    }
    v1::BuildIndexResponse r;
    const grpc::Status st = Build(m, &r);
    if (!keep_all) {
      ASSERT_TRUE(st.ok()) << st.error_message();
      EXPECT_EQ(r.index().statistics().max_group_rows(), 0u);
      EXPECT_EQ(Info().device_memory_used_bytes(), 8192u);
      continue;
    }
    ASSERT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << st.error_message();
    EXPECT_THAT(st.error_message(), HasSubstr("chunks[1]: "));
    EXPECT_THAT(st.error_message(), HasSubstr("16192 bytes of keep_all groups for 2000 rows"));
    EXPECT_THAT(st.error_message(), HasSubstr("device memory budget exceeded"));
    EXPECT_EQ(Info().device_memory_used_bytes(), 0u);
    EXPECT_EQ(Info().index_count(), 0u);
  }
}

// keep_all in batch mode (values row_base + position, masked rows left out of
// the groups, the earliest chunk's row first) and with uint64 keys (keys64,
// keys that differ only above bit 31): lookup match counts and inner and outer
// joins against a model of the groups.
TEST_F(MultiValueIntegrationTest, KeepAllInBatchModeAndWithWideKeys) {
  Start();
  std::mt19937_64 rng(2164);
  // Batch mode: three chunks, row bases out of order, a validity mask on two.
  std::map<uint32_t, std::vector<uint32_t>> groups;  // key -> values in source order
  std::vector<v1::BuildIndexRequest> m(1);
  m[0].mutable_spec()->set_name("bm");
  m[0].mutable_spec()->set_capacity(256);
  m[0].mutable_spec()->set_batch_mode(true);
  m[0].mutable_spec()->set_duplicates(v1::DUPLICATE_POLICY_KEEP_ALL);
  for (const uint32_t base : {5000u, 100u, 9000u}) {
    std::vector<uint32_t> keys, mask;
    for (int i = 0; i < 60; ++i) {
      keys.push_back(1 + static_cast<uint32_t>(rng() % 25));
      mask.push_back(base == 9000u || rng() % 4 != 0 ? 1 : 0);
      if (mask.back() != 0) groups[keys.back()].push_back(base + i);
    }
    v1::BuildIndexRequest c = testing::ChunkMsg(keys);
    c.mutable_chunk()->set_row_base(base);
    if (base != 9000u)
      *c.mutable_chunk()->mutable_validity()->mutable_packed() = PackColumn<uint32_t>(mask);
    m.push_back(std::move(c));
  }
  v1::BuildIndexResponse built;
  const grpc::Status s = Build(m, &built);
  ASSERT_TRUE(s.ok()) << s.error_message();
  uint64_t largest = 0;
  for (const auto& [key, values] : groups) largest = std::max<uint64_t>(largest, values.size());
  EXPECT_EQ(built.index().statistics().max_group_rows(), largest);
  EXPECT_EQ(built.index().statistics().unique_keys(), groups.size());

  const std::vector<uint32_t> q = {3, 26, 7, 3, 0xffffffffu, 25, 1};
  const auto answers = Lookups({LookupOf("bm", q, true, true, false, 1)});
  ASSERT_EQ(answers.size(), 1u);
  ASSERT_FALSE(answers[0].has_error()) << answers[0].error().message();
  std::vector<uint32_t> values, counts, inner_left, inner_right, outer_left, outer_right;
  for (uint32_t i = 0; i < q.size(); ++i) {
    const auto it = groups.find(q[i]);
    const bool hit = it != groups.end();
    values.push_back(hit ? it->second.front() : kReservedKey);
    counts.push_back(hit ? static_cast<uint32_t>(it->second.size()) : 0);
    for (uint32_t v : hit ? it->second : std::vector<uint32_t>{}) {
      inner_left.push_back(i);
      inner_right.push_back(v);
    }
    const std::vector<uint32_t> outer = hit ? it->second : std::vector<uint32_t>{kReservedKey};
    for (uint32_t v : outer) {
      outer_left.push_back(i);
      outer_right.push_back(v);
    }
  }
  EXPECT_EQ(UnpackColumn<uint32_t>(answers[0].values()), values);
  EXPECT_EQ(UnpackColumn<uint32_t>(answers[0].match_counts()), counts);
  v1::JoinRequest inner = JoinOf("bm", v1::JOIN_KIND_INNER, {Left{q, 0, {}}}, false, 2);
  inner.mutable_batches(0)->set_capacity(1000);
  v1::JoinRequest outer = inner;
  outer.set_kind(v1::JOIN_KIND_LEFT_OUTER);
  outer.set_batch_id(3);
  const auto joined = Joins({inner, outer});
  ASSERT_EQ(joined.size(), 2u);
  ASSERT_FALSE(joined[0].has_error()) << joined[0].error().message();
  ASSERT_FALSE(joined[1].has_error()) << joined[1].error().message();
  EXPECT_EQ(UnpackColumn<uint32_t>(joined[0].results(0).left_rows()), inner_left);
  EXPECT_EQ(UnpackColumn<uint32_t>(joined[0].results(0).right_rows()), inner_right);
  EXPECT_EQ(UnpackColumn<uint32_t>(joined[1].results(0).left_rows()), outer_left);
  EXPECT_EQ(UnpackColumn<uint32_t>(joined[1].results(0).right_rows()), outer_right);

  // uint64 keys that differ only above bit 31: (k << 32) | 9, rows in order.
  std::vector<uint64_t> wide;
  for (int i = 0; i < 90; ++i) wide.push_back((uint64_t{1} + rng() % 12) << 32 | 9);
  v1::BuildIndexRequest wide_spec;
  wide_spec.mutable_spec()->set_name("w");
  wide_spec.mutable_spec()->set_capacity(64);
  wide_spec.mutable_spec()->set_key_type(v1::KEY_TYPE_UINT64);
  wide_spec.mutable_spec()->set_duplicates(v1::DUPLICATE_POLICY_KEEP_ALL);
  std::vector<v1::BuildIndexRequest> w = {wide_spec};
  for (size_t first = 0; first < wide.size(); first += 30) {
    v1::BuildIndexRequest c;
    *c.mutable_chunk()->mutable_keys64()->mutable_packed() = PackColumn<uint64_t>(
        std::vector<uint64_t>(wide.begin() + first, wide.begin() + first + 30));
    w.push_back(std::move(c));
  }
  ASSERT_TRUE(Build(w).ok());
  const std::vector<uint64_t> q64 = {uint64_t{3} << 32 | 9, 9, uint64_t{12} << 32 | 9,
                                     uint64_t{13} << 32 | 9};
  v1::LookupRequest lookup64;
  lookup64.set_index("w");
  lookup64.set_want_match_counts(true);
  *lookup64.mutable_keys64()->mutable_packed() = PackColumn<uint64_t>(q64);
  v1::JoinRequest join64;
  join64.set_index("w");
  join64.set_kind(v1::JOIN_KIND_INNER);
  *join64.add_batches()->mutable_keys64()->mutable_packed() = PackColumn<uint64_t>(q64);
  join64.mutable_batches(0)->set_capacity(1000);
  std::vector<uint32_t> want_counts, want_left, want_right;
  for (uint32_t i = 0; i < q64.size(); ++i) {
    uint32_t n = 0;
    for (uint32_t r = 0; r < wide.size(); ++r) {
      if (wide[r] != q64[i]) continue;
      ++n;
      want_left.push_back(i);
      want_right.push_back(r);
    }
    want_counts.push_back(n);
  }
  const auto wide_answers = Lookups({lookup64});
  ASSERT_EQ(wide_answers.size(), 1u);
  ASSERT_FALSE(wide_answers[0].has_error()) << wide_answers[0].error().message();
  EXPECT_EQ(UnpackColumn<uint32_t>(wide_answers[0].match_counts()), want_counts);
  const auto wide_joined = Joins({join64});
  ASSERT_EQ(wide_joined.size(), 1u);
  ASSERT_FALSE(wide_joined[0].has_error()) << wide_joined[0].error().message();
  EXPECT_EQ(UnpackColumn<uint32_t>(wide_joined[0].results(0).left_rows()), want_left);
  EXPECT_EQ(UnpackColumn<uint32_t>(wide_joined[0].results(0).right_rows()), want_right);
}

// Unknown duplicate policies and join kinds are INVALID_ARGUMENT naming the
// field (the build installs nothing; the join's error is in-band and the
// stream goes on).
TEST_F(MultiValueIntegrationTest, UnknownPolicyAndKindAreRefusedNamingTheField) {
  Start();
  std::mt19937_64 rng(3);
  const MultiSource s = RandomMultiSource(rng, 10, 5, 5);
  std::vector<v1::BuildIndexRequest> m = BuildOf("ka", s, true, 64, rng);
  v1::BuildIndexRequest bad = m[0];
  bad.mutable_spec()->set_duplicates(static_cast<v1::DuplicatePolicy>(9));
  std::vector<v1::BuildIndexRequest> bad_build = m;
  bad_build[0] = bad;
  const grpc::Status refused = Build(bad_build);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(refused.error_message(), HasSubstr("spec.duplicates: 9 is not a duplicate policy"));
  EXPECT_EQ(Info().index_count(), 0u);
  ASSERT_TRUE(Build(m).ok());

  v1::JoinRequest j = JoinOf("ka", v1::JOIN_KIND_INNER, {Left{{1, 2}, 0, {}}}, false, 1);
  v1::JoinRequest bad_kind = j;
  bad_kind.set_kind(static_cast<v1::JoinKind>(5));
  bad_kind.set_batch_id(2);
  v1::JoinRequest bad_kind_unknown_index = bad_kind;
  bad_kind_unknown_index.set_index("nope");
  const auto joined = Joins({bad_kind, j, bad_kind_unknown_index});
  ASSERT_EQ(joined.size(), 3u);
  EXPECT_EQ(joined[0].error().code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(joined[0].error().message(), HasSubstr("kind: 5 is not a join kind"));
  EXPECT_FALSE(joined[1].has_error()) << joined[1].error().message();
  EXPECT_EQ(joined[2].error().code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(joined[2].error().message(), HasSubstr("kind: 5"));
}

// Rebuilds alternating keep_all and lowest_row under four lookup and four join
// streams: every answer is the one of the policy and values of its
// index_version (version v: values v * 100000 + row, odd versions keep_all),
// never a mix.
TEST_F(MultiValueIntegrationTest, RebuildsBetweenKeepAllAndLowestRowUnderCheckingStreams) {
  Start();
  std::mt19937_64 rng(2121);
  const MultiSource base = RandomMultiSource(rng, 200, 100, 80);
  auto source_of = [&](uint64_t version) {
    MultiSource s = base;
    s.first_value = static_cast<uint32_t>(version * 100000);
    return s;
  };
  auto keep_all_of = [](uint64_t version) { return version % 2 == 1; };
  ASSERT_TRUE(Build(BuildOf("hot", source_of(1), true, 2048, rng)).ok());
  const std::vector<uint32_t> q = RandomLeftKeys(base, 300, rng);

  constexpr int kStreams = 8;
  std::atomic<bool> stop{false};
  std::atomic<int> failures{0};
  std::vector<std::atomic<int>> answered(kStreams);
  std::vector<std::thread> streams;
  for (int st = 0; st < kStreams; ++st) {
    streams.emplace_back([&, st] {
      auto own = NewStub(*server_);
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
      auto fail = [&](const std::string& why) {
        failures.fetch_add(1);
        ADD_FAILURE() << "stream " << st << ": " << why;
      };
      uint64_t id = 0;
      if (st % 2 == 0) {
        auto stream = own->Lookup(&ctx);
        while (!stop.load() || answered[st].load() == 0) {
          if (!stream->Write(LookupOf("hot", q, id % 4 == 0, true, true, id))) break;
          v1::LookupResponse r;
          if (!stream->Read(&r)) break;
          if (r.has_error() || r.batch_id() != id++) {
            fail(r.error().message());
            break;
          }
          const uint64_t v = r.index_version();
          const auto want = ModelLookupOf(source_of(v), keep_all_of(v), q);
          if (UnpackColumn<uint32_t>(r.values()) != want.values ||
              UnpackColumn<uint32_t>(r.match_counts()) != want.match_counts ||
              r.columns_size() != 1 ||
              ReadColumn(r.columns(0), q.size()) != CellsAt(base.payload, want.payload_rows)) {
            fail(absl::StrCat("lookup on version ", v, " mixed another version's answer"));
            break;
          }
          answered[st].fetch_add(1);
        }
        stream->WritesDone();
        const grpc::Status s = stream->Finish();
        if (!s.ok()) fail(s.error_message());
      } else {
        auto stream = own->Join(&ctx);
        const v1::JoinKind kind = kEveryKind[(st / 2) % 4];
        const Left left{q, 0, {}};
        while (!stop.load() || answered[st].load() == 0) {
          v1::JoinRequest j = JoinOf("hot", kind, {left}, true, id);
          j.mutable_batches(0)->set_capacity(q.size() * 100);
          if (!stream->Write(j)) break;
          v1::JoinResponse r;
          if (!stream->Read(&r)) break;
          if (r.has_error() || r.batch_id() != id++ || r.more()) {
            fail(r.error().message());
            break;
          }
          const uint64_t v = r.index_version();
          const ModelPairs want = ModelJoin(source_of(v), keep_all_of(v), kind, q, left.Ids());
          const v1::JoinBatchResult& b = r.results(0);
          if (b.count() != want.left.size() || UnpackColumn<uint32_t>(b.left_rows()) != want.left ||
              UnpackColumn<uint32_t>(b.right_rows()) != want.right || b.overflow() ||
              ReadColumn(b.columns(0), want.left.size()) !=
                  CellsAt(base.payload, want.payload_rows)) {
            fail(absl::StrCat(KindName(kind), " join on version ", v,
                              " mixed another version's answer"));
            break;
          }
          answered[st].fetch_add(1);
        }
        stream->WritesDone();
        const grpc::Status s = stream->Finish();
        if (!s.ok()) fail(s.error_message());
      }
    });
  }
  // Each rebuild waits until every stream has answered since the one before.
  auto wait_for_every_stream = [&] {
    std::vector<int> seen(kStreams);
    for (int st = 0; st < kStreams; ++st) seen[st] = answered[st].load();
    for (int i = 0; i < 2000 && failures.load() == 0; ++i) {
      bool all = true;
      for (int st = 0; st < kStreams; ++st) all = all && answered[st].load() > seen[st];
      if (all) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  };
  for (uint64_t version = 2; version <= 9; ++version) {
    wait_for_every_stream();
    v1::BuildIndexResponse r;
    const grpc::Status s =
        Build(BuildOf("hot", source_of(version), keep_all_of(version), 2048, rng, 100, true), &r);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(r.index().version(), version);
    EXPECT_EQ(r.index().duplicates(), keep_all_of(version) ? v1::DUPLICATE_POLICY_KEEP_ALL
                                                           : v1::DUPLICATE_POLICY_LOWEST_ROW);
  }
  wait_for_every_stream();
  stop.store(true);
  for (auto& th : streams) th.join();
  EXPECT_EQ(failures.load(), 0);
  for (int st = 0; st < kStreams; ++st) EXPECT_GT(answered[st].load(), 0) << "stream " << st;
}

}  // namespace
}  // namespace gpujoin::server
