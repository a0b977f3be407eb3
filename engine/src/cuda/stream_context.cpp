#include "cuda/stream_context.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "absl/strings/str_cat.h"
#include "cuda/cuda_error.hpp"
#include "gpujoin/common/status_macros.hpp"

namespace gpujoin::engine::detail {

namespace {

size_t Align16(size_t v) { return (v + 15) & ~size_t(15); }

}  // namespace

CudaWaitMode WaitModeOf(const BackendOptions& options) {
  CudaWaitMode m;
  m.poll_us = std::min<uint32_t>(options.cuda_wait_poll_us, 1000000);
  if (options.cuda_spin_wait) {
    m.blocking_events = false;
    m.poll_us = 0;
  }
  return m;
}

cudaError_t WaitForEvent(cudaEvent_t event, const CudaWaitMode& mode) {
  if (mode.poll_us > 0) {
    // Most small batches finish within tens of microseconds: catching them by
    // polling avoids the ~50 us sleep/wake-up of a blocking-sync wait, and the
    // bound keeps threads beyond the core count from spinning for long.
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::microseconds(mode.poll_us);
    for (;;) {
      const cudaError_t e = cudaEventQuery(event);
      if (e != cudaErrorNotReady) return e;
      if (std::chrono::steady_clock::now() >= deadline) break;
#if defined(__x86_64__) || defined(__i386__)
      _mm_pause();
#endif
      std::this_thread::yield();
    }
  }
  // Sleeps on cudaEventBlockingSync events; spins on the others.
  return cudaEventSynchronize(event);
}

absl::StatusOr<std::unique_ptr<StreamContext>> StreamContext::Create(
    const BackendOptions& options) {
  std::unique_ptr<StreamContext> ctx(new StreamContext());
  ctx->wait_ = WaitModeOf(options);
  ctx->join_graphs_.set_enabled(options.cuda_join_graphs);
  ctx->aggregate_graphs_.set_enabled(options.cuda_aggregate_graphs);
  ctx->plan_graphs_.set_enabled(options.cuda_plan_graphs);
  GPUJOIN_CUDA_RETURN(cudaStreamCreateWithFlags(&ctx->stream_, cudaStreamNonBlocking),
                      "create stream");
  // Blocking-sync events put a waiting thread to sleep instead of spinning a core,
  // so more Runs than cores can wait on the GPU at once.
  const unsigned event_flags =
      cudaEventDisableTiming | (ctx->wait_.blocking_events ? cudaEventBlockingSync : 0u);
  for (int b = 0; b < 2; ++b) {
    auto staging = PinnedBuffer::Allocate(kStagingBytes, "staging buffer");
    if (!staging.ok()) return staging.status();
    ctx->staging_[b] = std::move(*staging);
    GPUJOIN_CUDA_RETURN(cudaEventCreateWithFlags(&ctx->staged_[b], event_flags),
                        "create staging event");
  }
  GPUJOIN_CUDA_RETURN(cudaEventCreateWithFlags(&ctx->done_, event_flags), "create stream event");
  auto host_stats = PinnedBuffer::Allocate(256, "statistics");
  if (!host_stats.ok()) return host_stats.status();
  ctx->host_stats_ = std::move(*host_stats);
  auto device_stats = DeviceBuffer<uint8_t>::Persistent(256, "statistics");
  if (!device_stats.ok()) return device_stats.status();
  ctx->device_stats_ = std::move(*device_stats);
  return ctx;
}

StreamContext::~StreamContext() {
  // Nothing may still read the staging buffers or the graphs' memory.
  if (stream_ != nullptr) (void)cudaStreamSynchronize(stream_);
  graphs_.Clear();
  join_graphs_.Clear();
  aggregate_graphs_.Clear();
  plan_graphs_.Clear();
  for (cudaEvent_t e : staged_) {
    if (e != nullptr) (void)cudaEventDestroy(e);
  }
  if (done_ != nullptr) (void)cudaEventDestroy(done_);
  if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
}

absl::Status StreamContext::Upload(void* dst, std::span<const HostRange> ranges, const char* what) {
  auto* out = static_cast<uint8_t*>(dst);
  int b = 0;
  for (const HostRange& r : ranges) {
    const auto* src = static_cast<const uint8_t*>(r.data);
    size_t left = r.bytes;
    while (left > 0) {
      const size_t piece = std::min(left, kStagingBytes);
      // The buffer is free once the copy queued from it last time has run.
      GPUJOIN_CUDA_RETURN(WaitForEvent(staged_[b], wait_), absl::StrCat("upload ", what));
      std::memcpy(staging_[b].data(), src, piece);
      GPUJOIN_CUDA_RETURN(
          cudaMemcpyAsync(out, staging_[b].data(), piece, cudaMemcpyHostToDevice, stream_),
          absl::StrCat("upload ", what));
      GPUJOIN_CUDA_RETURN(cudaEventRecord(staged_[b], stream_), absl::StrCat("upload ", what));
      out += piece;
      src += piece;
      left -= piece;
      b ^= 1;
    }
  }
  return absl::OkStatus();
}

absl::Status StreamContext::Download(void* dst, const void* src, size_t bytes, const char* what) {
  if (bytes == 0) return absl::OkStatus();
  auto* out = static_cast<uint8_t*>(dst);
  const auto* in = static_cast<const uint8_t*>(src);
  const size_t pieces = (bytes + kStagingBytes - 1) / kStagingBytes;
  auto piece_bytes = [&](size_t k) { return std::min(kStagingBytes, bytes - k * kStagingBytes); };
  auto queue = [&](size_t k) -> absl::Status {
    const int b = int(k & 1);
    GPUJOIN_CUDA_RETURN(cudaMemcpyAsync(staging_[b].data(), in + k * kStagingBytes, piece_bytes(k),
                                        cudaMemcpyDeviceToHost, stream_),
                        absl::StrCat("download ", what));
    GPUJOIN_CUDA_RETURN(cudaEventRecord(staged_[b], stream_), absl::StrCat("download ", what));
    return absl::OkStatus();
  };
  if (auto s = queue(0); !s.ok()) return s;
  for (size_t k = 0; k < pieces; ++k) {
    // Queue the next piece into the other buffer (its previous piece has already
    // been copied out by the host) before waiting for this one.
    if (k + 1 < pieces) {
      if (auto s = queue(k + 1); !s.ok()) return s;
    }
    GPUJOIN_CUDA_RETURN(WaitForEvent(staged_[k & 1], wait_), absl::StrCat("download ", what));
    std::memcpy(out + k * kStagingBytes, staging_[k & 1].data(), piece_bytes(k));
  }
  return absl::OkStatus();
}

size_t StreamContext::GatheredBytes(std::span<const DeviceRange> pieces) {
  size_t total = 0;
  for (const DeviceRange& p : pieces) total += Align16(p.bytes);
  return total;
}

absl::Status StreamContext::DownloadGathered(std::span<const DeviceRange> pieces,
                                             std::span<const uint8_t*> out, const char* what) {
  const size_t total = GatheredBytes(pieces);
  if (total > kStagingBytes || out.size() < pieces.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("download ", what, ": ", pieces.size(), " pieces of ", total, " bytes for ",
                     out.size(), " outputs and ", kStagingBytes, " bytes of staging"));
  }
  uint8_t* base = staging_[0].data();
  size_t off = 0;
  for (size_t k = 0; k < pieces.size(); ++k) {
    out[k] = base + off;
    if (pieces[k].bytes > 0) {
      // Stream order puts these copies after any upload still reading staging.
      GPUJOIN_CUDA_RETURN(cudaMemcpyAsync(base + off, pieces[k].data, pieces[k].bytes,
                                          cudaMemcpyDeviceToHost, stream_),
                          absl::StrCat("download ", what));
    }
    off += Align16(pieces[k].bytes);
  }
  // Uploads wait on this event before they write the buffer again.
  GPUJOIN_CUDA_RETURN(cudaEventRecord(staged_[0], stream_), absl::StrCat("download ", what));
  GPUJOIN_CUDA_RETURN(WaitForEvent(staged_[0], wait_), absl::StrCat("download ", what));
  return absl::OkStatus();
}

absl::Status StreamContext::DownloadAll(std::span<const HostPiece> pieces, const char* what) {
  std::vector<DeviceRange> ranges;
  ranges.reserve(pieces.size());
  for (const HostPiece& p : pieces) ranges.push_back({p.src, p.bytes});
  if (GatheredBytes(ranges) > kStagingBytes) {
    for (const HostPiece& p : pieces) {
      GPUJOIN_RETURN_IF_ERROR(Download(p.dst, p.src, p.bytes, what));
    }
    return absl::OkStatus();
  }
  std::vector<const uint8_t*> host(ranges.size());
  GPUJOIN_RETURN_IF_ERROR(DownloadGathered(ranges, host, what));
  for (size_t k = 0; k < pieces.size(); ++k) {
    if (pieces[k].bytes > 0) std::memcpy(pieces[k].dst, host[k], pieces[k].bytes);
  }
  return absl::OkStatus();
}

absl::Status StreamContext::Synchronize(const char* what) {
  GPUJOIN_CUDA_RETURN(cudaEventRecord(done_, stream_), what);
  GPUJOIN_CUDA_RETURN(WaitForEvent(done_, wait_), what);
  return absl::OkStatus();
}

}  // namespace gpujoin::engine::detail
