// Host memory handed out by a backend (Backend::AllocateHostBuffer): page-locked
// memory on the CUDA backend, so that columns placed there by the caller are copied
// to and from the device directly, without a staging copy; ordinary aligned memory
// on the CPU backend. Buffers come from a per-backend cache of freed blocks, so
// request paths do not pay an allocation (cudaHostAlloc is slow) per call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <utility>

namespace gpujoin::engine {

/// A block of host memory from a backend. Move-only; the destructor gives the
/// block back to the pool it came from (which may outlive the backend).
/// Thread-compatible: one owner at a time.
class HostBuffer {
 public:
  /// Where a block goes back to. Implementations must be thread-safe.
  class Pool {
   public:
    virtual ~Pool() = default;
    /// Takes back a block handed out with this `capacity`.
    virtual void Return(uint8_t* data, size_t capacity) noexcept = 0;
  };

  HostBuffer() = default;
  /// `size` usable bytes at `data` (a block of `capacity` bytes owned by `pool`).
  HostBuffer(uint8_t* data, size_t size, size_t capacity, bool pinned, std::shared_ptr<Pool> pool)
      : data_(data), size_(size), capacity_(capacity), pinned_(pinned), pool_(std::move(pool)) {}
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;
  HostBuffer(HostBuffer&& other) noexcept { *this = std::move(other); }
  HostBuffer& operator=(HostBuffer&& other) noexcept {
    if (this != &other) {
      Reset();
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
      capacity_ = std::exchange(other.capacity_, 0);
      pinned_ = std::exchange(other.pinned_, false);
      pool_ = std::move(other.pool_);
    }
    return *this;
  }
  ~HostBuffer() { Reset(); }

  /// Start of the buffer: aligned to at least 64 bytes; nullptr when empty.
  uint8_t* data() const { return data_; }
  /// Usable bytes (what was asked for).
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  /// True when the memory is page-locked and registered with the CUDA backend
  /// that handed it out (that backend then copies it to/from the device directly).
  bool pinned() const { return pinned_; }

  /// `count` elements of T starting `offset` bytes into the buffer. The caller
  /// keeps offset aligned for T and offset + count * sizeof(T) <= size().
  template <typename T>
  std::span<T> Span(size_t offset, size_t count) const {
    return std::span<T>(reinterpret_cast<T*>(data_ + offset), count);
  }

  /// Gives the block back now; the buffer becomes empty.
  void Reset() noexcept {
    if (data_ != nullptr && pool_ != nullptr) pool_->Return(data_, capacity_);
    data_ = nullptr;
    size_ = 0;
    capacity_ = 0;
    pinned_ = false;
    pool_.reset();
  }

 private:
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  size_t capacity_ = 0;
  bool pinned_ = false;
  std::shared_ptr<Pool> pool_;
};

}  // namespace gpujoin::engine
