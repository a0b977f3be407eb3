// The gpujoin commands. Each returns the exit code or throws CliError; see
// docs/cli.md for their behaviour and output.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cli_context.hpp"

namespace gpujoin::cli {

/// `gpujoin health [--service NAME]`
int CmdHealth(const Globals& g, const std::string& service);
/// `gpujoin info`
int CmdInfo(const Globals& g);

/// Arguments of `gpujoin index build`.
struct BuildArgs {
  std::string name, from, key, value;
  std::string key_type = "auto";  ///< --key-type: auto, u32, u64, i64, str, COL:TYPE,...
  bool row_ids = false;
  uint32_t first_row = 0;
  uint32_t capacity = 0;
  double load_factor = 0;
  uint32_t max_probes = 0;
  bool replace = false;
  /// --columns: the payload columns (nullopt = every column but the key and value).
  std::optional<std::string> columns;
  std::string schema;                     ///< --schema a:i64,b:str: types of payload columns
  bool no_payload = false;                ///< --no-payload
  std::string duplicates = "lowest_row";  ///< --duplicates: lowest_row or keep_all
  bool wait_durable = false;              ///< --wait-durable: answer once the snapshot is written
  double max_load_factor = 0;  ///< --max-load-factor: upserts grow the table past it (0 = server's)
  std::string placement = "partitioned";  ///< --placement: partitioned or replicated
};
int CmdIndexBuild(const Globals& g, const BuildArgs& a);
/// Arguments of `gpujoin index upsert|delete`.
struct MutateArgs {
  std::string name, from, key;
  std::string value;              ///< upsert --value: the values of an explicit-values index
  std::string key_type = "auto";  ///< --key-type: auto, u32, u64, i64, str, COL:TYPE,...
};
/// `gpujoin index upsert NAME --from FILE --key K [--value V]`: the file's
/// rows as upserts (its other columns the payload), streamed as Mutate batches.
int CmdIndexUpsert(const Globals& g, const MutateArgs& a);
/// `gpujoin index delete NAME --from FILE --key K`: the file's keys deleted.
int CmdIndexDelete(const Globals& g, const MutateArgs& a);
/// `gpujoin index ls|describe NAME|drop NAME`
int CmdIndexLs(const Globals& g);
int CmdIndexDescribe(const Globals& g, const std::string& name);
int CmdIndexDrop(const Globals& g, const std::string& name);
/// `gpujoin index save NAME [--file F]`: a snapshot under the server's --data-dir.
int CmdIndexSave(const Globals& g, const std::string& name, const std::string& file);
/// `gpujoin index load NAME [--file F] [--replace]`.
int CmdIndexLoad(const Globals& g, const std::string& name, const std::string& file, bool replace);
/// `gpujoin index files`: the snapshots and copies under the server's --data-dir.
int CmdIndexFiles(const Globals& g);
/// `gpujoin index rm-file FILE`: deletes a copy (or a snapshot no live index owns).
int CmdIndexRmFile(const Globals& g, const std::string& file);

/// Arguments of `gpujoin lookup`.
struct LookupArgs {
  std::string name, from, key, out;
  std::string key_type = "auto";  ///< --key-type: auto, u32, u64, i64, str, COL:TYPE,...
  std::string select;             ///< --select a,b: payload columns to append
  uint32_t max_probes = 0;        ///< --max-probes: probe bound of the requests (0 = the index's)
};
int CmdLookup(const Globals& g, const LookupArgs& a);

/// The payload columns of --select `flag` (comma separated, may be empty):
/// each must be a payload column of `info`, at most once; UsageFail naming
/// `command`, the column and the index's payload otherwise.
std::vector<std::string> SelectedColumns(const std::string& flag, const client::IndexInfo& info,
                                         std::string_view command);

/// Arguments of `gpujoin join` (ad hoc when `name` is empty and `right` does
/// not name an index as "index:NAME").
struct JoinArgs {
  std::string name, left, right, on, out;
  std::string key_type = "auto";  ///< --key-type: auto, u32, u64, i64, str, COL:TYPE,... (both sides)
  uint64_t capacity = 0;
  std::optional<std::string> select;  ///< --select a,b: payload columns (resident joins)
  std::string how = "inner";          ///< --how: inner, left, semi, anti
  /// --right-duplicates of an ad-hoc join: lowest_row or keep_all ("" = keep_all).
  std::string right_duplicates;
  uint32_t max_probes = 0;  ///< --max-probes: probe bound of the requests (0 = the index's)
};
int CmdJoin(const Globals& g, const JoinArgs& a);

/// Arguments of `gpujoin agg`.
struct AggArgs {
  std::string from, group, op, value, where_mask, out;
  std::string value_type = "auto";  ///< --value-type: auto, float32, float64, int32, ...
};
int CmdAgg(const Globals& g, const AggArgs& a);

/// One flag of `gpujoin query` whose place among the others matters.
struct OrderedFlag {
  std::string flag;  ///< "--lookup", "--select", "--prefix" or "--how"
  std::string value;
};

/// Arguments of `gpujoin query` (docs/cli.md, "query"): the plan's steps run
/// in the order lookups, --where, --group-by/--agg, --project, --limit.
struct QueryArgs {
  std::string from, out;
  /// Every --lookup with the --select, --prefix and --how that follow it (each
  /// applies to the --lookup before it), in command-line order.
  std::vector<OrderedFlag> lookups;
  std::vector<std::string> where;       ///< --where EXPR: one filter step each
  std::optional<std::string> group_by;  ///< --group-by a,b
  std::optional<std::string> agg;       ///< --agg 'count(),mean(x) as m'
  std::optional<std::string> project;   ///< --project a,b=new_name
  std::optional<uint64_t> limit;        ///< --limit N
  std::string schema;  ///< --schema a:i64,b:str: types of input columns (else inferred)
};
int CmdQuery(const Globals& g, const QueryArgs& a);

/// Arguments of `gpujoin hash`.
struct HashArgs {
  std::string from, cols, out;
  uint32_t bits = 64;
};
int CmdHash(const Globals& g, const HashArgs& a);

}  // namespace gpujoin::cli
