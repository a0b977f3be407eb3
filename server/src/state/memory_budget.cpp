#include "state/memory_budget.hpp"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace gpujoin::server {

struct MemoryBudget::Reservation::State {
  std::mutex mu;
  uint64_t limit = 0;
  uint64_t used = 0;
  std::string name;
  std::string flag;
  std::function<void(uint64_t)> observer;  // told `used` after each change, under `mu`

  void Changed() const {
    if (observer) observer(used);
  }
};

namespace {

// `needed` for `what` does not fit beside `used` bytes of other reservations.
absl::Status Exceeded(const MemoryBudget::Reservation::State& budget, std::string_view what,
                      uint64_t needed, uint64_t used) {
  return absl::ResourceExhaustedError(absl::StrCat(
      budget.name, " exceeded: ", std::string(what), " needs ", needed, " bytes but ", used,
      " of the ", budget.limit, " byte budget are in use (",
      used < budget.limit ? budget.limit - used : 0, " available; see ", budget.flag, ")"));
}

// Whether `bytes` more fit beside `used` (which exceeds the limit only while a
// reservation made by ReserveOrAlone holds it).
bool Fits(const MemoryBudget::Reservation::State& budget, uint64_t used, uint64_t bytes) {
  return used <= budget.limit && bytes <= budget.limit - used;
}

}  // namespace

MemoryBudget::MemoryBudget(uint64_t limit_bytes, std::string name, std::string flag)
    : state_(std::make_shared<Reservation::State>()) {
  state_->limit = limit_bytes;
  state_->name = std::move(name);
  state_->flag = std::move(flag);
}

MemoryBudget::Reservation& MemoryBudget::Reservation::operator=(Reservation&& other) noexcept {
  if (this != &other) {
    Release();
    state_ = std::move(other.state_);
    bytes_ = other.bytes_;
    other.bytes_ = 0;
  }
  return *this;
}

void MemoryBudget::Reservation::Release() {
  if (state_ != nullptr) {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->used -= bytes_;
    state_->Changed();
  }
  state_.reset();
  bytes_ = 0;
}

void MemoryBudget::Reservation::ShrinkTo(uint64_t bytes) {
  if (state_ == nullptr || bytes >= bytes_) return;
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->used -= bytes_ - bytes;
  bytes_ = bytes;
  state_->Changed();
}

absl::Status MemoryBudget::Reservation::Resize(uint64_t bytes, std::string_view what) {
  if (state_ == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("memory budget: resizing the reservation of ",
                                                      std::string(what), ", which holds none"));
  }
  std::lock_guard<std::mutex> lock(state_->mu);
  const uint64_t others = state_->used - bytes_;
  if (bytes > bytes_ && !Fits(*state_, others, bytes)) {
    return Exceeded(*state_, what, bytes, others);
  }
  state_->used = others + bytes;
  bytes_ = bytes;
  state_->Changed();
  return absl::OkStatus();
}

absl::StatusOr<MemoryBudget::Reservation> MemoryBudget::Reserve(uint64_t bytes,
                                                                std::string_view what) {
  return Grant(bytes, what, /*alone=*/false);
}

absl::StatusOr<MemoryBudget::Reservation> MemoryBudget::ReserveOrAlone(uint64_t bytes,
                                                                       std::string_view what) {
  return Grant(bytes, what, /*alone=*/true);
}

absl::StatusOr<MemoryBudget::Reservation> MemoryBudget::Grant(uint64_t bytes, std::string_view what,
                                                              bool alone) {
  std::lock_guard<std::mutex> lock(state_->mu);
  if (!(alone && state_->used == 0) && !Fits(*state_, state_->used, bytes)) {
    return Exceeded(*state_, what, bytes, state_->used);
  }
  state_->used += bytes;
  state_->Changed();
  Reservation r;
  r.state_ = state_;
  r.bytes_ = bytes;
  return r;
}

void MemoryBudget::SetObserver(std::function<void(uint64_t)> observer) {
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->observer = std::move(observer);
  state_->Changed();
}

uint64_t MemoryBudget::used_bytes() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->used;
}

uint64_t MemoryBudget::limit_bytes() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->limit;
}

}  // namespace gpujoin::server
