// The fixture of the client library's tests that talk to a real gpujoind (CPU
// backend) with default options: one server per test suite, a fresh Client per
// test, a 60 s deadline on every call.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <memory>

#include "gpujoin/client/client.hpp"
#include "gpujoin/testing/server_process.hpp"

namespace gpujoin::testing {

class ServerClientTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new ServerProcess(ServerOptions{}); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    ASSERT_FALSE(server_->grpc_address().empty()) << "gpujoind did not start:\n" << server_->log();
    client::ConnectOptions o;
    o.address = server_->grpc_address();
    o.deadline = std::chrono::seconds(60);
    auto c = client::Client::Connect(o);
    ASSERT_TRUE(c.ok()) << c.status();
    client_ = *std::move(c);
  }

  static inline ServerProcess* server_ = nullptr;
  std::unique_ptr<client::Client> client_;
};

}  // namespace gpujoin::testing
