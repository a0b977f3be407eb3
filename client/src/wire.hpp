// The client's wire codec for what more than one call shares: packed columns
// and keys, statistics, in-band errors, index descriptions and typed columns
// (gpujoin.v1.Column). Internal to the client library (and its unit tests).
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gpujoin/client/column.hpp"
#include "gpujoin/client/index_info.hpp"
#include "gpujoin/client/keys.hpp"
#include "gpujoin/common/operation_kinds.hpp"
#include "gpujoin/client/query_statistics.hpp"
#include "gpujoin/v1/gpujoin.pb.h"

namespace gpujoin::client::detail {

namespace pb = ::gpujoin::v1;

static_assert(std::endian::native == std::endian::little,
              "packed columns are little-endian; this client assumes a little-endian host");

/// A batch error as a status (code 0, which the server never sends, is UNKNOWN).
absl::Status FromBatchError(const pb::BatchError& e);

QueryStatistics ToQueryStatistics(const pb::QueryStatistics& s);
/// Build statistics (of a build, or of an index after a Mutate batch).
BuildStatistics ToBuildStatistics(const pb::BuildStatistics& s);

/// Copies the batch ID of streamed response `r` into `out`, and its in-band error
/// when it has one; true then: the batch failed and there is nothing else to decode.
template <typename Response, typename Result>
bool DecodeBatchHeader(const Response& r, Result* out) {
  out->batch_id = r.batch_id();
  if (!r.has_error()) return false;
  out->error = FromBatchError(r.error());
  return true;
}

/// Sets packed bytes to the little-endian words of `v`.
template <typename T>
void SetPacked(std::span<const T> v, std::string* out) {
  out->assign(reinterpret_cast<const char*>(v.data()), v.size_bytes());
}

/// Sets a required column: packed bytes, or an empty typed list for zero rows
/// (an empty `packed` would read as "not set").
template <typename T, typename ColumnMessage>
void SetColumn(std::span<const T> v, ColumnMessage* col) {
  if (v.empty()) {
    col->mutable_values();
  } else {
    SetPacked(v, col->mutable_packed());
  }
}

void EncodeColumn(const ColumnView& view, pb::Column* out);  // below

/// Sets the keys of a message that carries them (BuildChunk, LookupRequest,
/// LeftBatch) in the field of their kind: `keys` (uint32), `keys64` (uint64)
/// or `key_columns` (one Column per key column; `k` must pass CheckKeys).
template <typename Message>
void SetKeys(const Keys& k, KeyType type, Message* m) {
  if (type == KeyType::kColumns) {
    for (size_t i = 0; i < k.column_count(); ++i) EncodeColumn(k.column(i), m->add_key_columns());
  } else if (type == KeyType::kUint64) {
    SetColumn(k.u64(), m->mutable_keys64());
  } else {
    SetColumn(k.u32(), m->mutable_keys());
  }
}

/// An upper bound on the bytes `k` adds to a message (SetKeys), headers
/// included.
uint64_t EncodedKeyBytes(const Keys& k);

/// The wire spelling of the client's key type, duplicate policy, join kind
/// and aggregate operation.
pb::KeyType ToProtoKeyType(KeyType t);
pb::DuplicatePolicy ToProtoPolicy(DuplicatePolicy p);
pb::JoinKind ToProtoJoinKind(JoinKind k);
pb::AggregateOp ToProtoAggregateOp(AggregateOp op);

/// An index description the server sent (IndexInfo in the proto); a payload
/// column of a type this client does not know reads as kBinary.
IndexInfo ToIndexInfo(const pb::IndexInfo& p);

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

/// Decodes the gathered columns of an answer of `rows` rows (INTERNAL when a
/// column has another length).
absl::Status DecodeColumns(const google::protobuf::RepeatedPtrField<pb::Column>& columns,
                           uint64_t rows, std::vector<Column>* out);

/// Appends the columns of one batch's answer to those of the batches before
/// (the first batch's columns are taken as they are); INTERNAL when the
/// batches disagree.
absl::Status AppendColumns(std::vector<Column>&& batch, std::vector<Column>* all);

}  // namespace gpujoin::client::detail
