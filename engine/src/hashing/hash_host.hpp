// Internal: row hashing on the host (CPU backend) and its validation, shared by
// every backend. See gpujoin/engine/hashing.hpp for the contract.
#pragma once

#include <string_view>

#include "absl/status/status.h"
#include "gpujoin/engine/hashing.hpp"

namespace gpujoin::engine::detail {

/// INVALID_ARGUMENT naming `where` (e.g. "node 0 (hash)"), the column and the sizes
/// when columns differ in length, buffers are too short, offsets are out of range
/// or decreasing, a validity bitmap is too short, or outputs are missing/mis-sized.
absl::Status ValidateHashNode(const HashNode& node, std::string_view where);

/// Computes the hashes of a validated node on the calling thread.
void HashRowsHost(const HashNode& node);

}  // namespace gpujoin::engine::detail
