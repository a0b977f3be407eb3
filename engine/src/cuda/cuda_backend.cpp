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
#include "cuda/aggregate_ops.hpp"
#include "cuda/build_memory.hpp"
#include "cuda/cuda_error.hpp"
#include "cuda/cuda_hash_index.hpp"
#include "cuda/device_buffer.hpp"
#include "cuda/device_ops.hpp"
#include "cuda/hash_device.hpp"
#include "cuda/stream_context.hpp"
#include "gpujoin/engine/backend.hpp"
#include "gpujoin/common/status_macros.hpp"

namespace gpujoin::engine::detail {
namespace {

template <typename T>
absl::StatusOr<DeviceBuffer<T>> Alloc(size_t n, StreamContext& ctx, const char* what) {
  return DeviceBuffer<T>::Async(n, ctx.stream(), what);
}

QueryStatistics ToQueryStatistics(const DeviceQueryStats& d, uint64_t rows) {
  return QueryStatistics{d.found, rows - d.found, d.total_probes, d.max_probes};
}

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
    auto index = CudaHashIndex::Create(spec, device_);
    if (!index.ok()) {
      NoteError(cudaSuccess);
      return index.status();
    }
    return std::unique_ptr<HashIndex>(std::move(*index));
  }

  uint64_t IndexBytes(const HashIndexSpec& spec) const override {
    return TableAllocationBytes(spec.capacity);  // what CudaHashIndex::Create allocates
  }

  uint64_t BuildTransientBytes(const HashIndexSpec& spec, const BuildShape& shape) const override {
    BuildSource src;  // the path and cap the build nodes will use
    SetBuildOptions(src);
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
    absl::Status status;
    for (size_t i = 0; i < graph.nodes().size() && status.ok(); ++i) {
      status =
          std::visit([&](const auto& node) { return RunNode(**ctx, i, node); }, graph.nodes()[i]);
    }
    if (!status.ok()) {
      // Let queued work that still reads staging or scratch finish before reuse.
      NoteError(cudaStreamSynchronize((*ctx)->stream()));
      if (!healthy_.load()) return status;
    }
    Release(std::move(*ctx));
    return status;
  }

  bool Healthy() const override { return healthy_.load(); }

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

  static absl::StatusOr<CudaHashIndex*> WritableIndex(HashIndex* index, const std::string& where) {
    auto* cuda = dynamic_cast<CudaHashIndex*>(index);
    if (cuda == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": index was created by the ",
                                                     std::string(BackendKindName(index->backend())),
                                                     " backend, not by this cuda backend"));
    }
    return cuda;
  }
  static absl::StatusOr<const CudaHashIndex*> ReadableIndex(const HashIndex* index,
                                                            const std::string& where) {
    auto* cuda = dynamic_cast<const CudaHashIndex*>(index);
    if (cuda == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": index was created by the ",
                                                     std::string(BackendKindName(index->backend())),
                                                     " backend, not by this cuda backend"));
    }
    return cuda;
  }

  absl::StatusOr<BuildStatistics> DownloadBuildStats(StreamContext& ctx) {
    GPUJOIN_CUDA_RETURN(
        cudaMemcpyAsync(ctx.host_stats(), ctx.device_stats(), sizeof(DeviceBuildStats),
                        cudaMemcpyDeviceToHost, ctx.stream()),
        "download build statistics");
    GPUJOIN_RETURN_IF_ERROR(ctx.Synchronize("build"));
    DeviceBuildStats d;
    std::memcpy(&d, ctx.host_stats(), sizeof(d));
    return BuildStatistics{d.unique_keys,  d.duplicate_rows, d.overflow_rows,
                           d.invalid_rows, d.total_probes,   d.max_probes};
  }

  absl::Status FinishBuild(StreamContext& ctx, CudaHashIndex& index, uint64_t rows,
                           BuildStatistics* out) {
    GPUJOIN_ASSIGN_OR_RETURN(BuildStatistics stats, DownloadBuildStats(ctx));
    index.RecordBuild(stats, rows);
    if (out != nullptr) *out = stats;
    return absl::OkStatus();
  }

  absl::Status RunNode(StreamContext& ctx, size_t i, const BuildIndexNode& n) {
    const std::string where = absl::StrCat("node ", i, " (build)");
    GPUJOIN_ASSIGN_OR_RETURN(CudaHashIndex * index, WritableIndex(n.index, where));
    const uint64_t rows = TotalRows(n.keys);
    auto* stats = reinterpret_cast<DeviceBuildStats*>(ctx.device_stats());
    if (rows == 0)
      GPUJOIN_CUDA_RETURN(ClearTable(index->table(), stats, ctx.stream()), "clear index table");
    if (rows > 0) {
      GPUJOIN_ASSIGN_OR_RETURN(auto keys, Alloc<uint32_t>(rows, ctx, "build keys"));
      GPUJOIN_RETURN_IF_ERROR(ctx.Upload(keys.data(), RangesOf(n.keys), "build keys"));
      DeviceBuffer<uint32_t> values;
      if (n.values.has_value()) {
        GPUJOIN_ASSIGN_OR_RETURN(values, Alloc<uint32_t>(rows, ctx, "build values"));
        GPUJOIN_RETURN_IF_ERROR(ctx.Upload(values.data(), RangesOf(*n.values), "build values"));
      }
      BuildSource src;
      src.keys = keys.data();
      src.rows = rows;
      src.values = n.values.has_value() ? values.data() : nullptr;
      src.first_value = n.first_value;
      SetBuildOptions(src);
      // Clears the table too (the large-build paths write every slot instead).
      GPUJOIN_CUDA_RETURN(
          ClearAndBuildTable(index->table(), src, index->spec().probe_bound(), stats, ctx.stream()),
          "build index");
      return FinishBuild(ctx, *index, rows, n.statistics);
    }
    return FinishBuild(ctx, *index, rows, n.statistics);
  }

  absl::Status RunNode(StreamContext& ctx, size_t i, const BuildBatchIndexNode& n) {
    const std::string where = absl::StrCat("node ", i, " (batch build)");
    GPUJOIN_ASSIGN_OR_RETURN(CudaHashIndex * index, WritableIndex(n.index, where));
    uint64_t rows = 0;
    bool any_validity = false;
    std::vector<uint64_t> starts;
    std::vector<uint32_t> bases;
    std::vector<HostRange> key_ranges;
    for (const BatchChunk& c : n.chunks) {
      if (c.keys.empty()) continue;
      starts.push_back(rows);
      bases.push_back(c.row_base);
      key_ranges.push_back({c.keys.data(), c.keys.size_bytes()});
      any_validity = any_validity || !c.validity.empty();
      rows += c.keys.size();
    }
    auto* stats = reinterpret_cast<DeviceBuildStats*>(ctx.device_stats());
    if (rows == 0) {
      GPUJOIN_CUDA_RETURN(ClearTable(index->table(), stats, ctx.stream()), "clear index table");
      return FinishBuild(ctx, *index, 0, n.statistics);
    }
    GPUJOIN_ASSIGN_OR_RETURN(auto keys, Alloc<uint32_t>(rows, ctx, "batch keys"));
    GPUJOIN_RETURN_IF_ERROR(ctx.Upload(keys.data(), key_ranges, "batch keys"));
    DeviceBuffer<uint32_t> validity;
    if (any_validity) {
      GPUJOIN_ASSIGN_OR_RETURN(validity, Alloc<uint32_t>(rows, ctx, "batch validity"));
      size_t k = 0;
      for (const BatchChunk& c : n.chunks) {
        if (c.keys.empty()) continue;
        uint32_t* dst = validity.data() + starts[k++];
        if (c.validity.empty()) {
          // Byte pattern 0x01 makes every uint32 nonzero, i.e. valid.
          GPUJOIN_CUDA_RETURN(cudaMemsetAsync(dst, 1, c.keys.size_bytes(), ctx.stream()),
                              "fill batch validity");
        } else {
          const HostRange r{c.validity.data(), c.validity.size_bytes()};
          GPUJOIN_RETURN_IF_ERROR(ctx.Upload(dst, std::span(&r, 1), "batch validity"));
        }
      }
    }
    GPUJOIN_ASSIGN_OR_RETURN(auto starts_d, Alloc<uint64_t>(starts.size(), ctx, "chunk starts"));
    GPUJOIN_ASSIGN_OR_RETURN(auto bases_d, Alloc<uint32_t>(bases.size(), ctx, "chunk bases"));
    const HostRange sr{starts.data(), starts.size() * sizeof(uint64_t)};
    const HostRange br{bases.data(), bases.size() * sizeof(uint32_t)};
    GPUJOIN_RETURN_IF_ERROR(ctx.Upload(starts_d.data(), std::span(&sr, 1), "chunk starts"));
    GPUJOIN_RETURN_IF_ERROR(ctx.Upload(bases_d.data(), std::span(&br, 1), "chunk bases"));
    BuildSource src;
    src.keys = keys.data();
    src.rows = rows;
    src.validity = any_validity ? validity.data() : nullptr;
    src.chunk_starts = starts_d.data();
    src.chunk_bases = bases_d.data();
    src.chunk_count = uint32_t(starts.size());
    SetBuildOptions(src);
    GPUJOIN_CUDA_RETURN(
        ClearAndBuildTable(index->table(), src, index->spec().probe_bound(), stats, ctx.stream()),
        "build batch index");
    return FinishBuild(ctx, *index, rows, n.statistics);
  }

  absl::Status RunNode(StreamContext& ctx, size_t i, const LookupNode& n) {
    const std::string where = absl::StrCat("node ", i, " (lookup)");
    GPUJOIN_ASSIGN_OR_RETURN(const CudaHashIndex* index, ReadableIndex(n.index, where));
    const uint64_t rows = TotalRows(n.keys);
    const uint32_t bound = n.max_probe_count != 0 ? n.max_probe_count : index->spec().probe_bound();
    if (rows == 0) {
      if (n.statistics != nullptr) *n.statistics = QueryStatistics{};
      return absl::OkStatus();
    }
    const LookupShape shape{index->table().slots, index->spec().capacity, rows, bound,
                            !n.found.empty(),     !n.probes.empty()};
    // Columns already in page-locked backend host buffers are copied to/from the
    // device directly; the others go through staging (or the graph's buffers).
    const uint32_t* keys_pinned = PinnedKeys(n.keys);
    uint32_t* values_pinned = Pinned(n.values);
    uint8_t* found_pinned = Pinned(n.found);
    uint32_t* probes_pinned = Pinned(n.probes);
    GPUJOIN_ASSIGN_OR_RETURN(LookupGraph * graph, ctx.graphs().Get(shape, ctx.stream()));
    if (graph != nullptr) {
      return ReplayLookupGraph(ctx, *graph, n, rows,
                               {keys_pinned, values_pinned, found_pinned, probes_pinned});
    }
    GPUJOIN_ASSIGN_OR_RETURN(auto keys, Alloc<uint32_t>(rows, ctx, "lookup keys"));
    GPUJOIN_ASSIGN_OR_RETURN(auto values, Alloc<uint32_t>(rows, ctx, "lookup values"));
    DeviceBuffer<uint8_t> found;
    DeviceBuffer<uint32_t> probes;
    if (!n.found.empty()) {
      GPUJOIN_ASSIGN_OR_RETURN(found, Alloc<uint8_t>(rows, ctx, "lookup found"));
    }
    if (!n.probes.empty()) {
      GPUJOIN_ASSIGN_OR_RETURN(probes, Alloc<uint32_t>(rows, ctx, "lookup probes"));
    }
    if (keys_pinned != nullptr) {
      GPUJOIN_CUDA_RETURN(cudaMemcpyAsync(keys.data(), keys_pinned, rows * 4,
                                          cudaMemcpyHostToDevice, ctx.stream()),
                          "upload lookup keys");
    } else {
      GPUJOIN_RETURN_IF_ERROR(ctx.Upload(keys.data(), RangesOf(n.keys), "lookup keys"));
    }
    auto* stats = reinterpret_cast<DeviceQueryStats*>(ctx.device_stats());
    GPUJOIN_CUDA_RETURN(cudaMemsetAsync(stats, 0, sizeof(*stats), ctx.stream()), "lookup");
    GPUJOIN_CUDA_RETURN(LookupKeys(index->table(), keys.data(), rows, bound, values.data(),
                                   found.data(), probes.data(), stats, ctx.stream()),
                        "lookup");
    // Direct copies into pinned outputs and the statistics first, one wait; then
    // the outputs that go through staging.
    auto direct = [&](void* dst, const void* src, size_t bytes, const char* what) -> absl::Status {
      GPUJOIN_CUDA_RETURN(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, ctx.stream()),
                          absl::StrCat("download ", what));
      return absl::OkStatus();
    };
    if (values_pinned != nullptr) {
      GPUJOIN_RETURN_IF_ERROR(direct(values_pinned, values.data(), rows * 4, "values"));
    }
    if (found_pinned != nullptr) {
      GPUJOIN_RETURN_IF_ERROR(direct(found_pinned, found.data(), rows, "found"));
    }
    if (probes_pinned != nullptr) {
      GPUJOIN_RETURN_IF_ERROR(direct(probes_pinned, probes.data(), rows * 4, "probes"));
    }
    GPUJOIN_RETURN_IF_ERROR(direct(ctx.host_stats(), stats, sizeof(DeviceQueryStats),
                                   "lookup statistics"));
    GPUJOIN_RETURN_IF_ERROR(ctx.Synchronize("lookup"));
    DeviceQueryStats d;
    std::memcpy(&d, ctx.host_stats(), sizeof(d));
    if (values_pinned == nullptr) {
      GPUJOIN_RETURN_IF_ERROR(ctx.Download(n.values.data(), values.data(), rows * 4, "values"));
    }
    if (found_pinned == nullptr) {
      GPUJOIN_RETURN_IF_ERROR(ctx.Download(n.found.data(), found.data(), n.found.size(), "found"));
    }
    if (probes_pinned == nullptr) {
      GPUJOIN_RETURN_IF_ERROR(
          ctx.Download(n.probes.data(), probes.data(), n.probes.size_bytes(), "probes"));
    }
    if (n.statistics != nullptr) *n.statistics = ToQueryStatistics(d, rows);
    return absl::OkStatus();
  }

  // The keys as one page-locked range of this backend's host buffers, or nullptr
  // (several non-empty chunks, or ordinary memory).
  const uint32_t* PinnedKeys(const ChunkedU32& keys) const {
    const uint32_t* only = nullptr;
    size_t bytes = 0;
    for (const auto& c : keys) {
      if (c.empty()) continue;
      if (only != nullptr) return nullptr;
      only = c.data();
      bytes = c.size_bytes();
    }
    return host_pool_->ContainsPinned(only, bytes) ? only : nullptr;
  }
  // `out` when it is non-empty and lies in a page-locked host buffer of this
  // backend, else nullptr.
  template <typename T>
  T* Pinned(std::span<T> out) const {
    return host_pool_->ContainsPinned(out.data(), out.size_bytes()) ? out.data() : nullptr;
  }

  // A captured lookup: caller endpoints in pinned host buffers are bound into the
  // graph's copy nodes; the others are copied through the graph's own buffers.
  absl::Status ReplayLookupGraph(StreamContext& ctx, LookupGraph& graph, const LookupNode& n,
                                 uint64_t rows, LookupGraph::Endpoints ends) {
    if (!graph.external_endpoints()) ends = {};
    auto copy_keys_in = [&] {
      uint8_t* in = reinterpret_cast<uint8_t*>(graph.keys());
      for (const auto& c : n.keys) {
        std::memcpy(in, c.data(), c.size_bytes());
        in += c.size_bytes();
      }
    };
    if (ends.keys == nullptr) copy_keys_in();
    cudaError_t replayed = graph.Replay(ctx.stream(), ends);
    if (replayed == cudaErrorNotSupported) {
      // The graph refused caller memory (now for good): use its own buffers.
      if (ends.keys != nullptr) copy_keys_in();
      ends = {};
      replayed = graph.Replay(ctx.stream(), ends);
    }
    GPUJOIN_CUDA_RETURN(replayed, "replay lookup graph");
    GPUJOIN_RETURN_IF_ERROR(ctx.Synchronize("lookup"));
    if (ends.values == nullptr) std::memcpy(n.values.data(), graph.values(), rows * 4);
    if (!n.found.empty() && ends.found == nullptr) {
      std::memcpy(n.found.data(), graph.found(), rows);
    }
    if (!n.probes.empty() && ends.probes == nullptr) {
      std::memcpy(n.probes.data(), graph.probes(), rows * 4);
    }
    if (n.statistics != nullptr) *n.statistics = ToQueryStatistics(*graph.stats(), rows);
    return absl::OkStatus();
  }

  absl::Status RunNode(StreamContext& ctx, size_t i, const JoinNode& n) {
    const std::string where = absl::StrCat("node ", i, " (join)");
    GPUJOIN_ASSIGN_OR_RETURN(const CudaHashIndex* index, ReadableIndex(n.index, where));
    const uint32_t bound = n.max_probe_count != 0 ? n.max_probe_count : index->spec().probe_bound();
    const bool build_overflow = index->build_statistics().overflow_rows > 0;
    for (const JoinBatch& b : n.batches) {
      const uint64_t rows = TotalRows(b.keys);
      if (rows == 0) {
        *b.result = JoinResult{0, build_overflow, QueryStatistics{}};
        continue;
      }
      GPUJOIN_RETURN_IF_ERROR(JoinBatchOnDevice(ctx, *index, bound, build_overflow, rows, b));
    }
    return absl::OkStatus();
  }

  // One join batch: one stream-ordered allocation, one upload (keys and left rows
  // are adjacent on the device), the kernels, and then either one gathered
  // download of statistics, count and the whole device capacity of pairs (plus
  // found/probes) with a single wait, when that fits one staging buffer, or
  // statistics and count first and then only the pairs that were written.
  absl::Status JoinBatchOnDevice(StreamContext& ctx, const CudaHashIndex& index, uint32_t bound,
                                 bool build_overflow, uint64_t rows, const JoinBatch& b) {
    const uint64_t capacity = b.out_left_rows.size();
    // Matches never exceed the left rows, so device outputs need no more.
    const uint64_t device_capacity = std::min(capacity, rows);
    const bool has_left_rows = !b.left_rows.empty();
    const bool want_found = !b.found.empty();
    const bool want_probes = !b.probes.empty();
    constexpr size_t kCountOffset = 64;  // the count sits after the statistics
    // Small batches (the whole result fits one staging buffer) of a shape seen
    // before on this context replay a captured graph.
    const DeviceRange sizes[4] = {{nullptr, kCountOffset + sizeof(unsigned long long)},
                                  {nullptr, device_capacity * 8},
                                  {nullptr, want_probes ? rows * 4 : 0},
                                  {nullptr, want_found ? rows : 0}};
    if (StreamContext::GatheredBytes(sizes) <= StreamContext::kStagingBytes) {
      const JoinShape shape{index.table().slots, index.spec().capacity, rows, device_capacity,
                            bound, has_left_rows, want_found, want_probes};
      auto graph = ctx.join_graphs().Get(shape, ctx.stream());
      if (graph.ok() && *graph != nullptr) {
        return ReplayJoinGraph(ctx, **graph, build_overflow, rows, b);
      }
      // Otherwise (first sight, or a failed capture: that shape is not captured
      // again on this context) the batch runs uncaptured; a device that is gone
      // for good fails there and is noted by Run.
    }
    // Arena layout, each region 256-byte aligned: [keys | left_rows] [out_left |
    // out_right] [probes] [found] [scratch].
    auto align = [](uint64_t v) { return (v + 255) & ~uint64_t{255}; };
    const uint64_t inputs_at = 0;
    const uint64_t pairs_at = align(inputs_at + rows * 4 * (has_left_rows ? 2 : 1));
    const uint64_t probes_at = align(pairs_at + device_capacity * 8);
    const uint64_t found_at = align(probes_at + (want_probes ? rows * 4 : 0));
    const uint64_t scratch_at = align(found_at + (want_found ? rows : 0));
    const uint64_t arena_bytes = scratch_at + JoinScratchBytes(rows);
    GPUJOIN_ASSIGN_OR_RETURN(auto arena, Alloc<uint8_t>(arena_bytes, ctx, "join buffers"));
    uint8_t* base = arena.data();
    auto* keys = reinterpret_cast<uint32_t*>(base + inputs_at);
    uint32_t* left_rows = has_left_rows ? keys + rows : nullptr;
    auto* out_left = reinterpret_cast<uint32_t*>(base + pairs_at);
    uint32_t* out_right = out_left + device_capacity;
    uint32_t* probes = want_probes ? reinterpret_cast<uint32_t*>(base + probes_at) : nullptr;
    uint8_t* found = want_found ? base + found_at : nullptr;

    std::vector<HostRange> inputs = RangesOf(b.keys);
    if (has_left_rows) inputs.push_back({b.left_rows.data(), b.left_rows.size_bytes()});
    GPUJOIN_RETURN_IF_ERROR(ctx.Upload(keys, inputs, "join keys and left_rows"));

    auto* stats = reinterpret_cast<DeviceQueryStats*>(ctx.device_stats());
    auto* count = reinterpret_cast<unsigned long long*>(ctx.device_stats() + kCountOffset);
    GPUJOIN_CUDA_RETURN(cudaMemsetAsync(stats, 0, sizeof(*stats), ctx.stream()), "join");
    GPUJOIN_CUDA_RETURN(
        JoinKeys(index.table(), keys, rows, bound, left_rows, b.first_left_row, out_left, out_right,
                 device_capacity, count, found, probes, stats, base + scratch_at, ctx.stream()),
        "join");

    DeviceQueryStats d;
    unsigned long long matches = 0;
    const DeviceRange pieces[4] = {{ctx.device_stats(), kCountOffset + sizeof(matches)},
                                   {out_left, device_capacity * 8},
                                   {probes, want_probes ? rows * 4 : 0},
                                   {found, want_found ? rows : 0}};
    if (StreamContext::GatheredBytes(pieces) <= StreamContext::kStagingBytes) {
      // Small batch: bringing back unused capacity (at most 8 bytes per left row)
      // costs less than a second round trip.
      const uint8_t* host[4] = {};
      GPUJOIN_RETURN_IF_ERROR(ctx.DownloadGathered(pieces, host, "join results"));
      std::memcpy(&d, host[0], sizeof(d));
      std::memcpy(&matches, host[0] + kCountOffset, sizeof(matches));
      const uint64_t written = std::min<uint64_t>(matches, capacity);
      std::memcpy(b.out_left_rows.data(), host[1], written * 4);
      std::memcpy(b.out_right_rows.data(), host[1] + device_capacity * 4, written * 4);
      if (want_probes) std::memcpy(b.probes.data(), host[2], b.probes.size_bytes());
      if (want_found) std::memcpy(b.found.data(), host[3], b.found.size());
    } else {
      // Large batch: statistics and count (adjacent) first, one wait; they say how
      // many pairs to bring back.
      const DeviceRange head[1] = {pieces[0]};
      const uint8_t* host[1] = {};
      GPUJOIN_RETURN_IF_ERROR(ctx.DownloadGathered(head, host, "join statistics and count"));
      std::memcpy(&d, host[0], sizeof(d));
      std::memcpy(&matches, host[0] + kCountOffset, sizeof(matches));
      const uint64_t written = std::min<uint64_t>(matches, capacity);
      GPUJOIN_RETURN_IF_ERROR(
          ctx.Download(b.out_left_rows.data(), out_left, written * 4, "join left rows"));
      GPUJOIN_RETURN_IF_ERROR(
          ctx.Download(b.out_right_rows.data(), out_right, written * 4, "join right rows"));
      GPUJOIN_RETURN_IF_ERROR(ctx.Download(b.found.data(), found, b.found.size(), "found"));
      GPUJOIN_RETURN_IF_ERROR(
          ctx.Download(b.probes.data(), probes, b.probes.size_bytes(), "probes"));
    }
    *b.result =
        JoinResult{matches, matches > capacity || build_overflow, ToQueryStatistics(d, rows)};
    return absl::OkStatus();
  }

  // A captured join batch: inputs into the graph's pinned buffer, one launch, one
  // wait, results out of its pinned output (same truncation as the plain path).
  absl::Status ReplayJoinGraph(StreamContext& ctx, JoinGraph& graph, bool build_overflow,
                               uint64_t rows, const JoinBatch& b) {
    auto* in = reinterpret_cast<uint8_t*>(graph.keys());
    for (const auto& c : b.keys) {
      std::memcpy(in, c.data(), c.size_bytes());
      in += c.size_bytes();
    }
    if (graph.shape().left_rows) {
      std::memcpy(graph.left_rows(), b.left_rows.data(), rows * 4);
    } else {
      *graph.first_left_row() = b.first_left_row;
    }
    GPUJOIN_CUDA_RETURN(graph.Launch(ctx.stream()), "replay join graph");
    GPUJOIN_RETURN_IF_ERROR(ctx.Synchronize("join"));
    const DeviceQueryStats d = *graph.stats();
    const unsigned long long matches = graph.count();
    const uint64_t capacity = b.out_left_rows.size();
    const uint64_t written = std::min<uint64_t>(matches, capacity);
    std::memcpy(b.out_left_rows.data(), graph.out_left(), written * 4);
    std::memcpy(b.out_right_rows.data(), graph.out_right(), written * 4);
    if (!b.probes.empty()) std::memcpy(b.probes.data(), graph.probes(), b.probes.size_bytes());
    if (!b.found.empty()) std::memcpy(b.found.data(), graph.found(), b.found.size());
    *b.result =
        JoinResult{matches, matches > capacity || build_overflow, ToQueryStatistics(d, rows)};
    return absl::OkStatus();
  }

  absl::Status RunNode(StreamContext& ctx, size_t i, const AggregateNode& n) {
    const uint64_t rows = TotalRows(n.keys);
    const bool count_op = n.op == AggregateOp::kCount;
    const size_t group_rows = count_op ? n.count_output.size() : n.value_output.size();
    if (group_rows > 0xffffffffu) {
      return absl::InvalidArgumentError(
          absl::StrCat("node ", i, " (aggregate): output has ", group_rows,
                       " groups; the cuda backend supports at most 2^32 - 1"));
    }
    const uint32_t groups = uint32_t(group_rows);
    const bool need_counts = count_op || n.op == AggregateOp::kMean || !n.contributing_rows.empty();
    // Small nodes of a shape seen before on this context replay a captured graph.
    const AggregateShape shape{n.op, rows, groups, n.mask.has_value(), need_counts};
    auto graph = ctx.aggregate_graphs().Get(shape, ctx.stream());
    if (graph.ok() && *graph != nullptr) return ReplayAggregateGraph(ctx, **graph, i, n);
    // Otherwise (first sight, too large, or a failed capture: that shape is not
    // captured again on this context) the node runs uncaptured; a device that is
    // gone for good fails there and is noted by Run.
    GPUJOIN_ASSIGN_OR_RETURN(auto keys, Alloc<uint32_t>(rows, ctx, "aggregate keys"));
    GPUJOIN_RETURN_IF_ERROR(ctx.Upload(keys.data(), RangesOf(n.keys), "aggregate keys"));
    DeviceBuffer<float> values;
    DeviceBuffer<uint32_t> mask;
    if (!count_op) {
      GPUJOIN_ASSIGN_OR_RETURN(values, Alloc<float>(rows, ctx, "aggregate values"));
      GPUJOIN_RETURN_IF_ERROR(ctx.Upload(values.data(), RangesOf(n.values), "aggregate values"));
    }
    if (n.mask.has_value()) {
      GPUJOIN_ASSIGN_OR_RETURN(mask, Alloc<uint32_t>(rows, ctx, "aggregate mask"));
      GPUJOIN_RETURN_IF_ERROR(ctx.Upload(mask.data(), RangesOf(*n.mask), "aggregate mask"));
    }
    DeviceBuffer<uint32_t> counts;
    DeviceBuffer<float> output;
    if (need_counts) {
      GPUJOIN_ASSIGN_OR_RETURN(counts, Alloc<uint32_t>(groups, ctx, "aggregate counts"));
    }
    if (!count_op) {
      GPUJOIN_ASSIGN_OR_RETURN(output, Alloc<float>(groups, ctx, "aggregate output"));
    }
    AggregateArgs a;
    a.op = n.op;
    a.keys = keys.data();
    a.values = values.data();
    a.mask = n.mask.has_value() ? mask.data() : nullptr;
    a.rows = rows;
    a.groups = groups;
    a.counts = counts.data();
    a.output = output.data();
    GPUJOIN_CUDA_RETURN(
        Aggregate(a, ctx.stream()),
        absl::StrCat("node ", i, " (aggregate ", std::string(AggregateOpName(n.op)), ")"));
    if (count_op) {
      GPUJOIN_RETURN_IF_ERROR(ctx.Download(n.count_output.data(), counts.data(),
                                           n.count_output.size_bytes(), "counts"));
      // For count every in-range, unmasked row contributes: the same numbers.
      GPUJOIN_RETURN_IF_ERROR(ctx.Download(n.contributing_rows.data(), counts.data(),
                                           n.contributing_rows.size_bytes(), "contributing rows"));
    } else {
      GPUJOIN_RETURN_IF_ERROR(ctx.Download(n.value_output.data(), output.data(),
                                           n.value_output.size_bytes(), "aggregate output"));
      GPUJOIN_RETURN_IF_ERROR(ctx.Download(n.contributing_rows.data(), counts.data(),
                                           n.contributing_rows.size_bytes(), "contributing rows"));
    }
    return absl::OkStatus();
  }

  // A captured aggregation: inputs gathered into the graph's pinned buffer, one
  // launch, one wait, results out of its pinned output.
  absl::Status ReplayAggregateGraph(StreamContext& ctx, AggregateGraph& graph, size_t i,
                                    const AggregateNode& n) {
    auto gather = [](const auto& chunks, void* dst) {
      auto* out = static_cast<uint8_t*>(dst);
      for (const auto& c : chunks) {
        if (c.empty()) continue;  // an empty chunk may have no data pointer
        std::memcpy(out, c.data(), c.size_bytes());
        out += c.size_bytes();
      }
    };
    gather(n.keys, graph.keys());
    if (graph.values() != nullptr) gather(n.values, graph.values());
    if (graph.mask() != nullptr) gather(*n.mask, graph.mask());
    GPUJOIN_CUDA_RETURN(graph.Launch(ctx.stream()),
                        absl::StrCat("node ", i, " (aggregate ", std::string(AggregateOpName(n.op)),
                                     "): replay aggregate graph"));
    GPUJOIN_RETURN_IF_ERROR(ctx.Synchronize("aggregate"));
    if (n.op == AggregateOp::kCount) {
      std::memcpy(n.count_output.data(), graph.counts(), n.count_output.size_bytes());
    } else {
      std::memcpy(n.value_output.data(), graph.output(), n.value_output.size_bytes());
    }
    // For count every in-range, unmasked row contributes: the same numbers.
    if (!n.contributing_rows.empty()) {
      std::memcpy(n.contributing_rows.data(), graph.counts(), n.contributing_rows.size_bytes());
    }
    return absl::OkStatus();
  }

  absl::Status RunNode(StreamContext& ctx, size_t, const HashNode& n) {
    return HashRowsDevice(n, ctx.stream());
  }

  // The build path and transient cap the options ask for.
  void SetBuildOptions(BuildSource& src) const {
    src.path = options_.cuda_build_path == CudaBuildPath::kDirect  ? BuildPath::kDirect
               : options_.cuda_build_path == CudaBuildPath::kTiles ? BuildPath::kTiles
                                                                   : BuildPath::kAuto;
    src.transient_max_bytes = options_.cuda_build_transient_max_bytes;
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
