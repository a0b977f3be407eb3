// The small enums that name what an index holds and what an operation does,
// shared by the engine, the server, the client library and the CLI, with
// their names (the spellings of the CLI flags, docs and metric labels) and
// parsers.
#pragma once

#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"

namespace gpujoin {

/// The key of an index: one integer word, uint32 (the reference contract, the
/// default) or uint64 (int64 keys travel as their two's-complement bit
/// pattern), or a key schema of one or more typed columns (string and composite
/// keys; the index's key columns name them). Values stay uint32 for all.
enum class KeyType : uint8_t { kUint32, kUint64, kColumns };

/// What a build keeps of rows whose key is already present.
enum class DuplicatePolicy : uint8_t {
  /// The reference contract: the lowest source row of each key wins; the others
  /// count as duplicate rows and are dropped (many-to-one joins).
  kLowestRow,
  /// A multi-value index: every valid row is kept, in source-row order per key
  /// (one-to-many and many-to-many joins).
  kKeepAll,
};

/// Which left rows a join returns and how. Every kind gives [left row, right
/// row] pairs in left row order, then right source-row order; counts are exact.
enum class JoinKind : uint8_t {
  kInner,      ///< one pair per match
  kLeftOuter,  ///< one pair per match, or (left row, no match) for a row without one
  kLeftSemi,   ///< (left row, its first match's value) once per row with a match
  kLeftAnti,   ///< (left row, no match) once per row without a match
};

/// Grouped aggregation operations: kCount counts rows per group, the others
/// fold the rows' values.
enum class AggregateOp : uint8_t { kCount, kSum, kMin, kMax, kMean };

/// "uint32", "uint64" or "columns"; "unknown" for any other value.
std::string_view KeyTypeName(KeyType type);
/// "lowest_row" or "keep_all"; "unknown" for any other value.
std::string_view DuplicatePolicyName(DuplicatePolicy policy);
/// "inner", "left_outer", "left_semi", "left_anti"; "unknown" for any other value.
std::string_view JoinKindName(JoinKind kind);
/// "count", "sum", "min", "max", "mean"; "unknown" for any other value.
std::string_view AggregateOpName(AggregateOp op);

/// Parsers of the names above; INVALID_ARGUMENT naming the word and the choices otherwise.
absl::StatusOr<KeyType> ParseKeyType(std::string_view name);
absl::StatusOr<DuplicatePolicy> ParseDuplicatePolicy(std::string_view name);
absl::StatusOr<JoinKind> ParseJoinKind(std::string_view name);
absl::StatusOr<AggregateOp> ParseAggregateOp(std::string_view name);

}  // namespace gpujoin
