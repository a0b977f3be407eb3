// 64-bit keys through a real gpujoind (CPU backend) and the generated stub (issue
// 19): a uint64 index built from `keys64` chunks answers lookups and joins on
// keys above 2^32 and keys that differ only in their high 32 bits, on the bytes
// path (packed keys64) and the protobuf path (a typed list); a batch of the wrong
// width is an in-band INVALID_ARGUMENT between good batches of the same stream;
// ListIndexes, DescribeIndex and /metrics carry the key type.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
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

using gpujoin::testing::HttpGet;
using gpujoin::testing::MetricValue;
using gpujoin::testing::ServerProcess;
using ::testing::HasSubstr;

class KeyTypeIntegrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = std::make_unique<ServerProcess>(gpujoin::testing::ServerOptions{.metrics = true});
    ASSERT_TRUE(server_->ready()) << "gpujoind did not become ready; log:\n" << server_->log();
    stub_ = v1::GpuJoin::NewStub(
        grpc::CreateChannel(server_->grpc_address(), grpc::InsecureChannelCredentials()));
  }

  static v1::BuildIndexRequest Spec(const std::string& name, v1::KeyType type) {
    v1::BuildIndexRequest r;
    r.mutable_spec()->set_name(name);
    r.mutable_spec()->set_capacity(4096);
    r.mutable_spec()->set_key_type(type);
    return r;
  }

  // All requests written, then every response read (few and small: no deadlock).
  std::vector<v1::LookupResponse> Lookups(const std::vector<v1::LookupRequest>& requests) {
    grpc::ClientContext ctx;
    auto stream = stub_->Lookup(&ctx);
    for (const auto& r : requests) EXPECT_TRUE(stream->Write(r));
    stream->WritesDone();
    std::vector<v1::LookupResponse> out;
    v1::LookupResponse resp;
    while (stream->Read(&resp)) out.push_back(resp);
    EXPECT_TRUE(stream->Finish().ok());
    return out;
  }

  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<v1::GpuJoin::Stub> stub_;
};

TEST_F(KeyTypeIntegrationTest, WideKeysEndToEndAndTheWrongWidthInBand) {
  // 1000 keys (i << 32) | 7 for i = 1..1000: all equal in their low 32 bits,
  // plus the negative int64 IDs -1 .. -50 as bit patterns in a second chunk.
  std::vector<uint64_t> keys;
  for (uint64_t i = 1; i <= 1000; ++i) keys.push_back((i << 32) | 7);
  std::vector<uint64_t> negative;
  for (int64_t id = -2; id >= -51; --id) negative.push_back(static_cast<uint64_t>(id));
  v1::BuildIndexRequest c0, c1;
  *c0.mutable_chunk()->mutable_keys64()->mutable_packed() = PackColumn<uint64_t>(keys);
  for (uint64_t k : negative) c1.mutable_chunk()->mutable_keys64()->mutable_values()->add_v(k);
  v1::BuildIndexResponse built;
  grpc::Status s = testing::Build(*stub_, {Spec("ids", v1::KEY_TYPE_UINT64), c0, c1}, &built);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(built.index().key_type(), v1::KEY_TYPE_UINT64);
  EXPECT_EQ(built.index().statistics().unique_keys(), 1050u);  // none merged

  // Lookup stream: packed keys64 (bytes path), a uint32 batch (refused in-band),
  // a typed keys64 list (protobuf path).
  std::vector<v1::LookupRequest> reqs(3);
  for (auto& r : reqs) r.set_index("ids");
  const std::vector<uint64_t> q0 = {(uint64_t{500} << 32) | 7, 7, (uint64_t{1001} << 32) | 7,
                                    static_cast<uint64_t>(int64_t{-51})};
  *reqs[0].mutable_keys64()->mutable_packed() = PackColumn<uint64_t>(q0);
  reqs[0].set_batch_id(0);
  *reqs[1].mutable_keys()->mutable_packed() =
      PackColumn<uint64_t>(q0);  // the int64-as-uint32 mistake
  reqs[1].set_batch_id(1);
  for (uint64_t k : {(uint64_t{1} << 32) | 7, static_cast<uint64_t>(int64_t{-2})}) {
    reqs[2].mutable_keys64()->mutable_values()->add_v(k);
  }
  reqs[2].set_batch_id(2);
  const auto answers = Lookups(reqs);
  ASSERT_EQ(answers.size(), 3u);
  EXPECT_FALSE(answers[0].has_error()) << answers[0].error().message();
  EXPECT_EQ(UnpackColumn<uint32_t>(answers[0].values()),
            (std::vector<uint32_t>{499, 0xffffffffu, 0xffffffffu, 1049}));
  EXPECT_EQ(answers[1].error().code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(answers[1].error().message(),
            "keys: index \"ids\" has uint64 keys; send them in keys64 (got 32 bytes of uint32 "
            "keys)");
  EXPECT_FALSE(answers[2].has_error()) << answers[2].error().message();
  EXPECT_EQ(UnpackColumn<uint32_t>(answers[2].values()), (std::vector<uint32_t>{0, 1000}));

  // Join: left rows in order, right rows the source rows.
  {
    grpc::ClientContext ctx;
    auto stream = stub_->Join(&ctx);
    v1::JoinRequest j;
    j.set_index("ids");
    *j.add_batches()->mutable_keys64()->mutable_packed() = PackColumn<uint64_t>(
        std::vector<uint64_t>{static_cast<uint64_t>(int64_t{-3}), 8, (uint64_t{2} << 32) | 7});
    ASSERT_TRUE(stream->Write(j));
    stream->WritesDone();
    v1::JoinResponse jr;
    ASSERT_TRUE(stream->Read(&jr));
    ASSERT_TRUE(stream->Finish().ok());
    ASSERT_FALSE(jr.has_error()) << jr.error().message();
    EXPECT_EQ(UnpackColumn<uint32_t>(jr.results(0).left_rows()), (std::vector<uint32_t>{0, 2}));
    EXPECT_EQ(UnpackColumn<uint32_t>(jr.results(0).right_rows()), (std::vector<uint32_t>{1001, 1}));
  }

  // A build that sends uint32 keys to a uint64 spec fails and installs nothing.
  v1::BuildIndexRequest narrow;
  *narrow.mutable_chunk()->mutable_keys()->mutable_packed() =
      PackColumn<uint32_t>(std::vector<uint32_t>{1, 2, 3});
  s = testing::Build(*stub_, {Spec("other", v1::KEY_TYPE_UINT64), narrow});
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(),
            "chunks[0].keys: index \"other\" has uint64 keys; send them in chunks[0].keys64 (got "
            "12 bytes of uint32 keys)");

  // ListIndexes / DescribeIndex / metrics.
  v1::BuildIndexRequest n0;
  *n0.mutable_chunk()->mutable_keys()->mutable_packed() =
      PackColumn<uint32_t>(std::vector<uint32_t>{1});
  ASSERT_TRUE(testing::Build(*stub_, {Spec("small", v1::KEY_TYPE_UNSPECIFIED), n0}).ok());
  grpc::ClientContext lc;
  v1::ListIndexesResponse list;
  ASSERT_TRUE(stub_->ListIndexes(&lc, v1::ListIndexesRequest(), &list).ok());
  ASSERT_EQ(list.indexes_size(), 2);
  EXPECT_EQ(list.indexes(0).name(), "ids");
  EXPECT_EQ(list.indexes(0).key_type(), v1::KEY_TYPE_UINT64);
  EXPECT_EQ(list.indexes(1).key_type(), v1::KEY_TYPE_UINT32);
  grpc::ClientContext dc;
  v1::DescribeIndexRequest dr;
  dr.set_name("ids");
  v1::DescribeIndexResponse described;
  ASSERT_TRUE(stub_->DescribeIndex(&dc, dr, &described).ok());
  EXPECT_EQ(described.index().key_type(), v1::KEY_TYPE_UINT64);
  const std::string text = HttpGet(server_->metrics_address(), "/metrics");
  EXPECT_EQ(MetricValue(text, "gpujoin_index_info{index=\"ids\",key_type=\"uint64\"}"), 1);
  EXPECT_EQ(MetricValue(text, "gpujoin_index_info{index=\"small\",key_type=\"uint32\"}"), 1);
  EXPECT_EQ(MetricValue(text, "gpujoin_query_rows_total{index=\"ids\",op=\"lookup\"}"), 6);
}

}  // namespace
}  // namespace gpujoin::server
