// The checks of one request Column's buffers against its type (docs/api.md,
// "Payload columns"): the payload chunks of a build (payload_staging) and the
// key columns of builds, lookups and joins (key_columns_wire) use them alike.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "gpujoin/engine/column.hpp"
#include "gpujoin/v1/gpujoin.pb.h"
#include "wire/column_codec.hpp"

namespace gpujoin::server {

/// The buffers of a Column that passed CheckColumnBuffers: views of the
/// message, which must outlive them.
struct CheckedColumn {
  uint64_t rows = 0;
  /// Fixed width: rows * width bytes; kBool: the bitmap; variable width: the
  /// bytes the rows cover, data[offsets[0], offsets[rows]).
  std::string_view data;
  /// Variable width: the wire's rows + 1 int32 offsets into the message's
  /// `data` (not rebased).
  DecodedColumn<int32_t> offsets;
  /// Empty when no row is null; else the validity bitmap (ceil(rows / 8) bytes).
  std::string_view validity;
};

/// Checks that `c` holds `c.length()` rows of `type` (its `type` field is the
/// caller's to check): fixed width, `data` of length * width bytes (kBool: a
/// bitmap) and no offsets; variable width, length + 1 int32 offsets,
/// non-decreasing from >= 0 to at most the bytes of `data`, and for kString
/// every row valid UTF-8; `validity` empty or ceil(length / 8) bytes.
/// INVALID_ARGUMENT naming `where` (e.g. `chunks[2].payload[0] (column "x")`),
/// the field, the sizes, and for UTF-8 the row and the offending byte ("row 3
/// of `rows_of` is not valid UTF-8").
absl::StatusOr<CheckedColumn> CheckColumnBuffers(const v1::Column& c, engine::ColumnType type,
                                                 const std::string& where,
                                                 std::string_view rows_of = "this chunk");

}  // namespace gpujoin::server
