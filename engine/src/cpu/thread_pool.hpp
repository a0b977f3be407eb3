// A small fixed-size thread pool for the CPU backend. ParallelFor may be called
// from several threads at once (concurrent graphs); each call blocks until all of
// its tasks have run, and the calling thread runs tasks too.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace gpujoin::engine::cpu {

class ThreadPool {
 public:
  /// `threads` is the total parallelism including the calling thread; 0 means
  /// std::thread::hardware_concurrency() (at least 1).
  explicit ThreadPool(uint32_t threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  /// Total parallelism (workers + the calling thread).
  uint32_t size() const { return size_; }

  /// Runs fn(0) .. fn(tasks - 1), in any order and on any thread, and returns when
  /// all have finished. If a task throws (e.g. std::bad_alloc), the first
  /// exception is rethrown on the calling thread once no task of this call is
  /// running any more (tasks not yet started may be skipped).
  void ParallelFor(size_t tasks, const std::function<void(size_t)>& fn);

 private:
  struct Job {
    size_t tasks = 0;
    const std::function<void(size_t)>* fn = nullptr;
    std::atomic<size_t> next{0};
    std::mutex mu;
    std::condition_variable cv;
    size_t finished = 0;       // guarded by mu
    std::exception_ptr error;  // guarded by mu: the first exception a task threw
  };

  static void Drain(Job& job);
  void WorkerLoop();
  void Forget(const std::shared_ptr<Job>& job);

  uint32_t size_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> queue_;  // jobs that may still have unclaimed tasks
  bool stop_ = false;
  std::vector<std::thread> workers_;
};

/// Splits [0, rows) into at most `max_parts` contiguous ranges of at least
/// `min_rows` rows each (one range when rows < 2 * min_rows). Range p is
/// [bounds[p], bounds[p + 1]).
std::vector<size_t> SplitRows(size_t rows, size_t max_parts, size_t min_rows);

}  // namespace gpujoin::engine::cpu
