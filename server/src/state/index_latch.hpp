// The reader/writer latch of one index version (IndexVersion::latch): queries
// hold it shared while they read the index, a mutation holds it exclusively
// while it changes it, so a query sees a mutation batch wholly or not at all.
//
// Writers come first: once a writer waits, new readers wait behind it, so a
// steady stream of queries cannot keep a mutation out (std::shared_mutex on
// glibc prefers readers). Readers already inside finish first.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace gpujoin::server {

class IndexLatch {
 public:
  void lock_shared() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return !writer_ && writers_waiting_ == 0; });
    ++readers_;
  }
  void unlock_shared() {
    std::lock_guard<std::mutex> lock(mu_);
    if (--readers_ == 0) cv_.notify_all();
  }
  void lock() {
    std::unique_lock<std::mutex> lock(mu_);
    ++writers_waiting_;
    cv_.wait(lock, [this] { return !writer_ && readers_ == 0; });
    --writers_waiting_;
    writer_ = true;
  }
  void unlock() {
    std::lock_guard<std::mutex> lock(mu_);
    writer_ = false;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t readers_ = 0;
  uint64_t writers_waiting_ = 0;
  bool writer_ = false;
};

}  // namespace gpujoin::server
