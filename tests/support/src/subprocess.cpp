#include "gpujoin/testing/subprocess.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <thread>

extern char** environ;

namespace gpujoin::testing {

pid_t Spawn(const std::vector<std::string>& argv, int stdin_fd, int stdout_fd, int stderr_fd,
            std::string* error, const std::vector<std::string>* env) {
  if (argv.empty()) {
    *error = "spawn failed: empty argv";
    return -1;
  }
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, stdin_fd, 0);
  posix_spawn_file_actions_adddup2(&actions, stdout_fd, 1);
  posix_spawn_file_actions_adddup2(&actions, stderr_fd, 2);
  pid_t pid = -1;
  // posix_spawn (not fork) so that it is safe from a multi-threaded test process;
  // glibc reports a failed exec here rather than as exit status 127.
  std::vector<char*> envp;
  if (env != nullptr) {
    for (const auto& e : *env) envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);
  }
  const int rc = posix_spawn(&pid, args[0], &actions, nullptr, args.data(),
                             env != nullptr ? envp.data() : environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    *error = "spawn failed: " + argv[0] + ": " + std::strerror(rc);
    return -1;
  }
  return pid;
}

int ExitCode(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return -1;
}

int StopProcess(pid_t pid, int sig, std::chrono::milliseconds grace) {
  if (pid <= 0) return -1;
  kill(pid, sig);
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + grace;
  while (waitpid(pid, &status, WNOHANG) != pid) {
    if (std::chrono::steady_clock::now() >= deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return ExitCode(status);
}

namespace {

// The current environment with options.unset_env removed and options.set_env
// added (an entry of set_env replaces one of the same name).
std::vector<std::string> ChildEnvironment(const RunOptions& options) {
  auto name_of = [](const std::string& entry) { return entry.substr(0, entry.find('=')); };
  auto dropped = [&](const std::string& name) {
    for (const auto& u : options.unset_env)
      if (u == name) return true;
    for (const auto& e : options.set_env)
      if (name_of(e) == name) return true;
    return false;
  };
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry(*e);
    if (!dropped(name_of(entry))) env.push_back(entry);
  }
  env.insert(env.end(), options.set_env.begin(), options.set_env.end());
  return env;
}

}  // namespace

RunResult RunProcess(const std::vector<std::string>& argv, const RunOptions& options) {
  RunResult r;
  const int in = open(options.stdin_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) {
    r.err = "cannot open stdin file " + options.stdin_path + ": " + std::strerror(errno);
    return r;
  }
  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0) {
    close(in);
    r.err = "pipe failed";
    return r;
  }
  if (pipe2(err, O_CLOEXEC) != 0) {
    close(in);
    close(out[0]);
    close(out[1]);
    r.err = "pipe failed";
    return r;
  }
  const std::vector<std::string> env = ChildEnvironment(options);
  const pid_t pid = Spawn(argv, in, out[1], err[1], &r.err, &env);
  close(in);
  close(out[1]);
  close(err[1]);
  if (pid < 0) {
    close(out[0]);
    close(err[0]);
    return r;
  }
  // Read both pipes as they fill so that a chatty child never blocks on a full pipe.
  const auto deadline = std::chrono::steady_clock::now() + options.timeout;
  pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  std::string* sinks[2] = {&r.out, &r.err};
  int open_fds = 2;
  while (open_fds > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      r.timed_out = true;
      kill(pid, SIGKILL);
      break;
    }
    if (poll(fds, 2, static_cast<int>(left.count())) <= 0) continue;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[8192];
      const ssize_t n = read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        sinks[i]->append(buf, static_cast<size_t>(n));
      } else {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  for (auto& f : fds) {
    if (f.fd >= 0) close(f.fd);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  r.code = ExitCode(status);
  return r;
}

}  // namespace gpujoin::testing
