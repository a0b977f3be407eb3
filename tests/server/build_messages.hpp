// BuildIndex request messages for the server tests.
#pragma once

#include <cstdint>
#include <vector>

#include "gpujoin/server/column_codec.hpp"
#include "gpujoin/v1/gpujoin.pb.h"

namespace gpujoin::server::testing {

/// A chunk message carrying `keys` as a packed column.
inline v1::BuildIndexRequest ChunkMsg(const std::vector<uint32_t>& keys) {
  v1::BuildIndexRequest r;
  *r.mutable_chunk()->mutable_keys()->mutable_packed() = PackColumn<uint32_t>(keys);
  return r;
}

/// first, first + 1, ..., first + n - 1.
inline std::vector<uint32_t> Iota(uint32_t n, uint32_t first = 1) {
  std::vector<uint32_t> v(n);
  for (uint32_t i = 0; i < n; ++i) v[i] = first + i;
  return v;
}

}  // namespace gpujoin::server::testing
