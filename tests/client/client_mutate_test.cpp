// The client library's mutations against a real gpujoind (CPU backend):
// Upsert, Delete and MutateAll on row-ID and explicit-value indexes, uint32,
// uint64 and key-schema keys, payload columns and keep_all groups, compared
// with lookups afterwards; inputs split into many requests (per-request
// answers, summed counts, the final mutation sequence); the Mutate stream's
// in-band errors (the stream goes on, the refused batch changes nothing);
// checks before anything is sent; the mutation sequence of lookups, joins and
// IndexInfo; the table growing past max_load_factor; the placement; and, with --data-dir,
// durable batches that a restart serves.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "gpujoin/client/client.hpp"
#include "server_client_fixture.hpp"

namespace {

namespace gc = gpujoin::client;
using gc::Column;
using gc::ColumnType;
using gc::ColumnView;

Column Strings(std::string name, const std::vector<std::string>& values) {
  Column c(std::move(name), ColumnType::kString);
  for (const std::string& v : values) EXPECT_TRUE(c.AppendString(v).ok());
  return c;
}

class ClientMutateTest : public gpujoin::testing::ServerClientTest {
 protected:
  // Builds `name` (replace) from uint32 `keys` with row-ID values and the
  // payload columns qty (int64) and note (string).
  void BuildDim(const std::string& name, const std::vector<uint32_t>& keys,
                gc::DuplicatePolicy duplicates = gc::DuplicatePolicy::kLowestRow) {
    gc::IndexSpec spec;
    spec.name = name;
    spec.replace = true;
    spec.capacity = 256;
    spec.duplicates = duplicates;
    spec.payload = {{"qty", ColumnType::kInt64}, {"note", ColumnType::kString}};
    std::vector<int64_t> qty(keys.size());
    std::vector<std::string> notes(keys.size());
    for (size_t i = 0; i < keys.size(); ++i) {
      qty[i] = static_cast<int64_t>(keys[i]) * 10;
      notes[i] = "built " + std::to_string(keys[i]);
    }
    const Column q = Column::Of<int64_t>("qty", qty);
    const Column n = Strings("note", notes);
    const std::vector<ColumnView> payload = {q.view(), n.view()};
    auto info = client_->BuildIndexFromColumns(spec, keys, {}, payload);
    ASSERT_TRUE(info.ok()) << info.status();
    EXPECT_EQ(info->mutation_sequence, 0u);
  }

  gc::LookupResult Look(const std::string& name, gc::Keys keys,
                        std::vector<std::string> select = {}) {
    gc::QueryAllOptions o;
    o.select = std::move(select);
    o.want_match_counts = true;
    auto r = client_->LookupAll(name, keys, o);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *std::move(r) : gc::LookupResult{};
  }
};

// Row-ID index: upserts assign the next row IDs (the last occurrence of a key
// in the batch wins), deletes count absent keys, the payload follows.
TEST_F(ClientMutateTest, RowIdIndexUpsertAssignsNextRowIdsAndDeleteRemoves) {
  BuildDim("rowid", {10, 20, 30});
  const std::vector<uint32_t> keys = {20, 40, 40};
  const Column qty = Column::Of<int64_t>("qty", std::vector<int64_t>{200, 400, 401});
  const Column note = Strings("note", {"twenty", "forty", "forty again"});
  const std::vector<ColumnView> payload = {note.view(), qty.view()};  // any order
  auto up = client_->Upsert("rowid", keys, {}, payload);
  ASSERT_TRUE(up.ok()) << up.status();
  EXPECT_EQ(up->requests.size(), 1u);
  EXPECT_EQ(up->upsert_rows, 3u);
  EXPECT_EQ(up->inserted_keys, 1u);
  EXPECT_EQ(up->updated_keys, 1u);
  EXPECT_EQ(up->mutation_sequence, 1u);
  EXPECT_EQ(up->index_version, 1u);
  EXPECT_EQ(up->statistics.unique_keys, 4u);

  gc::LookupResult r = Look("rowid", std::vector<uint32_t>{10, 20, 30, 40, 50}, {"qty", "note"});
  EXPECT_EQ(r.values, (std::vector<uint32_t>{0, 3, 2, 5, gc::kNoMatch}));
  EXPECT_EQ(r.mutation_sequence, 1u);
  ASSERT_EQ(r.columns.size(), 2u);
  EXPECT_EQ(r.columns[0].Value<int64_t>(1), 200);
  EXPECT_EQ(r.columns[0].Value<int64_t>(3), 401);
  EXPECT_EQ(r.columns[1].String(0), "built 10");
  EXPECT_EQ(r.columns[1].String(3), "forty again");
  EXPECT_FALSE(r.columns[1].Valid(4));

  auto del = client_->Delete("rowid", std::vector<uint32_t>{10, 99});
  ASSERT_TRUE(del.ok()) << del.status();
  EXPECT_EQ(del->deleted_keys, 1u);
  EXPECT_EQ(del->not_found_keys, 1u);
  EXPECT_EQ(del->deleted_rows, 1u);
  EXPECT_EQ(del->mutation_sequence, 2u);
  r = Look("rowid", std::vector<uint32_t>{10, 20});
  EXPECT_EQ(r.found, (std::vector<uint8_t>{0, 1}));
  EXPECT_EQ(r.mutation_sequence, 2u);

  auto info = client_->DescribeIndex("rowid");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->mutation_sequence, 2u);
  EXPECT_EQ(info->next_row_id, 6u);
  EXPECT_EQ(info->version, 1u);

  // JoinAll reports the sequence its batches saw.
  auto j = client_->JoinAll("rowid", std::vector<uint32_t>{20, 40});
  ASSERT_TRUE(j.ok()) << j.status();
  EXPECT_EQ(j->right_rows, (std::vector<uint32_t>{3, 5}));
  EXPECT_EQ(j->mutation_sequence, 2u);
}

// Explicit values on a uint64 index (int64 keys as their bit patterns), and
// one MutateAll carrying deletes and upserts of the same key: deletes first.
TEST_F(ClientMutateTest, ExplicitValuesUint64DeletesApplyBeforeUpserts) {
  gc::IndexSpec spec;
  spec.name = "accounts";
  spec.replace = true;
  spec.key_type = gc::KeyType::kUint64;
  spec.explicit_values = true;
  const std::vector<int64_t> keys = {-5, 5000000000, 7};
  const std::vector<uint32_t> values = {100, 200, 300};
  ASSERT_TRUE(client_->BuildIndexFromColumns(spec, keys, values).ok());

  const std::vector<int64_t> ups = {-5, 8};
  const std::vector<uint32_t> up_values = {111, 888};
  const std::vector<int64_t> dels = {-5, 7};
  gc::MutateBatch changes;
  changes.upsert_keys = ups;
  changes.values = up_values;
  changes.delete_keys = dels;
  auto s = client_->MutateAll("accounts", changes);
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->requests.size(), 1u);  // one atomic request
  EXPECT_EQ(s->deleted_keys, 2u);
  // -5 was deleted first, so the upsert inserts it again.
  EXPECT_EQ(s->inserted_keys, 2u);
  EXPECT_EQ(s->updated_keys, 0u);
  gc::LookupResult r = Look("accounts", std::vector<int64_t>{-5, 5000000000, 7, 8});
  EXPECT_EQ(r.values, (std::vector<uint32_t>{111, 200, gc::kNoMatch, 888}));
}

// A composite key schema (tenant string, order int64): upserts and deletes of
// key columns, a null key column in a delete never matches.
TEST_F(ClientMutateTest, KeySchemaUpsertAndDelete) {
  gc::IndexSpec spec;
  spec.name = "orders";
  spec.replace = true;
  spec.key_type = gc::KeyType::kColumns;
  spec.key_columns = {{"tenant", ColumnType::kString}, {"order", ColumnType::kInt64}};
  const Column tenant = Strings("tenant", {"acme", "acme", "zeta"});
  const Column order = Column::Of<int64_t>("order", std::vector<int64_t>{1, 2, 1});
  const std::vector<ColumnView> keys = {tenant.view(), order.view()};
  ASSERT_TRUE(client_->BuildIndexFromColumns(spec, keys).ok());

  const Column up_tenant = Strings("", {"zeta", "beta"});
  const Column up_order = Column::Of<int64_t>("", std::vector<int64_t>{1, 9});
  const std::vector<ColumnView> up = {up_tenant.view(), up_order.view()};
  auto s = client_->Upsert("orders", up);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->inserted_keys, 1u);
  EXPECT_EQ(s->updated_keys, 1u);

  Column del_tenant = Strings("tenant", {"acme"});
  del_tenant.AppendNull();
  const Column del_order = Column::Of<int64_t>("order", std::vector<int64_t>{2, 1});
  const std::vector<ColumnView> del = {del_tenant.view(), del_order.view()};
  auto d = client_->Delete("orders", del);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->deleted_keys, 1u);
  EXPECT_EQ(d->not_found_keys, 1u);

  const Column q_tenant = Strings("", {"acme", "acme", "zeta", "beta"});
  const Column q_order = Column::Of<int64_t>("", std::vector<int64_t>{1, 2, 1, 9});
  const std::vector<ColumnView> q = {q_tenant.view(), q_order.view()};
  gc::LookupResult r = Look("orders", q);
  EXPECT_EQ(r.found, (std::vector<uint8_t>{1, 0, 1, 1}));
  EXPECT_EQ(r.values, (std::vector<uint32_t>{0, gc::kNoMatch, 3, 4}));
  EXPECT_EQ(r.mutation_sequence, 2u);
}

// keep_all: upserts append to their keys' groups; a delete removes the group.
TEST_F(ClientMutateTest, KeepAllAppendsAndDeletesWholeGroups) {
  BuildDim("groups", {1, 1, 2}, gc::DuplicatePolicy::kKeepAll);
  const std::vector<uint32_t> keys = {1, 3, 3};
  const Column qty = Column::Of<int64_t>("qty", std::vector<int64_t>{11, 31, 32});
  const Column note = Strings("note", {"a", "b", "c"});
  const std::vector<ColumnView> payload = {qty.view(), note.view()};
  auto s = client_->Upsert("groups", keys, {}, payload);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->upsert_rows, 3u);
  gc::LookupResult r = Look("groups", std::vector<uint32_t>{1, 2, 3});
  EXPECT_EQ(r.match_counts, (std::vector<uint32_t>{3, 1, 2}));
  auto j = client_->JoinAll("groups", std::vector<uint32_t>{1});
  ASSERT_TRUE(j.ok()) << j.status();
  EXPECT_EQ(j->right_rows, (std::vector<uint32_t>{0, 1, 3}));  // build rows, then the appended row

  auto d = client_->Delete("groups", std::vector<uint32_t>{1});
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->deleted_keys, 1u);
  EXPECT_EQ(d->deleted_rows, 3u);
  r = Look("groups", std::vector<uint32_t>{1, 3});
  EXPECT_EQ(r.match_counts, (std::vector<uint32_t>{0, 2}));
}

// A call split into many requests: one answer per request with its input
// rows, counts summed, the sequence of the last; the effect equals one batch.
TEST_F(ClientMutateTest, SplitIntoRequestsSumsCountsAndReportsTheLastSequence) {
  std::vector<uint32_t> build(100);
  std::iota(build.begin(), build.end(), 0);
  BuildDim("split", build);
  std::vector<uint32_t> dels, ups;
  for (uint32_t k = 0; k < 100; k += 3) dels.push_back(k);  // 34 present
  dels.push_back(1000);                                     // absent
  for (uint32_t k = 50; k < 150; ++k) ups.push_back(k);     // 50..99 present unless deleted
  std::vector<int64_t> qty(ups.size(), 1);
  std::vector<std::string> notes(ups.size(), "up");
  const Column q = Column::Of<int64_t>("qty", qty);
  const Column n = Strings("note", notes);
  gc::MutateBatch changes;
  changes.delete_keys = dels;
  changes.upsert_keys = ups;
  changes.payload = {q.view(), n.view()};
  gc::MutateOptions o;
  o.batch_rows = 7;
  std::vector<uint64_t> progress;
  o.progress = [&](const gc::Progress& p) { progress.push_back(p.rows_sent); };
  auto s = client_->MutateAll("split", changes, o);
  ASSERT_TRUE(s.ok()) << s.status();
  const size_t requests = (dels.size() + ups.size() + 6) / 7;
  ASSERT_EQ(s->requests.size(), requests);
  EXPECT_EQ(s->applied_requests, requests);
  EXPECT_EQ(s->mutation_sequence, requests);
  EXPECT_EQ(s->requests.back().result.mutation_sequence, requests);
  EXPECT_EQ(s->requests[0].delete_begin, 0u);
  EXPECT_EQ(s->requests.back().upsert_end, ups.size());
  EXPECT_EQ(s->deleted_keys, 34u);
  EXPECT_EQ(s->not_found_keys, 1u);
  uint64_t deleted_in_upserts = 0;
  for (uint32_t k = 51; k < 100; k += 3) ++deleted_in_upserts;  // 51, 54, ..., 99
  EXPECT_EQ(s->updated_keys, 50u - deleted_in_upserts);
  EXPECT_EQ(s->inserted_keys, 50u + deleted_in_upserts);
  EXPECT_EQ(s->upsert_rows, 100u);
  ASSERT_EQ(progress.size(), requests);
  EXPECT_EQ(progress.back(), dels.size() + ups.size());

  std::vector<uint32_t> all(160);
  std::iota(all.begin(), all.end(), 0);
  gc::LookupResult r = Look("split", all);
  for (uint32_t k = 0; k < 160; ++k) {
    const bool want = k < 150 && (k >= 50 || k % 3 != 0);
    EXPECT_EQ(r.found[k], want ? 1 : 0) << k;
  }
}

// The stream: a batch the server refuses is answered in-band and changes
// nothing; the batches around it are applied.
TEST_F(ClientMutateTest, StreamReportsBadBatchInBandAndGoesOn) {
  BuildDim("stream", {1, 2, 3});
  const std::vector<uint32_t> del_one = {1};
  const std::vector<uint64_t> wide = {2};  // uint64 keys for a uint32 index
  const std::vector<uint32_t> del_three = {3};
  std::vector<gc::MutateBatch> batches(3);
  batches[0].delete_keys = del_one;
  batches[1].delete_keys = wide;
  batches[2].delete_keys = del_three;
  size_t next = 0;
  std::vector<gc::MutateResult> results;
  absl::Status st = client_->Mutate(
      "stream",
      [&]() -> std::optional<gc::MutateBatch> {
        if (next >= batches.size()) return std::nullopt;
        return batches[next++];
      },
      [&](gc::MutateResult&& r) {
        results.push_back(std::move(r));
        return absl::OkStatus();
      });
  ASSERT_TRUE(st.ok()) << st;
  ASSERT_EQ(results.size(), 3u);
  EXPECT_TRUE(results[0].error.ok()) << results[0].error;
  EXPECT_EQ(results[1].error.code(), absl::StatusCode::kInvalidArgument) << results[1].error;
  EXPECT_TRUE(results[2].error.ok()) << results[2].error;
  EXPECT_EQ(results[0].mutation_sequence, 1u);
  EXPECT_EQ(results[2].mutation_sequence, 2u);
  gc::LookupResult r = Look("stream", std::vector<uint32_t>{1, 2, 3});
  EXPECT_EQ(r.found, (std::vector<uint8_t>{0, 1, 0}));
}

// MutateAll checks the input against the index before anything is sent.
TEST_F(ClientMutateTest, ChecksBeforeSendingLeaveTheIndexUnchanged) {
  BuildDim("checked", {1, 2});
  const std::vector<uint32_t> keys = {5};
  const Column qty = Column::Of<int64_t>("qty", std::vector<int64_t>{1});
  const std::vector<ColumnView> payload = {qty.view()};
  auto s = client_->Upsert("checked", keys, {}, payload);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("payload column 'note'"), std::string::npos) << s.status();
  const std::vector<uint32_t> values = {9};
  const Column note = Strings("note", {"x"});
  const std::vector<ColumnView> both = {qty.view(), note.view()};
  s = client_->Upsert("checked", keys, values, both);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("row-ID values"), std::string::npos) << s.status();
  auto info = client_->DescribeIndex("checked");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->mutation_sequence, 0u);

  auto missing = client_->Delete("no-such-index", keys);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound) << missing.status();

  // An empty input sends nothing and reports the index's sequence.
  auto empty = client_->Delete("checked", std::vector<uint32_t>{});
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_TRUE(empty->requests.empty());
  EXPECT_EQ(empty->mutation_sequence, 0u);
  EXPECT_EQ(empty->index_version, info->version);
}

// IndexSpec::replicated travels with the spec and IndexInfo says it back
// (a server that is not a shard stores it).
TEST_F(ClientMutateTest, PlacementTravelsWithTheSpec) {
  gc::IndexSpec spec;
  spec.name = "placed";
  spec.replace = true;
  spec.replicated = true;
  auto built = client_->BuildIndexFromColumns(spec, std::vector<uint32_t>{1, 2, 3});
  ASSERT_TRUE(built.ok()) << built.status();
  EXPECT_TRUE(built->replicated);
  auto info = client_->DescribeIndex("placed");
  ASSERT_TRUE(info.ok());
  EXPECT_TRUE(info->replicated);
  spec.replicated = false;
  ASSERT_TRUE(client_->BuildIndexFromColumns(spec, std::vector<uint32_t>{1}).ok());
  info = client_->DescribeIndex("placed");
  ASSERT_TRUE(info.ok());
  EXPECT_FALSE(info->replicated);
}

// max_load_factor travels with the spec; upserts past it grow the table.
TEST_F(ClientMutateTest, UpsertsPastMaxLoadFactorRehash) {
  gc::IndexSpec spec;
  spec.name = "grows";
  spec.replace = true;
  spec.capacity = 16;
  spec.max_load_factor = 0.5;
  ASSERT_TRUE(client_->BuildIndexFromColumns(spec, std::vector<uint32_t>{1, 2, 3}).ok());
  auto info = client_->DescribeIndex("grows");
  ASSERT_TRUE(info.ok());
  EXPECT_DOUBLE_EQ(info->max_load_factor, 0.5);
  std::vector<uint32_t> keys(40);
  std::iota(keys.begin(), keys.end(), 100);
  gc::MutateOptions o;
  o.batch_rows = 10;
  auto s = client_->Upsert("grows", keys, {}, {}, o);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_GE(s->rehashes, 1u);
  EXPECT_GE(s->capacity, 128u);
  EXPECT_LE(s->load_factor, 0.5);
  info = client_->DescribeIndex("grows");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->rehashes, s->rehashes);
  EXPECT_EQ(info->capacity, s->capacity);
  gc::LookupResult r = Look("grows", keys);
  EXPECT_EQ(r.statistics.found, keys.size());
}

// With --data-dir: every applied batch is durable (in the write-ahead log,
// --wal-sync=always by default) and a restart serves the mutations, their
// sequence and the next row ID.
TEST(ClientMutateDurable, DurableBatchesSurviveARestart) {
  namespace fs = std::filesystem;
  const fs::path dir =
      fs::temp_directory_path() / ("gpujoin_client_mutate_wal_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  gpujoin::testing::ServerOptions o;
  o.extra_args = {"--data-dir=" + dir.string()};
  auto connect = [](const gpujoin::testing::ServerProcess& server) {
    gc::ConnectOptions c;
    c.address = server.grpc_address();
    c.deadline = std::chrono::seconds(60);
    auto client = gc::Client::Connect(c);
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? *std::move(client) : nullptr;
  };
  {
    gpujoin::testing::ServerProcess server(o);
    ASSERT_TRUE(server.ready()) << server.log();
    auto client = connect(server);
    ASSERT_NE(client, nullptr);
    auto info = client->GetServerInfo();
    ASSERT_TRUE(info.ok()) << info.status();
    EXPECT_EQ(info->wal_sync, "always");
    gc::IndexSpec spec;
    spec.name = "kept";
    ASSERT_TRUE(client->BuildIndexFromColumns(spec, std::vector<uint32_t>{1, 2, 3}).ok());
    gc::MutateOptions m;
    m.batch_rows = 2;
    auto s = client->Upsert("kept", std::vector<uint32_t>{4, 5, 6});
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_TRUE(s->durable);
    s = client->Delete("kept", std::vector<uint32_t>{1, 2, 3}, m);
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_EQ(s->requests.size(), 2u);
    EXPECT_TRUE(s->durable);
    EXPECT_EQ(s->mutation_sequence, 3u);
  }  // killed (SIGKILL): only the snapshot and the log remain
  gpujoin::testing::ServerProcess server(o);
  ASSERT_TRUE(server.ready()) << server.log();
  auto client = connect(server);
  ASSERT_NE(client, nullptr);
  auto info = client->DescribeIndex("kept");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->mutation_sequence, 3u);
  EXPECT_EQ(info->next_row_id, 6u);
  auto r = client->LookupAll("kept", std::vector<uint32_t>{1, 4, 6});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->values, (std::vector<uint32_t>{gc::kNoMatch, 3, 5}));
  EXPECT_EQ(r->mutation_sequence, 3u);
  fs::remove_all(dir);
}

}  // namespace
