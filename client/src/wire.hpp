// The client's wire codec for what more than one call shares: packed columns,
// statistics, in-band errors and typed columns (gpujoin.v1.Column). Internal
// to the client library (and its unit tests).
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gpujoin/client/client.hpp"
#include "gpujoin/v1/gpujoin.pb.h"

namespace gpujoin::client::detail {

namespace pb = ::gpujoin::v1;

/// A batch error as a status (code 0, which the server never sends, is UNKNOWN).
absl::Status FromBatchError(const pb::BatchError& e);

QueryStatistics ToQueryStatistics(const pb::QueryStatistics& s);

/// Decodes a packed little-endian column sent by the server (INTERNAL naming
/// `field` when its size is not a multiple of the element size).
template <typename T>
absl::Status Unpack(const std::string& bytes, std::string_view field, std::vector<T>* out) {
  if (bytes.size() % sizeof(T) != 0) {
    return absl::InternalError(absl::StrCat("server sent ", std::string(field), " of ",
                                            bytes.size(), " bytes, not a multiple of ", sizeof(T)));
  }
  out->resize(bytes.size() / sizeof(T));
  if (!bytes.empty()) std::memcpy(out->data(), bytes.data(), bytes.size());
  return absl::OkStatus();
}

/// The client type's wire type (client type i is wire type i + 1).
pb::ColumnType ToProtoColumnType(ColumnType type);
/// The client type of a wire type; nullopt for UNSPECIFIED and unknown values.
std::optional<ColumnType> FromProtoColumnType(int type);

/// An upper bound on the bytes that EncodeColumn(view) adds to a message as
/// one element of a repeated Column field (values, offsets, validity, name and
/// the field headers).
uint64_t EncodedColumnBytes(const ColumnView& view);

/// Writes the rows of `view` (which must pass CheckColumnView) to `out`: name,
/// type, length, data, offsets rebased to start at 0, and the validity bitmap
/// when a row is null. Bitmaps are shifted so that the view's first row is bit
/// 0 and the bits past the last row are 0.
void EncodeColumn(const ColumnView& view, pb::Column* out);

/// Decodes a column the server sent, checking its buffers (INTERNAL naming
/// `field` and the sizes when they do not hold `length` rows of the type).
/// Offsets are rebased to 0, null_count is counted from the validity bitmap,
/// and a bitmap without nulls is dropped.
absl::StatusOr<Column> DecodeColumn(const pb::Column& column, std::string_view field);

}  // namespace gpujoin::client::detail
