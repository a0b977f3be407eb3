// Running child processes from tests: spawn with chosen file descriptors, run to
// completion with captured stdout/stderr and a time limit, stop with a grace period.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace gpujoin::testing {

/// How a finished child ended and what it printed.
struct RunResult {
  /// Exit status; 128 + signal when killed; -1 when it could not be started.
  int code = -1;
  std::string out;         ///< everything written to stdout
  std::string err;         ///< everything written to stderr (or why the spawn failed)
  bool timed_out = false;  ///< killed with SIGKILL because it ran past the time limit
};

/// Options of RunProcess.
struct RunOptions {
  /// File opened read-only as the child's stdin.
  std::string stdin_path = "/dev/null";
  /// Wall-clock limit; the child is killed with SIGKILL past it (timed_out is set).
  std::chrono::milliseconds timeout = std::chrono::seconds(120);
  /// Variables removed from the child's environment (the test process's own
  /// environment is never changed: setenv is not thread-safe).
  std::vector<std::string> unset_env;
  /// "NAME=VALUE" entries added to (or replacing those in) the child's environment.
  std::vector<std::string> set_env;
};

/// Runs `argv` (argv[0] is a path, not searched in $PATH) to completion with the
/// current environment as changed by `options`, capturing stdout and stderr
/// through pipes.
RunResult RunProcess(const std::vector<std::string>& argv, const RunOptions& options = {});

/// Starts `argv` (argv[0] is a path) with the current environment and fds 0/1/2 of
/// the child duplicated from `stdin_fd`, `stdout_fd`, `stderr_fd` (which the caller
/// keeps and closes). Returns the pid, or -1 with the reason in `*error`.
/// `env`: the child's whole environment ("NAME=VALUE" entries), or null for the
/// current one.
pid_t Spawn(const std::vector<std::string>& argv, int stdin_fd, int stdout_fd, int stderr_fd,
            std::string* error, const std::vector<std::string>* env = nullptr);

/// The exit code encoded in a waitpid() status: the exit status, 128 + signal when
/// killed, -1 otherwise.
int ExitCode(int wait_status);

/// Sends `sig` to `pid`, waits up to `grace` for it to exit, then SIGKILLs it; always
/// reaps it. Returns its exit code (see ExitCode); -1 for a pid <= 0.
int StopProcess(pid_t pid, int sig, std::chrono::milliseconds grace);

}  // namespace gpujoin::testing
