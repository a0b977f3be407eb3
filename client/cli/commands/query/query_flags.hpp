// The flags of `gpujoin query` as a plan (docs/cli.md, "query"): each
// --lookup with the --select, --prefix and --how after it, checked against
// its index; then --where, --group-by/--agg, --project and --limit, in that
// order. Errors are INVALID_ARGUMENT naming the flag ("query: --lookup
// 'sensors': ..."); the command makes them usage errors (exit 2).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "commands.hpp"
#include "gpujoin/client/client.hpp"

namespace gpujoin::cli {

/// One --lookup and the options that followed it.
struct LookupFlag {
  std::string spec;   ///< the --lookup text, for messages
  std::string index;  ///< INDEX
  /// The input (or earlier-step) columns as given: COL of each item; empty
  /// for a bare INDEX (a key-schema index keyed by columns of its key's names).
  std::vector<std::string> columns;
  /// KEY of each KEY=COL item (then one per column); empty for plain columns.
  std::vector<std::string> keys;
  std::optional<std::string> select;  ///< --select after it (nullopt: every payload column)
  std::string prefix;                 ///< --prefix after it
  client::JoinKind kind = client::JoinKind::kInner;  ///< --how after it
};

/// The --lookup flags of `ordered` with their --select, --prefix and --how:
/// INDEX, INDEX:COL[,COL...] or INDEX:KEY=COL[,KEY=COL...]. INVALID_ARGUMENT
/// for a malformed --lookup, a --select/--prefix/--how before any --lookup or
/// given twice for one, and a --how other than inner, left, semi or anti.
absl::StatusOr<std::vector<LookupFlag>> ParseLookupFlags(const std::vector<OrderedFlag>& ordered);

/// The key columns of `flag` in the order of `index`'s key: for a uint32 or
/// uint64 index its one column (KEY of KEY=COL is a name for the reader only:
/// such an index records none); for a key schema one column per key column,
/// positional (in the index's order), as KEY=COL pairs (any order, each key
/// column once), or, for a bare INDEX, the columns named as the key columns.
/// INVALID_ARGUMENT naming the --lookup and the index's key otherwise.
absl::StatusOr<std::vector<std::string>> LookupKeyColumns(const LookupFlag& flag,
                                                          const client::IndexInfo& index);

/// The columns of --project ("a,b=new_name": keep a, keep b renamed new_name).
/// INVALID_ARGUMENT for an empty list or item, or an empty name.
absl::StatusOr<std::vector<client::QueryProjectColumn>> ParseProject(std::string_view text);

/// The plan of `a`: one lookup step per flag of `lookups` (their indexes
/// described in `indexes`, in the same order; --select checked against the
/// payload, every payload column without it), one filter step per --where,
/// an aggregate step for --group-by and/or --agg (--group-by alone counts:
/// count()), a project step, a limit step. INVALID_ARGUMENT naming the flag.
absl::StatusOr<client::QueryPlan> BuildQueryPlan(const QueryArgs& a,
                                                 const std::vector<LookupFlag>& lookups,
                                                 const std::vector<client::IndexInfo>& indexes);

/// The flags that made each step of BuildQueryPlan's plan, for messages:
/// "--lookup 'sensors:sensor_id'", "--where 'x > 1'", "--group-by 'type' --agg
/// 'count()'", "--project 'a,b'", "--limit 5".
std::vector<std::string> StepFlags(const QueryArgs& a, const std::vector<LookupFlag>& lookups);

/// What a failed query is reported as: "query " and the flags of the step the
/// server's message names ("plan.steps[N]"), else "query".
std::string FailedQueryWhat(const absl::Status& status, const std::vector<std::string>& step_flags);

}  // namespace gpujoin::cli
