// PLACEHOLDER until issue 8 lands: the hashing helper replaces this file.
#include "hashing/hash_host.hpp"

namespace gpujoin::engine::detail {

absl::Status ValidateHashNode(const HashNode&, std::string_view where) {
  return absl::UnimplementedError(std::string(where) + ": hashing is not implemented yet");
}

void HashRowsHost(const HashNode&) {}

}  // namespace gpujoin::engine::detail
