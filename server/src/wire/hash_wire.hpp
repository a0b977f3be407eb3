// Decoding of a Hash request's column trees (gpujoin.v1.HashColumn, nested
// through `children`) into engine::HashColumn views. Every buffer is checked
// against the column's declared offset and length before the engine sees it,
// children against what their parent addresses, and the tree's size against
// kMaxHashDepth and kMaxHashNodes; errors name the column's path, e.g.
// `columns[0].children[2].offsets: ...`. docs/api.md "Nested and dictionary
// columns" is the contract these checks implement.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gpujoin/engine/hashing.hpp"
#include "wire/column_codec.hpp"
#include "gpujoin/v1/gpujoin.pb.h"

namespace gpujoin::server {

/// The deepest column tree a Hash request may send: a top-level column is at
/// depth 1, its children at depth 2, ... (the engine's limit, 64).
inline constexpr uint32_t kMaxHashDepth = engine::kMaxHashNestingDepth;

/// The most HashColumn messages (every node of every column's tree) one Hash
/// request may send.
inline constexpr uint64_t kMaxHashNodes = 4096;

/// The most rows (offset + length) one column of a Hash request may address.
inline constexpr uint64_t kMaxHashRows = uint64_t{1} << 40;

/// A Hash request's columns as engine views. The views borrow the request's
/// bytes (or aligned copies of its offsets owned here), so this must not
/// outlive the request message. Movable; moving keeps the views valid.
struct DecodedHashColumns {
  std::vector<engine::HashColumn> columns;
  uint64_t rows = 0;  ///< the common length of the top-level columns

  // Aligned copies of offsets the engine views point into (DecodedColumn keeps
  // its buffer when moved, so these vectors may grow).
  std::vector<DecodedColumn<int32_t>> offsets32;
  std::vector<DecodedColumn<int64_t>> offsets64;
};

/// Decodes and checks `request.columns`. INVALID_ARGUMENT naming the path and
/// the sizes involved for: no columns; top-level columns of different lengths;
/// an offset + length past kMaxHashRows; a type that is not a column type; a
/// buffer the type does not use (data of a STRUCT, offsets of a fixed-width
/// column, children of a flat one, byte_width or index_type where they mean
/// nothing); a buffer shorter than the declared rows need; offsets that are
/// negative, decrease, or end past the value bytes or the child's rows; the
/// wrong number of children; a child shorter than the rows its parent
/// addresses; a dictionary index outside the dictionary; a tree deeper than
/// kMaxHashDepth or with more than kMaxHashNodes nodes.
absl::StatusOr<DecodedHashColumns> DecodeHashColumns(const v1::HashRequest& request);

}  // namespace gpujoin::server
