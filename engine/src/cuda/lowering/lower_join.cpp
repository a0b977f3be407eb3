// Join nodes on the CUDA backend (lowering.hpp), of every key kind (a key
// schema's left keys are uploaded and fingerprinted, never captured in a
// graph). Joins take one of two paths
// (JoinPathOf): the many-to-one compaction (join/join_kernels.cu) for kinds that
// yield at most one pair per left row from the table alone, and count -> scan ->
// scatter (join/group_join.hpp) for the others.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cuda/cuda_error.hpp"
#include "cuda/join/group_join.hpp"
#include "cuda/join/join_ops.hpp"
#include "cuda/lowering/lower_keys.hpp"
#include "cuda/lowering/lower_payload.hpp"
#include "cuda/lowering/lowering.hpp"
#include "gpujoin/common/status_macros.hpp"

namespace gpujoin::engine::detail {
namespace {

// Where a join's match count sits in the context's statistics scratch (after
// the statistics, so one download brings both).
constexpr size_t kCountOffset = 64;

// A join batch's left keys on the device: key words (in the arena), or a key
// schema's rows, uploaded and fingerprinted (lower_keys.hpp).
template <IndexKey K>
struct LeftKeys {
  K* words = nullptr;
};
template <>
struct LeftKeys<ColumnKey> {
  UploadedKeys uploaded;
  KeyFingerprintBuffers fingerprints;
};

// A join batch's device arena, each region 256-byte aligned: [keys | left_rows]
// [pairs] [probes] [found] [scratch] (a key schema's keys apart), with the keys
// and left rows uploaded and the statistics cleared.
template <IndexKey K>
struct JoinArena {
  DeviceBuffer<uint8_t> buffer;
  LeftKeys<K> keys;
  uint32_t* left_rows = nullptr;  ///< nullptr: the batch's rows are first_left_row + i
  uint8_t* pairs = nullptr;       ///< pair_bytes
  uint32_t* probes = nullptr;     ///< when the batch wants probes
  uint8_t* found = nullptr;       ///< when the batch wants found
  uint8_t* scratch = nullptr;     ///< scratch_bytes
  DeviceQueryStats* stats = nullptr;
  unsigned long long* count = nullptr;
};

template <IndexKey K>
absl::StatusOr<JoinArena<K>> UploadJoinArena(StreamContext& ctx, const CudaHashIndex& index,
                                             const JoinBatchT<K>& b, uint64_t rows,
                                             uint64_t pair_bytes, uint64_t scratch_bytes) {
  auto align = [](uint64_t v) { return (v + 255) & ~uint64_t{255}; };
  const bool has_left_rows = !b.left_rows.empty();
  const bool want_probes = !b.probes.empty();
  const bool want_found = !b.found.empty();
  constexpr uint64_t kKeyBytes =
      KeyWord<K> ? sizeof(std::conditional_t<KeyWord<K>, K, uint8_t>) : 0;
  const uint64_t left_rows_at = rows * kKeyBytes;
  const uint64_t pairs_at = align(left_rows_at + (has_left_rows ? rows * 4 : 0));
  const uint64_t probes_at = align(pairs_at + pair_bytes);
  const uint64_t found_at = align(probes_at + (want_probes ? rows * 4 : 0));
  const uint64_t scratch_at = align(found_at + (want_found ? rows : 0));
  JoinArena<K> a;
  GPUJOIN_ASSIGN_OR_RETURN(a.buffer,
                           Alloc<uint8_t>(scratch_at + scratch_bytes, ctx, "join buffers"));
  uint8_t* base = a.buffer.data();
  if (has_left_rows) a.left_rows = reinterpret_cast<uint32_t*>(base + left_rows_at);
  a.pairs = base + pairs_at;
  if (want_probes) a.probes = reinterpret_cast<uint32_t*>(base + probes_at);
  if (want_found) a.found = base + found_at;
  a.scratch = base + scratch_at;
  if constexpr (KeyWord<K>) {
    a.keys.words = reinterpret_cast<K*>(base);
    std::vector<HostRange> inputs = RangesOf(b.keys);
    if (has_left_rows) inputs.push_back({b.left_rows.data(), b.left_rows.size_bytes()});
    GPUJOIN_RETURN_IF_ERROR(ctx.Upload(a.keys.words, inputs, "join keys and left_rows"));
  } else {
    const KeyColumns* chunk = &b.keys;
    GPUJOIN_ASSIGN_OR_RETURN(a.keys.uploaded,
                             UploadKeyColumns(ctx, std::span(&chunk, 1), index.spec().key_columns,
                                              KeyMemory::kRequest, index.device()));
    GPUJOIN_ASSIGN_OR_RETURN(a.keys.fingerprints, FingerprintKeys(ctx, a.keys.uploaded, nullptr,
                                                                  index.fingerprint_bits()));
    if (has_left_rows) {
      const HostRange r{b.left_rows.data(), b.left_rows.size_bytes()};
      GPUJOIN_RETURN_IF_ERROR(ctx.Upload(a.left_rows, std::span(&r, 1), "join left_rows"));
    }
  }
  a.stats = reinterpret_cast<DeviceQueryStats*>(ctx.device_stats());
  a.count = reinterpret_cast<unsigned long long*>(ctx.device_stats() + kCountOffset);
  GPUJOIN_CUDA_RETURN(cudaMemsetAsync(a.stats, 0, sizeof(*a.stats), ctx.stream()), "join");
  return a;
}

// The statistics and the match count of a join, downloaded together.
struct JoinHead {
  DeviceQueryStats stats;
  unsigned long long matches = 0;
};
JoinHead ReadJoinHead(const uint8_t* host) {
  JoinHead h;
  std::memcpy(&h.stats, host, sizeof(h.stats));
  std::memcpy(&h.matches, host + kCountOffset, sizeof(h.matches));
  return h;
}
// The head and, after it in the same download, the 8-byte totals at `after`.
absl::StatusOr<JoinHead> DownloadJoinHead(StreamContext& ctx, const std::vector<DeviceRange>& after,
                                          std::vector<uint64_t>* totals) {
  std::vector<DeviceRange> pieces{{ctx.device_stats(), kCountOffset + sizeof(unsigned long long)}};
  pieces.insert(pieces.end(), after.begin(), after.end());
  std::vector<const uint8_t*> host(pieces.size());
  GPUJOIN_RETURN_IF_ERROR(ctx.DownloadGathered(pieces, host, "join statistics and count"));
  totals->resize(after.size());
  for (size_t k = 0; k < after.size(); ++k) std::memcpy(&(*totals)[k], host[k + 1], 8);
  return ReadJoinHead(host[0]);
}

// The first `written` pairs, the found flags and the probes of a join batch
// into the caller's outputs.
template <IndexKey K>
absl::Status DownloadJoinOutputs(StreamContext& ctx, const JoinBatchT<K>& b, const JoinArena<K>& a,
                                 const uint32_t* out_left, const uint32_t* out_right,
                                 uint64_t written) {
  GPUJOIN_RETURN_IF_ERROR(
      ctx.Download(b.out_left_rows.data(), out_left, written * 4, "join left rows"));
  GPUJOIN_RETURN_IF_ERROR(
      ctx.Download(b.out_right_rows.data(), out_right, written * 4, "join right rows"));
  GPUJOIN_RETURN_IF_ERROR(ctx.Download(b.found.data(), a.found, b.found.size(), "found"));
  return ctx.Download(b.probes.data(), a.probes, b.probes.size_bytes(), "probes");
}

// A captured join batch: inputs into the graph's pinned buffer, one launch, one
// wait, results out of its pinned output (same truncation as the plain path).
template <KeyWord K>
absl::Status ReplayJoinGraph(StreamContext& ctx, JoinGraph& graph, bool build_overflow,
                             uint64_t rows, const JoinBatchT<K>& b) {
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
  *b.result = JoinResult{matches, matches > capacity || build_overflow, ToQueryStatistics(d, rows)};
  return absl::OkStatus();
}

// The many-to-one join of a batch's left keys (join_ops.hpp): JoinKeys, or
// with `out_slots` JoinKeysWithSlots; a key schema's JoinKeyRows.
template <IndexKey K>
cudaError_t EnqueueJoin(const CudaHashIndex& index, const JoinArena<K>& a, uint64_t rows,
                        uint32_t bound, uint32_t first_left_row, uint32_t* out_left,
                        uint32_t* out_right, uint32_t* out_slots, uint64_t capacity,
                        cudaStream_t stream, MaskedRows masked) {
  if constexpr (KeyWord<K>) {
    if (out_slots != nullptr) {
      return JoinKeysWithSlots(index.table<K>(), a.keys.words, rows, bound, a.left_rows,
                               first_left_row, out_left, out_right, out_slots, capacity, a.count,
                               a.found, a.probes, a.stats, a.scratch, stream, masked);
    }
    return JoinKeys(index.table<K>(), a.keys.words, rows, bound, a.left_rows, first_left_row,
                    out_left, out_right, capacity, a.count, a.found, a.probes, a.stats, a.scratch,
                    stream, masked);
  } else {
    return JoinKeyRows(index.table<ColumnKey>(), index.stored_keys(), a.keys.fingerprints.rows,
                       bound, a.left_rows, first_left_row, out_left, out_right, out_slots, capacity,
                       a.count, a.found, a.probes, a.stats, a.scratch, stream, masked);
  }
}

// The count pass of a grouped join (group_join.hpp) of a batch's left keys.
template <IndexKey K>
cudaError_t EnqueueCount(const CudaHashIndex& index, const JoinArena<K>& a, JoinKind kind,
                         uint64_t rows, uint32_t bound, void* scratch, cudaStream_t stream) {
  if constexpr (KeyWord<K>) {
    return CountGroupJoin(index.table<K>(), index.groups().ranges, kind, a.keys.words, rows, bound,
                          a.found, a.probes, a.stats, a.count, scratch, stream);
  } else {
    return CountGroupJoinKeyRows(index.table<ColumnKey>(), index.groups().ranges,
                                 index.stored_keys(), a.keys.fingerprints.rows, kind, bound,
                                 a.found, a.probes, a.stats, a.count, scratch, stream);
  }
}

// One join batch: one stream-ordered allocation, one upload (keys and left rows
// are adjacent on the device), the kernels, and then either one gathered
// download of statistics, count and the whole device capacity of pairs (plus
// found/probes) with a single wait, when that fits one staging buffer, or
// statistics and count first and then only the pairs that were written.
template <IndexKey K>
absl::Status JoinBatchOnDevice(StreamContext& ctx, const CudaHashIndex& index, uint32_t bound,
                               bool build_overflow, uint64_t rows, const JoinBatchT<K>& b,
                               MaskedRows masked) {
  const uint64_t capacity = b.out_left_rows.size();
  // Matches never exceed the left rows, so device outputs need no more.
  const uint64_t device_capacity = std::min(capacity, rows);
  const bool has_left_rows = !b.left_rows.empty();
  const bool want_found = !b.found.empty();
  const bool want_probes = !b.probes.empty();
  // Small batches (the whole result fits one staging buffer) of a shape seen
  // before on this context replay a captured graph (key words only).
  const DeviceRange sizes[4] = {{nullptr, kCountOffset + sizeof(unsigned long long)},
                                {nullptr, device_capacity * 8},
                                {nullptr, want_probes ? rows * 4 : 0},
                                {nullptr, want_found ? rows : 0}};
  if constexpr (KeyWord<K>) {
    if (StreamContext::GatheredBytes(sizes) <= StreamContext::kStagingBytes) {
      const JoinShape shape{index.table<K>().slots,
                            index.spec().capacity,
                            KeyTypeOf<K>(),
                            rows,
                            device_capacity,
                            bound,
                            has_left_rows,
                            want_found,
                            want_probes,
                            masked};
      auto graph = ctx.join_graphs().Get(shape, ctx.stream());
      if (graph.ok() && *graph != nullptr) {
        return ReplayJoinGraph(ctx, **graph, build_overflow, rows, b);
      }
      // Otherwise (first sight, or a failed capture: that shape is not captured
      // again on this context) the batch runs uncaptured; a device that is gone
      // for good fails there and is noted by Run.
    }
  }
  GPUJOIN_ASSIGN_OR_RETURN(JoinArena<K> a, UploadJoinArena(ctx, index, b, rows, device_capacity * 8,
                                                           JoinScratchBytes(rows)));
  auto* out_left = reinterpret_cast<uint32_t*>(a.pairs);
  uint32_t* out_right = out_left + device_capacity;
  GPUJOIN_CUDA_RETURN(EnqueueJoin(index, a, rows, bound, b.first_left_row, out_left, out_right,
                                  nullptr, device_capacity, ctx.stream(), masked),
                      "join");

  JoinHead head;
  const DeviceRange pieces[4] = {{ctx.device_stats(), kCountOffset + sizeof(head.matches)},
                                 {out_left, device_capacity * 8},
                                 {a.probes, want_probes ? rows * 4 : 0},
                                 {a.found, want_found ? rows : 0}};
  if (StreamContext::GatheredBytes(pieces) <= StreamContext::kStagingBytes) {
    // Small batch: bringing back unused capacity (at most 8 bytes per left row)
    // costs less than a second round trip.
    const uint8_t* host[4] = {};
    GPUJOIN_RETURN_IF_ERROR(ctx.DownloadGathered(pieces, host, "join results"));
    head = ReadJoinHead(host[0]);
    const uint64_t written = std::min<uint64_t>(head.matches, capacity);
    std::memcpy(b.out_left_rows.data(), host[1], written * 4);
    std::memcpy(b.out_right_rows.data(), host[1] + device_capacity * 4, written * 4);
    if (want_probes) std::memcpy(b.probes.data(), host[2], b.probes.size_bytes());
    if (want_found) std::memcpy(b.found.data(), host[3], b.found.size());
  } else {
    // Large batch: statistics and count (adjacent) first, one wait; they say how
    // many pairs to bring back.
    std::vector<uint64_t> none;
    GPUJOIN_ASSIGN_OR_RETURN(head, DownloadJoinHead(ctx, {}, &none));
    const uint64_t written = std::min<uint64_t>(head.matches, capacity);
    GPUJOIN_RETURN_IF_ERROR(DownloadJoinOutputs(ctx, b, a, out_left, out_right, written));
  }
  *b.result = JoinResult{head.matches, head.matches > capacity || build_overflow,
                         ToQueryStatistics(head.stats, rows)};
  return absl::OkStatus();
}

// A join batch that gathers payload (capacity > 0; never captured): the join
// writes each pair's slot, the gathers read the first min(count, capacity) of
// them; one wait brings the statistics, count and string totals (checked
// before any gather output is written), then the strings are copied and the
// written prefix downloaded.
template <IndexKey K>
absl::Status JoinBatchWithGather(StreamContext& ctx, const CudaHashIndex& index, uint32_t bound,
                                 bool build_overflow, uint64_t rows, const JoinBatchT<K>& b,
                                 MaskedRows masked, const std::string& where) {
  const uint64_t capacity = b.out_left_rows.size();
  const uint64_t device_capacity = std::min(capacity, rows);
  const bool has_left_rows = !b.left_rows.empty();
  const bool want_found = !b.found.empty();
  const bool want_probes = !b.probes.empty();
  // Pairs: [out_left | out_right | out_slots].
  GPUJOIN_ASSIGN_OR_RETURN(
      JoinArena<K> a,
      UploadJoinArena(ctx, index, b, rows, device_capacity * 12, JoinScratchBytesWithSlots(rows)));
  auto* out_left = reinterpret_cast<uint32_t*>(a.pairs);
  uint32_t* out_right = out_left + device_capacity;
  uint32_t* out_slots = out_right + device_capacity;
  unsigned long long* count = a.count;
  GPUJOIN_CUDA_RETURN(EnqueueJoin(index, a, rows, bound, b.first_left_row, out_left, out_right,
                                  out_slots, device_capacity, ctx.stream(), masked),
                      "join");
  // A kKeepAll index stores payload per kept row: a pair's first match is at
  // its group's start (the pairs' slots are turned into it in place).
  if (const GroupRange* ranges = index.groups().ranges; ranges != nullptr) {
    GPUJOIN_CUDA_RETURN(
        GroupsOfSlots(out_slots, device_capacity, count, ranges, nullptr, out_slots, ctx.stream()),
        "join groups");
  }
  GPUJOIN_ASSIGN_OR_RETURN(
      DeviceGathers gathers,
      DeviceGathers::Start(ctx, index, b.gather, GatherRows{out_slots, device_capacity, count},
                           where));
  std::vector<uint64_t> totals;
  GPUJOIN_ASSIGN_OR_RETURN(const JoinHead head,
                           DownloadJoinHead(ctx, gathers.TotalRanges(), &totals));
  // The pairs and the result are written whatever the gathers' limits say (as
  // on the CPU backend: what a limit refuses is the gather).
  const uint64_t written = std::min<uint64_t>(head.matches, capacity);
  GPUJOIN_RETURN_IF_ERROR(DownloadJoinOutputs(ctx, b, a, out_left, out_right, written));
  *b.result = JoinResult{head.matches, head.matches > capacity || build_overflow,
                         ToQueryStatistics(head.stats, rows)};
  GPUJOIN_RETURN_IF_ERROR(gathers.Finish(ctx, totals));
  if (written == 0) {
    WriteEmptyGathers(b.gather);
    return absl::OkStatus();
  }
  return gathers.Download(ctx, written);
}

// A join batch by count -> scan -> scatter (group_join.hpp): the count pass
// (the lookup's probe, each row's pairs, the scan), one wait for the
// statistics and the count, then exactly the pairs to write are allocated,
// scattered and downloaded; gathers read each pair's value-list position.
template <IndexKey K>
absl::Status JoinBatchGrouped(StreamContext& ctx, const CudaHashIndex& index, JoinKind kind,
                              uint32_t bound, bool build_overflow, uint64_t rows,
                              const JoinBatchT<K>& b, const std::string& where) {
  const uint64_t capacity = b.out_left_rows.size();
  const bool gather = !b.gather.empty() && capacity > 0;
  const DeviceGroups groups = index.groups();
  // No pairs in the arena: the count pass sizes them.
  GPUJOIN_ASSIGN_OR_RETURN(
      JoinArena<K> a, UploadJoinArena(ctx, index, b, rows, 0, GroupJoinCountScratchBytes(rows)));
  uint8_t* count_scratch = a.scratch;
  GPUJOIN_CUDA_RETURN(EnqueueCount(index, a, kind, rows, bound, count_scratch, ctx.stream()),
                      "join count");
  std::vector<uint64_t> none;
  GPUJOIN_ASSIGN_OR_RETURN(const JoinHead head, DownloadJoinHead(ctx, {}, &none));
  const uint64_t written = std::min<uint64_t>(head.matches, capacity);

  // Exactly the pairs that are written: [out_left | out_right | positions] [partitions].
  const uint64_t pairs_bytes = (written * (gather ? 12 : 8) + 255) & ~uint64_t{255};
  GPUJOIN_ASSIGN_OR_RETURN(
      auto out,
      Alloc<uint8_t>(written == 0 ? 0 : pairs_bytes + GroupJoinScatterScratchBytes(rows, written),
                     ctx, "join pairs"));
  auto* out_left = reinterpret_cast<uint32_t*>(out.data());
  uint32_t* out_right = out_left + written;
  uint32_t* out_positions = gather ? out_right + written : nullptr;
  std::optional<DeviceGathers> gathers;
  std::vector<uint64_t> totals;
  if (written > 0) {
    // A key schema's value list holds build rows, mapped to their values.
    const uint32_t* row_values = nullptr;
    if constexpr (!KeyWord<K>) row_values = index.stored_keys().row_values;
    GPUJOIN_CUDA_RETURN(
        ScatterGroupJoin(count_scratch, rows, written, a.left_rows, b.first_left_row, groups.values,
                         out_left, out_right, out_positions, out.data() + pairs_bytes, ctx.stream(),
                         row_values),
        "join scatter");
    if (gather) {
      GPUJOIN_ASSIGN_OR_RETURN(
          gathers, DeviceGathers::Start(ctx, index, b.gather,
                                        GatherRows{out_positions, written, nullptr}, where));
      const std::vector<DeviceRange> ranges = gathers->TotalRanges();
      if (!ranges.empty()) {
        std::vector<const uint8_t*> at(ranges.size());
        GPUJOIN_RETURN_IF_ERROR(ctx.DownloadGathered(ranges, at, "join gather totals"));
        totals.resize(ranges.size());
        for (size_t k = 0; k < totals.size(); ++k) std::memcpy(&totals[k], at[k], 8);
      }
    }
  }
  // The pairs and the result are written whatever the gathers' limits say (as
  // on the CPU backend: what a limit refuses is the gather).
  GPUJOIN_RETURN_IF_ERROR(DownloadJoinOutputs(ctx, b, a, out_left, out_right, written));
  *b.result = JoinResult{head.matches, head.matches > capacity || build_overflow,
                         ToQueryStatistics(head.stats, rows)};
  if (!gather) return absl::OkStatus();
  if (written == 0) {
    WriteEmptyGathers(b.gather);
    return absl::OkStatus();
  }
  GPUJOIN_RETURN_IF_ERROR(gathers->Finish(ctx, totals));
  return gathers->Download(ctx, written);
}

// How a join of `kind` runs on `index`. The many-to-one compaction pairs every
// found (or missing) left row with its table value (kEmptyKey) alone, which is
// exactly an inner join when every group has one row (kLowestRow, or kKeepAll
// with max_group_rows <= 1), a semi join on any index (the table holds each
// key's first match) and an anti join; it needs no per-row counts, scan of
// them or group reads (on an H200 the same 2^26 left rows join at about 0.9x
// of a lookup that way). The other joins count, scan and scatter.
enum class JoinPath { kMasks, kGroups };
JoinPath JoinPathOf(JoinKind kind, const CudaHashIndex& index) {
  const bool single_rows = !index.keeps_all() || index.build_statistics().max_group_rows <= 1;
  if (kind == JoinKind::kLeftSemi || kind == JoinKind::kLeftAnti) return JoinPath::kMasks;
  return kind == JoinKind::kInner && single_rows ? JoinPath::kMasks : JoinPath::kGroups;
}

}  // namespace

template <IndexKey K>
absl::Status RunNode(const LoweringEnv& env, StreamContext& ctx, size_t i, const JoinNodeT<K>& n) {
  const std::string where = absl::StrCat("node ", i, " (join)");
  GPUJOIN_ASSIGN_OR_RETURN(const CudaHashIndex* index, ReadableIndex(n.index, where));
  const uint32_t bound = n.max_probe_count != 0 ? n.max_probe_count : index->spec().probe_bound();
  const bool build_overflow = index->build_statistics().overflow_rows > 0;
  GPUJOIN_RETURN_IF_ERROR(CheckGroups(*index, where));
  const JoinPath path = JoinPathOf(n.kind, *index);
  const MaskedRows masked =
      n.kind == JoinKind::kLeftAnti ? MaskedRows::kMissing : MaskedRows::kFound;
  for (size_t k = 0; k < n.batches.size(); ++k) {
    const JoinBatchT<K>& b = n.batches[k];
    const uint64_t rows = KeyRows(b.keys);
    // Count-only batches (capacity 0) gather nothing.
    const bool gather = !b.gather.empty() && !b.out_left_rows.empty();
    if (rows == 0) {
      *b.result = JoinResult{0, build_overflow, QueryStatistics{}};
      if (gather) WriteEmptyGathers(b.gather);
      continue;
    }
    const std::string batch_where = absl::StrCat(where, " batch ", k);
    if (path == JoinPath::kGroups) {
      GPUJOIN_RETURN_IF_ERROR(
          JoinBatchGrouped(ctx, *index, n.kind, bound, build_overflow, rows, b, batch_where));
      continue;
    }
    if (gather) {
      GPUJOIN_RETURN_IF_ERROR(
          JoinBatchWithGather(ctx, *index, bound, build_overflow, rows, b, masked, batch_where));
      continue;
    }
    GPUJOIN_RETURN_IF_ERROR(JoinBatchOnDevice(ctx, *index, bound, build_overflow, rows, b, masked));
  }
  return absl::OkStatus();
}

template absl::Status RunNode(const LoweringEnv&, StreamContext&, size_t,
                              const JoinNodeT<uint32_t>&);
template absl::Status RunNode(const LoweringEnv&, StreamContext&, size_t,
                              const JoinNodeT<uint64_t>&);
template absl::Status RunNode(const LoweringEnv&, StreamContext&, size_t,
                              const JoinNodeT<ColumnKey>&);

}  // namespace gpujoin::engine::detail
