#include "common/plan/plan_aggregate.hpp"

#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/plan/plan_table.hpp"
#include "gpujoin/common/status_macros.hpp"
#include "gpujoin/engine/aggregation.hpp"

namespace gpujoin::engine::plan_detail {
namespace {

// Appends row `row` of `c` to a group key: a null flag, then the value (fixed
// width) or its length and bytes.
void AppendKey(const PlanColumn& c, uint64_t row, std::string* key) {
  if (!c.valid(row)) {
    key->push_back('\0');
    return;
  }
  key->push_back('\1');
  if (IsVariableWidth(c.type)) {
    const std::string_view t = c.text(row);
    const uint32_t n = static_cast<uint32_t>(t.size());
    key->append(reinterpret_cast<const char*>(&n), sizeof n);
    key->append(t);
  } else if (c.type == ColumnType::kBool) {
    key->push_back(BitAt(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(c.data.data()),
                                                  c.data.size()),
                         row)
                       ? '\1'
                       : '\0');
  } else {
    const size_t w = ColumnWidth(c.type);
    key->append(reinterpret_cast<const char*>(c.data.data()) + row * w, w);
  }
}

// Whether the group-by columns of `types` pack (PackKey).
bool CanPack(std::span<const uint32_t> columns, std::span<const ColumnType> types) {
  unsigned bits = 0;
  for (uint32_t c : columns) {
    if (IsVariableWidth(types[c])) return false;
    bits += types[c] == ColumnType::kBool ? 1 : 8 * static_cast<unsigned>(ColumnWidth(types[c]));
  }
  return bits <= 64;
}

// Integer sums and means are summed exactly (GroupAggregator::State::exact).
bool IsExactSum(const PlanMeasure& m, std::span<const ColumnType> types) {
  return (m.op == AggregateOp::kSum || m.op == AggregateOp::kMean) &&
         m.column != PlanMeasure::kNoColumn && IsIntegerType(types[m.column]);
}

bool IsSigned(ColumnType t) { return t == ColumnType::kInt32 || t == ColumnType::kInt64; }

}  // namespace

unsigned HostKeyBits(ColumnType type) {
  return type == ColumnType::kBool ? 1 : 8 * static_cast<unsigned>(ColumnWidth(type));
}

PackedKey PackKey(std::span<const PlanColumn* const> columns, uint64_t row,
                  std::span<const uint8_t> bits) {
  uint64_t value = 0, nulls = 0;
  unsigned shift = 0;
  for (size_t i = 0; i < columns.size(); ++i) {
    const PlanColumn& c = *columns[i];
    const unsigned width = HostKeyBits(c.type);
    const unsigned b = bits.empty() ? width : bits[i];
    uint64_t v = 0;
    if (c.valid(row)) {
      if (c.type == ColumnType::kBool) {
        v = BitAt(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(c.data.data()),
                                           c.data.size()),
                  row);
      } else if (width == 32) {
        v = c.value<uint32_t>(row);
      } else {
        v = c.value<uint64_t>(row);
      }
    }
    if (!c.valid(row) || (b < width && v >> b != 0)) {
      nulls |= uint64_t{1} << i;
    } else {
      value |= shift < 64 ? v << shift : 0;
    }
    shift += b;
  }
  return {value, nulls};
}

struct GroupAggregator::State {
  PlanAggregateStep step;
  std::vector<ColumnType> types;
  PlanLimits limits;
  /// The codes of the groups so far, by packed key (`packed`) or by the
  /// bytes of AppendKey.
  bool packed = false;
  absl::flat_hash_map<PackedKey, uint32_t> packed_codes;
  absl::flat_hash_map<std::string, uint32_t> codes;
  std::vector<ColumnBuilder> labels;
  /// The run's label tables, and per group-by column its table (-1: none).
  std::vector<LabelTable>* label_tables = nullptr;
  std::vector<int32_t> group_labels;
  std::vector<AggregationAccumulator> accumulators;
  /// Integer sums and means, per measure (empty for others): exact 128-bit
  /// sums and their value counts per group. A 64-bit column's rows are summed
  /// by the backend as two 32-bit halves, whose sums cannot overflow, so the
  /// stream's sum is exact whatever its batches' partial sums are.
  std::vector<std::vector<__int128>> exact;
  std::vector<std::vector<uint64_t>> exact_counts;
  uint32_t groups = 0;
  uint64_t rows = 0;
};

GroupAggregator::GroupAggregator(const PlanAggregateStep& step, std::vector<ColumnType> types,
                                 const PlanLimits& limits, std::vector<LabelTable>* labels,
                                 std::span<const ColumnType> label_types)
    : state_(std::make_unique<State>()) {
  State& s = *state_;
  s.step = step;
  s.types = std::move(types);
  s.limits = limits;
  s.packed = CanPack(step.group_by, s.types);
  s.label_tables = labels;
  s.group_labels.assign(step.group_by.size(), -1);
  for (size_t j = 0; j < step.group_by.size(); ++j) {
    if (j < step.group_labels.size()) s.group_labels[j] = step.group_labels[j];
    s.labels.emplace_back(s.group_labels[j] >= 0 ? label_types[s.group_labels[j]]
                                                 : s.types[step.group_by[j]]);
  }
  for (const PlanMeasure& m : step.measures) {
    const ColumnType vt =
        m.column == PlanMeasure::kNoColumn ? ColumnType::kFloat32 : s.types[m.column];
    s.accumulators.emplace_back(m.op, 0, m.op == AggregateOp::kCount ? ColumnType::kFloat32 : vt);
  }
  s.exact.resize(step.measures.size());
  s.exact_counts.resize(step.measures.size());
  if (step.group_by.empty()) {
    // One group, present even when no row arrives (SQL's global aggregate).
    s.codes.emplace(std::string(), 0);
    s.groups = 1;
    for (AggregationAccumulator& a : s.accumulators) a.Grow(1);
    for (size_t i = 0; i < step.measures.size(); ++i) {
      if (IsExactSum(step.measures[i], s.types)) {
        s.exact[i].assign(1, 0);
        s.exact_counts[i].assign(1, 0);
      }
    }
  }
}

GroupAggregator::~GroupAggregator() = default;

uint64_t GroupAggregator::groups() const { return state_->groups; }
uint64_t GroupAggregator::rows() const { return state_->rows; }

absl::Status GroupAggregator::Consume(Backend& backend, const PlanTable& table) {
  State& s = *state_;
  const uint64_t rows = table.rows;
  std::vector<uint32_t> codes(rows, 0);
  // Groups new in this batch: their keys and first rows, kept apart until the
  // batch succeeded (a failed batch adds no group).
  std::vector<std::string> new_keys;
  std::vector<PackedKey> new_packed;
  std::vector<uint64_t> new_rows;
  const auto code_rows = [&]<class Key>(absl::flat_hash_map<Key, uint32_t>& known,
                                        std::vector<Key>& fresh,
                                        const auto& key_of) -> absl::Status {
    absl::flat_hash_map<Key, uint32_t> pending;
    for (uint64_t r = 0; r < rows; ++r) {
      const Key& key = key_of(r);
      auto it = known.find(key);
      if (it != known.end()) {
        codes[r] = it->second;
        continue;
      }
      auto [p, inserted] = pending.try_emplace(key, s.groups + static_cast<uint32_t>(fresh.size()));
      if (inserted) {
        if (s.groups + fresh.size() + 1 > s.limits.max_groups) {
          return GroupLimitError(s.limits.max_groups, s.limits.groups_limit_name);
        }
        fresh.push_back(key);
        new_rows.push_back(r);
      }
      codes[r] = p->second;
    }
    return absl::OkStatus();
  };
  if (!s.step.group_by.empty()) {
    if (s.packed) {
      std::vector<const PlanColumn*> by;
      for (uint32_t c : s.step.group_by) by.push_back(&table.columns[c]);
      PackedKey key;
      GPUJOIN_RETURN_IF_ERROR(
          code_rows(s.packed_codes, new_packed, [&](uint64_t r) -> const PackedKey& {
            key = PackKey(by, r);
            return key;
          }));
    } else {
      std::string key;
      GPUJOIN_RETURN_IF_ERROR(code_rows(s.codes, new_keys, [&](uint64_t r) -> const std::string& {
        key.clear();
        for (uint32_t c : s.step.group_by) AppendKey(table.columns[c], r, &key);
        return key;
      }));
    }
  }
  const uint32_t groups = s.groups + static_cast<uint32_t>(new_rows.size());

  // One graph: an AggregateNode per measure.
  const size_t m = s.step.measures.size();
  Partials partials(m, groups);
  auto& words = partials.words;
  auto& counts = partials.counts;
  auto& overflow = partials.overflow;
  std::vector<std::vector<uint32_t>> masks(m);
  // 64-bit integer sums: the high halves' node outputs, and both halves.
  auto& high_words = partials.high_words;
  std::vector<std::vector<uint32_t>> high_counts(m);
  std::vector<std::vector<uint8_t>> high_overflow(m);
  std::vector<std::vector<uint32_t>> low_half(m), high_half(m);
  CommandGraph graph;
  if (rows > 0) {
    for (size_t i = 0; i < m; ++i) {
      const PlanMeasure& measure = s.step.measures[i];
      const AggregationAccumulator& acc = s.accumulators[i];
      AggregateNode node;
      node.op = acc.partial_op();
      node.keys = ChunkedU32{std::span<const uint32_t>(codes)};
      if (measure.column != PlanMeasure::kNoColumn) {
        const PlanColumn& c = table.columns[measure.column];
        if (!c.validity.empty()) {
          masks[i].resize(rows);
          for (uint64_t r = 0; r < rows; ++r) masks[i][r] = c.valid(r) ? 1u : 0u;
          node.mask = ChunkedU32{std::span<const uint32_t>(masks[i])};
        }
        if (measure.op != AggregateOp::kCount) node.values = ValuesOf(c);
        if (measure.op == AggregateOp::kCount && measure.finite_only &&
            (c.type == ColumnType::kFloat32 || c.type == ColumnType::kFloat64)) {
          // The rows a float sum takes: its contributing rows (the sum is unused).
          node.op = AggregateOp::kSum;
          node.values = ValuesOf(c);
        }
        if (IsExactSum(measure, s.types) && ColumnWidth(c.type) == 8) {
          // Two 32-bit halves: sum(v) = sum(high) * 2^32 + sum(low), exact.
          low_half[i].resize(rows);
          high_half[i].resize(rows);
          for (uint64_t r = 0; r < rows; ++r) {
            const uint64_t v = c.value<uint64_t>(r);
            low_half[i][r] = static_cast<uint32_t>(v);
            high_half[i][r] = static_cast<uint32_t>(v >> 32);
          }
          node.values = Chunked<uint32_t>{std::span<const uint32_t>(low_half[i])};
          AggregateNode high;
          high.op = AggregateOp::kSum;
          high.keys = node.keys;
          high.mask = node.mask;
          if (IsSigned(c.type)) {
            high.values = Chunked<int32_t>{std::span<const int32_t>(
                reinterpret_cast<const int32_t*>(high_half[i].data()), rows)};
          } else {
            high.values = Chunked<uint32_t>{std::span<const uint32_t>(high_half[i])};
          }
          high_words[i].assign(groups, 0);
          high_counts[i].assign(groups, 0);
          high_overflow[i].assign(groups, 0);
          high.output = high_words[i];
          high.contributing_rows = high_counts[i];
          high.overflow = high_overflow[i];
          graph.Add(std::move(high));
        }
      }
      words[i].assign(groups, 0);
      node.output = words[i];
      node.contributing_rows = counts[i];
      if (measure.op != AggregateOp::kCount &&
          AggregateReportsOverflow(node.op, acc.value_type())) {
        overflow[i].assign(groups, 0);
        node.overflow = overflow[i];
      }
      graph.Add(std::move(node));
    }
    if (!graph.empty()) GPUJOIN_RETURN_IF_ERROR(backend.Run(graph));
  }

  // Success: the new groups and the partials go in.
  for (size_t k = 0; k < new_rows.size(); ++k) {
    if (s.packed) {
      s.packed_codes.emplace(new_packed[k], s.groups + static_cast<uint32_t>(k));
    } else {
      s.codes.emplace(std::move(new_keys[k]), s.groups + static_cast<uint32_t>(k));
    }
    for (size_t j = 0; j < s.step.group_by.size(); ++j) {
      const PlanColumn& c = table.columns[s.step.group_by[j]];
      if (s.group_labels[j] < 0) {
        s.labels[j].AppendFrom(c, new_rows[k]);
      } else if (!c.valid(new_rows[k])) {
        s.labels[j].AppendNull();
      } else {
        s.labels[j].AppendText(
            (*s.label_tables)[s.group_labels[j]].values[c.value<uint32_t>(new_rows[k])]);
      }
    }
  }
  return MergePartials(rows, groups, partials);
}

PackedKey GroupAggregator::HostKey(const GroupKeyLayout& layout, uint64_t device_key) {
  State& s = *state_;
  uint64_t value = 0, nulls = 0;
  unsigned device_shift = 0, host_shift = 0;
  for (size_t j = 0; j < layout.bits.size(); ++j) {
    const unsigned bits = layout.bits[j];
    uint64_t v = (device_key >> device_shift) & (bits == 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1);
    bool null = ((device_key >> (layout.value_bits + j)) & 1) != 0;
    const StringDictionary* d = j < layout.dictionaries.size() ? layout.dictionaries[j] : nullptr;
    if (d != nullptr && !null) {
      // A dictionary code becomes its value's label id, a code past the
      // dictionary a null (as the host path's lookup makes them).
      if (v >= d->size()) {
        null = true;
      } else {
        v = (*s.label_tables)[s.group_labels[j]].Id(d->Value(static_cast<uint32_t>(v)));
      }
    }
    if (null) {
      nulls |= uint64_t{1} << j;
    } else {
      value |= host_shift < 64 ? v << host_shift : 0;
    }
    device_shift += bits;
    host_shift += HostKeyBits(s.types[s.step.group_by[j]]);
  }
  return {value, nulls};
}

absl::Status GroupAggregator::ConsumeDevice(DevicePlanBatch& batch,
                                            const DevicePlanInput& input) {
  State& s = *state_;
  const std::vector<uint64_t>& keys = batch.group_keys();
  // The batch's keys are distinct and in first-row order: new ones get the
  // next codes in that order, as Consume's rows do.
  std::vector<uint32_t> codes(keys.size(), 0);
  std::vector<PackedKey> fresh;
  absl::flat_hash_map<PackedKey, uint32_t> pending;
  if (!s.step.group_by.empty()) {
    for (size_t k = 0; k < keys.size(); ++k) {
      const PackedKey key = HostKey(input.layout, keys[k]);
      if (auto it = s.packed_codes.find(key); it != s.packed_codes.end()) {
        codes[k] = it->second;
        continue;
      }
      // Codes past a dictionary all become the null label: one group.
      if (auto it = pending.find(key); it != pending.end()) {
        codes[k] = it->second;
        continue;
      }
      if (s.groups + fresh.size() + 1 > s.limits.max_groups) {
        return GroupLimitError(s.limits.max_groups, s.limits.groups_limit_name);
      }
      codes[k] = s.groups + static_cast<uint32_t>(fresh.size());
      pending.emplace(key, codes[k]);
      fresh.push_back(key);
    }
  }
  const uint32_t groups = s.groups + static_cast<uint32_t>(fresh.size());
  const size_t m = s.step.measures.size();
  Partials partials(m, groups);
  std::vector<DeviceMeasureOutput> outputs(m);
  for (size_t i = 0; i < m; ++i) {
    partials.words[i].assign(groups, 0);
    outputs[i].output = partials.words[i];
    outputs[i].contributing_rows = partials.counts[i];
    if (input.measures[i].overflow) {
      partials.overflow[i].assign(groups, 0);
      outputs[i].overflow = partials.overflow[i];
    }
  }
  const uint64_t rows = batch.rows();
  if (rows > 0 && m > 0) GPUJOIN_RETURN_IF_ERROR(batch.Aggregate(codes, groups, outputs));

  // Success: the new groups go in, their labels unpacked from their keys.
  for (size_t k = 0; k < fresh.size(); ++k) {
    s.packed_codes.emplace(fresh[k], s.groups + static_cast<uint32_t>(k));
    unsigned shift = 0;
    for (size_t j = 0; j < s.step.group_by.size(); ++j) {
      const ColumnType t = s.types[s.step.group_by[j]];
      const unsigned bits = HostKeyBits(t);
      const uint64_t v =
          shift < 64 ? (fresh[k].first >> shift) & (bits == 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1)
                     : 0;
      shift += bits;
      if ((fresh[k].second >> j) & 1) {
        s.labels[j].AppendNull();
      } else if (s.group_labels[j] >= 0) {
        s.labels[j].AppendText(
            (*s.label_tables)[s.group_labels[j]].values[static_cast<uint32_t>(v)]);
      } else if (t == ColumnType::kBool) {
        s.labels[j].AppendBool(v != 0);
      } else if (ColumnWidth(t) == 4) {
        const uint32_t narrow = static_cast<uint32_t>(v);
        s.labels[j].AppendBytes(&narrow, 4);
      } else {
        s.labels[j].AppendBytes(&v, 8);
      }
    }
  }
  return MergePartials(rows, groups, partials);
}

absl::Status GroupAggregator::MergePartials(uint64_t rows, uint32_t groups,
                                            const Partials& partials) {
  State& s = *state_;
  const size_t m = s.step.measures.size();
  const auto& words = partials.words;
  const auto& counts = partials.counts;
  const auto& overflow = partials.overflow;
  const auto& high_words = partials.high_words;
  s.groups = groups;
  s.rows += rows;
  for (size_t i = 0; i < m; ++i) {
    AggregationAccumulator& acc = s.accumulators[i];
    acc.Grow(groups);
    if (IsExactSum(s.step.measures[i], s.types)) {
      s.exact[i].resize(groups, 0);
      s.exact_counts[i].resize(groups, 0);
      if (rows == 0) continue;
      const ColumnType t = s.types[s.step.measures[i].column];
      const bool halves = ColumnWidth(t) == 8;
      for (uint32_t g = 0; g < groups; ++g) {
        // A 32-bit column's sum, or the low halves' (uint32: a uint64 sum).
        __int128 part = IsSigned(t) && !halves
                            ? static_cast<__int128>(static_cast<int64_t>(words[i][g]))
                            : static_cast<__int128>(words[i][g]);
        if (halves) {
          const __int128 high = IsSigned(t)
                                    ? static_cast<__int128>(static_cast<int64_t>(high_words[i][g]))
                                    : static_cast<__int128>(high_words[i][g]);
          part += high * (static_cast<__int128>(1) << 32);
        }
        s.exact[i][g] += part;
        s.exact_counts[i][g] += counts[i][g];
      }
      continue;
    }
    if (rows == 0) continue;
    const bool is_count = s.step.measures[i].op == AggregateOp::kCount;
    GPUJOIN_RETURN_IF_ERROR(
        acc.Merge(counts[i], is_count ? std::span<const uint64_t>() : words[i], overflow[i]));
  }
  return absl::OkStatus();
}


absl::StatusOr<PlanTable> GroupAggregator::Result() const {
  const State& s = *state_;
  PlanTable out;
  out.rows = s.groups;
  for (const ColumnBuilder& b : s.labels) {
    ColumnBuilder copy = b;
    out.columns.push_back(copy.Finish());
  }
  for (size_t i = 0; i < s.step.measures.size(); ++i) {
    const PlanMeasure& measure = s.step.measures[i];
    const AggregationAccumulator& acc = s.accumulators[i];
    const std::vector<uint64_t>& n = acc.counts64();
    if (measure.op == AggregateOp::kCount) {
      ColumnBuilder b(ColumnType::kUint64);
      for (uint32_t g = 0; g < s.groups; ++g) b.AppendBytes(&n[g], 8);
      out.columns.push_back(b.Finish());
      continue;
    }
    const ColumnType input = acc.value_type();
    const ColumnType type = PlanMeasureType(measure.op, input);
    if (IsExactSum(measure, s.types)) {
      ColumnBuilder b(type);
      const bool is_signed = IsSigned(input);
      for (uint32_t g = 0; g < s.groups; ++g) {
        const __int128 v = s.exact[i][g];
        const uint64_t count = s.exact_counts[i][g];
        if (count == 0) {
          b.AppendNull();
        } else if (measure.op == AggregateOp::kMean) {
          const double mean = static_cast<double>(v) / static_cast<double>(count);
          b.AppendBytes(&mean, 8);
        } else if (is_signed ? (v < std::numeric_limits<int64_t>::min() ||
                                v > std::numeric_limits<int64_t>::max())
                             : (v < 0 ||
                                v > static_cast<__int128>(std::numeric_limits<uint64_t>::max()))) {
          const std::string name = i < s.step.measure_names.size()
                                       ? absl::StrCat("measure \"", s.step.measure_names[i], "\"")
                                       : absl::StrCat("measure ", i);
          return absl::OutOfRangeError(absl::StrCat(
              "the aggregate's ", name, " (the sum of an ", std::string(ColumnTypeName(input)),
              " column) leaves the 64-bit range in group ", g, ": its exact sum does not fit ",
              std::string(ColumnTypeName(type))));
        } else {
          const uint64_t bits = static_cast<uint64_t>(v);
          b.AppendBytes(&bits, 8);
        }
      }
      out.columns.push_back(b.Finish());
      continue;
    }
    // Floats, and integer min/max (integer sums and means are exact above).
    const std::vector<uint64_t> w = acc.Words();
    ColumnBuilder b(type);
    const size_t width = ColumnWidth(type);
    for (uint32_t g = 0; g < s.groups; ++g) {
      if (n[g] == 0) {
        b.AppendNull();
      } else if (width == 4) {
        const uint32_t low = static_cast<uint32_t>(w[g]);
        b.AppendBytes(&low, 4);
      } else {
        b.AppendBytes(&w[g], 8);
      }
    }
    out.columns.push_back(b.Finish());
  }
  out.names.resize(out.columns.size());
  return out;
}

}  // namespace gpujoin::engine::plan_detail
