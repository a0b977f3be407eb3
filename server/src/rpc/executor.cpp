#include "rpc/executor.hpp"

namespace gpujoin::server {

Executor::Executor(size_t threads) {
  if (threads == 0) threads = 1;
  workers_.reserve(threads);
  for (size_t i = 0; i < threads; ++i) workers_.emplace_back([this] { Work(); });
}

Executor::~Executor() { Shutdown(); }

void Executor::Submit(absl::AnyInvocable<void() &&> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!stopping_) {
      queue_.push_back(std::move(task));
      cv_.notify_one();
      return;
    }
  }
  std::move(task)();
}

void Executor::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ && workers_.empty()) return;
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : workers_) {
    if (t.joinable()) t.join();
  }
  workers_.clear();
}

void Executor::Work() {
  for (;;) {
    absl::AnyInvocable<void() &&> task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping and drained
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    std::move(task)();
  }
}

bool InflightLimiter::TryAcquire() {
  int64_t cur = current_.load(std::memory_order_relaxed);
  while (cur < static_cast<int64_t>(max_)) {
    if (current_.compare_exchange_weak(cur, cur + 1, std::memory_order_acq_rel)) return true;
  }
  return false;
}

void InflightLimiter::Release() { current_.fetch_sub(1, std::memory_order_acq_rel); }

}  // namespace gpujoin::server
