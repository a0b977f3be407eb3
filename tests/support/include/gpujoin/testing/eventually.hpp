// Waiting, boundedly, for a condition another process or thread makes true.
#pragma once

#include <chrono>
#include <thread>

namespace gpujoin::testing {

/// Polls `done` every 10 ms for up to 10 s; returns its last answer.
template <typename Fn>
bool Eventually(Fn done) {
  for (int i = 0; i < 1000; ++i) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return done();
}

}  // namespace gpujoin::testing
