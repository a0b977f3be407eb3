// Internal: a thread-safe cache of host memory blocks behind HostBuffer. Blocks
// are sized to powers of two (at least kMinBlock); a returned block is kept for
// reuse while the idle bytes stay under a bound, else freed. The CUDA backend
// uses one with a page-locked allocator (and ordinary memory as the fallback when
// page-locked memory runs out); the default Backend::AllocateHostBuffer uses one
// with ordinary memory only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/status/statusor.h"
#include "gpujoin/engine/host_buffer.hpp"

namespace gpujoin::engine::detail {

/// 64-byte aligned ordinary host memory (operator new); never returns nullptr.
void* AllocateAlignedHost(size_t bytes);
void FreeAlignedHost(void* p) noexcept;

class HostPool final : public HostBuffer::Pool, public std::enable_shared_from_this<HostPool> {
 public:
  /// Smallest block handed out.
  static constexpr size_t kMinBlock = size_t{4} << 10;

  /// Allocates one block of pinned memory: nullptr when none is available.
  using PinnedAllocate = void* (*)(size_t bytes);
  using PinnedFree = void (*)(void* p);

  /// A pool of ordinary memory only.
  static std::shared_ptr<HostPool> Ordinary(size_t max_idle_bytes);
  /// A pool that tries `allocate` first (its blocks count as pinned) and falls back
  /// to ordinary memory when it returns nullptr.
  static std::shared_ptr<HostPool> Pinned(PinnedAllocate allocate, PinnedFree free,
                                          size_t max_idle_bytes);

  ~HostPool() override;

  /// A buffer of `bytes` usable bytes (empty for zero).
  absl::StatusOr<HostBuffer> Get(size_t bytes);
  void Return(uint8_t* data, size_t capacity) noexcept override;

  /// True when [p, p + bytes) lies inside one pinned block of this pool (handed out
  /// or idle). Empty ranges are never inside.
  bool ContainsPinned(const void* p, size_t bytes) const;

  /// Bytes of idle blocks kept for reuse (for tests).
  size_t idle_bytes() const;

 private:
  HostPool(PinnedAllocate allocate, PinnedFree free, size_t max_idle_bytes)
      : allocate_(allocate), free_(free), max_idle_bytes_(max_idle_bytes) {}

  void FreeBlock(uint8_t* data, bool pinned) noexcept;

  const PinnedAllocate allocate_;  // nullptr: ordinary memory only
  const PinnedFree free_;
  const size_t max_idle_bytes_;

  mutable std::mutex mu_;
  std::map<size_t, std::vector<uint8_t*>> idle_;  // by capacity; guarded by mu_
  size_t idle_bytes_ = 0;                          // guarded by mu_
  // Every live block (handed out or idle): start -> {capacity, pinned}.
  struct Block {
    size_t capacity;
    bool pinned;
  };
  std::map<uintptr_t, Block> blocks_;  // guarded by mu_
};

}  // namespace gpujoin::engine::detail
