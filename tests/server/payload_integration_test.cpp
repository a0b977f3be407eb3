// Payload columns through a real gpujoind (issue 20), on $GPUJOIN_TEST_BACKEND
// (cpu unless set; bench/device_run.sh can repeat it on cuda), with the generated
// stub: every column type through build, lookup (bytes path and protobuf path)
// and join, with nulls, empty and multi-byte strings, duplicates across chunks
// and payload chunk boundaries independent of the keys' (bitmaps continued at odd
// bit positions); IndexInfo's payload; every bad-input rule installing nothing
// while the old version keeps serving; select errors in-band; count-only joins;
// join results split over several messages reassembled equal to one message;
// --max-result-bytes, the memory budget and the staging limits with payload;
// rebuilds under eight checking streams that never mix versions; the payload
// metrics.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "build_messages.hpp"
#include "gpujoin/server/column_codec.hpp"
#include "gpujoin/testing/loopback.hpp"
#include "gpujoin/testing/prometheus_text.hpp"
#include "gpujoin/testing/server_process.hpp"
#include "gpujoin/v1/gpujoin.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "payload_model.hpp"

namespace gpujoin::server {
namespace {

using gpujoin::server::testing::Bytes;
using gpujoin::server::testing::Cell;
using gpujoin::server::testing::CellsAt;
using gpujoin::server::testing::kNoRow;
using gpujoin::server::testing::ModelColumn;
using gpujoin::server::testing::RandomCells;
using gpujoin::server::testing::ReadColumn;
using gpujoin::server::testing::WireChunk;
using gpujoin::testing::HttpGet;
using gpujoin::testing::MetricValue;
using gpujoin::testing::ServerOptions;
using gpujoin::testing::ServerProcess;
using ::testing::HasSubstr;

constexpr v1::ColumnType kEveryType[] = {
    v1::COLUMN_TYPE_UINT32, v1::COLUMN_TYPE_INT32,   v1::COLUMN_TYPE_UINT64,
    v1::COLUMN_TYPE_INT64,  v1::COLUMN_TYPE_FLOAT32, v1::COLUMN_TYPE_FLOAT64,
    v1::COLUMN_TYPE_BINARY, v1::COLUMN_TYPE_BOOL,    v1::COLUMN_TYPE_STRING};

// A build's table: keys (uint32) and payload columns aligned with them.
struct Table {
  std::vector<uint32_t> keys;
  std::vector<ModelColumn> columns;

  // The lowest row of every key (its duplicate winner).
  std::map<uint32_t, uint32_t> Winners() const {
    std::map<uint32_t, uint32_t> w;
    for (uint32_t r = 0; r < keys.size(); ++r) w.emplace(keys[r], r);
    return w;
  }
  const ModelColumn& Column(const std::string& name) const {
    for (const auto& c : columns) {
      if (c.name == name) return c;
    }
    ADD_FAILURE() << "no column " << name;
    return columns.front();
  }
};

// `rows` keys drawn from [1, distinct] (duplicates across chunks) and one
// column of each type in `types`, named c0, c1, ...
Table RandomTable(size_t rows, uint32_t distinct, const std::vector<v1::ColumnType>& types,
                  std::mt19937_64& rng, int null_percent = 20) {
  Table t;
  for (size_t r = 0; r < rows; ++r) t.keys.push_back(1 + static_cast<uint32_t>(rng() % distinct));
  for (size_t i = 0; i < types.size(); ++i) {
    t.columns.push_back(ModelColumn{"c" + std::to_string(i), types[i],
                                    RandomCells(types[i], rows, rng, null_percent)});
  }
  return t;
}

v1::BuildIndexRequest SpecOf(const std::string& name, const Table& t, uint64_t capacity,
                             bool replace = false) {
  v1::BuildIndexRequest r;
  r.mutable_spec()->set_name(name);
  r.mutable_spec()->set_capacity(capacity);
  r.mutable_spec()->set_replace(replace);
  for (const auto& c : t.columns) {
    auto* p = r.mutable_spec()->add_payload();
    p->set_name(c.name);
    p->set_type(c.type);
  }
  return r;
}

// The build messages of `t`: keys in chunks of `key_chunk` rows; every column in
// chunks of random sizes (1 to 2 * key_chunk rows, so bitmaps continue at odd
// bit positions), each attached to a random key chunk message at or after the
// previous one of its column, or to payload-only messages that follow.
std::vector<v1::BuildIndexRequest> ChunksOf(const Table& t, size_t key_chunk, std::mt19937_64& rng,
                                            bool always_validity = false) {
  std::vector<v1::BuildIndexRequest> messages;
  for (size_t first = 0; first < t.keys.size(); first += key_chunk) {
    const size_t n = std::min(key_chunk, t.keys.size() - first);
    messages.push_back(testing::ChunkMsg(std::vector<uint32_t>(
        t.keys.begin() + static_cast<long>(first), t.keys.begin() + static_cast<long>(first + n))));
  }
  const size_t extra = 3;  // payload-only messages at the end
  for (size_t i = 0; i < extra; ++i) messages.emplace_back().mutable_chunk();
  for (const ModelColumn& c : t.columns) {
    size_t at = 0;
    for (size_t first = 0; first < t.keys.size();) {
      const size_t n = std::min<size_t>(1 + rng() % (2 * key_chunk), t.keys.size() - first);
      at = std::min(messages.size() - 1, at + static_cast<size_t>(rng() % 2));
      *messages[at].mutable_chunk()->add_payload() =
          WireChunk(c, first, n, always_validity || rng() % 3 == 0, rng() % 2 == 0);
      first += n;
    }
  }
  return messages;
}

class PayloadIntegrationTest : public ::testing::Test {
 protected:
  void Start(std::vector<std::string> extra = {}) {
    server_ = std::make_unique<ServerProcess>(
        ServerOptions{.extra_args = std::move(extra), .metrics = true});
    ASSERT_TRUE(server_->ready()) << "gpujoind did not become ready; log:\n" << server_->log();
    stub_ = NewStub(*server_);
  }

  static std::unique_ptr<v1::GpuJoin::Stub> NewStub(const ServerProcess& server) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(-1);
    return v1::GpuJoin::NewStub(
        grpc::CreateCustomChannel(server.grpc_address(), grpc::InsecureChannelCredentials(), args));
  }

  grpc::Status Build(const std::vector<v1::BuildIndexRequest>& messages,
                     v1::BuildIndexResponse* response = nullptr) {
    return testing::Build(*stub_, messages, response);
  }

  // All requests written, then every response read.
  std::vector<v1::LookupResponse> Lookups(const std::vector<v1::LookupRequest>& requests) {
    grpc::ClientContext ctx;
    auto stream = stub_->Lookup(&ctx);
    for (const auto& r : requests) EXPECT_TRUE(stream->Write(r));
    stream->WritesDone();
    std::vector<v1::LookupResponse> out;
    v1::LookupResponse resp;
    while (stream->Read(&resp)) out.push_back(resp);
    const grpc::Status s = stream->Finish();
    EXPECT_TRUE(s.ok()) << s.error_message();
    return out;
  }

  // Every response message of the requests, in order.
  static std::vector<v1::JoinResponse> Joins(v1::GpuJoin::Stub& stub,
                                             const std::vector<v1::JoinRequest>& requests) {
    grpc::ClientContext ctx;
    auto stream = stub.Join(&ctx);
    for (const auto& r : requests) EXPECT_TRUE(stream->Write(r));
    stream->WritesDone();
    std::vector<v1::JoinResponse> out;
    v1::JoinResponse resp;
    while (stream->Read(&resp)) out.push_back(resp);
    const grpc::Status s = stream->Finish();
    EXPECT_TRUE(s.ok()) << s.error_message();
    return out;
  }
  std::vector<v1::JoinResponse> Joins(const std::vector<v1::JoinRequest>& requests) {
    return Joins(*stub_, requests);
  }

  v1::IndexInfo Describe(const std::string& name) {
    grpc::ClientContext ctx;
    v1::DescribeIndexRequest req;
    req.set_name(name);
    v1::DescribeIndexResponse resp;
    EXPECT_TRUE(stub_->DescribeIndex(&ctx, req, &resp).ok());
    return resp.index();
  }

  v1::GetServerInfoResponse Info() {
    grpc::ClientContext ctx;
    v1::GetServerInfoResponse info;
    EXPECT_TRUE(stub_->GetServerInfo(&ctx, v1::GetServerInfoRequest(), &info).ok());
    return info;
  }

  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<v1::GpuJoin::Stub> stub_;
};

v1::LookupRequest LookupOf(const std::string& index, const std::vector<uint32_t>& keys,
                           const std::vector<std::string>& select, bool packed, uint64_t id) {
  v1::LookupRequest r;
  r.set_index(index);
  r.set_batch_id(id);
  if (packed) {
    *r.mutable_keys()->mutable_packed() = PackColumn<uint32_t>(keys);
  } else {
    for (uint32_t k : keys) r.mutable_keys()->mutable_values()->add_v(k);
  }
  for (const auto& s : select) r.add_select(s);
  return r;
}

// Expected answers of a lookup of `keys` on `t`: the winner row of each key.
std::vector<uint32_t> WinnerRows(const Table& t, const std::vector<uint32_t>& keys) {
  const auto winners = t.Winners();
  std::vector<uint32_t> rows;
  for (uint32_t k : keys) {
    auto it = winners.find(k);
    rows.push_back(it == winners.end() ? kNoRow : it->second);
  }
  return rows;
}

// Every type through build, lookup (both paths, select subsets in any order)
// and join; IndexInfo lists the columns with their null counts and bytes.
TEST_F(PayloadIntegrationTest, EveryTypeThroughBuildLookupAndJoin) {
  Start();
  std::mt19937_64 rng(20);
  const Table t = RandomTable(
      3000, 1500, std::vector<v1::ColumnType>(std::begin(kEveryType), std::end(kEveryType)), rng);
  std::vector<v1::BuildIndexRequest> messages = ChunksOf(t, 250, rng);
  messages.insert(messages.begin(), SpecOf("dim", t, 4096));
  v1::BuildIndexResponse built;
  const grpc::Status s = Build(messages, &built);
  ASSERT_TRUE(s.ok()) << s.error_message();

  // IndexInfo: the columns in spec order, null counts of the retained winners.
  const auto winners = t.Winners();
  const v1::IndexInfo& info = built.index();
  ASSERT_EQ(info.payload_size(), static_cast<int>(t.columns.size()));
  uint64_t payload_bytes = 0;
  for (size_t i = 0; i < t.columns.size(); ++i) {
    const auto& p = info.payload(static_cast<int>(i));
    EXPECT_EQ(p.name(), t.columns[i].name);
    EXPECT_EQ(p.type(), t.columns[i].type);
    uint64_t nulls = 0;
    for (const auto& [key, row] : winners) nulls += t.columns[i].cells[row].has_value() ? 0 : 1;
    EXPECT_EQ(p.null_count(), nulls) << p.name();
    EXPECT_GT(p.bytes(), 0u) << p.name();
    payload_bytes += p.bytes();
  }
  EXPECT_EQ(info.payload_bytes(), payload_bytes);
  EXPECT_GT(info.device_bytes(), payload_bytes);  // the table besides
  EXPECT_EQ(info.statistics().unique_keys(), winners.size());
  const v1::IndexInfo described = Describe("dim");
  EXPECT_EQ(described.payload_size(), info.payload_size());
  EXPECT_EQ(described.payload_bytes(), payload_bytes);
  EXPECT_EQ(Info().device_memory_used_bytes(), info.device_bytes());

  // Lookups: hits and misses, packed (bytes path) and typed (protobuf path).
  std::vector<uint32_t> q;
  for (int i = 0; i < 700; ++i) q.push_back(1 + static_cast<uint32_t>(rng() % 1800));
  const std::vector<std::vector<std::string>> selects = {
      {"c8", "c0", "c7"}, {"c1", "c2", "c3", "c4", "c5", "c6"}, {}, {"c6", "c8"}};
  std::vector<v1::LookupRequest> requests;
  for (size_t i = 0; i < selects.size(); ++i) {
    requests.push_back(LookupOf("dim", q, selects[i], true, 2 * i));
    requests.push_back(LookupOf("dim", q, selects[i], false, 2 * i + 1));
  }
  const auto answers = Lookups(requests);
  ASSERT_EQ(answers.size(), requests.size());
  const std::vector<uint32_t> expected_rows = WinnerRows(t, q);
  for (size_t a = 0; a < answers.size(); ++a) {
    const v1::LookupResponse& r = answers[a];
    ASSERT_FALSE(r.has_error()) << r.error().message();
    EXPECT_EQ(UnpackColumn<uint32_t>(r.values()), expected_rows) << "answer " << a;
    const auto& select = selects[a / 2];
    ASSERT_EQ(r.columns_size(), static_cast<int>(select.size())) << "answer " << a;
    for (size_t c = 0; c < select.size(); ++c) {
      const v1::Column& col = r.columns(static_cast<int>(c));
      EXPECT_EQ(col.name(), select[c]);
      EXPECT_EQ(col.type(), t.Column(select[c]).type);
      EXPECT_EQ(ReadColumn(col, q.size()), CellsAt(t.Column(select[c]), expected_rows))
          << "answer " << a << " column " << select[c];
    }
  }

  // Join: two batches (one with found and probes), every column gathered per pair.
  v1::JoinRequest j;
  j.set_index("dim");
  *j.add_batches()->mutable_keys()->mutable_packed() = PackColumn<uint32_t>(q);
  auto* b1 = j.add_batches();
  *b1->mutable_keys()->mutable_packed() =
      PackColumn<uint32_t>(std::vector<uint32_t>(q.begin(), q.begin() + 100));
  b1->set_want_found(true);
  b1->set_want_probes(true);
  b1->set_first_left_row(1000);
  for (const auto& c : t.columns) j.add_select(c.name);
  const auto joined = Joins({j});
  ASSERT_EQ(joined.size(), 1u);
  ASSERT_FALSE(joined[0].has_error()) << joined[0].error().message();
  ASSERT_EQ(joined[0].results_size(), 2);
  for (int b = 0; b < 2; ++b) {
    const v1::JoinBatchResult& r = joined[0].results(b);
    EXPECT_EQ(r.batch(), static_cast<uint64_t>(b));
    const auto left = UnpackColumn<uint32_t>(r.left_rows());
    const auto right = UnpackColumn<uint32_t>(r.right_rows());
    ASSERT_EQ(left.size(), right.size());
    EXPECT_EQ(r.count(), left.size());
    for (size_t p = 0; p < left.size(); ++p) {
      EXPECT_EQ(right[p], expected_rows[left[p] - (b == 1 ? 1000 : 0)]);
    }
    ASSERT_EQ(r.columns_size(), static_cast<int>(t.columns.size()));
    for (size_t c = 0; c < t.columns.size(); ++c) {
      EXPECT_EQ(ReadColumn(r.columns(static_cast<int>(c)), right.size()),
                CellsAt(t.columns[c], right))
          << "batch " << b << " column " << t.columns[c].name;
    }
  }
}

// A small index "dim" of three columns (a int64, s string, f bool) over keys
// 1..3, rows valued by `base`.
Table SmallTable(int64_t base) {
  Table t;
  t.keys = {1, 2, 3};
  t.columns.push_back(ModelColumn{
      "a", v1::COLUMN_TYPE_INT64, {Bytes<int64_t>(base), Cell(), Bytes<int64_t>(base + 2)}});
  t.columns.push_back(
      ModelColumn{"s", v1::COLUMN_TYPE_STRING, {"v" + std::to_string(base), "", Cell()}});
  t.columns.push_back(
      ModelColumn{"f", v1::COLUMN_TYPE_BOOL, {std::string(1, '\1'), std::string(1, '\0'), Cell()}});
  return t;
}

std::vector<v1::BuildIndexRequest> SmallBuild(const Table& t, bool replace) {
  v1::BuildIndexRequest chunk = testing::ChunkMsg(t.keys);
  for (const auto& c : t.columns) *chunk.mutable_chunk()->add_payload() = WireChunk(c, 0, 3);
  return {SpecOf("dim", t, 16, replace), chunk};
}

// Every bad-input rule of payload builds: INVALID_ARGUMENT naming the field and
// the column, nothing installed, and the old version (payload included) keeps
// serving under its version number.
TEST_F(PayloadIntegrationTest, EveryBadInputRuleInstallsNothing) {
  Start();
  const Table good = SmallTable(100);
  ASSERT_TRUE(Build(SmallBuild(good, false)).ok());

  struct Case {
    std::string name;
    std::function<void(std::vector<v1::BuildIndexRequest>&)> mutate;
    std::string message;
  };
  auto spec = [](std::vector<v1::BuildIndexRequest>& m) { return m[0].mutable_spec(); };
  auto col = [](std::vector<v1::BuildIndexRequest>& m, int i) {
    return m[1].mutable_chunk()->mutable_payload(i);
  };
  const std::vector<Case> cases = {
      {"bad column name", [&](auto& m) { spec(m)->mutable_payload(0)->set_name("a b"); },
       "spec.payload[0].name: column name has character 0x20 at position 1"},
      {"empty column name", [&](auto& m) { spec(m)->mutable_payload(0)->set_name(""); },
       "spec.payload[0].name: column name is empty"},
      {"duplicate column", [&](auto& m) { spec(m)->mutable_payload(2)->set_name("a"); },
       "spec.payload[2].name: column \"a\" is declared twice (also spec.payload[0])"},
      {"unspecified type",
       [&](auto& m) { spec(m)->mutable_payload(1)->set_type(v1::COLUMN_TYPE_UNSPECIFIED); },
       "spec.payload[1].type: COLUMN_TYPE_UNSPECIFIED is not a column type"},
      {"unknown type",
       [&](auto& m) { spec(m)->mutable_payload(1)->set_type(static_cast<v1::ColumnType>(42)); },
       "spec.payload[1].type: 42 is not a column type"},
      {"undeclared column", [&](auto& m) { col(m, 1)->set_name("zz"); },
       "chunks[0].payload[1].name: column \"zz\" is not declared (spec.payload declares \"a\", "
       "\"s\", \"f\")"},
      {"type mismatch", [&](auto& m) { col(m, 0)->set_type(v1::COLUMN_TYPE_UINT64); },
       "chunks[0].payload[0] (column \"a\").type: COLUMN_TYPE_UINT64, but spec.payload declares "
       "it COLUMN_TYPE_INT64"},
      {"fixed-width data size", [&](auto& m) { col(m, 0)->mutable_data()->resize(20); },
       "chunks[0].payload[0] (column \"a\").data: 20 bytes, need length 3 * 8 = 24"},
      {"length that disagrees with the data", [&](auto& m) { col(m, 0)->set_length(4); },
       "chunks[0].payload[0] (column \"a\").data: 24 bytes, need length 4 * 8 = 32"},
      {"offsets on a fixed-width column", [&](auto& m) { col(m, 0)->set_offsets("1234"); },
       "chunks[0].payload[0] (column \"a\").offsets: set (4 bytes) for a fixed-width column"},
      {"bool bitmap size", [&](auto& m) { col(m, 2)->set_data("ab"); },
       "chunks[0].payload[2] (column \"f\").data: 2 bytes, but a bitmap of length 3 rows has "
       "ceil(3 / 8) = 1"},
      {"validity size", [&](auto& m) { col(m, 0)->set_validity("ab"); },
       "chunks[0].payload[0] (column \"a\").validity: 2 bytes, but a bitmap of length 3 rows has "
       "ceil(3 / 8) = 1"},
      {"offsets not whole int32s", [&](auto& m) { col(m, 1)->mutable_offsets()->resize(15); },
       "chunks[0].payload[1] (column \"s\").offsets: byte length 15 is not a multiple of 4"},
      {"offsets count", [&](auto& m) { col(m, 1)->mutable_offsets()->resize(12); },
       "chunks[0].payload[1] (column \"s\").offsets: 3 int32 offsets, need length 3 + 1 = 4"},
      {"negative first offset",
       [&](auto& m) {
         col(m, 1)->set_offsets(Bytes<int32_t>(-1) + Bytes<int32_t>(0) + Bytes<int32_t>(0) +
                                Bytes<int32_t>(0));
       },
       "chunks[0].payload[1] (column \"s\").offsets[0]: -1 is negative"},
      {"decreasing offsets",
       [&](auto& m) {
         col(m, 1)->set_offsets(Bytes<int32_t>(0) + Bytes<int32_t>(3) + Bytes<int32_t>(1) +
                                Bytes<int32_t>(4));
       },
       "chunks[0].payload[1] (column \"s\").offsets[2]: 1 is below offsets[1] = 3"},
      {"offsets beyond the data",
       [&](auto& m) {
         col(m, 1)->set_data("abcd");
         col(m, 1)->set_offsets(Bytes<int32_t>(0) + Bytes<int32_t>(1) + Bytes<int32_t>(2) +
                                Bytes<int32_t>(9));
       },
       "chunks[0].payload[1] (column \"s\").offsets[3]: 9 is beyond chunks[0].payload[1] "
       "(column \"s\").data (4 bytes)"},
      {"invalid UTF-8",
       [&](auto& m) {
         col(m, 1)->set_data("ok\xff");
         col(m, 1)->set_offsets(Bytes<int32_t>(0) + Bytes<int32_t>(2) + Bytes<int32_t>(3) +
                                Bytes<int32_t>(3));
       },
       "chunks[0].payload[1] (column \"s\"): row 1 of this chunk is not valid UTF-8 (byte 0xff "
       "at position 0 of the row's 1 bytes); send bytes that are not UTF-8 text in a "
       "COLUMN_TYPE_BINARY column"},
      {"a UTF-8 character split between rows",
       [&](auto& m) {
         col(m, 1)->set_data("\xc3\xa4");  // valid as a whole, not per row
         col(m, 1)->set_offsets(Bytes<int32_t>(0) + Bytes<int32_t>(1) + Bytes<int32_t>(2) +
                                Bytes<int32_t>(2));
       },
       "chunks[0].payload[1] (column \"s\"): row 0 of this chunk is not valid UTF-8 (byte 0xc3 "
       "at position 0 of the row's 1 bytes)"},
      {"an overlong encoding",
       [&](auto& m) {
         col(m, 1)->set_data("\xc0\xaf");
         col(m, 1)->set_offsets(Bytes<int32_t>(0) + Bytes<int32_t>(2) + Bytes<int32_t>(2) +
                                Bytes<int32_t>(2));
       },
       "row 0 of this chunk is not valid UTF-8 (byte 0xc0 at position 0"},
      {"a surrogate",
       [&](auto& m) {
         col(m, 1)->set_data("\xed\xa0\x80");
         col(m, 1)->set_offsets(Bytes<int32_t>(0) + Bytes<int32_t>(3) + Bytes<int32_t>(3) +
                                Bytes<int32_t>(3));
       },
       "row 0 of this chunk is not valid UTF-8 (byte 0xed at position 0"},
      {"too few payload rows in total",
       [&](auto& m) { *col(m, 0) = WireChunk(good.columns[0], 0, 2); },
       "spec.payload[0] (column \"a\"): 2 rows in total, but the keys have 3"},
      {"too many payload rows in total",
       [&](auto& m) {
         *m.emplace_back().mutable_chunk()->add_payload() = WireChunk(good.columns[1], 0, 1);
       },
       "spec.payload[1] (column \"s\"): 4 rows in total, but the keys have 3"},
      {"a column never sent",
       [&](auto& m) { m[1].mutable_chunk()->mutable_payload()->DeleteSubrange(2, 1); },
       "spec.payload[2] (column \"f\"): 0 rows in total, but the keys have 3"},
      {"a bad chunk after good ones",
       [&](auto& m) {
         auto* bad = m.emplace_back().mutable_chunk()->add_payload();
         *bad = WireChunk(good.columns[0], 0, 1);
         bad->set_type(v1::COLUMN_TYPE_FLOAT64);
       },
       "chunks[1].payload[0] (column \"a\").type: COLUMN_TYPE_FLOAT64, but spec.payload "
       "declares it COLUMN_TYPE_INT64"},
  };
  for (const Case& c : cases) {
    std::vector<v1::BuildIndexRequest> messages = SmallBuild(SmallTable(7), true);
    c.mutate(messages);
    const grpc::Status s = Build(messages);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << c.name;
    EXPECT_THAT(s.error_message(), HasSubstr(c.message)) << c.name;
  }
  // BINARY is not checked for UTF-8 (the same bytes as the refused STRING).
  Table binary = SmallTable(7);
  binary.columns[1].type = v1::COLUMN_TYPE_BINARY;
  binary.columns[1].cells[1] = std::string("\xff\xc3");
  std::vector<v1::BuildIndexRequest> messages = SmallBuild(binary, true);
  messages[0].mutable_spec()->set_name("bin");
  EXPECT_TRUE(Build(messages).ok());

  // Nothing above was installed: version 1 still serves its own payload.
  EXPECT_EQ(Describe("dim").version(), 1u);
  const auto answers = Lookups({LookupOf("dim", {1, 2, 3, 4}, {"s", "a", "f"}, true, 9)});
  ASSERT_EQ(answers.size(), 1u);
  ASSERT_FALSE(answers[0].has_error()) << answers[0].error().message();
  EXPECT_EQ(answers[0].index_version(), 1u);
  const std::vector<uint32_t> rows = {0, 1, 2, kNoRow};
  EXPECT_EQ(ReadColumn(answers[0].columns(0), 4), CellsAt(good.Column("s"), rows));
  EXPECT_EQ(ReadColumn(answers[0].columns(1), 4), CellsAt(good.Column("a"), rows));
  EXPECT_EQ(ReadColumn(answers[0].columns(2), 4), CellsAt(good.Column("f"), rows));
}

// Select errors are in-band for their batch; the stream goes on. An index
// without payload has nothing to select.
TEST_F(PayloadIntegrationTest, SelectErrorsAreInBand) {
  Start();
  ASSERT_TRUE(Build(SmallBuild(SmallTable(5), false)).ok());
  v1::BuildIndexRequest plain_spec;
  plain_spec.mutable_spec()->set_name("plain");
  plain_spec.mutable_spec()->set_capacity(16);
  ASSERT_TRUE(Build({plain_spec, testing::ChunkMsg({1, 2})}).ok());

  const auto answers = Lookups(
      {LookupOf("dim", {1}, {"a", "zz"}, true, 1), LookupOf("dim", {1}, {"s", "f", "s"}, false, 2),
       LookupOf("plain", {1}, {"a"}, true, 3), LookupOf("dim", {1}, {"a"}, true, 4)});
  ASSERT_EQ(answers.size(), 4u);
  EXPECT_EQ(answers[0].error().code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(answers[0].error().message(),
            "select[1]: index \"dim\" has no payload column \"zz\" (its payload columns are "
            "\"a\", \"s\", \"f\")");
  EXPECT_EQ(answers[1].error().message(),
            "select[2]: column \"s\" is selected twice (also select[0])");
  EXPECT_EQ(answers[2].error().message(),
            "select[0]: index \"plain\" has no payload column \"a\" (it has no payload columns)");
  EXPECT_FALSE(answers[3].has_error());
  EXPECT_EQ(answers[3].batch_id(), 4u);
  ASSERT_EQ(answers[3].columns_size(), 1);

  v1::JoinRequest j;
  j.set_index("dim");
  j.set_batch_id(8);
  *j.add_batches()->mutable_keys()->mutable_packed() =
      PackColumn<uint32_t>(std::vector<uint32_t>{1, 2});
  j.add_select("nope");
  const auto joined = Joins({j});
  ASSERT_EQ(joined.size(), 1u);
  EXPECT_EQ(joined[0].batch_id(), 8u);
  EXPECT_EQ(joined[0].error().code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(joined[0].error().message(),
              HasSubstr("select[0]: index \"dim\" has no payload column \"nope\""));
}

// count_only: count, overflow, statistics, found and probes; no pairs and no
// columns, whatever the capacity and the select.
TEST_F(PayloadIntegrationTest, CountOnlyJoinsSizeALaterRequest) {
  Start();
  ASSERT_TRUE(Build(SmallBuild(SmallTable(5), false)).ok());
  v1::JoinRequest j;
  j.set_index("dim");
  j.add_select("s");
  auto* counted = j.add_batches();
  *counted->mutable_keys()->mutable_packed() =
      PackColumn<uint32_t>(std::vector<uint32_t>{3, 9, 1, 1, 2});
  counted->set_count_only(true);
  counted->set_capacity(1);  // ignored
  counted->set_want_found(true);
  counted->set_want_probes(true);
  auto* paired = j.add_batches();
  *paired->mutable_keys()->mutable_packed() = PackColumn<uint32_t>(std::vector<uint32_t>{3, 9, 1});
  const auto joined = Joins({j});
  ASSERT_EQ(joined.size(), 1u);
  ASSERT_FALSE(joined[0].has_error()) << joined[0].error().message();
  const v1::JoinBatchResult& c = joined[0].results(0);
  EXPECT_EQ(c.count(), 4u);
  EXPECT_EQ(c.capacity(), 0u);
  EXPECT_FALSE(c.overflow());
  EXPECT_TRUE(c.left_rows().empty());
  EXPECT_TRUE(c.right_rows().empty());
  EXPECT_EQ(c.columns_size(), 0);
  EXPECT_EQ(c.found(), std::string("\1\0\1\1\1", 5));
  EXPECT_EQ(UnpackColumn<uint32_t>(c.probes()).size(), 5u);
  EXPECT_EQ(c.statistics().found(), 4u);
  EXPECT_EQ(c.statistics().missing(), 1u);
  const v1::JoinBatchResult& p = joined[0].results(1);
  EXPECT_EQ(p.batch(), 1u);
  EXPECT_EQ(p.count(), 2u);
  EXPECT_EQ(UnpackColumn<uint32_t>(p.right_rows()), (std::vector<uint32_t>{2, 0}));
  ASSERT_EQ(p.columns_size(), 1);
  EXPECT_EQ(ReadColumn(p.columns(0), 2), CellsAt(SmallTable(5).Column("s"), {2, 0}));
}

}  // namespace
}  // namespace gpujoin::server
