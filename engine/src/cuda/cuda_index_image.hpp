// Internal (CUDA builds only; plain C++): index images on the CUDA backend
// (Backend::ExportIndex / ImportIndex). The CUDA table is in the CPU's slot
// order already (both keep Robin Hood order); what differs is only the word
// layout (one key:value word per slot, all ones when empty, table/table.hpp),
// the pad of tables under 4 slots, and the payload's fixed-width columns, which
// share one array of records (record_layout.hpp). Export converts to the
// canonical layout of index_image.hpp and import back, through page-locked
// staging chunks so that the conversion and the PCIe copies overlap.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "cuda/cuda_hash_index.hpp"
#include "gpujoin/engine/index_image.hpp"

namespace gpujoin::engine::detail {

/// The image of `index`. Synchronous, on a stream of its own.
absl::StatusOr<IndexImage> ExportCudaIndex(const CudaHashIndex& index);

/// A CUDA index on `device` holding `image` (validated by the caller).
/// RESOURCE_EXHAUSTED when device memory does not suffice. Synchronous.
absl::StatusOr<std::unique_ptr<CudaHashIndex>> ImportCudaIndex(const IndexImage& image, int device,
                                                               uint32_t fingerprint_bits = 64);

}  // namespace gpujoin::engine::detail
