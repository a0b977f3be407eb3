// MutationRebuild: a mutation batch merged with a source index's image into one
// build input (mutation.hpp has the semantics). The merge reads every column
// through one cell reader, whatever holds it (the image's arrays, the batch's
// payload views or key columns), and writes the build input's columns with one
// gather, so payload and key columns of every type take the same path.
#include "gpujoin/engine/mutation.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <new>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/key_columns.hpp"
#include "gpujoin/common/status_macros.hpp"
#include "gpujoin/engine/backend.hpp"
#include "gpujoin/engine/graph.hpp"
#include "gpujoin/engine/index_image.hpp"

namespace gpujoin::engine {
namespace {

// One column as the merge reads it, row by row: an image's column, a batch's
// payload view or a batch's key column.
struct CellColumn {
  ColumnType type = ColumnType::kInt32;
  HashColumn column;  // the layout KeyValueAt reads (kBool: its bitmap in data)

  bool Null(uint64_t r) const {
    return !column.validity.empty() && !BitAt(column.validity, column.offset + r);
  }
  // The value bytes of row r (not null): fixed width little-endian, one byte
  // 0 or 1 for kBool, string and binary bytes.
  std::string_view Bytes(uint64_t r) const {
    static constexpr char kBits[2] = {0, 1};
    if (type == ColumnType::kBool) return {&kBits[BitAt(column.data, column.offset + r)], 1};
    const detail::KeyValue v = detail::KeyValueAt(column, r);
    return {reinterpret_cast<const char*>(v.data), v.size};
  }
};

CellColumn CellsOf(ColumnType type, std::span<const std::byte> data,
                   std::span<const uint64_t> offsets, std::span<const uint8_t> validity,
                   uint64_t rows) {
  CellColumn c;
  c.type = type;
  c.column.type = type;
  c.column.data = {reinterpret_cast<const uint8_t*>(data.data()), data.size()};
  // uint64 and int64 offsets share a representation (offsets stay below 2^63).
  c.column.large_offsets = {reinterpret_cast<const int64_t*>(offsets.data()), offsets.size()};
  c.column.validity = validity;
  c.column.length = rows;
  return c;
}
CellColumn CellsOf(const PayloadImage& p, uint64_t positions) {
  return CellsOf(p.type, {p.data.data(), p.data.size()}, p.offsets.as<uint64_t>(),
                 p.validity.as<uint8_t>(), positions);
}
CellColumn CellsOf(const ColumnView& v) {
  return CellsOf(v.type, v.data, v.offsets, v.validity, v.rows);
}
CellColumn CellsOf(const HashColumn& h) {
  CellColumn c;
  c.type = h.type;
  c.column = h;
  return c;
}

// A row of one of the merge's two sources: the image (0) or the batch (1).
struct RowRef {
  uint32_t source = 0;
  uint64_t row = 0;
};
constexpr uint32_t kImage = 0;
constexpr uint32_t kBatch = 1;

// A column of the build input, gathered from rows of its sources.
struct OwnedColumn {
  ColumnType type = ColumnType::kInt32;
  uint64_t rows = 0;
  std::vector<std::byte> data;
  std::vector<uint64_t> offsets;  // variable width: rows + 1
  std::vector<uint8_t> validity;  // empty: no nulls

  ColumnView View() const {
    return ColumnView{type, rows, data, offsets, validity};
  }
  // As a key column of a build: string and binary offsets as int32 (the
  // build's key columns take no int64 offsets); FitsKeyColumn says whether
  // they fit.
  bool FitsKeyColumn() const { return data.size() <= 0x7fffffffu; }
  HashColumn AsKeyColumn() {
    HashColumn h = CellsOf(type, data, {}, validity, rows).column;
    if (IsVariableWidth(type)) {
      offsets32.assign(offsets.begin(), offsets.end());
      h.offsets = offsets32;
    }
    return h;
  }
  std::vector<int32_t> offsets32;
  uint64_t StoredBytes() const {
    return data.size() + offsets.size() * sizeof(uint64_t) + validity.size();
  }
};

// Writes the rows `refs` selects from `sources` (image, batch) into one column.
OwnedColumn Gather(ColumnType type, bool nullable, const CellColumn* const sources[2],
                   std::span<const RowRef> refs) {
  OwnedColumn out;
  out.type = type;
  out.rows = refs.size();
  const bool variable = IsVariableWidth(type);
  const size_t width = variable || type == ColumnType::kBool ? 0 : ColumnWidth(type);
  if (nullable) out.validity.assign(BitmapBytes(refs.size()), 0);
  if (type == ColumnType::kBool) {
    out.data.assign(BitmapBytes(refs.size()), std::byte{0});
  } else if (variable) {
    out.offsets.reserve(refs.size() + 1);
    out.offsets.push_back(0);
  } else {
    out.data.resize(refs.size() * width);
  }
  for (size_t i = 0; i < refs.size(); ++i) {
    const CellColumn& src = *sources[refs[i].source];
    const bool null = src.Null(refs[i].row);
    if (nullable && !null) out.validity[i / 8] |= uint8_t(1u << (i % 8));
    const std::string_view bytes = null ? std::string_view() : src.Bytes(refs[i].row);
    if (type == ColumnType::kBool) {
      if (!null && bytes[0] != 0) out.data[i / 8] |= std::byte(1u << (i % 8));
    } else if (variable) {
      const auto* b = reinterpret_cast<const std::byte*>(bytes.data());
      out.data.insert(out.data.end(), b, b + bytes.size());
      out.offsets.push_back(out.data.size());
    } else if (null) {
      std::memset(out.data.data() + i * width, 0, width);
    } else {
      std::memcpy(out.data.data() + i * width, bytes.data(), width);
    }
  }
  return out;
}

// The map key of a key-schema row: per column a null flag, then (not null) the
// value's length and bytes. Equal exactly when the keys are equal.
template <class Cells>
void AppendKeyBytes(const Cells& columns, uint64_t r, std::string& out) {
  out.clear();
  for (const CellColumn& c : columns) {
    if (c.Null(r)) {
      out.push_back('\0');
      continue;
    }
    out.push_back('\1');
    const std::string_view b = c.Bytes(r);
    const uint64_t n = b.size();
    out.append(reinterpret_cast<const char*>(&n), sizeof(n));
    out.append(b);
  }
}

// A key of the merge: the source's stored keys and the batch's, per key kind.
template <IndexKey K>
struct KeyAccess;

template <KeyWord K>
struct KeyAccess<K> {
  using MapKey = K;
  std::vector<K> upsert;  // flattened chunks
  std::vector<K> deletes;

  void Load(const IndexImage&, const MutationBatchT<K>& batch) {
    for (const auto& c : batch.upsert_keys) upsert.insert(upsert.end(), c.begin(), c.end());
    for (const auto& c : batch.delete_keys) deletes.insert(deletes.end(), c.begin(), c.end());
  }
  bool SlotLive(const IndexImage& image, uint32_t s) const {
    return image.keys.as<K>()[s] != kEmptyKeyOf<K>;
  }
  K ImageKey(const IndexImage& image, uint32_t s, std::string&) const {
    return image.keys.as<K>()[s];
  }
  bool DeleteValid(uint64_t r) const { return deletes[r] != kEmptyKeyOf<K>; }
  K UpsertKey(uint64_t r, std::string&) const { return upsert[r]; }
  K DeleteKey(uint64_t r, std::string&) const { return deletes[r]; }
};

template <>
struct KeyAccess<ColumnKey> {
  using MapKey = std::string;
  std::vector<CellColumn> stored;  // the image's key columns (build rows)
  std::vector<CellColumn> upsert;
  std::vector<CellColumn> deletes;
  std::vector<std::string> names;

  void Load(const IndexImage& image, const MutationBatchT<ColumnKey>& batch) {
    const uint64_t rows = image.key_columns.empty() ? 0 : image.row_values.size() / 4;
    for (const PayloadImage& p : image.key_columns) stored.push_back(CellsOf(p, rows));
    for (const HashColumn& h : batch.upsert_keys.columns) upsert.push_back(CellsOf(h));
    for (const HashColumn& h : batch.delete_keys.columns) deletes.push_back(CellsOf(h));
  }
  bool SlotLive(const IndexImage& image, uint32_t s) const {
    return image.values.as<uint32_t>()[s] != kEmptySlotRow;
  }
  const std::string& ImageKey(const IndexImage& image, uint32_t s, std::string& buf) const {
    AppendKeyBytes(stored, image.values.as<uint32_t>()[s], buf);
    return buf;
  }
  static bool AnyNull(const std::vector<CellColumn>& cols, uint64_t r) {
    for (const CellColumn& c : cols) {
      if (c.Null(r)) return true;
    }
    return false;
  }
  bool DeleteValid(uint64_t r) const { return !AnyNull(deletes, r); }
  const std::string& UpsertKey(uint64_t r, std::string& buf) const {
    AppendKeyBytes(upsert, r, buf);
    return buf;
  }
  const std::string& DeleteKey(uint64_t r, std::string& buf) const {
    AppendKeyBytes(deletes, r, buf);
    return buf;
  }
};

template <IndexKey K>
class Rebuild final : public MutationRebuild {
 public:
  static constexpr bool kColumns = std::is_same_v<K, ColumnKey>;

  absl::Status Merge(const Backend& backend, const HashIndex& source,
                     const MutationBatchT<K>& batch) {
    GPUJOIN_RETURN_IF_ERROR(ValidateMutationBatch(batch, source));
    spec_ = source.spec();
    GPUJOIN_ASSIGN_OR_RETURN(image_, backend.ExportIndex(source));
    keys_.Load(image_, batch);
    for (size_t c = 0; c < batch.payload.size(); ++c) batch_payload_.push_back(CellsOf(batch.payload[c]));
    for (const ChunkedU32::value_type& chunk : batch.values) {
      batch_values_.insert(batch_values_.end(), chunk.begin(), chunk.end());
    }
    GPUJOIN_RETURN_IF_ERROR(CheckUpsertKeys(batch));
    const uint64_t upserts = KeyRows(batch.upsert_keys);
    counts_.upsert_rows = upserts;
    const bool keep_all = spec_.duplicates == DuplicatePolicy::kKeepAll;

    // The batch's distinct keys, each an entry: what the deletes and upserts
    // do to it. Only these are hashed; the source's other keys are copied as
    // they are (a batch is usually far smaller than the index).
    std::unordered_map<MapKey, uint32_t> entry_of;
    std::string buf;
    auto entry = [&](const auto& key) -> Entry& {
      const auto [it, added] = entry_of.emplace(MapKey(key), uint32_t(entries_.size()));
      if (added) entries_.emplace_back();
      return entries_[it->second];
    };
    // Each distinct delete key counts once, one that no index can hold too
    // (the reserved word; key columns compare with their nulls, AppendKeyBytes).
    std::unordered_set<MapKey> seen;
    const uint64_t deletes = KeyRows(batch.delete_keys);
    for (uint64_t r = 0; r < deletes; ++r) {
      const auto& key = keys_.DeleteKey(r, buf);
      if (!seen.insert(MapKey(key)).second) continue;
      if (!keys_.DeleteValid(r)) {
        ++counts_.not_found_keys;
        continue;
      }
      entry(key).deleted = true;
    }
    for (uint64_t r = 0; r < upserts; ++r) {
      Entry& e = entry(keys_.UpsertKey(r, buf));
      if (e.batch_rows.empty()) e.key_row = r;
      if (keep_all) {
        e.batch_rows.push_back(r);
      } else {
        e.batch_rows.assign(1, r);
      }
    }
    // Where the batch's keys live in the source: one pass over its slots.
    const uint32_t capacity = spec_.capacity;
    for (uint32_t s = 0; s < capacity; ++s) {
      if (!keys_.SlotLive(image_, s)) continue;
      ++source_keys_;
      const auto it = entry_of.find(keys_.ImageKey(image_, s, buf));
      if (it == entry_of.end()) continue;
      entries_[it->second].slot = s;
      touched_slots_.push_back({s, it->second});
    }
    for (Entry& e : entries_) {
      const bool present = e.slot != kEmptySlotRow;
      if (e.deleted) {
        ++(present ? counts_.deleted_keys : counts_.not_found_keys);
        if (present) counts_.deleted_rows += keep_all ? GroupOf(e.slot).second : 1;
      }
      e.old_live = present && !e.deleted;
      if (!e.batch_rows.empty()) ++(e.old_live ? counts_.updated_keys : counts_.inserted_keys);
    }
    Emit(keep_all);
    return absl::OkStatus();
  }

  const MutationCounts& counts() const override { return counts_; }
  uint64_t live_keys() const override { return live_keys_; }
  uint64_t rows() const override { return values_.size(); }
  const HashIndexSpec& source_spec() const override { return spec_; }
  std::vector<PayloadShape> payload_shapes() const override {
    std::vector<PayloadShape> shapes;
    for (const OwnedColumn& c : payload_) {
      shapes.push_back(PayloadShape{c.type, !c.validity.empty(),
                                    IsVariableWidth(c.type) ? uint64_t(c.data.size()) : 0});
    }
    return shapes;
  }
  uint64_t key_column_bytes() const override {
    uint64_t bytes = 0;
    for (const OwnedColumn& c : key_columns_) bytes += c.StoredBytes();
    return bytes;
  }

  absl::Status BuildInto(Backend& backend, HashIndex* target,
                         BuildStatistics* statistics) override {
    BuildIndexNodeT<K> node;
    node.index = target;
    if constexpr (kColumns) {
      for (OwnedColumn& c : key_columns_) {
        if (!c.FitsKeyColumn()) {
          return absl::ResourceExhaustedError(absl::StrCat(
              "the index's key columns would hold ", c.data.size(),
              " bytes of one column, more than 2^31 - 1 (int32 offsets)"));
        }
        node.keys.columns.push_back(c.AsKeyColumn());
      }
    } else {
      node.keys.push_back(std::span<const K>(words_));
    }
    node.values = ChunkedU32{std::span<const uint32_t>(values_)};
    for (const OwnedColumn& c : payload_) node.payload.push_back(c.View());
    BuildStatistics stats;
    node.statistics = &stats;
    CommandGraph graph;
    graph.Add(std::move(node));
    GPUJOIN_RETURN_IF_ERROR(backend.Run(graph));
    if (statistics != nullptr) *statistics = stats;
    if (stats.overflow_rows != 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          stats.overflow_rows, " rows found no slot within the probe bound ",
          target->spec().probe_bound(), " of a table of ", target->spec().capacity, " slots"));
    }
    return absl::OkStatus();
  }

 private:
  using MapKey = typename KeyAccess<K>::MapKey;

  // A distinct key of the batch: its source slot (none when absent) and what
  // the batch does to it.
  struct Entry {
    uint32_t slot = kEmptySlotRow;  // the source slot, or none
    bool deleted = false;           // a delete names it
    bool old_live = false;          // the source's rows are kept
    uint64_t key_row = 0;           // its first upsert row (a new key's key)
    std::vector<uint64_t> batch_rows;  // kLowestRow: the winner; kKeepAll: appended rows
  };

  // A source slot's group: (first position, size) in the value list.
  std::pair<uint32_t, uint32_t> GroupOf(uint32_t slot) const {
    const auto ranges = image_.group_ranges.as<uint32_t>();
    return {ranges[2 * size_t(slot)], ranges[2 * size_t(slot) + 1]};
  }
  // The user value of a source slot's first row (kLowestRow) or of value-list
  // position p (kKeepAll).
  uint32_t SlotValue(uint32_t slot) const {
    const uint32_t raw = image_.values.as<uint32_t>()[slot];
    return kColumns ? image_.row_values.as<uint32_t>()[raw] : raw;
  }
  uint32_t PositionValue(uint32_t p) const {
    const uint32_t raw = image_.group_values.as<uint32_t>()[p];
    return kColumns ? image_.row_values.as<uint32_t>()[raw] : raw;
  }

  // Lays the result out as one build input: the source's keys in slot order
  // (their rows, or what the batch made of them), then the batch's new keys.
  void Emit(bool keep_all) {
    const uint64_t positions = keep_all ? image_.group_values.size() / 4 : spec_.capacity;
    const uint64_t rows = (keep_all ? positions : source_keys_) + counts_.upsert_rows;
    std::vector<RowRef> payload_rows;
    std::vector<RowRef> key_rows;
    payload_rows.reserve(rows);
    values_.reserve(rows);
    if constexpr (kColumns) {
      key_rows.reserve(rows);
    } else {
      words_.reserve(rows);
    }
    // One row of a key whose key is `key`: a source slot's or a batch row's.
    auto add = [&](RowRef key, uint32_t value, RowRef payload) {
      values_.push_back(value);
      payload_rows.push_back(payload);
      if constexpr (kColumns) {
        key_rows.push_back(
            key.source == kImage ? RowRef{kImage, image_.values.as<uint32_t>()[key.row]} : key);
      } else {
        words_.push_back(key.source == kImage ? image_.keys.as<K>()[key.row]
                                              : keys_.upsert[key.row]);
      }
    };
    // The source's rows of slot s (kKeepAll: its group; kLowestRow: its value).
    auto add_source = [&](uint32_t s) {
      if (keep_all) {
        const auto [first, size] = GroupOf(s);
        for (uint32_t p = first; p < first + size; ++p) {
          add({kImage, s}, PositionValue(p), {kImage, p});
        }
      } else {
        add({kImage, s}, SlotValue(s), {kImage, s});
      }
    };
    auto add_batch = [&](RowRef key, const Entry& e) {
      for (uint64_t r : e.batch_rows) add(key, batch_values_[r], {kBatch, r});
    };
    size_t next_touched = 0;
    const uint32_t capacity = spec_.capacity;
    for (uint32_t s = 0; s < capacity; ++s) {
      if (!keys_.SlotLive(image_, s)) continue;
      if (next_touched == touched_slots_.size() || touched_slots_[next_touched].first != s) {
        ++live_keys_;
        add_source(s);
        continue;
      }
      const Entry& e = entries_[touched_slots_[next_touched++].second];
      if (!e.old_live && e.batch_rows.empty()) continue;  // deleted
      ++live_keys_;
      // kLowestRow: the batch's winner replaces the source's row.
      if (e.old_live && (keep_all || e.batch_rows.empty())) add_source(s);
      add_batch({kImage, s}, e);
    }
    for (const Entry& e : entries_) {
      if (e.slot != kEmptySlotRow || e.batch_rows.empty()) continue;
      ++live_keys_;
      add_batch({kBatch, e.key_row}, e);
    }
    for (size_t c = 0; c < image_.payload.size(); ++c) {
      const PayloadImage& p = image_.payload[c];
      const CellColumn stored = CellsOf(p, positions);
      const CellColumn* sources[2] = {&stored, c < batch_payload_.size() ? &batch_payload_[c] : &stored};
      const bool nullable = p.nullable || (c < batch_payload_.size() && !batch_payload_[c].column.validity.empty());
      payload_.push_back(Gather(p.type, nullable, sources, payload_rows));
    }
    if constexpr (kColumns) {
      for (size_t c = 0; c < keys_.stored.size(); ++c) {
        const CellColumn* sources[2] = {&keys_.stored[c],
                                        keys_.upsert.empty() ? &keys_.stored[c] : &keys_.upsert[c]};
        // Key columns never hold a null in a stored or upserted row.
        key_columns_.push_back(Gather(keys_.stored[c].type, false, sources, key_rows));
      }
    }
  }

  HashIndexSpec spec_;
  IndexImage image_;
  KeyAccess<K> keys_;
  std::vector<CellColumn> batch_payload_;
  std::vector<uint32_t> batch_values_;
  MutationCounts counts_;
  std::vector<Entry> entries_;  // the batch's distinct keys
  // The source slots of the batch's keys, in slot order: (slot, entry).
  std::vector<std::pair<uint32_t, uint32_t>> touched_slots_;
  uint64_t source_keys_ = 0;  // live slots of the source
  uint64_t live_keys_ = 0;
  // The build input.
  std::vector<K> words_;  // key words (unused for key schemas)
  std::vector<OwnedColumn> key_columns_;  // int32 offsets made by BuildInto
  std::vector<uint32_t> values_;
  std::vector<OwnedColumn> payload_;
};

}  // namespace

template <IndexKey K>
absl::StatusOr<std::unique_ptr<MutationRebuild>> MutationRebuild::Prepare(
    const Backend& backend, const HashIndex& source, const MutationBatchT<K>& batch) {
  try {
    auto rebuild = std::make_unique<Rebuild<K>>();
    GPUJOIN_RETURN_IF_ERROR(rebuild->Merge(backend, source, batch));
    return std::unique_ptr<MutationRebuild>(std::move(rebuild));
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(
        "mutation: host memory for merging the batch with the index's content ran out");
  }
}

template absl::StatusOr<std::unique_ptr<MutationRebuild>> MutationRebuild::Prepare(
    const Backend&, const HashIndex&, const MutationBatchT<uint32_t>&);
template absl::StatusOr<std::unique_ptr<MutationRebuild>> MutationRebuild::Prepare(
    const Backend&, const HashIndex&, const MutationBatchT<uint64_t>&);
template absl::StatusOr<std::unique_ptr<MutationRebuild>> MutationRebuild::Prepare(
    const Backend&, const HashIndex&, const MutationBatchT<ColumnKey>&);

template <IndexKey K>
absl::Status CheckUpsertKeys(const MutationBatchT<K>& batch) {
  uint64_t row = 0;
  if constexpr (KeyWord<K>) {
    for (const auto& chunk : batch.upsert_keys) {
      for (K k : chunk) {
        if (k == kEmptyKeyOf<K>) {
          return absl::InvalidArgumentError(
              absl::StrCat("upsert key row ", row, " holds the reserved key ", uint64_t(k),
                           " (all ones), which no index can hold"));
        }
        ++row;
      }
    }
  } else {
    const uint64_t rows = batch.upsert_keys.rows();
    for (; row < rows; ++row) {
      for (size_t c = 0; c < batch.upsert_keys.columns.size(); ++c) {
        const HashColumn& h = batch.upsert_keys.columns[c];
        if (!h.validity.empty() && !BitAt(h.validity, h.offset + row)) {
          return absl::InvalidArgumentError(absl::StrCat(
              "upsert key row ", row, " has a null in key column ", c, ", which no index can hold"));
        }
      }
    }
  }
  return absl::OkStatus();
}
template absl::Status CheckUpsertKeys(const MutationBatchT<uint32_t>&);
template absl::Status CheckUpsertKeys(const MutationBatchT<uint64_t>&);
template absl::Status CheckUpsertKeys(const MutationBatchT<ColumnKey>&);

absl::StatusOr<InPlaceMutation> Backend::MutateInPlace(HashIndex&, const MutationBatchT<uint32_t>&,
                                                       double) {
  return InPlaceMutation{};
}
absl::StatusOr<InPlaceMutation> Backend::MutateInPlace(HashIndex&, const MutationBatchT<uint64_t>&,
                                                       double) {
  return InPlaceMutation{};
}
absl::StatusOr<InPlaceMutation> Backend::MutateInPlace(HashIndex&, const MutationBatchT<ColumnKey>&,
                                                       double) {
  return InPlaceMutation{};
}

absl::StatusOr<uint32_t> GrownCapacity(uint64_t live_keys, uint32_t current,
                                       double max_load_factor) {
  if (!(max_load_factor > 0 && max_load_factor <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_load_factor ", max_load_factor, " is not in (0, 1]"));
  }
  uint64_t capacity = std::max<uint64_t>(current, 1);
  while (double(live_keys) > max_load_factor * double(capacity)) {
    capacity *= 2;
    if (capacity > (uint64_t{1} << 31)) {
      return absl::ResourceExhaustedError(absl::StrCat(
          live_keys, " keys at max_load_factor ", max_load_factor,
          " need a table of more than 2^31 slots, the largest capacity an index can have"));
    }
  }
  return uint32_t(capacity);
}

}  // namespace gpujoin::engine
