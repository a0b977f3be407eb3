// Internal: row hashing on the host (CPU backend) and its validation, shared by
// every backend. See gpujoin/engine/hashing.hpp for the contract and
// hashing/row_hash.hpp for the algorithm (also docs/hashing.md).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "absl/status/status.h"
#include "gpujoin/engine/hashing.hpp"
#include "hashing/hash_view.hpp"

namespace gpujoin::engine::detail {

/// INVALID_ARGUMENT naming `where` (e.g. "node 0 (hash)"), the column and the sizes
/// when columns differ in length, buffers are too short, offsets are out of range
/// or decreasing, a validity bitmap is too short, or outputs are missing/mis-sized.
/// Outputs: `out32` (bits k32) or `out64` (bits k64) must hold exactly one element
/// per row and `out_validity` exactly ceil(rows / 8) bytes; the other hash span is
/// ignored. Zero rows are valid (all outputs empty).
absl::Status ValidateHashNode(const HashNode& node, std::string_view where);

/// The column part of ValidateHashNode: at least one column, all of the same
/// length, each within its buffers.
absl::Status ValidateHashColumns(std::span<const HashColumn> columns, std::string_view where);

/// True when every column is flat (no nested type, no dictionary): the fused
/// per-row path of row_hash.hpp hashes it (and the device kernel, as is).
bool IsFlatHashNode(const HashNode& node);

/// Computes the hashes of a validated node on the calling thread: writes one hash
/// per row (0 for a null row) and the output validity bitmap (bits past the last
/// row are 0).
void HashRowsHost(const HashNode& node);

/// Like HashRowsHost, for rows [first_row, first_row + rows) only, so that a
/// backend can hash disjoint ranges on several threads. `first_row` must be a
/// multiple of 8 (each range owns whole output validity bytes); the range must
/// lie within the node's rows. The results equal HashRowsHost's for those rows.
void HashRowsHost(const HashNode& node, uint64_t first_row, uint64_t rows);

/// The view of a flat host column `c` (its rows from c.offset; no dictionary
/// hashes): how the host hashes and compares it.
HashView HostView(const HashColumn& c);

}  // namespace gpujoin::engine::detail
