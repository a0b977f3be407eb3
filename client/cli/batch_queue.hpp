// The batches of a pipelined stream between its source, which runs on the
// client library's writer thread (parses a batch, queues it, sends its keys),
// and its sink, which runs on the calling thread (takes the oldest batch and
// writes its rows with the answer). The client answers in send order, so the
// queue's front is the answered batch; it holds at most the batches in flight.
#pragma once

#include <deque>
#include <memory>
#include <mutex>
#include <optional>

#include "absl/status/status.h"

namespace gpujoin::cli {

template <typename T>
class BatchQueue {
 public:
  void Push(std::unique_ptr<T> batch) {
    std::lock_guard<std::mutex> lock(mu_);
    q_.push_back(std::move(batch));
  }
  /// The oldest batch, or nullptr when none is queued.
  std::unique_ptr<T> Pop() {
    std::lock_guard<std::mutex> lock(mu_);
    if (q_.empty()) return nullptr;
    std::unique_ptr<T> b = std::move(q_.front());
    q_.pop_front();
    return b;
  }
  /// The source's input error (a source cannot throw: it ends the stream
  /// instead, and the command reports this after the call returns).
  void SetError(absl::Status s) {
    std::lock_guard<std::mutex> lock(mu_);
    if (error_.ok()) error_ = std::move(s);
  }
  absl::Status error() {
    std::lock_guard<std::mutex> lock(mu_);
    return error_;
  }

 private:
  std::mutex mu_;
  std::deque<std::unique_ptr<T>> q_;
  absl::Status error_;
};

}  // namespace gpujoin::cli
