// A Query batch's columns on the wire (docs/api.md "Query"): request Columns
// checked and copied into a plan table, and result rows encoded into
// response Columns, cut into messages that fit the response limit.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gpujoin/engine/plan.hpp"
#include "gpujoin/v1/gpujoin.pb.h"

namespace gpujoin::server {

/// The columns of a QueryRequest as a table: names valid and unique, types
/// UINT32 .. STRING, one length, buffers as CheckColumnBuffers requires.
/// INVALID_ARGUMENT naming `columns[i]` and the sizes.
absl::StatusOr<engine::PlanTable> DecodePlanColumns(
    const google::protobuf::RepeatedPtrField<v1::Column>& columns);

/// The names and types of a QueryRequest's columns (valid names, unique;
/// types UINT32 .. STRING), whatever their buffers: what the first batch tells
/// a plan. INVALID_ARGUMENT naming `columns[i]`.
absl::Status DecodePlanSchema(const google::protobuf::RepeatedPtrField<v1::Column>& columns,
                              std::vector<std::string>* names,
                              std::vector<engine::ColumnType>* types);

/// Rows [first, first + rows) of `table` as Columns named `names`, appended to `out`.
void EncodePlanRows(const engine::PlanTable& table, const std::vector<std::string>& names,
                    uint64_t first, uint64_t rows,
                    google::protobuf::RepeatedPtrField<v1::Column>* out);

/// Row ranges [first, end) of `table` whose encoded columns stay within
/// `max_bytes` each (a range holds at least one row; a zero-row table one
/// empty range).
std::vector<std::pair<uint64_t, uint64_t>> PlanResultParts(const engine::PlanTable& table,
                                                           uint64_t max_bytes);

}  // namespace gpujoin::server
