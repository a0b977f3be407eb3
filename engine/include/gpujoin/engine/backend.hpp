// The backend interface: CPU (reference and fallback) and CUDA (the product).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpujoin/engine/graph.hpp"
#include "gpujoin/engine/hash_index.hpp"
#include "gpujoin/engine/host_buffer.hpp"
#include "gpujoin/engine/index_image.hpp"
#include "gpujoin/engine/mutation.hpp"

namespace gpujoin::engine {

struct DevicePlanInput;
class DevicePlanBatch;

/// What a backend runs on.
struct BackendInfo {
  BackendKind kind = BackendKind::kCpu;
  std::string device_name;          ///< e.g. "NVIDIA H200" or the CPU model / "host"
  uint64_t memory_total_bytes = 0;  ///< device memory (CUDA) or physical memory (CPU)
  uint64_t memory_free_bytes = 0;   ///< at the time of the call
  uint32_t parallelism = 0;         ///< SMs (CUDA) or worker threads (CPU)
};

/// How the CUDA backend inserts a build (the table and statistics are the same
/// either way, except total_probes when keys repeat: docs/engine.md;
/// docs/operations.md, docs/PERFORMANCE.md).
enum class CudaBuildPath {
  kAuto,    ///< by size: the tile path for tables of >= 128 MiB and >= 2^22 rows
  kDirect,  ///< one thread per row, atomics straight into the table
  kTiles,   ///< rows sorted by 2048-slot tile, tiles laid out in shared memory
};

/// Options of a backend, set by gpujoind's flags (docs/operations.md); tests
/// pass them instead of setting environment variables.
struct BackendOptions {
  /// CPU backend worker threads; 0 = hardware concurrency.
  uint32_t cpu_threads = 0;
  /// CUDA device ordinal.
  int cuda_device = 0;
  /// CUDA: the build path of every build (kAuto: chosen by size). A forced tile
  /// path still builds tables under 4096 slots directly.
  CudaBuildPath cuda_build_path = CudaBuildPath::kAuto;
  /// CUDA: most transient device memory one build may take (bytes; 0 = no cap).
  /// A tile build that would need more inserts directly (same result, slower).
  uint64_t cuda_build_transient_max_bytes = 0;
  /// CUDA: how a host thread waits for the GPU. false: sleeps on blocking-sync
  /// events (after polling for cuda_wait_poll_us); true: spins a core per
  /// waiting request (lowest latency while waiting requests <= cores).
  bool cuda_spin_wait = false;
  /// CUDA: microseconds to poll an event before sleeping (0 = sleep at once;
  /// at most 1,000,000). Ignored with cuda_spin_wait.
  uint32_t cuda_wait_poll_us = 0;
  /// CUDA: capture repeated small join batches as CUDA Graphs and replay them.
  bool cuda_join_graphs = true;
  /// CUDA: capture repeated small aggregations as CUDA Graphs and replay them.
  bool cuda_aggregate_graphs = true;
  /// CUDA: capture repeated small plan batches (their device steps up to the
  /// first wait) as CUDA Graphs and replay them.
  bool cuda_plan_graphs = true;
  /// Key-schema indexes: the bits of a key's fingerprint kept (64). Tests set
  /// fewer to force many keys onto one fingerprint; the results must not change.
  uint32_t key_fingerprint_bits = 64;
  /// Tests only (the CPU backend): after this many Run calls (0 = never), every
  /// Run fails INTERNAL and Healthy() is false, as after a sticky CUDA error.
  uint64_t test_fatal_after_runs = 0;
};

/// What a build is given, as far as its memory is concerned: the input of
/// Backend::BuildTransientBytes. BuildShapeOf derives it from the node to be run.
struct BuildShape {
  /// Key rows of all chunks together.
  uint64_t rows = 0;
  /// The key word of the rows (4 or 8 bytes each: the uploads and the tile
  /// path's words grow with it), or kColumns.
  KeyType key_type = KeyType::kUint32;
  /// kColumns: the bytes the rows' key columns occupy once stored
  /// (KeyColumnBytes of every chunk).
  uint64_t key_column_bytes = 0;
  /// A BuildIndexNode with `values` set.
  bool explicit_values = false;
  /// A BuildBatchIndexNode ...
  bool batch = false;
  /// ... with this many non-empty chunks ...
  uint32_t batch_chunks = 0;
  /// ... at least one of which carries a validity mask.
  bool batch_validity = false;
  /// The build's payload columns (their upload and reordering are part of the
  /// build's transient memory).
  std::vector<PayloadShape> payload;
};

/// The shape of a build node (its key type, rows, values, chunks and masks).
template <IndexKey K>
BuildShape BuildShapeOf(const BuildIndexNodeT<K>& node);
template <IndexKey K>
BuildShape BuildShapeOf(const BuildBatchIndexNodeT<K>& node);

/// Runs command graphs. Thread-safe: several graphs may run concurrently (the CUDA
/// backend gives each its own stream). Errors: INVALID_ARGUMENT from validation;
/// RESOURCE_EXHAUSTED when memory for this request could not be allocated (the
/// backend stays usable); INTERNAL for a fatal device error, after which Healthy()
/// is false and every later call fails.
class Backend {
 public:
  virtual ~Backend() = default;

  virtual BackendInfo Info() const = 0;

  /// Allocates an empty index of `spec` (INVALID_ARGUMENT for a bad spec,
  /// RESOURCE_EXHAUSTED when the table does not fit).
  virtual absl::StatusOr<std::unique_ptr<HashIndex>> CreateIndex(const HashIndexSpec& spec) = 0;

  /// Bytes of backend memory an index of `spec` (valid) occupies once created: the
  /// same number its HashIndex::memory_bytes() reports, computed from the sizes
  /// CreateIndex allocates (it depends on spec.key_type: docs/engine.md). The
  /// server reserves it against its memory budget before creating the index.
  virtual uint64_t IndexBytes(const HashIndexSpec& spec) const = 0;

  /// Peak bytes of backend memory that a build of `shape` into an index of `spec`
  /// (valid) takes for its duration on top of the index's own table: uploaded
  /// inputs and the CUDA tile path's sort buffer (CUDA: each allocation rounded up to the
  /// memory pool's 2 MiB pages). 0 for a backend that builds in place.
  virtual uint64_t BuildTransientBytes(const HashIndexSpec& spec,
                                       const BuildShape& shape) const = 0;

  /// Most bytes of backend memory the payload columns `payload` of a build of
  /// `rows` source rows into an index of `spec` (valid) occupy once built (an
  /// upper bound: strings count all their bytes, of which only the winners' are
  /// kept). A kLowestRow index stores payload per slot (`rows` does not matter);
  /// a kKeepAll index per kept row, at most `rows` of them. HashIndex::memory_bytes()
  /// then reports IndexBytes(spec) (plus GroupStorageBytes for kKeepAll) plus what
  /// the payload really takes. The server reserves it with IndexBytes before the
  /// build.
  virtual uint64_t PayloadBytes(const HashIndexSpec& spec, std::span<const PayloadShape> payload,
                                uint64_t rows) const = 0;

  /// Validates and runs `graph`; returns when all its outputs are written.
  virtual absl::Status Run(const CommandGraph& graph) = 0;

  /// Runs one batch of a plan of DevicePlanShapeOf's shape as this backend's
  /// lowered batch, up to its distinct group keys or its rows
  /// (plan_device.hpp); the batch then runs the measures. The default (the CPU
  /// backend's) runs the steps over a live-row mask with this backend's nodes
  /// (a LookupNode per lookup, an AggregateNode per measure); the CUDA backend
  /// runs them on the device. RESOURCE_EXHAUSTED when device memory is short,
  /// INVALID_ARGUMENT for another backend's index.
  virtual absl::StatusOr<std::unique_ptr<DevicePlanBatch>> StartDevicePlan(
      const DevicePlanInput& input);

  /// False after a fatal (sticky) device error.
  virtual bool Healthy() const { return true; }

  /// A host buffer of `bytes` usable bytes (64-byte aligned) for columns the caller
  /// fills before a Run (lookup keys) or reads after it (lookup outputs). The CUDA
  /// backend hands out page-locked memory from a per-backend cache and copies
  /// LookupNode keys/values/found/probes that lie in such a buffer straight to and
  /// from the device (no staging copy); when page-locked memory is short it hands
  /// out ordinary memory (pinned() false), which still works through staging. The
  /// default (CPU backend) is ordinary memory from a process-wide cache. Zero bytes
  /// give an empty buffer. Thread-safe.
  virtual absl::StatusOr<HostBuffer> AllocateHostBuffer(size_t bytes);

  /// A host copy of `index` (built by this backend) in the canonical layout of
  /// index_image.hpp: the same bytes on every backend for the same build where
  /// the build contract is deterministic. Synchronous (device-to-host copies on
  /// a stream of its own; not for request paths); `index` may be read by other
  /// graphs meanwhile. INVALID_ARGUMENT for another backend's index,
  /// RESOURCE_EXHAUSTED when the host copy cannot be allocated. The default
  /// (a backend without images) is UNIMPLEMENTED.
  virtual absl::StatusOr<IndexImage> ExportIndex(const HashIndex& index) const;

  /// A new index of this backend holding exactly what `image` describes (spec,
  /// statistics, table, groups, payload): lookups and joins on it answer as on
  /// the exported index. `image` is checked first (IndexImage::Validate:
  /// INVALID_ARGUMENT). Allocates ImportedIndexBytes(image.shape()) of backend
  /// memory, which the caller reserves beforehand; RESOURCE_EXHAUSTED when it
  /// does not fit. Synchronous. The default is UNIMPLEMENTED.
  virtual absl::StatusOr<std::unique_ptr<HashIndex>> ImportIndex(const IndexImage& image);

  /// Applies `batch` to `index` (built by this backend) in place, when this
  /// backend can for the index's kind and the batch fits the table: the live
  /// keys after it at most `max_load_factor` of the capacity, every new key
  /// within the probe bound. Else nothing changes (`applied` false) and the
  /// caller rebuilds (MutationRebuild, docs/engine.md "Mutations"). The
  /// caller holds `index` exclusively (no graph reads it meanwhile). The
  /// result's statistics are those of a build of the live keys, except that
  /// max_probes may stay above (it is the largest since the last build).
  /// INVALID_ARGUMENT as ValidateMutationBatch and for an upsert key no index
  /// can hold (nothing changes). The default changes nothing.
  virtual absl::StatusOr<InPlaceMutation> MutateInPlace(HashIndex& index,
                                                        const MutationBatchT<uint32_t>& batch,
                                                        double max_load_factor);
  virtual absl::StatusOr<InPlaceMutation> MutateInPlace(HashIndex& index,
                                                        const MutationBatchT<uint64_t>& batch,
                                                        double max_load_factor);
  virtual absl::StatusOr<InPlaceMutation> MutateInPlace(HashIndex& index,
                                                        const MutationBatchT<ColumnKey>& batch,
                                                        double max_load_factor);
};

/// Bytes of backend memory an index imported from an image of `shape` occupies
/// (its HashIndex::memory_bytes() once imported, with the strings' stored bytes):
/// IndexBytes(spec) + GroupStorageBytes(spec, capacity, kept_rows) +
/// PayloadBytes(spec, payload, kept_rows) + KeyStorageBytes(shape).
uint64_t ImportedIndexBytes(const Backend& backend, const IndexImageShape& shape);

/// Creates a backend. kAuto picks CUDA when this build has it and a device is
/// present, else CPU. kCuda fails with FAILED_PRECONDITION when the build has no
/// CUDA backend or no device is usable.
absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(BackendKind kind,
                                                       const BackendOptions& options = {});

/// Parses "auto" | "cpu" | "cuda".
absl::StatusOr<BackendKind> ParseBackendKind(std::string_view name);

/// True when this build includes the CUDA backend and a CUDA device is visible.
bool CudaDeviceAvailable();

/// The CUDA devices visible to this process (0 without the CUDA backend).
int CudaDeviceCount();

}  // namespace gpujoin::engine
