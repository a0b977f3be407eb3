// Bounded metrics, index names and values that wrap
// through the real gpujoind (CPU backend) over loopback gRPC: failed builds with
// new names add no per-index series, a drop removes an index's series, rejected
// batches and builds add no rows to gpujoin_rpc_rows_total, "." and ".." are not
// index names, generated values never reach the missing marker 0xffffffff, and
// request integers wider than 32 bits are rejected rather than truncated.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "build_messages.hpp"
#include "wire/column_codec.hpp"
#include "gpujoin/testing/loopback.hpp"
#include "gpujoin/testing/prometheus_text.hpp"
#include "gpujoin/testing/server_process.hpp"
#include "gpujoin/v1/gpujoin.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace gpujoin::server {
namespace {

using gpujoin::server::testing::WithVarint;

using gpujoin::server::testing::ChunkMsg;
using gpujoin::server::testing::Info;
using gpujoin::server::testing::Iota;
using gpujoin::server::testing::SpecMsg;

using gpujoin::testing::HttpGet;
using gpujoin::testing::MetricValue;
using gpujoin::testing::ServerProcess;
using ::testing::HasSubstr;

constexpr uint64_t k2To32 = uint64_t{1} << 32;

// Sample lines of a Prometheus exposition that contain `needle` (a count keeps a
// failure message short where the exposition has thousands of lines).
int SamplesContaining(const std::string& exposition, const std::string& needle) {
  int count = 0;
  size_t begin = 0;
  while (begin < exposition.size()) {
    size_t end = exposition.find('\n', begin);
    if (end == std::string::npos) end = exposition.size();
    const std::string_view line(exposition.data() + begin, end - begin);
    if (!line.starts_with('#') && line.find(needle) != std::string_view::npos) ++count;
    begin = end + 1;
  }
  return count;
}

class LimitsIntegrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = std::make_unique<ServerProcess>(gpujoin::testing::ServerOptions{.metrics = true});
    ASSERT_TRUE(server_->ready()) << "gpujoind did not become ready; log:\n" << server_->log();
    stub_ = v1::GpuJoin::NewStub(
        grpc::CreateChannel(server_->grpc_address(), grpc::InsecureChannelCredentials()));
  }

  grpc::Status Build(const std::vector<v1::BuildIndexRequest>& messages,
                     v1::BuildIndexResponse* response = nullptr) {
    v1::BuildIndexResponse ignored;
    grpc::ClientContext ctx;
    auto writer = stub_->BuildIndex(&ctx, response == nullptr ? &ignored : response);
    for (const auto& m : messages) {
      if (!writer->Write(m)) break;
    }
    writer->WritesDone();
    return writer->Finish();
  }

  // One batch on a Lookup stream; the stream itself must end OK.
  v1::LookupResponse LookupOne(const v1::LookupRequest& request) {
    grpc::ClientContext ctx;
    auto stream = stub_->Lookup(&ctx);
    EXPECT_TRUE(stream->Write(request));
    stream->WritesDone();
    v1::LookupResponse response;
    EXPECT_TRUE(stream->Read(&response));
    EXPECT_TRUE(stream->Finish().ok());
    return response;
  }

  v1::HashResponse HashOne(const v1::HashRequest& request) {
    grpc::ClientContext ctx;
    auto stream = stub_->Hash(&ctx);
    EXPECT_TRUE(stream->Write(request));
    stream->WritesDone();
    v1::HashResponse response;
    EXPECT_TRUE(stream->Read(&response));
    EXPECT_TRUE(stream->Finish().ok());
    return response;
  }

  // /metrics once the counters of the calls just finished are in: the server
  // counts a call after it sent the status, so wait for `series` to reach `want`.
  std::string MetricsWhen(const std::string& series, double want) {
    std::string text;
    for (int i = 0; i < 1000; ++i) {  // up to 10 s: a loaded CI machine counts late
      text = HttpGet(server_->metrics_address(), "/metrics");
      if (MetricValue(text, series) == want) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return text;
  }

  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<v1::GpuJoin::Stub> stub_;
};

// Regression: each failed build with a new name created a permanent
// gpujoin_index_builds_total{index=...} series (5,000 names grew /metrics from
// 14 KB to 390 KB).
TEST_F(LimitsIntegrationTest, FailedBuildsWithNewNamesAddNoSeries) {
  constexpr int kFailed = 100;
  for (int i = 0; i < kFailed; ++i) {
    // Capacity 12 is not a power of two: INVALID_ARGUMENT at the spec.
    grpc::Status s = Build({SpecMsg("failed" + std::to_string(i), 12), ChunkMsg({1})});
    ASSERT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  }
  const std::string text = MetricsWhen(
      "gpujoin_rpc_errors_total{code=\"INVALID_ARGUMENT\",rpc=\"BuildIndex\"}", kFailed);
  EXPECT_EQ(
      MetricValue(text, "gpujoin_rpc_errors_total{code=\"INVALID_ARGUMENT\",rpc=\"BuildIndex\"}"),
      kFailed);
  EXPECT_EQ(SamplesContaining(text, "index=\"failed"), 0);
  EXPECT_EQ(SamplesContaining(text, "gpujoin_index_builds_total{"), 0);
}

TEST_F(LimitsIntegrationTest, ALiveIndexHasSeriesUntilItIsDropped) {
  ASSERT_TRUE(Build({SpecMsg("live", 16), ChunkMsg({1, 2, 3})}).ok());
  // A failed rebuild of the live name is counted on its series.
  ASSERT_EQ(Build({SpecMsg("live", 16), ChunkMsg({1})}).error_code(),
            grpc::StatusCode::ALREADY_EXISTS);
  std::string text =
      MetricsWhen("gpujoin_index_builds_total{index=\"live\",result=\"already_exists\"}", 1);
  EXPECT_EQ(MetricValue(text, "gpujoin_index_builds_total{index=\"live\",result=\"ok\"}"), 1);
  EXPECT_EQ(
      MetricValue(text, "gpujoin_index_builds_total{index=\"live\",result=\"already_exists\"}"), 1);
  EXPECT_EQ(MetricValue(text, "gpujoin_index_capacity_slots{index=\"live\"}"), 16);

  grpc::ClientContext ctx;
  v1::DropIndexRequest drop;
  drop.set_name("live");
  v1::DropIndexResponse dropped;
  ASSERT_TRUE(stub_->DropIndex(&ctx, drop, &dropped).ok());
  text = MetricsWhen("gpujoin_indexes", 0);
  EXPECT_EQ(SamplesContaining(text, "index=\"live\""), 0);
  // A failed build of the dropped name does not bring them back.
  ASSERT_EQ(Build({SpecMsg("live", 12)}).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  text = MetricsWhen("gpujoin_rpc_errors_total{code=\"INVALID_ARGUMENT\",rpc=\"BuildIndex\"}", 1);
  EXPECT_EQ(SamplesContaining(text, "index=\"live\""), 0);
}

// Regression: rejected requests added the rows they claimed to
// gpujoin_rpc_rows_total (a Hash batch claiming 1.8e19 rows took it to 1.8e19).
TEST_F(LimitsIntegrationTest, RowCountersCountAcceptedRowsOnly) {
  v1::HashRequest hash;
  auto* col = hash.add_columns();
  col->set_type(v1::COLUMN_TYPE_UINT32);
  col->set_data(PackColumn<uint32_t>(std::vector<uint32_t>{1, 2}));
  col->set_length(18000000000000000000ull);  // claims 1.8e19 rows; has 2
  v1::HashResponse bad = HashOne(hash);
  EXPECT_EQ(bad.error().code(), static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT));
  col->set_length(2);
  v1::HashResponse good = HashOne(hash);
  EXPECT_EQ(good.error().code(), 0) << good.error().message();

  v1::LookupRequest lookup;
  lookup.set_index("absent");
  *lookup.mutable_keys()->mutable_packed() = PackColumn<uint32_t>(std::vector<uint32_t>(1000, 5));
  EXPECT_EQ(LookupOne(lookup).error().code(), static_cast<int>(grpc::StatusCode::NOT_FOUND));

  // A build that fails after its rows arrived (duplicate spec) adds none of them.
  ASSERT_EQ(Build({SpecMsg("r", 16), ChunkMsg({1, 2, 3, 4, 5}), SpecMsg("r", 16)}).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  ASSERT_TRUE(Build({SpecMsg("r", 16), ChunkMsg({1, 2, 3})}).ok());

  const std::string text = MetricsWhen("gpujoin_rpc_batches_total{rpc=\"BuildIndex\"}", 2);
  EXPECT_EQ(MetricValue(text, "gpujoin_rpc_batches_total{rpc=\"Hash\"}"), 2);
  EXPECT_EQ(MetricValue(text, "gpujoin_rpc_rows_total{rpc=\"Hash\"}"), 2);
  EXPECT_EQ(MetricValue(text, "gpujoin_rpc_batches_total{rpc=\"Lookup\"}"), 1);
  EXPECT_EQ(MetricValue(text, "gpujoin_rpc_rows_total{rpc=\"Lookup\"}"), 0);
  EXPECT_EQ(MetricValue(text, "gpujoin_rpc_rows_total{rpc=\"BuildIndex\"}"), 3);
}

// Regression: "." and ".." were accepted as index names.
TEST_F(LimitsIntegrationTest, DotAndDotDotAreNotIndexNames) {
  for (const char* name : {".", ".."}) {
    grpc::Status s = Build({SpecMsg(name, 16), ChunkMsg({1})});
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << name;
    EXPECT_THAT(s.error_message(), HasSubstr("spec.name"));
    EXPECT_THAT(s.error_message(), HasSubstr("reserved"));
    grpc::ClientContext ctx;
    v1::DescribeIndexRequest describe;
    describe.set_name(name);
    v1::DescribeIndexResponse described;
    s = stub_->DescribeIndex(&ctx, describe, &described);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << name;
    EXPECT_THAT(s.error_message(), HasSubstr("name: index name \""));
  }
  ASSERT_TRUE(Build({SpecMsg("...", 16), ChunkMsg({1})}).ok());
  grpc::ClientContext ctx;
  v1::ListIndexesResponse list;
  ASSERT_TRUE(stub_->ListIndexes(&ctx, v1::ListIndexesRequest(), &list).ok());
  ASSERT_EQ(list.indexes_size(), 1);
  EXPECT_EQ(list.indexes(0).name(), "...");
}

// Regression: first_value + row past 0xfffffffe was accepted, and a found key
// returned the missing marker 0xffffffff (or a wrapped small value).
TEST_F(LimitsIntegrationTest, GeneratedValuesNeverReachTheMissingMarker) {
  grpc::Status s =
      Build({SpecMsg("w", 16, {.first_value = 0xfffffffcu}), ChunkMsg({1, 2}), ChunkMsg({3, 4})});
  ASSERT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_THAT(s.error_message(),
              HasSubstr("spec.first_value: 4294967292 + 4 rows - 1 = 4294967295"));
  EXPECT_THAT(s.error_message(), HasSubstr("exceeds 4294967294"));
  EXPECT_THAT(s.error_message(), HasSubstr("at most 3 rows fit"));

  ASSERT_TRUE(
      Build({SpecMsg("w", 16, {.first_value = 0xfffffffcu}), ChunkMsg({1, 2}), ChunkMsg({3})})
          .ok());
  v1::LookupRequest lookup;
  lookup.set_index("w");
  *lookup.mutable_keys()->mutable_packed() = PackColumn<uint32_t>(std::vector<uint32_t>{3, 1, 4});
  v1::LookupResponse r = LookupOne(lookup);
  ASSERT_EQ(r.error().code(), 0) << r.error().message();
  EXPECT_EQ(UnpackColumn<uint32_t>(r.values()),
            (std::vector<uint32_t>{0xfffffffeu, 0xfffffffcu, 0xffffffffu}));
  EXPECT_EQ(r.found(), std::string("\x01\x01\x00", 3));
}

// Regression: a capacity sent as a varint above 2^32 was truncated to its low
// bits (2^32 + 16 built a 16-slot table).
TEST_F(LimitsIntegrationTest, WideCapacityIsRejectedNotTruncated) {
  v1::BuildIndexRequest spec = SpecMsg("c", 0);
  *spec.mutable_spec() = WithVarint(spec.spec(), 2, k2To32 + 16);
  grpc::Status s = Build({spec, ChunkMsg({1, 2})});
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("spec.capacity: 4294967312 does not fit in 32 bits"));
  grpc::ClientContext ctx;
  v1::ListIndexesResponse list;
  ASSERT_TRUE(stub_->ListIndexes(&ctx, v1::ListIndexesRequest(), &list).ok());
  EXPECT_EQ(list.indexes_size(), 0);

  // Lookup's max_probe_count above 2^32 (truncated to 1 before).
  ASSERT_TRUE(Build({SpecMsg("c", 16), ChunkMsg({1, 2})}).ok());
  v1::LookupRequest lookup;
  lookup.set_index("c");
  *lookup.mutable_keys()->mutable_packed() = PackColumn<uint32_t>(std::vector<uint32_t>{1});
  v1::LookupResponse r = LookupOne(WithVarint(lookup, 4, k2To32 + 1));
  EXPECT_EQ(r.error().code(), static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT));
  EXPECT_THAT(r.error().message(),
              HasSubstr("max_probe_count: 4294967297 exceeds the capacity 16"));
}

}  // namespace
}  // namespace gpujoin::server

namespace gpujoin::server {
namespace {

// Open BuildIndex streams hold their staged input until they finish, so their
// number is bounded (24 unfinished builds held 874 MiB):
// with --max-concurrent-builds=2 a third open build is RESOURCE_EXHAUSTED naming
// the flag, and once one finishes a new build is admitted again.
TEST(ConcurrentBuilds, BuildsOverTheLimitAreRefusedUntilOneFinishes) {
  ServerProcess server(
      gpujoin::testing::ServerOptions{.extra_args = {"--max-concurrent-builds=2"}});
  ASSERT_TRUE(server.ready()) << server.log();
  auto channel = grpc::CreateChannel(server.grpc_address(), grpc::InsecureChannelCredentials());
  auto stub = v1::GpuJoin::NewStub(channel);
  struct Open {
    grpc::ClientContext ctx;
    v1::BuildIndexResponse resp;
    std::unique_ptr<grpc::ClientWriter<v1::BuildIndexRequest>> writer;
  };
  Open a, b;
  a.writer = stub->BuildIndex(&a.ctx, &a.resp);
  b.writer = stub->BuildIndex(&b.ctx, &b.resp);
  ASSERT_TRUE(a.writer->Write(SpecMsg("a", 16)));
  ASSERT_TRUE(b.writer->Write(SpecMsg("b", 16)));
  // Both calls reach the server before the third (one connection, in order).
  {
    grpc::ClientContext ctx;
    v1::ListIndexesResponse list;
    ASSERT_TRUE(stub->ListIndexes(&ctx, v1::ListIndexesRequest(), &list).ok());
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  auto third = [&](const std::string& name) {
    grpc::ClientContext ctx;
    v1::BuildIndexResponse resp;
    auto writer = stub->BuildIndex(&ctx, &resp);
    writer->Write(SpecMsg(name, 16));
    writer->Write(ChunkMsg({1, 2, 3}));
    writer->WritesDone();
    return writer->Finish();
  };
  const grpc::Status refused = third("c");
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << refused.error_message();
  EXPECT_THAT(refused.error_message(), HasSubstr("--max-concurrent-builds=2"));
  // Finish one of the open builds: the next build is admitted.
  ASSERT_TRUE(a.writer->Write(ChunkMsg({7})));
  a.writer->WritesDone();
  ASSERT_TRUE(a.writer->Finish().ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the slot is given back in OnDone
  const grpc::Status admitted = third("d");
  EXPECT_TRUE(admitted.ok()) << admitted.error_message();
  b.writer->WritesDone();
  EXPECT_TRUE(b.writer->Finish().ok());
}

// A channel with its own connection (gRPC shares one between channels to the same
// target and arguments otherwise).
std::shared_ptr<grpc::Channel> OwnConnection(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
}

// An open BuildIndex stream: the spec, and chunks written as the test goes.
struct OpenBuild {
  OpenBuild(v1::GpuJoin::Stub& stub, const std::string& name) {
    writer = stub.BuildIndex(&ctx, &resp);
    v1::BuildIndexRequest spec;
    spec.mutable_spec()->set_name(name);
    writer->Write(spec);
  }
  grpc::Status Finish() {
    writer->WritesDone();
    return writer->Finish();
  }
  grpc::ClientContext ctx;
  v1::BuildIndexResponse resp;
  std::unique_ptr<grpc::ClientWriter<v1::BuildIndexRequest>> writer;
};

// Regression (512 MiB staged against a 12 KiB table was accepted): the
// input of open builds counts from its first chunk, per build
// (--max-build-staged-bytes) and over all builds (--max-staged-bytes); the
// chunk that crosses a limit fails its build with RESOURCE_EXHAUSTED naming the
// flag, the other builds go on, and a finished build gives its bytes back.
TEST(StagingLimits, StagedInputIsBoundedPerBuildAndInAll) {
  ServerProcess server(gpujoin::testing::ServerOptions{
      .extra_args = {"--max-staged-bytes=1M", "--max-build-staged-bytes=700K"}});
  ASSERT_TRUE(server.ready()) << server.log();
  auto stub = v1::GpuJoin::NewStub(
      grpc::CreateChannel(server.grpc_address(), grpc::InsecureChannelCredentials()));
  const v1::GetServerInfoResponse limits = Info(*stub);
  EXPECT_EQ(limits.max_staged_bytes(), 1u << 20);
  EXPECT_EQ(limits.max_build_staged_bytes(), 700u << 10);
  EXPECT_EQ(limits.staged_bytes(), 0u);

  OpenBuild a(*stub, "a");
  ASSERT_TRUE(a.writer->Write(ChunkMsg(Iota(120000, 1))));  // 480 KB of keys
  uint64_t staged = 0;
  for (int i = 0; i < 500 && staged == 0; ++i) {
    staged = Info(*stub).staged_bytes();
    if (staged == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_GE(staged, 480000u);
  EXPECT_LT(staged, 600000u);

  // One build over its own limit.
  OpenBuild b(*stub, "b");
  b.writer->Write(ChunkMsg(Iota(100000, 1)));
  b.writer->Write(ChunkMsg(Iota(80000, 200001)));  // 720 KB in all
  const grpc::Status per_build = b.Finish();
  EXPECT_EQ(per_build.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(per_build.error_message(), HasSubstr("chunks[1]: the build of index \"b\" would "
                                                   "hold "));
  EXPECT_THAT(per_build.error_message(), HasSubstr("--max-build-staged-bytes=716800"));
  // A refused build's input is given back when its error is sent: only a's is held.
  EXPECT_EQ(Info(*stub).staged_bytes(), staged);

  // Within its own limit, but not beside a's 480 KB.
  OpenBuild c(*stub, "c");
  c.writer->Write(ChunkMsg(Iota(100000, 1)));
  c.writer->Write(ChunkMsg(Iota(50000, 300001)));  // 600 KB + a's 480 KB > 1 MiB
  const grpc::Status in_all = c.Finish();
  EXPECT_EQ(in_all.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(in_all.error_message(),
              HasSubstr("build staging budget exceeded: chunks[1] of the build of index \"c\""));
  EXPECT_THAT(in_all.error_message(), HasSubstr("of the 1048576 byte budget are in use"));
  EXPECT_THAT(in_all.error_message(), HasSubstr("see --max-staged-bytes"));

  // a was not disturbed; once it finishes nothing is staged.
  const grpc::Status built = a.Finish();
  ASSERT_TRUE(built.ok()) << built.error_message();
  EXPECT_EQ(a.resp.index().rows(), 120000u);
  EXPECT_EQ(Info(*stub).staged_bytes(), 0u);
  grpc::ClientContext ctx;
  v1::ListIndexesResponse list;
  ASSERT_TRUE(stub->ListIndexes(&ctx, v1::ListIndexesRequest(), &list).ok());
  ASSERT_EQ(list.indexes_size(), 1);
  EXPECT_EQ(list.indexes(0).name(), "a");
}

// --max-streams-per-connection bounds the streaming calls open on one client
// connection: the next is RESOURCE_EXHAUSTED naming the flag, another connection
// is unaffected, and a finished stream frees its place.
TEST(StreamLimits, StreamsPerConnectionAreBounded) {
  ServerProcess server(
      gpujoin::testing::ServerOptions{.extra_args = {"--max-streams-per-connection=3"}});
  ASSERT_TRUE(server.ready()) << server.log();
  auto channel = OwnConnection(server.grpc_address());
  auto stub = v1::GpuJoin::NewStub(channel);
  EXPECT_EQ(Info(*stub).max_streams_per_connection(), 3u);
  {
    // Built on a connection of its own: the server gives a finished stream's
    // place back in OnDone, which may come after the client has its status, and
    // the build would still count against the lookups below.
    auto builder = v1::GpuJoin::NewStub(OwnConnection(server.grpc_address()));
    grpc::ClientContext ctx;
    v1::BuildIndexResponse resp;
    auto writer = builder->BuildIndex(&ctx, &resp);
    writer->Write(SpecMsg("s", 64));
    writer->Write(ChunkMsg({10, 20, 30}));
    writer->WritesDone();
    ASSERT_TRUE(writer->Finish().ok());
  }
  v1::LookupRequest request;
  request.set_index("s");
  *request.mutable_keys()->mutable_packed() = PackColumn<uint32_t>(std::vector<uint32_t>{20});
  struct Stream {
    grpc::ClientContext ctx;
    std::unique_ptr<grpc::ClientReaderWriter<v1::LookupRequest, v1::LookupResponse>> rw;
  };
  // Each stream answers a batch, so it is open on the server.
  auto open = [&](v1::GpuJoin::Stub& on, Stream& s) {
    s.rw = on.Lookup(&s.ctx);
    v1::LookupResponse response;
    return s.rw->Write(request) && s.rw->Read(&response);
  };
  Stream s[3];
  for (Stream& one : s) ASSERT_TRUE(open(*stub, one));
  Stream fourth;
  EXPECT_FALSE(open(*stub, fourth));
  const grpc::Status refused = fourth.rw->Finish();
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(refused.error_message(),
              HasSubstr("Lookup: 3 streams are open on this connection"));
  EXPECT_THAT(refused.error_message(), HasSubstr("--max-streams-per-connection=3"));
  // Unary calls are not streams: still answered.
  EXPECT_EQ(Info(*stub).index_count(), 1u);

  auto other = v1::GpuJoin::NewStub(OwnConnection(server.grpc_address()));
  Stream elsewhere;
  EXPECT_TRUE(open(*other, elsewhere));
  elsewhere.rw->WritesDone();
  EXPECT_TRUE(elsewhere.rw->Finish().ok());

  s[0].rw->WritesDone();
  ASSERT_TRUE(s[0].rw->Finish().ok());
  // The place is given back when the server is done with the call.
  bool admitted = false;
  for (int i = 0; i < 100 && !admitted; ++i) {
    Stream again;
    admitted = open(*stub, again);
    again.rw->WritesDone();
    again.rw->Finish();
    if (!admitted) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(admitted);
  for (int i = 1; i < 3; ++i) {
    s[i].rw->WritesDone();
    EXPECT_TRUE(s[i].rw->Finish().ok());
  }
}

}  // namespace
}  // namespace gpujoin::server
