#include "wire/join_wire.hpp"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gpujoin/common/status_macros.hpp"
#include "wire/request_checks.hpp"

namespace gpujoin::server {

using detail::CheckFitsU32;
using detail::CheckGeneratedValues;
using detail::KeysField;

template <typename Key>
absl::StatusOr<DecodedLeftBatch<Key>> DecodeLeftBatch(const v1::LeftBatch& b,
                                                      const std::string& field,
                                                      const std::string& index_name,
                                                      KeySchemaView schema) {
  DecodedLeftBatch<Key> buf;
  GPUJOIN_ASSIGN_OR_RETURN(KeyColumns columns, DecodeKeyColumns(b, field + "."));
  GPUJOIN_ASSIGN_OR_RETURN(buf.keys, TakeIndexKeys<Key>(columns, b, field + ".", index_name,
                                                        schema, Presence::kRequired));
  GPUJOIN_ASSIGN_OR_RETURN(
      buf.left_rows,
      DecodeU32Column(b.has_left_rows(), b.left_rows(), field + ".left_rows", Presence::kOptional));
  if (buf.left_rows.present()) {
    if (buf.left_rows.size() != buf.keys.size()) {
      return absl::InvalidArgumentError(absl::StrCat(field, ".left_rows: ", buf.left_rows.size(),
                                                     " rows but ", field, ".", KeysField<Key>(),
                                                     " has ", buf.keys.size()));
    }
    if (b.first_left_row() != 0) {
      return absl::InvalidArgumentError(absl::StrCat(field, ".first_left_row: ", b.first_left_row(),
                                                     " is set together with ", field,
                                                     ".left_rows; set one of them"));
    }
  }
  GPUJOIN_RETURN_IF_ERROR(CheckFitsU32(b.first_left_row(), field + ".first_left_row"));
  if (!buf.left_rows.present()) {
    // Generated left row IDs never wrap past 2^32 (nor reach 0xffffffff).
    GPUJOIN_RETURN_IF_ERROR(
        CheckGeneratedValues(b.first_left_row(), buf.keys.size(), field + ".first_left_row",
                             absl::StrCat("the left row ID of the last row of ", field)));
  }
  buf.count_only = b.count_only();
  if (!buf.count_only) {
    buf.capacity = b.capacity() == 0 ? buf.keys.size() : b.capacity();
    if (buf.capacity > (uint64_t{1} << 31)) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".capacity: ", buf.capacity, " pairs is more than 2^31"));
    }
  }
  return buf;
}

template absl::StatusOr<DecodedLeftBatch<uint32_t>> DecodeLeftBatch<uint32_t>(
    const v1::LeftBatch&, const std::string&, const std::string&, KeySchemaView);
template absl::StatusOr<DecodedLeftBatch<uint64_t>> DecodeLeftBatch<uint64_t>(
    const v1::LeftBatch&, const std::string&, const std::string&, KeySchemaView);
template absl::StatusOr<DecodedLeftBatch<engine::ColumnKey>> DecodeLeftBatch<engine::ColumnKey>(
    const v1::LeftBatch&, const std::string&, const std::string&, KeySchemaView);

}  // namespace gpujoin::server
