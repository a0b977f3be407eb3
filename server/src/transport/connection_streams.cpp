#include "transport/connection_streams.hpp"

#include "absl/strings/str_cat.h"

namespace gpujoin::server {

absl::Status ConnectionStreams::Acquire(const std::string& peer, std::string_view rpc,
                                        uint32_t max) {
  std::lock_guard<std::mutex> lock(mu_);
  uint32_t& open = open_[peer];
  if (open >= max) {
    const uint32_t held = open;
    if (open == 0) open_.erase(peer);
    return absl::ResourceExhaustedError(
        absl::StrCat(std::string(rpc), ": ", held, " streams are open on this connection (", peer,
                     "), the limit --max-streams-per-connection=", max,
                     "; finish one, or open another connection"));
  }
  ++open;
  return absl::OkStatus();
}

void ConnectionStreams::Release(const std::string& peer) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = open_.find(peer);
  if (it != open_.end() && --it->second == 0) open_.erase(it);
}

}  // namespace gpujoin::server
