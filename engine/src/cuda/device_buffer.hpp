// Internal (CUDA builds only): RAII owners of device and pinned host memory.
// Both are move-only and their destructors never throw (errors on release are
// ignored: there is nobody to report them to, and a sticky error is seen by the
// next checked call anyway).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "cuda/cuda_error.hpp"

namespace gpujoin::engine::detail {

/// Device memory of `count` elements of T. Stream-ordered buffers come from the
/// device's memory pool (cudaMallocAsync) and are released on the same stream;
/// long-lived buffers (index tables) use cudaMalloc and cudaFree.
template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept { *this = std::move(other); }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
      Release();
      data_ = std::exchange(other.data_, nullptr);
      count_ = std::exchange(other.count_, 0);
      stream_ = std::exchange(other.stream_, nullptr);
      stream_ordered_ = std::exchange(other.stream_ordered_, false);
    }
    return *this;
  }
  ~DeviceBuffer() { Release(); }

  /// Stream-ordered allocation on `stream` (usable by work queued on it after
  /// this call). A zero count allocates nothing. RESOURCE_EXHAUSTED when the pool
  /// cannot grow; `what` names the buffer in the message.
  static absl::StatusOr<DeviceBuffer> Async(size_t count, cudaStream_t stream, const char* what) {
    DeviceBuffer b;
    b.count_ = count;
    b.stream_ = stream;
    b.stream_ordered_ = true;
    if (count == 0) return b;
    void* p = nullptr;
    GPUJOIN_CUDA_RETURN(cudaMallocAsync(&p, count * sizeof(T), stream),
                        absl::StrCat("allocate ", what, " (", count * sizeof(T), " bytes)"));
    b.data_ = static_cast<T*>(p);
    return b;
  }

  /// Long-lived allocation with cudaMalloc (synchronous; not for request paths).
  static absl::StatusOr<DeviceBuffer> Persistent(size_t count, const char* what) {
    DeviceBuffer b;
    b.count_ = count;
    if (count == 0) return b;
    void* p = nullptr;
    GPUJOIN_CUDA_RETURN(cudaMalloc(&p, count * sizeof(T)),
                        absl::StrCat("allocate ", what, " (", count * sizeof(T), " bytes)"));
    b.data_ = static_cast<T*>(p);
    return b;
  }

  T* data() const { return data_; }
  size_t size() const { return count_; }
  size_t bytes() const { return count_ * sizeof(T); }

 private:
  void Release() noexcept {
    if (data_ == nullptr) return;
    if (stream_ordered_) {
      (void)cudaFreeAsync(data_, stream_);
    } else {
      (void)cudaFree(data_);
    }
    data_ = nullptr;
    count_ = 0;
  }

  T* data_ = nullptr;
  size_t count_ = 0;
  cudaStream_t stream_ = nullptr;
  bool stream_ordered_ = false;
};

/// Page-locked host memory (cudaMallocHost), the staging area of async copies.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  PinnedBuffer(PinnedBuffer&& other) noexcept { *this = std::move(other); }
  PinnedBuffer& operator=(PinnedBuffer&& other) noexcept {
    if (this != &other) {
      if (data_ != nullptr) (void)cudaFreeHost(data_);
      data_ = std::exchange(other.data_, nullptr);
      bytes_ = std::exchange(other.bytes_, 0);
    }
    return *this;
  }
  ~PinnedBuffer() {
    if (data_ != nullptr) (void)cudaFreeHost(data_);
  }

  /// RESOURCE_EXHAUSTED when page-locked memory is not available.
  static absl::StatusOr<PinnedBuffer> Allocate(size_t bytes, const char* what) {
    PinnedBuffer b;
    void* p = nullptr;
    GPUJOIN_CUDA_RETURN(cudaMallocHost(&p, bytes),
                        absl::StrCat("allocate pinned ", what, " (", bytes, " bytes)"));
    b.data_ = static_cast<uint8_t*>(p);
    b.bytes_ = bytes;
    return b;
  }

  uint8_t* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  template <typename T>
  T* as() const {
    return reinterpret_cast<T*>(data_);
  }

 private:
  uint8_t* data_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace gpujoin::engine::detail
