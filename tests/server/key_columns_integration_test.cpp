// Key schemas (string and composite keys) through a real gpujoind (CPU backend)
// and the generated stub: a string-keyed index with payload built from
// `key_columns` chunks answers lookups (found, values, probes, match counts,
// selected payload) and joins of every kind; batch mode with row bases and
// validity; a composite (int64, string) key with nulls, duplicates across
// chunks, the empty string and strings that differ in one byte; IndexInfo,
// ListIndexes and /metrics report the schema; every wire error names its field;
// and a randomized check of lookups and the four join kinds against a map model.
// Their snapshots: snapshot_key_columns_test.cpp.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "build_messages.hpp"
#include "gpujoin/testing/loopback.hpp"
#include "gpujoin/testing/server_process.hpp"
#include "gpujoin/v1/gpujoin.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "wire/column_codec.hpp"

namespace gpujoin::server {
namespace {

using gpujoin::testing::HttpGet;
using gpujoin::testing::ServerProcess;
using ::testing::HasSubstr;

constexpr uint32_t kMissing = 0xffffffffu;

using testing::I64;
using testing::I64Col;
using testing::KeyChunk;
using testing::KeyCol;
using testing::KeyLookup;
using testing::KeySpec;
using testing::Str;
using testing::StrCol;

class KeyColumnsIntegrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = std::make_unique<ServerProcess>(gpujoin::testing::ServerOptions{.metrics = true});
    ASSERT_TRUE(server_->ready()) << "gpujoind did not become ready; log:\n" << server_->log();
    stub_ = v1::GpuJoin::NewStub(
        grpc::CreateChannel(server_->grpc_address(), grpc::InsecureChannelCredentials()));
  }

  // One lookup batch on its own stream (its response, an in-band error included).
  v1::LookupResponse Lookup(const v1::LookupRequest& request) {
    grpc::ClientContext ctx;
    auto stream = stub_->Lookup(&ctx);
    EXPECT_TRUE(stream->Write(request));
    stream->WritesDone();
    v1::LookupResponse out;
    EXPECT_TRUE(stream->Read(&out));
    EXPECT_TRUE(stream->Finish().ok());
    return out;
  }

  // One join request; its response messages merged (results appended by batch).
  v1::JoinResponse Join(const v1::JoinRequest& request) {
    grpc::ClientContext ctx;
    auto stream = stub_->Join(&ctx);
    EXPECT_TRUE(stream->Write(request));
    stream->WritesDone();
    v1::JoinResponse merged, part;
    while (stream->Read(&part)) {
      if (part.has_error()) *merged.mutable_error() = part.error();
      for (const auto& r : part.results()) {
        if (static_cast<int>(r.batch()) < merged.results_size()) {
          auto* m = merged.mutable_results(static_cast<int>(r.batch()));
          m->mutable_left_rows()->append(r.left_rows());
          m->mutable_right_rows()->append(r.right_rows());
        } else {
          *merged.add_results() = r;
        }
      }
    }
    EXPECT_TRUE(stream->Finish().ok());
    return merged;
  }

  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<v1::GpuJoin::Stub> stub_;
};

TEST_F(KeyColumnsIntegrationTest, StringKeysWithPayloadLookupsAndInfo) {
  // Chunk 0: "" (an ordinary key), "a", "ab", "abc", "abd" (one byte apart), a
  // null row. Chunk 1: "a" again (a duplicate across chunks: row 1 wins),
  // non-ASCII text, "ab\0" (an embedded NUL).
  v1::BuildIndexRequest spec = KeySpec("skus", {{"sku", v1::COLUMN_TYPE_STRING}});
  auto* price = spec.mutable_spec()->add_payload();
  price->set_name("price");
  price->set_type(v1::COLUMN_TYPE_INT64);
  v1::BuildIndexRequest c0 = KeyChunk({StrCol({"", "a", "ab", "abc", "abd", std::nullopt})});
  *c0.mutable_chunk()->add_payload() = I64Col({10, 11, 12, 13, 14, 15});
  c0.mutable_chunk()->mutable_payload(0)->set_name("price");
  v1::BuildIndexRequest c1 =
      KeyChunk({StrCol({"a", "\xc3\xa9t\xc3\xa9", std::string("ab\0", 3)})});
  *c1.mutable_chunk()->add_payload() = I64Col({16, 17, 18});
  c1.mutable_chunk()->mutable_payload(0)->set_name("price");
  v1::BuildIndexResponse built;
  grpc::Status s = testing::Build(*stub_, {spec, c0, c1}, &built);
  ASSERT_TRUE(s.ok()) << s.error_message();
  const v1::IndexInfo& info = built.index();
  EXPECT_EQ(info.key_type(), v1::KEY_TYPE_COLUMNS);
  ASSERT_EQ(info.key_columns_size(), 1);
  EXPECT_EQ(info.key_columns(0).name(), "sku");
  EXPECT_EQ(info.key_columns(0).type(), v1::COLUMN_TYPE_STRING);
  EXPECT_EQ(info.rows(), 9u);
  EXPECT_EQ(info.statistics().unique_keys(), 7u);
  EXPECT_EQ(info.statistics().duplicate_rows(), 1u);
  EXPECT_EQ(info.statistics().invalid_rows(), 1u);
  // The stored key columns count: more than the table and payload alone.
  EXPECT_GT(info.device_bytes(), 1024u * 16 + info.payload_bytes());

  v1::LookupRequest q = KeyLookup(
      "skus", {StrCol({"a", "", "abd", "abe", std::nullopt, "ab", std::string("ab\0", 3),
                       "\xc3\xa9t\xc3\xa9", "A"})});
  q.set_want_probes(true);
  q.set_want_match_counts(true);
  q.add_select("price");
  const v1::LookupResponse r = Lookup(q);
  ASSERT_FALSE(r.has_error()) << r.error().message();
  EXPECT_EQ(UnpackColumn<uint32_t>(r.values()),
            (std::vector<uint32_t>{1, 0, 4, kMissing, kMissing, 2, 8, 7, kMissing}));
  EXPECT_EQ(r.found(), std::string("\1\1\1\0\0\1\1\1\0", 9));
  EXPECT_EQ(UnpackColumn<uint32_t>(r.match_counts()),
            (std::vector<uint32_t>{1, 1, 1, 0, 0, 1, 1, 1, 0}));
  const std::vector<uint32_t> probes = UnpackColumn<uint32_t>(r.probes());
  ASSERT_EQ(probes.size(), 9u);
  EXPECT_EQ(probes[4], 0u);  // a null key examines no slot
  for (size_t i : {0, 1, 2, 5, 6, 7}) EXPECT_GE(probes[i], 1u) << i;
  EXPECT_EQ(r.statistics().found(), 6u);
  EXPECT_EQ(r.statistics().missing(), 3u);
  ASSERT_EQ(r.columns_size(), 1);
  EXPECT_EQ(r.columns(0).name(), "price");
  EXPECT_EQ(r.columns(0).null_count(), 3u);
  const std::vector<int64_t> prices = UnpackColumn<int64_t>(r.columns(0).data());
  ASSERT_EQ(prices.size(), 9u);
  EXPECT_EQ(prices[0], 11);
  EXPECT_EQ(prices[1], 10);
  EXPECT_EQ(prices[2], 14);
  EXPECT_EQ(prices[6], 18);

  // DescribeIndex and ListIndexes carry the schema; /metrics the key type.
  {
    grpc::ClientContext ctx;
    v1::DescribeIndexRequest d;
    d.set_name("skus");
    v1::DescribeIndexResponse dr;
    ASSERT_TRUE(stub_->DescribeIndex(&ctx, d, &dr).ok());
    EXPECT_EQ(dr.index().key_type(), v1::KEY_TYPE_COLUMNS);
    ASSERT_EQ(dr.index().key_columns_size(), 1);
    EXPECT_EQ(dr.index().key_columns(0).name(), "sku");
  }
  {
    grpc::ClientContext ctx;
    v1::ListIndexesResponse lr;
    ASSERT_TRUE(stub_->ListIndexes(&ctx, v1::ListIndexesRequest(), &lr).ok());
    ASSERT_EQ(lr.indexes_size(), 1);
    EXPECT_EQ(lr.indexes(0).key_columns(0).type(), v1::COLUMN_TYPE_STRING);
  }
  const std::string metrics = HttpGet(server_->metrics_address(), "/metrics");
  EXPECT_THAT(metrics, HasSubstr("key_type=\"columns\""));
}

TEST_F(KeyColumnsIntegrationTest, CompositeKeysBatchModeAndJoinKinds) {
  // (tenant int64, order string), batch mode: chunk 0 at row base 100 with row
  // 2 masked out, chunk 1 at row base 500 repeating (1, "x") (a duplicate: row
  // 100 wins) and holding (2, "x") (the same string, another tenant), a null
  // tenant, and ("x", 1) swapped is no key here (types differ), so (1, "y").
  v1::BuildIndexRequest spec = KeySpec(
      "orders", {{"tenant", v1::COLUMN_TYPE_INT64}, {"order", v1::COLUMN_TYPE_STRING}});
  spec.mutable_spec()->set_batch_mode(true);
  spec.mutable_spec()->set_duplicates(v1::DUPLICATE_POLICY_KEEP_ALL);
  v1::BuildIndexRequest c0 = KeyChunk({I64Col({1, 1, 3}), StrCol({"x", "y", "z"})});
  c0.mutable_chunk()->set_row_base(100);
  for (uint32_t v : {1u, 1u, 0u}) c0.mutable_chunk()->mutable_validity()->mutable_values()->add_v(v);
  v1::BuildIndexRequest c1 =
      KeyChunk({I64Col({1, 2, std::nullopt, -5}), StrCol({"x", "x", "x", ""})});
  c1.mutable_chunk()->set_row_base(500);
  v1::BuildIndexResponse built;
  grpc::Status s = testing::Build(*stub_, {spec, c0, c1}, &built);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(built.index().statistics().invalid_rows(), 2u);  // masked + null tenant
  EXPECT_EQ(built.index().statistics().unique_keys(), 4u);
  EXPECT_EQ(built.index().statistics().max_group_rows(), 2u);

  // Left rows 0..5: (1,"x") two matches, (2,"x"), (3,"z") masked out at build,
  // (1,null) never matches, (-5,""), (9,"x") missing.
  v1::JoinRequest j;
  j.set_index("orders");
  auto* b = j.add_batches();
  *b->add_key_columns() = I64Col({1, 2, 3, 1, -5, 9});
  *b->add_key_columns() = StrCol({"x", "x", "z", std::nullopt, "", "x"});
  b->set_capacity(100);
  b->set_want_found(true);
  struct Case {
    v1::JoinKind kind;
    std::vector<uint32_t> left, right;
  };
  const std::vector<Case> cases = {
      {v1::JOIN_KIND_INNER, {0, 0, 1, 4}, {100, 500, 501, 503}},
      {v1::JOIN_KIND_LEFT_OUTER,
       {0, 0, 1, 2, 3, 4, 5},
       {100, 500, 501, kMissing, kMissing, 503, kMissing}},
      {v1::JOIN_KIND_LEFT_SEMI, {0, 1, 4}, {100, 501, 503}},
      {v1::JOIN_KIND_LEFT_ANTI, {2, 3, 5}, {kMissing, kMissing, kMissing}},
  };
  for (const Case& c : cases) {
    j.set_kind(c.kind);
    const v1::JoinResponse r = Join(j);
    ASSERT_FALSE(r.has_error()) << r.error().message();
    ASSERT_EQ(r.results_size(), 1);
    EXPECT_EQ(UnpackColumn<uint32_t>(r.results(0).left_rows()), c.left) << c.kind;
    EXPECT_EQ(UnpackColumn<uint32_t>(r.results(0).right_rows()), c.right) << c.kind;
    EXPECT_EQ(r.results(0).count(), c.left.size());
    EXPECT_EQ(r.results(0).found(), std::string("\1\1\0\0\1\0", 6));
  }
  // Capacity truncation keeps the stable prefix and reports the count.
  j.set_kind(v1::JOIN_KIND_INNER);
  j.mutable_batches(0)->set_capacity(2);
  const v1::JoinResponse cut = Join(j);
  ASSERT_FALSE(cut.has_error()) << cut.error().message();
  EXPECT_EQ(cut.results(0).count(), 4u);
  EXPECT_TRUE(cut.results(0).overflow());
  EXPECT_EQ(UnpackColumn<uint32_t>(cut.results(0).right_rows()),
            (std::vector<uint32_t>{100, 500}));

  // A lookup on the keep_all index: the first match, the group size.
  v1::LookupRequest q = KeyLookup("orders", {I64Col({1, 2}), StrCol({"x", "y"})});
  q.set_want_match_counts(true);
  const v1::LookupResponse lr = Lookup(q);
  ASSERT_FALSE(lr.has_error()) << lr.error().message();
  EXPECT_EQ(UnpackColumn<uint32_t>(lr.values()), (std::vector<uint32_t>{100, kMissing}));
  EXPECT_EQ(UnpackColumn<uint32_t>(lr.match_counts()), (std::vector<uint32_t>{2, 0}));
}

// A build of index "bad" from `messages`, expected to fail INVALID_ARGUMENT
// with `message` (exactly).
void ExpectBuildError(v1::GpuJoin::Stub& stub, const std::vector<v1::BuildIndexRequest>& messages,
                      const std::string& message) {
  const grpc::Status s = testing::Build(stub, messages);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_EQ(s.error_message(), message);
}

TEST_F(KeyColumnsIntegrationTest, BadSpecsAndChunksNameTheirField) {
  const std::vector<KeyCol> two = {{"id", v1::COLUMN_TYPE_INT64}, {"s", v1::COLUMN_TYPE_STRING}};
  v1::BuildIndexRequest none = KeySpec("bad", {});
  ExpectBuildError(*stub_, {none},
                   "spec.key_columns: 0 key columns; spec.key_type KEY_TYPE_COLUMNS needs 1 to 8");
  v1::BuildIndexRequest nine = KeySpec("bad", std::vector<KeyCol>(9, {"k", v1::COLUMN_TYPE_INT32}));
  ExpectBuildError(*stub_, {nine},
                   "spec.key_columns: 9 key columns; spec.key_type KEY_TYPE_COLUMNS needs 1 to 8");
  ExpectBuildError(*stub_, {KeySpec("bad", {{"f", v1::COLUMN_TYPE_FLOAT64}})},
                   "spec.key_columns[0].type: COLUMN_TYPE_FLOAT64 cannot be a key column "
                   "(COLUMN_TYPE_INT32, _INT64, _UINT32, _UINT64, _STRING or _BINARY)");
  ExpectBuildError(
      *stub_, {KeySpec("bad", {{"a", v1::COLUMN_TYPE_INT32}, {"a", v1::COLUMN_TYPE_STRING}})},
      "spec.key_columns[1].name: key column \"a\" is declared twice (also spec.key_columns[0])");
  v1::BuildIndexRequest bad_name = KeySpec("bad", {{"a b", v1::COLUMN_TYPE_INT32}});
  EXPECT_EQ(testing::Build(*stub_, {bad_name}).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  v1::BuildIndexRequest word = testing::SpecMsg("bad", 64);
  word.mutable_spec()->add_key_columns()->set_name("a");
  ExpectBuildError(*stub_, {word},
                   "spec.key_columns: 1 key columns declared but spec.key_type is uint32; set "
                   "spec.key_type KEY_TYPE_COLUMNS for a key schema");

  // Chunks: count, type, name, length, buffers, UTF-8, keys of the other kind.
  const v1::BuildIndexRequest spec = KeySpec("bad", two);
  ExpectBuildError(*stub_, {spec, KeyChunk({I64Col({1})})},
                   "chunks[0].key_columns: 1 columns, but index \"bad\" has a key of 2 (id "
                   "INT64, s STRING); send one Column per key column, in that order");
  ExpectBuildError(*stub_, {spec, KeyChunk({StrCol({"a"}), I64Col({1})})},
                   "chunks[0].key_columns[0].type: COLUMN_TYPE_STRING, but key column 0 (\"id\") "
                   "of index \"bad\" is COLUMN_TYPE_INT64");
  v1::BuildIndexRequest named = KeyChunk({I64Col({1}), StrCol({"a"})});
  named.mutable_chunk()->mutable_key_columns(1)->set_name("t");
  ExpectBuildError(*stub_, {spec, named},
                   "chunks[0].key_columns[1].name: \"t\", but key column 1 of index \"bad\" is "
                   "\"s\" (leave the name empty or send the key columns in the order id INT64, s "
                   "STRING)");
  ExpectBuildError(*stub_, {spec, KeyChunk({I64Col({1, 2}), StrCol({"a"})})},
                   "chunks[0].key_columns[1].length: 1 rows, but chunks[0].key_columns[0] has 2 "
                   "(every key column has one row per key)");
  v1::BuildIndexRequest short_data = KeyChunk({I64Col({1, 2}), StrCol({"a", "b"})});
  short_data.mutable_chunk()->mutable_key_columns(0)->mutable_data()->resize(12);
  ExpectBuildError(*stub_, {spec, short_data},
                   "chunks[0].key_columns[0] (column \"id\").data: 12 bytes, need length 2 * 8 = "
                   "16");
  v1::BuildIndexRequest bad_offsets = KeyChunk({I64Col({1}), StrCol({"abc"})});
  *bad_offsets.mutable_chunk()->mutable_key_columns(1)->mutable_offsets() =
      PackColumn<int32_t>(std::vector<int32_t>{0, 9});
  ExpectBuildError(*stub_, {spec, bad_offsets},
                   "chunks[0].key_columns[1] (column \"s\").offsets[1]: 9 is beyond "
                   "chunks[0].key_columns[1] (column \"s\").data (3 bytes)");
  v1::BuildIndexRequest bad_validity = KeyChunk({I64Col({1}), StrCol({"a"})});
  *bad_validity.mutable_chunk()->mutable_key_columns(0)->mutable_validity() = "\1\1";
  ExpectBuildError(*stub_, {spec, bad_validity},
                   "chunks[0].key_columns[0] (column \"id\").validity: 2 bytes, but a bitmap of "
                   "length 1 rows has ceil(1 / 8) = 1 (or send none: no nulls)");
  ExpectBuildError(*stub_, {spec, KeyChunk({I64Col({1, 2}), StrCol({"ok", "b\xff"})})},
                   "chunks[0].key_columns[1] (column \"s\"): row 1 of the keys is not valid UTF-8 "
                   "(byte 0xff at position 1 of the row's 2 bytes); send bytes that are not "
                   "UTF-8 text in a COLUMN_TYPE_BINARY column");
  ExpectBuildError(*stub_, {spec, testing::ChunkMsg({1, 2, 3})},
                   "chunks[0].keys: index \"bad\" is keyed by columns (id INT64, s STRING); send "
                   "its keys in chunks[0].key_columns, one Column per key column (got 12 bytes of "
                   "uint32 keys)");
  ExpectBuildError(*stub_, {testing::SpecMsg("bad", 64), KeyChunk({I64Col({1})})},
                   "chunks[0].key_columns: index \"bad\" has uint32 keys; send them in "
                   "chunks[0].keys (got 1 key columns)");
  // Binary keys take any bytes.
  ASSERT_TRUE(testing::Build(*stub_, {KeySpec("bin", {{"b", v1::COLUMN_TYPE_BINARY}}),
                                      KeyChunk({StrCol({"\xff", "\xfe"}, v1::COLUMN_TYPE_BINARY)})})
                  .ok());
  // Nothing named "bad" was installed.
  grpc::ClientContext ctx;
  v1::DescribeIndexRequest d;
  d.set_name("bad");
  v1::DescribeIndexResponse dr;
  EXPECT_EQ(stub_->DescribeIndex(&ctx, d, &dr).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(KeyColumnsIntegrationTest, BadLookupsAndJoinsAreInBandErrors) {
  ASSERT_TRUE(testing::Build(*stub_, {KeySpec("s", {{"k", v1::COLUMN_TYPE_STRING}}),
                                      KeyChunk({StrCol({"a", "b"})})})
                  .ok());
  ASSERT_TRUE(testing::Build(*stub_, {testing::SpecMsg("n", 64), testing::ChunkMsg({1, 2})}).ok());
  struct Case {
    v1::LookupRequest request;
    std::string message;
  };
  std::vector<Case> cases;
  cases.push_back({testing::LookupMsg("s", {1, 2}),
                   "keys: index \"s\" is keyed by columns (k STRING); send its keys in "
                   "key_columns, one Column per key column (got 8 bytes of uint32 keys)"});
  cases.push_back({KeyLookup("n", {StrCol({"a"})}),
                   "key_columns: index \"n\" has uint32 keys; send them in keys (got 1 key "
                   "columns)"});
  cases.push_back({KeyLookup("s", {I64Col({1})}),
                   "key_columns[0].type: COLUMN_TYPE_INT64, but key column 0 (\"k\") of index "
                   "\"s\" is COLUMN_TYPE_STRING"});
  cases.push_back({KeyLookup("s", {StrCol({"a"}), StrCol({"b"})}),
                   "key_columns: 2 columns, but index \"s\" has a key of 1 (k STRING); send one "
                   "Column per key column, in that order"});
  cases.push_back({KeyLookup("s", {StrCol({"a", "\xc3", "c"})}),
                   "key_columns[0] (column \"k\"): row 1 of the keys is not valid UTF-8 (byte 0xc3 "
                   "at position 0 of the row's 1 bytes); send bytes that are not UTF-8 text in a "
                   "COLUMN_TYPE_BINARY column"});
  v1::LookupRequest empty;
  empty.set_index("s");
  cases.push_back({empty,
                   "key_columns: 0 columns, but index \"s\" has a key of 1 (k STRING); send one "
                   "Column per key column, in that order"});
  // Both kinds at once: the bytes path (packed keys) names the keys too.
  v1::LookupRequest both = testing::LookupMsg("s", {7});
  *both.add_key_columns() = StrCol({"a"});
  cases.push_back({both,
                   "keys: index \"s\" is keyed by columns (k STRING); send its keys in "
                   "key_columns, one Column per key column (got 4 bytes of uint32 keys)"});
  v1::LookupRequest both_n = testing::LookupMsg("n", {7});
  *both_n.add_key_columns() = StrCol({"a"});
  cases.push_back({both_n,
                   "key_columns: index \"n\" has uint32 keys; send them in keys (got 1 key "
                   "columns)"});
  for (const Case& c : cases) {
    const v1::LookupResponse r = Lookup(c.request);
    EXPECT_EQ(r.error().code(), grpc::StatusCode::INVALID_ARGUMENT) << c.message;
    EXPECT_EQ(r.error().message(), c.message);
  }

  // A length whose bytes would wrap 64 bits is refused, not allocated.
  ASSERT_TRUE(testing::Build(*stub_, {KeySpec("i", {{"k", v1::COLUMN_TYPE_INT64}}),
                                      KeyChunk({I64Col({1})})})
                  .ok());
  v1::LookupRequest huge = KeyLookup("i", {I64Col({})});
  huge.mutable_key_columns(0)->set_length(uint64_t{1} << 61);
  const v1::LookupResponse hr = Lookup(huge);
  EXPECT_EQ(hr.error().code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(hr.error().message(),
              HasSubstr("key_columns[0] (column \"k\").data: 0 bytes, need length "
                        "2305843009213693952 * 8"));

  v1::JoinRequest j;
  j.set_index("s");
  *j.add_batches()->add_key_columns() = StrCol({"a"});
  *j.add_batches()->mutable_keys()->mutable_packed() = PackColumn<uint32_t>(std::vector<uint32_t>{1});
  v1::JoinResponse jr = Join(j);
  EXPECT_EQ(jr.error().code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(jr.error().message(),
            "batches[1].keys: index \"s\" is keyed by columns (k STRING); send its keys in "
            "batches[1].key_columns, one Column per key column (got 4 bytes of uint32 keys)");
  j.clear_batches();
  auto* b = j.add_batches();
  *b->add_key_columns() = StrCol({"a", "b"});
  for (uint32_t v : {5u}) b->mutable_left_rows()->mutable_values()->add_v(v);
  jr = Join(j);
  EXPECT_EQ(jr.error().message(), "batches[0].left_rows: 1 rows but batches[0].key_columns has 2");
}

// ------------------------------------------------------------ randomized model

// A key of the (int64, string) schema with nulls: the model's map key.
struct ModelKey {
  I64 id;
  Str s;
  bool null() const { return !id || !s; }
  auto operator<=>(const ModelKey&) const = default;
};

TEST_F(KeyColumnsIntegrationTest, RandomLookupsAndJoinsMatchAMapModel) {
  std::mt19937_64 rng(20261205);
  // Few distinct values, so that keys repeat within and across chunks, share
  // prefixes and differ in one byte; about 5% nulls in each column.
  auto random_key = [&] {
    ModelKey k;
    if (rng() % 20 != 0) k.id = static_cast<int64_t>(rng() % 7) - 3;
    if (rng() % 20 != 0) {
      std::string s;
      const size_t n = rng() % 4;
      for (size_t i = 0; i < n; ++i) s.push_back("ab\xc3\xa9"[rng() % 2]);
      if (rng() % 5 == 0) s += "\xc3\xa9";  // non-ASCII
      k.s = s;
    }
    return k;
  };
  for (v1::DuplicatePolicy policy :
       {v1::DUPLICATE_POLICY_LOWEST_ROW, v1::DUPLICATE_POLICY_KEEP_ALL}) {
    SCOPED_TRACE(policy);
    v1::BuildIndexRequest spec =
        KeySpec("r", {{"id", v1::COLUMN_TYPE_INT64}, {"s", v1::COLUMN_TYPE_STRING}}, 256);
    spec.mutable_spec()->set_duplicates(policy);
    spec.mutable_spec()->set_replace(true);
    spec.mutable_spec()->set_first_value(1000);
    std::vector<v1::BuildIndexRequest> messages = {spec};
    std::map<ModelKey, std::vector<uint32_t>> model;  // key -> values in source order
    uint32_t row = 0;
    for (int chunk = 0; chunk < 4; ++chunk) {
      std::vector<I64> ids;
      std::vector<Str> strs;
      const size_t rows = rng() % 30;
      for (size_t i = 0; i < rows; ++i, ++row) {
        const ModelKey k = random_key();
        ids.push_back(k.id);
        strs.push_back(k.s);
        if (!k.null()) model[k].push_back(1000 + row);
      }
      messages.push_back(KeyChunk({I64Col(ids), StrCol(strs)}));
    }
    v1::BuildIndexResponse built;
    const grpc::Status s = testing::Build(*stub_, messages, &built);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(built.index().statistics().unique_keys(), model.size());
    const bool keep_all = policy == v1::DUPLICATE_POLICY_KEEP_ALL;

    std::vector<ModelKey> queries;
    for (int i = 0; i < 200; ++i) queries.push_back(random_key());
    std::vector<I64> ids;
    std::vector<Str> strs;
    for (const ModelKey& k : queries) {
      ids.push_back(k.id);
      strs.push_back(k.s);
    }
    v1::LookupRequest q = KeyLookup("r", {I64Col(ids), StrCol(strs)});
    q.set_want_match_counts(true);
    const v1::LookupResponse lr = Lookup(q);
    ASSERT_FALSE(lr.has_error()) << lr.error().message();
    const std::vector<uint32_t> values = UnpackColumn<uint32_t>(lr.values());
    const std::vector<uint32_t> counts = UnpackColumn<uint32_t>(lr.match_counts());
    ASSERT_EQ(values.size(), queries.size());
    for (size_t i = 0; i < queries.size(); ++i) {
      const auto it = queries[i].null() ? model.end() : model.find(queries[i]);
      const bool hit = it != model.end();
      EXPECT_EQ(values[i], hit ? it->second.front() : kMissing) << i;
      EXPECT_EQ(static_cast<uint8_t>(lr.found()[i]), hit ? 1 : 0) << i;
      EXPECT_EQ(counts[i], hit ? (keep_all ? it->second.size() : 1) : 0) << i;
    }

    for (v1::JoinKind kind : {v1::JOIN_KIND_INNER, v1::JOIN_KIND_LEFT_OUTER,
                              v1::JOIN_KIND_LEFT_SEMI, v1::JOIN_KIND_LEFT_ANTI}) {
      SCOPED_TRACE(kind);
      v1::JoinRequest j;
      j.set_index("r");
      j.set_kind(kind);
      auto* b = j.add_batches();
      *b->add_key_columns() = I64Col(ids);
      *b->add_key_columns() = StrCol(strs);
      b->set_first_left_row(7);
      b->set_capacity(100000);
      std::vector<uint32_t> left, right;
      for (size_t i = 0; i < queries.size(); ++i) {
        const auto it = queries[i].null() ? model.end() : model.find(queries[i]);
        std::vector<uint32_t> matches;
        if (it != model.end()) {
          matches = keep_all ? it->second : std::vector<uint32_t>{it->second.front()};
        }
        const uint32_t l = static_cast<uint32_t>(7 + i);
        if (kind == v1::JOIN_KIND_LEFT_SEMI && !matches.empty()) matches.resize(1);
        if (kind == v1::JOIN_KIND_LEFT_ANTI) {
          if (matches.empty()) left.push_back(l), right.push_back(kMissing);
          continue;
        }
        if (matches.empty() && kind == v1::JOIN_KIND_LEFT_OUTER) {
          left.push_back(l);
          right.push_back(kMissing);
        }
        for (uint32_t m : matches) left.push_back(l), right.push_back(m);
      }
      const v1::JoinResponse jr = Join(j);
      ASSERT_FALSE(jr.has_error()) << jr.error().message();
      EXPECT_EQ(jr.results(0).count(), left.size());
      EXPECT_EQ(UnpackColumn<uint32_t>(jr.results(0).left_rows()), left);
      EXPECT_EQ(UnpackColumn<uint32_t>(jr.results(0).right_rows()), right);
    }
  }
}

}  // namespace
}  // namespace gpujoin::server
