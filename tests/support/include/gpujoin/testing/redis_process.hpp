// A real redis-server as a child process on a free loopback port, without
// persistence, for tests that measure or check against Redis (the load
// tester's --redis target).
#pragma once

#include <sys/types.h>

#include <string>

namespace gpujoin::testing {

/// The redis-server binary: $REDIS_SERVER when set and non-empty, else the first
/// `redis-server` on $PATH, else /usr/bin/redis-server; "" when none is an
/// executable file (tests then skip, saying so).
std::string RedisServerBinary();

/// A running redis-server (`--port P --bind 127.0.0.1 --save '' --appendonly no`,
/// its output in a temporary log file). The constructor starts it on a free port
/// and waits up to 10 s until it accepts connections, trying another port when
/// the first was taken meanwhile; ready() says whether it came (log() says why
/// not). The destructor kills it and removes the log.
class RedisProcess {
 public:
  RedisProcess();
  ~RedisProcess();
  RedisProcess(const RedisProcess&) = delete;
  RedisProcess& operator=(const RedisProcess&) = delete;

  bool ready() const { return !address_.empty(); }
  /// `127.0.0.1:PORT`; empty when not ready.
  const std::string& address() const { return address_; }
  /// Everything the server printed, or why it could not start.
  std::string log() const;

 private:
  void Stop();

  pid_t pid_ = -1;
  std::string address_;
  std::string log_path_;
  std::string error_;
};

}  // namespace gpujoin::testing
