// Integration tests: the real gpujoind binary (CPU backend) on a free loopback
// port, driven through the generated C++ stub. Expected results come from running
// the same engine directly in the test process.
#include <signal.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "build_messages.hpp"

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <random>
#include <sstream>
#include <thread>

#include "gpujoin/engine/backend.hpp"
#include "gpujoin/engine/detail/slot_hash.hpp"
#include "gpujoin/engine/aggregation.hpp"
#include "gpujoin/engine/graph.hpp"
#include "wire/column_codec.hpp"
#include "gpujoin/testing/files.hpp"
#include "gpujoin/testing/health_check.hpp"
#include "gpujoin/testing/loopback.hpp"
#include "gpujoin/testing/prometheus_text.hpp"
#include "gpujoin/testing/server_process.hpp"
#include "gpujoin/testing/subprocess.hpp"
#include "gpujoin/v1/gpujoin.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "test_util.hpp"

namespace gpujoin::server {
namespace {

using gpujoin::server::testing::Build;
using gpujoin::server::testing::ChunkMsg;
using gpujoin::server::testing::LookupMsg;
using gpujoin::server::testing::SpecMsg;

using ::testing::HasSubstr;
using gpujoin::testing::HealthStatus;
using gpujoin::testing::HttpGet;
using gpujoin::testing::MetricValue;
using gpujoin::testing::ServerProcess;
using gpujoin::testing::Slurp;

std::unique_ptr<v1::GpuJoin::Stub> Connect(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(256 << 20);
  args.SetMaxSendMessageSize(256 << 20);
  return v1::GpuJoin::NewStub(
      grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args));
}

// Writes all requests from one thread while reading responses on this one, so that
// neither side's flow control can deadlock the test; returns the responses and
// the final status.
template <typename Request, typename Response, typename StreamFn>
std::pair<std::vector<Response>, grpc::Status> RunStream(StreamFn open,
                                                         const std::vector<Request>& requests,
                                                         grpc::ClientContext* ctx) {
  auto stream = open(ctx);
  std::thread writer([&] {
    for (const auto& r : requests) {
      if (!stream->Write(r)) break;
    }
    stream->WritesDone();
  });
  std::vector<Response> responses;
  Response resp;
  while (stream->Read(&resp)) responses.push_back(resp);
  writer.join();
  return {responses, stream->Finish()};
}

std::pair<std::vector<v1::LookupResponse>, grpc::Status> Lookups(
    v1::GpuJoin::Stub& stub, const std::vector<v1::LookupRequest>& reqs) {
  grpc::ClientContext ctx;
  return RunStream<v1::LookupRequest, v1::LookupResponse>(
      [&](grpc::ClientContext* c) { return stub.Lookup(c); }, reqs, &ctx);
}

class ServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = std::make_unique<ServerProcess>(
        gpujoin::testing::ServerOptions{.extra_args = Args(), .metrics = true});
    ASSERT_TRUE(server_->ready()) << "gpujoind did not become ready; log:\n" << server_->log();
    stub_ = Connect(server_->grpc_address());
    backend_ = testing::CpuBackend();
  }
  virtual std::vector<std::string> Args() { return {}; }

  std::string Metrics() { return HttpGet(server_->metrics_address(), "/metrics"); }

  void ExpectServing() {
    grpc::ClientContext ctx;
    v1::GetServerInfoRequest req;
    v1::GetServerInfoResponse resp;
    ASSERT_TRUE(stub_->GetServerInfo(&ctx, req, &resp).ok());
    EXPECT_TRUE(resp.serving());
  }

  // The engine, run directly: an index built from `chunks`.
  std::unique_ptr<engine::HashIndex> DirectIndex(uint32_t capacity, uint32_t max_probes,
                                                 const std::vector<std::vector<uint32_t>>& chunks,
                                                 uint32_t first_value,
                                                 engine::BuildStatistics* stats) {
    auto index = backend_->CreateIndex(engine::HashIndexSpec{capacity, max_probes});
    EXPECT_TRUE(index.ok());
    engine::CommandGraph g;
    engine::BuildIndexNode node;
    node.index = index->get();
    for (const auto& c : chunks) node.keys.push_back(c);
    node.first_value = first_value;
    node.statistics = stats;
    g.Add(std::move(node));
    EXPECT_TRUE(backend_->Run(g).ok());
    return std::move(*index);
  }

  // Lookup of index "t" (built like `direct`): one batch per query in one
  // stream, answered in order, each equal to the engine's lookup on `direct`;
  // probes only where the batch asks for them.
  void ExpectLookupsMatchTheEngine(const engine::HashIndex& direct,
                                   const std::vector<std::vector<uint32_t>>& queries) {
    std::vector<v1::LookupRequest> reqs;
    for (size_t b = 0; b < queries.size(); ++b) {
      reqs.push_back(LookupMsg("t", queries[b], 100 + b));
      reqs.back().set_want_probes(b % 2 == 0);
    }
    auto [lookups, status] = Lookups(*stub_, reqs);
    ASSERT_TRUE(status.ok()) << status.error_message();
    ASSERT_EQ(lookups.size(), reqs.size());
    for (size_t b = 0; b < reqs.size(); ++b) {
      const auto& r = lookups[b];
      ASSERT_FALSE(r.has_error()) << r.error().message();
      EXPECT_EQ(r.batch_id(), 100 + b);
      EXPECT_EQ(r.index_version(), 1u);
      const size_t n = queries[b].size();
      std::vector<uint32_t> values(n), probes(n);
      std::vector<uint8_t> found(n);
      engine::QueryStatistics qs;
      engine::CommandGraph g;
      engine::LookupNode node;
      node.index = &direct;
      node.keys = {queries[b]};
      node.values = values;
      node.found = found;
      node.probes = probes;
      node.statistics = &qs;
      g.Add(std::move(node));
      ASSERT_TRUE(backend_->Run(g).ok());
      EXPECT_EQ(UnpackColumn<uint32_t>(r.values()), values);
      EXPECT_EQ(UnpackColumn<uint8_t>(r.found()), found);
      if (b % 2 == 0) {
        EXPECT_EQ(UnpackColumn<uint32_t>(r.probes()), probes);
      } else {
        EXPECT_TRUE(r.probes().empty());
      }
      EXPECT_EQ(r.statistics().found(), qs.found);
      EXPECT_EQ(r.statistics().missing(), qs.missing);
      EXPECT_EQ(r.statistics().total_probes(), qs.total_probes);
      EXPECT_EQ(r.statistics().max_probes(), qs.max_probes);
    }
  }

  // Join of index "t" (built like `direct`): one request with the first two
  // queries as left batches, the second truncated to 10 pairs, each equal to
  // the engine's join on `direct`.
  void ExpectJoinMatchesTheEngine(const engine::HashIndex& direct,
                                  const std::vector<std::vector<uint32_t>>& queries) {
    v1::JoinRequest jr;
    jr.set_index("t");
    jr.set_batch_id(9);
    for (int b = 0; b < 2; ++b) {
      auto* lb = jr.add_batches();
      *lb->mutable_keys()->mutable_packed() = PackColumn<uint32_t>(queries[b]);
      lb->set_first_left_row(1000 * b);
      if (b == 1) lb->set_capacity(10);
      lb->set_want_found(true);
    }
    grpc::ClientContext jctx;
    auto [joins, jstatus] = RunStream<v1::JoinRequest, v1::JoinResponse>(
        [&](grpc::ClientContext* c) { return stub_->Join(c); }, {jr}, &jctx);
    ASSERT_TRUE(jstatus.ok());
    ASSERT_EQ(joins.size(), 1u);
    ASSERT_EQ(joins[0].results_size(), 2);
    EXPECT_EQ(joins[0].batch_id(), 9u);
    for (int b = 0; b < 2; ++b) {
      const uint64_t cap = b == 1 ? 10 : queries[b].size();
      std::vector<uint32_t> left(cap), right(cap);
      std::vector<uint8_t> found(queries[b].size());
      engine::JoinResult res;
      engine::CommandGraph g;
      engine::JoinNode node;
      node.index = &direct;
      engine::JoinBatch batch;
      batch.keys = {queries[b]};
      batch.first_left_row = 1000 * b;
      batch.out_left_rows = left;
      batch.out_right_rows = right;
      batch.result = &res;
      batch.found = found;
      node.batches.push_back(batch);
      g.Add(std::move(node));
      ASSERT_TRUE(backend_->Run(g).ok());
      const auto& jb = joins[0].results(b);
      const size_t kept = std::min<uint64_t>(res.count, cap);
      left.resize(kept);
      right.resize(kept);
      EXPECT_EQ(UnpackColumn<uint32_t>(jb.left_rows()), left);
      EXPECT_EQ(UnpackColumn<uint32_t>(jb.right_rows()), right);
      EXPECT_EQ(UnpackColumn<uint8_t>(jb.found()), found);
      EXPECT_EQ(jb.count(), res.count);
      EXPECT_EQ(jb.capacity(), cap);
      EXPECT_EQ(jb.overflow(), res.overflow);
      EXPECT_EQ(jb.statistics().found(), res.statistics.found);
    }
    EXPECT_TRUE(joins[0].results(1).overflow());
  }

  // Hash: a uint32 column and a binary column with nulls, 64 bits, equal to the
  // engine's hashes of the same buffers.
  void ExpectHashMatchesTheEngine() {
    v1::HashRequest hr;
    std::vector<uint32_t> hv = {1, 2, 3, 4, 5};
    auto* c0 = hr.add_columns();
    c0->set_type(v1::COLUMN_TYPE_UINT32);
    c0->set_data(PackColumn<uint32_t>(hv));
    c0->set_length(5);
    auto* c1 = hr.add_columns();
    c1->set_type(v1::COLUMN_TYPE_BINARY);
    c1->set_data("abcdefgh");
    const std::vector<int32_t> offsets = {0, 1, 3, 3, 6, 8};
    c1->set_offsets(PackColumn<int32_t>(offsets));
    c1->set_validity(std::string(1, '\x1b'));  // rows 2 null
    c1->set_length(5);
    hr.set_bits(64);
    grpc::ClientContext hctx;
    auto [hashes, hstatus] = RunStream<v1::HashRequest, v1::HashResponse>(
        [&](grpc::ClientContext* c) { return stub_->Hash(c); }, {hr}, &hctx);
    ASSERT_TRUE(hstatus.ok());
    ASSERT_EQ(hashes.size(), 1u);
    ASSERT_FALSE(hashes[0].has_error()) << hashes[0].error().message();
    {
      std::vector<uint64_t> out(5);
      std::vector<uint8_t> validity(1);
      engine::HashNode node;
      const std::string d0 = PackColumn<uint32_t>(hv);
      engine::HashColumn e0;
      e0.type = engine::ColumnType::kUint32;
      e0.data = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(d0.data()), d0.size());
      e0.length = 5;
      engine::HashColumn e1;
      e1.type = engine::ColumnType::kBinary;
      const std::string d1 = "abcdefgh";
      e1.data = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(d1.data()), d1.size());
      e1.offsets = offsets;
      const uint8_t bitmap = 0x1b;
      e1.validity = std::span<const uint8_t>(&bitmap, 1);
      e1.length = 5;
      node.columns = {e0, e1};
      node.out64 = out;
      node.out_validity = validity;
      engine::CommandGraph g;
      g.Add(std::move(node));
      ASSERT_TRUE(backend_->Run(g).ok());
      EXPECT_EQ(UnpackColumn<uint64_t>(hashes[0].hashes()), out);
      EXPECT_EQ(UnpackColumn<uint8_t>(hashes[0].validity()), validity);
      EXPECT_EQ(hashes[0].null_count(), 1u);
    }
  }

  // Bad BuildIndex calls against index "ok" (16 slots, built): each gets its
  // code and a message naming the field.
  void ExpectBadBuildsRefused() {
    struct BuildCase {
      std::vector<v1::BuildIndexRequest> msgs;
      grpc::StatusCode code;
      std::string text;
    };
    v1::BuildIndexRequest both = ChunkMsg({1});
    both.mutable_chunk()->mutable_keys()->mutable_values()->add_v(1);
    v1::BuildIndexRequest odd;
    odd.mutable_chunk()->mutable_keys()->set_packed(std::string(6, 'x'));
    v1::BuildIndexRequest batch_spec = SpecMsg("bm", 16);
    batch_spec.mutable_spec()->set_batch_mode(true);
    v1::BuildIndexRequest no_keys;
    no_keys.mutable_chunk()->set_row_base(5);
    std::vector<BuildCase> builds = {
        {{SpecMsg("bad name", 16)}, grpc::StatusCode::INVALID_ARGUMENT, "spec.name"},
        {{SpecMsg(std::string(129, 'n'), 16)},
         grpc::StatusCode::INVALID_ARGUMENT,
         "129 characters"},
        {{SpecMsg("x", 12)}, grpc::StatusCode::INVALID_ARGUMENT, "capacity"},
        {{SpecMsg("x", 16, {.max_probe_count = 32})},
         grpc::StatusCode::INVALID_ARGUMENT,
         "max_probe_count"},
        {{SpecMsg("ok", 16)}, grpc::StatusCode::ALREADY_EXISTS, "already exists"},
        {{ChunkMsg({1})}, grpc::StatusCode::INVALID_ARGUMENT, "before the spec"},
        {{}, grpc::StatusCode::INVALID_ARGUMENT, "spec: missing"},
        {{SpecMsg("x", 16), both}, grpc::StatusCode::INVALID_ARGUMENT, "chunks[0].keys: both"},
        {{SpecMsg("x", 16), odd},
         grpc::StatusCode::INVALID_ARGUMENT,
         "chunks[0].keys.packed: byte length 6 is not a multiple of 4"},
        {{batch_spec, no_keys}, grpc::StatusCode::INVALID_ARGUMENT, "chunks[0].keys: neither"},
        // No budget refusal here: the default budget is 80 % of free memory, which a
        // 2^31-slot CPU table (16 GiB) may fit, and the test would then allocate it.
        // BudgetTest refuses against a fixed --device-memory-limit instead.
    };
    for (size_t i = 0; i < builds.size(); ++i) {
      v1::BuildIndexResponse r;
      grpc::Status s = Build(*stub_, builds[i].msgs, &r);
      EXPECT_EQ(s.error_code(), builds[i].code) << "build case " << i << ": " << s.error_message();
      EXPECT_THAT(s.error_message(), HasSubstr(builds[i].text)) << "build case " << i;
    }
  }

  // Lookup of index "ok": every bad batch answered in-band, in order, between
  // good ones.
  void ExpectBadLookupsRefusedInBand() {
    std::vector<v1::LookupRequest> reqs;
    std::vector<std::pair<grpc::StatusCode, std::string>> expect;
    auto add = [&](v1::LookupRequest r, grpc::StatusCode c, std::string text) {
      r.set_batch_id(reqs.size());
      reqs.push_back(std::move(r));
      expect.emplace_back(c, std::move(text));
    };
    add(LookupMsg("ok", {1}), grpc::StatusCode::OK, "");
    add(LookupMsg("missing", {1}), grpc::StatusCode::NOT_FOUND, "index \"missing\" not found");
    add(LookupMsg("bad/name", {1}), grpc::StatusCode::INVALID_ARGUMENT, "index: index name");
    {
      v1::LookupRequest r = LookupMsg("ok", {1});
      r.mutable_keys()->mutable_values()->add_v(2);
      add(r, grpc::StatusCode::INVALID_ARGUMENT,
          "keys: both keys.packed (4 bytes) and keys.values (1 values)");
    }
    {
      v1::LookupRequest r;
      r.set_index("ok");
      add(r, grpc::StatusCode::INVALID_ARGUMENT, "keys: neither keys.packed nor keys.values");
    }
    {
      v1::LookupRequest r;
      r.set_index("ok");
      r.mutable_keys()->set_packed(std::string(10, 'x'));
      add(r, grpc::StatusCode::INVALID_ARGUMENT,
          "keys.packed: byte length 10 is not a multiple of 4");
    }
    {
      v1::LookupRequest r = LookupMsg("ok", {1});
      r.set_max_probe_count(17);
      add(r, grpc::StatusCode::INVALID_ARGUMENT, "max_probe_count: 17 exceeds the capacity 16");
    }
    add(LookupMsg("ok", {2}), grpc::StatusCode::OK, "");
    auto [lookups, status] = Lookups(*stub_, reqs);
    ASSERT_TRUE(status.ok());
    ASSERT_EQ(lookups.size(), reqs.size());
    for (size_t i = 0; i < reqs.size(); ++i) {
      EXPECT_EQ(lookups[i].batch_id(), i);
      if (expect[i].first == grpc::StatusCode::OK) {
        EXPECT_FALSE(lookups[i].has_error()) << i << ": " << lookups[i].error().message();
      } else {
        EXPECT_EQ(lookups[i].error().code(), static_cast<int>(expect[i].first)) << i;
        EXPECT_THAT(lookups[i].error().message(), HasSubstr(expect[i].second)) << i;
      }
    }
  }

  // Join of index "ok": no batches, left rows that do not match the keys, and
  // ragged packed keys, each refused in band.
  void ExpectBadJoinsRefusedInBand() {
    std::vector<v1::JoinRequest> joins(3);
    joins[0].set_index("ok");
    joins[1].set_index("ok");
    auto* lb = joins[1].add_batches();
    lb->mutable_keys()->mutable_values()->add_v(1);
    lb->mutable_left_rows()->mutable_values()->add_v(1);
    lb->mutable_left_rows()->mutable_values()->add_v(2);
    joins[2].set_index("ok");
    joins[2].add_batches()->mutable_keys()->set_packed(std::string(7, 'x'));
    grpc::ClientContext jctx;
    auto [jr, js] = RunStream<v1::JoinRequest, v1::JoinResponse>(
        [&](grpc::ClientContext* c) { return stub_->Join(c); }, joins, &jctx);
    ASSERT_TRUE(js.ok());
    ASSERT_EQ(jr.size(), 3u);
    EXPECT_THAT(jr[0].error().message(), HasSubstr("batches: at least one"));
    EXPECT_THAT(jr[1].error().message(),
                HasSubstr("batches[0].left_rows: 2 rows but batches[0].keys has 1"));
    EXPECT_THAT(jr[2].error().message(), HasSubstr("batches[0].keys.packed: byte length 7"));
    for (const auto& r : jr)
      EXPECT_EQ(r.error().code(), static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT));
  }

  // Hash: no columns, short data, bad bits and no type, each refused in band.
  void ExpectBadHashesRefusedInBand() {
    std::vector<v1::HashRequest> hashes(4);
    auto* hc = hashes[1].add_columns();
    hc->set_type(v1::COLUMN_TYPE_UINT64);
    hc->set_data(std::string(12, 'x'));
    hc->set_length(2);
    *hashes[2].add_columns() = *hc;
    hashes[2].mutable_columns(0)->set_data(std::string(16, 'x'));
    hashes[2].set_bits(16);
    hashes[3].add_columns()->set_length(1);
    grpc::ClientContext hctx;
    auto [hr, hs] = RunStream<v1::HashRequest, v1::HashResponse>(
        [&](grpc::ClientContext* c) { return stub_->Hash(c); }, hashes, &hctx);
    ASSERT_TRUE(hs.ok());
    ASSERT_EQ(hr.size(), 4u);
    EXPECT_THAT(hr[0].error().message(), HasSubstr("columns: at least one column"));
    EXPECT_THAT(hr[1].error().message(),
                HasSubstr("columns[0].data: 12 bytes, need (offset 0 + length 2) * 8 = 16"));
    EXPECT_THAT(hr[2].error().message(), HasSubstr("bits: 16 is not 32 or 64"));
    EXPECT_THAT(hr[3].error().message(), HasSubstr("columns[0].type"));
  }

  // DropIndex of a missing index and DescribeIndex of an empty name.
  void ExpectBadUnaryCallsRefused() {
    {
      grpc::ClientContext ctx;
      v1::DropIndexRequest d;
      d.set_name("missing");
      v1::DropIndexResponse dr;
      EXPECT_EQ(stub_->DropIndex(&ctx, d, &dr).error_code(), grpc::StatusCode::NOT_FOUND);
    }
    {
      grpc::ClientContext ctx;
      v1::DescribeIndexRequest d;
      d.set_name("");
      v1::DescribeIndexResponse dr;
      grpc::Status s = stub_->DescribeIndex(&ctx, d, &dr);
      EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
      EXPECT_THAT(s.error_message(), HasSubstr("name: index name is empty"));
    }
  }

  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<v1::GpuJoin::Stub> stub_;
  std::unique_ptr<engine::Backend> backend_;
};

TEST_F(ServerTest, ServerInfoHealthAndStartupLog) {
  grpc::ClientContext ctx;
  v1::GetServerInfoResponse info;
  ASSERT_TRUE(stub_->GetServerInfo(&ctx, v1::GetServerInfoRequest(), &info).ok());
  EXPECT_EQ(info.backend(), "cpu");
  EXPECT_FALSE(info.device_name().empty());
  EXPECT_GT(info.device_memory_budget_bytes(), 0u);
  EXPECT_GT(info.max_message_bytes(), 4u << 20);
  // The admission limits, as configured (defaults here).
  EXPECT_EQ(info.max_concurrent_builds(), 16u);
  EXPECT_EQ(info.max_aggregate_groups(), uint64_t{1} << 22);
  EXPECT_TRUE(info.serving());
  EXPECT_FALSE(info.version().empty());
  EXPECT_EQ(HealthStatus(server_->grpc_address()), 1);
  EXPECT_EQ(HealthStatus(server_->grpc_address(), "gpujoin.v1.GpuJoin"), 1);
  EXPECT_THAT(server_->log(), HasSubstr("backend=cpu device="));
}

TEST_F(ServerTest, BuildWithDuplicatesInvalidAndOverflowMatchesTheEngine) {
  // 24 keys into 16 slots with a probe bound of 2: duplicates across chunks,
  // reserved keys, and overflow.
  std::vector<std::vector<uint32_t>> chunks = {{1, 2, 3, 0xffffffffu, 2, 5},
                                               {7, 1, 9, 11, 13, 15, 17, 19},
                                               {},
                                               {21, 23, 25, 27, 29, 31, 33, 0xffffffffu, 35, 37}};
  std::vector<v1::BuildIndexRequest> msgs = {
      SpecMsg("dims", 16, {.first_value = 500, .max_probe_count = 2})};
  for (const auto& c : chunks) msgs.push_back(ChunkMsg(c));
  v1::BuildIndexResponse resp;
  grpc::Status s = Build(*stub_, msgs, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();

  engine::BuildStatistics expected;
  auto direct = DirectIndex(16, 2, chunks, 500, &expected);
  const auto& st = resp.index().statistics();
  EXPECT_EQ(st.unique_keys(), expected.unique_keys);
  EXPECT_EQ(st.duplicate_rows(), expected.duplicate_rows);
  EXPECT_EQ(st.overflow_rows(), expected.overflow_rows);
  EXPECT_EQ(st.invalid_rows(), expected.invalid_rows);
  EXPECT_EQ(st.total_probes(), expected.total_probes);
  EXPECT_EQ(st.max_probes(), expected.max_probes);
  EXPECT_EQ(expected.invalid_rows, 2u);
  EXPECT_GT(expected.duplicate_rows, 0u);
  EXPECT_GT(expected.overflow_rows, 0u);
  EXPECT_EQ(resp.index().capacity(), 16u);
  EXPECT_EQ(resp.index().max_probe_count(), 2u);
  EXPECT_EQ(resp.index().rows(), 24u);
  EXPECT_EQ(resp.index().version(), 1u);
  EXPECT_EQ(resp.index().backend(), "cpu");
  EXPECT_DOUBLE_EQ(resp.index().load_factor(), expected.unique_keys / 16.0);
  EXPECT_GT(resp.index().device_bytes(), 0u);
}

// Reproduces a build refused at chunks[0] with "spec: max_probe_count 4 exceeds
// capacity 2": a table that sizes itself from the rows sent (neither capacity nor
// expected_rows) holds its probe bound against the capacity it is built with.
TEST_F(ServerTest, SelfSizedBuildHoldsTheProbeBoundAgainstItsFinalCapacity) {
  v1::BuildIndexRequest spec;
  spec.mutable_spec()->set_name("auto");
  spec.mutable_spec()->set_max_probe_count(4);
  const std::vector<std::vector<uint32_t>> chunks = {{10}, {20, 30, 40}, {50, 60, 70}};
  std::vector<v1::BuildIndexRequest> msgs = {spec};
  for (const auto& c : chunks) msgs.push_back(ChunkMsg(c));
  v1::BuildIndexResponse resp;
  grpc::Status s = Build(*stub_, msgs, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(resp.index().capacity(), 16u);  // 7 rows at load factor 0.5
  EXPECT_EQ(resp.index().max_probe_count(), 4u);
  EXPECT_EQ(resp.index().statistics().unique_keys(), 7u);
  auto [answers, st] = Lookups(*stub_, {LookupMsg("auto", {70, 10, 11})});
  ASSERT_TRUE(st.ok()) << st.error_message();
  ASSERT_EQ(answers.size(), 1u);
  EXPECT_EQ(UnpackColumn<uint32_t>(answers[0].values()),
            (std::vector<uint32_t>{6, 0, 0xffffffffu}));  // generated: global row
  EXPECT_EQ(UnpackColumn<uint8_t>(answers[0].found()), (std::vector<uint8_t>{1, 1, 0}));

  // A bound above the final capacity: INVALID_ARGUMENT naming the field and that
  // capacity, and the live version is untouched.
  msgs[0].mutable_spec()->set_replace(true);
  msgs[0].mutable_spec()->set_max_probe_count(32);
  s = Build(*stub_, msgs, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("spec.max_probe_count: 32 exceeds capacity 16"));
  grpc::ClientContext ctx;
  v1::DescribeIndexRequest describe;
  describe.set_name("auto");
  v1::DescribeIndexResponse described;
  ASSERT_TRUE(stub_->DescribeIndex(&ctx, describe, &described).ok());
  EXPECT_EQ(described.index().version(), 1u);
  EXPECT_EQ(described.index().max_probe_count(), 4u);
  ExpectServing();
}

TEST_F(ServerTest, LookupJoinAggregateHashMatchTheEngine) {
  std::mt19937 rng(7);
  std::vector<uint32_t> keys(3000);
  for (auto& k : keys) k = rng() % 5000;
  v1::BuildIndexResponse built;
  ASSERT_TRUE(
      Build(*stub_, {SpecMsg("t", 8192, {.first_value = 10}), ChunkMsg(keys)}, &built).ok());
  engine::BuildStatistics bs;
  auto direct = DirectIndex(8192, 0, {keys}, 10, &bs);

  // Six lookup batches (the reserved key first in each); the first two are also
  // the join's left batches.
  std::vector<std::vector<uint32_t>> queries;
  for (int b = 0; b < 6; ++b) {
    std::vector<uint32_t> q(500 + b);
    for (auto& k : q) k = rng() % 6000;
    q[0] = 0xffffffffu;
    queries.push_back(q);
  }
  ASSERT_NO_FATAL_FAILURE(ExpectLookupsMatchTheEngine(*direct, queries));
  ASSERT_NO_FATAL_FAILURE(ExpectJoinMatchesTheEngine(*direct, queries));

  // Aggregate: three batches of one stream; the accumulation equals one engine run
  // over all rows (integer-valued floats: the sums are exact in any order).
  for (v1::AggregateOp op : {v1::AGGREGATE_OP_COUNT, v1::AGGREGATE_OP_SUM, v1::AGGREGATE_OP_MIN,
                             v1::AGGREGATE_OP_MAX}) {
    std::vector<uint32_t> all_keys, all_mask;
    std::vector<float> all_values;
    std::vector<v1::AggregateRequest> areqs;
    for (int b = 0; b < 3; ++b) {
      std::vector<uint32_t> k(200), m(200);
      std::vector<float> v(200);
      for (int i = 0; i < 200; ++i) {
        k[i] = rng() % 40;  // some out of range (groups = 32)
        v[i] = static_cast<float>(static_cast<int>(rng() % 200) - 100);
        m[i] = rng() % 4;
      }
      v1::AggregateRequest ar;
      ar.set_op(op);
      ar.set_groups(32);
      ar.set_batch_id(b);
      *ar.mutable_keys()->mutable_packed() = PackColumn<uint32_t>(k);
      *ar.mutable_mask()->mutable_packed() = PackColumn<uint32_t>(m);
      if (op != v1::AGGREGATE_OP_COUNT) *ar.mutable_values()->mutable_packed() = PackColumn<float>(v);
      ar.set_accumulate_only(b == 1);
      areqs.push_back(ar);
      all_keys.insert(all_keys.end(), k.begin(), k.end());
      all_values.insert(all_values.end(), v.begin(), v.end());
      all_mask.insert(all_mask.end(), m.begin(), m.end());
    }
    grpc::ClientContext actx;
    auto [aggs, astatus] = RunStream<v1::AggregateRequest, v1::AggregateResponse>(
        [&](grpc::ClientContext* c) { return stub_->Aggregate(c); }, areqs, &actx);
    ASSERT_TRUE(astatus.ok());
    ASSERT_EQ(aggs.size(), 3u);
    for (const auto& a : aggs) ASSERT_FALSE(a.has_error()) << a.error().message();
    EXPECT_TRUE(aggs[1].counts().empty() && aggs[1].values().empty());  // accumulate_only

    std::vector<uint64_t> words(32);
    engine::CommandGraph g;
    engine::AggregateNode node;
    node.keys = {all_keys};
    node.mask = engine::ChunkedU32{all_mask};
    node.output = words;
    if (op == v1::AGGREGATE_OP_COUNT) {
      node.op = engine::AggregateOp::kCount;
    } else {
      node.op = op == v1::AGGREGATE_OP_SUM   ? engine::AggregateOp::kSum
                : op == v1::AGGREGATE_OP_MIN ? engine::AggregateOp::kMin
                                             : engine::AggregateOp::kMax;
      node.values = engine::ChunkedF32{all_values};
    }
    g.Add(std::move(node));
    ASSERT_TRUE(backend_->Run(g).ok());
    const std::vector<uint32_t> counts(words.begin(), words.end());
    const std::vector<float> values = engine::Float32sOfWords(words);
    if (op == v1::AGGREGATE_OP_COUNT) {
      EXPECT_EQ(UnpackColumn<uint32_t>(aggs[2].total_counts()), counts);
    } else {
      const auto totals = UnpackColumn<float>(aggs[2].total_values());
      ASSERT_EQ(totals.size(), 32u);
      for (int i = 0; i < 32; ++i) {
        if (std::isnan(values[i])) {
          EXPECT_TRUE(std::isnan(totals[i])) << i;
        } else {
          EXPECT_EQ(totals[i], values[i]) << "group " << i << " op " << op;
        }
      }
    }
  }

  ExpectHashMatchesTheEngine();
}

// Reproduces a server that drops LookupRequest.max_probe_count or
// JoinRequest.max_probe_count (the query's probe bound) on the way to the engine,
// on either key encoding (packed bytes: the Lookup wire path; typed list).
// Six keys of one home in a 64-slot table sit 0..5 slots from it (sorted by key);
// with a bound of 2 only the two smallest are found and every other row stops
// after 2 slots. Results are checked exactly, and against the engine run directly.
TEST_F(ServerTest, LookupAndJoinHonourTheRequestsProbeBound) {
  constexpr uint32_t kCapacity = 64, kHome = 9, kFirstValue = 1000;
  std::vector<uint32_t> home;  // ascending keys of home slot kHome
  for (uint32_t k = 1; home.size() < 7; ++k) {
    if (engine::detail::HomeSlot(k, kCapacity) == kHome) home.push_back(k);
  }
  // Built largest first: home[j] gets value kFirstValue + 5 - j. home[6] stays absent.
  const std::vector<uint32_t> keys = {home[5], home[4], home[3], home[2], home[1], home[0]};
  v1::BuildIndexResponse built;
  ASSERT_TRUE(Build(*stub_,
                    {SpecMsg("bound", kCapacity, {.first_value = kFirstValue}), ChunkMsg(keys)},
                    &built)
                  .ok());
  ASSERT_EQ(built.index().statistics().unique_keys(), 6u);
  ASSERT_EQ(built.index().statistics().max_probes(), 6u) << "the six keys fill slots 9..14";
  engine::BuildStatistics bs;
  auto direct = DirectIndex(kCapacity, 0, {keys}, kFirstValue, &bs);

  const std::vector<uint32_t> q = {home[5], home[0], home[6], 0xffffffffu, home[1], home[3]};
  // The values of home[0], home[1], home[3] and home[5].
  const uint32_t val0 = kFirstValue + 5, val1 = kFirstValue + 4, val3 = kFirstValue + 2,
                 val5 = kFirstValue;
  struct Expected {
    uint32_t bound;
    std::vector<uint32_t> values, probes;
    std::vector<uint8_t> found;
    engine::QueryStatistics stats;
  };
  const Expected cases[] = {
      {2,
       {0xffffffffu, val0, 0xffffffffu, 0xffffffffu, val1, 0xffffffffu},
       {2, 1, 2, 0, 2, 2},
       {0, 1, 0, 0, 1, 0},
       {2, 4, 9, 2}},
      // No bound in the request: the index's (its capacity). home[6] stops at the
      // empty slot 15.
      {0,
       {val5, val0, 0xffffffffu, 0xffffffffu, val1, val3},
       {6, 1, 7, 0, 2, 4},
       {1, 1, 0, 0, 1, 1},
       {4, 2, 20, 7}},
  };

  std::vector<v1::LookupRequest> reqs;
  for (const Expected& c : cases) {
    v1::LookupRequest packed = LookupMsg("bound", q, reqs.size());
    packed.set_want_probes(true);
    packed.set_max_probe_count(c.bound);
    v1::LookupRequest list = packed;
    list.set_batch_id(reqs.size() + 1);
    list.mutable_keys()->clear_packed();
    for (uint32_t k : q) list.mutable_keys()->mutable_values()->add_v(k);
    reqs.push_back(packed);
    reqs.push_back(list);
  }
  auto [lookups, status] = Lookups(*stub_, reqs);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(lookups.size(), reqs.size());
  for (size_t i = 0; i < reqs.size(); ++i) {
    const Expected& c = cases[i / 2];
    SCOPED_TRACE(::testing::Message() << "lookup max_probe_count " << c.bound
                                      << (i % 2 ? " (list keys)" : " (packed keys)"));
    const v1::LookupResponse& r = lookups[i];
    ASSERT_FALSE(r.has_error()) << r.error().message();
    EXPECT_EQ(UnpackColumn<uint32_t>(r.values()), c.values);
    EXPECT_EQ(UnpackColumn<uint8_t>(r.found()), c.found);
    EXPECT_EQ(UnpackColumn<uint32_t>(r.probes()), c.probes);
    EXPECT_EQ(r.statistics().found(), c.stats.found);
    EXPECT_EQ(r.statistics().missing(), c.stats.missing);
    EXPECT_EQ(r.statistics().total_probes(), c.stats.total_probes);
    EXPECT_EQ(r.statistics().max_probes(), c.stats.max_probes);
    // The engine, run directly with the same bound, agrees.
    std::vector<uint32_t> values(q.size()), probes(q.size());
    std::vector<uint8_t> found(q.size());
    engine::QueryStatistics qs;
    engine::CommandGraph g;
    engine::LookupNode node;
    node.index = direct.get();
    node.keys = {q};
    node.values = values;
    node.found = found;
    node.probes = probes;
    node.statistics = &qs;
    node.max_probe_count = c.bound;
    g.Add(std::move(node));
    ASSERT_TRUE(backend_->Run(g).ok());
    EXPECT_EQ(values, c.values);
    EXPECT_EQ(probes, c.probes);
    EXPECT_EQ(qs, c.stats);
  }

  // Join: the same rows as one left batch (left rows 50 + i), per bound.
  std::vector<v1::JoinRequest> jreqs;
  for (const Expected& c : cases) {
    v1::JoinRequest jr;
    jr.set_index("bound");
    jr.set_batch_id(jreqs.size());
    jr.set_max_probe_count(c.bound);
    auto* lb = jr.add_batches();
    *lb->mutable_keys()->mutable_packed() = PackColumn<uint32_t>(q);
    lb->set_first_left_row(50);
    lb->set_want_found(true);
    lb->set_want_probes(true);
    jreqs.push_back(jr);
  }
  grpc::ClientContext jctx;
  auto [joins, jstatus] = RunStream<v1::JoinRequest, v1::JoinResponse>(
      [&](grpc::ClientContext* c) { return stub_->Join(c); }, jreqs, &jctx);
  ASSERT_TRUE(jstatus.ok()) << jstatus.error_message();
  ASSERT_EQ(joins.size(), jreqs.size());
  for (size_t i = 0; i < jreqs.size(); ++i) {
    const Expected& c = cases[i];
    SCOPED_TRACE(::testing::Message() << "join max_probe_count " << c.bound);
    ASSERT_FALSE(joins[i].has_error()) << joins[i].error().message();
    ASSERT_EQ(joins[i].results_size(), 1);
    const v1::JoinBatchResult& jb = joins[i].results(0);
    std::vector<uint32_t> left, right;
    for (uint32_t r = 0; r < q.size(); ++r) {
      if (!c.found[r]) continue;
      left.push_back(50 + r);
      right.push_back(c.values[r]);
    }
    EXPECT_EQ(UnpackColumn<uint32_t>(jb.left_rows()), left);
    EXPECT_EQ(UnpackColumn<uint32_t>(jb.right_rows()), right);
    EXPECT_EQ(jb.count(), left.size());
    EXPECT_FALSE(jb.overflow());
    EXPECT_EQ(UnpackColumn<uint8_t>(jb.found()), c.found);
    EXPECT_EQ(UnpackColumn<uint32_t>(jb.probes()), c.probes);
    EXPECT_EQ(jb.statistics().found(), c.stats.found);
    EXPECT_EQ(jb.statistics().missing(), c.stats.missing);
    EXPECT_EQ(jb.statistics().total_probes(), c.stats.total_probes);
    EXPECT_EQ(jb.statistics().max_probes(), c.stats.max_probes);
  }
}

// Reproduces a join that does not pass the build's overflow on: keys that found
// no slot within the build's probe bound are missing from every answer, so every
// join of that index version says `overflow`, whatever its own pairs: each join
// kind, count_only, each left batch of a batch join (one without any match
// included). The pairs are the keys the index kept (the engine's lookup, run
// directly, tells which); a rebuild without overflow clears the flag.
TEST_F(ServerTest, BuildOverflowMakesEveryJoinReportOverflow) {
  std::vector<uint32_t> keys(24);
  std::iota(keys.begin(), keys.end(), 1u);  // 24 keys, 16 slots, bound 1
  v1::BuildIndexResponse built;
  ASSERT_TRUE(
      Build(*stub_, {SpecMsg("spill", 16, {.max_probe_count = 1}), ChunkMsg(keys)}, &built).ok());
  engine::BuildStatistics bs;
  auto direct = DirectIndex(16, 1, {keys}, 0, &bs);
  const auto& st = built.index().statistics();
  ASSERT_EQ(st.overflow_rows(), bs.overflow_rows);
  ASSERT_GE(bs.overflow_rows, 8u);
  ASSERT_EQ(st.unique_keys() + st.overflow_rows(), keys.size());

  std::vector<uint32_t> values(keys.size());
  std::vector<uint8_t> found(keys.size());
  {
    engine::QueryStatistics qs;
    engine::CommandGraph g;
    engine::LookupNode node;
    node.index = direct.get();
    node.keys = {keys};
    node.values = values;
    node.found = found;
    node.statistics = &qs;
    g.Add(std::move(node));
    ASSERT_TRUE(backend_->Run(g).ok());
  }
  std::vector<uint32_t> inner_left, inner_right, missing;
  for (uint32_t r = 0; r < keys.size(); ++r) {
    if (found[r]) {
      inner_left.push_back(r);
      inner_right.push_back(values[r]);
    } else {
      missing.push_back(r);
    }
  }

  auto join = [&](v1::JoinKind kind, const std::vector<std::vector<uint32_t>>& lefts,
                  bool count_only, const std::string& index = "spill") {
    v1::JoinRequest jr;
    jr.set_index(index);
    jr.set_kind(kind);
    for (const auto& l : lefts) {
      auto* lb = jr.add_batches();
      *lb->mutable_keys()->mutable_packed() = PackColumn<uint32_t>(l);
      lb->set_count_only(count_only);
    }
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    auto [resp, status] = RunStream<v1::JoinRequest, v1::JoinResponse>(
        [&](grpc::ClientContext* c) { return stub_->Join(c); }, {jr}, &ctx);
    EXPECT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(resp.size(), 1u);
    if (resp.empty()) return v1::JoinResponse();
    EXPECT_FALSE(resp[0].has_error()) << resp[0].error().message();
    return resp[0];
  };

  const v1::JoinResponse inner = join(v1::JOIN_KIND_INNER, {keys}, false);
  ASSERT_EQ(inner.results_size(), 1);
  EXPECT_TRUE(inner.results(0).overflow());
  EXPECT_EQ(inner.results(0).count(), inner_left.size());
  EXPECT_LE(inner.results(0).count(), inner.results(0).capacity()) << "not a capacity overflow";
  EXPECT_EQ(UnpackColumn<uint32_t>(inner.results(0).left_rows()), inner_left);
  EXPECT_EQ(UnpackColumn<uint32_t>(inner.results(0).right_rows()), inner_right);

  const v1::JoinResponse anti = join(v1::JOIN_KIND_LEFT_ANTI, {keys}, false);
  ASSERT_EQ(anti.results_size(), 1);
  EXPECT_TRUE(anti.results(0).overflow());
  EXPECT_EQ(UnpackColumn<uint32_t>(anti.results(0).left_rows()), missing);
  for (v1::JoinKind kind : {v1::JOIN_KIND_LEFT_OUTER, v1::JOIN_KIND_LEFT_SEMI}) {
    const v1::JoinResponse r = join(kind, {keys}, false);
    ASSERT_EQ(r.results_size(), 1);
    EXPECT_TRUE(r.results(0).overflow()) << v1::JoinKind_Name(kind);
  }
  const v1::JoinResponse counted = join(v1::JOIN_KIND_INNER, {keys}, true);
  ASSERT_EQ(counted.results_size(), 1);
  EXPECT_TRUE(counted.results(0).overflow());
  EXPECT_EQ(counted.results(0).count(), inner_left.size());
  // A batch join: both left batches say overflow, the one without a match too.
  const v1::JoinResponse batches = join(v1::JOIN_KIND_INNER, {{keys[0], keys[1]}, {1000}}, false);
  ASSERT_EQ(batches.results_size(), 2);
  EXPECT_TRUE(batches.results(0).overflow());
  EXPECT_TRUE(batches.results(1).overflow());
  EXPECT_EQ(batches.results(1).count(), 0u);

  // Another index is not affected, and a rebuild without overflow clears it.
  v1::BuildIndexResponse roomy;
  ASSERT_TRUE(Build(*stub_, {SpecMsg("roomy", 64), ChunkMsg(keys)}, &roomy).ok());
  const v1::JoinResponse other = join(v1::JOIN_KIND_INNER, {keys}, false, "roomy");
  ASSERT_EQ(other.results_size(), 1);
  EXPECT_FALSE(other.results(0).overflow());
  ASSERT_TRUE(
      Build(*stub_, {SpecMsg("spill", 64, {.replace = true}), ChunkMsg(keys)}, &built).ok());
  ASSERT_EQ(built.index().statistics().overflow_rows(), 0u);
  const v1::JoinResponse rebuilt = join(v1::JOIN_KIND_INNER, {keys}, false);
  ASSERT_EQ(rebuilt.results_size(), 1);
  EXPECT_FALSE(rebuilt.results(0).overflow());
  EXPECT_EQ(rebuilt.results(0).count(), keys.size());
}

TEST_F(ServerTest, ListDescribeDrop) {
  v1::BuildIndexResponse b1, b2;
  ASSERT_TRUE(Build(*stub_, {SpecMsg("b", 64), ChunkMsg({1, 2, 3})}, &b1).ok());
  ASSERT_TRUE(Build(*stub_, {SpecMsg("a", 32), ChunkMsg({4})}, &b2).ok());
  {
    grpc::ClientContext ctx;
    v1::ListIndexesResponse list;
    ASSERT_TRUE(stub_->ListIndexes(&ctx, v1::ListIndexesRequest(), &list).ok());
    ASSERT_EQ(list.indexes_size(), 2);
    EXPECT_EQ(list.indexes(0).name(), "a");
    EXPECT_EQ(list.indexes(1).name(), "b");
    EXPECT_EQ(list.indexes(1).statistics().unique_keys(), 3u);
  }
  {
    grpc::ClientContext ctx;
    v1::DescribeIndexRequest req;
    req.set_name("b");
    v1::DescribeIndexResponse d;
    ASSERT_TRUE(stub_->DescribeIndex(&ctx, req, &d).ok());
    EXPECT_EQ(d.index().capacity(), 64u);
    EXPECT_EQ(d.index().rows(), 3u);
    EXPECT_GT(d.index().built_unix_millis(), 0);
    EXPECT_EQ(d.index().backend(), "cpu");
  }
  {
    grpc::ClientContext ctx;
    v1::DropIndexRequest req;
    req.set_name("b");
    v1::DropIndexResponse d;
    ASSERT_TRUE(stub_->DropIndex(&ctx, req, &d).ok());
    EXPECT_EQ(d.dropped_version(), 1u);
    EXPECT_EQ(d.freed_bytes(), b1.index().device_bytes());
  }
  {
    grpc::ClientContext ctx;
    v1::DescribeIndexRequest req;
    req.set_name("b");
    v1::DescribeIndexResponse d;
    EXPECT_EQ(stub_->DescribeIndex(&ctx, req, &d).error_code(), grpc::StatusCode::NOT_FOUND);
  }
  grpc::ClientContext ctx;
  v1::GetServerInfoResponse info;
  ASSERT_TRUE(stub_->GetServerInfo(&ctx, v1::GetServerInfoRequest(), &info).ok());
  EXPECT_EQ(info.index_count(), 1u);
  EXPECT_EQ(info.device_memory_used_bytes(), b2.index().device_bytes());
}

TEST_F(ServerTest, DropWhileStreamingAnswersNotFoundInBandAndTheStreamGoesOn) {
  v1::BuildIndexResponse resp;
  ASSERT_TRUE(Build(*stub_, {SpecMsg("gone", 64), ChunkMsg({1, 2, 3})}, &resp).ok());
  grpc::ClientContext ctx;
  auto stream = stub_->Lookup(&ctx);
  v1::LookupResponse r;
  ASSERT_TRUE(stream->Write(LookupMsg("gone", {1, 2}, 1)));
  ASSERT_TRUE(stream->Read(&r));
  EXPECT_FALSE(r.has_error());
  {
    grpc::ClientContext dctx;
    v1::DropIndexRequest d;
    d.set_name("gone");
    v1::DropIndexResponse dr;
    ASSERT_TRUE(stub_->DropIndex(&dctx, d, &dr).ok());
  }
  ASSERT_TRUE(stream->Write(LookupMsg("gone", {1, 2}, 2)));
  ASSERT_TRUE(stream->Read(&r));
  ASSERT_TRUE(r.has_error());
  EXPECT_EQ(r.error().code(), static_cast<int>(grpc::StatusCode::NOT_FOUND));
  EXPECT_EQ(r.batch_id(), 2u);
  ASSERT_TRUE(
      Build(*stub_, {SpecMsg("gone", 64, {.first_value = 50}), ChunkMsg({1, 2, 3})}, &resp).ok());
  ASSERT_TRUE(stream->Write(LookupMsg("gone", {2}, 3)));
  ASSERT_TRUE(stream->Read(&r));
  EXPECT_FALSE(r.has_error());
  EXPECT_EQ(r.index_version(), 2u);  // versions keep increasing across drops
  EXPECT_EQ(UnpackColumn<uint32_t>(r.values()), std::vector<uint32_t>{51});
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());
}

// Every bad input gets its code (in-band for stream batches) and the server keeps serving.
TEST_F(ServerTest, BadInputsGetPreciseCodesAndTheServerStaysServing) {
  v1::BuildIndexResponse resp;
  ASSERT_TRUE(Build(*stub_, {SpecMsg("ok", 16), ChunkMsg({1, 2})}, &resp).ok());

  ExpectBadBuildsRefused();
  ASSERT_NO_FATAL_FAILURE(ExpectBadLookupsRefusedInBand());
  ASSERT_NO_FATAL_FAILURE(ExpectBadJoinsRefusedInBand());

  // Aggregate.
  auto agg = [](v1::AggregateOp op, uint32_t groups, int keys, int values, int mask) {
    v1::AggregateRequest r;
    r.set_op(op);
    r.set_groups(groups);
    for (int i = 0; i < keys; ++i) r.mutable_keys()->mutable_values()->add_v(i);
    for (int i = 0; i < values; ++i) r.mutable_values()->mutable_values()->add_v(1.0f);
    for (int i = 0; i < mask; ++i) r.mutable_mask()->mutable_values()->add_v(1);
    return r;
  };
  std::vector<v1::AggregateRequest> aggs = {
      agg(v1::AGGREGATE_OP_UNSPECIFIED, 4, 2, 0, 0), agg(v1::AGGREGATE_OP_SUM, 0, 2, 2, 0),
      agg(v1::AGGREGATE_OP_SUM, 4, 2, 0, 0),         agg(v1::AGGREGATE_OP_SUM, 4, 2, 3, 0),
      agg(v1::AGGREGATE_OP_SUM, 4, 2, 2, 1),         agg(v1::AGGREGATE_OP_COUNT, 4, 2, 0, 0),
      agg(v1::AGGREGATE_OP_SUM, 4, 2, 2, 0),  // fixed: sum over 4 groups
      agg(v1::AGGREGATE_OP_COUNT, 4, 2, 0, 0),
  };
  // Batches 0 and 1 fail admission (bad op, zero groups) and fix nothing; batch 2
  // has a valid op and group count, so it fixes the stream to SUM over 4 groups
  // (and then fails on its own missing values); the COUNT batches 5 and 7 differ.
  grpc::ClientContext actx;
  auto [ar, as] = RunStream<v1::AggregateRequest, v1::AggregateResponse>(
      [&](grpc::ClientContext* c) { return stub_->Aggregate(c); }, aggs, &actx);
  ASSERT_TRUE(as.ok());
  ASSERT_EQ(ar.size(), aggs.size());
  EXPECT_THAT(ar[0].error().message(), HasSubstr("op: 0 is not an operation"));
  EXPECT_THAT(ar[1].error().message(), HasSubstr("groups: must be at least 1"));
  EXPECT_THAT(ar[2].error().message(), HasSubstr("values: required for AGGREGATE_OP_SUM"));
  EXPECT_THAT(ar[3].error().message(), HasSubstr("values: 3 rows but keys has 2"));
  EXPECT_THAT(ar[4].error().message(), HasSubstr("mask: 1 rows but keys has 2"));
  EXPECT_THAT(ar[5].error().message(), HasSubstr("must stay the same within a stream"));
  EXPECT_FALSE(ar[6].has_error()) << ar[6].error().message();
  EXPECT_THAT(ar[7].error().message(), HasSubstr("must stay the same within a stream"));

  ASSERT_NO_FATAL_FAILURE(ExpectBadHashesRefusedInBand());
  ExpectBadUnaryCallsRefused();
  ExpectServing();
  auto [after, after_status] = Lookups(*stub_, {LookupMsg("ok", {2})});
  ASSERT_TRUE(after_status.ok());
  EXPECT_EQ(UnpackColumn<uint32_t>(after[0].values()), std::vector<uint32_t>{1});
  EXPECT_EQ(HealthStatus(server_->grpc_address()), 1);
}

// Lookup's bytes path (packed keys copied straight from the gRPC slices, responses
// referencing the engine's output buffer) answers exactly what the protobuf path
// does: every request goes twice through one stream, once with packed keys and
// once as a values list (which takes the protobuf path), with unknown fields in
// both; the responses must be byte-identical apart from the batch ID.
TEST_F(ServerTest, PackedAndListKeysGiveIdenticalLookupResponses) {
  std::mt19937 rng(11);
  std::vector<uint32_t> keys(5000);
  for (auto& k : keys) k = rng();
  v1::BuildIndexResponse built;
  ASSERT_TRUE(
      Build(*stub_, {SpecMsg("w", 16384, {.first_value = 1}), ChunkMsg(keys)}, &built).ok());
  std::vector<v1::LookupRequest> reqs;
  for (size_t rows : {1u, 7u, 1000u, 70000u, 250000u}) {
    for (int probes = 0; probes < 2; ++probes) {
      std::vector<uint32_t> q(rows);
      for (auto& k : q) k = rng() % 3 == 0 ? rng() : keys[rng() % keys.size()];
      v1::LookupRequest packed = LookupMsg("w", q, reqs.size());
      packed.set_want_probes(probes == 1);
      packed.GetReflection()->MutableUnknownFields(&packed)->AddVarint(99, rows);
      v1::LookupRequest list = packed;
      list.set_batch_id(reqs.size() + 1);
      list.mutable_keys()->clear_packed();
      for (uint32_t k : q) list.mutable_keys()->mutable_values()->add_v(k);
      reqs.push_back(packed);
      reqs.push_back(list);
    }
  }
  auto [lookups, status] = Lookups(*stub_, reqs);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(lookups.size(), reqs.size());
  for (size_t i = 0; i < reqs.size(); i += 2) {
    SCOPED_TRACE(::testing::Message() << "pair " << i / 2);
    ASSERT_FALSE(lookups[i].has_error()) << lookups[i].error().message();
    EXPECT_EQ(lookups[i].batch_id(), i);
    EXPECT_EQ(lookups[i + 1].batch_id(), i + 1);
    v1::LookupResponse a = lookups[i], b = lookups[i + 1];
    a.clear_batch_id();
    b.clear_batch_id();
    EXPECT_EQ(a.SerializeAsString(), b.SerializeAsString());
    EXPECT_EQ(a.values().size(), reqs[i].keys().packed().size());
    EXPECT_EQ(a.probes().size(), reqs[i].want_probes() ? a.values().size() : 0u);
  }
}

// A Lookup message that is not a LookupRequest at all ends the stream: the batches
// before it are answered and the call ends with INVALID_ARGUMENT naming the
// message (never OK; stream_integrity_test.cpp covers every stream RPC).
TEST_F(ServerTest, UnparseableLookupMessageEndsTheStream) {
  std::vector<uint32_t> keys = {1, 2, 3};
  v1::BuildIndexResponse built;
  ASSERT_TRUE(Build(*stub_, {SpecMsg("u", 16, {.first_value = 1}), ChunkMsg(keys)}, &built).ok());
  auto channel = grpc::CreateChannel(server_->grpc_address(), grpc::InsecureChannelCredentials());
  const grpc::internal::RpcMethod method("/gpujoin.v1.GpuJoin/Lookup",
                                         grpc::internal::RpcMethod::BIDI_STREAMING);
  grpc::ClientContext ctx;
  std::unique_ptr<grpc::ClientReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>> stream(
      grpc::internal::ClientReaderWriterFactory<grpc::ByteBuffer, grpc::ByteBuffer>::Create(
          channel.get(), method, &ctx));
  auto send = [&](const std::string& bytes) {
    grpc::Slice slice(bytes);
    return stream->Write(grpc::ByteBuffer(&slice, 1));
  };
  ASSERT_TRUE(send(LookupMsg("u", {2, 9}, 5).SerializeAsString()));
  grpc::ByteBuffer answer;
  ASSERT_TRUE(stream->Read(&answer));
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(answer.Dump(&slices).ok());
  std::string bytes;
  for (const auto& sl : slices) bytes.append(reinterpret_cast<const char*>(sl.begin()), sl.size());
  v1::LookupResponse first;
  ASSERT_TRUE(first.ParseFromString(bytes));
  EXPECT_EQ(first.batch_id(), 5u);
  EXPECT_EQ(UnpackColumn<uint32_t>(first.values()), (std::vector<uint32_t>{2, 0xffffffffu}));
  // Field 2 (keys) announcing 100 bytes of which only 2 follow.
  (void)send(std::string("\x12\x64\x0a\x04", 4));
  EXPECT_FALSE(stream->Read(&answer));
  stream->WritesDone();
  const grpc::Status end = stream->Finish();
  EXPECT_EQ(end.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << end.error_message();
  EXPECT_THAT(end.error_message(), HasSubstr("message 2 could not be parsed"));
  ExpectServing();
}

TEST_F(ServerTest, MessagesAboveFourMebibytesWork) {
  std::vector<uint32_t> keys(3'000'000);  // 12 MB of packed keys
  for (uint32_t i = 0; i < keys.size(); ++i) keys[i] = i;
  v1::BuildIndexResponse resp;
  ASSERT_TRUE(Build(*stub_, {SpecMsg("big", 1u << 23), ChunkMsg(keys)}, &resp).ok());
  EXPECT_EQ(resp.index().statistics().unique_keys(), keys.size());
  auto [r, s] = Lookups(*stub_, {LookupMsg("big", keys)});
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].statistics().found(), keys.size());
}

TEST_F(ServerTest, CancelMidStream) {
  v1::BuildIndexResponse resp;
  ASSERT_TRUE(Build(*stub_, {SpecMsg("c", 16), ChunkMsg({1})}, &resp).ok());
  grpc::ClientContext ctx;
  auto stream = stub_->Lookup(&ctx);
  v1::LookupResponse r;
  ASSERT_TRUE(stream->Write(LookupMsg("c", {1})));
  ASSERT_TRUE(stream->Read(&r));
  ctx.TryCancel();
  while (stream->Read(&r)) {
  }
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::CANCELLED);
  // A cancelled build leaves nothing behind either.
  {
    grpc::ClientContext bctx;
    v1::BuildIndexResponse br;
    auto writer = stub_->BuildIndex(&bctx, &br);
    ASSERT_TRUE(writer->Write(SpecMsg("c", 16, {.first_value = 7, .replace = true})));
    writer->Write(ChunkMsg({1}));
    bctx.TryCancel();
    EXPECT_EQ(writer->Finish().error_code(), grpc::StatusCode::CANCELLED);
  }
  auto [after, s] = Lookups(*stub_, {LookupMsg("c", {1})});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(after[0].index_version(), 1u);
  ExpectServing();
}

TEST_F(ServerTest, DeadlineMidStream) {
  v1::BuildIndexResponse resp;
  ASSERT_TRUE(Build(*stub_, {SpecMsg("d", 16), ChunkMsg({1})}, &resp).ok());
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(2000));  // generous: CI machines are busy
  auto stream = stub_->Lookup(&ctx);
  v1::LookupResponse r;
  ASSERT_TRUE(stream->Write(LookupMsg("d", {1})));
  ASSERT_TRUE(stream->Read(&r));
  EXPECT_FALSE(r.has_error());
  // Keep the stream open past its deadline.
  while (stream->Read(&r)) {
  }
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  ExpectServing();
}

TEST_F(ServerTest, MetricsMatchWhatTheTestDid) {
  std::vector<uint32_t> keys = {1, 2, 3, 3, 0xffffffffu, 4};
  v1::BuildIndexResponse resp;
  ASSERT_TRUE(Build(*stub_, {SpecMsg("m", 16), ChunkMsg(keys)}, &resp).ok());
  v1::BuildIndexResponse refused;
  ASSERT_EQ(Build(*stub_, {SpecMsg("m", 16)}, &refused).error_code(),
            grpc::StatusCode::ALREADY_EXISTS);
  auto [lookups, s] =
      Lookups(*stub_, {LookupMsg("m", {1, 2, 9}), LookupMsg("m", {4, 8}), LookupMsg("zz", {1})});
  ASSERT_TRUE(s.ok());
  v1::JoinRequest jr;
  jr.set_index("m");
  auto* lb = jr.add_batches();
  *lb->mutable_keys()->mutable_packed() = PackColumn<uint32_t>(std::vector<uint32_t>{3, 3, 5});
  lb->set_capacity(1);
  grpc::ClientContext jctx;
  auto [joins, js] = RunStream<v1::JoinRequest, v1::JoinResponse>(
      [&](grpc::ClientContext* c) { return stub_->Join(c); }, {jr}, &jctx);
  ASSERT_TRUE(js.ok());

  const std::string m = Metrics();
  ASSERT_FALSE(m.empty());
  const auto& st = resp.index().statistics();
  EXPECT_EQ(MetricValue(m, "gpujoin_index_capacity_slots{index=\"m\"}"), 16);
  EXPECT_EQ(MetricValue(m, "gpujoin_index_unique_keys{index=\"m\"}"), st.unique_keys());
  EXPECT_EQ(MetricValue(m, "gpujoin_index_duplicate_rows{index=\"m\"}"), 1);
  EXPECT_EQ(MetricValue(m, "gpujoin_index_invalid_rows{index=\"m\"}"), 1);
  EXPECT_EQ(MetricValue(m, "gpujoin_index_overflow_rows{index=\"m\"}"), 0);
  EXPECT_EQ(MetricValue(m, "gpujoin_index_build_probes{index=\"m\"}"), st.total_probes());
  EXPECT_EQ(MetricValue(m, "gpujoin_index_build_max_probes{index=\"m\"}"), st.max_probes());
  EXPECT_EQ(MetricValue(m, "gpujoin_index_probe_bound{index=\"m\"}"), 16);
  EXPECT_DOUBLE_EQ(MetricValue(m, "gpujoin_index_load_factor{index=\"m\"}"), 4.0 / 16);
  EXPECT_EQ(MetricValue(m, "gpujoin_index_device_bytes{index=\"m\"}"), resp.index().device_bytes());
  EXPECT_EQ(MetricValue(m, "gpujoin_index_version{index=\"m\"}"), 1);
  EXPECT_EQ(MetricValue(m, "gpujoin_index_builds_total{index=\"m\",result=\"ok\"}"), 1);
  EXPECT_EQ(MetricValue(m, "gpujoin_index_builds_total{index=\"m\",result=\"already_exists\"}"), 1);
  EXPECT_EQ(MetricValue(m, "gpujoin_query_rows_total{index=\"m\",op=\"lookup\"}"), 5);
  EXPECT_EQ(MetricValue(m, "gpujoin_query_found_total{index=\"m\",op=\"lookup\"}"), 3);
  EXPECT_EQ(MetricValue(m, "gpujoin_query_missing_total{index=\"m\",op=\"lookup\"}"), 2);
  EXPECT_EQ(MetricValue(m, "gpujoin_query_probes_total{index=\"m\",op=\"lookup\"}"),
            lookups[0].statistics().total_probes() + lookups[1].statistics().total_probes());
  EXPECT_EQ(MetricValue(m, "gpujoin_query_max_probes{index=\"m\",op=\"lookup\"}"),
            lookups[1].statistics().max_probes());
  EXPECT_EQ(MetricValue(m, "gpujoin_query_rows_total{index=\"m\",op=\"join\"}"), 3);
  EXPECT_EQ(MetricValue(m, "gpujoin_query_found_total{index=\"m\",op=\"join\"}"), 2);
  EXPECT_EQ(MetricValue(m, "gpujoin_join_pairs_total{index=\"m\"}"), 2);
  EXPECT_EQ(MetricValue(m, "gpujoin_join_overflow_batches_total{index=\"m\"}"), 1);
  EXPECT_EQ(MetricValue(m, "gpujoin_rpc_batches_total{rpc=\"Lookup\"}"), 3);
  // Accepted rows only: the batch on the unknown index "zz" adds none.
  EXPECT_EQ(MetricValue(m, "gpujoin_rpc_rows_total{rpc=\"Lookup\"}"), 5);
  EXPECT_EQ(MetricValue(m, "gpujoin_rpc_duration_seconds_count{rpc=\"Lookup\"}"), 3);
  EXPECT_EQ(MetricValue(m, "gpujoin_rpc_errors_total{code=\"NOT_FOUND\",rpc=\"Lookup\"}"), 1);
  EXPECT_EQ(MetricValue(m, "gpujoin_rpc_errors_total{code=\"ALREADY_EXISTS\",rpc=\"BuildIndex\"}"), 1);
  EXPECT_EQ(MetricValue(m, "gpujoin_indexes"), 1);
  EXPECT_EQ(MetricValue(m, "gpujoin_serving"), 1);
  EXPECT_EQ(MetricValue(m, "gpujoin_inflight_batches"), 0);
  EXPECT_EQ(MetricValue(m, "gpujoin_device_memory_used_bytes"), resp.index().device_bytes());
  EXPECT_GT(MetricValue(m, "gpujoin_device_memory_budget_bytes"), 0);
  EXPECT_GT(MetricValue(m, "gpujoin_device_memory_total_bytes"), 0);
  EXPECT_THAT(m, HasSubstr("gpujoin_backend_info{backend=\"cpu\",device="));

  grpc::ClientContext ctx;
  v1::DropIndexRequest d;
  d.set_name("m");
  v1::DropIndexResponse dr;
  ASSERT_TRUE(stub_->DropIndex(&ctx, d, &dr).ok());
  const std::string after = Metrics();
  EXPECT_THAT(after, ::testing::Not(HasSubstr("index=\"m\"")));
  EXPECT_EQ(MetricValue(after, "gpujoin_indexes"), 0);
  EXPECT_EQ(MetricValue(after, "gpujoin_device_memory_used_bytes"), 0);
}

class DrainTest : public ServerTest {
 protected:
  std::vector<std::string> Args() override { return {"--log-level=debug"}; }
};

TEST_F(DrainTest, SigtermDrainsAndExitsZero) {
  v1::BuildIndexResponse resp;
  ASSERT_TRUE(Build(*stub_, {SpecMsg("s", 16), ChunkMsg({1})}, &resp).ok());
  grpc::ClientContext ctx;
  auto stream = stub_->Lookup(&ctx);
  v1::LookupResponse r;
  ASSERT_TRUE(stream->Write(LookupMsg("s", {1})));
  ASSERT_TRUE(stream->Read(&r));
  EXPECT_FALSE(r.has_error());
  // The open, idle stream is ended by the drain with UNAVAILABLE; the process exits 0.
  std::thread stopper([&] { EXPECT_EQ(server_->StopWith(SIGTERM), 0); });
  while (stream->Read(&r)) {
  }
  grpc::Status s = stream->Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
  stopper.join();
  EXPECT_THAT(server_->log(), HasSubstr("received SIGTERM"));
  EXPECT_THAT(server_->log(), HasSubstr("drained; stopped")) << server_->log();
}

class BudgetTest : public ServerTest {
 protected:
  std::vector<std::string> Args() override {
    // Room for a 1024-slot table (8 bytes per slot on the CPU backend: 8 KiB)
    // but not for a 2^16-slot one.
    return {"--device-memory-limit=64K"};
  }
};

TEST_F(BudgetTest, RefusalKeepsTheOldIndexServing) {
  v1::BuildIndexResponse first;
  ASSERT_TRUE(
      Build(*stub_, {SpecMsg("k", 1024, {.first_value = 5}), ChunkMsg({1, 2, 3})}, &first).ok());
  v1::BuildIndexResponse refused;
  grpc::Status s =
      Build(*stub_, {SpecMsg("k", 1u << 16, {.first_value = 9, .replace = true}), ChunkMsg({1})},
            &refused);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(s.error_message(), HasSubstr("device memory budget"));
  EXPECT_THAT(s.error_message(), HasSubstr("index \"k\""));
  // Sized from rows (no capacity in the spec): refused at the end, same outcome.
  v1::BuildIndexRequest spec;
  spec.mutable_spec()->set_name("k2");
  std::vector<uint32_t> many(40000);
  for (uint32_t i = 0; i < many.size(); ++i) many[i] = i;
  EXPECT_EQ(Build(*stub_, {spec, ChunkMsg(many)}, &refused).error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);

  auto [r, ls] = Lookups(*stub_, {LookupMsg("k", {2})});
  ASSERT_TRUE(ls.ok());
  EXPECT_EQ(r[0].index_version(), 1u);
  EXPECT_EQ(UnpackColumn<uint32_t>(r[0].values()), std::vector<uint32_t>{6});
  const std::string m = Metrics();
  EXPECT_EQ(MetricValue(m, "gpujoin_index_builds_total{index=\"k\",result=\"resource_exhausted\"}"), 1);
  EXPECT_EQ(MetricValue(m, "gpujoin_device_memory_used_bytes"), first.index().device_bytes());
  EXPECT_EQ(MetricValue(m, "gpujoin_device_memory_budget_bytes"), 65536);
  EXPECT_EQ(MetricValue(m, "gpujoin_indexes"), 1);
}

class AuthTest : public ServerTest {
 protected:
  std::vector<std::string> Args() override {
    token_path_ = ::testing::TempDir() + "gpujoin_auth_token_" + std::to_string(getpid());
    std::ofstream(token_path_) << "t0ken\n";
    return {"--auth-token-file=" + token_path_};
  }
  void TearDown() override { std::remove(token_path_.c_str()); }
  std::string token_path_;
};

TEST_F(AuthTest, CallsNeedTheBearerToken) {
  {
    grpc::ClientContext ctx;
    v1::GetServerInfoResponse info;
    grpc::Status s = stub_->GetServerInfo(&ctx, v1::GetServerInfoRequest(), &info);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_THAT(s.error_message(), HasSubstr("missing"));
  }
  {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer wrong");
    v1::GetServerInfoResponse info;
    EXPECT_EQ(stub_->GetServerInfo(&ctx, v1::GetServerInfoRequest(), &info).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }
  v1::BuildIndexResponse resp;
  EXPECT_EQ(Build(*stub_, {SpecMsg("a", 16), ChunkMsg({1})}, &resp).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  ASSERT_TRUE(Build(*stub_, {SpecMsg("a", 16), ChunkMsg({1})}, &resp, "t0ken").ok());
  {
    grpc::ClientContext ctx;
    auto [r, s] = RunStream<v1::LookupRequest, v1::LookupResponse>(
        [&](grpc::ClientContext* c) { return stub_->Lookup(c); }, {LookupMsg("a", {1})}, &ctx);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_TRUE(r.empty());
  }
  {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer t0ken");
    auto [r, s] = RunStream<v1::LookupRequest, v1::LookupResponse>(
        [&](grpc::ClientContext* c) { return stub_->Lookup(c); }, {LookupMsg("a", {1})}, &ctx);
    ASSERT_TRUE(s.ok());
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0].statistics().found(), 1u);
  }
  // Health checks stay open (orchestrator probes carry no token).
  EXPECT_EQ(HealthStatus(server_->grpc_address()), 1);
  EXPECT_EQ(MetricValue(Metrics(), "gpujoin_rpc_errors_total{code=\"UNAUTHENTICATED\",rpc=\"Lookup\"}"), 1);
}

TEST_F(ServerTest, BatchModeAndExplicitValuesBuildsMatchTheEngine) {
  // Batch mode: chunks with their own row bases and validity masks.
  const std::vector<uint32_t> k0 = {5, 6, 7, 5}, k1 = {7, 8, 9}, m1 = {1, 0, 1};
  v1::BuildIndexRequest spec = SpecMsg("batch", 32);
  spec.mutable_spec()->set_batch_mode(true);
  v1::BuildIndexRequest c0 = ChunkMsg(k0);
  c0.mutable_chunk()->set_row_base(1000);
  v1::BuildIndexRequest c1 = ChunkMsg(k1);
  c1.mutable_chunk()->set_row_base(2000);
  *c1.mutable_chunk()->mutable_validity()->mutable_packed() = PackColumn<uint32_t>(m1);
  v1::BuildIndexResponse resp;
  grpc::Status s = Build(*stub_, {spec, c0, c1}, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_TRUE(resp.index().batch_mode());

  auto direct = backend_->CreateIndex(engine::HashIndexSpec{32, 0});
  ASSERT_TRUE(direct.ok());
  engine::BuildStatistics expected;
  {
    engine::CommandGraph g;
    engine::BuildBatchIndexNode node;
    node.index = direct->get();
    node.chunks = {engine::BatchChunk{k0, 1000, {}}, engine::BatchChunk{k1, 2000, m1}};
    node.statistics = &expected;
    g.Add(std::move(node));
    ASSERT_TRUE(backend_->Run(g).ok());
  }
  EXPECT_EQ(resp.index().statistics().unique_keys(), expected.unique_keys);
  EXPECT_EQ(resp.index().statistics().duplicate_rows(), expected.duplicate_rows);
  EXPECT_EQ(resp.index().statistics().invalid_rows(), expected.invalid_rows);
  EXPECT_EQ(expected.invalid_rows, 1u);
  const std::vector<uint32_t> q = {5, 6, 7, 8, 9};
  auto [r, ls] = Lookups(*stub_, {LookupMsg("batch", q)});
  ASSERT_TRUE(ls.ok());
  std::vector<uint32_t> values(q.size());
  {
    engine::CommandGraph g;
    engine::LookupNode node;
    node.index = direct->get();
    node.keys = {q};
    node.values = values;
    g.Add(std::move(node));
    ASSERT_TRUE(backend_->Run(g).ok());
  }
  EXPECT_EQ(UnpackColumn<uint32_t>(r[0].values()), values);
  EXPECT_EQ(values[0], 1000u);  // earliest row wins
  EXPECT_EQ(values[3], 0xffffffffu);  // masked out

  // Explicit values whose chunk boundaries differ from the keys'.
  v1::BuildIndexRequest ev = SpecMsg("explicit", 16);
  ev.mutable_spec()->set_explicit_values(true);
  v1::BuildIndexRequest a = ChunkMsg({1, 2, 3});
  a.mutable_chunk()->mutable_values()->mutable_values()->add_v(11);
  v1::BuildIndexRequest b;
  b.mutable_chunk()->mutable_values()->mutable_values()->add_v(22);
  b.mutable_chunk()->mutable_values()->mutable_values()->add_v(33);
  v1::BuildIndexRequest c = ChunkMsg({2, 4});
  *c.mutable_chunk()->mutable_values()->mutable_packed() = PackColumn<uint32_t>(std::vector<uint32_t>{44, 55});
  ASSERT_TRUE(Build(*stub_, {ev, a, b, c}, &resp).ok());
  EXPECT_EQ(resp.index().statistics().duplicate_rows(), 1u);
  auto [e, es] = Lookups(*stub_, {LookupMsg("explicit", {1, 2, 3, 4})});
  ASSERT_TRUE(es.ok());
  EXPECT_EQ(UnpackColumn<uint32_t>(e[0].values()), (std::vector<uint32_t>{11, 22, 33, 55}));
}

class FlowControlTest : public ServerTest {
 protected:
  std::vector<std::string> Args() override { return {"--max-inflight-per-stream=2"}; }
};

TEST_F(FlowControlTest, ManyBatchesThroughASmallWindowAllAnswerInOrder) {
  v1::BuildIndexResponse resp;
  ASSERT_TRUE(
      Build(*stub_, {SpecMsg("w", 64, {.first_value = 7}), ChunkMsg({1, 2, 3})}, &resp).ok());
  std::vector<v1::LookupRequest> reqs;
  for (uint64_t i = 0; i < 300; ++i) reqs.push_back(LookupMsg(i % 7 == 3 ? "nope" : "w", {2}, i));
  auto [r, s] = Lookups(*stub_, reqs);
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(r.size(), reqs.size());
  for (uint64_t i = 0; i < r.size(); ++i) {
    EXPECT_EQ(r[i].batch_id(), i);
    EXPECT_EQ(r[i].has_error(), i % 7 == 3) << i;
  }
  grpc::ClientContext ctx;
  v1::GetServerInfoResponse info;
  ASSERT_TRUE(stub_->GetServerInfo(&ctx, v1::GetServerInfoRequest(), &info).ok());
  EXPECT_EQ(info.max_inflight_batches_per_stream(), 2u);
}

// Lookups and joins of mixed sizes in one stream: with the CPU backend's default
// (--inline-batch-rows 4096) the small batches run on the gRPC thread and the
// large ones on the executor; with --inline-batch-rows=0 all go to the executor.
// Either way every answer is right and answers come back in request order.
class MixedBatchTest : public ServerTest, public ::testing::WithParamInterface<bool> {
 protected:
  std::vector<std::string> Args() override {
    if (GetParam()) return {};
    return {"--inline-batch-rows=0"};
  }
};

TEST_P(MixedBatchTest, SmallAndLargeBatchesAnswerInOrderAndRight) {
  EXPECT_THAT(server_->log(),
              HasSubstr(GetParam() ? "batches of at most 4096 rows run on the gRPC thread"
                                   : "batches of at most 0 rows run on the gRPC thread"));
  // Key 3j+1 has value 500 + j; keys = 2 (mod 3) miss.
  std::vector<uint32_t> keys(20000);
  for (uint32_t j = 0; j < keys.size(); ++j) keys[j] = 3 * j + 1;
  v1::BuildIndexResponse resp;
  ASSERT_TRUE(
      Build(*stub_, {SpecMsg("mix", 1u << 16, {.first_value = 500}), ChunkMsg(keys)}, &resp).ok());

  // Batch i asks for rows [i, i + n_i) of `keys` with every third key made a miss;
  // n_i alternates 8000 (executor) and 1..3 (inline when enabled).
  auto query = [&](uint64_t i, std::vector<uint32_t>* values, std::vector<uint8_t>* found) {
    const size_t n = i % 3 == 0 ? 8000 : 1 + i % 3;
    std::vector<uint32_t> q(n);
    values->assign(n, 0xffffffffu);
    found->assign(n, 0);
    for (size_t k = 0; k < n; ++k) {
      const uint32_t j = static_cast<uint32_t>(i + k);
      if (k % 3 == 2) {
        q[k] = 3 * j + 2;
      } else {
        q[k] = keys[j];
        (*values)[k] = 500 + j;
        (*found)[k] = 1;
      }
    }
    return q;
  };
  constexpr uint64_t kBatches = 60;
  std::vector<v1::LookupRequest> lookups;
  std::vector<v1::JoinRequest> joins;
  for (uint64_t i = 0; i < kBatches; ++i) {
    std::vector<uint32_t> values;
    std::vector<uint8_t> found;
    const std::vector<uint32_t> q = query(i, &values, &found);
    lookups.push_back(LookupMsg("mix", q, i));
    v1::JoinRequest jr;
    jr.set_index("mix");
    jr.set_batch_id(i);
    auto* lb = jr.add_batches();
    *lb->mutable_keys()->mutable_packed() = PackColumn<uint32_t>(q);
    lb->set_first_left_row(10 * i);
    joins.push_back(std::move(jr));
  }
  auto [lr, ls] = Lookups(*stub_, lookups);
  ASSERT_TRUE(ls.ok()) << ls.error_message();
  ASSERT_EQ(lr.size(), kBatches);
  grpc::ClientContext jctx;
  auto [jr, js] = RunStream<v1::JoinRequest, v1::JoinResponse>(
      [&](grpc::ClientContext* c) { return stub_->Join(c); }, joins, &jctx);
  ASSERT_TRUE(js.ok()) << js.error_message();
  ASSERT_EQ(jr.size(), kBatches);
  for (uint64_t i = 0; i < kBatches; ++i) {
    std::vector<uint32_t> values;
    std::vector<uint8_t> found;
    query(i, &values, &found);
    ASSERT_EQ(lr[i].batch_id(), i);
    ASSERT_FALSE(lr[i].has_error()) << lr[i].error().message();
    EXPECT_EQ(UnpackColumn<uint32_t>(lr[i].values()), values) << i;
    EXPECT_EQ(UnpackColumn<uint8_t>(lr[i].found()), found) << i;

    ASSERT_EQ(jr[i].batch_id(), i);
    ASSERT_FALSE(jr[i].has_error()) << jr[i].error().message();
    ASSERT_EQ(jr[i].results_size(), 1);
    std::vector<uint32_t> left, right;
    for (size_t k = 0; k < found.size(); ++k) {
      if (found[k] != 0) {
        left.push_back(static_cast<uint32_t>(10 * i + k));
        right.push_back(values[k]);
      }
    }
    EXPECT_EQ(jr[i].results(0).count(), left.size()) << i;
    EXPECT_EQ(UnpackColumn<uint32_t>(jr[i].results(0).left_rows()), left) << i;
    EXPECT_EQ(UnpackColumn<uint32_t>(jr[i].results(0).right_rows()), right) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(InlineOnOff, MixedBatchTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return p.param ? std::string("InlineSmallBatches")
                                          : std::string("AllOnTheExecutor");
                         });

class OverloadTest : public ServerTest {
 protected:
  std::vector<std::string> Args() override {
    return {"--max-inflight-batches=1", "--executor-threads=1"};
  }
};

// While one large batch holds the only global slot, batches of another stream
// are refused in-band with RESOURCE_EXHAUSTED naming the global limit, and that
// stream carries on.
TEST_F(OverloadTest, GlobalBoundRefusesInBandNamingTheLimit) {
  std::vector<uint32_t> keys(1 << 21);
  for (uint32_t i = 0; i < keys.size(); ++i) keys[i] = i;
  v1::BuildIndexResponse resp;
  ASSERT_TRUE(Build(*stub_, {SpecMsg("o", 1u << 22), ChunkMsg(keys)}, &resp).ok());
  bool refused = false;
  // Each attempt races a small-batch stream against one large batch; the large
  // batch takes far longer than a small round trip, so the first attempt
  // practically always overlaps. Retry a few times rather than assert timing.
  for (int attempt = 0; attempt < 5 && !refused; ++attempt) {
    std::atomic<bool> big_done{false};
    std::thread big([&] {
      auto [r, s] = Lookups(*stub_, {LookupMsg("o", keys)});
      EXPECT_TRUE(s.ok());
      big_done.store(true);
    });
    grpc::ClientContext ctx;
    auto stream = stub_->Lookup(&ctx);
    uint64_t id = 0;
    while (!big_done.load() && !refused) {
      ASSERT_TRUE(stream->Write(LookupMsg("o", {1}, id++)));
      v1::LookupResponse r;
      ASSERT_TRUE(stream->Read(&r));
      if (r.has_error()) {
        EXPECT_EQ(r.error().code(), static_cast<int>(grpc::StatusCode::RESOURCE_EXHAUSTED));
        EXPECT_THAT(r.error().message(), HasSubstr("--max-inflight-batches"));
        refused = true;
      }
    }
    big.join();
    // The same stream goes on once the slot is free.
    ASSERT_TRUE(stream->Write(LookupMsg("o", {1}, id++)));
    v1::LookupResponse r;
    ASSERT_TRUE(stream->Read(&r));
    EXPECT_FALSE(r.has_error()) << r.error().message();
    stream->WritesDone();
    EXPECT_TRUE(stream->Finish().ok());
  }
  EXPECT_TRUE(refused);
}

class TlsTest : public ServerTest {
 protected:
  std::vector<std::string> Args() override {
    return {std::string("--tls-cert=") + GPUJOIN_SERVER_TESTDATA + "/server.pem",
            std::string("--tls-key=") + GPUJOIN_SERVER_TESTDATA + "/server.key"};
  }
};

TEST_F(TlsTest, ServesTlsOnly) {
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = Slurp(std::string(GPUJOIN_SERVER_TESTDATA) + "/server.pem");
  auto tls = v1::GpuJoin::NewStub(
      grpc::CreateChannel(server_->grpc_address(), grpc::SslCredentials(options)));
  {
    grpc::ClientContext ctx;
    v1::GetServerInfoResponse info;
    grpc::Status s = tls->GetServerInfo(&ctx, v1::GetServerInfoRequest(), &info);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_TRUE(info.serving());
  }
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  v1::GetServerInfoResponse info;
  EXPECT_EQ(stub_->GetServerInfo(&ctx, v1::GetServerInfoRequest(), &info).error_code(),
            grpc::StatusCode::UNAVAILABLE);  // plaintext client against a TLS server
}

// Runs gpujoind with `args` to completion; returns its exit code and output
// (stdout, then stderr).
std::pair<int, std::string> RunGpujoind(std::vector<std::string> args) {
  args.insert(args.begin(), gpujoin::testing::GpujoindBinary());
  const gpujoin::testing::RunResult r = gpujoin::testing::RunProcess(args);
  return {r.code, r.out + r.err};
}

TEST(ServerStartup, BadFlagsAndUnusableFilesFailClearly) {
  auto [code, out] = RunGpujoind({"--device-memory-limit=12Q"});
  EXPECT_EQ(code, 2);
  EXPECT_THAT(out, HasSubstr("--device-memory-limit"));
  std::tie(code, out) =
      RunGpujoind({"--listen=127.0.0.1:0", "--metrics-listen=none", "--backend=cpu",
                   "--auth-token-file=/nonexistent/gpujoin-token"});
  EXPECT_EQ(code, 1);
  EXPECT_THAT(out, HasSubstr("--auth-token-file: cannot read \"/nonexistent/gpujoin-token\""));
  std::tie(code, out) = RunGpujoind({"--help"});
  EXPECT_EQ(code, 0);
  EXPECT_THAT(out, HasSubstr("--max-message-bytes"));
}

}  // namespace
}  // namespace gpujoin::server
