// Backend::MutateInPlace on the CPU backend (mutation.hpp has the semantics):
// a kLowestRow index of key words whose payload columns are fixed width (or
// bool) takes a batch in place, keeping its Robin Hood order exactly as a build
// would lay the same keys out:
//  - a delete removes its key's slot and shifts the run after it back by one
//    (backward-shift deletion: no tombstones; every key that moves is one slot
//    nearer its home, so the run stays sorted);
//  - an upsert of a present key assigns its value and payload row;
//  - an upsert of a new key is a Robin Hood insertion that carries each
//    displaced resident's payload row along with it.
// Every slot and payload row written is recorded first, so a batch that finds
// no slot within the probe bound (or that the caller cannot log) is undone
// exactly. Other kinds (key schemas, keep_all, string payload) and batches that
// would pass max_load_factor are left to MutationRebuild.
#include <algorithm>
#include <cstring>
#include <memory>
#include <unordered_set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cpu/cpu_hash_index.hpp"
#include "cpu/cpu_mutate.hpp"
#include "gpujoin/common/bitmap.hpp"
#include "gpujoin/common/status_macros.hpp"

namespace gpujoin::engine::cpu {
namespace {

// The payload of one slot as a byte row: per column a validity byte, then its
// value bytes (a bool column: one byte 0 or 1).
class PayloadRows {
 public:
  explicit PayloadRows(std::vector<StoredColumn>& columns) : columns_(columns) {
    for (const StoredColumn& c : columns_) {
      offsets_.push_back(bytes_);
      bytes_ += 1 + Width(c.type);
    }
  }
  size_t bytes() const { return bytes_; }

  void Read(uint64_t pos, uint8_t* row) const {
    for (size_t c = 0; c < columns_.size(); ++c) {
      const StoredColumn& col = columns_[c];
      uint8_t* out = row + offsets_[c];
      out[0] = col.validity.size() == 0 || BitAt(col.validity.span(), pos) ? 1 : 0;
      if (col.type == ColumnType::kBool) {
        out[1] = BitAt(std::span<const uint8_t>(
                           reinterpret_cast<const uint8_t*>(col.data.data()), col.data.size()),
                       pos);
      } else {
        std::memcpy(out + 1, col.data.data() + pos * Width(col.type), Width(col.type));
      }
    }
  }
  void Write(uint64_t pos, const uint8_t* row) {
    for (size_t c = 0; c < columns_.size(); ++c) {
      StoredColumn& col = columns_[c];
      const uint8_t* in = row + offsets_[c];
      if (col.validity.size() != 0) SetBit(col.validity.data(), pos, in[0] != 0);
      if (col.type == ColumnType::kBool) {
        SetBit(reinterpret_cast<uint8_t*>(col.data.data()), pos, in[1] != 0);
      } else {
        std::memcpy(col.data.data() + pos * Width(col.type), in + 1, Width(col.type));
      }
    }
  }
  // An empty slot's row: null, zero bytes (an image's layout).
  void EmptyRow(uint8_t* row) const {
    if (bytes_ != 0) std::memset(row, 0, bytes_);  // no payload: `row` may be null
  }
  // Row `r` of the batch's payload columns (same order and types).
  void FromBatch(const std::vector<ColumnView>& batch, uint64_t r, uint8_t* row) const {
    for (size_t c = 0; c < columns_.size(); ++c) {
      const ColumnView& v = batch[c];
      uint8_t* out = row + offsets_[c];
      const bool valid = v.validity.empty() || BitAt(v.validity, r);
      out[0] = valid ? 1 : 0;
      if (v.type == ColumnType::kBool) {
        out[1] = valid && BitAt(std::span<const uint8_t>(
                                    reinterpret_cast<const uint8_t*>(v.data.data()), v.data.size()),
                                r);
      } else if (valid) {
        std::memcpy(out + 1, v.data.data() + r * Width(v.type), Width(v.type));
      } else {
        std::memset(out + 1, 0, Width(v.type));
      }
    }
  }
  bool Null(const uint8_t* row, size_t c) const { return row[offsets_[c]] == 0; }
  size_t columns() const { return columns_.size(); }

 private:
  static size_t Width(ColumnType t) { return t == ColumnType::kBool ? 1 : ColumnWidth(t); }

  std::vector<StoredColumn>& columns_;
  std::vector<size_t> offsets_;
  size_t bytes_ = 0;
};

template <KeyWord K>
class InPlace final : public MutationUndo {
 public:
  using Index = CpuHashIndex<K>;
  using RawSlot = typename Index::RawSlot;

  InPlace(Index& index, const MutationBatchT<K>& batch)
      : index_(index),
        batch_(batch),
        payload_(index.mutable_payload()),
        row_(payload_.bytes()),
        carried_row_(payload_.bytes()),
        swap_row_(payload_.bytes()) {}

  // Whether this index kind and batch can be changed in place at all.
  bool Eligible() const {
    if (index_.spec().duplicates != DuplicatePolicy::kLowestRow) return false;
    const std::vector<StoredColumn>& stored = index_.stored_payload();
    for (size_t c = 0; c < stored.size(); ++c) {
      if (IsVariableWidth(stored[c].type)) return false;
      // A null into a column stored without validity: the rebuild allocates it.
      if (stored[c].validity.size() == 0 && c < batch_.payload.size() &&
          !batch_.payload[c].validity.empty()) {
        const ColumnView& v = batch_.payload[c];
        for (uint64_t r = 0; r < v.rows; ++r) {
          if (!BitAt(v.validity, r)) return false;
        }
      }
    }
    return true;
  }

  // Applies the batch; false (everything undone) when it does not fit.
  bool Apply(double max_load_factor, MutationCounts& counts) {
    for (const auto& c : batch_.delete_keys) deletes_.insert(deletes_.end(), c.begin(), c.end());
    for (const auto& c : batch_.upsert_keys) upserts_.insert(upserts_.end(), c.begin(), c.end());
    for (const auto& c : batch_.values) values_.insert(values_.end(), c.begin(), c.end());
    const uint32_t bound = index_.spec().probe_bound();
    saved_statistics_ = index_.build_statistics();
    saved_rows_ = index_.built_rows();
    saved_payload_ = index_.payload();

    // Count first: the live keys after the batch decide whether it fits.
    std::unordered_set<K> deleted, seen;
    uint64_t present_deletes = 0;
    uint32_t probes = 0;
    for (K k : deletes_) {
      if (!seen.insert(k).second) continue;  // distinct keys, the reserved word too
      if (k != kEmptyKeyOf<K> && index_.FindSlot(k, bound, probes) != Index::kNoSlot) {
        ++present_deletes;
        deleted.insert(k);
      } else {
        ++counts.not_found_keys;
      }
    }
    seen.clear();
    uint64_t new_keys = 0;
    for (K k : upserts_) {
      if (!seen.insert(k).second) continue;
      if (deleted.count(k) != 0 || index_.FindSlot(k, bound, probes) == Index::kNoSlot) {
        ++new_keys;
      }
    }
    const uint64_t live = saved_statistics_.unique_keys - present_deletes + new_keys;
    if (double(live) > max_load_factor * double(index_.spec().capacity)) return false;

    BuildStatistics stats = saved_statistics_;
    std::vector<PayloadColumnInfo> infos = saved_payload_;
    for (K k : deletes_) {
      if (deleted.erase(k) == 0) continue;
      Delete(index_.FindSlot(k, bound, probes), infos);
      ++counts.deleted_keys;
      ++counts.deleted_rows;
    }
    seen.clear();
    for (size_t i = 0; i < upserts_.size(); ++i) {
      const K k = upserts_[i];
      payload_.FromBatch(batch_.payload, i, carried_row_.data());
      const uint32_t slot = index_.FindSlot(k, bound, probes);
      const bool first = seen.insert(k).second;
      if (slot != Index::kNoSlot) {
        if (first) ++counts.updated_keys;
        payload_.Read(slot, row_.data());
        AdjustNulls(row_.data(), infos, -1);
        AdjustNulls(carried_row_.data(), infos, +1);
        Put(slot, RawSlot{k, values_[i]}, carried_row_.data());
        continue;
      }
      ++counts.inserted_keys;
      AdjustNulls(carried_row_.data(), infos, +1);
      uint32_t inserted_probes = 0, max_probes = 0;
      if (!Insert(k, values_[i], bound, inserted_probes, max_probes)) {
        Undo();
        counts = MutationCounts{};
        return false;
      }
      stats.total_probes += inserted_probes;
      stats.max_probes = std::max<uint64_t>(stats.max_probes, max_probes);
    }
    counts.upsert_rows = upserts_.size();
    // As a build of the live keys: one row each.
    stats.unique_keys = live;
    stats.duplicate_rows = 0;
    stats.overflow_rows = 0;
    stats.invalid_rows = 0;
    index_.RecordBuild(stats, live, std::move(infos));
    return true;
  }

  void Undo() override {
    for (auto it = undo_.rbegin(); it != undo_.rend(); ++it) {
      index_.PutSlot(it->pos, it->slot);
      payload_.Write(it->pos, it->row.data());
    }
    undo_.clear();
    index_.RecordBuild(saved_statistics_, saved_rows_, saved_payload_);
  }

 private:
  struct Saved {
    uint32_t pos;
    RawSlot slot;
    std::vector<uint8_t> row;
  };

  uint32_t Mask() const { return index_.spec().capacity - 1u; }
  uint32_t DisplacementAt(uint32_t pos, K word) const {
    return (pos - detail::HomeSlot(word, index_.spec().capacity)) & Mask();
  }

  // Writes slot `pos` and its payload row, recording what was there.
  void Put(uint32_t pos, RawSlot slot, const uint8_t* row) {
    Saved s{pos, index_.GetSlot(pos), std::vector<uint8_t>(payload_.bytes())};
    payload_.Read(pos, s.row.data());
    undo_.push_back(std::move(s));
    index_.PutSlot(pos, slot);
    payload_.Write(pos, row);
  }

  void AdjustNulls(const uint8_t* row, std::vector<PayloadColumnInfo>& infos, int delta) const {
    for (size_t c = 0; c < payload_.columns(); ++c) {
      if (payload_.Null(row, c)) infos[c].null_count += uint64_t(int64_t(delta));
    }
  }

  // Backward-shift deletion of the key in `pos`.
  void Delete(uint32_t pos, std::vector<PayloadColumnInfo>& infos) {
    payload_.Read(pos, row_.data());
    AdjustNulls(row_.data(), infos, -1);
    for (;;) {
      const uint32_t next = (pos + 1) & Mask();
      if (index_.EmptyAt(next)) break;
      const RawSlot moved = index_.GetSlot(next);
      if (DisplacementAt(next, moved.word) == 0) break;
      payload_.Read(next, row_.data());
      Put(pos, moved, row_.data());
      pos = next;
    }
    payload_.EmptyRow(row_.data());
    Put(pos, Index::EmptySlot(), row_.data());
  }

  // Robin Hood insertion of a new key with the payload row in carried_row_,
  // carrying displaced residents (and their rows) on. False when a key would
  // pass the probe bound (the caller undoes the batch).
  bool Insert(K key, uint32_t value, uint32_t bound, uint32_t& probes, uint32_t& max_probes) {
    RawSlot carried{key, value};
    uint32_t pos = detail::HomeSlot(key, index_.spec().capacity);
    for (uint32_t d = 0;; ++d, pos = (pos + 1) & Mask()) {
      if (d >= bound) return false;
      ++probes;
      if (index_.EmptyAt(pos)) {
        Put(pos, carried, carried_row_.data());
        max_probes = std::max(max_probes, d + 1);
        return true;
      }
      const RawSlot resident = index_.GetSlot(pos);
      if (index_.ResidentStaysFirst(resident.word, carried.word, d, pos)) continue;
      max_probes = std::max(max_probes, d + 1);
      payload_.Read(pos, swap_row_.data());
      Put(pos, carried, carried_row_.data());
      carried = resident;
      std::swap(carried_row_, swap_row_);
      d = DisplacementAt(pos, carried.word);
    }
  }

  Index& index_;
  const MutationBatchT<K>& batch_;
  PayloadRows payload_;
  std::vector<K> deletes_, upserts_;
  std::vector<uint32_t> values_;
  std::vector<uint8_t> row_, carried_row_, swap_row_;
  std::vector<Saved> undo_;
  BuildStatistics saved_statistics_;
  uint64_t saved_rows_ = 0;
  std::vector<PayloadColumnInfo> saved_payload_;
};

}  // namespace

template <KeyWord K>
absl::StatusOr<InPlaceMutation> MutateInPlace(CpuHashIndex<K>& index,
                                              const MutationBatchT<K>& batch,
                                              double max_load_factor) {
  GPUJOIN_RETURN_IF_ERROR(ValidateMutationBatch(batch, index));
  GPUJOIN_RETURN_IF_ERROR(CheckUpsertKeys(batch));
  InPlaceMutation out;
  auto mutation = std::make_unique<InPlace<K>>(index, batch);
  if (!mutation->Eligible()) return out;
  if (!mutation->Apply(max_load_factor, out.counts)) return InPlaceMutation{};
  out.applied = true;
  out.undo = std::move(mutation);
  return out;
}

template absl::StatusOr<InPlaceMutation> MutateInPlace(CpuHashIndex<uint32_t>&,
                                                       const MutationBatchT<uint32_t>&, double);
template absl::StatusOr<InPlaceMutation> MutateInPlace(CpuHashIndex<uint64_t>&,
                                                       const MutationBatchT<uint64_t>&, double);

}  // namespace gpujoin::engine::cpu
