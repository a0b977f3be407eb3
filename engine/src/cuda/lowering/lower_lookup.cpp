// Lookup nodes on the CUDA backend (lowering.hpp). A plain lookup replays a
// captured graph for a shape it has seen (LookupGraphCache) or runs uncaptured;
// a lookup that gathers payload or counts matches takes the slots path.
#include <cuda_runtime.h>

#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cuda/cuda_error.hpp"
#include "cuda/index/groups.hpp"
#include "cuda/index/key_rows.hpp"
#include "cuda/index/lookup.hpp"
#include "cuda/lowering/lower_keys.hpp"
#include "cuda/lowering/lower_payload.hpp"
#include "cuda/lowering/lowering.hpp"
#include "gpujoin/common/status_macros.hpp"

namespace gpujoin::engine::detail {
namespace {

// The keys as one page-locked range of this backend's host buffers, or nullptr
// (several non-empty chunks, or ordinary memory).
template <KeyWord K>
const K* PinnedKeys(const LoweringEnv& env, const Chunked<K>& keys) {
  const K* only = nullptr;
  size_t bytes = 0;
  for (const auto& c : keys) {
    if (c.empty()) continue;
    if (only != nullptr) return nullptr;
    only = c.data();
    bytes = c.size_bytes();
  }
  return env.host_pool.ContainsPinned(only, bytes) ? only : nullptr;
}
// `out` when it is non-empty and lies in a page-locked host buffer of this
// backend, else nullptr.
template <typename T>
T* Pinned(const LoweringEnv& env, std::span<T> out) {
  return env.host_pool.ContainsPinned(out.data(), out.size_bytes()) ? out.data() : nullptr;
}

// A captured lookup: caller endpoints in pinned host buffers are bound into the
// graph's copy nodes; the others are copied through the graph's own buffers.
template <KeyWord K>
absl::Status ReplayLookupGraph(StreamContext& ctx, LookupGraph& graph, const LookupNodeT<K>& n,
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

// A lookup that gathers payload or counts matches (never captured: the plain
// lookup's graphs stay as they are), and every lookup of a key-schema index.
// `probe(values, found, probes, slots, stats)` enqueues the probe of the
// node's keys (found and probes may be null), which writes every row's slot; the
// group lookup turns it into the match count and, on a kKeepAll index, the
// position of the first match (whose payload is stored there); the gathers
// read the positions; one wait brings the statistics and the string totals,
// which are checked before any gather output is written; then the strings are
// copied and every output downloaded.
template <IndexKey K, class EnqueueProbe>
absl::Status LookupWithSlots(StreamContext& ctx, const CudaHashIndex& index,
                             const LookupNodeT<K>& n, uint64_t rows, const std::string& where,
                             const EnqueueProbe& probe) {
  const GroupRange* ranges = index.groups().ranges;
  const bool gather = !n.gather.empty();
  const bool counts = !n.match_counts.empty();
  // A kLowestRow index stores payload by slot: the slots are the positions.
  const bool positions = gather && ranges != nullptr;
  GPUJOIN_ASSIGN_OR_RETURN(auto values, Alloc<uint32_t>(rows, ctx, "lookup values"));
  GPUJOIN_ASSIGN_OR_RETURN(auto slots, Alloc<uint32_t>(rows, ctx, "lookup slots"));
  GPUJOIN_ASSIGN_OR_RETURN(auto match_counts,
                           Alloc<uint32_t>(counts ? rows : 0, ctx, "lookup match counts"));
  GPUJOIN_ASSIGN_OR_RETURN(auto first_positions,
                           Alloc<uint32_t>(positions ? rows : 0, ctx, "lookup positions"));
  DeviceBuffer<uint8_t> found;
  DeviceBuffer<uint32_t> probes;
  if (!n.found.empty()) {
    GPUJOIN_ASSIGN_OR_RETURN(found, Alloc<uint8_t>(rows, ctx, "lookup found"));
  }
  if (!n.probes.empty()) {
    GPUJOIN_ASSIGN_OR_RETURN(probes, Alloc<uint32_t>(rows, ctx, "lookup probes"));
  }
  auto* stats = reinterpret_cast<DeviceQueryStats*>(ctx.device_stats());
  GPUJOIN_CUDA_RETURN(cudaMemsetAsync(stats, 0, sizeof(*stats), ctx.stream()), "lookup");
  GPUJOIN_RETURN_IF_ERROR(probe(values.data(), found.data(), probes.data(), slots.data(), stats));
  if (counts || positions) {
    GPUJOIN_CUDA_RETURN(GroupsOfSlots(slots.data(), rows, nullptr, ranges, match_counts.data(),
                                      first_positions.data(), ctx.stream()),
                        "lookup groups");
  }
  std::optional<DeviceGathers> gathers;
  if (gather) {
    const uint32_t* at = positions ? first_positions.data() : slots.data();
    GPUJOIN_ASSIGN_OR_RETURN(
        gathers, DeviceGathers::Start(ctx, index, n.gather, GatherRows{at, rows, nullptr}, where));
  }
  std::vector<DeviceRange> pieces{{stats, sizeof(DeviceQueryStats)}};
  if (gathers) {
    for (const DeviceRange& r : gathers->TotalRanges()) pieces.push_back(r);
  }
  std::vector<const uint8_t*> host(pieces.size());
  GPUJOIN_RETURN_IF_ERROR(ctx.DownloadGathered(pieces, host, "lookup statistics"));
  DeviceQueryStats d;
  std::memcpy(&d, host[0], sizeof(d));
  std::vector<uint64_t> totals(pieces.size() - 1);
  for (size_t k = 0; k < totals.size(); ++k) std::memcpy(&totals[k], host[k + 1], 8);
  // The lookup's own outputs are written whatever the gathers' limits say (as on
  // the CPU backend: what a limit refuses is the gather); with the gathers'
  // outputs they come down in one wait where they fit in staging together.
  std::vector<HostPiece> outputs = {
      {n.values.data(), values.data(), rows * 4},
      {n.found.data(), found.data(), n.found.size()},
      {n.probes.data(), probes.data(), n.probes.size_bytes()},
      {n.match_counts.data(), match_counts.data(), n.match_counts.size_bytes()}};
  const absl::Status finished = gathers ? gathers->Finish(ctx, totals) : absl::OkStatus();
  if (gathers && finished.ok()) gathers->AppendDownloads(rows, &outputs);
  GPUJOIN_RETURN_IF_ERROR(ctx.DownloadAll(outputs, "lookup"));
  if (n.statistics != nullptr) *n.statistics = ToQueryStatistics(d, rows);
  if (!finished.ok()) return finished;
  if (gathers) gathers->Publish();
  return absl::OkStatus();
}

}  // namespace

template <KeyWord K>
absl::Status RunNode(const LoweringEnv& env, StreamContext& ctx, size_t i,
                     const LookupNodeT<K>& n) {
  const std::string where = absl::StrCat("node ", i, " (lookup)");
  GPUJOIN_ASSIGN_OR_RETURN(const CudaHashIndex* index, ReadableIndex(n.index, where));
  const uint64_t rows = TotalRows(n.keys);
  const uint32_t bound = n.max_probe_count != 0 ? n.max_probe_count : index->spec().probe_bound();
  if (rows == 0) {
    if (n.statistics != nullptr) *n.statistics = QueryStatistics{};
    WriteEmptyGathers(n.gather);
    return absl::OkStatus();
  }
  GPUJOIN_RETURN_IF_ERROR(CheckGroups(*index, where));
  if (!n.gather.empty() || !n.match_counts.empty()) {
    return LookupWithSlots(
        ctx, *index, n, rows, where,
        [&](uint32_t* values, uint8_t* found, uint32_t* probes, uint32_t* slots,
            DeviceQueryStats* stats) -> absl::Status {
          GPUJOIN_ASSIGN_OR_RETURN(auto keys, Alloc<K>(rows, ctx, "lookup keys"));
          GPUJOIN_RETURN_IF_ERROR(ctx.Upload(keys.data(), RangesOf(n.keys), "lookup keys"));
          GPUJOIN_CUDA_RETURN(LookupKeysSlots(index->table<K>(), keys.data(), rows, bound, values,
                                              found, probes, slots, stats, ctx.stream()),
                              "lookup");
          return absl::OkStatus();
        });
  }
  const LookupShape shape{
      index->table<K>().slots, index->spec().capacity, KeyTypeOf<K>(), rows, bound,
      !n.found.empty(),        !n.probes.empty()};
  // Columns already in page-locked backend host buffers are copied to/from the
  // device directly; the others go through staging (or the graph's buffers).
  const K* keys_pinned = PinnedKeys(env, n.keys);
  uint32_t* values_pinned = Pinned(env, n.values);
  uint8_t* found_pinned = Pinned(env, n.found);
  uint32_t* probes_pinned = Pinned(env, n.probes);
  const absl::StatusOr<LookupGraph*> graph = ctx.graphs().Get(shape, ctx.stream());
  if (graph.ok() && *graph != nullptr) {
    return ReplayLookupGraph(ctx, **graph, n, rows,
                             {keys_pinned, values_pinned, found_pinned, probes_pinned});
  }
  // Otherwise (first sight, or a failed capture: that shape is not captured again
  // on this context) the lookup runs uncaptured, as joins and aggregations do; a
  // device that is gone for good fails there and is noted by Run.
  GPUJOIN_ASSIGN_OR_RETURN(auto keys, Alloc<K>(rows, ctx, "lookup keys"));
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
    GPUJOIN_CUDA_RETURN(cudaMemcpyAsync(keys.data(), keys_pinned, rows * sizeof(K),
                                        cudaMemcpyHostToDevice, ctx.stream()),
                        "upload lookup keys");
  } else {
    GPUJOIN_RETURN_IF_ERROR(ctx.Upload(keys.data(), RangesOf(n.keys), "lookup keys"));
  }
  auto* stats = reinterpret_cast<DeviceQueryStats*>(ctx.device_stats());
  GPUJOIN_CUDA_RETURN(cudaMemsetAsync(stats, 0, sizeof(*stats), ctx.stream()), "lookup");
  GPUJOIN_CUDA_RETURN(LookupKeys(index->table<K>(), keys.data(), rows, bound, values.data(),
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
  GPUJOIN_RETURN_IF_ERROR(
      direct(ctx.host_stats(), stats, sizeof(DeviceQueryStats), "lookup statistics"));
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

// A key-schema lookup: the key columns are copied and hashed on the device and
// probed by fingerprint and exact comparison (key_rows.hpp); then the slots
// path (payload gathers, match counts). Never captured.
template <>
absl::Status RunNode(const LoweringEnv& env, StreamContext& ctx, size_t i,
                     const LookupNodeT<ColumnKey>& n) {
  const std::string where = absl::StrCat("node ", i, " (lookup)");
  GPUJOIN_ASSIGN_OR_RETURN(const CudaHashIndex* index, ReadableIndex(n.index, where));
  const uint64_t rows = n.keys.rows();
  const uint32_t bound = n.max_probe_count != 0 ? n.max_probe_count : index->spec().probe_bound();
  if (rows == 0) {
    if (n.statistics != nullptr) *n.statistics = QueryStatistics{};
    WriteEmptyGathers(n.gather);
    return absl::OkStatus();
  }
  GPUJOIN_RETURN_IF_ERROR(CheckGroups(*index, where));
  return LookupWithSlots(
      ctx, *index, n, rows, where,
      [&](uint32_t* values, uint8_t* found, uint32_t* probes, uint32_t* slots,
          DeviceQueryStats* stats) -> absl::Status {
        const KeyColumns* chunk = &n.keys;
        GPUJOIN_ASSIGN_OR_RETURN(
            UploadedKeys keys,
            UploadKeyColumns(ctx, std::span(&chunk, 1), index->spec().key_columns,
                             KeyMemory::kRequest, index->device()));
        GPUJOIN_ASSIGN_OR_RETURN(KeyFingerprintBuffers fps,
                                 FingerprintKeys(ctx, keys, nullptr, index->fingerprint_bits()));
        GPUJOIN_CUDA_RETURN(LookupKeyRows(index->table<ColumnKey>(), index->stored_keys(), fps.rows,
                                          bound, values, found, probes, slots, stats, ctx.stream()),
                            "lookup");
        return absl::OkStatus();
      });
}

template absl::Status RunNode(const LoweringEnv&, StreamContext&, size_t,
                              const LookupNodeT<uint32_t>&);
template absl::Status RunNode(const LoweringEnv&, StreamContext&, size_t,
                              const LookupNodeT<uint64_t>&);

}  // namespace gpujoin::engine::detail
