// Mutate through a real gpujoind on $GPUJOIN_TEST_BACKEND (cpu unless set),
// with the generated stub: random sequences of upsert and delete batches
// (duplicate keys within a batch, deletes of absent and reserved keys,
// re-inserts of deleted keys, keep_all appends) on uint32, uint64 and key-schema
// indexes with payload, checked after every batch against a dictionary model
// through lookups (value, payload, match count) and joins (group order);
// growth across several rehashes; the counts, statistics and mutation
// sequences reported; refused batches that change nothing; repeated delete
// keys that no index can hold counted once; and readers that never see half a
// batch while batches flip a set of keys between two states.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "build_messages.hpp"
#include "payload_model.hpp"
#include "raw_stub_test.hpp"
#include "wire/column_codec.hpp"

namespace gpujoin::server {
namespace {

using gpujoin::server::testing::Cell;
using gpujoin::server::testing::I64;
using gpujoin::server::testing::I64Col;
using gpujoin::server::testing::ModelColumn;
using gpujoin::server::testing::RandomCells;
using gpujoin::server::testing::ReadColumn;
using gpujoin::server::testing::Str;
using gpujoin::server::testing::StrCol;
using gpujoin::server::testing::WireChunk;
using ::testing::HasSubstr;

// A key of a composite (string, int64) schema.
using PairKey = std::pair<std::string, int64_t>;

// The keys of one kind as a request carries them.
void PutKeys(const std::vector<uint32_t>& keys, bool del, v1::MutateRequest* r) {
  *(del ? r->mutable_delete_keys() : r->mutable_keys())->mutable_packed() =
      PackColumn<uint32_t>(keys);
}
void PutKeys(const std::vector<uint64_t>& keys, bool del, v1::MutateRequest* r) {
  *(del ? r->mutable_delete_keys64() : r->mutable_keys64())->mutable_packed() =
      PackColumn<uint64_t>(keys);
}
void PutKeys(const std::vector<PairKey>& keys, bool del, v1::MutateRequest* r) {
  std::vector<Str> s;
  std::vector<I64> n;
  for (const auto& [a, b] : keys) {
    s.push_back(a);
    n.push_back(b);
  }
  auto* cols = del ? r->mutable_delete_key_columns() : r->mutable_key_columns();
  *cols->Add() = StrCol(s);
  *cols->Add() = I64Col(n);
}
void PutKeys(const std::vector<uint32_t>& keys, v1::LookupRequest* r) {
  *r->mutable_keys()->mutable_packed() = PackColumn<uint32_t>(keys);
}
void PutKeys(const std::vector<uint64_t>& keys, v1::LookupRequest* r) {
  *r->mutable_keys64()->mutable_packed() = PackColumn<uint64_t>(keys);
}
void PutKeys(const std::vector<PairKey>& keys, v1::LookupRequest* r) {
  std::vector<Str> s;
  std::vector<I64> n;
  for (const auto& [a, b] : keys) {
    s.push_back(a);
    n.push_back(b);
  }
  *r->add_key_columns() = StrCol(s);
  *r->add_key_columns() = I64Col(n);
}
void PutKeys(const std::vector<uint32_t>& keys, v1::LeftBatch* b) {
  *b->mutable_keys()->mutable_packed() = PackColumn<uint32_t>(keys);
}
void PutKeys(const std::vector<uint64_t>& keys, v1::LeftBatch* b) {
  *b->mutable_keys64()->mutable_packed() = PackColumn<uint64_t>(keys);
}
void PutKeys(const std::vector<PairKey>& keys, v1::LeftBatch* b) {
  std::vector<Str> s;
  std::vector<I64> n;
  for (const auto& [a, b2] : keys) {
    s.push_back(a);
    n.push_back(b2);
  }
  *b->add_key_columns() = StrCol(s);
  *b->add_key_columns() = I64Col(n);
}

// A universe of keys that a narrower or sloppier representation would confuse.
std::vector<uint32_t> Universe32(size_t n) {
  std::vector<uint32_t> u;
  for (size_t i = 0; i < n; ++i) u.push_back(static_cast<uint32_t>(i * 2654435761u));
  return u;
}
std::vector<uint64_t> Universe64(size_t n) {
  std::vector<uint64_t> u;
  for (size_t i = 0; i < n; ++i) {
    // Pairs equal in their low 32 bits.
    u.push_back((uint64_t(i / 2) << 32) | (i % 2 == 0 ? 7u : 0xffffffffu));
  }
  return u;
}
std::vector<PairKey> UniversePairs(size_t n) {
  std::vector<PairKey> u;
  for (size_t i = 0; i < n; ++i) {
    // Strings equal but for one byte, and (a, b) beside (b, a)-like swaps.
    u.push_back({absl::StrCat("key-", i / 3, i % 3 == 2 ? "x" : ""), int64_t(i % 3 == 1 ? 1 : 0)});
  }
  return u;
}

// One stored row of the model.
struct Row {
  uint32_t value = 0;
  Cell payload;
};

// A dictionary model of a mutable index.
template <class Key>
struct Model {
  bool keep_all = false;
  std::map<Key, std::vector<Row>> rows;

  v1::MutateResponse Apply(const std::vector<Key>& deletes, const std::vector<Key>& upserts,
                           const std::vector<Row>& upsert_rows) {
    v1::MutateResponse want;
    std::set<Key> seen;
    for (const Key& k : deletes) {
      if (!seen.insert(k).second) continue;
      auto it = rows.find(k);
      if (it == rows.end()) {
        want.set_not_found_keys(want.not_found_keys() + 1);
        continue;
      }
      want.set_deleted_keys(want.deleted_keys() + 1);
      want.set_deleted_rows(want.deleted_rows() + it->second.size());
      rows.erase(it);
    }
    std::set<Key> touched;
    for (size_t i = 0; i < upserts.size(); ++i) {
      const Key& k = upserts[i];
      auto it = rows.find(k);
      if (touched.insert(k).second) {
        if (it == rows.end()) {
          want.set_inserted_keys(want.inserted_keys() + 1);
        } else {
          want.set_updated_keys(want.updated_keys() + 1);
        }
      }
      if (keep_all) {
        rows[k].push_back(upsert_rows[i]);
      } else {
        rows[k] = {upsert_rows[i]};
      }
    }
    want.set_upsert_rows(upserts.size());
    return want;
  }
};

class MutateIntegrationTest : public RawStubTest {
 protected:
  void SetUp() override { StartServer({}, false); }

  // Sends `requests` on one stream; every response, in order.
  std::vector<v1::MutateResponse> Mutate(const std::vector<v1::MutateRequest>& requests) {
    grpc::ClientContext ctx;
    auto stream = stub_->Mutate(&ctx);
    for (const auto& r : requests) EXPECT_TRUE(stream->Write(r));
    stream->WritesDone();
    std::vector<v1::MutateResponse> out;
    v1::MutateResponse resp;
    while (stream->Read(&resp)) out.push_back(resp);
    const grpc::Status s = stream->Finish();
    EXPECT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(out.size(), requests.size());
    return out;
  }
  v1::MutateResponse MutateOne(const v1::MutateRequest& r) {
    auto out = Mutate({r});
    return out.empty() ? v1::MutateResponse() : out[0];
  }

  // Lookups of every key of `universe`, against the model: found, the first
  // row's value and payload, the group's size.
  template <class Key>
  void ExpectLookups(const std::string& index, const std::vector<Key>& universe,
                     const Model<Key>& model, uint64_t sequence, const std::string& what) {
    SCOPED_TRACE(what);
    v1::LookupRequest r;
    r.set_index(index);
    r.set_want_match_counts(true);
    r.add_select("p");
    PutKeys(universe, &r);
    const auto out = Lookups({r});
    ASSERT_EQ(out.size(), 1u);
    const v1::LookupResponse& l = out[0];
    ASSERT_FALSE(l.has_error()) << l.error().message();
    EXPECT_EQ(l.mutation_sequence(), sequence);
    const auto values = UnpackColumn<uint32_t>(l.values());
    const auto counts = UnpackColumn<uint32_t>(l.match_counts());
    ASSERT_EQ(values.size(), universe.size());
    ASSERT_EQ(l.columns_size(), 1);
    const std::vector<Cell> payload = ReadColumn(l.columns(0), universe.size());
    for (size_t i = 0; i < universe.size(); ++i) {
      auto it = model.rows.find(universe[i]);
      const bool present = it != model.rows.end();
      ASSERT_EQ(uint8_t(l.found()[i]), present ? 1 : 0) << "key " << i;
      if (!present) {
        EXPECT_EQ(values[i], 0xffffffffu) << "key " << i;
        EXPECT_EQ(counts[i], 0u);
        EXPECT_FALSE(payload[i].has_value());
        continue;
      }
      EXPECT_EQ(values[i], it->second.front().value) << "key " << i;
      EXPECT_EQ(counts[i], it->second.size()) << "key " << i;
      EXPECT_EQ(payload[i], it->second.front().payload) << "key " << i;
    }
  }

  // An inner join of every key of `universe`: each key's rows in group order,
  // with their payload.
  template <class Key>
  void ExpectGroups(const std::string& index, const std::vector<Key>& universe,
                    const Model<Key>& model, uint64_t sequence, const std::string& what) {
    SCOPED_TRACE(what);
    v1::JoinRequest j;
    j.set_index(index);
    j.add_select("p");
    v1::LeftBatch* left = j.add_batches();
    PutKeys(universe, left);
    left->set_capacity(1u << 20);
    const auto out = Joins({j});
    ASSERT_EQ(out.size(), 1u);
    ASSERT_FALSE(out[0].has_error()) << out[0].error().message();
    EXPECT_EQ(out[0].mutation_sequence(), sequence);
    const v1::JoinBatchResult& b = out[0].results(0);
    std::vector<uint32_t> want_left, want_right;
    std::vector<Cell> want_payload;
    for (size_t i = 0; i < universe.size(); ++i) {
      auto it = model.rows.find(universe[i]);
      if (it == model.rows.end()) continue;
      for (const Row& row : it->second) {
        want_left.push_back(uint32_t(i));
        want_right.push_back(row.value);
        want_payload.push_back(row.payload);
      }
    }
    ASSERT_EQ(b.count(), want_left.size());
    EXPECT_EQ(UnpackColumn<uint32_t>(b.left_rows()), want_left);
    EXPECT_EQ(UnpackColumn<uint32_t>(b.right_rows()), want_right);
    EXPECT_EQ(ReadColumn(b.columns(0), want_left.size()), want_payload);
  }

  // Random batches against the model (see the file comment). Row-ID indexes
  // give upserted rows the next row IDs; explicit ones take random values.
  template <class Key>
  void RunRandomSequence(const std::string& index, const std::vector<Key>& universe,
                         Model<Key>& model, v1::ColumnType payload_type, bool row_ids,
                         uint32_t next_row_id, int batches, std::mt19937_64& rng) {
    uint64_t sequence = Describe(index).mutation_sequence();
    uint32_t next_value = next_row_id;
    uint32_t capacity = Describe(index).capacity();
    int grew = 0;
    for (int b = 0; b < batches; ++b) {
      std::vector<Key> deletes, upserts;
      const size_t n_del = rng() % 12;
      const size_t n_up = rng() % 40;
      for (size_t i = 0; i < n_del; ++i) deletes.push_back(universe[rng() % universe.size()]);
      // Upserts from a narrow window so that keys repeat within a batch.
      const size_t window = 1 + rng() % universe.size();
      const size_t base = rng() % universe.size();
      for (size_t i = 0; i < n_up; ++i) {
        upserts.push_back(universe[(base + rng() % window) % universe.size()]);
      }
      if (deletes.empty() && upserts.empty()) upserts.push_back(universe[0]);
      const std::vector<Cell> cells = RandomCells(payload_type, upserts.size(), rng);
      std::vector<Row> rows;
      v1::MutateRequest r;
      r.set_index(index);
      r.set_batch_id(b);
      if (!deletes.empty()) PutKeys(deletes, true, &r);
      if (!upserts.empty()) {
        PutKeys(upserts, false, &r);
        std::vector<uint32_t> values;
        for (size_t i = 0; i < upserts.size(); ++i) {
          const uint32_t v = row_ids ? next_value++ : static_cast<uint32_t>(rng() % 0xfffffff0u);
          values.push_back(v);
          rows.push_back({v, cells[i]});
        }
        if (!row_ids) *r.mutable_values()->mutable_packed() = PackColumn<uint32_t>(values);
        *r.add_payload() = WireChunk(ModelColumn{"p", payload_type, cells}, 0, cells.size());
      }
      const v1::MutateResponse want = model.Apply(deletes, upserts, rows);
      const v1::MutateResponse got = MutateOne(r);
      const std::string what = absl::StrCat("batch ", b);
      ASSERT_FALSE(got.has_error()) << what << ": " << got.error().message();
      EXPECT_EQ(got.batch_id(), uint64_t(b));
      EXPECT_EQ(got.mutation_sequence(), ++sequence) << what;
      EXPECT_EQ(got.upsert_rows(), want.upsert_rows()) << what;
      EXPECT_EQ(got.inserted_keys(), want.inserted_keys()) << what;
      EXPECT_EQ(got.updated_keys(), want.updated_keys()) << what;
      EXPECT_EQ(got.deleted_keys(), want.deleted_keys()) << what;
      EXPECT_EQ(got.not_found_keys(), want.not_found_keys()) << what;
      EXPECT_EQ(got.deleted_rows(), want.deleted_rows()) << what;
      uint64_t kept = 0;
      for (const auto& [k, v] : model.rows) kept += v.size();
      EXPECT_EQ(got.statistics().unique_keys(), model.rows.size()) << what;
      EXPECT_EQ(got.statistics().duplicate_rows(), kept - model.rows.size()) << what;
      EXPECT_EQ(got.statistics().overflow_rows(), 0u) << what;
      EXPECT_LE(double(model.rows.size()), 0.8 * got.capacity() + 1e-9) << what;
      if (got.rehashed()) {
        EXPECT_GT(got.capacity(), capacity);
        ++grew;
      }
      capacity = got.capacity();
      ExpectLookups(index, universe, model, sequence, what);
      if (model.keep_all) ExpectGroups(index, universe, model, sequence, what);
      if (::testing::Test::HasFailure()) return;
    }
    const v1::IndexInfo info = Describe(index);
    EXPECT_EQ(info.mutation_sequence(), sequence);
    EXPECT_EQ(info.capacity(), capacity);
    EXPECT_GE(grew, 2) << "the sequence was meant to grow the table several times";
    EXPECT_EQ(info.rehashes(), uint64_t(grew));
    if (row_ids) EXPECT_EQ(info.next_row_id(), next_value);
  }
};

v1::BuildIndexRequest MutableSpec(const std::string& name, v1::KeyType key_type,
                                  v1::ColumnType payload_type, bool keep_all, bool explicit_values,
                                  uint64_t capacity) {
  v1::BuildIndexRequest r;
  v1::IndexSpec* s = r.mutable_spec();
  s->set_name(name);
  s->set_capacity(capacity);
  s->set_key_type(key_type);
  s->set_explicit_values(explicit_values);
  s->set_duplicates(keep_all ? v1::DUPLICATE_POLICY_KEEP_ALL : v1::DUPLICATE_POLICY_LOWEST_ROW);
  auto* p = s->add_payload();
  p->set_name("p");
  p->set_type(payload_type);
  if (key_type == v1::KEY_TYPE_COLUMNS) {
    auto* a = s->add_key_columns();
    a->set_name("s");
    a->set_type(v1::COLUMN_TYPE_STRING);
    auto* b = s->add_key_columns();
    b->set_name("n");
    b->set_type(v1::COLUMN_TYPE_INT64);
  }
  return r;
}

// An empty index (a build of zero rows) ready for mutations.
template <class Key>
v1::BuildIndexRequest EmptyChunk() {
  v1::BuildIndexRequest c;
  auto* chunk = c.mutable_chunk();
  if constexpr (std::is_same_v<Key, uint32_t>) {
    chunk->mutable_keys()->set_packed("");
  } else if constexpr (std::is_same_v<Key, uint64_t>) {
    chunk->mutable_keys64()->set_packed("");
  } else {
    *chunk->add_key_columns() = StrCol({});
    *chunk->add_key_columns() = I64Col({});
  }
  return c;
}

TEST_F(MutateIntegrationTest, RowIdIndexWithInt64PayloadFollowsTheModelThroughSeveralRehashes) {
  std::mt19937_64 rng(1);
  // A build of 20 rows (keys repeating), then mutations from row ID 20 on.
  const auto universe = Universe32(300);
  Model<uint32_t> model;
  std::vector<uint32_t> keys;
  for (uint32_t i = 0; i < 20; ++i) keys.push_back(universe[i % 12]);
  const std::vector<Cell> cells = RandomCells(v1::COLUMN_TYPE_INT64, keys.size(), rng);
  for (size_t i = 0; i < keys.size(); ++i) {
    if (model.rows.count(keys[i]) == 0) model.rows[keys[i]] = {{uint32_t(i), cells[i]}};
  }
  auto spec = MutableSpec("ids", v1::KEY_TYPE_UINT32, v1::COLUMN_TYPE_INT64, false, false, 16);
  v1::BuildIndexRequest chunk = testing::ChunkMsg(keys);
  *chunk.mutable_chunk()->add_payload() =
      WireChunk(ModelColumn{"p", v1::COLUMN_TYPE_INT64, cells}, 0, cells.size());
  ASSERT_TRUE(Build({spec, chunk}).ok());
  EXPECT_EQ(Describe("ids").next_row_id(), 20u);
  EXPECT_EQ(Describe("ids").max_load_factor(), 0.8);
  ExpectLookups("ids", universe, model, 0, "after the build");
  RunRandomSequence("ids", universe, model, v1::COLUMN_TYPE_INT64, /*row_ids=*/true, 20, 40, rng);
}

TEST_F(MutateIntegrationTest, KeepAllUint64IndexAppendsInOrderAndDeletesWholeGroups) {
  std::mt19937_64 rng(2);
  const auto universe = Universe64(120);
  Model<uint64_t> model;
  model.keep_all = true;
  auto spec = MutableSpec("groups", v1::KEY_TYPE_UINT64, v1::COLUMN_TYPE_STRING, true, true, 8);
  ASSERT_TRUE(Build({spec, EmptyChunk<uint64_t>()}).ok());
  RunRandomSequence("groups", universe, model, v1::COLUMN_TYPE_STRING, /*row_ids=*/false, 0, 30,
                    rng);
}

TEST_F(MutateIntegrationTest, KeySchemaIndexTellsKeysApartThatDifferInOneByteOrOneColumn) {
  std::mt19937_64 rng(3);
  const auto universe = UniversePairs(150);
  Model<PairKey> model;
  auto spec = MutableSpec("pairs", v1::KEY_TYPE_COLUMNS, v1::COLUMN_TYPE_STRING, false, true, 8);
  ASSERT_TRUE(Build({spec, EmptyChunk<PairKey>()}).ok());
  RunRandomSequence("pairs", universe, model, v1::COLUMN_TYPE_STRING, /*row_ids=*/false, 0, 30,
                    rng);
}

TEST_F(MutateIntegrationTest, KeepAllKeySchemaIndexFollowsTheModel) {
  std::mt19937_64 rng(4);
  const auto universe = UniversePairs(90);
  Model<PairKey> model;
  model.keep_all = true;
  auto spec = MutableSpec("pg", v1::KEY_TYPE_COLUMNS, v1::COLUMN_TYPE_INT64, true, true, 8);
  ASSERT_TRUE(Build({spec, EmptyChunk<PairKey>()}).ok());
  RunRandomSequence("pg", universe, model, v1::COLUMN_TYPE_INT64, /*row_ids=*/false, 0, 25, rng);
}

// Reproduces a fuzz_mutate finding: delete keys that no index can hold (here
// rows with a null key column) repeated in one batch were each counted as not
// found; not_found_keys counts distinct keys, and key columns compare null for
// null (so (null, 1) twice is one key, beside (null, 2)).
TEST_F(MutateIntegrationTest, RepeatedNullDeleteKeysCountOncePerDistinctKey) {
  auto spec = MutableSpec("nulls", v1::KEY_TYPE_COLUMNS, v1::COLUMN_TYPE_INT64, false, true, 8);
  ASSERT_TRUE(Build({spec, EmptyChunk<PairKey>()}).ok());
  v1::MutateRequest del;
  del.set_index("nulls");
  *del.add_delete_key_columns() = StrCol({std::nullopt, std::nullopt, std::nullopt, "a", "a"});
  *del.add_delete_key_columns() = I64Col({1, 1, 2, 1, 1});
  const v1::MutateResponse got = MutateOne(del);
  ASSERT_FALSE(got.has_error()) << got.error().message();
  EXPECT_EQ(got.deleted_keys(), 0u);
  EXPECT_EQ(got.not_found_keys(), 3u);  // (null, 1), (null, 2) and ("a", 1)
}

// Growth needs room for the larger table beside the live one: when the budget
// refuses it, the batch is RESOURCE_EXHAUSTED naming the budget and changes
// nothing; batches that fit the table still apply in place.
TEST_F(MutateIntegrationTest, GrowthTheBudgetRefusesChangesNothing) {
  if (gpujoin::testing::TestBackend() != "cpu") GTEST_SKIP() << "sizes of the CPU backend";
  server_.reset();
  // 16384 uint32 slots take 128 KiB; growing to 32768 needs 256 KiB more.
  StartServer({"--device-memory-limit=300K"}, false);
  std::vector<uint32_t> keys;
  for (uint32_t k = 0; k < 13000; ++k) keys.push_back(k);
  ASSERT_TRUE(Build({testing::SpecMsg("b", 16384), testing::ChunkMsg(keys)}).ok());
  std::vector<uint32_t> more;
  for (uint32_t k = 20000; k < 20200; ++k) more.push_back(k);
  v1::MutateRequest grow;
  grow.set_index("b");
  PutKeys(more, false, &grow);
  const v1::MutateResponse refused = MutateOne(grow);
  ASSERT_TRUE(refused.has_error());
  EXPECT_EQ(refused.error().code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(refused.error().message(), HasSubstr("--device-memory-limit"));
  EXPECT_THAT(refused.error().message(), HasSubstr("32768 slots"));
  const v1::IndexInfo info = Describe("b");
  EXPECT_EQ(info.mutation_sequence(), 0u);
  EXPECT_EQ(info.capacity(), 16384u);
  EXPECT_EQ(info.statistics().unique_keys(), 13000u);
  v1::LookupRequest l;
  l.set_index("b");
  PutKeys(std::vector<uint32_t>{20000, 5}, &l);
  const auto out = Lookups({l});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(UnpackColumn<uint32_t>(out[0].values()), (std::vector<uint32_t>{0xffffffffu, 5}));
  // Updates fit the table: in place, no second table.
  v1::MutateRequest update;
  update.set_index("b");
  PutKeys(std::vector<uint32_t>{1, 2, 3}, false, &update);
  const v1::MutateResponse applied = MutateOne(update);
  ASSERT_FALSE(applied.has_error()) << applied.error().message();
  EXPECT_EQ(applied.updated_keys(), 3u);
  EXPECT_EQ(applied.mutation_sequence(), 1u);
}

// Builds index "t" (uint32, explicit values, an int64 payload "p") holding
// keys 1..4 with values 10..40 and payload 100..400.
class MutateErrorsTest : public MutateIntegrationTest {
 protected:
  void SetUp() override {
    StartServer({"--max-mutation-rows=100"}, false);
    auto spec = MutableSpec("t", v1::KEY_TYPE_UINT32, v1::COLUMN_TYPE_INT64, false, true, 16);
    v1::BuildIndexRequest chunk = testing::ChunkMsg({1, 2, 3, 4});
    *chunk.mutable_chunk()->mutable_values()->mutable_packed() =
        PackColumn<uint32_t>(std::vector<uint32_t>{10, 20, 30, 40});
    *chunk.mutable_chunk()->add_payload() = I64Col({100, 200, 300, 400});
    chunk.mutable_chunk()->mutable_payload(0)->set_name("p");
    ASSERT_TRUE(Build({spec, chunk}).ok());
  }
  v1::MutateRequest Upsert(const std::vector<uint32_t>& keys, const std::vector<uint32_t>& values,
                           const std::vector<I64>& payload) {
    v1::MutateRequest r;
    r.set_index("t");
    PutKeys(keys, false, &r);
    *r.mutable_values()->mutable_packed() = PackColumn<uint32_t>(values);
    *r.add_payload() = I64Col(payload);
    r.mutable_payload(0)->set_name("p");
    return r;
  }
  void ExpectUnchanged() {
    Model<uint32_t> model;
    for (uint32_t k = 1; k <= 4; ++k) {
      model.rows[k] = {{k * 10, testing::Bytes<int64_t>(int64_t{k} * 100)}};
    }
    ExpectLookups<uint32_t>("t", {1, 2, 3, 4, 5}, model, 0, "unchanged");
    EXPECT_EQ(Describe("t").mutation_sequence(), 0u);
  }
};

TEST_F(MutateErrorsTest, BadBatchesAreAnsweredInBandNamingTheFieldAndChangeNothing) {
  struct Case {
    std::string what;
    v1::MutateRequest request;
    int code;
    std::string message;
  };
  std::vector<Case> cases;
  {
    auto r = Upsert({5}, {50}, {500});
    r.set_index("nope");
    cases.push_back({"unknown index", r, 5, "index \"nope\" not found"});
  }
  cases.push_back({"reserved key", Upsert({7, 0xffffffffu}, {1, 2}, {1, 2}), 3, "row 1"});
  cases.push_back({"values short", Upsert({7, 8}, {1}, {1, 2}), 3, "values: 1 values"});
  {
    auto r = Upsert({7}, {1}, {1});
    r.clear_values();
    cases.push_back({"values missing", r, 3, "values"});
  }
  {
    auto r = Upsert({7}, {1}, {1});
    r.clear_payload();
    cases.push_back({"payload missing", r, 3, "\"p\""});
  }
  {
    auto r = Upsert({7}, {1}, {1});
    r.mutable_payload(0)->set_name("q");
    cases.push_back({"payload unknown", r, 3, "payload[0].name: column \"q\" is not declared"});
  }
  {
    auto r = Upsert({7}, {1}, {1});
    *r.mutable_payload(0) = StrCol({"x"});
    r.mutable_payload(0)->set_name("p");
    cases.push_back({"payload type", r, 3, "payload[0]"});
  }
  {
    v1::MutateRequest r;
    r.set_index("t");
    PutKeys(std::vector<uint64_t>{1}, true, &r);
    cases.push_back({"wrong key width", r, 3, "delete_keys64"});
  }
  {
    v1::MutateRequest r;
    r.set_index("t");
    cases.push_back({"empty", r, 3, "no upsert keys"});
  }
  {
    std::vector<uint32_t> keys(101, 9);
    v1::MutateRequest r;
    r.set_index("t");
    PutKeys(keys, true, &r);
    cases.push_back({"too many rows", r, 8, "--max-mutation-rows=100"});
  }
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const v1::MutateResponse got = MutateOne(c.request);
    ASSERT_TRUE(got.has_error());
    EXPECT_EQ(got.error().code(), c.code) << got.error().message();
    EXPECT_THAT(got.error().message(), HasSubstr(c.message));
    ExpectUnchanged();
  }
}

// Reproduces a fuzz_mutate finding: the reserved key repeated in a batch's
// deletes was counted as not found once per occurrence.
TEST_F(MutateErrorsTest, RepeatedReservedDeleteKeysCountOnceAsNotFound) {
  v1::MutateRequest del;
  del.set_index("t");
  PutKeys(std::vector<uint32_t>{0xffffffffu, 9, 0xffffffffu, 9, 1, 1}, true, &del);
  const v1::MutateResponse got = MutateOne(del);
  ASSERT_FALSE(got.has_error()) << got.error().message();
  EXPECT_EQ(got.deleted_keys(), 1u);
  EXPECT_EQ(got.deleted_rows(), 1u);
  EXPECT_EQ(got.not_found_keys(), 2u);  // 9 and the reserved key, once each
}

TEST_F(MutateErrorsTest, AStreamAppliesItsBatchesInOrderAndLookupsReportTheSequence) {
  std::vector<v1::MutateRequest> batch;
  for (uint32_t i = 0; i < 20; ++i) {
    auto r = Upsert({1}, {1000 + i}, {int64_t(i)});
    r.set_batch_id(i);
    batch.push_back(r);
  }
  v1::MutateRequest del;
  del.set_index("t");
  PutKeys(std::vector<uint32_t>{2, 2, 9, 0xffffffffu}, true, &del);
  del.set_batch_id(20);
  batch.push_back(del);
  const auto out = Mutate(batch);
  ASSERT_EQ(out.size(), 21u);
  for (uint32_t i = 0; i < 21; ++i) {
    ASSERT_FALSE(out[i].has_error()) << out[i].error().message();
    EXPECT_EQ(out[i].batch_id(), i);
    EXPECT_EQ(out[i].mutation_sequence(), i + 1);
  }
  EXPECT_EQ(out[20].deleted_keys(), 1u);
  EXPECT_EQ(out[20].not_found_keys(), 2u);  // 9 and the reserved key
  Model<uint32_t> model;
  model.rows[1] = {{1019, testing::Bytes<int64_t>(19)}};
  model.rows[3] = {{30, testing::Bytes<int64_t>(300)}};
  model.rows[4] = {{40, testing::Bytes<int64_t>(400)}};
  ExpectLookups<uint32_t>("t", {1, 2, 3, 4}, model, 21, "after the stream");
  // The bytes path (packed keys, no select) reports the sequence too.
  v1::LookupRequest plain;
  plain.set_index("t");
  PutKeys(std::vector<uint32_t>{1, 2}, &plain);
  const auto l = Lookups({plain});
  ASSERT_EQ(l.size(), 1u);
  EXPECT_EQ(l[0].mutation_sequence(), 21u);
  EXPECT_EQ(UnpackColumn<uint32_t>(l[0].values()), (std::vector<uint32_t>{1019, 0xffffffffu}));
  // A rebuild starts the sequence again.
  auto spec = MutableSpec("t", v1::KEY_TYPE_UINT32, v1::COLUMN_TYPE_INT64, false, true, 16);
  spec.mutable_spec()->set_replace(true);
  v1::BuildIndexRequest chunk = testing::ChunkMsg({5});
  *chunk.mutable_chunk()->mutable_values()->mutable_packed() =
      PackColumn<uint32_t>(std::vector<uint32_t>{5});
  *chunk.mutable_chunk()->add_payload() = I64Col({5});
  chunk.mutable_chunk()->mutable_payload(0)->set_name("p");
  ASSERT_TRUE(Build({spec, chunk}).ok());
  EXPECT_EQ(Describe("t").mutation_sequence(), 0u);
}

// 8 streams look up a set of keys while batches flip all of them between two
// values: every response shows one state or the other, never a mix.
TEST_F(MutateErrorsTest, ReadersNeverSeeHalfABatch) {
  std::vector<uint32_t> keys;
  for (uint32_t k = 100; k < 190; ++k) keys.push_back(k);  // within --max-mutation-rows
  auto state = [&](uint32_t v) {
    return Upsert(keys, std::vector<uint32_t>(keys.size(), v),
                  std::vector<I64>(keys.size(), int64_t(v)));
  };
  ASSERT_FALSE(MutateOne(state(1)).has_error());
  std::atomic<bool> stop{false};
  std::atomic<int> mixed{0}, checked{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 8; ++t) {
    readers.emplace_back([&] {
      auto stub = NewStub(*server_);
      while (!stop.load()) {
        grpc::ClientContext ctx;
        auto stream = stub->Lookup(&ctx);
        v1::LookupRequest r;
        r.set_index("t");
        PutKeys(keys, &r);
        stream->Write(r);
        stream->WritesDone();
        v1::LookupResponse resp;
        if (stream->Read(&resp)) {
          const auto v = UnpackColumn<uint32_t>(resp.values());
          const bool one = !v.empty() && std::all_of(v.begin(), v.end(),
                                                      [&](uint32_t x) { return x == v[0]; });
          if (!one) ++mixed;
          ++checked;
        }
        (void)stream->Finish();
      }
    });
  }
  for (uint32_t i = 0; i < 30; ++i) {
    ASSERT_FALSE(MutateOne(state(2 + i % 2)).has_error());
  }
  stop = true;
  for (auto& t : readers) t.join();
  EXPECT_EQ(mixed.load(), 0);
  EXPECT_GT(checked.load(), 0);
}

}  // namespace
}  // namespace gpujoin::server
