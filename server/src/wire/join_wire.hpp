// Decoding of a Join request's left batches: the keys, the left row IDs (given
// or generated) and the pair capacity of each batch, checked fully before the
// join is planned (ops/join.cpp). The response's side, cut into messages, is
// join_parts.hpp.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "gpujoin/v1/gpujoin.pb.h"
#include "wire/column_codec.hpp"
#include "wire/key_columns_wire.hpp"

namespace gpujoin::server {

/// One left batch of a JoinRequest, decoded and checked, for an index with key
/// kind `Key` (uint32_t, uint64_t or engine::ColumnKey). Its columns may borrow
/// the request's bytes (column_codec.hpp), so it must not outlive the request
/// message.
template <typename Key>
struct DecodedLeftBatch {
  DecodedKeys<Key> keys;
  /// The given left row IDs, as many as the keys; not present when they are
  /// generated from the batch's first_left_row.
  DecodedColumn<uint32_t> left_rows;
  bool count_only = false;
  /// The pairs the batch asks for, at most (its capacity, or one per key when
  /// that is 0), at most 2^31; 0 when count_only.
  uint64_t capacity = 0;
};

/// Decodes and checks left batch `b` (`field` names it in errors, e.g.
/// "batches[2]") of a join on index `index_name` keyed by `schema` (empty for a
/// key word): its keys (the field of the index's key: TakeIndexKeys), its left row IDs (given, or generated from first_left_row,
/// which must then fit 32 bits and never reach 0xffffffff) and its capacity.
/// INVALID_ARGUMENT naming the field when a check fails.
template <typename Key>
absl::StatusOr<DecodedLeftBatch<Key>> DecodeLeftBatch(const v1::LeftBatch& b,
                                                      const std::string& field,
                                                      const std::string& index_name,
                                                      KeySchemaView schema);

}  // namespace gpujoin::server
