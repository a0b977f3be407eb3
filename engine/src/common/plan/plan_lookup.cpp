#include "common/plan/plan_lookup.hpp"

#include <limits>
#include <optional>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/plan/plan_table.hpp"
#include "gpujoin/engine/dictionary.hpp"
#include "gpujoin/common/status_macros.hpp"

namespace gpujoin::engine::plan_detail {
namespace {

// Host outputs of one gathered payload column for `capacity` pairs.
struct Gathered {
  ColumnType type;
  /// A labelled select entry (PlanLookupStep::select_labels): its label
  /// table, and the dictionary whose codes were gathered (else the values).
  LabelTable* labels = nullptr;
  const StringDictionary* dictionary = nullptr;
  std::vector<std::byte> data;
  std::vector<uint8_t> validity;
  std::vector<uint32_t> offsets;
  std::string bytes;
  uint64_t nulls = 0;
};

// One step's join over the group's input: its keys, outputs and result.
struct StepJoin {
  const PlanLookupStep* step = nullptr;
  const HashIndex* index = nullptr;
  /// Key words: the key column itself when it already is the index's key
  /// word without nulls, else converted into `converted32` / `converted64`.
  std::span<const uint32_t> keys32;
  std::span<const uint64_t> keys64;
  std::vector<uint32_t> converted32;
  std::vector<uint64_t> converted64;
  KeyColumns key_columns;
  uint64_t capacity = 0;
  std::vector<uint32_t> left, right;
  std::vector<uint8_t> found;
  /// Per input row, when the step follows another in its group: the slots
  /// its key examined (its statistics are those of the rows reaching it).
  std::vector<uint32_t> probes;
  std::vector<Gathered> gathered;
  JoinResult result;
  /// A lookup of an index with one row per key (kLowestRow) runs as a
  /// LookupNode: its outputs (values, found, probes, gathered columns) are per
  /// input row, and the rows it keeps follow from `found` by the step's kind
  /// (LookupKeeps).
  bool per_row = false;
  std::vector<uint32_t> values;
};

// The key chunks of `j`'s keys.
template <IndexKey K>
KeyChunks<K> KeysOf(const StepJoin& j) {
  KeyChunks<K> keys;
  if constexpr (std::same_as<K, ColumnKey>) {
    keys = j.key_columns;
  } else if constexpr (std::same_as<K, uint32_t>) {
    keys.push_back(j.keys32);
  } else {
    keys.push_back(j.keys64);
  }
  return keys;
}

// `j`'s gathered columns, with host outputs for `capacity` positions.
std::vector<GatherOutput> GatherOutputs(StepJoin& j, uint64_t capacity,
                                        std::span<LabelTable> labels, const PlanLimits& limits) {
  std::vector<GatherOutput> outputs;
  const auto& payload = j.index->payload();
  j.gathered.assign(j.step->select.size(), Gathered{});
  for (size_t i = 0; i < j.step->select.size(); ++i) {
    Gathered& g = j.gathered[i];
    GatherOutput o;
    o.column = j.step->select[i];
    if (i < j.step->select_labels.size() && j.step->select_labels[i] >= 0) {
      g.labels = &labels[j.step->select_labels[i]];
      if (const PayloadDictionary* d = j.index->LiveDictionaryOf(o.column)) {
        g.dictionary = &d->values;
        o.column = d->codes_column;
      }
    }
    g.type = payload[o.column].type;
    g.validity.assign(BitmapBytes(capacity), 0);
    o.validity = g.validity;
    if (IsVariableWidth(g.type)) {
      g.offsets.assign(capacity + 1, 0);
      o.offsets = g.offsets;
      o.string_bytes = &g.bytes;
      o.max_string_bytes = std::min<uint64_t>(limits.max_table_bytes, 0x7fffffff);
    } else {
      g.data.assign(
          g.type == ColumnType::kBool ? BitmapBytes(capacity) : capacity * ColumnWidth(g.type),
          std::byte{0});
      o.data = g.data;
    }
    o.null_count = &g.nulls;
    outputs.push_back(o);
  }
  return outputs;
}

// Adds `j`'s join, with outputs for j.capacity pairs, to `graph`.
template <IndexKey K>
void AddJoin(StepJoin& j, std::span<LabelTable> labels, const PlanLimits& limits,
             CommandGraph& graph) {
  JoinBatchT<K> batch;
  batch.keys = KeysOf<K>(j);
  const uint64_t capacity = j.capacity;
  j.left.assign(capacity, 0);
  j.right.assign(capacity, 0);
  batch.gather = GatherOutputs(j, capacity, labels, limits);
  batch.out_left_rows = j.left;
  batch.out_right_rows = j.right;
  batch.result = &j.result;
  batch.found = j.found;
  batch.probes = j.probes;
  JoinNodeT<K> node;
  node.index = j.index;
  node.kind = j.step->kind;
  node.batches.push_back(std::move(batch));
  graph.Add(std::move(node));
}

// Adds `j` as a lookup of its `rows` input rows to `graph` (StepJoin::per_row).
template <IndexKey K>
void AddLookup(StepJoin& j, uint64_t rows, std::span<LabelTable> labels, const PlanLimits& limits,
               CommandGraph& graph) {
  LookupNodeT<K> node;
  node.index = j.index;
  node.keys = KeysOf<K>(j);
  j.values.assign(rows, 0);
  j.probes.assign(rows, 0);
  node.values = j.values;
  node.found = j.found;
  node.probes = j.probes;
  node.statistics = &j.result.statistics;
  node.gather = GatherOutputs(j, rows, labels, limits);
  graph.Add(std::move(node));
}

// A join of an index whose keys expand (kKeepAll), sized by j.capacity.
void AddExpandingJoin(StepJoin& j, std::span<LabelTable> labels, const PlanLimits& limits,
                      CommandGraph& graph) {
  switch (j.index->spec().key_type) {
    case KeyType::kUint32:
      return AddJoin<uint32_t>(j, labels, limits, graph);
    case KeyType::kUint64:
      return AddJoin<uint64_t>(j, labels, limits, graph);
    case KeyType::kColumns:
      return AddJoin<ColumnKey>(j, labels, limits, graph);
  }
}

// `j` as a lookup (an index with one row per key: no row expands) or else a join.
void AddJoinOf(StepJoin& j, uint64_t rows, std::span<LabelTable> labels,
               const PlanLimits& limits, CommandGraph& graph) {
  // An anti step that selects columns stays a join: a lookup would gather
  // (and count, and label) the payload of every found row it then drops.
  j.per_row = j.index->spec().duplicates != DuplicatePolicy::kKeepAll &&
              (j.step->kind != JoinKind::kLeftAnti || j.step->select.empty());
  if (!j.per_row) return AddExpandingJoin(j, labels, limits, graph);
  switch (j.index->spec().key_type) {
    case KeyType::kUint32:
      return AddLookup<uint32_t>(j, rows, labels, limits, graph);
    case KeyType::kUint64:
      return AddLookup<uint64_t>(j, rows, labels, limits, graph);
    case KeyType::kColumns:
      return AddLookup<ColumnKey>(j, rows, labels, limits, graph);
  }
}

// Whether input row `r` of a lookup (StepJoin::per_row) stays, by its kind.
bool LookupKeeps(const StepJoin& j, uint32_t r) {
  const bool found = j.found[r] != 0;
  const JoinKind kind = j.step->kind;
  return kind == JoinKind::kLeftOuter || (kind == JoinKind::kLeftAnti ? !found : found);
}

// A labelled gathered column as label ids: through the dictionary, each
// distinct code labelled once; else each value.
PlanColumn LabelIds(const PlanColumn& gathered, const Gathered& g) {
  PlanColumn ids;
  ids.type = ColumnType::kUint32;
  ids.rows = gathered.rows;
  ids.validity = gathered.validity;
  std::vector<uint32_t> out(gathered.rows, 0);
  if (g.dictionary != nullptr) {
    constexpr uint32_t kUnset = 0xffffffffu;
    absl::flat_hash_map<uint32_t, uint32_t> memo;
    std::vector<uint32_t> dense;
    // A dense memo when the dictionary is small beside the batch.
    if (g.dictionary->size() <= 4 * gathered.rows + 1024) dense.assign(g.dictionary->size(), kUnset);
    for (uint64_t r = 0; r < gathered.rows; ++r) {
      if (!gathered.valid(r)) continue;
      const uint32_t code = gathered.value<uint32_t>(r);
      if (code >= g.dictionary->size()) {
        // A code its dictionary cannot name (never written so): a null row.
        if (ids.validity.empty()) ids.validity.assign(BitmapBytes(gathered.rows), 0xff);
        ids.validity[r / 8] = static_cast<uint8_t>(ids.validity[r / 8] & ~(1u << (r % 8)));
        continue;
      }
      if (!dense.empty()) {
        uint32_t& id = dense[code];
        if (id == kUnset) id = g.labels->Id(g.dictionary->Value(code));
        out[r] = id;
      } else {
        auto [it, inserted] = memo.try_emplace(code, 0);
        if (inserted) it->second = g.labels->Id(g.dictionary->Value(code));
        out[r] = it->second;
      }
    }
  } else {
    for (uint64_t r = 0; r < gathered.rows; ++r) {
      if (gathered.valid(r)) out[r] = g.labels->Id(gathered.text(r));
    }
  }
  const auto* p = reinterpret_cast<const std::byte*>(out.data());
  ids.data.assign(p, p + out.size() * sizeof(uint32_t));
  return ids;
}

// The gathered columns of a join as plan columns of its `count` pairs.
std::vector<PlanColumn> GatheredColumns(StepJoin& j, uint64_t count) {
  std::vector<PlanColumn> out;
  for (Gathered& g : j.gathered) {
    PlanColumn c;
    c.type = g.type;
    c.rows = count;
    if (IsVariableWidth(g.type)) {
      g.offsets.resize(count + 1);
      c.offsets = std::move(g.offsets);
      const auto* p = reinterpret_cast<const std::byte*>(g.bytes.data());
      c.data.assign(p, p + g.bytes.size());
    } else {
      g.data.resize(g.type == ColumnType::kBool ? BitmapBytes(count) : count * ColumnWidth(g.type));
      c.data = std::move(g.data);
    }
    if (g.nulls > 0) {
      g.validity.resize(BitmapBytes(count));
      c.validity = std::move(g.validity);
    }
    out.push_back(g.labels != nullptr ? LabelIds(c, g) : std::move(c));
  }
  return out;
}

bool IsIdentity(std::span<const uint32_t> rows, uint64_t n) {
  if (rows.size() != n) return false;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i] != i) return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<PlanTable> RunLookupGroup(Backend& backend,
                                         std::span<const PlanLookupStep* const> steps,
                                         std::span<const HashIndex* const> indexes,
                                         const PlanTable& table, std::span<LabelTable> labels,
                                         const PlanLimits& limits,
                                         std::span<PlanStepStatistics* const> statistics) {
  const uint64_t rows = table.rows;
  if (rows == 0) {
    // Nothing to probe: the steps' columns, empty.
    PlanTable out = table;
    for (size_t s = 0; s < steps.size(); ++s) {
      for (size_t i = 0; i < steps[s]->select.size(); ++i) {
        const bool labelled = i < steps[s]->select_labels.size() && steps[s]->select_labels[i] >= 0;
        out.columns.push_back(NullColumn(
            labelled ? ColumnType::kUint32 : indexes[s]->payload()[steps[s]->select[i]].type, 0));
      }
      out.columns.push_back(NullColumn(ColumnType::kBool, 0));
      statistics[s]->rows_in = 0;
      statistics[s]->rows_out = 0;
    }
    for (PlanColumn& c : out.columns) c.validity.clear();
    out.names.resize(out.columns.size());
    return out;
  }
  const uint64_t table_row_bytes = (table.bytes() + rows - 1) / rows;
  std::vector<StepJoin> joins(steps.size());
  // Every step's pairs fit `rows` unless it expands (keep_all): one graph for
  // all, then a second for the steps that did not fit, sized exactly.
  CommandGraph graph;
  for (size_t s = 0; s < steps.size(); ++s) {
    StepJoin& j = joins[s];
    j.step = steps[s];
    j.index = indexes[s];
    const PlanLookupStep& step = *steps[s];
    switch (j.index->spec().key_type) {
      case KeyType::kUint32:
        j.keys32 = KeyWordsOf(table.columns[step.key_columns[0]], &j.converted32);
        break;
      case KeyType::kUint64:
        j.keys64 = KeyWordsOf(table.columns[step.key_columns[0]], &j.converted64);
        break;
      case KeyType::kColumns:
        for (uint32_t c : step.key_columns)
          j.key_columns.columns.push_back(HashColumnOf(table.columns[c]));
        break;
    }
    j.found.assign(rows, 0);
    if (s > 0) j.probes.assign(rows, 0);
    j.capacity = rows;
    GPUJOIN_RETURN_IF_ERROR(
        CheckTableBytes(rows * (table_row_bytes + 16), limits, "the lookup's rows"));
    AddJoinOf(j, rows, labels, limits, graph);
  }
  GPUJOIN_RETURN_IF_ERROR(backend.Run(graph));
  CommandGraph again;
  for (StepJoin& j : joins) {
    if (j.per_row) continue;
    if (j.result.count <= j.capacity) continue;
    GPUJOIN_RETURN_IF_ERROR(
        CheckTableBytes(j.result.count * (table_row_bytes + 16), limits, "the lookup's rows"));
    j.capacity = j.result.count;
    j.result = JoinResult{};
    AddExpandingJoin(j, labels, limits, again);
  }
  if (!again.empty()) {
    GPUJOIN_RETURN_IF_ERROR(backend.Run(again));
    for (const StepJoin& j : joins) {
      if (j.result.count > j.capacity) {
        return absl::InternalError(absl::StrCat("a lookup step's join needed ", j.result.count,
                                                " rows after a run sized for ", j.capacity));
      }
    }
  }

  // The steps one after the other: row i of the result is input row orig[i]
  // with pair pick[s][i] of each step s (pairs of an input row are
  // consecutive, in the join's order).
  std::vector<uint32_t> orig(rows);
  for (uint64_t r = 0; r < rows; ++r) orig[r] = static_cast<uint32_t>(r);
  std::vector<std::vector<uint32_t>> pick(joins.size());
  for (size_t s = 0; s < joins.size(); ++s) {
    StepJoin& j = joins[s];
    std::vector<uint32_t> next_orig;
    std::vector<std::vector<uint32_t>> next_pick(s + 1);
    uint64_t out_rows = 0;
    if (j.per_row) {
      // At most one row per row reaching it, whose positions are input rows.
      std::vector<uint8_t> keeps(orig.size());
      for (size_t i = 0; i < orig.size(); ++i) {
        keeps[i] = LookupKeeps(j, orig[i]);
        out_rows += keeps[i];
      }
      GPUJOIN_RETURN_IF_ERROR(CheckTableBytes(out_rows * (table_row_bytes + 16 * (s + 1)), limits,
                                              "the lookup's rows"));
      next_orig.resize(out_rows);
      for (auto& v : next_pick) v.resize(out_rows);
      size_t at = 0;
      for (size_t i = 0; i < orig.size(); ++i) {
        if (keeps[i] == 0) continue;
        next_orig[at] = orig[i];
        for (size_t t = 0; t < s; ++t) next_pick[t][at] = pick[t][i];
        next_pick[s][at] = orig[i];
        ++at;
      }
    } else {
      const uint64_t count = j.result.count;
      std::vector<uint64_t> first(rows + 1, 0);
      for (uint64_t p = 0; p < count; ++p) ++first[j.left[p] + 1];
      for (uint64_t r = 0; r < rows; ++r) first[r + 1] += first[r];
      for (uint32_t o : orig) out_rows += first[o + 1] - first[o];
      if (out_rows > 0xfffffffeull) {
        return absl::ResourceExhaustedError(
            absl::StrCat("a lookup step made ", out_rows, " rows, more than 2^32 - 2"));
      }
      GPUJOIN_RETURN_IF_ERROR(CheckTableBytes(out_rows * (table_row_bytes + 16 * (s + 1)), limits,
                                              "the lookup's rows"));
      if (s == 0) {
        // The first step sees the input rows in order: its pairs are the rows.
        next_orig.assign(j.left.begin(), j.left.begin() + static_cast<ptrdiff_t>(count));
        next_pick[0].resize(count);
        for (uint64_t p = 0; p < count; ++p) next_pick[0][p] = static_cast<uint32_t>(p);
      } else {
        next_orig.reserve(out_rows);
        for (auto& v : next_pick) v.reserve(out_rows);
        for (size_t i = 0; i < orig.size(); ++i) {
          const uint32_t o = orig[i];
          for (uint64_t p = first[o]; p < first[o + 1]; ++p) {
            next_orig.push_back(o);
            for (size_t t = 0; t < s; ++t) next_pick[t].push_back(pick[t][i]);
            next_pick[s].push_back(static_cast<uint32_t>(p));
          }
        }
      }
    }
    statistics[s]->rows_in = orig.size();
    statistics[s]->rows_out = out_rows;
    if (s == 0) {
      statistics[s]->query = j.result.statistics;
    } else {
      // As if the step had run alone: one probe per row reaching it.
      QueryStatistics q;
      for (const uint32_t o : orig) {
        if (j.found[o] != 0) {
          ++q.found;
        } else {
          ++q.missing;
        }
        q.total_probes += j.probes[o];
        q.max_probes = std::max<uint64_t>(q.max_probes, j.probes[o]);
      }
      statistics[s]->query = q;
    }
    orig = std::move(next_orig);
    pick = std::move(next_pick);
    pick.resize(joins.size());
  }

  PlanTable out = IsIdentity(orig, rows) ? table : TakeRows(table, orig);
  out.rows = orig.size();
  for (size_t s = 0; s < joins.size(); ++s) {
    StepJoin& j = joins[s];
    const uint64_t count = j.result.count;
    // A join's columns are per pair, a lookup's per input row: pick[s] holds those positions.
    const uint64_t positions = j.per_row ? rows : count;
    std::vector<PlanColumn> gathered = GatheredColumns(j, positions);
    const std::span<const uint32_t> take = pick[s];
    const bool identity = IsIdentity(take, positions);
    for (PlanColumn& c : gathered) {
      out.columns.push_back(identity ? std::move(c) : TakeRows(c, take));
    }
    // Found: every row of an inner or semi step, none of an anti step, the
    // input row's of a left outer step.
    PlanColumn found_column;
    found_column.type = ColumnType::kBool;
    found_column.rows = orig.size();
    const bool all = j.step->kind != JoinKind::kLeftAnti;
    found_column.data.assign(BitmapBytes(orig.size()), all ? std::byte{0xff} : std::byte{0});
    if (j.step->kind == JoinKind::kLeftOuter) {
      auto* bits = reinterpret_cast<uint8_t*>(found_column.data.data());
      for (size_t i = 0; i < orig.size(); ++i) SetBit(bits, i, j.found[orig[i]] != 0);
    }
    out.columns.push_back(std::move(found_column));
  }
  out.names.resize(out.columns.size());
  GPUJOIN_RETURN_IF_ERROR(CheckTableBytes(out.bytes(), limits, "the lookup's rows"));
  return out;
}

}  // namespace gpujoin::engine::plan_detail
