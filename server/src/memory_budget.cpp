#include "gpujoin/server/memory_budget.hpp"

#include <string>

#include "absl/strings/str_cat.h"

namespace gpujoin::server {

struct MemoryBudget::Reservation::State {
  std::mutex mu;
  uint64_t limit = 0;
  uint64_t used = 0;
};

MemoryBudget::MemoryBudget(uint64_t limit_bytes)
    : state_(std::make_shared<Reservation::State>()) {
  state_->limit = limit_bytes;
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
  }
  state_.reset();
  bytes_ = 0;
}

void MemoryBudget::Reservation::ShrinkTo(uint64_t bytes) {
  if (state_ == nullptr || bytes >= bytes_) return;
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->used -= bytes_ - bytes;
  bytes_ = bytes;
}

absl::StatusOr<MemoryBudget::Reservation> MemoryBudget::Reserve(uint64_t bytes,
                                                                std::string_view what) {
  std::lock_guard<std::mutex> lock(state_->mu);
  const uint64_t available = state_->limit - state_->used;
  if (bytes > available) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "device memory budget exceeded: ", std::string(what), " needs ", bytes, " bytes but ",
        state_->used, " of the ", state_->limit, " byte budget are in use (", available,
        " available; see --device-memory-limit)"));
  }
  state_->used += bytes;
  Reservation r;
  r.state_ = state_;
  r.bytes_ = bytes;
  return r;
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
