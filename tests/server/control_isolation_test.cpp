// Isolation of control calls and the drain's grace, through the real gpujoind
// (CPU backend) over loopback gRPC:
//  - unary control calls (GetServerInfo, ListIndexes, DescribeIndex) run on their
//    own executor, so they are answered while the batch executor is saturated by
//    heavy lookups, not after them (before: GetServerInfo took 27 s behind heavy
//    batches);
//  - on SIGTERM the server keeps listening with health NOT_SERVING for
//    --drain-grace seconds, so that a load balancer sees it before the listener
//    closes (before: the listener closed at once and NOT_SERVING was never seen).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "wire/column_codec.hpp"
#include "gpujoin/testing/health_check.hpp"
#include "gpujoin/testing/server_process.hpp"
#include "gpujoin/v1/gpujoin.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace gpujoin::server {
namespace {

using gpujoin::testing::HealthStatus;
using gpujoin::testing::ServerProcess;
using Clock = std::chrono::steady_clock;

std::vector<uint32_t> Keys(uint32_t n, uint32_t salt) {
  std::vector<uint32_t> v(n);
  for (uint32_t i = 0; i < n; ++i) v[i] = (i ^ salt) * 2654435761u + 17u;
  return v;
}

TEST(ControlIsolation, ControlCallsAreAnsweredWhileHeavyBatchesRun) {
  // One batch thread and one engine thread: 8 streams of large lookups keep the
  // batch executor busy for seconds.
  ServerProcess server(gpujoin::testing::ServerOptions{
      .extra_args = {"--executor-threads=1", "--cpu-threads=1", "--inline-batch-rows=0",
                     "--max-inflight-per-stream=2"}});
  ASSERT_TRUE(server.ready()) << server.log();
  auto stub = v1::GpuJoin::NewStub(
      grpc::CreateChannel(server.grpc_address(), grpc::InsecureChannelCredentials()));
  constexpr uint32_t kIndexRows = 1u << 20;
  {
    grpc::ClientContext ctx;
    v1::BuildIndexResponse resp;
    auto writer = stub->BuildIndex(&ctx, &resp);
    v1::BuildIndexRequest spec;
    spec.mutable_spec()->set_name("big");
    spec.mutable_spec()->set_capacity(kIndexRows * 2);
    ASSERT_TRUE(writer->Write(spec));
    v1::BuildIndexRequest chunk;
    *chunk.mutable_chunk()->mutable_keys()->mutable_packed() =
        PackColumn<uint32_t>(Keys(kIndexRows, 0));
    ASSERT_TRUE(writer->Write(chunk));
    writer->WritesDone();
    ASSERT_TRUE(writer->Finish().ok());
  }
  // 2^19-key batches: their answers (2.6 MB) stay under the client's default
  // 4 MiB receive limit.
  constexpr int kStreams = 8, kBatches = 12;
  constexpr uint32_t kBatchRows = 1u << 19;
  v1::LookupRequest batch;
  batch.set_index("big");
  *batch.mutable_keys()->mutable_packed() = PackColumn<uint32_t>(Keys(kBatchRows, 5));
  std::atomic<int> answered{0};
  std::vector<std::thread> streams;
  for (int t = 0; t < kStreams; ++t) {
    streams.emplace_back([&] {
      auto channel = grpc::CreateChannel(server.grpc_address(), grpc::InsecureChannelCredentials());
      auto s = v1::GpuJoin::NewStub(channel);
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));  // never hang
      auto stream = s->Lookup(&ctx);
      // Write on a thread of its own while this one reads: the server reads only
      // --max-inflight-per-stream batches ahead of the answers consumed, so a
      // client that wrote everything before reading could block on flow control.
      std::thread writer([&] {
        for (int b = 0; b < kBatches; ++b)
          if (!stream->Write(batch)) break;
        stream->WritesDone();
      });
      v1::LookupResponse r;
      while (stream->Read(&r)) {
        EXPECT_FALSE(r.has_error()) << r.error().message();
        answered.fetch_add(1);
      }
      writer.join();
      const grpc::Status st = stream->Finish();
      EXPECT_TRUE(st.ok()) << st.error_code() << ": " << st.error_message();
    });
  }
  // Let the batches reach the executor, then time the control calls.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const auto start = Clock::now();
  {
    grpc::ClientContext ctx;
    v1::GetServerInfoResponse info;
    EXPECT_TRUE(stub->GetServerInfo(&ctx, v1::GetServerInfoRequest(), &info).ok());
  }
  {
    grpc::ClientContext ctx;
    v1::ListIndexesResponse list;
    EXPECT_TRUE(stub->ListIndexes(&ctx, v1::ListIndexesRequest(), &list).ok());
    EXPECT_EQ(list.indexes_size(), 1);
  }
  {
    grpc::ClientContext ctx;
    v1::DescribeIndexRequest req;
    req.set_name("big");
    v1::DescribeIndexResponse resp;
    EXPECT_TRUE(stub->DescribeIndex(&ctx, req, &resp).ok());
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  const int answered_by_then = answered.load();
  for (auto& t : streams) t.join();
  const double batches = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_EQ(answered.load(), kStreams * kBatches);
  // The premise: the batches were still running when the control calls returned
  // (96 lookups of 2^19 keys on one engine thread take seconds).
  ASSERT_LT(answered_by_then, kStreams * kBatches) << "the batches finished too soon to test";
  // Three control calls on a free control executor take milliseconds; behind the
  // batch queue they would take as long as the remaining batches. Measured
  // against those (not a fixed bound), so that a loaded machine slows both alike.
  EXPECT_LT(seconds, 0.25 * batches)
      << "control calls (" << seconds << " s) waited behind batch work (" << batches << " s)";
}

TEST(DrainGrace, HealthIsNotServingWhileTheListenerStaysOpen) {
  ServerProcess server(gpujoin::testing::ServerOptions{.extra_args = {"--drain-grace=3"}});
  ASSERT_TRUE(server.ready()) << server.log();
  EXPECT_EQ(HealthStatus(server.grpc_address(), "", std::chrono::seconds(5)), 1);
  const auto start = Clock::now();
  std::thread stopper([&] { EXPECT_EQ(server.StopWith(SIGTERM), 0); });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  // Within the grace: still listening, and health says NOT_SERVING.
  EXPECT_EQ(HealthStatus(server.grpc_address(), "", std::chrono::seconds(5)), 2) << server.log();
  stopper.join();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_GE(seconds, 2.5) << "the listener closed before the grace ended";
  EXPECT_LT(seconds, 20.0);
  EXPECT_THAT(server.log(), ::testing::HasSubstr("NOT_SERVING for 3 s"));
}

// An idle BuildIndex stream (a spec sent, no more chunks, no half-close) is ended
// by the drain with UNAVAILABLE and installs nothing, instead of holding the
// shutdown for the whole --drain-timeout (10 s here; before: 31 s with the
// default 30). Under load it also failed with gpujoind aborting in the drain
// ("pure virtual method called", exit 134): the reactor cancelled its call after
// Finish, when gRPC could already have freed it.
TEST(DrainGrace, IdleBuildStreamIsEndedByTheDrain) {
  ServerProcess server;
  ASSERT_TRUE(server.ready()) << server.log();
  std::thread stopper;
  const auto start = Clock::now();
  grpc::Status s;
  {
    auto stub = v1::GpuJoin::NewStub(
        grpc::CreateChannel(server.grpc_address(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    v1::BuildIndexResponse resp;
    auto writer = stub->BuildIndex(&ctx, &resp);
    v1::BuildIndexRequest spec;
    spec.mutable_spec()->set_name("idle");
    spec.mutable_spec()->set_capacity(64);
    ASSERT_TRUE(writer->Write(spec));
    v1::BuildIndexRequest chunk;
    *chunk.mutable_chunk()->mutable_keys()->mutable_packed() = PackColumn<uint32_t>(Keys(10, 1));
    ASSERT_TRUE(writer->Write(chunk));
    stopper = std::thread([&] { EXPECT_EQ(server.StopWith(SIGTERM), 0) << server.log(); });
    s = writer->Finish();  // without WritesDone: the stream stays open until the drain
  }                        // the client drops the call, as one that got an error does
  stopper.join();
  // The drain ends the call with UNAVAILABLE ("... not installed"); a call that
  // reached the server only after the drain began is refused at admission
  // ("shutting down"). The client may also see its stream reset (CANCELLED) when
  // the process exits before it reads the trailers. In every case the build
  // failed and never reached its install.
  EXPECT_TRUE(s.error_code() == grpc::StatusCode::UNAVAILABLE ||
              s.error_code() == grpc::StatusCode::CANCELLED)
      << s.error_code() << ": " << s.error_message() << "\n"
      << server.log();
  if (s.error_code() == grpc::StatusCode::UNAVAILABLE) {
    EXPECT_THAT(s.error_message(), ::testing::AnyOf(::testing::HasSubstr("not installed"),
                                                    ::testing::HasSubstr("shutting down")));
  }
  // Not the whole --drain-timeout (10 s here).
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 5.0)
      << "the idle build stream held the shutdown\n"
      << server.log();
}

// A BuildIndex stream whose client is still sending chunks when the drain comes:
// its reads complete while the drain's poke is on its way to the reactor, which
// must not let the call finish (and gRPC delete the reactor) before the poke has
// driven it. The server exits 0 and the build is refused, never installed. Three
// rounds, the drain landing at a different point of the stream each time.
TEST(DrainGrace, BuildStreamStillSendingIsEndedByTheDrain) {
  for (int round = 0; round < 3; ++round) {
    ServerProcess server;
    ASSERT_TRUE(server.ready()) << server.log();
    std::thread stopper;
    const auto start = Clock::now();
    grpc::Status s;
    {
      auto stub = v1::GpuJoin::NewStub(
          grpc::CreateChannel(server.grpc_address(), grpc::InsecureChannelCredentials()));
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));  // never hang
      v1::BuildIndexResponse resp;
      auto writer = stub->BuildIndex(&ctx, &resp);
      v1::BuildIndexRequest spec;
      spec.mutable_spec()->set_name("busy");
      ASSERT_TRUE(writer->Write(spec));
      v1::BuildIndexRequest chunk;
      *chunk.mutable_chunk()->mutable_keys()->mutable_packed() =
          PackColumn<uint32_t>(Keys(64, static_cast<uint32_t>(round)));
      stopper = std::thread([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(20 * round));
        EXPECT_EQ(server.StopWith(SIGTERM), 0) << server.log();
      });
      // Until the server ends the stream (a write then fails), or a bounded number.
      for (int i = 0; i < 100000 && writer->Write(chunk); ++i) {
      }
      s = writer->Finish();
    }  // the client drops the call and its channel, as one that got an error does
    stopper.join();
    EXPECT_TRUE(s.error_code() == grpc::StatusCode::UNAVAILABLE ||
                s.error_code() == grpc::StatusCode::CANCELLED)
        << "round " << round << ": " << s.error_code() << ": " << s.error_message() << "\n"
        << server.log();
    EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 5.0)
        << "round " << round << ": the build stream held the shutdown\n"
        << server.log();
  }
}

TEST(DrainGrace, ZeroGraceStopsAtOnce) {
  ServerProcess server(gpujoin::testing::ServerOptions{.extra_args = {"--drain-grace=0"}});
  ASSERT_TRUE(server.ready()) << server.log();
  const auto start = Clock::now();
  EXPECT_EQ(server.StopWith(SIGTERM), 0);
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 2.5);
}

}  // namespace
}  // namespace gpujoin::server
