// --max-streams-per-connection: the streams each client connection (gRPC
// peer) holds open at once, counted the same way by gpujoind's service and by
// gpujoin-router's (and so gpujoind --devices' front).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace gpujoin::server {

class ConnectionStreams {
 public:
  /// Counts one more stream of `rpc` on `peer`, or RESOURCE_EXHAUSTED naming
  /// the limit `max` and the connection (nothing counted then).
  absl::Status Acquire(const std::string& peer, std::string_view rpc, uint32_t max);
  /// Gives back a stream Acquire counted.
  void Release(const std::string& peer);

 private:
  std::mutex mu_;
  std::map<std::string, uint32_t> open_;  // streams per peer (guarded by mu_)
};

}  // namespace gpujoin::server
