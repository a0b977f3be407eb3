#include "cpu/cpu_hash_index.hpp"

namespace gpujoin::engine::cpu {

absl::StatusOr<TableSnapshot> CpuHashIndex::Snapshot() const {
  TableSnapshot snap;
  snap.keys.resize(slots_.size());
  snap.values.resize(slots_.size());
  for (size_t i = 0; i < slots_.size(); ++i) {
    snap.keys[i] = slots_[i].key;
    snap.values[i] = slots_[i].value;
  }
  return snap;
}

}  // namespace gpujoin::engine::cpu
