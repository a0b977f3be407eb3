// PLACEHOLDER until issue 8 lands: the hashing helper replaces this file.
#include "cuda/hash_device.hpp"

namespace gpujoin::engine::detail {

absl::Status HashRowsDevice(const HashNode&, cudaStream_t) {
  return absl::UnimplementedError("hash (cuda): not implemented yet");
}

}  // namespace gpujoin::engine::detail
