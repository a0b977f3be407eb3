// The C++ client library (gpujoin::client::Client) against a real gpujoind
// (CPU backend, token auth): typed results, pipelined streams in order,
// chunked builds with progress, in-band batch errors, cancellation from the
// sink and the caller, deadlines, and error codes carried from the server.
#include "gpujoin/client/client.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <limits>
#include <random>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "gpujoin/testing/server_process.hpp"
#include "gpujoin/testing/subprocess.hpp"

namespace {

namespace fs = std::filesystem;
using gpujoin::client::Client;
using gpujoin::testing::ServerProcess;
namespace gc = gpujoin::client;

const std::string kToken = "client-test-token";

class ClientTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new ServerProcess({.token = kToken}); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    ASSERT_FALSE(server_->grpc_address().empty()) << "gpujoind did not start:\n" << server_->log();
    client_ = MakeClient(kToken);
    ASSERT_NE(client_, nullptr);
  }

  static std::unique_ptr<Client> MakeClient(const std::string& token) {
    gc::ConnectOptions o;
    o.address = server_->grpc_address();
    o.token = token;
    o.deadline = std::chrono::seconds(60);
    auto c = Client::Connect(o);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *std::move(c) : nullptr;
  }

  // Builds `name` from keys with generated row-ID values.
  void Build(const std::string& name, const std::vector<uint32_t>& keys) {
    gc::IndexSpec spec;
    spec.name = name;
    spec.expected_rows = keys.size();
    spec.replace = true;
    auto info = client_->BuildIndexFromColumns(spec, keys, {}, 1000);
    ASSERT_TRUE(info.ok()) << info.status();
  }

  static inline ServerProcess* server_ = nullptr;
  std::unique_ptr<Client> client_;
};

std::vector<uint32_t> RandomKeys(size_t n, uint32_t seed, uint32_t max = 0xfffffffe) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<uint32_t> d(0, max);
  std::vector<uint32_t> v(n);
  for (auto& k : v) k = d(rng);
  return v;
}

TEST(ClientConnect, RejectsBadOptionsBeforeContactingAServer) {
  gc::ConnectOptions o;
  o.address = "";
  EXPECT_EQ(Client::Connect(o).status().code(), absl::StatusCode::kInvalidArgument);
  o.address = "127.0.0.1:1";
  o.tls_ca_file = "/nonexistent/ca.pem";
  auto c = Client::Connect(o);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("/nonexistent/ca.pem"), std::string::npos);
}

TEST(ClientOps, NamesRoundTrip) {
  for (auto op : {gc::AggregateOp::kCount, gc::AggregateOp::kSum, gc::AggregateOp::kMin,
                  gc::AggregateOp::kMax, gc::AggregateOp::kMean}) {
    EXPECT_EQ(*gc::ParseAggregateOp(gc::AggregateOpName(op)), op);
  }
  EXPECT_EQ(gc::ParseAggregateOp("avg").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(gc::HealthStateName(gc::HealthState::kServing), "SERVING");
}

TEST_F(ClientTest, HealthAndServerInfo) {
  EXPECT_EQ(*client_->Health(), gc::HealthState::kServing);
  auto info = client_->GetServerInfo();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->backend, "cpu");
  EXPECT_TRUE(info->serving);
  EXPECT_GT(info->max_message_bytes, 0u);
}

TEST_F(ClientTest, ServerErrorsKeepTheirCodeAndMessage) {
  auto d = client_->DescribeIndex("client_test_missing");
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(d.status().message().find("client_test_missing"), std::string::npos);
  auto bad = MakeClient("not-the-token");
  auto l = bad->ListIndexes();
  EXPECT_EQ(l.status().code(), absl::StatusCode::kUnauthenticated) << l.status();
}

// 64-bit keys through the client: a uint64 index built from int64 IDs
// (their bit patterns) answers lookups and joins on uint64 and int64 columns;
// keys that differ only in their high 32 bits stay distinct; a chunk of the
// wrong width is refused before it is sent, and a lookup of the wrong width by
// the server, naming the field and the key type.
TEST_F(ClientTest, SixtyFourBitKeysBuildLookupAndJoin) {
  const std::vector<int64_t> ids = {-1, INT64_MIN, INT64_MAX, (int64_t{1} << 32) | 7, 7, -7};
  gc::IndexSpec spec;
  spec.name = "client_wide";
  spec.expected_rows = ids.size();
  spec.replace = true;
  spec.key_type = gc::KeyType::kUint64;
  auto info = client_->BuildIndexFromColumns(spec, ids, {}, 4);  // chunks of 4 and 2 rows
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->key_type, gc::KeyType::kUint64);
  // -1 is an ordinary int64 ID, but its bit pattern is the reserved key of a
  // uint64 index: counted invalid (and never found).
  EXPECT_EQ(info->statistics.unique_keys, ids.size() - 1);
  EXPECT_EQ(info->statistics.invalid_rows, 1u);
  auto described = client_->DescribeIndex("client_wide");
  ASSERT_TRUE(described.ok());
  EXPECT_EQ(described->key_type, gc::KeyType::kUint64);
  EXPECT_EQ(gc::KeyTypeName(described->key_type), "uint64");

  // int64 queries; the same keys as uint64 bit patterns, in batches of 2.
  const std::vector<int64_t> q = {7,  (int64_t{2} << 32) | 7, INT64_MIN,
                                  -7, (int64_t{1} << 32) | 7, -1};
  auto l = client_->LookupAll("client_wide", q, 2);
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(l->values, (std::vector<uint32_t>{4, 0xffffffffu, 1, 5, 3, 0xffffffffu}));
  std::vector<uint64_t> bits(q.begin(), q.end());
  auto lb = client_->LookupAll("client_wide", bits, 3);
  ASSERT_TRUE(lb.ok()) << lb.status();
  EXPECT_EQ(lb->values, l->values);
  auto j = client_->JoinAll("client_wide", q, 2);
  ASSERT_TRUE(j.ok()) << j.status();
  EXPECT_EQ(j->left_rows, (std::vector<uint32_t>{0, 2, 3, 4}));
  EXPECT_EQ(j->right_rows, (std::vector<uint32_t>{4, 1, 5, 3}));

  // A uint32 chunk for a uint64 spec: refused before anything is sent.
  const std::vector<uint32_t> narrow = {1, 2, 3};
  auto wrong = client_->BuildIndexFromColumns(spec, narrow);
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(wrong.status().message(),
            "build chunk 0 has uint32 keys but the index is declared with uint64 keys "
            "(IndexSpec::key_type)");
  // A uint32 lookup of the uint64 index: the server's error, naming field and bytes.
  auto bad = client_->LookupAll("client_wide", narrow);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(),
            "keys: index \"client_wide\" has uint64 keys; send them in keys64 (got 12 bytes of "
            "uint32 keys)");
  // Keys views: size, bytes and subspans keep the type.
  const gc::Keys k(ids);
  EXPECT_EQ(k.type(), gc::KeyType::kUint64);
  EXPECT_EQ(k.size_bytes(), 48u);
  EXPECT_EQ(k.subspan(4).size(), 2u);
  EXPECT_EQ(k.subspan(4).u64()[1], static_cast<uint64_t>(int64_t{-7}));
  EXPECT_TRUE(k.u32().empty());
  EXPECT_EQ(gc::Keys(narrow).type(), gc::KeyType::kUint32);
}

TEST_F(ClientTest, ChunkedBuildWithExplicitValuesAndDifferentBoundaries) {
  // Keys arrive as [3 rows][4 rows]; values as [5 rows][2 rows]; key 7 repeats
  // (row 1 and row 5): the lowest source row's value wins.
  const std::vector<uint32_t> keys = {10, 7, 30, 40, 50, 7, 70};
  const std::vector<uint32_t> values = {100, 101, 102, 103, 104, 105, 106};
  std::vector<gc::BuildChunk> chunks(2);
  chunks[0].keys = std::span(keys).subspan(0, 3);
  chunks[0].values = std::span(values).subspan(0, 5);
  chunks[1].keys = std::span(keys).subspan(3, 4);
  chunks[1].values = std::span(values).subspan(5, 2);
  size_t next = 0;
  std::vector<gc::Progress> seen;
  gc::IndexSpec spec;
  spec.name = "client_chunks";
  spec.capacity = 16;
  spec.explicit_values = true;
  spec.replace = true;
  auto info = client_->BuildIndex(
      spec,
      [&]() -> std::optional<gc::BuildChunk> {
        if (next == chunks.size()) return std::nullopt;
        return chunks[next++];
      },
      [&](const gc::Progress& p) { seen.push_back(p); }, keys.size());
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->rows, 7u);
  EXPECT_EQ(info->capacity, 16u);
  EXPECT_EQ(info->statistics.unique_keys, 6u);
  EXPECT_EQ(info->statistics.duplicate_rows, 1u);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].rows_sent, 3u);
  EXPECT_EQ(seen[1].rows_sent, 7u);
  EXPECT_EQ(seen[1].bytes_sent, 7u * 4 * 2);
  EXPECT_EQ(seen[1].total_rows, 7u);

  const std::vector<uint32_t> probe = {7, 70, 8, 0xffffffffu, 10};
  auto r = client_->LookupAll("client_chunks", probe, 2);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->values, (std::vector<uint32_t>{101, 106, 0xffffffffu, 0xffffffffu, 100}));
  EXPECT_EQ(r->found, (std::vector<uint8_t>{1, 1, 0, 0, 1}));
  EXPECT_EQ(r->statistics.found, 3u);
  EXPECT_EQ(r->statistics.missing, 2u);
}

TEST_F(ClientTest, PipelinedLookupAnswersEveryBatchInOrder) {
  const auto keys = RandomKeys(20000, 1);
  Build("client_pipeline", keys);
  std::unordered_map<uint32_t, uint32_t> first;
  for (uint32_t i = 0; i < keys.size(); ++i) first.emplace(keys[i], i);
  // 60 batches of varying size, half present keys, half random.
  const auto noise = RandomKeys(30000, 2);
  std::vector<std::vector<uint32_t>> batches;
  std::mt19937 rng(3);
  for (int b = 0; b < 60; ++b) {
    std::vector<uint32_t> q(rng() % 700);
    for (size_t i = 0; i < q.size(); ++i) {
      q[i] = (i % 2) ? keys[rng() % keys.size()] : noise[rng() % noise.size()];
    }
    batches.push_back(std::move(q));
  }
  size_t next = 0;
  uint64_t expected_id = 0;
  gc::StreamOptions opts;
  opts.max_in_flight = 8;
  absl::Status st = client_->Lookup(
      "client_pipeline",
      [&]() -> std::optional<gc::LookupBatch> {
        if (next == batches.size()) return std::nullopt;
        gc::LookupBatch b;
        b.keys = batches[next++];
        b.want_probes = true;
        return b;
      },
      [&](gc::LookupResult&& r) -> absl::Status {
        EXPECT_TRUE(r.error.ok()) << r.error;
        EXPECT_EQ(r.batch_id, expected_id);
        const auto& q = batches[expected_id++];
        EXPECT_EQ(r.values.size(), q.size());
        EXPECT_EQ(r.probes.size(), q.size());
        uint64_t found = 0;
        for (size_t i = 0; i < q.size() && i < r.values.size(); ++i) {
          auto it = first.find(q[i]);
          const bool hit = it != first.end();
          found += hit;
          EXPECT_EQ(r.found[i], hit ? 1 : 0);
          EXPECT_EQ(r.values[i], hit ? it->second : 0xffffffffu);
        }
        EXPECT_EQ(r.statistics.found, found);
        EXPECT_GT(r.latency.count(), 0);
        return absl::OkStatus();
      },
      opts);
  EXPECT_TRUE(st.ok()) << st;
  EXPECT_EQ(expected_id, batches.size());
}

TEST_F(ClientTest, SinkErrorCancelsAnEndlessStream) {
  Build("client_cancel", {1, 2, 3});
  const std::vector<uint32_t> q = {1, 2, 3, 4};
  std::atomic<uint64_t> produced{0};
  int answered = 0;
  absl::Status st = client_->Lookup(
      "client_cancel",
      [&]() -> std::optional<gc::LookupBatch> {
        ++produced;
        return gc::LookupBatch{q};
      },
      [&](gc::LookupResult&&) -> absl::Status {
        if (++answered == 3) return absl::AbortedError("enough");
        return absl::OkStatus();
      });
  EXPECT_EQ(st.code(), absl::StatusCode::kAborted) << st;
  EXPECT_EQ(st.message(), "enough");
  EXPECT_EQ(answered, 3);

  // The caller's cancel flag ends a stream too.
  std::atomic<int> calls{0};
  gc::StreamOptions opts;
  opts.cancelled = [&] { return calls.load() >= 5; };
  st = client_->Lookup(
      "client_cancel",
      [&]() -> std::optional<gc::LookupBatch> {
        ++calls;
        return gc::LookupBatch{q};
      },
      [](gc::LookupResult&&) { return absl::OkStatus(); }, opts);
  EXPECT_EQ(st.code(), absl::StatusCode::kCancelled) << st;
}

TEST_F(ClientTest, DeadlineEndsAStreamThatDoesNotFinishInTime) {
  Build("client_deadline", {1});
  gc::StreamOptions opts;
  opts.deadline = std::chrono::milliseconds(50);
  const std::vector<uint32_t> q = {1};
  bool sent = false;
  absl::Status st = client_->Lookup(
      "client_deadline",
      [&]() -> std::optional<gc::LookupBatch> {
        // Never finish: keep the stream open well past its deadline.
        if (sent) std::this_thread::sleep_for(std::chrono::milliseconds(400));
        sent = true;
        return gc::LookupBatch{q};
      },
      [](gc::LookupResult&&) { return absl::OkStatus(); }, opts);
  EXPECT_EQ(st.code(), absl::StatusCode::kDeadlineExceeded) << st;
}

TEST_F(ClientTest, JoinPairsAndBatchJoin) {
  const std::vector<uint32_t> right = {5, 6, 7, 8};
  Build("client_join", right);  // values = row IDs 0..3
  const std::vector<uint32_t> left = {8, 1, 5, 5, 9, 6};
  auto all = client_->JoinAll("client_join", left, 4);
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->left_rows, (std::vector<uint32_t>{0, 2, 3, 5}));
  EXPECT_EQ(all->right_rows, (std::vector<uint32_t>{3, 0, 0, 1}));
  EXPECT_EQ(all->count, 4u);
  EXPECT_FALSE(all->overflow);

  // One request, two left batches, the second with a too-small capacity.
  const std::vector<uint32_t> a = {6, 7}, b = {5, 6, 7};
  bool sent = false;
  std::vector<gc::JoinResult> got;
  absl::Status st = client_->Join(
      "client_join",
      [&]() -> std::optional<gc::JoinBatch> {
        if (sent) return std::nullopt;
        sent = true;
        gc::JoinBatch jb;
        gc::JoinLeft l1;
        l1.keys = a;
        gc::JoinLeft l2;
        l2.keys = b;
        l2.first_left_row = 100;
        l2.capacity = 2;
        l2.want_found = true;
        jb.lefts = {l1, l2};
        return jb;
      },
      [&](gc::JoinResult&& r) {
        got.push_back(std::move(r));
        return absl::OkStatus();
      });
  ASSERT_TRUE(st.ok()) << st;
  ASSERT_EQ(got.size(), 1u);
  ASSERT_EQ(got[0].results.size(), 2u);
  EXPECT_EQ(got[0].results[0].right_rows, (std::vector<uint32_t>{1, 2}));
  const auto& second = got[0].results[1];
  EXPECT_EQ(second.count, 3u);
  EXPECT_EQ(second.capacity, 2u);
  EXPECT_TRUE(second.overflow);
  EXPECT_EQ(second.left_rows, (std::vector<uint32_t>{100, 101}));
  EXPECT_EQ(second.found, (std::vector<uint8_t>{1, 1, 1}));
}

TEST_F(ClientTest, AggregateAllAccumulatesOverBatches) {
  const std::vector<uint32_t> keys = {0, 1, 2, 1, 0, 7, 1};  // 7 is out of range: ignored
  const std::vector<float> values = {1, 2, 3, 4, NAN, 9, 8};
  const std::vector<uint32_t> mask = {1, 1, 1, 1, 1, 1, 0};
  auto sum = client_->AggregateAll({gc::AggregateOp::kSum, 3}, keys,
                                    std::span<const float>(values), {}, mask, 2);
  ASSERT_TRUE(sum.ok()) << sum.status();
  EXPECT_EQ(sum->total_values, (std::vector<float>{1, 6, 3}));
  EXPECT_EQ(sum->rows, keys.size());
  auto count = client_->AggregateAll({gc::AggregateOp::kCount, 4}, keys, {}, {}, {}, 3);
  ASSERT_TRUE(count.ok()) << count.status();
  EXPECT_EQ(count->total_counts, (std::vector<uint32_t>{2, 3, 1, 0}));
  auto bad = client_->AggregateAll({gc::AggregateOp::kMean, 3}, keys, {}, {});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  const std::vector<int64_t> ints = {1, 2, 3, 4, 5, 6, 7};
  auto mistyped =
      client_->AggregateAll({gc::AggregateOp::kSum, 3}, keys, std::span<const int64_t>(ints));
  EXPECT_EQ(mistyped.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(mistyped.status().message().find(
                "values hold int64 but the spec's value_type is float32"),
            std::string::npos)
      << mistyped.status();
}

// Typed values over several batches: exact int64 sums (2^53 + 1 is not
// a double), the stream's sticky overflow flag (INT64_MAX + 1 across batches),
// exact uint64 counts, null empty min groups and uint64 above INT64_MAX.
TEST_F(ClientTest, AggregateAllTypedValuesSumExactlyOverBatches) {
  const int64_t big = (int64_t{1} << 53) + 1;
  const int64_t max = std::numeric_limits<int64_t>::max();
  const std::vector<uint32_t> keys = {0, 1, 0, 2, 2, 9};  // 9 is out of range
  const std::vector<int64_t> v = {big, -4, big, max, 1, 5};
  gc::AggregateSpec spec{gc::AggregateOp::kSum, 4};
  spec.value_type = gc::ColumnType::kInt64;
  auto sum = client_->AggregateAll(spec, keys, std::span<const int64_t>(v), {}, {}, 2);
  ASSERT_TRUE(sum.ok()) << sum.status();
  EXPECT_EQ(sum->result_type, gc::ColumnType::kInt64);
  ASSERT_EQ(sum->total_typed_values.size(), 4u);
  EXPECT_EQ(static_cast<int64_t>(sum->total_typed_values[0]), 2 * big);
  EXPECT_EQ(static_cast<int64_t>(sum->total_typed_values[1]), -4);
  EXPECT_EQ(sum->total_overflow, (std::vector<uint8_t>{0, 0, 1, 0}));  // max + 1 in batch 2
  EXPECT_EQ(sum->total_overflow_groups, 1u);
  EXPECT_EQ(sum->total_counts64, (std::vector<uint64_t>{2, 1, 2, 0}));
  EXPECT_EQ(sum->rows, keys.size());

  const std::vector<uint64_t> u = {uint64_t{1} << 63, 3, 7, 1, 2, 0};
  gc::AggregateSpec mx{gc::AggregateOp::kMax, 4};
  mx.value_type = gc::ColumnType::kUint64;
  auto top = client_->AggregateAll(mx, keys, std::span<const uint64_t>(u), {}, {}, 4);
  ASSERT_TRUE(top.ok()) << top.status();
  EXPECT_EQ(top->result_type, gc::ColumnType::kUint64);
  EXPECT_EQ(top->total_typed_values, (std::vector<uint64_t>{uint64_t{1} << 63, 3, 2, 0}));
  EXPECT_EQ(top->total_valid, (std::vector<uint8_t>{1, 1, 1, 0}));  // group 3 is empty
  EXPECT_TRUE(top->total_overflow.empty());

  // The values must be of the spec's type.
  auto wrong = client_->AggregateAll(spec, keys, std::span<const uint64_t>(u), {}, {}, 2);
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kInvalidArgument);
  // Counts as uint64 on request.
  gc::AggregateSpec count{gc::AggregateOp::kCount, 3};
  count.want_counts64 = true;
  auto c = client_->AggregateAll(count, keys, {}, {}, {}, 4);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->total_counts64, (std::vector<uint64_t>{2, 1, 2}));
}

TEST_F(ClientTest, HashAllIsIndependentOfBatchingAndSlicing) {
  // A uint64 column with nulls and a string column, 101 rows.
  const size_t n = 101;
  std::vector<uint64_t> ids(n);
  std::vector<uint8_t> id_valid((n + 7) / 8, 0);
  std::string text;
  std::vector<int32_t> offsets = {0};
  for (size_t i = 0; i < n; ++i) {
    ids[i] = i * 0x9e3779b97f4a7c15ull;
    if (i % 7 != 3) id_valid[i / 8] |= 1u << (i % 8);
    text += std::string(i % 5, static_cast<char>('a' + i % 26));
    offsets.push_back(static_cast<int32_t>(text.size()));
  }
  auto column = [&](uint64_t offset, uint64_t length) {
    gc::HashColumn a;
    a.type = gc::ColumnType::kUint64;
    a.data = std::span(reinterpret_cast<const uint8_t*>(ids.data()), n * 8);
    a.validity = id_valid;
    a.offset = offset;
    a.length = length;
    gc::HashColumn b;
    b.type = gc::ColumnType::kBinary;
    b.data = std::span(reinterpret_cast<const uint8_t*>(text.data()), text.size());
    b.offsets = offsets;
    b.offset = offset;
    b.length = length;
    return std::vector<gc::HashColumn>{a, b};
  };
  for (uint32_t bits : {32u, 64u}) {
    auto whole = client_->HashAll(column(0, n), bits, 1 << 20);
    ASSERT_TRUE(whole.ok()) << whole.status();
    ASSERT_EQ(whole->hashes.size(), n);
    EXPECT_EQ(whole->null_count, 14u);  // rows 3, 10, ..., 94
    for (size_t i = 0; i < n; ++i) EXPECT_EQ(whole->Valid(i), i % 7 != 3) << i;
    // Odd batch sizes cut bitmaps and offsets at non-byte boundaries.
    auto batched = client_->HashAll(column(0, n), bits, 13);
    ASSERT_TRUE(batched.ok()) << batched.status();
    EXPECT_EQ(batched->hashes, whole->hashes);
    EXPECT_EQ(batched->validity, whole->validity);
    // Hashing a slice equals slicing the hash.
    auto slice = client_->HashAll(column(5, 90), bits, 11);
    ASSERT_TRUE(slice.ok()) << slice.status();
    for (size_t i = 0; i < 90; ++i) {
      EXPECT_EQ(slice->hashes[i], whole->hashes[i + 5]) << i;
      EXPECT_EQ(slice->Valid(i), whole->Valid(i + 5)) << i;
    }
    if (bits == 32) {
      for (uint64_t h : whole->hashes) EXPECT_LE(h, 0xffffffffull);
    }
  }
}

TEST_F(ClientTest, HashBatchErrorIsInBandAndTheStreamContinues) {
  const std::vector<uint32_t> a = {1, 2, 3};
  const std::vector<uint32_t> b = {1, 2};
  auto col = [](const std::vector<uint32_t>& v, uint64_t length) {
    gc::HashColumn c;
    c.type = gc::ColumnType::kUint32;
    c.data = std::span(reinterpret_cast<const uint8_t*>(v.data()), v.size() * 4);
    c.length = length;
    return c;
  };
  // Batch 1 has columns of different lengths: the server rejects that batch only.
  std::vector<gc::HashBatch> batches = {
      {{col(a, 3)}, 64}, {{col(a, 3), col(b, 2)}, 64}, {{col(b, 2)}, 32}};
  size_t next = 0;
  std::vector<gc::HashResult> got;
  absl::Status st = client_->Hash(
      [&]() -> std::optional<gc::HashBatch> {
        if (next == batches.size()) return std::nullopt;
        return batches[next++];
      },
      [&](gc::HashResult&& r) {
        got.push_back(std::move(r));
        return absl::OkStatus();
      });
  ASSERT_TRUE(st.ok()) << st;
  ASSERT_EQ(got.size(), 3u);
  EXPECT_TRUE(got[0].error.ok());
  EXPECT_EQ(got[0].hashes.size(), 3u);
  EXPECT_EQ(got[1].error.code(), absl::StatusCode::kInvalidArgument) << got[1].error;
  EXPECT_EQ(got[1].batch_id, 1u);
  EXPECT_TRUE(got[2].error.ok()) << got[2].error;
  EXPECT_EQ(got[2].bits, 32u);
  ASSERT_EQ(got[2].hashes.size(), 2u);
  EXPECT_EQ(got[2].hashes[0] >> 32, 0u);
}

// examples/client_example.cpp, the library's documented usage, runs cleanly.
TEST_F(ClientTest, ExampleProgramRuns) {
  gpujoin::testing::RunResult r =
      gpujoin::testing::RunProcess({GPUJOIN_CLIENT_EXAMPLE_BIN, server_->grpc_address(), kToken});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("index client_example v"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("found 50000, missing 50000"), std::string::npos) << r.out;
}

}  // namespace

// ---------------------------------------------------------------- payload

namespace {

// Test payload of `rows` source rows: int64 with nulls, float64, bool and
// strings (empty ones, nulls, and long ones when `long_strings`).
struct PayloadData {
  std::vector<gc::Column> columns;

  explicit PayloadData(size_t rows, uint32_t seed, size_t long_strings = 0) {
    std::mt19937_64 rng(seed);
    gc::Column i("i", gc::ColumnType::kInt64), f("f", gc::ColumnType::kFloat64),
        b("b", gc::ColumnType::kBool), s("s", gc::ColumnType::kString);
    for (size_t r = 0; r < rows; ++r) {
      if (r % 5 == 3) {
        i.AppendNull();
      } else {
        i.Append(static_cast<int64_t>(rng()));
      }
      f.Append(static_cast<double>(r) / 3.0);
      b.AppendBool(rng() & 1);
      if (r % 7 == 2) {
        s.AppendNull();
      } else {
        const size_t len = long_strings ? rng() % long_strings : r % 4;
        EXPECT_TRUE(s.AppendString(std::string(len, static_cast<char>('a' + r % 26))).ok());
      }
    }
    columns = {std::move(i), std::move(f), std::move(b), std::move(s)};
  }

  std::vector<gc::PayloadColumnSpec> Specs() const {
    std::vector<gc::PayloadColumnSpec> out;
    for (const auto& c : columns) out.push_back({c.name, c.type});
    return out;
  }
  std::vector<gc::ColumnView> Views() const {
    std::vector<gc::ColumnView> out;
    for (const auto& c : columns) out.push_back(c.view());
    return out;
  }
};

// Row r of `got` equals source row `want_row` of `src` (nullopt: a null).
void ExpectRow(const gc::Column& got, uint64_t r, const gc::Column& src,
               std::optional<uint64_t> want_row) {
  SCOPED_TRACE(testing::Message() << "column " << got.name << " row " << r);
  ASSERT_EQ(got.type, src.type);
  if (!want_row || !src.Valid(*want_row)) {
    EXPECT_FALSE(got.Valid(r));
    return;
  }
  ASSERT_TRUE(got.Valid(r));
  switch (src.type) {
    case gc::ColumnType::kInt64:
      EXPECT_EQ(got.Value<int64_t>(r), src.Value<int64_t>(*want_row));
      break;
    case gc::ColumnType::kFloat64:
      EXPECT_EQ(got.Value<double>(r), src.Value<double>(*want_row));
      break;
    case gc::ColumnType::kBool:
      EXPECT_EQ(got.Bool(r), src.Bool(*want_row));
      break;
    default:
      EXPECT_EQ(got.String(r), src.String(*want_row));
  }
}

}  // namespace

// Payload through the client: a build whose payload chunks the client splits
// itself, lookups and joins gathering every type (the duplicate winner's row,
// nulls for missing keys and null values), count-only joins and IndexInfo.
TEST_F(ClientTest, PayloadBuildLookupJoinAndCountOnly) {
  // Keys repeat across chunks (key k at rows k and k + 600), so the winner matters.
  const size_t rows = 1200;
  std::vector<uint32_t> keys(rows);
  for (size_t r = 0; r < rows; ++r) keys[r] = static_cast<uint32_t>((r % 600) * 7 + 1);
  const PayloadData data(rows, 5);
  gc::IndexSpec spec;
  spec.name = "client_payload";
  spec.expected_rows = rows;
  spec.replace = true;
  spec.payload = data.Specs();
  const auto views = data.Views();
  std::vector<gc::Progress> progress;
  auto info = client_->BuildIndexFromColumns(spec, keys, {}, views, 250,
                                             [&](const gc::Progress& p) { progress.push_back(p); });
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->statistics.unique_keys, 600u);
  ASSERT_EQ(info->payload.size(), 4u);
  uint64_t payload_bytes = 0;
  for (size_t c = 0; c < 4; ++c) {
    EXPECT_EQ(info->payload[c].name, data.columns[c].name);
    EXPECT_EQ(info->payload[c].type, data.columns[c].type);
    EXPECT_GT(info->payload[c].bytes, 0u);
    payload_bytes += info->payload[c].bytes;
  }
  EXPECT_EQ(info->payload_bytes, payload_bytes);
  // Retained (winner) rows 0..599: i is null at r % 5 == 3, s at r % 7 == 2.
  EXPECT_EQ(info->payload[0].null_count, 120u);
  EXPECT_EQ(info->payload[3].null_count, 86u);
  ASSERT_FALSE(progress.empty());
  EXPECT_EQ(progress.back().rows_sent, rows);
  EXPECT_GT(progress.back().bytes_sent, rows * 4 + rows * 8 * 2);
  auto described = client_->DescribeIndex("client_payload");
  ASSERT_TRUE(described.ok());
  EXPECT_EQ(described->payload.size(), 4u);
  EXPECT_EQ(described->payload[3].null_count, 86u);

  // Lookups: every other key missing; columns in select order.
  std::vector<uint32_t> probe;
  for (uint32_t k = 0; k < 1300; ++k) probe.push_back(k * 7 / 2 + 1);
  gc::QueryAllOptions o;
  o.batch_rows = 333;
  o.select = {"s", "i", "b", "f"};
  auto l = client_->LookupAll("client_payload", probe, o);
  ASSERT_TRUE(l.ok()) << l.status();
  ASSERT_EQ(l->columns.size(), 4u);
  const std::vector<size_t> order = {3, 0, 2, 1};
  for (size_t c = 0; c < 4; ++c) {
    EXPECT_EQ(l->columns[c].name, o.select[c]);
    ASSERT_EQ(l->columns[c].length, probe.size());
  }
  for (size_t q = 0; q < probe.size(); ++q) {
    std::optional<uint64_t> row;
    if ((probe[q] - 1) % 7 == 0 && (probe[q] - 1) / 7 < 600) row = (probe[q] - 1) / 7;
    ASSERT_EQ(l->found[q] != 0, row.has_value()) << q;
    for (size_t c = 0; c < 4; ++c) ExpectRow(l->columns[c], q, data.columns[order[c]], row);
  }

  // A join: columns aligned with the pairs.
  o.select = {"i", "s"};
  o.batch_rows = 400;
  auto j = client_->JoinAll("client_payload", probe, o);
  ASSERT_TRUE(j.ok()) << j.status();
  ASSERT_EQ(j->columns.size(), 2u);
  ASSERT_EQ(j->columns[0].length, j->left_rows.size());
  EXPECT_EQ(j->left_rows.size(), l->statistics.found);
  for (size_t p = 0; p < j->left_rows.size(); ++p) {
    EXPECT_EQ(j->right_rows[p], (probe[j->left_rows[p]] - 1) / 7);
    ExpectRow(j->columns[0], p, data.columns[0], j->right_rows[p]);
    ExpectRow(j->columns[1], p, data.columns[3], j->right_rows[p]);
  }

  // Count only: the count, no pairs, no columns.
  o.count_only = true;
  auto counted = client_->JoinAll("client_payload", probe, o);
  ASSERT_TRUE(counted.ok()) << counted.status();
  EXPECT_EQ(counted->count, j->left_rows.size());
  EXPECT_TRUE(counted->left_rows.empty());
  for (const auto& c : counted->columns) EXPECT_EQ(c.length, 0u);

  // Unknown selections are the server's in-band error; client misuse is refused before sending.
  o.count_only = false;
  o.select = {"nope"};
  auto unknown = client_->LookupAll("client_payload", probe, o);
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.status().message().find("nope"), std::string::npos) << unknown.status();
  auto missing = client_->BuildIndexFromColumns(spec, keys, {}, {views.data(), 3}, 250);
  EXPECT_EQ(missing.status().message(),
            "payload column 's' is declared in IndexSpec::payload but not given");
  const gc::Column short_col = gc::Column::Of("i", std::vector<int64_t>{1, 2});
  std::vector<gc::ColumnView> wrong = views;
  wrong[0] = short_col.view();
  auto misaligned = client_->BuildIndexFromColumns(spec, keys, {}, wrong, 250);
  EXPECT_EQ(misaligned.status().message(), "payload[0] ('i') has 2 rows but keys has 1200");
}

// A pair of a reference join: left row, right source row (kNoMatch for none).
using Pair = std::pair<uint32_t, uint32_t>;

// The nested-loop reference of every join kind: per left row in
// order, the right rows with its key in source order; outer and anti rows
// without one pair with kNoMatch, semi rows take the first match.
std::vector<Pair> NestedLoopJoin(const std::vector<uint32_t>& left,
                                 const std::vector<uint32_t>& right, gc::JoinKind kind) {
  std::vector<Pair> out;
  for (uint32_t l = 0; l < left.size(); ++l) {
    std::vector<uint32_t> matches;
    for (uint32_t r = 0; r < right.size(); ++r) {
      if (right[r] == left[l]) matches.push_back(r);
    }
    switch (kind) {
      case gc::JoinKind::kInner:
        for (uint32_t r : matches) out.emplace_back(l, r);
        break;
      case gc::JoinKind::kLeftOuter:
        for (uint32_t r : matches) out.emplace_back(l, r);
        if (matches.empty()) out.emplace_back(l, gc::kNoMatch);
        break;
      case gc::JoinKind::kLeftSemi:
        if (!matches.empty()) out.emplace_back(l, matches[0]);
        break;
      case gc::JoinKind::kLeftAnti:
        if (matches.empty()) out.emplace_back(l, gc::kNoMatch);
        break;
    }
  }
  return out;
}

std::vector<Pair> PairsOf(const gc::JoinPairs& j) {
  std::vector<Pair> out;
  for (size_t p = 0; p < j.left_rows.size(); ++p) out.emplace_back(j.left_rows[p], j.right_rows[p]);
  return out;
}

// A keep_all index with duplicates across chunks and one hot key:
// JoinAll without a capacity sizes itself (count pass, then exactly the count)
// and returns every pair of every kind in left then right-row order, with each
// pair's own payload; a given capacity truncates each batch to its stable
// prefix and reports overflow; max_pairs bounds the whole result; LookupAll
// reports the first match and the group size.
TEST_F(ClientTest, MultiValueIndexJoinsEveryKindAndSizesItself) {
  std::mt19937 rng(21);
  std::uniform_int_distribution<uint32_t> key(0, 299);
  std::vector<uint32_t> right(2000);
  for (uint32_t r = 0; r < right.size(); ++r) right[r] = r % 4 == 0 ? 42 : key(rng);  // 42 is hot
  std::vector<uint32_t> left(900);
  std::uniform_int_distribution<uint32_t> probe(0, 399);  // 300..399 miss
  for (auto& k : left) k = probe(rng);
  std::vector<int64_t> tag(right.size());
  for (uint32_t r = 0; r < right.size(); ++r) tag[r] = int64_t{r} * 10 - 5;
  const gc::Column tags = gc::Column::Of("tag", tag);
  const std::vector<gc::ColumnView> views = {tags.view()};

  gc::IndexSpec spec;
  spec.name = "client_multi";
  spec.expected_rows = 300;
  spec.replace = true;
  spec.duplicates = gc::DuplicatePolicy::kKeepAll;
  spec.payload = {{"tag", gc::ColumnType::kInt64}};
  auto info = client_->BuildIndexFromColumns(spec, right, {}, views, 300);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->duplicates, gc::DuplicatePolicy::kKeepAll);
  std::unordered_map<uint32_t, uint32_t> group;
  for (uint32_t k : right) ++group[k];
  uint32_t largest = 0;
  for (const auto& [k, n] : group) largest = std::max(largest, n);
  EXPECT_EQ(info->statistics.unique_keys, group.size());
  EXPECT_EQ(info->statistics.duplicate_rows, right.size() - group.size());
  EXPECT_EQ(info->statistics.max_group_rows, largest);
  EXPECT_EQ(client_->DescribeIndex("client_multi")->duplicates, gc::DuplicatePolicy::kKeepAll);

  for (gc::JoinKind kind : {gc::JoinKind::kInner, gc::JoinKind::kLeftOuter, gc::JoinKind::kLeftSemi,
                            gc::JoinKind::kLeftAnti}) {
    SCOPED_TRACE(std::string(gc::JoinKindName(kind)));
    const std::vector<Pair> want = NestedLoopJoin(left, right, kind);
    gc::QueryAllOptions o;
    o.batch_rows = 128;
    o.kind = kind;
    o.select = {"tag"};
    auto j = client_->JoinAll("client_multi", left, o);
    ASSERT_TRUE(j.ok()) << j.status();
    EXPECT_EQ(j->count, want.size());
    EXPECT_FALSE(j->overflow);
    ASSERT_EQ(PairsOf(*j), want);
    ASSERT_EQ(j->columns.size(), 1u);
    ASSERT_EQ(j->columns[0].length, want.size());
    for (size_t p = 0; p < want.size(); ++p) {
      if (want[p].second == gc::kNoMatch) {
        EXPECT_FALSE(j->columns[0].Valid(p)) << p;
      } else {
        EXPECT_EQ(j->columns[0].Value<int64_t>(p), tag[want[p].second]) << p;
      }
    }

    // Count only: the exact count of the kind, no pairs.
    o.count_only = true;
    auto counted = client_->JoinAll("client_multi", left, o);
    ASSERT_TRUE(counted.ok()) << counted.status();
    EXPECT_EQ(counted->count, want.size());
    EXPECT_TRUE(counted->left_rows.empty());
    o.count_only = false;

    // A capacity of 5 per batch: each batch's stable prefix, overflow reported.
    o.capacity = 5;
    auto capped = client_->JoinAll("client_multi", left, o);
    ASSERT_TRUE(capped.ok()) << capped.status();
    std::vector<Pair> prefixes;
    std::vector<int> per_batch(left.size() / o.batch_rows + 1, 0);
    for (const Pair& pr : want) {
      if (per_batch[pr.first / o.batch_rows]++ < 5) prefixes.push_back(pr);
    }
    EXPECT_EQ(PairsOf(*capped), prefixes);
    EXPECT_EQ(capped->count, want.size());
    EXPECT_EQ(capped->overflow, prefixes.size() < want.size());
    o.capacity = 0;

    // max_pairs: the first pairs of the whole join, the count still exact.
    o.max_pairs = 77;
    auto bounded = client_->JoinAll("client_multi", left, o);
    ASSERT_TRUE(bounded.ok()) << bounded.status();
    const size_t keep = std::min<size_t>(77, want.size());
    EXPECT_EQ(PairsOf(*bounded), std::vector<Pair>(want.begin(), want.begin() + keep));
    EXPECT_EQ(bounded->columns[0].length, keep);
    EXPECT_EQ(bounded->count, want.size());
    EXPECT_EQ(bounded->overflow, want.size() > 77);
  }

  // Regression: a sized join without a single pair still returns its columns,
  // typed (a count-only second pass would have answered none).
  gc::QueryAllOptions none;
  none.select = {"tag"};
  none.batch_rows = 2;
  auto empty = client_->JoinAll("client_multi", std::vector<uint32_t>{350, 351, 399}, none);
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ(empty->count, 0u);
  ASSERT_EQ(empty->columns.size(), 1u);
  EXPECT_EQ(empty->columns[0].type, gc::ColumnType::kInt64);
  EXPECT_EQ(empty->columns[0].length, 0u);

  // Lookups: the first (lowest-row) match, its payload and the group size.
  gc::QueryAllOptions lo;
  lo.batch_rows = 200;
  lo.want_match_counts = true;
  lo.select = {"tag"};
  auto l = client_->LookupAll("client_multi", left, lo);
  ASSERT_TRUE(l.ok()) << l.status();
  ASSERT_EQ(l->match_counts.size(), left.size());
  for (size_t q = 0; q < left.size(); ++q) {
    const auto it = group.find(left[q]);
    const uint32_t n = it == group.end() ? 0 : it->second;
    EXPECT_EQ(l->match_counts[q], n) << q;
    if (n == 0) {
      EXPECT_EQ(l->values[q], gc::kNoMatch);
      continue;
    }
    const uint32_t first =
        static_cast<uint32_t>(std::find(right.begin(), right.end(), left[q]) - right.begin());
    EXPECT_EQ(l->values[q], first) << q;
    EXPECT_EQ(l->columns[0].Value<int64_t>(q), tag[first]) << q;
  }
}

// On a lowest_row index every kind yields at most one pair per left row, so
// JoinAll runs one pass; a left outer join has exactly one pair per left row.
TEST_F(ClientTest, JoinKindsOnALowestRowIndex) {
  const std::vector<uint32_t> right = {5, 9, 5, 12};
  Build("client_kinds", right);
  const std::vector<uint32_t> left = {9, 1, 5, 12, 5, 7};
  for (gc::JoinKind kind : {gc::JoinKind::kInner, gc::JoinKind::kLeftOuter, gc::JoinKind::kLeftSemi,
                            gc::JoinKind::kLeftAnti}) {
    SCOPED_TRACE(std::string(gc::JoinKindName(kind)));
    gc::QueryAllOptions o;
    o.batch_rows = 4;
    o.kind = kind;
    auto j = client_->JoinAll("client_kinds", left, o);
    ASSERT_TRUE(j.ok()) << j.status();
    // The lowest_row index keeps row 0 for key 5: the reference on the first rows.
    std::vector<Pair> want = NestedLoopJoin(left, {5, 9, gc::kNoMatch - 1, 12}, kind);
    EXPECT_EQ(PairsOf(*j), want);
    EXPECT_EQ(j->count, want.size());
  }
  auto info = client_->DescribeIndex("client_kinds");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->duplicates, gc::DuplicatePolicy::kLowestRow);
  EXPECT_EQ(info->statistics.max_group_rows, 0u);
}

// Messages smaller than the data: the client splits long string payload into
// payload-only chunks, and the server answers a join whose gathered strings
// exceed one message in several messages, which the client reassembles into
// one result per left batch.
TEST(ClientPayloadMessages, BuildChunksAndJoinContinuationAcrossSmallMessages) {
  const int max_message = 64 << 10;
  ServerProcess server({.extra_args = {"--max-message-bytes=" + std::to_string(max_message)}});
  ASSERT_FALSE(server.grpc_address().empty()) << server.log();
  gc::ConnectOptions co;
  co.address = server.grpc_address();
  co.max_message_bytes = max_message;
  co.deadline = std::chrono::seconds(60);
  auto c = Client::Connect(co);
  ASSERT_TRUE(c.ok()) << c.status();

  const size_t rows = 600;
  std::vector<uint64_t> keys(rows);
  for (size_t r = 0; r < rows; ++r) keys[r] = (uint64_t{r} << 33) | 5;
  const PayloadData data(rows, 9, /*long_strings=*/3000);  // ~0.9 MB of strings
  gc::IndexSpec spec;
  spec.name = "client_small_messages";
  spec.expected_rows = rows;
  spec.key_type = gc::KeyType::kUint64;
  spec.payload = data.Specs();
  const auto views = data.Views();
  size_t chunks = 0;
  auto info = (*c)->BuildIndexFromColumns(spec, keys, {}, views, 1 << 20,
                                          [&](const gc::Progress&) { ++chunks; });
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_GT(chunks, 10u);  // 0.9 MB through 64 KiB messages
  EXPECT_EQ(info->statistics.unique_keys, rows);

  // Two left batches per request, each matching every key in reverse order.
  std::vector<uint64_t> left(keys.rbegin(), keys.rend());
  std::vector<gc::JoinResult> answers;
  bool sent = false;
  absl::Status st = (*c)->Join(
      "client_small_messages",
      [&]() -> std::optional<gc::JoinBatch> {
        if (sent) return std::nullopt;
        sent = true;
        gc::JoinBatch b;
        b.select = {"s", "i"};
        gc::JoinLeft l;
        l.keys = left;
        b.lefts = {l, l};
        b.lefts[1].first_left_row = 1000;
        return b;
      },
      [&](gc::JoinResult&& r) {
        answers.push_back(std::move(r));
        return absl::OkStatus();
      });
  ASSERT_TRUE(st.ok()) << st;
  ASSERT_EQ(answers.size(), 1u);
  ASSERT_TRUE(answers[0].error.ok()) << answers[0].error;
  ASSERT_EQ(answers[0].results.size(), 2u);
  for (size_t b = 0; b < 2; ++b) {
    const gc::JoinPairs& jp = answers[0].results[b];
    ASSERT_EQ(jp.left_rows.size(), rows);
    // More than a message holds, which the client could not even receive whole.
    ASSERT_EQ(jp.columns.size(), 2u);
    EXPECT_GT(jp.columns[0].data.size(), 4u * max_message);
    EXPECT_EQ(jp.count, rows);
    ASSERT_EQ(jp.columns.size(), 2u);
    for (size_t p = 0; p < rows; ++p) {
      EXPECT_EQ(jp.left_rows[p], b * 1000 + p);
      EXPECT_EQ(jp.right_rows[p], rows - 1 - p);
      ExpectRow(jp.columns[0], p, data.columns[3], jp.right_rows[p]);
      ExpectRow(jp.columns[1], p, data.columns[0], jp.right_rows[p]);
    }
  }
}
