// Faults a long-lived server must survive without losing data or memory, through
// the real gpujoind over loopback gRPC. The backend is the CPU one, or
// the one GPUJOIN_TEST_BACKEND names (bench/device_run.sh runs these with "cuda"
// on the H200); the assertions hold on both:
//  - a client process killed mid-stream (a half-sent build, unread lookup answers)
//    leaves nothing behind: no index, no staged bytes, no batches in flight;
//  - eight streams checking every answer while the index is rebuilt, with a
//    failed rebuild between good ones, never see a mixed or missing version;
//  - staging that exhausts the memory budget is refused at the chunk that crosses
//    it, and the serving version and the budget are as before.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "build_messages.hpp"
#include "gpujoin/engine/types.hpp"
#include "wire/column_codec.hpp"
#include "gpujoin/testing/eventually.hpp"
#include "gpujoin/testing/loopback.hpp"
#include "gpujoin/testing/prometheus_text.hpp"
#include "gpujoin/testing/server_process.hpp"
#include "gpujoin/testing/subprocess.hpp"
#include "gpujoin/v1/gpujoin.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace gpujoin::server {
namespace {

using gpujoin::server::testing::Build;
using gpujoin::server::testing::ChunkMsg;
using gpujoin::server::testing::Info;
using gpujoin::server::testing::Iota;
using gpujoin::server::testing::LookupMsg;
using gpujoin::server::testing::SpecMsg;
using gpujoin::testing::HttpGet;
using gpujoin::testing::MetricValue;
using gpujoin::testing::ServerOptions;
using gpujoin::testing::ServerProcess;
using ::testing::HasSubstr;

// The backend is TestBackend(): $GPUJOIN_TEST_BACKEND or cpu.
ServerOptions On(std::vector<std::string> extra = {}) {
  return ServerOptions{.extra_args = std::move(extra), .metrics = true};
}

std::vector<std::string> IndexNames(v1::GpuJoin::Stub& stub) {
  grpc::ClientContext ctx;
  v1::ListIndexesResponse list;
  EXPECT_TRUE(stub.ListIndexes(&ctx, v1::ListIndexesRequest(), &list).ok());
  std::vector<std::string> names;
  for (const auto& i : list.indexes()) names.push_back(i.name());
  return names;
}

using gpujoin::testing::Eventually;

// The vanishing client next to this test binary (both are in the build's tests/
// directory, and in a device bundle's bin/).
std::string VanishingClient() {
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  std::string dir = n > 0 ? std::string(self, n) : std::string();
  dir = dir.substr(0, dir.rfind('/') + 1);
  return dir + "gpujoin_vanishing_client";
}

// Regression test for the resources a dead client could pin: a process killed
// with SIGKILL in the middle of a build (five chunks staged, input not ended)
// and of a Lookup stream (eight batches written, none of the answers read).
TEST(Faults, ClientKilledMidStreamLeavesNothingBehind) {
  ServerProcess server(On());
  ASSERT_TRUE(server.ready()) << server.log();
  auto stub = v1::GpuJoin::NewStub(
      grpc::CreateChannel(server.grpc_address(), grpc::InsecureChannelCredentials()));
  ASSERT_TRUE(Build(*stub, {SpecMsg("keep", 1 << 17), ChunkMsg(Iota(50000))}).ok());

  int out[2];
  ASSERT_EQ(pipe(out), 0);
  std::string error;
  const pid_t client = gpujoin::testing::Spawn(
      {VanishingClient(), server.grpc_address(), "keep", "half"}, -1, out[1], out[1], &error);
  close(out[1]);
  ASSERT_GT(client, 0) << error;
  std::string said;
  pollfd p{out[0], POLLIN, 0};
  while (said.find("ready\n") == std::string::npos && poll(&p, 1, 30000) > 0) {
    char buf[256];
    const ssize_t n = read(out[0], buf, sizeof(buf));
    if (n <= 0) break;
    said.append(buf, n);
  }
  close(out[0]);
  ASSERT_THAT(said, HasSubstr("ready")) << said;
  // The server holds the half-sent build's chunks.
  EXPECT_TRUE(Eventually([&] { return Info(*stub).staged_bytes() >= 5 * 40000; }))
      << Info(*stub).staged_bytes();

  EXPECT_EQ(gpujoin::testing::StopProcess(client, SIGKILL, std::chrono::seconds(5)),
            128 + SIGKILL);
  EXPECT_TRUE(Eventually([&] { return Info(*stub).staged_bytes() == 0; }))
      << Info(*stub).staged_bytes() << " bytes still staged";
  EXPECT_TRUE(Eventually([&] {
    return MetricValue(HttpGet(server.metrics_address(), "/metrics"),
                       "gpujoin_inflight_batches") == 0;
  }));
  EXPECT_THAT(IndexNames(*stub), ::testing::ElementsAre("keep"));
  const v1::GetServerInfoResponse info = Info(*stub);
  EXPECT_TRUE(info.serving());
  EXPECT_EQ(info.device_memory_used_bytes(), (1u << 17) * 8);  // the one table

  // And the server goes on answering, on a fresh stream.
  grpc::ClientContext ctx;
  auto stream = stub->Lookup(&ctx);
  ASSERT_TRUE(stream->Write(LookupMsg("keep", {1, 50000, 50001}, 7)));
  stream->WritesDone();
  v1::LookupResponse r;
  ASSERT_TRUE(stream->Read(&r));
  EXPECT_EQ(UnpackColumn<uint32_t>(r.values()),
            (std::vector<uint32_t>{0, 49999, gpujoin::engine::kEmptyKey}));
  EXPECT_TRUE(stream->Finish().ok());
}

// Eight streams check every answer while the index is rebuilt ten times; every
// other rebuild fails (a bad chunk after good ones) and must change nothing.
// Version v maps key k to v * 1,000,000 + row(k), so a mixed-version or
// half-built answer shows.
TEST(Faults, RebuildsUnderEightCheckingStreamsNeverMixOrLoseVersions) {
  ServerProcess server(On());
  ASSERT_TRUE(server.ready()) << server.log();
  auto stub = v1::GpuJoin::NewStub(
      grpc::CreateChannel(server.grpc_address(), grpc::InsecureChannelCredentials()));
  std::vector<uint32_t> keys(20000);
  for (uint32_t i = 0; i < keys.size(); ++i) keys[i] = i * 7 + 1;
  const std::vector<uint32_t> half(keys.begin(), keys.begin() + 10000);
  const std::vector<uint32_t> rest(keys.begin() + 10000, keys.end());
  ASSERT_TRUE(
      Build(*stub, {SpecMsg("hot", 1 << 16, {.first_value = 1000000}), ChunkMsg(keys)}).ok());

  constexpr int kStreams = 8;
  std::atomic<bool> stop{false};
  std::atomic<int> failures{0};
  std::atomic<uint64_t> max_version_seen{1};
  std::vector<std::atomic<int>> answered(kStreams);
  std::vector<std::thread> streams;
  for (int s = 0; s < kStreams; ++s) {
    streams.emplace_back([&, s] {
      auto own = v1::GpuJoin::NewStub(
          grpc::CreateChannel(server.grpc_address(), grpc::InsecureChannelCredentials()));
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
      auto stream = own->Lookup(&ctx);
      uint64_t id = 0;
      while (!stop.load() || answered[s].load() == 0) {
        if (!stream->Write(LookupMsg("hot", keys, id))) break;
        v1::LookupResponse r;
        if (!stream->Read(&r)) break;
        if (r.has_error() || r.batch_id() != id) {
          failures.fetch_add(1);
          ADD_FAILURE() << "stream " << s << " batch " << id << ": " << r.error().message();
          break;
        }
        ++id;
        answered[s].fetch_add(1);
        const auto values = UnpackColumn<uint32_t>(r.values());
        const uint64_t v = r.index_version();
        uint64_t seen = max_version_seen.load();
        while (v > seen && !max_version_seen.compare_exchange_weak(seen, v)) {
        }
        bool ok = values.size() == keys.size();
        for (uint32_t i = 0; ok && i < values.size(); ++i) ok = values[i] == v * 1000000 + i;
        if (!ok) {
          failures.fetch_add(1);
          ADD_FAILURE() << "stream " << s << " batch " << id << ": version " << v
                        << " answered wrongly";
          break;
        }
      }
      stream->WritesDone();
      const grpc::Status st = stream->Finish();
      if (!st.ok()) {
        failures.fetch_add(1);
        ADD_FAILURE() << "stream " << s << ": " << st.error_message();
      }
    });
  }
  // A failed rebuild installs nothing and takes no version number, so each good
  // rebuild is the next version, built with that version's value base.
  uint64_t expected_version = 1;
  for (int round = 1; round <= 10; ++round) {
    if (round % 2 == 0) {
      // Half the rows, then a chunk that fails validation: nothing installed.
      v1::BuildIndexRequest bad;
      bad.mutable_chunk()->mutable_keys()->set_packed("\x01\x02\x03");  // 3 bytes: not uint32s
      const grpc::Status s =
          Build(*stub, {SpecMsg("hot", 1 << 16, {.first_value = 99000000, .replace = true}),
                        ChunkMsg(half), bad});
      EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
    } else {
      v1::BuildIndexResponse r;
      const uint64_t base = (expected_version + 1) * 1000000;
      const grpc::Status s = Build(*stub,
                                   {SpecMsg("hot", 1 << 16, {.first_value = base, .replace = true}),
                                    ChunkMsg(half), ChunkMsg(rest)},
                                   &r);
      ASSERT_TRUE(s.ok()) << s.error_message();
      EXPECT_EQ(r.index().version(), expected_version + 1);
      expected_version = r.index().version();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  stop.store(true);
  for (auto& t : streams) t.join();
  EXPECT_EQ(failures.load(), 0);
  for (int s = 0; s < kStreams; ++s) EXPECT_GT(answered[s].load(), 0) << "stream " << s;
  EXPECT_EQ(max_version_seen.load(), expected_version);
}

// Staging that exhausts the memory budget: an auto-sized rebuild streamed chunk
// by chunk is refused at the chunk where its table, build and staged input stop
// fitting beside the serving version, long before its input ends; the serving
// version answers as before, the budget holds only its table again, and a
// rebuild that fits still works.
TEST(Faults, StagingThatExhaustsTheBudgetKeepsTheServingVersion) {
  ServerProcess server(On({"--device-memory-limit=6M"}));
  ASSERT_TRUE(server.ready()) << server.log();
  auto stub = v1::GpuJoin::NewStub(
      grpc::CreateChannel(server.grpc_address(), grpc::InsecureChannelCredentials()));
  ASSERT_TRUE(Build(*stub, {SpecMsg("live", 1 << 16), ChunkMsg(Iota(20000))}).ok());
  const uint64_t table = (1u << 16) * 8;
  ASSERT_EQ(Info(*stub).device_memory_used_bytes(), table);

  constexpr int kChunks = 40;  // 10 MiB of keys against a 6 MiB budget
  grpc::ClientContext ctx;
  v1::BuildIndexResponse resp;
  auto writer = stub->BuildIndex(&ctx, &resp);
  v1::BuildIndexRequest spec;
  spec.mutable_spec()->set_name("live");
  spec.mutable_spec()->set_replace(true);
  writer->Write(spec);
  int written = 0;
  for (; written < kChunks; ++written) {
    if (!writer->Write(ChunkMsg(Iota(1 << 16, 1 + (uint32_t{1} << 16) * written)))) break;
  }
  writer->WritesDone();
  const grpc::Status s = writer->Finish();
  ASSERT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("device memory budget exceeded"));
  EXPECT_THAT(s.error_message(), HasSubstr("bytes of staged input"));
  EXPECT_THAT(s.error_message(), HasSubstr("--device-memory-limit"));
  const size_t at = s.error_message().find("chunks[");
  ASSERT_NE(at, std::string::npos) << s.error_message();
  const int refused_chunk = std::atoi(s.error_message().c_str() + at + 7);
  EXPECT_LT(refused_chunk, 8) << s.error_message();  // 2 Mi rows would need 32 MiB of table

  EXPECT_TRUE(Eventually([&] { return Info(*stub).staged_bytes() == 0; }));
  EXPECT_EQ(Info(*stub).device_memory_used_bytes(), table);
  {
    grpc::ClientContext lctx;
    auto stream = stub->Lookup(&lctx);
    ASSERT_TRUE(stream->Write(LookupMsg("live", {1, 20000, 20001}, 1)));
    stream->WritesDone();
    v1::LookupResponse r;
    ASSERT_TRUE(stream->Read(&r));
    EXPECT_EQ(r.index_version(), 1u);
    EXPECT_EQ(UnpackColumn<uint32_t>(r.values()),
              (std::vector<uint32_t>{0, 19999, gpujoin::engine::kEmptyKey}));
    EXPECT_TRUE(stream->Finish().ok());
  }
  v1::BuildIndexResponse rebuilt;
  ASSERT_TRUE(
      Build(*stub, {SpecMsg("live", 1 << 16, {.replace = true}), ChunkMsg(Iota(30000))}, &rebuilt)
          .ok());
  EXPECT_EQ(rebuilt.index().version(), 2u);
  EXPECT_EQ(Info(*stub).device_memory_used_bytes(), table);
}

}  // namespace
}  // namespace gpujoin::server
