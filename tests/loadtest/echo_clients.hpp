// The load tester's in-process echo service with clients connected to it,
// shared by the load tester's unit tests.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "echo_service.hpp"
#include "gpujoin/client/client.hpp"

namespace gpujoin::loadtest {

/// The echo service and its clients.
struct EchoWithClients {
  std::unique_ptr<EchoServer> server;
  std::vector<std::unique_ptr<client::Client>> clients;
  std::vector<client::Client*> raw;  ///< the clients, as RunSetting takes them
};

/// Starts the echo on a free loopback port and connects `n` clients (each on
/// its own connection when `own_connection`); fails the test when either step
/// fails (call it inside ASSERT_NO_FATAL_FAILURE).
inline void StartEcho(int n, bool own_connection, EchoWithClients* e) {
  auto echo = EchoServer::Start("127.0.0.1:0", 64 << 20);
  ASSERT_TRUE(echo.ok()) << echo.status();
  e->server = std::move(*echo);
  for (int i = 0; i < n; ++i) {
    client::ConnectOptions o;
    o.address = e->server->address();
    o.own_connection = own_connection;
    auto c = client::Client::Connect(o);
    ASSERT_TRUE(c.ok()) << c.status();
    e->raw.push_back(c->get());
    e->clients.push_back(std::move(*c));
  }
}

}  // namespace gpujoin::loadtest
