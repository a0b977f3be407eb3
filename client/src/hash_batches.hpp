// Hash columns on the wire (internal to the client library): the
// gpujoin.v1.HashColumn encoding of a HashColumn tree, and the rows of one
// HashAll batch cut out of a column so that the batch carries only the bytes
// its rows need (children included).
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "gpujoin/client/hash_column.hpp"
#include "gpujoin/v1/gpujoin.pb.h"

namespace gpujoin::client::detail {

/// Writes `column` and its children into `out` (which must be empty).
void EncodeHashColumn(const HashColumn& column, v1::HashColumn* out);

/// Rebased offsets a cut column points into; cleared between batches.
struct HashCutScratch {
  std::deque<std::vector<int32_t>> offsets;
  std::deque<std::vector<int64_t>> large_offsets;
};

/// Logical rows [first, first + count) of `column` (which CheckHashColumn
/// accepted): buffers cut at the byte holding the first row's bit (the rest is
/// the cut's offset, so bitmaps are never shifted; those leading rows become
/// empty, as their offsets were never checked), offsets rebased to start at 0,
/// children cut to the rows those rows address (a dictionary's values are kept
/// whole). Hashes exactly as the same rows of `column`.
HashColumn CutHashRows(const HashColumn& column, uint64_t first, uint64_t count,
                       HashCutScratch* scratch);

}  // namespace gpujoin::client::detail
