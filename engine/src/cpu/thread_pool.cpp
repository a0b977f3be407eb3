#include "cpu/thread_pool.hpp"

#include <algorithm>

namespace gpujoin::engine::cpu {

ThreadPool::ThreadPool(uint32_t threads) {
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  size_ = threads;
  workers_.reserve(threads - 1);
  for (uint32_t i = 1; i < threads; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::Drain(Job& job) {
  size_t done = 0;
  std::exception_ptr error;
  for (size_t i = job.next.fetch_add(1); i < job.tasks; i = job.next.fetch_add(1)) {
    try {
      (*job.fn)(i);
    } catch (...) {
      if (!error) error = std::current_exception();
    }
    ++done;
  }
  if (done == 0) return;
  std::lock_guard<std::mutex> lock(job.mu);
  if (error && !job.error) job.error = error;
  job.finished += done;
  if (job.finished == job.tasks) job.cv.notify_all();
}

void ThreadPool::Forget(const std::shared_ptr<Job>& job) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = std::find(queue_.begin(), queue_.end(), job);
  if (it != queue_.end()) queue_.erase(it);
}

void ThreadPool::WorkerLoop() {
  for (;;) {
    std::shared_ptr<Job> job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stop_ and nothing left
      job = queue_.front();
    }
    Drain(*job);
    // Every task of this job is claimed now; stop offering it to other workers.
    Forget(job);
  }
}

void ThreadPool::ParallelFor(size_t tasks, const std::function<void(size_t)>& fn) {
  if (tasks == 0) return;
  if (tasks == 1 || workers_.empty()) {
    for (size_t i = 0; i < tasks; ++i) fn(i);
    return;
  }
  auto job = std::make_shared<Job>();
  job->tasks = tasks;
  job->fn = &fn;
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(job);
  }
  cv_.notify_all();
  Drain(*job);
  Forget(job);
  std::unique_lock<std::mutex> lock(job->mu);
  job->cv.wait(lock, [&] { return job->finished == job->tasks; });
  if (job->error) std::rethrow_exception(job->error);
}

std::vector<size_t> SplitRows(size_t rows, size_t max_parts, size_t min_rows) {
  size_t parts = std::max<size_t>(1, std::min(max_parts, rows / std::max<size_t>(1, min_rows)));
  std::vector<size_t> bounds(parts + 1);
  for (size_t p = 0; p <= parts; ++p) bounds[p] = rows / parts * p + std::min(p, rows % parts);
  return bounds;
}

}  // namespace gpujoin::engine::cpu
