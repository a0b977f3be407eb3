// Internal (CUDA builds only): the peak transient device memory of the CUDA
// backend's build nodes, for the server's memory budget
// (Backend::BuildTransientBytes). Plain C++: arithmetic over the sizes the
// allocating code uses. It mirrors CudaBackend's RunNode for BuildIndexNode and
// BuildBatchIndexNode (lowering/lower_build.cpp: the uploads) and takes the build's own
// buffer from BuildTransientBytes (cuda/index/build.hpp, the tile path's layout
// itself); keep it in step with both.
#pragma once

#include <cstdint>

#include "cuda/index/build.hpp"
#include "gpujoin/engine/backend.hpp"

namespace gpujoin::engine::detail {

/// Granularity in which the device's memory pool maps memory for stream-ordered
/// allocations: each transient allocation is counted rounded up to it, so that
/// a small build on an empty pool is not undercounted.
inline constexpr uint64_t kPoolGranularityBytes = uint64_t{2} << 20;

/// Peak transient device memory (bytes) of a CUDA build node of `shape` into an
/// index of `spec`, built on `path` (BuildSource::path) with `transient_max_bytes`
/// (BuildSource::transient_max_bytes; 0 = no cap): the uploaded inputs (keys; the
/// values, or for batch builds the validity mask, chunk starts and chunk bases),
/// all alive while the build runs, plus the tile path's buffer
/// (BuildTransientBytes) unless the build inserts directly (small builds, the
/// direct path forced, or a buffer over the cap). Each allocation is rounded up
/// to kPoolGranularityBytes. With payload columns (shape.payload), what storing
/// them takes as well (their uploads, each slot's winner, the string scans:
/// lowering/lower_payload.cpp). A kKeepAll build adds its group pass's scratch
/// (GroupScratchBytes: 16 bytes per row, a winner per slot and the sort's
/// temporary storage); its groups themselves are index memory. 0 for an empty
/// build without payload (it only clears the table).
uint64_t BuildNodeTransientBytes(const HashIndexSpec& spec, const BuildShape& shape, BuildPath path,
                                 uint64_t transient_max_bytes);

}  // namespace gpujoin::engine::detail
