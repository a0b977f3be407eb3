// Typed views of input table columns for the gpujoin CLI: uint32 keys,
// float32 values, masks, and dictionary encoding of group labels. Every error
// names the file, the line and the column.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "table.hpp"

namespace gpujoin::cli {

/// Parses a uint32 written in decimal or as 0x-prefixed hex, with optional
/// surrounding spaces; nullopt for anything else (empty, negative, too large,
/// trailing characters).
std::optional<uint32_t> ParseU32Text(std::string_view s);

/// Parses a float32 (decimal, exponent, "nan", "inf"); nullopt otherwise.
std::optional<float> ParseF32Text(std::string_view s);

/// Column `name` of `table` as uint32 keys. A null or non-numeric cell is
/// INVALID_ARGUMENT "FILE:LINE: column 'NAME' (N): 'TEXT' is not a uint32 key".
absl::StatusOr<std::vector<uint32_t>> KeyColumn(const Table& table, std::string_view name);

/// Column `name` as float32 values. Null cells become NaN (which the
/// aggregation ignores); non-numeric cells are INVALID_ARGUMENT with position.
absl::StatusOr<std::vector<float>> ValueColumn(const Table& table, std::string_view name);

/// Column `name` as a 0/1 mask: uint32 (nonzero = 1), "true"/"false"; a null
/// cell is 0. Anything else is INVALID_ARGUMENT with position.
absl::StatusOr<std::vector<uint32_t>> MaskColumn(const Table& table, std::string_view name);

/// Group codes of one column for aggregation.
struct GroupEncoding {
  /// Per row: the dense group code; rows with a null label get code 0 and
  /// `present[row] == 0`.
  std::vector<uint32_t> codes;
  std::vector<uint32_t> present;  ///< 1 where the row has a label
  /// The label of every group code, in code order. Only groups that occur are
  /// listed in `order`.
  std::vector<std::string> labels;
  /// The group codes that occur, in output order (numeric labels ascending,
  /// else byte-wise ascending).
  std::vector<uint32_t> order;
  uint32_t groups = 0;            ///< number of codes (the Aggregate `groups`)
  bool dictionary = false;        ///< true when labels were dictionary-encoded
};

/// Encodes column `name` as dense group codes. When every label is a uint32
/// no larger than `max_direct` the values are used directly (groups = max + 1);
/// otherwise (strings, sparse IDs) the distinct labels are sorted and numbered
/// 0..n-1, and the labels are kept to print with the results.
absl::StatusOr<GroupEncoding> EncodeGroups(const Table& table, std::string_view name,
                                           uint32_t max_direct = 1u << 16);

}  // namespace gpujoin::cli
