// The `gpujoin` command line: argument parsing and the commands (health, info,
// index build/ls/describe/drop, lookup, join, agg, hash, query). See docs/cli.md.
#pragma once

namespace gpujoin::cli {

/// Exit codes of the CLI.
inline constexpr int kExitOk = 0;
inline constexpr int kExitRpc = 1;    ///< the server or the RPC failed (gRPC code and text shown)
inline constexpr int kExitUsage = 2;  ///< bad arguments or bad input (file, line, column shown)

/// Runs the CLI on `argv` and returns the process exit code. Results go to
/// stdout (or --out), messages to stderr, each error as one line.
int RunCli(int argc, char** argv);

}  // namespace gpujoin::cli
