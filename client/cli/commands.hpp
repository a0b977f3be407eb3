// The gpujoin commands. Each returns the exit code or throws CliError; see
// docs/cli.md for their behaviour and output.
#pragma once

#include <cstdint>
#include <string>

#include "cli_context.hpp"

namespace gpujoin::cli {

/// `gpujoin health [--service NAME]`
int CmdHealth(const Globals& g, const std::string& service);
/// `gpujoin info`
int CmdInfo(const Globals& g);

/// Arguments of `gpujoin index build`.
struct BuildArgs {
  std::string name, from, key, value;
  std::string key_type = "auto";  ///< --key-type: auto, u32, u64, i64
  bool row_ids = false;
  uint32_t first_row = 0;
  uint32_t capacity = 0;
  double load_factor = 0;
  uint32_t max_probes = 0;
  bool replace = false;
};
int CmdIndexBuild(const Globals& g, const BuildArgs& a);
/// `gpujoin index ls|describe NAME|drop NAME`
int CmdIndexLs(const Globals& g);
int CmdIndexDescribe(const Globals& g, const std::string& name);
int CmdIndexDrop(const Globals& g, const std::string& name);

/// Arguments of `gpujoin lookup`.
struct LookupArgs {
  std::string name, from, key, out;
  std::string key_type = "auto";  ///< --key-type: auto, u32, u64, i64
};
int CmdLookup(const Globals& g, const LookupArgs& a);

/// Arguments of `gpujoin join` (ad hoc when `name` is empty).
struct JoinArgs {
  std::string name, left, right, on, out;
  std::string key_type = "auto";  ///< --key-type: auto, u32, u64, i64 (both sides)
  uint64_t capacity = 0;
};
int CmdJoin(const Globals& g, const JoinArgs& a);

/// Arguments of `gpujoin agg`.
struct AggArgs {
  std::string from, group, op, value, where_mask, out;
};
int CmdAgg(const Globals& g, const AggArgs& a);

/// Arguments of `gpujoin hash`.
struct HashArgs {
  std::string from, cols, out;
  uint32_t bits = 64;
};
int CmdHash(const Globals& g, const HashArgs& a);

}  // namespace gpujoin::cli
