// Host memory a client can make the server hold, through the real gpujoind over
// loopback gRPC (CPU backend, or the one GPUJOIN_TEST_BACKEND names):
//  - responses that clients do not read count against
//    --max-pending-response-bytes: the server's RSS stays bounded, the batches
//    beyond it are answered in-band with RESOURCE_EXHAUSTED naming the flag, and
//    a well-behaved stream on the same server keeps working;
//  - a stream whose responses waiting to be written hold a message's worth stops
//    reading (no new batch runs for it) until its client reads;
//  - a host allocation that cannot be had (under an address-space cap) is that
//    request's RESOURCE_EXHAUSTED, and the server keeps serving.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "build_messages.hpp"
#include "wire/column_codec.hpp"
#include "gpujoin/testing/eventually.hpp"
#include "gpujoin/testing/loopback.hpp"
#include "gpujoin/testing/prometheus_text.hpp"
#include "gpujoin/testing/server_process.hpp"
#include "gpujoin/v1/gpujoin.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace gpujoin::server {
namespace {

using gpujoin::server::testing::Build;
using gpujoin::server::testing::ChunkMsg;
using gpujoin::server::testing::Info;
using gpujoin::testing::HttpGet;
using gpujoin::testing::MetricValue;
using gpujoin::testing::ProcessStatusBytes;
using gpujoin::testing::ServerOptions;
using gpujoin::testing::ServerProcess;
using ::testing::HasSubstr;

constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr int kResourceExhausted = 8;  // google.rpc.Code

using AggregateStream = grpc::ClientReaderWriter<v1::AggregateRequest, v1::AggregateResponse>;

std::unique_ptr<v1::GpuJoin::Stub> NewStub(const ServerProcess& server) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  return v1::GpuJoin::NewStub(
      grpc::CreateCustomChannel(server.grpc_address(), grpc::InsecureChannelCredentials(), args));
}

double Metric(const ServerProcess& server, const std::string& series) {
  return MetricValue(HttpGet(server.metrics_address(), "/metrics"), series);
}

using gpujoin::testing::Eventually;

// Waits until no batch is in flight and the server's RSS has stopped moving
// (three polls 100 ms apart within 1 MiB), for up to 20 s; returns the RSS.
uint64_t SettledRss(const ServerProcess& server) {
  uint64_t last = 0;
  int still = 0;
  for (int i = 0; i < 200 && still < 3; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const uint64_t rss = ProcessStatusBytes(server.pid(), "VmRSS");
    const bool idle = Metric(server, "gpujoin_inflight_batches") == 0;
    still = idle && rss + kMiB > last && rss < last + kMiB ? still + 1 : 0;
    last = rss;
  }
  return last;
}

// A float32 SUM batch over `groups` groups with three rows: groups 0, 1 and the
// last get 1, 2 and 4.
v1::AggregateRequest SumBatch(uint64_t groups, uint64_t batch_id) {
  v1::AggregateRequest r;
  r.set_op(v1::AGGREGATE_OP_SUM);
  r.set_groups(groups);
  r.set_batch_id(batch_id);
  const std::vector<uint32_t> keys = {0, 1, static_cast<uint32_t>(groups - 1)};
  *r.mutable_keys()->mutable_packed() = PackColumn<uint32_t>(keys);
  const std::vector<float> values = {1.0f, 2.0f, 4.0f};
  *r.mutable_values()->mutable_packed() = PackColumn<float>(values);
  return r;
}

float FloatAt(const std::string& packed, uint64_t i) {
  float v = 0;
  std::memcpy(&v, packed.data() + i * 4, 4);
  return v;
}

// Checks one answer to SumBatch(groups, batch_id) on a stream where `ok_before`
// batches were answered OK before it: OK with this batch's sums and the totals
// of ok_before + 1 batches, or RESOURCE_EXHAUSTED naming
// --max-pending-response-bytes. Returns whether it was OK.
bool CheckSumAnswer(const v1::AggregateResponse& r, uint64_t groups, uint64_t batch_id,
                    int ok_before) {
  EXPECT_EQ(r.batch_id(), batch_id);
  if (r.has_error()) {
    EXPECT_EQ(r.error().code(), kResourceExhausted) << r.error().message();
    EXPECT_THAT(r.error().message(), HasSubstr("--max-pending-response-bytes"));
    return false;
  }
  EXPECT_EQ(r.values().size(), groups * 4);
  EXPECT_EQ(r.total_values().size(), groups * 4);
  if (r.values().size() != groups * 4 || r.total_values().size() != groups * 4) return true;
  EXPECT_EQ(FloatAt(r.values(), 0), 1.0f);
  EXPECT_EQ(FloatAt(r.values(), 1), 2.0f);
  EXPECT_EQ(FloatAt(r.values(), 2), 0.0f);
  EXPECT_EQ(FloatAt(r.values(), groups - 1), 4.0f);
  const float n = static_cast<float>(ok_before + 1);
  EXPECT_EQ(FloatAt(r.total_values(), 0), n * 1.0f);
  EXPECT_EQ(FloatAt(r.total_values(), 1), n * 2.0f);
  EXPECT_EQ(FloatAt(r.total_values(), groups - 1), n * 4.0f);
  return true;
}

// Regression test: responses that clients never read were kept without bound
// (eight tiny SUM batches of 2^22 groups held about 1 GiB per stream, and enough
// streams exhausted the host). Here four streams whose clients do not read send
// eight batches of 2^20 groups each (about 32 MiB held per response, 1 GiB in
// all before the limit); with --max-pending-response-bytes=96M the server's RSS
// grows by far less, the refused batches say why in-band, the answered ones are
// right, and a well-behaved stream is served meanwhile.
TEST(UnreadResponses, StayWithinTheServerWideLimit) {
  constexpr uint64_t kGroups = uint64_t{1} << 20;
  constexpr int kStreams = 4;
  constexpr int kBatches = 8;
  ServerProcess server(ServerOptions{
      .extra_args = {"--max-pending-response-bytes=96M", "--max-message-bytes=16M"},
      .metrics = true});
  ASSERT_TRUE(server.ready()) << server.log();
  auto stub = NewStub(server);
  const v1::GetServerInfoResponse before = Info(*stub);
  EXPECT_EQ(before.max_pending_response_bytes(), 96 * kMiB);
  EXPECT_EQ(before.pending_response_bytes(), 0u);
  EXPECT_EQ(Metric(server, "gpujoin_pending_response_limit_bytes"), 96.0 * kMiB);
  const uint64_t base = SettledRss(server);

  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::unique_ptr<AggregateStream>> streams;
  for (int s = 0; s < kStreams; ++s) {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    streams.push_back(stub->Aggregate(contexts.back().get()));
    for (int b = 0; b < kBatches; ++b) ASSERT_TRUE(streams.back()->Write(SumBatch(kGroups, b)));
  }
  const uint64_t held = SettledRss(server);
  const uint64_t growth = held > base ? held - base : 0;
  // The limit, plus what the two executor threads and the allocator keep of the
  // responses they built and dropped; before the limit it grew by about 700 MiB here.
  EXPECT_LT(growth, 320 * kMiB) << "RSS " << base / kMiB << " -> " << held / kMiB << " MiB";
  const v1::GetServerInfoResponse during = Info(*stub);
  EXPECT_GT(during.pending_response_bytes(), 0u);
  EXPECT_LE(during.pending_response_bytes(), 96 * kMiB);
  EXPECT_EQ(Metric(server, "gpujoin_pending_response_bytes"),
            static_cast<double>(during.pending_response_bytes()));
  EXPECT_GT(Metric(server, "gpujoin_pending_response_refusals_total"), 0);

  // A client that reads is served meanwhile (its small responses fit beside).
  {
    grpc::ClientContext ctx;
    auto good = stub->Aggregate(&ctx);
    for (int b = 0; b < 3; ++b) ASSERT_TRUE(good->Write(SumBatch(16, b)));
    good->WritesDone();
    v1::AggregateResponse r;
    int ok = 0;
    while (good->Read(&r)) {
      ASSERT_FALSE(r.has_error()) << r.error().message();
      CheckSumAnswer(r, 16, ok, ok);
      ++ok;
    }
    EXPECT_EQ(ok, 3);
    EXPECT_TRUE(good->Finish().ok());
  }

  // Now the clients read: every batch is answered, right or refused in-band.
  int answered = 0, refused = 0;
  for (int s = 0; s < kStreams; ++s) {
    streams[s]->WritesDone();
    int ok = 0;
    v1::AggregateResponse r;
    for (int b = 0; b < kBatches; ++b) {
      ASSERT_TRUE(streams[s]->Read(&r)) << "stream " << s << " batch " << b;
      if (CheckSumAnswer(r, kGroups, b, ok)) {
        ++ok;
      } else {
        ++refused;
      }
    }
    answered += ok;
    EXPECT_FALSE(streams[s]->Read(&r));
    const grpc::Status status = streams[s]->Finish();
    EXPECT_TRUE(status.ok()) << status.error_message();
  }
  EXPECT_GT(answered, 0);
  EXPECT_GT(refused, 0);
  EXPECT_EQ(Metric(server, "gpujoin_pending_response_refusals_total"), refused);
  EXPECT_TRUE(Eventually([&] { return Info(*stub).pending_response_bytes() == 0; }));
  EXPECT_EQ(Metric(server, "gpujoin_pending_response_bytes"), 0);
}

// A stream whose responses waiting behind the one being written hold
// --max-message-bytes or more reads no new batch (so runs none) until its client
// reads; then it goes on.
TEST(UnreadResponses, AStreamThatIsNotReadStopsRunningBatches) {
  // One response holds about 64 MiB (2^21 groups), over the 32 MiB message.
  constexpr uint64_t kGroups = uint64_t{1} << 21;
  ServerProcess server(ServerOptions{.extra_args = {"--max-message-bytes=32M"}, .metrics = true});
  ASSERT_TRUE(server.ready()) << server.log();
  auto stub = NewStub(server);
  const std::string batches = R"(gpujoin_rpc_batches_total{rpc="Aggregate"})";

  grpc::ClientContext ctx;
  auto stream = stub->Aggregate(&ctx);
  // Batch 0's response is being written (the client does not take it), batch
  // 1's waits behind it; the read posted before batch 1 was answered takes batch
  // 2 (gRPC cannot take a read back). Then the stream reads nothing.
  for (int b = 0; b < 3; ++b) {
    ASSERT_TRUE(stream->Write(SumBatch(kGroups, b)));
    EXPECT_TRUE(Eventually([&] { return Metric(server, batches) == b + 1; })) << b;
  }
  EXPECT_TRUE(Eventually([&] { return Metric(server, "gpujoin_paused_streams") == 1; }));
  for (int b = 3; b < 6; ++b) ASSERT_TRUE(stream->Write(SumBatch(kGroups, b)));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(Metric(server, batches), 3) << "batches ran for a stream that is not read";

  stream->WritesDone();
  v1::AggregateResponse r;
  int ok = 0;
  while (stream->Read(&r)) {
    ASSERT_TRUE(CheckSumAnswer(r, kGroups, ok, ok)) << r.error().message();
    ++ok;
  }
  EXPECT_EQ(ok, 6);
  EXPECT_TRUE(stream->Finish().ok());
  EXPECT_EQ(Metric(server, batches), 6);
  EXPECT_EQ(Metric(server, "gpujoin_paused_streams"), 0);
}

// Regression test: a Join whose pairs the host cannot allocate ended in
// std::bad_alloc on an executor thread and gpujoind aborted (exit -6): 3,000
// left rows of a key with 2^18 rows on a keep_all index at capacity 2^31
// allocate the pairs --max-result-bytes allows (4 GiB here, 2 GiB per column),
// which an address-space cap 512 MiB above the server's size refuses at the
// first column (so the rest of the server keeps its 512 MiB of room). Each is
// answered RESOURCE_EXHAUSTED in-band and the server goes on serving.
TEST(HostMemory, AnAllocationThatCannotBeHadIsResourceExhaustedNotAnAbort) {
  ServerProcess server(ServerOptions{.extra_args = {"--max-result-bytes=4G"}});
  ASSERT_TRUE(server.ready()) << server.log();
  auto stub = NewStub(server);
  v1::BuildIndexRequest spec;
  spec.mutable_spec()->set_name("groups");
  spec.mutable_spec()->set_capacity(1 << 10);
  spec.mutable_spec()->set_duplicates(v1::DUPLICATE_POLICY_KEEP_ALL);
  ASSERT_TRUE(Build(*stub, {spec, ChunkMsg(std::vector<uint32_t>(1 << 18, 7))}).ok());

  const uint64_t size = ProcessStatusBytes(server.pid(), "VmSize");
  ASSERT_GT(size, 0u);
  const rlimit cap{size + 512 * kMiB, size + 512 * kMiB};
  ASSERT_EQ(prlimit(server.pid(), RLIMIT_AS, &cap, nullptr), 0);

  v1::JoinRequest join;
  join.set_index("groups");
  v1::LeftBatch* left = join.add_batches();
  *left->mutable_keys()->mutable_packed() = PackColumn<uint32_t>(std::vector<uint32_t>(3000, 7));
  left->set_capacity(uint64_t{1} << 31);
  {
    grpc::ClientContext ctx;
    auto stream = stub->Join(&ctx);
    for (uint64_t b = 0; b < 2; ++b) {
      join.set_batch_id(b);
      ASSERT_TRUE(stream->Write(join));
    }
    stream->WritesDone();
    v1::JoinResponse r;
    int answered = 0;
    while (stream->Read(&r)) {
      EXPECT_EQ(r.error().code(), kResourceExhausted) << r.ShortDebugString().substr(0, 200);
      EXPECT_THAT(r.error().message(), HasSubstr("host memory"));
      ++answered;
    }
    EXPECT_EQ(answered, 2) << server.log();
    const grpc::Status status = stream->Finish();
    EXPECT_TRUE(status.ok()) << status.error_message();
  }
  // Still serving: a join that fits is answered.
  join.mutable_batches(0)->set_capacity(0);
  {
    grpc::ClientContext ctx;
    auto stream = stub->Join(&ctx);
    ASSERT_TRUE(stream->Write(join));
    stream->WritesDone();
    v1::JoinResponse r;
    ASSERT_TRUE(stream->Read(&r));
    EXPECT_FALSE(r.has_error()) << r.error().message();
    ASSERT_EQ(r.results_size(), 1);
    EXPECT_EQ(r.results(0).left_rows().size(), 3000u * 4);
    EXPECT_TRUE(stream->Finish().ok());
  }
  EXPECT_TRUE(Info(*stub).serving());
  // Alive, not a zombie (which has no VmRSS): it never aborted.
  EXPECT_GT(ProcessStatusBytes(server.pid(), "VmRSS"), 0u) << server.log();
}

}  // namespace
}  // namespace gpujoin::server
