// Build nodes on the CUDA backend (lowering.hpp). A kKeepAll build runs
// the kLowestRow build of its rows, then the group pass (index/groups.hpp) and
// stores its payload per kept row.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cuda/cuda_error.hpp"
#include "cuda/index/key_rows.hpp"
#include "cuda/lowering/lower_keys.hpp"
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

// The groups and payload of a kKeepAll build whose table was just built
// (rows 0: an empty build), then the statistics. `sort(overflow, ranges,
// group_stats, scratch, scratch_bytes, &grouped_rows)` enqueues the group pass
// (groups.hpp) and `write_values(grouped_rows, kept, values)` the value list.
template <class Sort, class WriteValues>
absl::Status StoreGroupsWith(StreamContext& ctx, CudaHashIndex& index, uint64_t rows,
                             const std::vector<ColumnView>& payload, BuildStatistics* out,
                             const Sort& sort, const WriteValues& write_values) {
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
    GPUJOIN_CUDA_RETURN(sort(overflow, groups.ranges.data(), group_stats, scratch.data(),
                             scratch_bytes, &grouped_rows),
                        "sort group rows");
    // The kept rows size the value list: one wait.
    DeviceGroupStats g;
    GPUJOIN_RETURN_IF_ERROR(ctx.Download(&g, group_stats, sizeof(g), "group statistics"));
    const uint64_t kept = overflow ? g.kept : stats.unique_keys + stats.duplicate_rows;
    stats.max_group_rows = g.max_group_rows;
    GPUJOIN_ASSIGN_OR_RETURN(groups.values, CudaHashIndex::AllocatePayload<uint32_t>(
                                                kept, index.device(), "group values"));
    GPUJOIN_CUDA_RETURN(write_values(grouped_rows, kept, groups.values.data()),
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

// StoreGroupsWith for a table of key words built from `src` (its device inputs
// alive).
template <KeyWord K>
absl::Status StoreGroups(StreamContext& ctx, CudaHashIndex& index, const BuildSourceT<K>& src,
                         uint64_t rows, const std::vector<ColumnView>& payload,
                         BuildStatistics* out) {
  return StoreGroupsWith(
      ctx, index, rows, payload, out,
      [&](bool overflow, GroupRange* ranges, DeviceGroupStats* group_stats, void* scratch,
          size_t scratch_bytes, const uint32_t** grouped_rows) {
        return SortGroupRows(index.table<K>(), src, index.spec().probe_bound(), overflow, ranges,
                             group_stats, scratch, scratch_bytes, grouped_rows, ctx.stream());
      },
      [&](const uint32_t* grouped_rows, uint64_t kept, uint32_t* values) {
        return WriteGroupValues(src, grouped_rows, kept, values, ctx.stream());
      });
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

// A key-schema build of the key columns `chunks` (build rows in order; a
// batch build's chunk bases and validity given as `starts`/`bases`/`validity`,
// else the explicit `values` or generated first_value + row): the key columns
// are stored in the index, hashed, grouped and inserted (key_rows.hpp), each
// row's value written, then (kKeepAll) the groups with their payload or the
// payload by the slots' rows, and the statistics recorded.
struct KeyBuildValues {
  std::optional<ChunkedU32> values;
  uint32_t first_value = 0;
  std::vector<uint64_t> starts;
  std::vector<uint32_t> bases;
  // One per row (nonzero = valid) when any chunk has validity, else empty.
  std::vector<std::span<const uint32_t>> validity;
  std::vector<uint64_t> chunk_rows;
};

absl::Status BuildKeyColumns(const LoweringEnv& env, StreamContext& ctx, CudaHashIndex& index,
                             std::span<const KeyColumns* const> chunks, const KeyBuildValues& kv,
                             const std::vector<ColumnView>& payload, BuildStatistics* out) {
  index.DropPayload();
  index.DropKeys();
  index.DropGroups();
  auto* stats = reinterpret_cast<DeviceBuildStats*>(ctx.device_stats());
  GPUJOIN_ASSIGN_OR_RETURN(
      UploadedKeys uploaded,
      UploadKeyColumns(ctx, chunks, index.spec().key_columns, KeyMemory::kIndex, index.device()));
  const uint64_t rows = uploaded.keys.rows;
  DeviceBuffer<uint32_t> validity;
  if (!kv.validity.empty()) {
    GPUJOIN_ASSIGN_OR_RETURN(validity, Alloc<uint32_t>(rows, ctx, "batch validity"));
    uint64_t at = 0;
    for (size_t k = 0; k < kv.chunk_rows.size(); ++k) {
      uint32_t* dst = validity.data() + at;
      if (kv.validity[k].empty()) {
        // Byte pattern 0x01 makes every uint32 nonzero, i.e. valid.
        GPUJOIN_CUDA_RETURN(
            cudaMemsetAsync(dst, 1, kv.chunk_rows[k] * sizeof(uint32_t), ctx.stream()),
            "fill batch validity");
      } else {
        const HostRange r{kv.validity[k].data(), kv.validity[k].size_bytes()};
        GPUJOIN_RETURN_IF_ERROR(ctx.Upload(dst, std::span(&r, 1), "batch validity"));
      }
      at += kv.chunk_rows[k];
    }
  }
  GPUJOIN_ASSIGN_OR_RETURN(
      KeyFingerprintBuffers fps,
      FingerprintKeys(ctx, uploaded, validity.data(), index.fingerprint_bits()));
  // Each build row's value.
  GPUJOIN_ASSIGN_OR_RETURN(uploaded.keys.row_values, CudaHashIndex::AllocatePayload<uint32_t>(
                                                         rows, index.device(), "row values"));
  DeviceBuffer<uint32_t> values;
  DeviceBuffer<uint64_t> starts;
  DeviceBuffer<uint32_t> bases;
  if (kv.values.has_value() && rows > 0) {
    GPUJOIN_ASSIGN_OR_RETURN(values, Alloc<uint32_t>(rows, ctx, "build values"));
    GPUJOIN_RETURN_IF_ERROR(ctx.Upload(values.data(), RangesOf(*kv.values), "build values"));
  }
  if (!kv.starts.empty()) {
    GPUJOIN_ASSIGN_OR_RETURN(starts, Alloc<uint64_t>(kv.starts.size(), ctx, "chunk starts"));
    GPUJOIN_ASSIGN_OR_RETURN(bases, Alloc<uint32_t>(kv.bases.size(), ctx, "chunk bases"));
    const HostRange sr{kv.starts.data(), kv.starts.size() * sizeof(uint64_t)};
    const HostRange br{kv.bases.data(), kv.bases.size() * sizeof(uint32_t)};
    GPUJOIN_RETURN_IF_ERROR(ctx.Upload(starts.data(), std::span(&sr, 1), "chunk starts"));
    GPUJOIN_RETURN_IF_ERROR(ctx.Upload(bases.data(), std::span(&br, 1), "chunk bases"));
  }
  GPUJOIN_CUDA_RETURN(
      WriteRowValues(rows, values.data(), kv.first_value, starts.data(), bases.data(),
                     uint32_t(kv.starts.size()), uploaded.keys.row_values.data(), ctx.stream()),
      "write row values");
  const uint64_t scratch_bytes = rows == 0 ? 0 : KeyBuildScratchBytes(rows);
  GPUJOIN_ASSIGN_OR_RETURN(auto scratch, Alloc<uint8_t>(scratch_bytes, ctx, "key build scratch"));
  GPUJOIN_CUDA_RETURN(BuildKeyTable(index.table<ColumnKey>(), fps.rows, index.spec().probe_bound(),
                                    scratch.data(), scratch_bytes, stats, ctx.stream()),
                      "build index keyed by columns");
  {
    // The grouping table is done with: back to the pool (stream-ordered)
    // before the group pass and the payload take theirs.
    const DeviceBuffer<uint8_t> done = std::move(scratch);
  }
  // The group pass and the probes read the stored keys.
  index.SetKeys(std::move(uploaded.keys));
  const StoredKeyRows stored = index.stored_keys();
  if (index.keeps_all()) {
    return StoreGroupsWith(
        ctx, index, rows, payload, out,
        [&](bool overflow, GroupRange* ranges, DeviceGroupStats* group_stats, void* scratch,
            size_t scratch_bytes, const uint32_t** grouped_rows) {
          return SortGroupRowsKeyRows(index.table<ColumnKey>(), stored, fps.rows,
                                      index.spec().probe_bound(), overflow, ranges, group_stats,
                                      scratch, scratch_bytes, grouped_rows, ctx.stream());
        },
        [&](const uint32_t* grouped_rows, uint64_t kept, uint32_t* values) {
          return WriteGroupRows(grouped_rows, kept, values, ctx.stream());
        });
  }
  std::vector<PayloadColumnInfo> infos;
  if (!payload.empty()) {
    // A slot's build row is where its payload comes from.
    const uint64_t slots = TableAllocationSlots(index.spec().capacity);
    GPUJOIN_ASSIGN_OR_RETURN(auto winners, Alloc<uint32_t>(slots, ctx, "payload winners"));
    GPUJOIN_CUDA_RETURN(KeyTableWinners(index.table<ColumnKey>(), winners.data(), ctx.stream()),
                        "find payload winners");
    GPUJOIN_ASSIGN_OR_RETURN(infos,
                             StorePayloadAt(ctx, index, winners.data(), slots, rows, payload));
  }
  return FinishBuild(ctx, index, rows, out, std::move(infos));
}

// Runs BuildKeyColumns (INVALID_ARGUMENT, changing nothing, for more than
// kMaxKeyBuildRows rows); a failure leaves the index's table empty, without
// keys or payload.
absl::Status BuildKeyColumnsOrEmpty(const LoweringEnv& env, StreamContext& ctx,
                                    CudaHashIndex& index, std::span<const KeyColumns* const> chunks,
                                    const KeyBuildValues& kv,
                                    const std::vector<ColumnView>& payload, BuildStatistics* out) {
  uint64_t total_rows = 0;
  for (const KeyColumns* chunk : chunks) total_rows += chunk->rows();
  if (total_rows > kMaxKeyBuildRows) {
    return absl::InvalidArgumentError(
        absl::StrCat("a build of an index keyed by columns takes at most ", kMaxKeyBuildRows,
                     " rows on the cuda backend, not ", total_rows));
  }
  const absl::Status s = BuildKeyColumns(env, ctx, index, chunks, kv, payload, out);
  if (s.ok()) return s;
  // The table is cleared before the keys its slots name are freed.
  const absl::Status failed = LeaveEmpty<uint64_t>(ctx, index, s);
  index.DropKeys();
  return failed;
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

template <>
absl::Status RunNode(const LoweringEnv& env, StreamContext& ctx, size_t i,
                     const BuildIndexNodeT<ColumnKey>& n) {
  const std::string where = absl::StrCat("node ", i, " (build)");
  GPUJOIN_ASSIGN_OR_RETURN(CudaHashIndex * index, WritableIndex(n.index, where));
  KeyBuildValues kv;
  kv.values = n.values;
  kv.first_value = n.first_value;
  const KeyColumns* chunk = &n.keys;
  return BuildKeyColumnsOrEmpty(env, ctx, *index, std::span(&chunk, 1), kv, n.payload,
                                n.statistics);
}

template <>
absl::Status RunNode(const LoweringEnv& env, StreamContext& ctx, size_t i,
                     const BuildBatchIndexNodeT<ColumnKey>& n) {
  const std::string where = absl::StrCat("node ", i, " (batch build)");
  GPUJOIN_ASSIGN_OR_RETURN(CudaHashIndex * index, WritableIndex(n.index, where));
  KeyBuildValues kv;
  std::vector<const KeyColumns*> chunks;
  bool any_validity = false;
  uint64_t rows = 0;
  for (const BatchChunkT<ColumnKey>& c : n.chunks) {
    if (c.keys.rows() == 0) continue;
    chunks.push_back(&c.keys);
    kv.starts.push_back(rows);
    kv.bases.push_back(c.row_base);
    kv.chunk_rows.push_back(c.keys.rows());
    kv.validity.push_back(c.validity);
    any_validity = any_validity || !c.validity.empty();
    rows += c.keys.rows();
  }
  if (!any_validity) kv.validity.clear();
  return BuildKeyColumnsOrEmpty(env, ctx, *index, chunks, kv, n.payload, n.statistics);
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
