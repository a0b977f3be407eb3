// The device-memory budget through the real gpujoind (CPU backend, a small
// --device-memory-limit) over loopback gRPC: every index is charged exactly the
// bytes its backend allocates (8 per slot on the CPU backend), a rebuild holds
// the old and the new table until the swap, a build that would exceed the
// budget is refused with RESOURCE_EXHAUSTED naming needed, used and budget
// bytes, and the old version keeps serving; the budget, GetServerInfo and the
// metrics agree at every step.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
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

using gpujoin::server::testing::ChunkMsg;
using gpujoin::server::testing::Iota;
using gpujoin::server::testing::SpecMsg;

using gpujoin::testing::HttpGet;
using gpujoin::testing::MetricValue;
using gpujoin::testing::ServerProcess;
using ::testing::HasSubstr;

constexpr uint64_t kBudget = 40000;

class BudgetIntegrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = std::make_unique<ServerProcess>(gpujoin::testing::ServerOptions{
        .extra_args = {"--device-memory-limit=" + std::to_string(kBudget)}, .metrics = true});
    ASSERT_TRUE(server_->ready()) << "gpujoind did not become ready; log:\n" << server_->log();
    stub_ = v1::GpuJoin::NewStub(
        grpc::CreateChannel(server_->grpc_address(), grpc::InsecureChannelCredentials()));
  }

  grpc::Status Build(const std::vector<v1::BuildIndexRequest>& messages,
                     v1::BuildIndexResponse* response) {
    return gpujoin::server::testing::Build(*stub_, messages, response);
  }

  // The index's value for `key` and the version that answered (kEmptyKey when missing).
  std::pair<uint32_t, uint64_t> LookupOne(const std::string& index, uint32_t key) {
    grpc::ClientContext ctx;
    auto stream = stub_->Lookup(&ctx);
    v1::LookupRequest req;
    req.set_index(index);
    *req.mutable_keys()->mutable_packed() = PackColumn<uint32_t>(std::vector<uint32_t>{key});
    EXPECT_TRUE(stream->Write(req));
    stream->WritesDone();
    v1::LookupResponse resp;
    EXPECT_TRUE(stream->Read(&resp));
    const grpc::Status s = stream->Finish();
    EXPECT_TRUE(s.ok()) << s.error_message();
    const auto values = UnpackColumn<uint32_t>(resp.values());
    return {values.size() == 1 ? values[0] : 0xdeadbeefu, resp.index_version()};
  }

  // The budget's use as GetServerInfo and /metrics report it; both must agree.
  uint64_t UsedBytes() {
    grpc::ClientContext ctx;
    v1::GetServerInfoResponse info;
    EXPECT_TRUE(stub_->GetServerInfo(&ctx, v1::GetServerInfoRequest(), &info).ok());
    EXPECT_EQ(info.device_memory_budget_bytes(), kBudget);
    const std::string m = HttpGet(server_->metrics_address(), "/metrics");
    EXPECT_EQ(MetricValue(m, "gpujoin_device_memory_used_bytes"),
              static_cast<double>(info.device_memory_used_bytes()));
    return info.device_memory_used_bytes();
  }

  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<v1::GpuJoin::Stub> stub_;
};

TEST_F(BudgetIntegrationTest, IndexesAreChargedTheBytesTheBackendAllocates) {
  EXPECT_EQ(UsedBytes(), 0u);
  uint64_t expected = 0;
  for (uint32_t capacity : {1u, 64u, 1024u, 2048u}) {
    const std::string name = "i" + std::to_string(capacity);
    v1::BuildIndexResponse resp;
    const grpc::Status s = Build({SpecMsg(name, capacity), ChunkMsg({3, 4})}, &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(resp.index().device_bytes(), uint64_t{capacity} * 8) << name;
    expected += uint64_t{capacity} * 8;
    EXPECT_EQ(UsedBytes(), expected) << name;
  }
  // Dropping gives back exactly the index's bytes.
  grpc::ClientContext ctx;
  v1::DropIndexRequest drop;
  drop.set_name("i1024");
  v1::DropIndexResponse dropped;
  ASSERT_TRUE(stub_->DropIndex(&ctx, drop, &dropped).ok());
  EXPECT_EQ(dropped.freed_bytes(), 8192u);
  EXPECT_EQ(UsedBytes(), expected - 8192);
}

TEST_F(BudgetIntegrationTest, RebuildThatDoesNotFitIsRefusedAndTheOldVersionServes) {
  v1::BuildIndexResponse resp;
  ASSERT_TRUE(Build({SpecMsg("a", 1024), ChunkMsg({1, 2, 3})}, &resp).ok());
  ASSERT_TRUE(Build({SpecMsg("b", 2048), ChunkMsg(Iota(100, 10))}, &resp).ok());
  ASSERT_EQ(UsedBytes(), 8192u + 16384u);

  // While it builds, a rebuild holds the old table and the new one: 16384 more
  // do not fit beside the 24576 in use (40000 budget).
  v1::BuildIndexResponse refused;
  const grpc::Status s = Build({SpecMsg("b", 2048, {.replace = true}), ChunkMsg({7})}, &refused);
  ASSERT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  EXPECT_THAT(s.error_message(),
              HasSubstr("device memory budget exceeded: index \"b\" (capacity 2048: 16384 table "
                        "bytes"));
  EXPECT_THAT(s.error_message(), HasSubstr("needs 16384 bytes but 24576 of the 40000 byte budget "
                                           "are in use (15424 available"));
  EXPECT_EQ(LookupOne("b", 15), std::make_pair(5u, uint64_t{1}));  // row 5 of version 1
  EXPECT_EQ(UsedBytes(), 8192u + 16384u);

  // A smaller rebuild fits beside the old version; after the swap only the new
  // table is charged.
  ASSERT_TRUE(Build({SpecMsg("b", 1024, {.replace = true}), ChunkMsg({15, 16})}, &resp).ok());
  EXPECT_EQ(resp.index().version(), 2u);
  EXPECT_EQ(resp.index().device_bytes(), 8192u);
  EXPECT_EQ(LookupOne("b", 15), std::make_pair(0u, uint64_t{2}));
  EXPECT_EQ(UsedBytes(), 8192u + 8192u);

  // Sized from its rows (3000 at load 0.5: 8192 slots) at the chunk that brings
  // them, with the chunk's staged bytes (12 KB of packed keys and the message).
  v1::BuildIndexRequest spec;
  spec.mutable_spec()->set_name("c");
  const grpc::Status auto_sized = Build({spec, ChunkMsg(Iota(3000, 1))}, &refused);
  ASSERT_EQ(auto_sized.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(auto_sized.error_message(),
              HasSubstr("chunks[0]: device memory budget exceeded: index \"c\" (capacity 8192: "
                        "65536 table bytes + 0 transient bytes for the build of 3000 rows + "));
  EXPECT_THAT(auto_sized.error_message(),
              HasSubstr("bytes of staged input) needs 7"));  // 65536 + at least 12000
  EXPECT_THAT(auto_sized.error_message(), HasSubstr("but 16384 of the 40000 byte budget are in use"));
  EXPECT_EQ(UsedBytes(), 8192u + 8192u);
  const std::string m = HttpGet(server_->metrics_address(), "/metrics");
  EXPECT_EQ(MetricValue(m, "gpujoin_index_builds_total{index=\"b\",result=\"resource_exhausted\"}"),
            1);
  EXPECT_EQ(MetricValue(m, "gpujoin_indexes"), 2);
}

}  // namespace
}  // namespace gpujoin::server
