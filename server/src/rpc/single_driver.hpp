// The drive loop shared by the stream and build reactors.
#pragma once

#include <mutex>

namespace gpujoin::server::detail {

/// gRPC may run reactions inline inside StartRead/StartWrite, and Finish may lead
/// to OnDone (delete this), so only one thread drives a reactor at a time: another
/// caller leaves a note and the driver loops once more. `next()` runs with `mu`
/// held and returns the operations to start (an empty Actions when there is
/// nothing to do); `start(actions)` runs without the lock and returns false once
/// it called Finish, after which nothing may touch the reactor (or this driver,
/// which lives in it).
class SingleDriver {
 public:
  template <typename Next, typename Start>
  void Drive(std::mutex& mu, Next next, Start start) {
    Drive(mu, [] {}, next, start);
  }

  /// As above, with `enter()` run first under `mu`, whether or not this caller
  /// becomes the driver. A caller that keeps the reactor from finishing (a task
  /// queued on an executor, counted under `mu`) lets go of it there, in the same
  /// critical section that hands its note to the driver: let go any earlier, and
  /// another thread could finish the reactor, and gRPC delete it, before this
  /// caller reaches the lock.
  template <typename Enter, typename Next, typename Start>
  void Drive(std::mutex& mu, Enter enter, Next next, Start start) {
    {
      std::lock_guard<std::mutex> lock(mu);
      enter();
      if (driving_) {
        redrive_ = true;
        return;
      }
      driving_ = true;
    }
    for (;;) {
      decltype(next()) act;
      {
        std::lock_guard<std::mutex> lock(mu);
        act = next();
        if (act.empty() && !redrive_) {
          driving_ = false;
          return;
        }
        redrive_ = false;
      }
      if (!start(act)) return;
    }
  }

 private:
  bool driving_ = false;  // guarded by the caller's mutex
  bool redrive_ = false;  // guarded by the caller's mutex
};

}  // namespace gpujoin::server::detail
