// Build nodes on the CUDA backend (lowering.hpp). A kKeepAll build runs
// the kLowestRow build of its rows, then the group pass (index/groups.hpp) and
// stores its payload per kept row.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cuda/cuda_error.hpp"
#include "cuda/lowering/lower_payload.hpp"
#include "cuda/lowering/lowering.hpp"
#include "gpujoin/common/status_macros.hpp"

namespace gpujoin::engine::detail {
namespace {

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
                         BuildStatistics* out, std::vector<PayloadColumnInfo> payload = {}) {
  GPUJOIN_ASSIGN_OR_RETURN(BuildStatistics stats, DownloadBuildStats(ctx));
  index.RecordBuild(stats, rows, std::move(payload));
  if (out != nullptr) *out = stats;
  return absl::OkStatus();
}

// Where the group pass's counters live in the context's statistics scratch
// (after the build statistics).
constexpr size_t kGroupStatsOffset = 128;

// The groups and payload of a kKeepAll build whose table is built from `src`
// (its device inputs alive; rows 0: an empty build), then the statistics.
template <KeyWord K>
absl::Status StoreGroups(StreamContext& ctx, CudaHashIndex& index, const BuildSourceT<K>& src,
                         uint64_t rows, const std::vector<ColumnView>& payload,
                         BuildStatistics* out) {
  const uint32_t capacity = index.spec().capacity;
  GPUJOIN_ASSIGN_OR_RETURN(BuildStatistics stats, DownloadBuildStats(ctx));
  CudaGroups groups;
  GPUJOIN_ASSIGN_OR_RETURN(groups.ranges, CudaHashIndex::AllocatePayload<GroupRange>(
                                              capacity, index.device(), "group ranges"));
  std::vector<PayloadColumnInfo> infos;
  if (rows == 0) {
    GPUJOIN_CUDA_RETURN(
        cudaMemsetAsync(groups.ranges.data(), 0, groups.ranges.bytes(), ctx.stream()),
        "clear group ranges");
    GPUJOIN_ASSIGN_OR_RETURN(infos, StorePayloadAt(ctx, index, nullptr, 0, 0, payload));
  } else {
    // Without overflow every valid row is kept (the kept count is known now);
    // with it, rows before their key's winner are not, and the pass counts.
    const bool overflow = stats.overflow_rows > 0;
    const size_t scratch_bytes = GroupScratchBytes(capacity, rows, overflow);
    GPUJOIN_ASSIGN_OR_RETURN(auto scratch, Alloc<uint8_t>(scratch_bytes, ctx, "group pass"));
    auto* group_stats = reinterpret_cast<DeviceGroupStats*>(ctx.device_stats() + kGroupStatsOffset);
    const uint32_t* grouped_rows = nullptr;
    GPUJOIN_CUDA_RETURN(SortGroupRows(index.table<K>(), src, index.spec().probe_bound(), overflow,
                                      groups.ranges.data(), group_stats, scratch.data(),
                                      scratch_bytes, &grouped_rows, ctx.stream()),
                        "sort group rows");
    // The kept rows size the value list: one wait.
    DeviceGroupStats g;
    GPUJOIN_RETURN_IF_ERROR(ctx.Download(&g, group_stats, sizeof(g), "group statistics"));
    const uint64_t kept = overflow ? g.kept : stats.unique_keys + stats.duplicate_rows;
    stats.max_group_rows = g.max_group_rows;
    GPUJOIN_ASSIGN_OR_RETURN(groups.values, CudaHashIndex::AllocatePayload<uint32_t>(
                                                kept, index.device(), "group values"));
    GPUJOIN_CUDA_RETURN(
        WriteGroupValues(src, grouped_rows, kept, groups.values.data(), ctx.stream()),
        "write group values");
    GPUJOIN_ASSIGN_OR_RETURN(infos, StorePayloadAt(ctx, index, grouped_rows, kept, rows, payload));
  }
  // Other streams may read the index once Run returns.
  GPUJOIN_RETURN_IF_ERROR(ctx.Synchronize("build groups"));
  index.SetGroups(std::move(groups));
  index.RecordBuild(stats, rows, std::move(infos));
  if (out != nullptr) *out = stats;
  return absl::OkStatus();
}

// What a kKeepAll build leaves when it cannot finish after changing the table:
// an empty table without groups or payload, as after an empty build but for
// the groups' ranges (every probe misses, so none is read).
template <KeyWord K>
absl::Status LeaveEmpty(StreamContext& ctx, CudaHashIndex& index, absl::Status failure) {
  auto* stats = reinterpret_cast<DeviceBuildStats*>(ctx.device_stats());
  if (ClearTable(index.table<K>(), stats, ctx.stream()) == cudaSuccess) {
    (void)ctx.Synchronize("clear index table");
  }
  index.DropGroups();
  index.DropPayload();
  index.RecordBuild(BuildStatistics{}, 0);
  return failure;
}

// The payload of a build whose table is built from `src` (its device inputs
// alive), then the statistics.
template <KeyWord K>
absl::Status FinishBuildWithPayload(StreamContext& ctx, CudaHashIndex& index,
                                    const BuildSourceT<K>& src, uint64_t rows,
                                    const std::vector<ColumnView>& payload, BuildStatistics* out) {
  if (index.keeps_all()) {
    const absl::Status s = StoreGroups(ctx, index, src, rows, payload, out);
    return s.ok() ? s : LeaveEmpty<K>(ctx, index, s);
  }
  GPUJOIN_ASSIGN_OR_RETURN(
      std::vector<PayloadColumnInfo> infos,
      StorePayload(ctx, index, src, index.spec().probe_bound(), rows, payload));
  return FinishBuild(ctx, index, rows, out, std::move(infos));
}

}  // namespace

template <KeyWord K>
absl::Status RunNode(const LoweringEnv& env, StreamContext& ctx, size_t i,
                     const BuildIndexNodeT<K>& n) {
  const std::string where = absl::StrCat("node ", i, " (build)");
  GPUJOIN_ASSIGN_OR_RETURN(CudaHashIndex * index, WritableIndex(n.index, where));
  // A build replaces the payload too; a failed one leaves none.
  index->DropPayload();
  const uint64_t rows = TotalRows(n.keys);
  auto* stats = reinterpret_cast<DeviceBuildStats*>(ctx.device_stats());
  if (rows == 0) {
    index->DropGroups();
    GPUJOIN_CUDA_RETURN(ClearTable(index->table<K>(), stats, ctx.stream()), "clear index table");
  }
  if (rows > 0) {
    GPUJOIN_ASSIGN_OR_RETURN(auto keys, Alloc<K>(rows, ctx, "build keys"));
    GPUJOIN_RETURN_IF_ERROR(ctx.Upload(keys.data(), RangesOf(n.keys), "build keys"));
    DeviceBuffer<uint32_t> values;
    if (n.values.has_value()) {
      GPUJOIN_ASSIGN_OR_RETURN(values, Alloc<uint32_t>(rows, ctx, "build values"));
      GPUJOIN_RETURN_IF_ERROR(ctx.Upload(values.data(), RangesOf(*n.values), "build values"));
    }
    BuildSourceT<K> src;
    src.keys = keys.data();
    src.rows = rows;
    src.values = n.values.has_value() ? values.data() : nullptr;
    src.first_value = n.first_value;
    SetBuildOptions(env.options, src);
    // The groups describe the table about to be replaced.
    index->DropGroups();
    // Clears the table too (the large-build paths write every slot instead).
    GPUJOIN_CUDA_RETURN(ClearAndBuildTable(index->table<K>(), src, index->spec().probe_bound(),
                                           stats, ctx.stream()),
                        "build index");
    return FinishBuildWithPayload(ctx, *index, src, rows, n.payload, n.statistics);
  }
  // Empty: the payload columns are stored for empty slots only.
  return FinishBuildWithPayload(ctx, *index, BuildSourceT<K>{}, 0, n.payload, n.statistics);
}

template <KeyWord K>
absl::Status RunNode(const LoweringEnv& env, StreamContext& ctx, size_t i,
                     const BuildBatchIndexNodeT<K>& n) {
  const std::string where = absl::StrCat("node ", i, " (batch build)");
  GPUJOIN_ASSIGN_OR_RETURN(CudaHashIndex * index, WritableIndex(n.index, where));
  index->DropPayload();
  uint64_t rows = 0;
  bool any_validity = false;
  std::vector<uint64_t> starts;
  std::vector<uint32_t> bases;
  std::vector<HostRange> key_ranges;
  for (const BatchChunkT<K>& c : n.chunks) {
    if (c.keys.empty()) continue;
    starts.push_back(rows);
    bases.push_back(c.row_base);
    key_ranges.push_back({c.keys.data(), c.keys.size_bytes()});
    any_validity = any_validity || !c.validity.empty();
    rows += c.keys.size();
  }
  auto* stats = reinterpret_cast<DeviceBuildStats*>(ctx.device_stats());
  if (rows == 0) {
    index->DropGroups();
    GPUJOIN_CUDA_RETURN(ClearTable(index->table<K>(), stats, ctx.stream()), "clear index table");
    return FinishBuildWithPayload(ctx, *index, BuildSourceT<K>{}, 0, n.payload, n.statistics);
  }
  GPUJOIN_ASSIGN_OR_RETURN(auto keys, Alloc<K>(rows, ctx, "batch keys"));
  GPUJOIN_RETURN_IF_ERROR(ctx.Upload(keys.data(), key_ranges, "batch keys"));
  DeviceBuffer<uint32_t> validity;
  if (any_validity) {
    GPUJOIN_ASSIGN_OR_RETURN(validity, Alloc<uint32_t>(rows, ctx, "batch validity"));
    size_t k = 0;
    for (const BatchChunkT<K>& c : n.chunks) {
      if (c.keys.empty()) continue;
      uint32_t* dst = validity.data() + starts[k++];
      if (c.validity.empty()) {
        // Byte pattern 0x01 makes every uint32 nonzero, i.e. valid.
        GPUJOIN_CUDA_RETURN(cudaMemsetAsync(dst, 1, c.keys.size() * sizeof(uint32_t), ctx.stream()),
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
  BuildSourceT<K> src;
  src.keys = keys.data();
  src.rows = rows;
  src.validity = any_validity ? validity.data() : nullptr;
  src.chunk_starts = starts_d.data();
  src.chunk_bases = bases_d.data();
  src.chunk_count = uint32_t(starts.size());
  SetBuildOptions(env.options, src);
  index->DropGroups();
  GPUJOIN_CUDA_RETURN(
      ClearAndBuildTable(index->table<K>(), src, index->spec().probe_bound(), stats, ctx.stream()),
      "build batch index");
  return FinishBuildWithPayload(ctx, *index, src, rows, n.payload, n.statistics);
}

template absl::Status RunNode(const LoweringEnv&, StreamContext&, size_t,
                              const BuildIndexNodeT<uint32_t>&);
template absl::Status RunNode(const LoweringEnv&, StreamContext&, size_t,
                              const BuildIndexNodeT<uint64_t>&);
template absl::Status RunNode(const LoweringEnv&, StreamContext&, size_t,
                              const BuildBatchIndexNodeT<uint32_t>&);
template absl::Status RunNode(const LoweringEnv&, StreamContext&, size_t,
                              const BuildBatchIndexNodeT<uint64_t>&);

}  // namespace gpujoin::engine::detail
