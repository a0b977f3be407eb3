// Index images on the CPU backend (Backend::ExportIndex / ImportIndex): the
// table is copied slot by slot between its (key, value) slots and the image's
// separate arrays, groups and payload as they are (the CPU stores them in the
// image's layout already).
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "cpu/thread_pool.hpp"
#include "gpujoin/engine/hash_index.hpp"
#include "gpujoin/engine/index_image.hpp"

namespace gpujoin::engine::cpu {

/// The image of a CPU index (INVALID_ARGUMENT for another backend's index).
/// Throws std::bad_alloc.
absl::StatusOr<IndexImage> ExportCpuIndex(const HashIndex& index, ThreadPool& pool);

/// A CPU index holding `image` (validated by the caller); `fingerprint_bits`
/// as BackendOptions::key_fingerprint_bits. Throws std::bad_alloc.
std::unique_ptr<HashIndex> ImportCpuIndex(const IndexImage& image, ThreadPool& pool,
                                          uint32_t fingerprint_bits);

}  // namespace gpujoin::engine::cpu
