// A gtest fixture for service suites that talk to a real gpujoind through the
// raw generated stub (not the client library): start, build, stream lookups and
// joins, describe, server info. The payload and multi-value suites share it.
#pragma once

#include <gtest/gtest.h>
#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <vector>

#include "build_messages.hpp"
#include "gpujoin/testing/server_process.hpp"
#include "gpujoin/v1/gpujoin.grpc.pb.h"

namespace gpujoin::server {

namespace v1 = ::gpujoin::v1;

class RawStubTest : public ::testing::Test {
 protected:
  /// Starts gpujoind on TestBackend() with `extra` flags (and /metrics when asked).
  void StartServer(std::vector<std::string> extra, bool metrics) {
    server_ = std::make_unique<gpujoin::testing::ServerProcess>(
        gpujoin::testing::ServerOptions{.extra_args = std::move(extra), .metrics = metrics});
    ASSERT_TRUE(server_->ready()) << "gpujoind did not become ready; log:\n" << server_->log();
    stub_ = NewStub(*server_);
  }

  static std::unique_ptr<v1::GpuJoin::Stub> NewStub(const gpujoin::testing::ServerProcess& server) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(-1);
    return v1::GpuJoin::NewStub(
        grpc::CreateCustomChannel(server.grpc_address(), grpc::InsecureChannelCredentials(), args));
  }

  grpc::Status Build(const std::vector<v1::BuildIndexRequest>& messages,
                     v1::BuildIndexResponse* response = nullptr) {
    return gpujoin::server::testing::Build(*stub_, messages, response);
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

  std::unique_ptr<gpujoin::testing::ServerProcess> server_;
  std::unique_ptr<v1::GpuJoin::Stub> stub_;
};

}  // namespace gpujoin::server
