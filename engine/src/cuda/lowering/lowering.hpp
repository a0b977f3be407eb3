// Internal (CUDA builds only): lowering one command-graph node onto a stream
// context (uploads through pinned staging, the device-level API of
// device_ops.hpp / aggregate/aggregate_ops.hpp, downloads). CudaBackend::Run calls
// RunNode for each node in order; node i is named in error messages. Each
// lowering returns a classified status (cuda_error.hpp) and leaves the stream
// with nothing of the node's still reading caller memory, except where a
// replayed graph says otherwise. Files: lower_build.cpp (builds),
// lower_lookup.cpp (lookups), lower_join.cpp (joins), lower_aggregate.cpp
// (aggregation, hashing); lower_payload.hpp (payload stores and gathers).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/host_pool.hpp"
#include "cuda/cuda_hash_index.hpp"
#include "cuda/device_buffer.hpp"
#include "cuda/device_ops.hpp"
#include "cuda/stream_context.hpp"
#include "gpujoin/engine/backend.hpp"
#include "gpujoin/engine/graph.hpp"

namespace gpujoin::engine::detail {

/// What the lowerings need from the backend besides the stream context.
struct LoweringEnv {
  const BackendOptions& options;
  /// The backend's page-locked host buffers (AllocateHostBuffer): columns that
  /// lie in them are copied directly instead of through staging.
  const HostPool& host_pool;
};

/// Stream-ordered device memory of `n` elements on the context's stream.
template <typename T>
absl::StatusOr<DeviceBuffer<T>> Alloc(size_t n, StreamContext& ctx, const char* what) {
  return DeviceBuffer<T>::Async(n, ctx.stream(), what);
}

inline QueryStatistics ToQueryStatistics(const DeviceQueryStats& d, uint64_t rows) {
  return QueryStatistics{d.found, rows - d.found, d.total_probes, d.max_probes};
}

/// The build path and transient cap `options` ask for, set in `src`.
template <IndexKey K>
void SetBuildOptions(const BackendOptions& options, BuildSourceT<K>& src) {
  src.path = options.cuda_build_path == CudaBuildPath::kDirect  ? BuildPath::kDirect
             : options.cuda_build_path == CudaBuildPath::kTiles ? BuildPath::kTiles
                                                                : BuildPath::kAuto;
  src.transient_max_bytes = options.cuda_build_transient_max_bytes;
}

/// The index as this backend's (INVALID_ARGUMENT naming `where` when another
/// backend created it).
inline absl::StatusOr<CudaHashIndex*> WritableIndex(HashIndex* index, const std::string& where) {
  auto* cuda = dynamic_cast<CudaHashIndex*>(index);
  if (cuda == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": index was created by the ",
                                                   std::string(BackendKindName(index->backend())),
                                                   " backend, not by this cuda backend"));
  }
  return cuda;
}
inline absl::StatusOr<const CudaHashIndex*> ReadableIndex(const HashIndex* index,
                                                          const std::string& where) {
  auto* cuda = dynamic_cast<const CudaHashIndex*>(index);
  if (cuda == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": index was created by the ",
                                                   std::string(BackendKindName(index->backend())),
                                                   " backend, not by this cuda backend"));
  }
  return cuda;
}

// A kKeepAll index without groups whose last recorded build stored keys: a
// build failed after it had started to change the table.
inline absl::Status CheckGroups(const CudaHashIndex& index, const std::string& where) {
  if (index.keeps_all() && index.groups().ranges == nullptr &&
      index.build_statistics().unique_keys != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(where,
                     ": the index's last build failed before its groups were stored; "
                     "build it again"));
  }
  return absl::OkStatus();
}

// The key-carrying nodes: templates on the key kind K, instantiated for
// uint32_t and uint64_t in lower_build.cpp, lower_lookup.cpp and lower_join.cpp
// (joins for ColumnKey too).
template <IndexKey K>
absl::Status RunNode(const LoweringEnv& env, StreamContext& ctx, size_t i,
                     const BuildIndexNodeT<K>& n);
template <IndexKey K>
absl::Status RunNode(const LoweringEnv& env, StreamContext& ctx, size_t i,
                     const BuildBatchIndexNodeT<K>& n);
template <IndexKey K>
absl::Status RunNode(const LoweringEnv& env, StreamContext& ctx, size_t i, const LookupNodeT<K>& n);
template <IndexKey K>
absl::Status RunNode(const LoweringEnv& env, StreamContext& ctx, size_t i, const JoinNodeT<K>& n);
// Key-schema nodes (lower_build.cpp, lower_lookup.cpp) of a kLowestRow index;
// joins (lower_join.cpp) share the key words' template.
template <>
absl::Status RunNode(const LoweringEnv& env, StreamContext& ctx, size_t i,
                     const BuildIndexNodeT<ColumnKey>& n);
template <>
absl::Status RunNode(const LoweringEnv& env, StreamContext& ctx, size_t i,
                     const BuildBatchIndexNodeT<ColumnKey>& n);
template <>
absl::Status RunNode(const LoweringEnv& env, StreamContext& ctx, size_t i,
                     const LookupNodeT<ColumnKey>& n);
absl::Status RunNode(const LoweringEnv& env, StreamContext& ctx, size_t i, const AggregateNode& n);

/// Where AggregateDevice writes (AggregateNode's outputs; empty = not asked).
struct AggregateDeviceOutputs {
  std::span<uint64_t> output;
  std::span<uint32_t> contributing_rows;
  std::span<uint8_t> overflow;
};

/// One grouped aggregation of `rows` device rows (keys, values of `type` or
/// null for count, optional mask) into `groups` groups, its results
/// downloaded into `out` as an AggregateNode's; `where` names it in errors.
/// The aggregate node's uncaptured path and the device plans call it.
absl::Status AggregateDevice(StreamContext& ctx, const std::string& where, AggregateOp op,
                             const uint32_t* keys, const void* values, ColumnType type,
                             const uint32_t* mask, uint64_t rows, uint32_t groups,
                             const AggregateDeviceOutputs& out);
absl::Status RunNode(const LoweringEnv& env, StreamContext& ctx, size_t i, const HashNode& n);

}  // namespace gpujoin::engine::detail
