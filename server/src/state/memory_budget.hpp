// Device-memory budget accounting for resident indexes. A build reserves the
// bytes of its table (Backend::IndexBytes) before the engine allocates it, and
// for the build's duration also its transient memory (Backend::
// BuildTransientBytes); when the build is done the reservation shrinks to the
// table, moves into the index version and is released when the last reference
// to that version goes away (so memory still read by in-flight batches stays
// counted).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace gpujoin::server {

class MemoryBudget {
 public:
  /// `limit_bytes`: the most bytes all reservations together may hold. `name` and
  /// `flag` name the budget and the flag that sets it in RESOURCE_EXHAUSTED messages.
  explicit MemoryBudget(uint64_t limit_bytes, std::string name = "device memory budget",
                        std::string flag = "--device-memory-limit");

  /// RAII share of the budget. Move-only; releasing is idempotent and never fails.
  class Reservation {
   public:
    Reservation() = default;
    Reservation(Reservation&& other) noexcept { *this = std::move(other); }
    Reservation& operator=(Reservation&& other) noexcept;
    Reservation(const Reservation&) = delete;
    Reservation& operator=(const Reservation&) = delete;
    ~Reservation() { Release(); }

    uint64_t bytes() const { return bytes_; }
    /// Gives the bytes back to the budget now.
    void Release();
    /// Gives back all but `bytes` (no-op when `bytes` >= bytes()): a build reserves
    /// its peak (table plus build scratch) and keeps what the finished index holds.
    void ShrinkTo(uint64_t bytes);
    /// Makes this reservation hold exactly `bytes` for `what`. Growing fails with
    /// RESOURCE_EXHAUSTED, as Reserve does, when `bytes` do not fit beside every
    /// other reservation (the message names `bytes` as needed, the bytes the
    /// others hold as used, and the limit); the reservation is unchanged then.
    /// FAILED_PRECONDITION on a reservation that holds no budget (moved from,
    /// released, or default-constructed).
    absl::Status Resize(uint64_t bytes, std::string_view what);

    struct State;  // shared by the budget and its reservations (memory_budget.cpp)

   private:
    friend class MemoryBudget;
    std::shared_ptr<State> state_;
    uint64_t bytes_ = 0;
  };

  /// Reserves `bytes` for `what` (e.g. `index "orders"`). RESOURCE_EXHAUSTED, with
  /// the request, the bytes in use and the limit, when it does not fit; nothing
  /// changes then.
  absl::StatusOr<Reservation> Reserve(uint64_t bytes, std::string_view what);

  /// As Reserve, except that when nothing at all is reserved `bytes` are granted
  /// even beyond the limit, so that one request larger than the whole budget
  /// still makes progress, alone. The bytes in use then stay at most the larger
  /// of the limit and that one reservation; every other Reserve (or growing
  /// Resize) is refused until it is given back.
  absl::StatusOr<Reservation> ReserveOrAlone(uint64_t bytes, std::string_view what);

  /// Calls `observer` with the bytes in use now and after every change, under the
  /// budget's lock, so that its calls are ordered and the last one carries the
  /// current value (a metrics gauge follows the budget exactly). It must be cheap
  /// and must not call the budget or its reservations.
  void SetObserver(std::function<void(uint64_t used_bytes)> observer);

  uint64_t used_bytes() const;
  uint64_t limit_bytes() const;

 private:
  /// Reserve (`alone` false) and ReserveOrAlone (true).
  absl::StatusOr<Reservation> Grant(uint64_t bytes, std::string_view what, bool alone);

  std::shared_ptr<Reservation::State> state_;
};

}  // namespace gpujoin::server
