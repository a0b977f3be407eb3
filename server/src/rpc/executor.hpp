// The executor: a fixed pool of threads that runs engine work handed over by the
// gRPC reactors (reactor threads never block on the engine), and the global
// in-flight batch limiter.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/functional/any_invocable.h"

namespace gpujoin::server {

class Executor {
 public:
  /// Starts `threads` workers (at least 1).
  explicit Executor(size_t threads);
  /// Runs the remaining tasks, then joins (same as Shutdown()).
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  /// Queues `task`; tasks start in submission order. After Shutdown() the task
  /// runs inline on the caller's thread so that no completion is ever lost.
  void Submit(absl::AnyInvocable<void() &&> task);

  /// Finishes all queued tasks and joins the workers. Idempotent.
  void Shutdown();

  size_t threads() const { return workers_.size(); }

 private:
  void Work();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<absl::AnyInvocable<void() &&>> queue_;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

/// Counts batches in flight over the whole server against a fixed bound.
class InflightLimiter {
 public:
  explicit InflightLimiter(uint32_t max) : max_(max) {}
  /// Takes one slot; false when all `max` are taken.
  bool TryAcquire();
  /// Returns one slot taken by TryAcquire.
  void Release();
  int64_t current() const { return current_.load(std::memory_order_relaxed); }
  uint32_t max() const { return max_; }

 private:
  const uint32_t max_;
  std::atomic<int64_t> current_{0};
};

}  // namespace gpujoin::server
