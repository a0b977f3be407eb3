// The transport ceiling: an in-process gRPC server that implements the Lookup,
// Join, Aggregate and Mutate streams of gpujoin.v1.GpuJoin as echoes. It receives exactly
// the request messages the real server receives (same proto, same method paths,
// same client library, same kind of channel) and answers each with a response of
// the size the real server would send, filled by copying request bytes instead of
// probing an index. What the load tester measures against it is therefore what
// gRPC, HTTP/2, protobuf and the client cost on this machine, without the engine.
//
// Response sizes: Lookup answers 4 value bytes and 1 found byte per key (plus
// probes and match counts when asked); Join answers `capacity` pairs per left
// batch with keys (capacity 0 = rows), so a caller that knows its pair count
// sets the capacity to it; Aggregate answers the per-group columns of `groups` rows;
// Mutate answers its counts (every upsert row inserted), no table rebuilt.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace gpujoin::loadtest {

class EchoServer {
 public:
  /// Starts listening on `listen_address`: "127.0.0.1:0" picks a free loopback
  /// port; "unix:/path" a unix socket. `max_message_bytes` bounds both directions
  /// like gpujoind's --max-message-bytes. UNAVAILABLE when it cannot bind.
  static absl::StatusOr<std::unique_ptr<EchoServer>> Start(const std::string& listen_address,
                                                           int max_message_bytes);

  /// Shuts the server down (cancelling streams still open) and joins its threads.
  ~EchoServer();
  EchoServer(const EchoServer&) = delete;
  EchoServer& operator=(const EchoServer&) = delete;

  /// The address a client connects to ("127.0.0.1:<port>" or the unix address).
  const std::string& address() const { return address_; }

  class Impl;

 private:
  explicit EchoServer(std::unique_ptr<Impl> impl, std::string address);
  std::unique_ptr<Impl> impl_;
  std::string address_;
};

}  // namespace gpujoin::loadtest
