#include "common/host_pool.hpp"

#include <algorithm>
#include <bit>
#include <new>

#include "absl/strings/str_cat.h"
#include "gpujoin/engine/backend.hpp"

namespace gpujoin::engine {

namespace detail {

namespace {
constexpr std::align_val_t kAlign{64};
}  // namespace

void* AllocateAlignedHost(size_t bytes) { return ::operator new(bytes, kAlign); }

void FreeAlignedHost(void* p) noexcept { ::operator delete(p, kAlign); }

std::shared_ptr<HostPool> HostPool::Ordinary(size_t max_idle_bytes) {
  return std::shared_ptr<HostPool>(new HostPool(nullptr, nullptr, max_idle_bytes));
}

std::shared_ptr<HostPool> HostPool::Pinned(PinnedAllocate allocate, PinnedFree free,
                                           size_t max_idle_bytes) {
  return std::shared_ptr<HostPool>(new HostPool(allocate, free, max_idle_bytes));
}

HostPool::~HostPool() {
  // Handed-out buffers hold a reference, so only idle blocks are left.
  for (auto& [capacity, list] : idle_) {
    for (uint8_t* p : list) FreeBlock(p, blocks_.at(reinterpret_cast<uintptr_t>(p)).pinned);
  }
}

absl::StatusOr<HostBuffer> HostPool::Get(size_t bytes) {
  if (bytes == 0) return HostBuffer();
  const size_t capacity = std::max(kMinBlock, std::bit_ceil(bytes));
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = idle_.find(capacity);
    if (it != idle_.end() && !it->second.empty()) {
      uint8_t* p = it->second.back();
      it->second.pop_back();
      idle_bytes_ -= capacity;
      const bool pinned = blocks_.at(reinterpret_cast<uintptr_t>(p)).pinned;
      return HostBuffer(p, bytes, capacity, pinned, shared_from_this());
    }
  }
  uint8_t* p = nullptr;
  bool pinned = false;
  if (allocate_ != nullptr) {
    p = static_cast<uint8_t*>(allocate_(capacity));
    pinned = p != nullptr;
  }
  if (p == nullptr) {
    try {
      p = static_cast<uint8_t*>(AllocateAlignedHost(capacity));
    } catch (const std::bad_alloc&) {
      return absl::ResourceExhaustedError(
          absl::StrCat("host buffer: cannot allocate ", capacity, " bytes for ", bytes, " bytes"));
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    blocks_[reinterpret_cast<uintptr_t>(p)] = Block{capacity, pinned};
  }
  return HostBuffer(p, bytes, capacity, pinned, shared_from_this());
}

void HostPool::Return(uint8_t* data, size_t capacity) noexcept {
  bool pinned = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (idle_bytes_ + capacity <= max_idle_bytes_) {
      try {
        idle_[capacity].push_back(data);
        idle_bytes_ += capacity;
        return;
      } catch (...) {
        // No memory for the list entry: free the block instead.
      }
    }
    auto it = blocks_.find(reinterpret_cast<uintptr_t>(data));
    if (it == blocks_.end()) return;  // not ours; nothing sensible to do
    pinned = it->second.pinned;
    blocks_.erase(it);
  }
  FreeBlock(data, pinned);
}

void HostPool::FreeBlock(uint8_t* data, bool pinned) noexcept {
  if (pinned) {
    free_(data);
  } else {
    FreeAlignedHost(data);
  }
}

bool HostPool::ContainsPinned(const void* p, size_t bytes) const {
  if (bytes == 0 || p == nullptr) return false;
  const auto begin = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = blocks_.upper_bound(begin);
  if (it == blocks_.begin()) return false;
  --it;
  return it->second.pinned && begin - it->first <= it->second.capacity &&
         bytes <= it->second.capacity - (begin - it->first);
}

size_t HostPool::idle_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return idle_bytes_;
}

}  // namespace detail

absl::StatusOr<HostBuffer> Backend::AllocateHostBuffer(size_t bytes) {
  // Shared by every backend without its own pool; keeps up to 256 MiB of freed
  // blocks so that request-sized buffers are recycled instead of faulted in anew.
  static const std::shared_ptr<detail::HostPool> pool =
      detail::HostPool::Ordinary(size_t{256} << 20);
  return pool->Get(bytes);
}

}  // namespace gpujoin::engine
