// In-place mutations of the CPU backend's indexes (cpu_mutate.cpp).
#pragma once

#include "absl/status/statusor.h"
#include "cpu/cpu_hash_index.hpp"
#include "gpujoin/engine/mutation.hpp"

namespace gpujoin::engine::cpu {

/// Backend::MutateInPlace for a CPU index of key words: applied for a
/// kLowestRow index whose payload columns are fixed width or bool (a null
/// only into a column that has a validity bitmap) when the batch fits the
/// table; otherwise nothing changes.
template <KeyWord K>
absl::StatusOr<InPlaceMutation> MutateInPlace(CpuHashIndex<K>& index,
                                              const MutationBatchT<K>& batch,
                                              double max_load_factor);

}  // namespace gpujoin::engine::cpu
