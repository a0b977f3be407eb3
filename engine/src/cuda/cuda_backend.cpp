// The CUDA backend: lowers a validated command graph onto one stream per
// concurrent Run (uploads through pinned staging, kernels from device_ops.hpp,
// downloads), replays captured graphs for repeated lookup shapes, small join
// batches and small aggregations (BackendOptions::cuda_join_graphs and
// cuda_aggregate_graphs turn the latter two off), and classifies
// CUDA errors (allocation failure -> RESOURCE_EXHAUSTED for that request; sticky
// error -> INTERNAL and Healthy() false for good).
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/backend_registry.hpp"
#include "common/host_pool.hpp"
#include "cuda/aggregate/aggregate_ops.hpp"
#include "cuda/build_memory.hpp"
#include "cuda/cuda_error.hpp"
#include "cuda/cuda_hash_index.hpp"
#include "cuda/cuda_index_image.hpp"
#include "cuda/device_buffer.hpp"
#include "cuda/device_ops.hpp"
#include "cuda/hash/hash_device.hpp"
#include "cuda/lowering/lowering.hpp"
#include "cuda/payload/record_layout.hpp"
#include "cuda/plan/device_plan.hpp"
#include "cuda/stream_context.hpp"
#include "gpujoin/common/status_macros.hpp"
#include "gpujoin/engine/backend.hpp"

namespace gpujoin::engine::detail {
namespace {

/// Idle StreamContexts kept for reuse (each holds a stream and 16 MiB of pinned
/// staging). Sized above any executor the server runs (its CUDA default is at most
/// 16 threads, each with several batches in flight), so that concurrent Runs reuse
/// contexts instead of creating and destroying streams per Run.
constexpr size_t kMaxIdleContexts = 64;

/// Freed page-locked host buffers kept for reuse (AllocateHostBuffer): enough for
/// the 1M-row lookups of 16 streams with two batches in flight each (keys 4 MiB,
/// outputs 8 MiB per batch, rounded to powers of two).
constexpr size_t kMaxIdlePinnedBytes = size_t{512} << 20;

// Page-locked, portable (usable from every context) host memory; nullptr when the
// driver refuses (the pool then hands out ordinary memory).
void* AllocatePinnedHost(size_t bytes) {
  void* p = nullptr;
  if (cudaHostAlloc(&p, bytes, cudaHostAllocPortable) != cudaSuccess) {
    (void)cudaGetLastError();
    return nullptr;
  }
  return p;
}
void FreePinnedHost(void* p) { (void)cudaFreeHost(p); }

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(const BackendOptions& options)
      : options_(options), device_(options.cuda_device) {}

  ~CudaBackend() override {
    std::lock_guard<std::mutex> lock(mu_);
    if (cudaSetDevice(device_) == cudaSuccess) idle_.clear();
  }

  BackendInfo Info() const override {
    BackendInfo info;
    info.kind = BackendKind::kCuda;
    cudaDeviceProp prop{};
    if (cudaSetDevice(device_) == cudaSuccess &&
        cudaGetDeviceProperties(&prop, device_) == cudaSuccess) {
      info.device_name = prop.name;
      info.parallelism = uint32_t(prop.multiProcessorCount);
    }
    size_t free_bytes = 0, total_bytes = 0;
    if (cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess) {
      info.memory_total_bytes = total_bytes;
      info.memory_free_bytes = free_bytes;
    }
    return info;
  }

  absl::StatusOr<std::unique_ptr<HashIndex>> CreateIndex(const HashIndexSpec& spec) override {
    GPUJOIN_RETURN_IF_ERROR(spec.Validate());
    GPUJOIN_RETURN_IF_ERROR(CheckHealthy());
    auto index = CudaHashIndex::Create(spec, device_, options_.key_fingerprint_bits);
    if (!index.ok()) {
      NoteError(cudaSuccess);
      return index.status();
    }
    return std::unique_ptr<HashIndex>(std::move(*index));
  }

  uint64_t IndexBytes(const HashIndexSpec& spec) const override {
    // What CudaHashIndex::Create allocates: 8 bytes a slot for uint32 keys, 16
    // for uint64 keys and key schemas (whose key columns come with builds, in
    // memory_bytes()). A kKeepAll index's groups come with its builds
    // (GroupStorageBytes, in memory_bytes()).
    return TableAllocationBytes(spec.capacity, spec.key_type);
  }

  uint64_t PayloadBytes(const HashIndexSpec& spec, std::span<const PayloadShape> payload,
                        uint64_t rows) const override {
    // Payload is stored per slot of the allocated table (TableAllocationSlots),
    // or per kept row of a kKeepAll index, the fixed-width columns in padded records.
    return CudaPayloadStorageBytes(
        spec.duplicates == DuplicatePolicy::kKeepAll ? rows : TableAllocationSlots(spec.capacity),
        payload);
  }

  uint64_t BuildTransientBytes(const HashIndexSpec& spec, const BuildShape& shape) const override {
    BuildSource src;  // the path and cap the build nodes will use
    SetBuildOptions(options_, src);
    // CUB sizes the tile path's sort scratch for the current device.
    (void)cudaSetDevice(device_);
    return BuildNodeTransientBytes(spec, shape, src.path, src.transient_max_bytes);
  }

  absl::Status Run(const CommandGraph& graph) override {
    GPUJOIN_RETURN_IF_ERROR(graph.Validate());
    GPUJOIN_RETURN_IF_ERROR(CheckHealthy());
    if (const cudaError_t e = cudaSetDevice(device_); e != cudaSuccess) {
      NoteError(e);  // a sticky error can surface here first
      return CudaStatus(e, "select device");
    }
    auto ctx = Acquire();
    if (!ctx.ok()) {
      NoteError(cudaSuccess);
      return ctx.status();
    }
    const LoweringEnv env{options_, *host_pool_};
    absl::Status status;
    for (size_t i = 0; i < graph.nodes().size() && status.ok(); ++i) {
      status = std::visit([&](const auto& node) { return RunNode(env, **ctx, i, node); },
                          graph.nodes()[i]);
    }
    if (!status.ok()) {
      // Let queued work that still reads staging or scratch finish before reuse.
      NoteError(cudaStreamSynchronize((*ctx)->stream()));
      if (!healthy_.load()) return status;
    }
    Release(std::move(*ctx));
    return status;
  }

  absl::StatusOr<std::unique_ptr<DevicePlanBatch>> StartDevicePlan(
      const DevicePlanInput& input) override {
    GPUJOIN_RETURN_IF_ERROR(CheckHealthy());
    if (const cudaError_t e = cudaSetDevice(device_); e != cudaSuccess) {
      NoteError(e);
      return CudaStatus(e, "select device");
    }
    auto ctx = Acquire();
    if (!ctx.ok()) {
      NoteError(cudaSuccess);
      return ctx.status();
    }
    // As Run: after a failure the stream drains and the device is checked; a
    // context of a device that failed for good is dropped.
    return StartDevicePlanBatch(input, device_, std::move(*ctx),
                                [this](std::unique_ptr<StreamContext> ctx, bool failed) {
                                  if (failed) {
                                    NoteError(cudaStreamSynchronize(ctx->stream()));
                                    if (!healthy_.load()) return;
                                  }
                                  Release(std::move(ctx));
                                });
  }

  bool Healthy() const override { return healthy_.load(); }

  absl::StatusOr<IndexImage> ExportIndex(const HashIndex& index) const override {
    const auto* cuda = dynamic_cast<const CudaHashIndex*>(&index);
    if (cuda == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("export: the index belongs to the ",
                                                     std::string(BackendKindName(index.backend())),
                                                     " backend, not cuda"));
    }
    GPUJOIN_RETURN_IF_ERROR(CheckHealthy());
    try {
      auto image = ExportCudaIndex(*cuda);
      // A sticky error met by the export marks the backend unhealthy like a Run's.
      if (!image.ok()) const_cast<CudaBackend*>(this)->NoteError(cudaSuccess);
      return image;
    } catch (const std::bad_alloc&) {
      return absl::ResourceExhaustedError("export: host allocation of the index image failed");
    }
  }

  absl::StatusOr<std::unique_ptr<HashIndex>> ImportIndex(const IndexImage& image) override {
    GPUJOIN_RETURN_IF_ERROR(image.Validate());
    GPUJOIN_RETURN_IF_ERROR(CheckHealthy());
    auto index = ImportCudaIndex(image, device_, options_.key_fingerprint_bits);
    if (!index.ok()) {
      NoteError(cudaSuccess);
      return index.status();
    }
    return std::unique_ptr<HashIndex>(std::move(*index));
  }

  absl::StatusOr<HostBuffer> AllocateHostBuffer(size_t bytes) override {
    return host_pool_->Get(bytes);
  }

 private:
  absl::Status CheckHealthy() const {
    if (healthy_.load()) return absl::OkStatus();
    std::lock_guard<std::mutex> lock(mu_);
    return absl::InternalError(
        absl::StrCat("cuda backend is not serving after a fatal device error: ", fatal_message_));
  }

  // After a failure: a sticky error is reported by every later call, so the
  // stream's synchronisation result (or the last-error slot) tells.
  void NoteError(cudaError_t observed) {
    const cudaError_t last = cudaPeekAtLastError();
    const cudaError_t fatal =
        IsStickyCudaError(observed) ? observed : (IsStickyCudaError(last) ? last : cudaSuccess);
    if (fatal != cudaSuccess && healthy_.exchange(false)) {
      std::lock_guard<std::mutex> lock(mu_);
      fatal_message_ = absl::StrCat(cudaGetErrorName(fatal), " (", cudaGetErrorString(fatal), ")");
    }
  }

  absl::StatusOr<std::unique_ptr<StreamContext>> Acquire() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!idle_.empty()) {
        auto ctx = std::move(idle_.back());
        idle_.pop_back();
        return ctx;
      }
    }
    return StreamContext::Create(options_);
  }

  void Release(std::unique_ptr<StreamContext> ctx) {
    std::lock_guard<std::mutex> lock(mu_);
    // Keep a bounded pool: more contexts than this only exist under a burst.
    if (idle_.size() < kMaxIdleContexts) idle_.push_back(std::move(ctx));
  }

  const BackendOptions options_;
  const int device_;
  // Page-locked host buffers handed out by AllocateHostBuffer (shared with them:
  // a buffer may outlive the backend).
  const std::shared_ptr<HostPool> host_pool_ =
      HostPool::Pinned(&AllocatePinnedHost, &FreePinnedHost, kMaxIdlePinnedBytes);
  std::atomic<bool> healthy_{true};
  mutable std::mutex mu_;
  std::string fatal_message_;                         // guarded by mu_
  std::vector<std::unique_ptr<StreamContext>> idle_;  // guarded by mu_
};

}  // namespace

int CudaDeviceCount() {
  int count = 0;
  // Without a driver or device this returns an error (never aborts with the
  // statically linked runtime); treat every error as "no device".
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return count;
}

absl::StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(const BackendOptions& options) {
  const int count = CudaDeviceCount();
  if (count == 0) {
    return absl::FailedPreconditionError(
        "backend cuda: no usable CUDA device (no driver, or no device visible)");
  }
  if (options.cuda_device < 0 || options.cuda_device >= count) {
    return absl::FailedPreconditionError(absl::StrCat("backend cuda: cuda_device ",
                                                      options.cuda_device, " does not exist (",
                                                      count, " device(s) visible)"));
  }
  GPUJOIN_CUDA_RETURN(cudaSetDevice(options.cuda_device), "select device");
  // Request scratch and build buffers are recycled by the stream-ordered pool
  // instead of going back to the driver on every sync.
  GPUJOIN_CUDA_RETURN(KeepTransientMemory(options.cuda_device), "memory pool");
  return std::unique_ptr<Backend>(new CudaBackend(options));
}

}  // namespace gpujoin::engine::detail
