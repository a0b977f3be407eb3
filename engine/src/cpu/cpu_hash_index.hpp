// The CPU backend's hash index: one host array of (key, value) slots and the
// reference implementation of build and probe, for every index key K (uint32_t,
// uint64_t or ColumnKey; one template, the index's spec().key_type picks it).
// A key-schema index (ColumnKey, key_columns.hpp) keeps a slot as (fingerprint,
// build row): its key columns and the value of every build row lie beside the
// table (StoredKeys, row_values), a probe compares the key columns on an equal
// fingerprint, keys of one fingerprint are ordered by row, and an empty slot is
// marked by its row (kNoRow). The CUDA backend must reproduce
// these semantics exactly (see docs/engine.md, "Slots and probing"):
//  - a key's home slot is detail::HomeSlot(key, capacity); probing is linear,
//    slot (home + i) & (capacity - 1) for i = 0 .. bound - 1;
//  - slots are kept in Robin Hood order (detail::ResidentComesFirst): an
//    insertion takes the first slot whose resident comes after its key and
//    carries that resident on, so every run is sorted by home, then key, and the
//    layout depends only on the set of keys (unless the build overflowed);
//  - probes = slots examined; a query row stops at its key (found), an empty
//    slot or a resident that comes after it (missing), else it is missing with
//    probes = bound; reserved-key rows (kEmptyKeyOf<K>) examine no slot.
// Keys and values share one slot so that a probe costs one cache miss, not two:
// 8 bytes for uint32 keys, 16 for uint64 keys (8 key + 4 value + 4 padding; the
// simple layout: split key/value arrays would cost a second miss per hit).
// Payload columns live beside the table in slot order (cpu_payload.hpp); a
// kKeepAll index also keeps its groups beside it: per slot the range of its
// key's group in one value list, and payload per kept row in value-list order.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/key_columns.hpp"
#include "cpu/cpu_key_columns.hpp"
#include "cpu/cpu_payload.hpp"
#include "gpujoin/engine/detail/slot_hash.hpp"
#include "gpujoin/engine/hash_index.hpp"
#include "gpujoin/engine/types.hpp"
#include "hashing/key_compare.hpp"

namespace gpujoin::engine::cpu {

/// Outcome of inserting one build row.
enum class InsertOutcome { kUnique, kDuplicate, kOverflow };

/// What one insertion did (see CpuHashIndex::Insert).
struct InsertResult {
  InsertOutcome outcome = InsertOutcome::kOverflow;
  /// Slots examined, by the row's key and by the keys it displaced.
  uint32_t probes = 0;
  /// Largest (displacement + 1) at which a key was stored or found; `bound`
  /// when a key overflowed.
  uint32_t max_probes = 0;
  /// A key stored earlier was displaced past the bound and dropped: it counts
  /// as an overflow row instead of a unique key from now on.
  bool dropped = false;
};

/// Where the matches of a stored key lie, as positions [first, first + size):
/// in a kKeepAll index the key's group in the value list (its rows in source
/// order), in a kLowestRow index the slot itself (a group of one). Payload is
/// stored by position, so a match's position also addresses its payload.
struct GroupRange {
  uint32_t first;
  uint32_t size;
};

/// Bytes of one CPU slot of `type`'s key word (a key schema's: its 64-bit
/// fingerprint) and a uint32 value (a key schema's: its build row).
inline constexpr uint64_t CpuSlotBytes(KeyType type) { return type == KeyType::kUint32 ? 8 : 16; }

/// The key of one row of a key-schema index as build and probe see it: its
/// fingerprint and where its key columns are (a build row: the index's
/// StoredKeys; a query row: the query's key columns). `null`: a key column is
/// null (the row is invalid at build, missing at query).
struct ColumnRowKey {
  uint64_t fingerprint = 0;
  /// One view per key column (KeyViews).
  const detail::HashView* views = nullptr;
  uint64_t row = 0;
  bool null = false;
};

template <IndexKey K>
class CpuHashIndex final : public HashIndex {
 public:
  static constexpr bool kColumns = std::is_same_v<K, ColumnKey>;
  /// The word a slot holds: the key, or a key schema's fingerprint.
  using Word = std::conditional_t<kColumns, uint64_t, K>;
  /// A row's key as Insert and FindSlot take it.
  using RowKey = std::conditional_t<kColumns, ColumnRowKey, K>;
  /// FindSlot's answer for a key that is not stored (capacities are at most 2^31).
  static constexpr uint32_t kNoSlot = kNoRow;

  /// Allocates an empty table of spec.capacity slots (spec must be valid and
  /// spec.key_type must be K's). `fingerprint_bits`: a key schema's fingerprint
  /// width (64; fewer only in tests, BackendOptions).
  explicit CpuHashIndex(const HashIndexSpec& spec, uint32_t fingerprint_bits = 64)
      : HashIndex(spec), slots_(spec.capacity, kEmptySlot), fingerprint_bits_(fingerprint_bits) {}

  BackendKind backend() const override { return BackendKind::kCpu; }
  uint64_t memory_bytes() const override {
    uint64_t bytes = slots_.capacity() * sizeof(Slot);
    bytes += groups_.size() * sizeof(GroupRange) + group_values_.size() * sizeof(uint32_t);
    for (const StoredColumn& column : payload_columns_) bytes += column.bytes();
    if constexpr (kColumns) bytes += keys_.bytes() + row_values_.size() * sizeof(uint32_t);
    return bytes;
  }
  absl::StatusOr<TableSnapshot> Snapshot() const override { return SnapshotOf<uint32_t>(); }
  absl::StatusOr<TableSnapshot64> Snapshot64() const override { return SnapshotOf<uint64_t>(); }

  /// Empties every slot (a key schema's key columns and row values too).
  void Clear() {
    std::fill(slots_.begin(), slots_.end(), kEmptySlot);
    if constexpr (kColumns) {
      keys_ = StoredKeys();
      row_values_ = HostArray<uint32_t>();
    }
  }

  /// Key schemas: the fingerprint width (BackendOptions; 64 but in tests).
  uint32_t fingerprint_bits() const { return fingerprint_bits_; }
  /// Key schemas: takes the build's key columns (every build row) and the value
  /// of every build row, before its rows are inserted.
  void SetKeys(StoredKeys keys, HostArray<uint32_t> row_values) {
    static_assert(kColumns);
    keys_ = std::move(keys);
    row_values_ = std::move(row_values);
  }
  /// Key schemas: the stored key columns (view() is valid while the index lives)
  /// and the value of every build row.
  const StoredKeys& stored_keys() const { return keys_; }
  const HostArray<uint32_t>& row_values() const { return row_values_; }

  /// Home slot of `key`.
  uint32_t Home(const RowKey& key) const { return detail::HomeSlot(WordOf(key), spec().capacity); }

  /// Hints the cache that `key`'s home slot will be read soon. Always inlined:
  /// GCC 12 finds an out-of-line call to it "pure" (a prefetch has no effect it
  /// models) and deletes the call, so no prefetch was emitted at all.
  [[gnu::always_inline]] void Prefetch(const RowKey& key) const {
    __builtin_prefetch(&slots_[Home(key)]);
  }

  /// Key schemas, a step after Prefetch: when `key`'s home slot holds its
  /// fingerprint, hints the cache that the resident's stored key row and value
  /// will be read soon, and returns that build row (else kNoRow). Reads the
  /// home slot. The probe's misses are dependent (slot, then the row's
  /// offsets, then its bytes, and its value), so staging them over a block of
  /// rows lets them overlap.
  [[gnu::always_inline]] uint32_t PrefetchResident(const RowKey& key) const {
    static_assert(kColumns);
    const Slot& s = slots_[Home(key)];
    if (IsEmpty(s) || s.key != WordOf(key)) return kNoRow;
    keys_.PrefetchRow(s.value);
    __builtin_prefetch(&row_values_[s.value]);
    return s.value;
  }
  /// Key schemas, a step after PrefetchResident: hints the cache that build
  /// row `row`'s string and binary key bytes will be read soon.
  [[gnu::always_inline]] void PrefetchResidentBytes(uint32_t row) const {
    static_assert(kColumns);
    keys_.PrefetchBytes(row);
  }

  /// Whether `key` is the reserved key word, or a key schema's null key.
  static bool IsInvalid(const RowKey& key) {
    if constexpr (kColumns) {
      return key.null;
    } else {
      return key == kEmptyKeyOf<K>;
    }
  }

  /// Inserts `key` (not invalid) with `value` in Robin Hood order, each key
  /// examining at most `bound` slots from its home. Rows must be inserted in
  /// global source order so that the first (lowest) row of a key keeps its value.
  /// A key schema's `key` is a stored build row and `value` that row.
  InsertResult Insert(const RowKey& key, uint32_t value, uint32_t bound);

  /// Looks `key` up examining at most `bound` slots. Returns the slot holding it,
  /// or kNoSlot; `probes` receives the slots examined (0 for an invalid key).
  uint32_t FindSlot(const RowKey& key, uint32_t bound, uint32_t& probes) const {
    if (IsInvalid(key)) {
      probes = 0;
      return kNoSlot;
    }
    const Word word = WordOf(key);
    const uint32_t mask = spec().capacity - 1u;
    const uint32_t home = Home(key);
    for (uint32_t i = 0; i < bound; ++i) {
      const uint32_t pos = (home + i) & mask;
      const Slot& s = slots_[pos];
      if (IsEmpty(s)) {
        probes = i + 1;
        return kNoSlot;
      }
      if (s.key == word) {
        if (Holds(s, key)) {
          probes = i + 1;
          return pos;
        }
        continue;  // another key of the same fingerprint: they lie together
      }
      if (!detail::ResidentComesFirst(s.key, word, i, pos, spec().capacity)) {
        probes = i + 1;
        return kNoSlot;
      }
    }
    probes = bound;
    return kNoSlot;
  }

  /// The raw value of `slot` as builds compare it: the value (a key schema's:
  /// the build row) of its key's first (lowest-row) match.
  uint32_t SlotValue(uint32_t slot) const { return slots_[slot].value; }
  /// The value of `slot` (a slot FindSlot returned): its key's first
  /// (lowest-row) match on either policy.
  uint32_t ValueAt(uint32_t slot) const { return UserValue(slots_[slot].value); }

  /// Whether the index keeps every row (DuplicatePolicy::kKeepAll).
  bool keeps_all() const { return spec().duplicates == DuplicatePolicy::kKeepAll; }

  /// The matches of the key stored in `slot` (a slot FindSlot returned).
  GroupRange GroupOf(uint32_t slot) const {
    return keeps_all() ? groups_[slot] : GroupRange{slot, 1};
  }
  /// The value of match position `position` (within a GroupOf range).
  uint32_t ValueAtPosition(uint32_t position) const {
    return UserValue(keeps_all() ? group_values_[position] : slots_[position].value);
  }

  /// Replaces a kKeepAll index's groups: one range per slot into `values` (a
  /// build's last step, before RecordBuild).
  void SetGroups(HostArray<GroupRange> groups, HostArray<uint32_t> values) {
    groups_ = std::move(groups);
    group_values_ = std::move(values);
  }

  /// Copies slots [begin, end) out as separate key and value arrays (an empty
  /// slot: the reserved key and 0), for Backend::ExportIndex.
  void CopyTableOut(Word* keys, uint32_t* values, size_t begin, size_t end) const {
    for (size_t i = begin; i < end; ++i) {
      keys[i] = slots_[i].key;
      values[i] = slots_[i].value;
    }
  }
  /// Writes slots [begin, end) from key and value arrays, for Backend::ImportIndex.
  void CopyTableIn(const Word* keys, const uint32_t* values, size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) slots_[i] = Slot{keys[i], values[i]};
  }
  /// A kKeepAll index's groups (one per slot) and value list; empty otherwise.
  const HostArray<GroupRange>& group_ranges() const { return groups_; }
  const HostArray<uint32_t>& group_values() const { return group_values_; }

  /// The payload columns of the last build, in slot order.
  const std::vector<StoredColumn>& stored_payload() const { return payload_columns_; }

  // In-place mutation (cpu_mutate.cpp) writes slots and payload directly.
  /// A slot's word and raw value.
  struct RawSlot {
    Word word;
    uint32_t value;
  };
  RawSlot GetSlot(uint32_t pos) const { return {slots_[pos].key, slots_[pos].value}; }
  void PutSlot(uint32_t pos, RawSlot s) { slots_[pos] = Slot{s.word, s.value}; }
  bool EmptyAt(uint32_t pos) const { return IsEmpty(slots_[pos]); }
  static RawSlot EmptySlot() { return {kEmptySlot.key, kEmptySlot.value}; }
  /// Whether `resident`, at `pos`, stays before `word` carried `displacement`
  /// slots from its home (Robin Hood order, key words).
  bool ResidentStaysFirst(Word resident, Word word, uint32_t displacement, uint32_t pos) const {
    return detail::ResidentComesFirst(resident, word, displacement, pos, spec().capacity);
  }
  std::vector<StoredColumn>& mutable_payload() { return payload_columns_; }
  /// Replaces the payload columns (a build's last step, before RecordBuild).
  void SetPayload(std::vector<StoredColumn> columns) { payload_columns_ = std::move(columns); }

 private:
  struct Slot {
    Word key;
    uint32_t value;
  };
  static_assert(sizeof(Slot) == CpuSlotBytes(KeyTypeOfKey<K>()));
  // An empty slot: the reserved key word, or a key schema's row kNoRow.
  static constexpr Slot kEmptySlot =
      kColumns ? Slot{0, kEmptySlotRow} : Slot{static_cast<Word>(kEmptyKeyOf<Word>), 0};
  static_assert(kEmptySlotRow == kNoRow);

  static bool IsEmpty(const Slot& s) {
    if constexpr (kColumns) {
      return s.value == kEmptySlotRow;
    } else {
      return s.key == kEmptyKeyOf<K>;
    }
  }
  static Word WordOf(const RowKey& key) {
    if constexpr (kColumns) {
      return key.fingerprint;
    } else {
      return key;
    }
  }
  // Whether slot `s`, whose word equals `key`'s, holds `key`: a key schema
  // compares the key columns of the slot's row.
  bool Holds(const Slot& s, const RowKey& key) const {
    if constexpr (kColumns) {
      return detail::KeyViewsEqual(keys_.views().data(), s.value, key.views, key.row,
                                   uint32_t(keys_.views().size()));
    } else {
      return true;
    }
  }
  // Whether the resident of `s` stays before `carried` (a slot's content being
  // placed, `displacement` from its home) at `pos`: Robin Hood order, then (a key
  // schema's keys of one fingerprint) ascending row.
  bool StaysFirst(const Slot& s, const Slot& carried, uint32_t displacement, uint32_t pos) const {
    if constexpr (kColumns) {
      if (s.key == carried.key) return s.value < carried.value;
    }
    return detail::ResidentComesFirst(s.key, carried.key, displacement, pos, spec().capacity);
  }
  uint32_t UserValue(uint32_t raw) const {
    if constexpr (kColumns) {
      return row_values_[raw];
    } else {
      return raw;
    }
  }

  // The table as a snapshot of key word K2: FAILED_PRECONDITION unless K2 is K.
  template <class K2>
  absl::StatusOr<TableSnapshotOf<K2>> SnapshotOf() const {
    if constexpr (!std::is_same_v<K, K2>) {
      return SnapshotKeyTypeMismatch(KeyTypeOfKey<K>(), KeyTypeOf<K2>());
    } else {
      TableSnapshotOf<K> snap;
      snap.keys.resize(slots_.size());
      snap.values.resize(slots_.size());
      for (size_t i = 0; i < slots_.size(); ++i) {
        snap.keys[i] = slots_[i].key;
        snap.values[i] = slots_[i].value;
      }
      return snap;
    }
  }

  std::vector<Slot> slots_;
  std::vector<StoredColumn> payload_columns_;
  // kKeepAll only (empty before the first build): per slot its key's group, and
  // the value list the groups index into.
  HostArray<GroupRange> groups_;
  HostArray<uint32_t> group_values_;
  // Key schemas only: the build's key columns and the value of every build row.
  StoredKeys keys_;
  HostArray<uint32_t> row_values_;
  uint32_t fingerprint_bits_ = 64;
};

/// Bytes of the table an index of `spec` allocates: capacity slots of
/// CpuSlotBytes(spec.key_type) (key and value), nothing else (Backend::IndexBytes).
inline uint64_t CpuTableBytes(const HashIndexSpec& spec) {
  return uint64_t{spec.capacity} * CpuSlotBytes(spec.key_type);
}

template <IndexKey K>
InsertResult CpuHashIndex<K>::Insert(const RowKey& key, uint32_t value, uint32_t bound) {
  const uint32_t capacity = spec().capacity;
  const uint32_t mask = capacity - 1u;
  InsertResult r;
  Slot carried{WordOf(key), value};  // the key being placed: the row's, then a displaced one
  bool own = true;                   // whether `carried` is still the row's own key
  uint32_t pos = Home(key);
  for (uint32_t d = 0;; ++d, pos = (pos + 1u) & mask) {  // d: displacement of `carried`
    if (d >= bound) {
      r.max_probes = std::max(r.max_probes, bound);
      if (own) {
        r.outcome = InsertOutcome::kOverflow;
      } else {
        r.dropped = true;
      }
      return r;
    }
    Slot& s = slots_[pos];
    ++r.probes;
    if (IsEmpty(s)) {
      s = carried;
      r.max_probes = std::max(r.max_probes, d + 1);
      if (own) r.outcome = InsertOutcome::kUnique;
      return r;
    }
    // Rows arrive in order: only the row's own key repeats (a key schema's
    // rows compare their key columns on an equal fingerprint).
    if (own && s.key == carried.key && Holds(s, key)) {
      r.outcome = InsertOutcome::kDuplicate;
      r.max_probes = std::max(r.max_probes, d + 1);
      return r;
    }
    if (StaysFirst(s, carried, d, pos)) continue;
    // `carried` belongs here: store it and carry the resident on from the next slot.
    r.max_probes = std::max(r.max_probes, d + 1);
    if (own) r.outcome = InsertOutcome::kUnique;
    own = false;
    std::swap(s, carried);
    d = (pos - detail::HomeSlot(carried.key, capacity)) & mask;
  }
}

}  // namespace gpujoin::engine::cpu
