// 64-bit keys in the service operations, on the CPU backend without
// gRPC: the key type is a property of the index; keys travel in `keys` (uint32) or
// `keys64` (uint64) by that type, and the wrong width is INVALID_ARGUMENT naming
// the field, the index's key type and the byte length, so that an int64 column
// sent as packed uint32 bytes (8-byte rows read as two 4-byte rows) is an error,
// not wrong answers. Results are compared with the engine run directly.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "gpujoin/engine/graph.hpp"
#include "wire/column_codec.hpp"
#include "wire/lookup_wire.hpp"
#include "ops/operations.hpp"
#include "test_util.hpp"

namespace gpujoin::server {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kEmpty64 = 0xffffffffffffffffull;

// Keys above 2^32, keys equal in their low 32 bits (a truncation to 32 bits would
// merge them) and 0xffffffff, an ordinary key of a 64-bit index.
const std::vector<uint64_t> kWideKeys = {
    0x100000005ull,        0x200000005ull, 5, 0xffffffffull, 0x7fffffffffffffffull,
    0x8000000000000000ull,  // INT64_MIN's bit pattern
    0xfffffffffffffffeull,  // -2 as int64
};

class KeyTypeTest : public testing::OperationsFixture {
 protected:
  void SetUp() override { MakeOperations(); }

  static v1::BuildIndexRequest Spec(const std::string& name, v1::KeyType type,
                                    uint32_t capacity = 64) {
    v1::BuildIndexRequest r;
    r.mutable_spec()->set_name(name);
    r.mutable_spec()->set_capacity(capacity);
    r.mutable_spec()->set_first_value(100);
    r.mutable_spec()->set_key_type(type);
    return r;
  }
  static v1::BuildIndexRequest Chunk64(const std::vector<uint64_t>& keys) {
    v1::BuildIndexRequest r;
    *r.mutable_chunk()->mutable_keys64()->mutable_packed() = PackColumn<uint64_t>(keys);
    return r;
  }
  static v1::BuildIndexRequest Chunk32(const std::vector<uint32_t>& keys) {
    v1::BuildIndexRequest r;
    *r.mutable_chunk()->mutable_keys()->mutable_packed() = PackColumn<uint32_t>(keys);
    return r;
  }

  static v1::LookupRequest Lookup64(const std::string& index, const std::vector<uint64_t>& keys) {
    v1::LookupRequest r;
    r.set_index(index);
    *r.mutable_keys64()->mutable_packed() = PackColumn<uint64_t>(keys);
    return r;
  }
};

TEST_F(KeyTypeTest, WideKeysStayDistinctThroughBuildLookupAndJoin) {
  // Two chunks (packed, then a typed list) with a duplicate across them: the
  // lowest global row wins.
  v1::BuildIndexRequest second;
  for (uint64_t k : {0x200000005ull, 0x300000005ull}) {
    second.mutable_chunk()->mutable_keys64()->mutable_values()->add_v(k);
  }
  auto built = Build({Spec("ids", v1::KEY_TYPE_UINT64), Chunk64(kWideKeys), second});
  ASSERT_TRUE(built.ok()) << built.status();
  const engine::BuildStatistics& st = (*built)->index->build_statistics();
  EXPECT_EQ(st.unique_keys, kWideKeys.size() + 1);
  EXPECT_EQ(st.duplicate_rows, 1u);
  EXPECT_EQ(st.invalid_rows, 0u);
  EXPECT_EQ((*built)->index->key_type(), engine::KeyType::kUint64);

  // Every key finds its own row; the low 32 bits alone (5) are a key of their own,
  // and 0x400000005 is missing although its low word is present.
  std::vector<uint64_t> query = kWideKeys;
  query.push_back(0x300000005ull);
  query.push_back(0x400000005ull);
  query.push_back(kEmpty64);
  v1::LookupResponse resp;
  ASSERT_TRUE(ops_->Lookup(Lookup64("ids", query), &resp).ok());
  std::vector<uint32_t> want;
  for (uint32_t i = 0; i < kWideKeys.size(); ++i) want.push_back(100 + i);
  want.push_back(100 + kWideKeys.size() + 1);  // 0x300000005: row 8 (row 7 is the duplicate)
  want.push_back(0xffffffffu);
  want.push_back(0xffffffffu);
  EXPECT_EQ(UnpackColumn<uint32_t>(resp.values()), want);
  EXPECT_EQ(resp.statistics().found(), kWideKeys.size() + 1);
  EXPECT_EQ(resp.statistics().missing(), 2u);

  // The same through the engine directly.
  engine::HashIndexSpec spec{64, 0, engine::KeyType::kUint64};
  auto direct = backend_->CreateIndex(spec);
  ASSERT_TRUE(direct.ok());
  engine::CommandGraph g;
  engine::BuildStatistics expected;
  engine::BuildIndexNode64 node;
  node.index = direct->get();
  const std::vector<uint64_t> b = {0x200000005ull, 0x300000005ull};
  node.keys = {kWideKeys, b};
  node.first_value = 100;
  node.statistics = &expected;
  g.Add(std::move(node));
  ASSERT_TRUE(backend_->Run(g).ok());
  EXPECT_EQ(st, expected);

  // Join: two left batches, pairs in left order.
  v1::JoinRequest join;
  join.set_index("ids");
  auto* b0 = join.add_batches();
  *b0->mutable_keys64()->mutable_packed() =
      PackColumn<uint64_t>(std::vector<uint64_t>{0x400000005ull, 0x200000005ull, 5});
  auto* b1 = join.add_batches();
  for (uint64_t k : std::vector<uint64_t>{0xfffffffffffffffeull, kEmpty64, 0x100000005ull}) {
    b1->mutable_keys64()->mutable_values()->add_v(k);
  }
  b1->set_first_left_row(10);
  v1::JoinResponse jr;
  ASSERT_TRUE(ops_->Join(join, &jr).ok());
  ASSERT_EQ(jr.results_size(), 2);
  EXPECT_EQ(UnpackColumn<uint32_t>(jr.results(0).left_rows()), (std::vector<uint32_t>{1, 2}));
  EXPECT_EQ(UnpackColumn<uint32_t>(jr.results(0).right_rows()), (std::vector<uint32_t>{101, 102}));
  EXPECT_EQ(UnpackColumn<uint32_t>(jr.results(1).left_rows()), (std::vector<uint32_t>{10, 12}));
  EXPECT_EQ(UnpackColumn<uint32_t>(jr.results(1).right_rows()), (std::vector<uint32_t>{106, 100}));
  EXPECT_EQ(jr.results(1).statistics().missing(), 1u);
}

// Generated left row IDs that would wrap past 2^32 (or reach 0xffffffff) are
// refused naming the field, as generated build values are.
TEST_F(KeyTypeTest, GeneratedLeftRowIdsNeverWrap) {
  ASSERT_TRUE(Build({Spec("w", v1::KEY_TYPE_UINT64), Chunk64({5, 6})}).ok());
  v1::JoinRequest join;
  join.set_index("w");
  auto* b = join.add_batches();
  *b->mutable_keys64()->mutable_packed() = PackColumn<uint64_t>(std::vector<uint64_t>{5, 6});
  b->set_first_left_row(0xfffffffdull);  // rows 0xfffffffd and 0xfffffffe: fine
  v1::JoinResponse ok;
  ASSERT_TRUE(ops_->Join(join, &ok).ok());
  EXPECT_EQ(UnpackColumn<uint32_t>(ok.results(0).left_rows()),
            (std::vector<uint32_t>{0xfffffffdu, 0xfffffffeu}));
  b->set_first_left_row(0xfffffffeull);  // the second row would be 0xffffffff
  v1::JoinResponse refused;
  const absl::Status s = ops_->Join(join, &refused);
  ASSERT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("batches[0].first_left_row: "));
}

TEST_F(KeyTypeTest, TheReserved64BitKeyIsInvalidAnd0xffffffffIsAnOrdinaryKey) {
  auto built =
      Build({Spec("r", v1::KEY_TYPE_UINT64), Chunk64({kEmpty64, 0xffffffffull, kEmpty64, 7})});
  ASSERT_TRUE(built.ok()) << built.status();
  EXPECT_EQ((*built)->index->build_statistics().invalid_rows, 2u);
  EXPECT_EQ((*built)->index->build_statistics().unique_keys, 2u);
  v1::LookupRequest req = Lookup64("r", {0xffffffffull, kEmpty64, 7});
  req.set_want_probes(true);
  v1::LookupResponse resp;
  ASSERT_TRUE(ops_->Lookup(req, &resp).ok());
  EXPECT_EQ(UnpackColumn<uint32_t>(resp.values()), (std::vector<uint32_t>{101, 0xffffffffu, 103}));
  EXPECT_EQ(resp.found(), std::string("\1\0\1", 3));
  EXPECT_EQ(UnpackColumn<uint32_t>(resp.probes())[1], 0u);  // missing without probing

  // In a uint32 index 0xffffffff stays the reserved key.
  auto narrow = Build({Spec("n", v1::KEY_TYPE_UINT32), Chunk32({0xffffffffu, 7})});
  ASSERT_TRUE(narrow.ok());
  EXPECT_EQ((*narrow)->index->build_statistics().invalid_rows, 1u);
}

TEST_F(KeyTypeTest, BatchModeWith64BitKeysUsesRowBasesAndValidity) {
  v1::BuildIndexRequest spec = Spec("b", v1::KEY_TYPE_UINT64);
  spec.mutable_spec()->set_batch_mode(true);
  v1::BuildIndexRequest c0 = Chunk64({0x100000001ull, 0x200000001ull});
  c0.mutable_chunk()->set_row_base(1000);
  v1::BuildIndexRequest c1 = Chunk64({0x200000001ull, 0x300000001ull, 0x400000001ull});
  c1.mutable_chunk()->set_row_base(50);
  for (uint32_t v : {1u, 1u, 0u})
    c1.mutable_chunk()->mutable_validity()->mutable_values()->add_v(v);
  auto built = Build({spec, c0, c1});
  ASSERT_TRUE(built.ok()) << built.status();
  EXPECT_EQ((*built)->index->build_statistics().invalid_rows, 1u);
  EXPECT_EQ((*built)->index->build_statistics().duplicate_rows, 1u);
  v1::LookupResponse resp;
  ASSERT_TRUE(
      ops_->Lookup(Lookup64("b", {0x200000001ull, 0x300000001ull, 0x400000001ull, 1}), &resp).ok());
  EXPECT_EQ(UnpackColumn<uint32_t>(resp.values()),
            (std::vector<uint32_t>{1001, 51, 0xffffffffu, 0xffffffffu}));
}

// Regression for the second finding: an int64 array sent as packed bytes
// in `keys` was read as twice as many uint32 keys and answered wrongly. Each
// width sent to an index of the other is refused, naming the field, the index's
// key type and the byte length; nothing is built and nothing is counted.
TEST_F(KeyTypeTest, TheWrongWidthIsRefusedNamingFieldKeyTypeAndBytes) {
  // Build, both ways.
  auto wide_fed_narrow = Build({Spec("ids", v1::KEY_TYPE_UINT64), Chunk32({1, 2, 3})});
  EXPECT_EQ(wide_fed_narrow.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(wide_fed_narrow.status().message(),
            "chunks[0].keys: index \"ids\" has uint64 keys; send them in chunks[0].keys64 (got 12 "
            "bytes of uint32 keys)");
  auto narrow_fed_wide = Build({Spec("ids32", v1::KEY_TYPE_UINT32), Chunk32({1}), Chunk64({1, 2})});
  EXPECT_EQ(narrow_fed_wide.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(narrow_fed_wide.status().message(),
            "chunks[1].keys64: index \"ids32\" has uint32 keys; send them in chunks[1].keys (got "
            "16 bytes of uint64 keys)");
  // An unset key type is uint32.
  v1::BuildIndexRequest unset = Spec("u", v1::KEY_TYPE_UNSPECIFIED);
  EXPECT_THAT(Build({unset, Chunk64({1})}).status().message(), HasSubstr("has uint32 keys"));
  EXPECT_EQ(registry_.size(), 0u);
  EXPECT_EQ(budget_->used_bytes(), 0u);

  ASSERT_TRUE(Build({Spec("ids", v1::KEY_TYPE_UINT64), Chunk64({1, 2})}).ok());
  ASSERT_TRUE(Build({Spec("ids32", v1::KEY_TYPE_UINT32), Chunk32({1, 2})}).ok());

  // Lookup, both ways; int64 keys packed as bytes into `keys` (two rows of 8 bytes).
  v1::LookupRequest as_u32;
  as_u32.set_index("ids");
  *as_u32.mutable_keys()->mutable_packed() = PackColumn<uint64_t>(std::vector<uint64_t>{1, 2});
  v1::LookupResponse resp;
  absl::Status s = ops_->Lookup(as_u32, &resp);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "keys: index \"ids\" has uint64 keys; send them in keys64 (got 16 bytes of uint32 "
            "keys)");
  s = ops_->Lookup(Lookup64("ids32", {1, 2, 3}), &resp);
  EXPECT_EQ(s.message(),
            "keys64: index \"ids32\" has uint32 keys; send them in keys (got 24 bytes of uint64 "
            "keys)");
  // Both widths set: the one that does not fit is named.
  v1::LookupRequest both = Lookup64("ids", {1});
  both.mutable_keys()->mutable_values()->add_v(1);
  EXPECT_THAT(ops_->Lookup(both, &resp).message(), HasSubstr("keys: index \"ids\" has uint64"));
  // Neither set: the missing column is the index's.
  v1::LookupRequest none;
  none.set_index("ids");
  EXPECT_THAT(ops_->Lookup(none, &resp).message(),
              HasSubstr("keys64: neither keys64.packed nor keys64.values is set"));
  none.set_index("ids32");
  EXPECT_THAT(ops_->Lookup(none, &resp).message(),
              HasSubstr("keys: neither keys.packed nor keys.values is set"));

  // Join, both ways, in the second batch.
  v1::JoinRequest join;
  join.set_index("ids");
  *join.add_batches()->mutable_keys64()->mutable_packed() =
      PackColumn<uint64_t>(std::vector<uint64_t>{1});
  join.add_batches()->mutable_keys()->mutable_values()->add_v(1);
  v1::JoinResponse jr;
  s = ops_->Join(join, &jr);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "batches[1].keys: index \"ids\" has uint64 keys; send them in batches[1].keys64 (got 4 "
            "bytes of uint32 keys)");
  join.set_index("ids32");
  join.mutable_batches(1)->clear_keys();
  *join.mutable_batches(1)->mutable_keys64()->mutable_packed() = std::string(8, '\0');
  join.mutable_batches(0)->clear_keys64();
  join.mutable_batches(0)->mutable_keys()->mutable_values()->add_v(1);
  s = ops_->Join(join, &jr);
  EXPECT_EQ(s.message(),
            "batches[1].keys64: index \"ids32\" has uint32 keys; send them in batches[1].keys (got "
            "8 bytes of uint64 keys)");
  // No rejected batch is counted in the query metrics.
  const std::string text = testing::Render(*metrics_.registry());
  EXPECT_THAT(text, HasSubstr("gpujoin_query_rows_total{index=\"ids\",op=\"lookup\"} 0"));
  EXPECT_THAT(text, HasSubstr("gpujoin_query_rows_total{index=\"ids32\",op=\"join\"} 0"));
}

TEST_F(KeyTypeTest, PackedWideColumnsOfPartialRowsAreRefusedNamingTheLength) {
  v1::BuildIndexRequest odd;
  odd.mutable_chunk()->mutable_keys64()->set_packed(std::string(12, 'x'));
  auto built = Build({Spec("ids", v1::KEY_TYPE_UINT64), odd});
  EXPECT_EQ(built.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(built.status().message(),
            "chunks[0].keys64.packed: byte length 12 is not a multiple of 8 (the element size)");

  ASSERT_TRUE(Build({Spec("ids", v1::KEY_TYPE_UINT64), Chunk64({1})}).ok());
  v1::LookupRequest req;
  req.set_index("ids");
  req.mutable_keys64()->set_packed(std::string(20, 'x'));
  v1::LookupResponse resp;
  EXPECT_EQ(ops_->Lookup(req, &resp).message(),
            "keys64.packed: byte length 20 is not a multiple of 8 (the element size)");
  // Malformed whatever the registry holds.
  req.set_index("nope");
  EXPECT_EQ(ops_->Lookup(req, &resp).code(), absl::StatusCode::kInvalidArgument);
  v1::JoinRequest join;
  join.set_index("ids");
  join.add_batches()->mutable_keys64()->set_packed(std::string(9, 'x'));
  v1::JoinResponse jr;
  EXPECT_EQ(ops_->Join(join, &jr).message(),
            "batches[0].keys64.packed: byte length 9 is not a multiple of 8 (the element size)");
  // Both forms of one 64-bit column.
  v1::BuildIndexRequest both = Chunk64({1});
  both.mutable_chunk()->mutable_keys64()->mutable_values()->add_v(2);
  EXPECT_THAT(Build({Spec("x", v1::KEY_TYPE_UINT64), both}).status().message(),
              HasSubstr("chunks[0].keys64: both chunks[0].keys64.packed (8 bytes) and "
                        "chunks[0].keys64.values (1 values) are set"));
}

TEST_F(KeyTypeTest, AKeyTypeThatIsNoneIsRefused) {
  v1::BuildIndexRequest spec = Spec("x", static_cast<v1::KeyType>(7));
  EXPECT_EQ(Build({spec}).status().message(),
            "spec.key_type: 7 is not a key type; set KEY_TYPE_UINT32 (the default), "
            "KEY_TYPE_UINT64 or KEY_TYPE_COLUMNS");
}

TEST_F(KeyTypeTest, IndexInfoListAndMetricsCarryTheKeyType) {
  ASSERT_TRUE(Build({Spec("wide", v1::KEY_TYPE_UINT64), Chunk64({1})}).ok());
  ASSERT_TRUE(Build({Spec("narrow", v1::KEY_TYPE_UNSPECIFIED), Chunk32({1})}).ok());
  v1::ListIndexesResponse list;
  ASSERT_TRUE(ops_->ListIndexes(&list).ok());
  ASSERT_EQ(list.indexes_size(), 2);
  EXPECT_EQ(list.indexes(0).name(), "narrow");
  EXPECT_EQ(list.indexes(0).key_type(), v1::KEY_TYPE_UINT32);  // never unspecified
  EXPECT_EQ(list.indexes(1).key_type(), v1::KEY_TYPE_UINT64);
  v1::DescribeIndexRequest d;
  d.set_name("wide");
  v1::DescribeIndexResponse described;
  ASSERT_TRUE(ops_->DescribeIndex(d, &described).ok());
  EXPECT_EQ(described.index().key_type(), v1::KEY_TYPE_UINT64);

  std::string text = testing::Render(*metrics_.registry());
  EXPECT_THAT(text, HasSubstr("gpujoin_index_info{index=\"wide\",key_type=\"uint64\"} 1"));
  EXPECT_THAT(text, HasSubstr("gpujoin_index_info{index=\"narrow\",key_type=\"uint32\"} 1"));

  // A rebuild with the other key type replaces the series; a drop removes it.
  v1::BuildIndexRequest rebuild = Spec("wide", v1::KEY_TYPE_UINT32);
  rebuild.mutable_spec()->set_replace(true);
  ASSERT_TRUE(Build({rebuild, Chunk32({1})}).ok());
  text = testing::Render(*metrics_.registry());
  EXPECT_THAT(text, HasSubstr("gpujoin_index_info{index=\"wide\",key_type=\"uint32\"} 1"));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("key_type=\"uint64\"")));
  v1::DropIndexRequest drop;
  drop.set_name("wide");
  v1::DropIndexResponse dropped;
  ASSERT_TRUE(ops_->DropIndex(drop, &dropped).ok());
  text = testing::Render(*metrics_.registry());
  EXPECT_THAT(text, ::testing::Not(HasSubstr("gpujoin_index_info{index=\"wide\"")));
  EXPECT_THAT(text, HasSubstr("gpujoin_index_info{index=\"narrow\",key_type=\"uint32\"} 1"));
}

// The budget charges a 64-bit index its own table bytes (Backend::IndexBytes of
// a uint64 spec) and a 64-bit build's staged keys at 8 bytes a row.
TEST_F(KeyTypeTest, BudgetAndStagedBytesCountEightByteKeys) {
  auto built = Build({Spec("w", v1::KEY_TYPE_UINT64, 1024), Chunk64({1, 2, 3})});
  ASSERT_TRUE(built.ok()) << built.status();
  engine::HashIndexSpec wide{1024, 0, engine::KeyType::kUint64};
  engine::HashIndexSpec narrow{1024, 0, engine::KeyType::kUint32};
  EXPECT_EQ((*built)->index->memory_bytes(), backend_->IndexBytes(wide));
  EXPECT_EQ(budget_->used_bytes(), backend_->IndexBytes(wide));
  EXPECT_GT(backend_->IndexBytes(wide), backend_->IndexBytes(narrow));

  // Staged input: 4096 keys of 8 bytes each are at least 32 KiB held.
  BuildSession session(ops_.get());
  ASSERT_TRUE(session.Add(Spec("s", v1::KEY_TYPE_UINT64, 8192)).ok());
  std::vector<uint64_t> keys(4096);
  for (uint64_t i = 0; i < keys.size(); ++i) keys[i] = (i << 32) | 1;
  ASSERT_TRUE(session.Add(Chunk64(keys)).ok());
  EXPECT_GE(session.staged_bytes(), 8 * keys.size());
  EXPECT_LT(session.staged_bytes(), 8 * keys.size() + 4096);
  std::atomic<bool> cancelled{false};
  auto s = session.Finish(cancelled);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ((*s)->index->build_statistics().unique_keys, keys.size());  // no truncation merges
  EXPECT_EQ(session.staged_bytes(), 0u);
}

TEST_F(KeyTypeTest, TheRefusedStagedBytesLimitNamesEightByteChunks) {
  ServerConfig config;
  config.max_build_staged_bytes = 64 << 10;
  MakeOperations(config);
  BuildSession session(ops_.get());
  ASSERT_TRUE(session.Add(Spec("s", v1::KEY_TYPE_UINT64, 1 << 14)).ok());
  // 6000 keys: 24 KB as uint32 but 48 KB as uint64; a second such chunk crosses 64 KiB.
  std::vector<uint64_t> keys(6000, 3);
  ASSERT_TRUE(session.Add(Chunk64(keys)).ok());
  const absl::Status s = session.Add(Chunk64(keys));
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(s.message(), HasSubstr("chunks[1]"));
  EXPECT_THAT(s.message(), HasSubstr("--max-build-staged-bytes=65536"));
}

// The Lookup bytes path takes `keys64.packed` too, with the same result as the
// protobuf path, and refuses the wrong width the same way.
TEST_F(KeyTypeTest, TheLookupBytesPathServesWideKeysLikeTheProtobufPath) {
  ASSERT_TRUE(Build({Spec("ids", v1::KEY_TYPE_UINT64), Chunk64(kWideKeys)}).ok());
  ASSERT_TRUE(Build({Spec("ids32", v1::KEY_TYPE_UINT32), Chunk32({5, 6})}).ok());
  for (const char* index : {"ids", "ids32"}) {
    SCOPED_TRACE(index);
    v1::LookupRequest req = Lookup64(index, {0x200000005ull, 5, 0x600000005ull, kEmpty64});
    req.set_want_probes(true);
    req.set_batch_id(9);
    const std::string bytes = req.SerializeAsString();
    auto wire = ScanLookupRequest(std::vector<grpc::Slice>{grpc::Slice(bytes)});
    ASSERT_TRUE(wire.has_value());
    EXPECT_EQ(wire->key_type, engine::KeyType::kUint64);
    EXPECT_EQ(wire->rows(), 4u);
    v1::LookupResponse expected;
    const absl::Status want = ops_->Lookup(req, &expected);
    PackedLookupResult result;
    const absl::Status got = ops_->LookupPacked(
        wire->fields, wire->key_type, wire->rows(), [&](uint8_t* dst) { wire->CopyKeys(dst); },
        &result);
    ASSERT_EQ(got.code(), want.code()) << got << " vs " << want;
    EXPECT_EQ(got.message(), want.message());
    if (!want.ok()) {
      EXPECT_THAT(want.message(), HasSubstr("keys64: index \"ids32\" has uint32 keys"));
      continue;
    }
    EXPECT_EQ(UnpackColumn<uint32_t>(expected.values()),
              (std::vector<uint32_t>{101, 102, 0xffffffffu, 0xffffffffu}));
    expected.set_batch_id(9);
    std::vector<grpc::Slice> slices;
    ASSERT_TRUE(SerializeLookupResponse(9, std::move(result)).Dump(&slices).ok());
    std::string flat;
    for (const auto& sl : slices) flat.append(reinterpret_cast<const char*>(sl.begin()), sl.size());
    EXPECT_EQ(flat, expected.SerializeAsString());
  }
  // A 32-bit fast-path request to the 64-bit index is refused like on the protobuf path.
  v1::LookupRequest narrow;
  narrow.set_index("ids");
  *narrow.mutable_keys()->mutable_packed() = PackColumn<uint32_t>(std::vector<uint32_t>{5, 6});
  const std::string bytes = narrow.SerializeAsString();
  auto wire = ScanLookupRequest(std::vector<grpc::Slice>{grpc::Slice(bytes)});
  ASSERT_TRUE(wire.has_value());
  EXPECT_EQ(wire->key_type, engine::KeyType::kUint32);
  PackedLookupResult result;
  const absl::Status got = ops_->LookupPacked(
      wire->fields, wire->key_type, wire->rows(), [&](uint8_t* dst) { wire->CopyKeys(dst); },
      &result);
  EXPECT_EQ(
      got.message(),
      "keys: index \"ids\" has uint64 keys; send them in keys64 (got 8 bytes of uint32 keys)");
  // keys and keys64 together, or keys64 of partial rows: left to protobuf.
  v1::LookupRequest both = Lookup64("ids", {5});
  both.mutable_keys()->set_packed(std::string(4, '\0'));
  const std::string both_bytes = both.SerializeAsString();
  EXPECT_FALSE(ScanLookupRequest(std::vector<grpc::Slice>{grpc::Slice(both_bytes)}).has_value());
  v1::LookupRequest odd;
  odd.set_index("ids");
  odd.mutable_keys64()->set_packed(std::string(12, '\0'));
  const std::string odd_bytes = odd.SerializeAsString();
  EXPECT_FALSE(ScanLookupRequest(std::vector<grpc::Slice>{grpc::Slice(odd_bytes)}).has_value());
}

}  // namespace
}  // namespace gpujoin::server
